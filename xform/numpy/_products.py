"""Products: dot, matmul, vdot, inner, outer, tensordot, each one ``lax.dot_general``
after JAX's dtype promotion."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy._shape import ravel
from xform.numpy._ufuncs import multiply
from xform.core.sharding_types import abstract_sharding, result_resharded
from xform.lax.sharding_constraint import reshard


def _operands(name, a, b, preferred_element_type):
    """The operands as dot_general takes them: promoted to one dtype, except with a
    ``preferred_element_type``, where JAX passes mixed dtypes on as they are (a
    float8_e4m3fn x float8_e5m2 product, which promotion refuses)."""
    if preferred_element_type is None:
        return _util.promote_dtypes(name, a, b)
    _util.check_arraylike(name, a, b)
    return _util.asarray(a, name), _util.asarray(b, name, 1)


def _general(a, b, contract, batch=((), ()), precision=None, preferred_element_type=None):
    """lax.dot_general (which takes bool operands itself: an OR of ANDs, or a count with
    a numeric ``preferred_element_type``, as JAX's)."""
    return lax.dot_general(a, b, (contract, batch), precision, preferred_element_type)


def _check_contract(name, a, b, ca, cb):
    sa, sb = a.aval.shape, b.aval.shape
    if [sa[i] for i in ca] != [sb[i] for i in cb]:
        raise TypeError(f"{name}: contracting dimensions {tuple(ca)} of lhs shape {sa} and "
                        f"{tuple(cb)} of rhs shape {sb} must have equal sizes.")


@composite(static=("axes", "precision", "preferred_element_type"), as_is=("out_sharding",))
def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Like numpy.dot: contracts ``a``'s last axis with ``b``'s second-to-last (or only)
    axis; the result has ``a``'s free axes, then ``b``'s. ``out_sharding`` (a
    NamedSharding, or a PartitionSpec under a mesh) lays the result out so (its type, in
    explicit mode)."""
    if out_sharding is not None:  # (an ambiguous contraction's type is the reshard's)
        abstract_sharding(out_sharding, "dot_general")  # (JAX's error for Auto axes)
        with result_resharded():
            out = dot(a, b, precision=precision, preferred_element_type=preferred_element_type)
        return reshard(out, out_sharding)
    a, b = _operands("dot", a, b, preferred_element_type)
    if not a.aval.ndim or not b.aval.ndim:
        out = multiply(a, b)
    else:
        ca = (a.aval.ndim - 1,)
        cb = (0,) if b.aval.ndim == 1 else (b.aval.ndim - 2,)
        _check_contract("dot", a, b, ca, cb)
        out = _general(a, b, (ca, cb), precision=precision,
                       preferred_element_type=preferred_element_type)
    return out


@composite(static=("axes", "precision", "preferred_element_type"), as_is=("out_sharding",))
def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Like numpy.matmul: batched over broadcast leading dimensions; 1-D operands are
    treated as vectors (their dimension is removed from the result). ``out_sharding``
    as in :func:`dot`."""
    if out_sharding is None:
        return _matmul(a, b, precision, preferred_element_type)
    abstract_sharding(out_sharding, "dot_general")
    with result_resharded():
        out = _matmul(a, b, precision, preferred_element_type)
    return reshard(out, out_sharding)


def _matmul(a, b, precision, preferred_element_type):
    """:func:`matmul` without its sharding constraint."""
    a, b = _operands("matmul", a, b, preferred_element_type)
    sa, sb = a.aval.shape, b.aval.shape
    for i, s in enumerate((sa, sb)):
        if not s:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it "
                             "has ndim 0")
    ca, cb = len(sa) - 1, 0 if len(sb) == 1 else len(sb) - 2
    _check_contract("matmul", a, b, (ca,), (cb,))
    kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    a_batch, b_batch = sa[:-2], sb[:-2]
    if not a_batch or not b_batch:
        # One side has no batch dimensions: a plain contraction, no broadcasting.
        out = _general(a, b, ((ca,), (cb,)), **kw)
        if len(sa) == 2 and b_batch:  # (n, B..., m) -> (B..., n, m)
            nb = len(b_batch)
            out = lax.transpose(out, tuple(range(1, nb + 1)) + (0, nb + 1))
        return out
    batch = _util.broadcast_shapes(a_batch, b_batch, name="matmul")
    a = _util.broadcast_to(a, batch + sa[-2:])
    b = _util.broadcast_to(b, batch + sb[-2:])
    nb = len(batch)
    dims = tuple(range(nb))
    return _general(a, b, ((nb + 1,), (nb,)), (dims, dims), **kw)


@composite(static=("axes", "precision", "preferred_element_type"))
def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Like numpy.vdot: the dot product of the flattened arrays, ``a`` conjugated."""
    a, b = _util.promote_dtypes("vdot", a, b)
    if dtypes.is_complex(a.aval.dtype):
        a = lax.conj(a)
    return dot(ravel(a), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


@composite(static=("axes", "precision", "preferred_element_type"))
def inner(a, b, *, precision=None, preferred_element_type=None):
    """Like numpy.inner: contracts the last axes of ``a`` and ``b``."""
    a, b = _util.promote_dtypes("inner", a, b)
    if not a.aval.ndim or not b.aval.ndim:
        return multiply(a, b)
    ca, cb = (a.aval.ndim - 1,), (b.aval.ndim - 1,)
    _check_contract("inner", a, b, ca, cb)
    return _general(a, b, (ca, cb), precision=precision,
                    preferred_element_type=preferred_element_type)


@composite(static=("axes", "precision", "preferred_element_type"))
def outer(a, b, out=None):
    """Like numpy.outer (inputs are flattened)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
    a, b = _util.promote_dtypes("outer", a, b)
    a, b = ravel(a), ravel(b)
    return multiply(lax.reshape(a, (a.aval.size, 1)), lax.reshape(b, (1, b.aval.size)))


@composite(static=("axes", "precision", "preferred_element_type"))
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Like numpy.tensordot: ``axes`` is an int N (last N of ``a`` with first N of
    ``b``) or a pair of axis sequences."""
    a, b = _operands("tensordot", a, b, preferred_element_type)
    na, nb = a.aval.ndim, b.aval.ndim
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if not 0 <= n <= min(na, nb):
            raise TypeError(f"tensordot: axes={n} must be between 0 and the smaller rank "
                            f"({na} and {nb})")
        ca, cb = tuple(range(na - n, na)), tuple(range(n))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: axes must be an int or a pair of sequences, got "
                            f"{axes!r}") from None
        ax_a = ax_a if isinstance(ax_a, (tuple, list)) else (ax_a,)
        ax_b = ax_b if isinstance(ax_b, (tuple, list)) else (ax_b,)
        if len(ax_a) != len(ax_b):
            raise TypeError(f"tensordot: axes sequences must have equal length, got "
                            f"{axes!r}")
        ca = tuple(_util.canonicalize_axis(x, na) for x in ax_a)
        cb = tuple(_util.canonicalize_axis(x, nb) for x in ax_b)
    _check_contract("tensordot", a, b, ca, cb)
    return _general(a, b, (ca, cb), precision=precision,
                    preferred_element_type=preferred_element_type)
