"""Serializing custom pytree nodes: a name and auxdata (de)serializers per node type,
as ``jax.export.register_pytree_node_serialization``."""
import json

from xform.core import pytree
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
    if from_children is None:  # the node type's registered unflatten (pytree's table)
        node = pytree._dispatch.get(nodetype)
        if node is None or node.unflatten is None:
            raise ValueError(f"{nodetype} is not registered as a pytree node: register it "
                             "with xform.tree_util.register_pytree_node first")
        from_children = node.unflatten
    _serialization.serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
    _serialization.deserialization_registry[serialized_name] = (
        nodetype, deserialize_auxdata, from_children)
    return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name):
    """``register_pytree_node_serialization`` for a namedtuple class (its fields are
    the auxdata)."""
    if not (issubclass(nodetype, tuple) and hasattr(nodetype, "_fields")):
        raise ValueError("Use `jax.export.register_pytree_node_serialization` for types "
                         "other than `collections.namedtuple`.")

    def ser(aux):  # the field names, as JAX writes them
        return json.dumps(nodetype._fields).encode("utf-8")

    def deser(data):
        return json.loads(data.decode("utf-8"))

    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name, serialize_auxdata=ser,
        deserialize_auxdata=deser,
        from_children=lambda keys, children: nodetype(**dict(zip(keys, children))))
