"""SciPy's special matrices (``block_diag``, ``toeplitz``, ``hankel``, ``hilbert``, ...)
as JAX builds them: index arithmetic over ``xform.numpy``, batched over leading axes
where JAX's take ``(..., n)`` inputs (part of ``xform.scipy.linalg``, which re-exports
them).

NB: JAX builds ``toeplitz``/``hankel`` with ``conv_general_dilated_patches`` (exact at
HIGHEST precision); xform gathers the same entries, which is exact too.
"""
import math
import operator

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util


def _promote(name, *xs, to=None):
    return _util.promote_dtypes(name, *[jnp.asarray(x) for x in xs], to=to)


def block_diag(*arrs):
    """Block-diagonal matrix of the (at most 2-D) ``arrs``.

    >>> block_diag(xform.numpy.ones((1, 1)), 2 * xform.numpy.ones((1, 2)))
    Array([[1., 0., 0.],
           [0., 2., 2.]], dtype=float32)
    """
    if not arrs:
        arrs = (jnp.zeros((1, 0)),)
    arrs = _promote("block_diag", *arrs)
    bad = [i for i, a in enumerate(arrs) if a.ndim > 2]
    if bad:
        raise ValueError("Arguments to jax.scipy.linalg.block_diag must have at most 2 "
                         f"dimensions, got {arrs[bad[0]]} at argument {bad[0]}.")
    arrs = [jnp.atleast_2d(a) for a in arrs]
    total = sum(a.shape[1] for a in arrs)
    rows, col = [], 0
    for a in arrs:
        rows.append(jnp.pad(a, ((0, 0), (col, total - col - a.shape[1]))))
        col += a.shape[1]
    out = jnp.concatenate(rows, axis=0)   # never weak, as JAX's (a pad with a dtype zero)
    return lax.convert_element_type(out, out.dtype, weak_type=False)


def _from_diagonals(v, nrows, ncols, index):
    """``out[..., i, j] = v[..., index(i, j)]`` for a static index table."""
    i, j = np.ogrid[:nrows, :ncols]
    return jnp.take(v, jnp.asarray(index(i, j).astype(np.int32)), axis=-1)


@composite
def toeplitz(c, r=None):
    """Toeplitz matrix ``A[i, j] = c[i - j]`` (``i >= j``), ``r[j - i]`` above; ``r``
    defaults to ``conj(c)``; leading axes batch.

    >>> toeplitz(xform.numpy.array([1, 2, 3]))
    Array([[1, 2, 3],
           [2, 1, 2],
           [3, 2, 1]], dtype=int32)
    """
    _util.check_arraylike("toeplitz", c, *(() if r is None else (r,)))
    c = jnp.atleast_1d(jnp.asarray(c))
    r = jnp.conjugate(c) if r is None else jnp.atleast_1d(jnp.asarray(r))
    c, r = _promote("toeplitz", c, r)
    n, m = c.shape[-1], r.shape[-1]
    batch = _util.broadcast_shapes(c.shape[:-1], r.shape[:-1], name="toeplitz")
    if n == 0 or m == 0:
        return jnp.empty((*batch, n, m), c.dtype)
    v = jnp.concatenate([jnp.broadcast_to(jnp.flip(c, -1), (*batch, n)),
                         jnp.broadcast_to(r[..., 1:], (*batch, m - 1))], axis=-1)
    return _from_diagonals(v, n, m, lambda i, j: n - 1 - i + j)


