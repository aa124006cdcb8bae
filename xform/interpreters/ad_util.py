"""Structural values and ops every interpreter needs (as JAX's ``ad_util``).

The symbolic ``Zero`` tangent/cotangent, zeros of an aval, ``add_any`` of tangents, and
the few array ops the mechanism itself applies (``broadcast_in_dim``, ``transpose``,
``reduce_sum`` to move or create batch axes and sum cotangents). The ops are lax
primitives, and lax sits above the interpreters, so lax registers them here when it is
imported (``register_ops``, at the end of ``xform/lax/__init__.py``): dependencies point
one way, core <- interpreters <- lax, with no lazy imports of lax below it.
"""
import numpy as np

from xform.core import dtypes
from xform.core.trace import get_aval

_ops = {}


def register_ops(**fns):
    """Called once by ``xform.lax``: ``full``, ``add_any``, ``broadcast_in_dim``,
    ``transpose``, ``reduce_sum`` with lax's signatures."""
    _ops.update(fns)


def _op(name):
    fn = _ops.get(name)
    if fn is None:
        raise RuntimeError(f"xform.interpreters.ad_util: '{name}' is registered by xform.lax;"
                           " import xform (or xform.lax) first")
    return fn


class Zero:
    """A symbolic zero tangent/cotangent of a given aval (never materialized by rules)."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    @staticmethod
    def from_primal_value(x):
        return Zero(get_aval(x).to_tangent_aval())

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def zeros_like_aval(aval):
    """Zeros of ``aval``, weakly typed if it is (as JAX's: a weak primal's zero tangent)."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    return _op("full")(aval.shape, 0, aval.dtype, _weak_type=aval.weak_type)


def instantiate_zeros(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(x, y):
    """``x + y`` for tangents/cotangents, either of which may be a symbolic ``Zero``."""
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return _op("add_any")(x, y)


def broadcast_in_dim(x, shape, broadcast_dimensions, out_sharding=None):
    return _op("broadcast_in_dim")(x, shape, broadcast_dimensions, out_sharding=out_sharding)


def transpose(x, permutation):
    return _op("transpose")(x, permutation)


def reduce_sum(x, axes):
    return _op("reduce_sum")(x, axes)
