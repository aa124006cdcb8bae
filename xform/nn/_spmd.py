"""Logical axis names (Flax's ``linen/spmd.py`` and ``core/spmd.py``): a model names its
dimensions ('batch', 'embed', 'mlp'); a rules table, set with ``logical_axis_rules``,
maps those names onto mesh axes, so one model runs data-, tensor- or FSDP-parallel by
changing the table, not the model.

Rules are ``(logical_name, mesh_axes)`` pairs in priority order: a dimension takes the
first rule naming it whose mesh axes are not already used by another dimension of the
same array; a name with no usable rule is replicated (None).
"""
import collections
import contextlib
import dataclasses
import enum
import functools
import threading

from xform import lax
from xform.core.tree_util import register_dataclass, tree_leaves, tree_map
from xform.nn import _meta as meta
from xform.core.sharding import UNCONSTRAINED, NamedSharding, PartitionSpec

__all__ = ["LogicallyPartitioned", "RulesFallback", "get_logical_axis_rules",
           "logical_axis_rules", "logical_to_mesh", "logical_to_mesh_axes",
           "logical_to_mesh_sharding", "set_logical_axis_rules", "with_logical_constraint",
           "with_logical_partitioning"]


class _Rules(threading.local):
    rules = ()


_rules = _Rules()


def set_logical_axis_rules(rules):
    """Sets the logical-to-mesh axis rules for this thread."""
    _rules.rules = rules


def get_logical_axis_rules():
    """The logical-to-mesh axis rules in force (``()`` when none are set)."""
    return _rules.rules


@contextlib.contextmanager
def logical_axis_rules(rules):
    """Context manager setting the logical-to-mesh axis rules, restored on exit.

    >>> import xform.nn as nn
    >>> with nn.logical_axis_rules([('batch', 'data'), ('mlp', 'model')]):
    ...     nn.logical_to_mesh_axes(('batch', 'embed', 'mlp'))
    P('data', None, 'model')
    """
    old = _rules.rules
    _rules.rules = rules
    try:
        yield
    finally:
        _rules.rules = old


class _Unassigned:
    """A logical name that no rule has placed yet (falsy, like None)."""

    def __repr__(self):
        return "UnassignedAxis"

    def __bool__(self):
        return False


_UNASSIGNED = _Unassigned()


def _assign(names, rules=None):
    """Mesh axes per dimension of ``names``; unplaced logical names stay _UNASSIGNED."""
    if names is None:
        return None
    if rules is None:
        rules = get_logical_axis_rules()
    counts = collections.Counter(names)
    dups = tuple(k for k, v in counts.items() if v > 1 and isinstance(k, str))
    if dups:
        raise ValueError(f"Unsupported: Dimensions {dups} occur more than once in array "
                         f"names.")
    if not isinstance(rules, (tuple, list)):
        raise ValueError(f"Unknown axis rule specification type: logical axis rules must "
                         f"be a sequence of (logical_name, mesh_axes) pairs, got "
                         f"{type(rules).__name__}")
    out = [_UNASSIGNED if isinstance(n, str) else n for n in names]
    for logical, mesh_axes in rules:
        if logical in names:
            pos = list(names).index(logical)
            used = set(tree_leaves(out)) - {None, UNCONSTRAINED}
            new = set(tree_leaves(mesh_axes)) - {None, UNCONSTRAINED}
            if out[pos] is _UNASSIGNED and not used & new:
                out[pos] = mesh_axes
    return out


def logical_to_mesh_axes(array_dim_names, rules=None):
    """The ``PartitionSpec`` of an array whose dimensions have logical names.

    Args:
      array_dim_names: one logical name (or None) per dimension, or None.
      rules: ``(logical_name, mesh_axes)`` pairs; default: the rules in force.
    """
    out = _assign(array_dim_names, rules)
    if out is None:
        return None
    return PartitionSpec(*(None if x is _UNASSIGNED else x for x in out))


def _is_spec(x):
    return isinstance(x, PartitionSpec)


