"""``xform.numpy.linalg``: NumPy's linear algebra with JAX's semantics, composed
from the ``xform.lax.linalg`` factorizations (so every function differentiates
through their JVP rules, batches over leading dimensions, and jits).
"""
import collections
import operator

import numpy as np

import xform.numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform import lax
from xform.lax import linalg as lax_linalg
from xform.numpy import _util
from xform.numpy._linalg_aliases import (  # noqa: F401  (multi_dot, array-API aliases)
    cross, diagonal, matmul, matrix_transpose, multi_dot, outer, tensordot, trace, vecdot)
from xform.numpy._reductions import _promote_integer_dtype
from xform.transforms.custom_derivatives import custom_jvp

EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])


def _inexact(name, *xs):
    """Arrays promoted to a common inexact dtype (ints become the default float)."""
    xs = [_util.asarray(x, name, i) for i, x in enumerate(xs)]
    dt = dtypes.to_inexact_dtype(_util.result_type(*xs)[0])
    return [_util.convert(x, dt) for x in xs]


def _square(name, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: argument must be a (batch of) square matrices, got "
                         f"shape {a.shape}")


def _batch_broadcast(a, b, b_core):
    """Broadcast the batch dimensions of a (..., n, n) and b (..., *b_core)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:b.ndim - b_core])
    a = jnp.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = jnp.broadcast_to(b, (*batch, *b.shape[b.ndim - b_core:]))
    return a, b


@composite(static=("upper", "symmetrize_input"))
def cholesky(a, *, upper=False, symmetrize_input=True):
    """Cholesky factor of a Hermitian positive-definite matrix (lower, or upper)."""
    (a,) = _inexact("cholesky", a)
    _square("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return jnp.conj(jnp.matrix_transpose(L)) if upper else L


def _permute_rows(b, perm):
    """``b[..., perm, :]``: one gather of rows, as JAX's lu_solve (a one-hot permutation
    matmul made jit(solve) of a 16x16 system 2x JAX's)."""
    if not b.size:  # (no rows to move; a unit gather slice cannot span a zero-size dim)
        return b
    nb, batch = b.ndim - 2, tuple(range(b.ndim - 2))
    dn = lax.GatherDimensionNumbers(offset_dims=(nb + 1,), collapsed_slice_dims=(nb,),
                                    start_index_map=(nb,), operand_batching_dims=batch,
                                    start_indices_batching_dims=batch)
    return lax.gather(b, perm[..., None], dn, (1,) * (nb + 1) + (b.shape[-1],),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


@composite
def solve(a, b):
    """Solve ``a @ x = b``; ``b`` is a vector (ndim 1) or a (batch of) matrices.

    >>> solve(xform.numpy.array([[2., 0.], [0., 4.]]), xform.numpy.array([2., 2.]))
    Array([1. , 0.5], dtype=float32)
    """
    a, b = _inexact("solve", a, b)
    _square("solve", a)
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: a {a.shape} and b {b.shape} have incompatible shapes")
    a, b = _batch_broadcast(a, b, 2)
    # As JAX's: a custom_linear_solve, so derivatives reuse the factorization (two more
    # triangular solves) instead of differentiating lu (jit(grad) of a 64x64 solve:
    # 1.7x JAX's).
    lu_, _, perm = lax_linalg.lu(lax.stop_gradient(a))
    x = lax.custom_linear_solve(
        lambda x: jnp.matmul(a, x), b,
        solve=lambda _, x: _permute_and_solve(lu_, perm, x),
        transpose_solve=lambda _, x: _solve_transposed(lu_, perm, x))
    return x[..., 0] if vector else x


def _permute_and_solve(lu_, perm, b):
    b = _permute_rows(b, perm)
    y = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu_, y, left_side=True, lower=False)


def _solve_transposed(lu_, perm, b, conjugate=False):
    """``a^T x = b`` (``a^H x = b`` if ``conjugate``) from ``a``'s LU factors (JAX's
    ``lu_solve(trans=1 or 2)``)."""
    y = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                                    conjugate_a=conjugate)
    y = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                                    conjugate_a=conjugate, unit_diagonal=True)
    iota = lax.broadcasted_iota(np.int32, perm.shape, perm.ndim - 1)
    return _permute_rows(y, lax.sort_key_val(perm, iota, dimension=perm.ndim - 1)[1])