@composite
def hankel(c, r=None):
    """Hankel matrix ``H[i, j] = v[i + j]`` with ``v = concatenate([c, r[1:]])``; ``r``
    defaults to zeros; leading axes batch.

    >>> hankel(xform.numpy.array([1, 2, 3]))
    Array([[1, 2, 3],
           [2, 3, 0],
           [3, 0, 0]], dtype=int32)
    """
    _util.check_arraylike("hankel", c, *(() if r is None else (r,)))
    c = jnp.asarray(c)
    r = jnp.zeros_like(c) if r is None else jnp.asarray(r)
    if c.ndim == 0:
        raise ValueError("hankel: c must be at least 1-dimensional, got a scalar.")
    if r.ndim == 0:
        raise ValueError("hankel: r must be at least 1-dimensional, got a scalar.")
    c, r = _promote("hankel", c, r)
    n, m = c.shape[-1], r.shape[-1]
    batch = _util.broadcast_shapes(c.shape[:-1], r.shape[:-1], name="hankel")
    if n == 0 or m == 0:
        return jnp.empty((*batch, n, m), c.dtype)
    v = jnp.concatenate([jnp.broadcast_to(c, (*batch, n)),
                         jnp.broadcast_to(r[..., 1:], (*batch, m - 1))], axis=-1)
    return _from_diagonals(v, n, m, lambda i, j: i + j)


@composite
def circulant(c):
    """Circulant matrix ``A[i, j] = c[(i - j) % n]``; leading axes batch.

    >>> circulant(xform.numpy.array([1, 2, 3]))
    Array([[1, 3, 2],
           [2, 1, 3],
           [3, 2, 1]], dtype=int32)
    """
    _util.check_arraylike("circulant", c)
    c = jnp.atleast_1d(jnp.asarray(c))
    n = c.shape[-1]
    if n == 0:   # (nothing to gather from)
        return jnp.zeros((*c.shape, 0), c.dtype)
    return _from_diagonals(c, n, n, lambda i, j: (i - j) % n)


@composite
def leslie(f, s):
    """Leslie matrix: fecundities ``f`` (..., n) in the first row, survival rates ``s``
    (..., n - 1) on the subdiagonal.

    >>> leslie(xform.numpy.array([1., 2.]), xform.numpy.array([.5]))
    Array([[1. , 2. ],
           [0.5, 0. ]], dtype=float32)
    """
    _util.check_arraylike("leslie", f, s)
    f, s = jnp.atleast_1d(jnp.asarray(f)), jnp.atleast_1d(jnp.asarray(s))
    if f.shape[-1] < 2:
        raise ValueError("The length of f along the last axis must be at least 2; "
                         f"got shape {f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError(
            "Incorrect lengths for f and s. The length of s along the last axis must be "
            f"one less than the length of f; got f shape {f.shape} and s shape {s.shape}.")
    f, s = _promote("leslie", f, s)
    n = f.shape[-1]
    batch = _util.broadcast_shapes(f.shape[:-1], s.shape[:-1], name="leslie")
    v = jnp.concatenate([jnp.broadcast_to(f, (*batch, n)),
                         jnp.broadcast_to(s, (*batch, n - 1)),
                         jnp.zeros((*batch, 1), f.dtype)], axis=-1)
    # Row 0 reads f, entry (i, i-1) reads s[i-1], every other entry the trailing zero.
    return _from_diagonals(v, n, n, lambda i, j: np.where(
        i == 0, j, np.where(j == i - 1, n + j, 2 * n - 1)))


@composite
def companion(a):
    """Companion matrix of the polynomial coefficients ``a`` (..., n): first row
    ``-a[1:] / a[0]``, ones on the subdiagonal.

    >>> companion(xform.numpy.array([1., -10., 31., -30.]))
    Array([[ 10., -31.,  30.],
           [  1.,   0.,   0.],
           [  0.,   1.,   0.]], dtype=float32)
    """
    (a,) = _promote("companion", a, to="inexact")
    a = jnp.atleast_1d(a)
    if a.shape[-1] < 2:
        raise ValueError("The length of `a` along the last axis must be at least 2; "
                         f"got shape {a.shape}.")
    first = -a[..., 1:] / a[..., :1]
    m = first.shape[-1]
    sub = jnp.broadcast_to(jnp.eye(m, m, k=-1, dtype=a.dtype), (*a.shape[:-1], m, m))
    return jnp.concatenate([first[..., None, :], sub[..., 1:, :]], axis=-2)