def logical_to_mesh(tree, rules=None):
    """``logical_to_mesh_axes`` over a pytree of logical ``PartitionSpec`` s."""
    return tree_map(lambda x: logical_to_mesh_axes(x, rules), tree, is_leaf=_is_spec)


def logical_to_mesh_sharding(tree, mesh, rules=None):
    """A pytree of logical ``PartitionSpec`` s as ``NamedSharding`` s on ``mesh``."""
    return tree_map(lambda x: NamedSharding(mesh, x), logical_to_mesh(tree, rules),
                    is_leaf=_is_spec)


class RulesFallback(enum.Enum):
    """What ``with_logical_constraint`` does for a logical name no rule places."""
    AXIS_IS_UNSHARDED = "axis_is_unsharded"
    RAISE_ERROR = "raise_error"
    NO_CONSTRAINT = "no_constraint"


def _constrain(x, spec, mesh):
    """``lax.with_sharding_constraint``, or ``x`` as it is with no mesh to shard over."""
    if mesh is None and not meta.global_mesh_defined():
        return x
    if mesh is not None and spec is not None:
        return lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
    return lax.with_sharding_constraint(x, spec)


def _constrain_one(names, x, fallback, rules, mesh):
    axes = _assign(names, rules)
    if axes is None:
        return _constrain(x, None, mesh)
    if any(a is _UNASSIGNED for a in axes):
        if fallback == RulesFallback.RAISE_ERROR:
            raise ValueError(f"Axis names {names} did not match a rule")
        if fallback == RulesFallback.NO_CONSTRAINT:
            return x
    return _constrain(x, PartitionSpec(*(None if a is _UNASSIGNED else a for a in axes)),
                      mesh)


def _is_logical_spec(x):
    return x is None or isinstance(x, tuple) and all(
        isinstance(e, str) or e is None or e is UNCONSTRAINED for e in x)


def with_logical_constraint(x, logical_axis_resources, rules=None, mesh=None,
                            fallback=RulesFallback.AXIS_IS_UNSHARDED):
    """``lax.with_sharding_constraint`` with logical names, mapped by ``rules``.

    A no-op without rules, or without a mesh (neither ``mesh`` nor a global one).
    """
    if rules is None:
        rules = get_logical_axis_rules()
    if not rules or logical_axis_resources is None:
        return x
    return tree_map(functools.partial(_constrain_one, fallback=fallback, rules=rules,
                                      mesh=mesh),
                    logical_axis_resources, x, is_leaf=_is_logical_spec)


@dataclasses.dataclass(frozen=True, eq=False)
class LogicallyPartitioned(meta.Partitioned):
    """``Partitioned`` with logical names: ``unbox`` maps them through ``rules`` (or
    the rules in force) before constraining; ``nn.get_partition_spec`` gives the
    logical spec, ``nn.logical_to_mesh_sharding`` the mesh one."""
    rules: tuple = None

    def __eq__(self, other):   # (as Flax: the value only, identity first)
        if self is other:
            return True
        if type(other) is type(self):
            return (self.value,) == (other.value,)
        return NotImplemented

    __hash__ = None

    def unbox(self, apply_constraint=True):
        if apply_constraint and (self.mesh is not None or meta.global_mesh_defined()):
            return with_logical_constraint(self.value, self.get_partition_spec(),
                                           rules=self.rules, mesh=self.mesh)
        return self.value


register_dataclass(LogicallyPartitioned, ["value"], ["names", "mesh", "rules"])


def with_logical_partitioning(fn, names, mesh=None, rules=None):
    """Wraps initializer ``fn`` so its output is boxed as ``LogicallyPartitioned``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> init = nn.with_logical_partitioning(nn.initializers.ones, ('embed', 'mlp'))
    >>> v = nn.Dense(4, kernel_init=init).init(xform.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> nn.logical_to_mesh(nn.get_partition_spec(v), [('mlp', 'model')])['params']
    {'bias': P(), 'kernel': P(None, 'model')}
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return LogicallyPartitioned(fn(*args, **kwargs), names, mesh=mesh, rules=rules)
    return wrapper