@composite
def inv(a):
    """Inverse of a (batch of) square matrices."""
    (a,) = _inexact("inv", a)
    _square("inv", a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    lu_, _, perm = lax_linalg.lu(a)
    return _permute_and_solve(lu_, perm, eye)


def _lu_sign_and_diag(a):
    lu_, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu_, axis1=-2, axis2=-1)
    swaps = jnp.sum(pivots != jnp.arange(a.shape[-1], dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return parity, diag


@composite
def det(a):
    """Determinant of a (batch of) square matrices (via LU)."""
    (a,) = _inexact("det", a)
    _square("det", a)
    if a.shape[-1] == 1:   # closed forms, as JAX's: exact (and smooth) at singular a
        return a[..., 0, 0]
    if a.shape[-1] == 2:
        return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]
    if a.shape[-1] == 3:
        return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2]
                + a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0]
                + a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1]
                - a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0]
                - a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1]
                - a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])
    return _det(a)


@custom_jvp
def _det(a):
    parity, diag = _lu_sign_and_diag(a)
    return parity * jnp.prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals, tangents):
    # d det = tr(adj(a) da), with the adjugate from _cofactor_solve: finite where a is
    # singular (differentiating through lu divides by its zero pivot), as JAX's.
    (a,), (t,) = primals, tangents
    y, z = _cofactor_solve(a, t)
    return y, jnp.trace(z, axis1=-2, axis2=-1)


def _cofactor_solve(a, b):
    """``(det a, adj(a) @ b)`` from one LU (JAX's algorithm): the last pivot is
    replaced by ``1 / det(u[:-1, :-1])``, so the solve never divides by a zero there; a
    rank below n - 1 (another zero pivot) gives an adjugate of zeros."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu_, pivots, perm = lax_linalg.lu(a)
    batch = tuple(np.broadcast_shapes(lu_.shape[:-2], b.shape[:-2]))
    x = jnp.broadcast_to(b, batch + b.shape[-2:])
    lu_ = jnp.broadcast_to(lu_, batch + (n, n))
    perm = jnp.broadcast_to(perm, batch + (n,))
    sign = jnp.where(jnp.sum(pivots != jnp.arange(n, dtype=pivots.dtype), axis=-1) % 2 == 1,
                     -1, 1).astype(a.dtype)
    partial = jnp.cumprod(jnp.diagonal(lu_, axis1=-2, axis2=-1), axis=-1) * sign[..., None]
    lu_ = lu_.at[..., -1, -1].set(1 / partial[..., -2])
    probe = lax_linalg.triangular_solve(lu_, jnp.ones(batch + (n, 1), a.dtype),
                                        left_side=True, lower=False)
    low_rank = jnp.any(~jnp.isfinite(probe), axis=(-2, -1))[..., None, None]
    x = jnp.where(low_rank, 0, x)
    x = jnp.take_along_axis(x, perm[..., None], axis=-2)
    x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate([x[..., :-1, :] * partial[..., -1, None, None], x[..., -1:, :]], -2)
    x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=False)
    return partial[..., -1], jnp.where(low_rank, 0, x)


@composite(static=("method",))
def slogdet(a, *, method=None):
    """``(sign, log|det|)`` of a (batch of) square matrices, stable for large sizes. As
    JAX's: closed forms for 1x1 and 2x2, else LU (``method="lu"``) or, real only,
    Householder QR (``"qr"``); sign 0 and -inf at an exact zero pivot; the JVP is
    ``trace(a^-1 da)`` (sign's is 0 for real input)."""
    (a,) = _inexact("slogdet", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to slogdet() must have shape [..., n, n], got {a.shape}")
    if method is None or method == "lu":
        return SlogdetResult(*(_slogdet_small(a) if a.shape[-1] in (1, 2) else
                               _slogdet_lu(a)))
    if method == "qr":
        return SlogdetResult(*_slogdet_qr(a))
    raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                     "(`None`), and 'qr'.")


@custom_jvp
def _slogdet_small(a):
    det = a[..., 0, 0] if a.shape[-1] == 1 else (a[..., 0, 0] * a[..., 1, 1]
                                                 - a[..., 0, 1] * a[..., 1, 0])
    return jnp.sign(det), jnp.real(jnp.log(jnp.abs(det)))


@custom_jvp
def _slogdet_lu(a):
    lu_, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu_, axis1=-2, axis2=-1)
    is_zero = jnp.any(diag == 0, axis=-1)
    parity = jnp.count_nonzero(pivots != jnp.arange(a.shape[-1], dtype=pivots.dtype),
                               axis=-1)
    if jnp.iscomplexobj(a):
        sign = jnp.prod(diag / jnp.abs(diag).astype(diag.dtype), axis=-1)
    else:
        sign = jnp.array(1, a.dtype)
        parity = parity + jnp.count_nonzero(diag < 0, axis=-1)
    sign = jnp.where(is_zero, jnp.array(0, a.dtype),
                     sign * jnp.array(-2 * (parity % 2) + 1, a.dtype))
    logdet = jnp.where(is_zero, jnp.array(-np.inf, a.dtype),
                       jnp.sum(jnp.log(jnp.abs(diag)).astype(a.dtype), axis=-1))
    return sign, jnp.real(logdet)


