"""Helpers both linalg files use (``linalg_triangular.py``, ``linalg_orthogonal.py``):
small lax compositions on the last two axes (transpose, conjugate, masks, identity,
diagonal), argument checks, the batching rule of primitives that take leading batch
dimensions, and the pieces of the LAPACK-backed lowerings. ``tril``, ``triu`` and
``symmetrize`` are public (``xform.lax.linalg`` re-exports them).
"""
import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.interpreters import batching, mlir
from xform.lax import elementwise as ew
from xform.lax import shapes
from xform.lax._prim import check_dtype
from xform.lax.complex import conj, real
from xform.lax.dot import dot_general
from xform.lax.reductions import reduce_sum

_inexact = tuple(np.dtype(d) for d in (np.float32, np.float64, np.complex64, np.complex128))
_floating = _inexact[:2]


# ---- small matrix helpers (lax compositions) ----

def _T(x):
    """Swap the last two axes."""
    return shapes.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _is_complex(x):
    return dtypes.issubdtype(x.dtype, np.complexfloating)


def _conj(x):
    if _is_complex(x):
        return conj(x)
    return x


def _H(x):
    """Conjugate transpose of the last two axes."""
    return _conj(_T(x))


def _real(x):
    if _is_complex(x):
        return real(x)
    return x


def _matmul(a, b):
    """Batched matrix product over equal leading (batch) dimensions."""
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)))


def _tri_mask(shape, k, lower):
    rows = shapes.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return ew.ge(ew.add(rows, np.int32(k)), cols) if lower else \
        ew.le(ew.add(rows, np.int32(k)), cols)


def tril(x, k=0):
    """Entries on and below the k-th diagonal of the last two axes; zeros above."""
    return ew.select_n(_tri_mask(x.shape, k, True), shapes.full_like(x, 0), x)


def triu(x, k=0):
    """Entries on and above the k-th diagonal of the last two axes; zeros below."""
    return ew.select_n(_tri_mask(x.shape, k, False), shapes.full_like(x, 0), x)


def _eye_like(x, n=None, m=None):
    """Identity of x's dtype, shaped (..., n, m) with x's batch dimensions."""
    n = x.shape[-1] if n is None else n
    m = n if m is None else m
    shape = (*x.shape[:-2], n, m)
    rows = shapes.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = shapes.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return ew.convert_element_type(ew.eq(rows, cols), x.dtype)


def _diag(x):
    """Diagonal of the last two axes, as a vector (...,k)."""
    k = min(x.shape[-2:])
    sq = shapes.slice(x, (0,) * x.ndim, (*x.shape[:-2], k, k))
    return reduce_sum(ew.mul(sq, _eye_like(sq)), (x.ndim - 1,))


def _nan_unless(ok, x):
    """x where LAPACK reported success (``ok`` per batch element), NaN elsewhere."""
    ok = shapes.broadcast_in_dim(ok, x.shape, tuple(range(ok.ndim)))
    return ew.select_n(ok, shapes.full_like(x, np.nan), x)


def _check_matrix(name, x, square=True, dtype=True):
    if x.ndim < 2:
        raise ValueError(f"{name}: argument must have at least 2 dimensions, got shape "
                         f"{x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: argument must be a batch of square matrices, got shape "
                         f"{x.shape}")
    if dtype:
        check_dtype(name, x.dtype, _inexact)


def _check_operands(name, avals, ranks, kinds, *, batched=True):
    """JAX's checks of a linalg primitive's operands (``linalg_shape_rule`` and the dtype
    rule, with its messages): operand i has rank ``ranks[i]`` plus batch dimensions
    (exactly ``ranks[i]`` unless ``batched``), as many on every operand; its dtype is a
    subtype of ``kinds[i]`` (np.floating, np.inexact...); all dtypes equal."""
    for i, (a, rank) in enumerate(zip(avals, ranks)):
        if a.ndim < rank or (not batched and a.ndim != rank):
            what = "at least" if batched else "of exactly"
            raise TypeError(f"Input {i} to {name} must have {'rank' if batched else 'a rank'}"
                            f" {what} {rank}, but got shape={a.shape}")
    counts = [a.ndim - r for a, r in zip(avals, ranks)]
    if len(set(counts)) > 1:
        raise TypeError(f"All inputs to {name} must have the same number of batch "
                        f"dimensions, but got {counts} batch dimensions for the inputs.")
    for i, (a, kind) in enumerate(zip(avals, kinds)):
        if not dtypes.issubdtype(a.dtype, kind):
            names = ", ".join(k.__name__ for k in ((np.floating, np.complexfloating)
                                                   if kind is np.inexact else (kind,)))
            raise TypeError(f"{name} does not accept dtype {np.dtype(a.dtype).name} at "
                            f"position {i}. Accepted dtypes at position {i} are subtypes "
                            f"of {names}.")
    if len({a.dtype for a in avals}) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        + ", ".join(np.dtype(a.dtype).name for a in avals) + ".")


def _batch_to_front(prim):
    """Batching for primitives that accept leading batch dimensions on all operands."""
    def rule(vals, dims, **params):
        size = batching.axis_size_of(vals, dims)
        vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
        out = prim.bind(*vals, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batching.primitive_batchers[prim] = rule



def symmetrize(x):
    """(x + x^H) / 2: the symmetric (Hermitian) part, as factorizations assume."""
    return ew.div(ew.add(x, _H(x)), ew.convert_element_type(np.array(2), x.dtype))



# ---- LAPACK-backed factorizations: shared pieces ----

def _in_lowering(ctx, fun, args, avals_in, **params):
    """Emit ``fun`` (lax ops) inline inside a lowering rule, traced at ``avals_in``."""
    sub = mlir.LoweringRuleContext(ctx.module_ctx, None, list(avals_in), None)
    return mlir.lower_fun(fun)(sub, *args, **params)


def _info_aval(x):
    return ShapedArray(x.shape[:-2], np.dtype(np.int32))


def _nan_on_failure(info, *xs):
    ok = ew.eq(info, np.int32(0))
    return [_nan_unless(ok, x) if dtypes.issubdtype(x.dtype, np.inexact) else x
            for x in xs]