@composite
def fiedler(a):
    """Symmetric Fiedler matrix ``F[i, j] = |a[i] - a[j]|``; leading axes batch.

    >>> fiedler(xform.numpy.array([1, 4, 12]))
    Array([[ 0,  3, 11],
           [ 3,  0,  8],
           [11,  8,  0]], dtype=int32)
    """
    _util.check_arraylike("fiedler", a)
    a = jnp.atleast_1d(jnp.asarray(a))
    return jnp.abs(a[..., :, None] - a[..., None, :])


@composite
def fiedler_companion(a):
    """Fiedler companion matrix (pentadiagonal; eigenvalues are the roots of ``a``).

    >>> fiedler_companion(xform.numpy.array([1., -16., 86., -176., 105.]))
    Array([[  16.,  -86.,    1.,    0.],
           [   1.,    0.,    0.,    0.],
           [   0.,  176.,    0., -105.],
           [   0.,    1.,    0.,    0.]], dtype=float32)
    """
    (a,) = _promote("fiedler_companion", a, to="inexact")
    a = jnp.atleast_1d(a)
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    n = a.shape[-1] - 1
    if n == 0:
        return jnp.zeros((*a.shape[:-1], 0, 0), a.dtype)
    a = a / a[..., :1]
    if n == 1:
        return -a[..., 1:, None]
    # Entries index v = [-a..., 1, 0]: c[0,0] = -a1, c[1,0] = 1; for even i:
    # c[i,i+1] = -a[i+2], c[i,i+2] = 1, c[i,i-1] = -a[i+1] (i >= 2); odd i >= 3: c[i,i-2] = 1.
    v = jnp.concatenate([-a, jnp.ones_like(a[..., :2]) * np.array([1, 0], a.dtype)], -1)
    one, zero = n + 1, n + 2
    i, j = np.ogrid[:n, :n]
    even = i % 2 == 0
    idx = np.select([(i == 0) & (j == 0), (i == 1) & (j == 0), (j == i + 1) & even,
                     (j == i + 2) & even, (j == i - 1) & even & (i >= 2),
                     (j == i - 2) & ~even & (i >= 3)],
                    [np.ones_like(i + j), one, np.minimum(i + 2, n), one,
                     np.minimum(i + 1, n), one], zero)
    return jnp.take(v, jnp.asarray(idx.astype(np.int32)), axis=-1)