@custom_jvp
def _slogdet_qr(a):
    if jnp.iscomplexobj(a):
        raise NotImplementedError("slogdet method='qr' not implemented for complex inputs")
    h, taus = lax_linalg.geqrf(a)
    diag = jnp.diagonal(h, axis1=-2, axis2=-1)
    flips = jnp.prod(jnp.where(taus[..., :a.shape[-1] - 1] != 0, -1, 1), axis=-1)
    return (jnp.prod(jnp.sign(diag), axis=-1) * flips.astype(diag.dtype),
            jnp.sum(jnp.log(jnp.abs(diag)), axis=-1))


def _slogdet_jvp(slogdet_fn):
    def jvp(primals, tangents):
        (x,), (g,) = primals, tangents
        # (as JAX's: the primal comes from the default method, LU, for "qr" too)
        sign, ans = slogdet_fn(x) if slogdet_fn is _slogdet_small else slogdet(x)
        if slogdet_fn is _slogdet_small and x.shape[-1] == 1:
            ans_dot = g[..., 0, 0] / x[..., 0, 0]
        elif slogdet_fn is _slogdet_small:
            det = x[..., 0, 0] * x[..., 1, 1] - x[..., 0, 1] * x[..., 1, 0]
            ans_dot = (g[..., 0, 0] * x[..., 1, 1] - g[..., 0, 1] * x[..., 1, 0]
                       - g[..., 1, 0] * x[..., 0, 1] + g[..., 1, 1] * x[..., 0, 0]) / det
        else:
            ans_dot = jnp.trace(solve(x, g), axis1=-1, axis2=-2)
        if jnp.iscomplexobj(x):
            sign_dot = (ans_dot - jnp.real(ans_dot).astype(ans_dot.dtype)) * sign
            ans_dot = jnp.real(ans_dot)
        else:
            sign_dot = jnp.zeros_like(sign)
        return (sign, ans), (sign_dot, ans_dot)
    return jvp


_slogdet_small.defjvp(_slogdet_jvp(_slogdet_small))
_slogdet_lu.defjvp(_slogdet_jvp(_slogdet_lu))
_slogdet_qr.defjvp(_slogdet_jvp(_slogdet_qr))


@composite(static=("mode",))
def qr(a, mode="reduced"):
    """QR decomposition; ``mode`` is "reduced" (or "full", as JAX), "complete", "r"
    (economy ``r``) or "raw" (LAPACK's ``(a^T, taus)``, as NumPy's; not differentiable)."""
    (a,) = _inexact("qr", a)
    if mode == "raw":
        h, taus = lax_linalg.geqrf(a)
        return QRResult(jnp.matrix_transpose(h), taus)
    if mode not in ("reduced", "full", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=(mode == "complete"))
    return r if mode == "r" else QRResult(q, r)


