"""Serializing custom pytree nodes: a name and auxdata (de)serializers per node type,
as ``jax.export.register_pytree_node_serialization``."""
import json

from xform.core import tree_util
from xform.export import _serialization


def register_pytree_node_serialization(nodetype, *, serialized_name, serialize_auxdata,
                                       deserialize_auxdata, from_children=None):
    """Let ``Exported.serialize`` write pytrees with ``nodetype`` nodes (registered
    with ``tree_util``) under ``serialized_name``; returns ``nodetype``."""
    if nodetype in _serialization.serialization_registry:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. "
                         "Previous registration was with serialized_name "
                         f"`{_serialization.serialization_registry[nodetype][0]}`.")
    if serialized_name in _serialization.deserialization_registry:
        raise ValueError("Duplicate serialization registration for "
                         f"serialized_name `{serialized_name}`.")
    if from_children is None:
        def from_children(aux, children):
            leaves, tree = tree_util.tree_flatten(nodetype.__new__(nodetype))
            return tree_util.tree_unflatten(tree, children)
    _serialization.serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
    _serialization.deserialization_registry[serialized_name] = (
        nodetype, deserialize_auxdata, from_children)
    return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name):
    """``register_pytree_node_serialization`` for a namedtuple class (its fields are
    the auxdata)."""
    def ser(aux):
        return json.dumps(list(nodetype._fields)).encode()

    def deser(data):
        return tuple(json.loads(data.decode()))

    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name, serialize_auxdata=ser,
        deserialize_auxdata=deser,
        from_children=lambda aux, children: nodetype(*children))