@composite(static=("n", "mode"))
def convolution_matrix(a, n, mode="full"):
    """Toeplitz ``A`` with ``A @ v == jnp.convolve(a, v, mode)`` for ``v`` of length n.

    >>> convolution_matrix(xform.numpy.array([1, 2]), 2)
    Array([[1, 0],
           [2, 1],
           [0, 2]], dtype=int32)
    """
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    _util.check_arraylike("convolution_matrix", a)
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a "
                         "scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    pads = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
    az, raz = jnp.pad(a, pads), jnp.pad(jnp.flip(a, -1), pads)
    length = m + n - 1
    trim = min(n, m) - 1
    tb, te = {"full": (0, 0), "valid": (trim, trim),
              "same": (trim // 2, trim - trim // 2)}[mode]
    return toeplitz(az[..., tb:length - te], raz[..., length - n - tb:length - tb])


def _binom(n, k):
    return lax.exp(lax.lgamma(n + 1.0) - lax.lgamma(n - k + 1.0) - lax.lgamma(k + 1.0))


def _comb(n, k):
    """``scipy.special.comb`` as JAX's (0 outside ``0 <= k <= n``)."""
    ok = (k <= n) & (n >= 0) & (k >= 0)
    n, k = jnp.where(ok, n, 0.0), jnp.where(ok, k, 0.0)
    return jnp.where(ok, _binom(n, k), 0.0)


@composite(static=("n",))
def hilbert(n):
    """Hilbert matrix ``H[i, j] = 1 / (i + j + 1)``.

    >>> hilbert(2)
    Array([[1.        , 0.5       ],
           [0.5       , 0.33333334]], dtype=float32)
    """
    a = lax.broadcasted_iota(dtypes.default_float_dtype(), (n, 1), 0)
    return 1 / (a + a.T + 1)


@composite(static=("n",))
def invhilbert(n):
    """Inverse of ``hilbert(n)`` from its closed form (floating point; no ``exact``)."""
    a = jnp.arange(n, dtype=dtypes.default_float_dtype())
    i, j = a[:, None], a[None, :]
    s = i + j
    return ((-1.0) ** s * (s + 1.0) * _comb(n + i, n - j - 1) * _comb(n + j, n - i - 1)
            * _comb(s, i) ** 2)


def _check_kind(kind):
    kind = "symmetric" if kind is None else kind
    valid = ["symmetric", "lower", "upper"]
    if kind not in valid:
        raise ValueError(f"Expected kind to be one of: {valid}; got {kind}")
    return kind


@composite(static=("n", "kind"))
def pascal(n, kind=None):
    """Pascal matrix of order n (binomial coefficients, from lgamma: approximate).

    >>> xform.numpy.round(pascal(3, kind="lower"))
    Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 2., 1.]], dtype=float32)
    """
    kind = _check_kind(kind)
    a = jnp.arange(n, dtype=np.float32)
    low = _binom(a[:, None], a[None, :])
    if kind != "symmetric":
        return low if kind == "lower" else low.T
    return jnp.dot(low, low.T)


@composite(static=("n", "kind"))
def invpascal(n, kind=None):
    """Inverse of ``pascal(n, kind)``: ``L^-1[i, j] = (-1)^(i-j) C(i, j)``."""
    kind = _check_kind(kind)
    a = jnp.arange(n, dtype=dtypes.default_float_dtype())
    i, j = a[:, None], a[None, :]
    low = ((-1.0) ** (i - j)) * _binom(i, j)
    if kind != "symmetric":
        return low if kind == "lower" else low.T
    return jnp.dot(low.T, low)


@composite(static=("n", "full"))
def helmert(n, full=False):
    """Helmert matrix: orthonormal contrasts, (n - 1, n), or (n, n) with ``full``.

    >>> helmert(2, full=True)
    Array([[ 0.70710677,  0.70710677],
           [ 0.70710677, -0.70710677]], dtype=float32)
    """
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    i, j = jnp.arange(n - 1)[:, None], jnp.arange(n)[None, :]
    k = (i + 1).astype(dtypes.default_float_dtype())
    denom = jnp.sqrt(k * (k + 1))
    h = jnp.where(j <= i, 1.0 / denom, jnp.where(j == i + 1, -k / denom,
                                                 jnp.zeros_like(denom)))
    if full:
        h = jnp.concatenate([jnp.full((1, n), 1.0 / jnp.sqrt(n), dtype=h.dtype), h], 0)
    return h


@composite(static=("n", "dtype"))
def hadamard(n, dtype=int):
    """Sylvester's Hadamard matrix of order ``n`` (a power of 2).

    >>> hadamard(2)
    Array([[ 1,  1],
           [ 1, -1]], dtype=int32)
    """
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    h = jnp.ones((1, 1), dtype=dtype)
    for _ in range(int(math.log2(n))):
        h = jnp.block([[h, h], [h, -h]])
    return h


@composite(static=("n", "scale", "dtype"))
def dft(n, scale=None, *, dtype=None):
    """Discrete Fourier transform matrix ``W[i, j] = exp(-2 pi i j / n)``, unscaled or
    scaled by ``1/sqrt(n)`` (``'sqrtn'``) or ``1/n`` (``'n'``)."""
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = dtypes.default_complex_dtype()
    else:
        dtype = _util.user_dtype(dtype)
        if not dtypes.issubdtype(dtype, np.complexfloating):
            raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
    a = jnp.arange(n, dtype=dtype)
    w = jnp.exp(-2j * np.pi * a[:, None] * a[None, :] / n)
    if scale == "sqrtn":
        return w / jnp.sqrt(n)
    return w / n if scale == "n" else w