def eig(a):
    """Eigenvalues and right eigenvectors of a general square matrix, complex whatever
    ``a``'s dtype (CPU, or cuSOLVER on CUDA). Differentiable in the eigenvalues only.

    >>> eig(xform.numpy.array([[2., 0.], [0., 3.]])).eigenvalues
    Array([2.+0.j, 3.+0.j], dtype=complex64)
    """
    (a,) = _inexact("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


@composite
def eigvals(a):
    """Eigenvalues of a general square matrix (complex whatever ``a``'s dtype)."""
    (a,) = _inexact("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


@composite(static=("UPLO", "symmetrize_input"))
def eigh(a, UPLO=None, symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix."""
    (a,) = _inexact("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(a, lower=(UPLO != "U"), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


@composite(static=("UPLO", "symmetrize_input"))
def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """Eigenvalues (ascending) of a Hermitian matrix."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


@composite(static=("full_matrices", "compute_uv", "hermitian", "subset_by_index"))
def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """Singular value decomposition; ``SVDResult(U, S, Vh)`` or ``S``."""
    (a,) = _inexact("svd", a)
    if hermitian:
        return _svd_hermitian(a, compute_uv, subset_by_index)
    if not compute_uv:
        return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False,
                              subset_by_index=subset_by_index)
    u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices,
                              subset_by_index=subset_by_index)
    return SVDResult(u, s, vh)


def _svd_hermitian(a, compute_uv, subset_by_index=None):
    """JAX's hermitian SVD from eigh (of the symmetrized input): ``s = |w|`` descending,
    ``u`` the eigenvectors in that order, ``vh = (u * sign(w))^H``."""
    v, w = lax_linalg.eigh(a, subset_by_index=subset_by_index)
    s = lax.abs(w)
    last = s.ndim - 1
    if not compute_uv:
        return lax.rev(lax.sort(s, dimension=-1), dimensions=[last])
    idxs = lax.broadcasted_iota(np.int32, s.shape, last)
    s, idxs, sign = lax.sort((s, idxs, lax.sign(w)), dimension=-1, num_keys=1)
    s, idxs, sign = (lax.rev(t, dimensions=[last]) for t in (s, idxs, sign))
    u = jnp.take_along_axis(v, idxs[..., None, :], axis=-1)
    vh = jnp.conj(jnp.swapaxes(u * sign[..., None, :].astype(u.dtype), -1, -2))
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """Singular values, descending."""
    return svd(x, compute_uv=False)


def _max0(x, axis, keepdims=False):
    return jnp.max(x, axis=axis, keepdims=keepdims, initial=0)


def _matrix_norm(x, ord, axes, keepdims):
    r, c = axes
    if ord in (None, "fro", "f"):
        out = jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axes, keepdims=keepdims))
    elif ord in (1, -1):
        red = _max0 if ord == 1 else jnp.min  # (max from 0: an empty matrix's norm is 0)
        out = red(jnp.sum(jnp.abs(x), axis=r, keepdims=True), axis=c, keepdims=True)
    elif ord in (np.inf, -np.inf):
        red = _max0 if ord > 0 else jnp.min
        out = red(jnp.sum(jnp.abs(x), axis=c, keepdims=True), axis=r, keepdims=True)
    elif ord in (2, -2, "nuc"):
        moved = jnp.moveaxis(x, (r, c), (-2, -1))
        s = svd(moved, compute_uv=False)
        out = jnp.sum(s, -1) if ord == "nuc" else (_max0(s, -1) if ord == 2 else s[..., -1])
        if keepdims:
            out = jnp.expand_dims(out, axes)
        return out
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    if not keepdims:
        out = jnp.squeeze(out, axis=axes) if out.ndim > x.ndim - 2 else out
    return out


def _vector_norm(x, ord, axis, keepdims):
    ax = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return _max0(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(ax.dtype)
    if ord == 1:
        return jnp.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    return jnp.sum(ax ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


@composite(static=("ord", "axis", "keepdims"))
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as ``numpy.linalg.norm``.

    >>> norm(xform.numpy.array([3., 4.]))
    Array(5., dtype=float32)
    """
    (x,) = _inexact("norm", x)
    if axis is None:
        if ord is None:
            out = jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x))))
            return jnp.reshape(out, (1,) * x.ndim) if keepdims else out
        if x.ndim not in (1, 2):
            raise ValueError("norm: improper number of dimensions to norm")
        axis = tuple(range(x.ndim))
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    axis = tuple(_util.canonicalize_axis(a, x.ndim) for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError(f"norm: axis must name 1 or 2 axes, got {axis}")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """As JAX's: the inf, -inf and 1 norms of integers stay integers (abs, max/min/sum);
    the 2-norm of integers or bools takes the float of their sum's dtype (JAX sums
    first: float64 for int8 under x64), computed in floats so squares cannot overflow."""
    x = _util.asarray(x, "vector_norm")
    if ord in (None, 2) and (dtypes.issubdtype(x.dtype, np.integer) or x.dtype == bool):
        x = _util.convert(x, dtypes.to_inexact_dtype(_promote_integer_dtype(x.dtype)))
    elif not (ord in (np.inf, -np.inf, 1) and dtypes.issubdtype(x.dtype, np.integer)):
        (x,) = _inexact("vector_norm", x)
    if axis is None:
        out = _vector_norm(jnp.ravel(x), ord, 0, False)
        return jnp.reshape(out, (1,) * x.ndim) if keepdims else out
    return _vector_norm(x, ord, axis, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _default_rtol(a):
    return np.finfo(a.dtype).eps * max(a.shape[-2:])


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """Moore-Penrose pseudo-inverse via the SVD, cutting off small singular values."""
    (a,) = _inexact("pinv", a)
    rtol = rcond if rtol is None else rtol
    u, s, vh = (_svd_hermitian(a, True) if hermitian else
                lax_linalg.svd(a, full_matrices=False))
    rtol = _default_rtol(a) if rtol is None else rtol
    cutoff = jnp.asarray(rtol, s.dtype)[..., None] * s[..., :1]
    s_inv = jnp.where(s > cutoff, 1 / jnp.where(s > cutoff, s, 1), 0).astype(a.dtype)
    return jnp.matmul(jnp.conj(jnp.matrix_transpose(vh)) * s_inv[..., None, :],
                      jnp.conj(jnp.matrix_transpose(u)))


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least-squares solution of ``a @ x = b``: ``(x, residuals, rank, s)``. As JAX's,
    singular values of 0 never count (an all-zero ``a`` gives ``x = 0``), a negative
    ``rcond`` means eps, and an empty ``a`` gives zeros."""
    a, b = _inexact("lstsq", a, b)
    if a.shape[0] != b.shape[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        "two-dimensional")
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    m, n = a.shape
    eps = float(np.finfo(a.dtype).eps)
    if a.size == 0:
        s = jnp.zeros((0,), a.dtype)   # (a.dtype, complex too, as JAX's)
        rank = jnp.array(0, dtypes.canonicalize_dtype(np.int64))   # JAX's default int
        x = jnp.zeros((n, b2.shape[1]), a.dtype)
    else:
        rcond = eps * max(m, n) if rcond is None else jnp.where(
            jnp.asarray(rcond) < 0, eps, rcond)
        u, s, vh = lax_linalg.svd(a, full_matrices=False)
        mask = (s > 0) & (s >= jnp.asarray(rcond, s.dtype) * s[0])
        rank = jnp.sum(mask)
        s_inv = jnp.where(mask, 1 / jnp.where(mask, s, 1), 0).astype(a.dtype)
        uTb = jnp.matmul(jnp.conj(u.T), b2, precision=lax.Precision.HIGHEST)
        x = jnp.matmul(jnp.conj(vh.T), s_inv[:, None] * uTb, precision=lax.Precision.HIGHEST)
    r = b2 - jnp.matmul(a, x, precision=lax.Precision.HIGHEST)
    resid = jnp.sum(jnp.abs(r) ** 2, axis=0)
    if numpy_resid and (m <= n or int(_util.concrete_or_raise(rank, (
            "jnp.linalg.lstsq with numpy_resid=True needs a concrete rank (its residuals "
            "are empty unless a has full column rank); use numpy_resid=False under jit.")))
            < n):
        resid = jnp.asarray([])   # NumPy's: empty unless full column rank (JAX's dtype)
    if vector:
        x = x[:, 0]
    return x, resid, rank, s


@composite(static=("n",))
def matrix_power(a, n):
    """``a`` to the integer power ``n`` by repeated squaring (inverse for n < 0)."""
    a = _util.asarray(a, "matrix_power")
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from e
    if n == 0:
        return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else jnp.matmul(result, base)
        n >>= 1
        if n:
            base = jnp.matmul(base, base)
    return result


@composite(static=("hermitian",))
def matrix_rank(M, rtol=None, *, tol=None, hermitian=False):
    """As JAX's: a given ``rtol`` (or its alias ``tol``) bounds the singular values
    absolutely; only the default is relative to the largest."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (M,) = _inexact("matrix_rank", M)
    if M.ndim < 2:
        return (M != 0).any().astype(np.int32)
    s = svd(M, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        tol = s[..., :1] * _default_rtol(M)
    else:
        tol = jnp.expand_dims(jnp.asarray(rtol, s.dtype), np.ndim(rtol))
    return jnp.sum(s > tol, axis=-1)


@composite(static=("p",))
def cond(x, p=None):
    """Condition number (2-norm by default). As JAX's: NaN (a singular matrix) becomes inf
    unless ``x`` has NaNs, and empty matrices are an error."""
    x = _util.asarray(x, "cond")
    if x.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got "
                         f"arr.shape={x.shape}")
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got "
                         f"arr.shape={x.shape}")
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        if x.shape[-2] != x.shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got "
                             f"arr.shape={x.shape}")
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(x).any(axis=(-2, -1)), np.inf, r)


def tensorsolve(a, b, axes=None):
    (a, b) = _inexact("tensorsolve", a, b)
    if axes is not None:
        a = jnp.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    out_shape = a.shape[b.ndim:]
    n = int(np.prod(out_shape))
    x = solve(jnp.reshape(a, (-1, n)), jnp.ravel(b))
    return jnp.reshape(x, out_shape)


def tensorinv(a, ind=2):
    (a,) = _inexact("tensorinv", a)
    out_shape = a.shape[ind:] + a.shape[:ind]
    n = int(np.prod(a.shape[:ind]))
    return jnp.reshape(inv(jnp.reshape(a, (n, -1))), out_shape)
