"""Matrix structure and small linear-algebra helpers: tri/tril/triu, diag/diagonal/
trace, index grids (indices, ix_, meshgrid, tril_indices, ...), kron, vander, cross,
vecdot/matvec/vecmat. Diagonals are read with reshape + strided slice (no gather)."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._products import _general
from xform.numpy._reductions import sum as _sum
from xform.numpy._shape import moveaxis, ravel
from xform.numpy._util import asarray, canonicalize_axis
from xform.numpy._creation import _dim, ones
from xform.numpy._math import conjugate
from xform.numpy._products import matmul
from xform.numpy._shape import stack


def _tri_mask(n, m, k):
    rows = lax.broadcasted_iota(dtypes.int32, (n, m), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (n, m), 1)
    return lax.ge(lax.add(rows, _util.scalar_array(k, dtypes.int32, False)), cols)


def tri(N, M=None, k=0, dtype=None):
    """Like numpy.tri: ones at and below the ``k``-th diagonal.

    >>> jnp.tri(2, dtype=int)
    Array([[1, 0],
           [1, 1]], dtype=int32)
    """
    N = _dim(N)
    M = N if M is None else _dim(M)
    # NB: float32 by default even under x64 (JAX's "strange default")
    dt = dtypes.float32 if dtype is None else _util.user_dtype(dtype)
    return lax.convert_element_type(_tri_mask(N, M, operator.index(k)), dt)


def _masked_tri(name, m, k, lower):
    m = asarray(m, name)
    if m.aval.ndim < 2:
        raise ValueError(f"{name} requires an array of at least two dimensions, got "
                         f"shape {m.aval.shape}")
    n, c = m.aval.shape[-2:]
    mask = _tri_mask(n, c, k if lower else k - 1)
    if not lower:
        mask = lax.eq(mask, _util.scalar_array(False, dtypes.bool_, False))
    mask = lax.broadcast_in_dim(mask, m.aval.shape, (m.aval.ndim - 2, m.aval.ndim - 1))
    return lax.select(mask, m, _util.filled_like(m, 0))


@composite(static=("k",))
def tril(m, k=0):
    """Like numpy.tril: zero above the ``k``-th diagonal (of the last two axes)."""
    return _masked_tri("tril", m, operator.index(k), True)


@composite(static=("k",))
def triu(m, k=0):
    """Like numpy.triu: zero below the ``k``-th diagonal (of the last two axes)."""
    return _masked_tri("triu", m, operator.index(k), False)


@composite(static=("offset", "axis1", "axis2"))
def diagonal(a, offset=0, axis1=0, axis2=1):
    """Like numpy.diagonal: the ``offset`` diagonal of the ``axis1``/``axis2`` planes,
    as the last axis.

    >>> jnp.diagonal(jnp.arange(9).reshape(3, 3), 1)
    Array([1, 5], dtype=int32)
    """
    a = asarray(a, "diagonal")
    nd = a.aval.ndim
    if nd < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, got "
                         f"shape {a.aval.shape}")
    i, j = canonicalize_axis(axis1, nd, "axis1"), canonicalize_axis(axis2, nd, "axis2")
    if i == j:
        raise ValueError("axis1 and axis2 can not be the same")
    a = moveaxis(a, (i, j), (-2, -1))
    lead, (n, m) = a.aval.shape[:-2], a.aval.shape[-2:]
    offset = operator.index(offset)
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    d = shape_poly.max_dim(0, shape_poly.min_dim(n - r0, m - c0))
    zeros, r0, c0 = (0,) * len(lead), shape_poly.min_dim(r0, n), shape_poly.min_dim(c0, m)
    # The d x d block starting at the diagonal's first element, flattened: its diagonal
    # is every (d + 1)-th element.
    block = lax.slice(a, zeros + (r0, c0), lead + (r0 + d, c0 + d))
    flat = lax.reshape(block, lead + (d * d,))
    return lax.slice(flat, zeros + (0,), lead + (d * d,), (1,) * len(lead) + (d + 1,))


@composite(static=("axis1", "axis2", "dtype"))
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Like numpy.trace: the sum of :func:`diagonal` (dtypes as :func:`sum`)."""
    return _sum(diagonal(a, offset, axis1, axis2), -1, dtype=dtype, out=out)


@composite(static=("k",))
def diag(v, k=0):
    """Like numpy.diag: the ``k``-th diagonal of a 2-D array, or a 2-D array with the
    1-D ``v`` on its ``k``-th diagonal."""
    v = asarray(v, "diag")
    k = operator.index(k)
    if v.aval.ndim == 2:
        return diagonal(v, k)
    if v.aval.ndim != 1:
        raise ValueError(f"diag input must be 1d or 2d, got shape {v.aval.shape}")
    n = v.aval.shape[0] + abs(k)
    padded = lax.pad(v, _util.scalar_operand(0, v.aval.dtype, v.aval.weak_type),
                     [(0, abs(k), 0)])
    # v[i] sits at (i, i + k): it depends on the row if k >= 0, on the column if not.
    values = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
    mask = lax.eq(lax.add(lax.broadcasted_iota(dtypes.int32, (n, n), 0),
                          _util.scalar_array(k, dtypes.int32, False)),
                  lax.broadcasted_iota(dtypes.int32, (n, n), 1))
    return lax.select(mask, values, _util.filled_like(values, 0))


def diagflat(v, k=0):
    """Like numpy.diagflat: :func:`diag` of the flattened input."""
    out = diag(ravel(asarray(v, "diagflat")), k)
    return lax.convert_element_type(out, out.aval.dtype, False)  # (JAX's zeros: strong)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """Like numpy.fill_diagonal, but returns the result: call with ``inplace=False``
    (xform arrays are immutable). ``val`` is a scalar or is cycled along the diagonal.

    >>> jnp.fill_diagonal(jnp.zeros((2, 2)), 5.0, inplace=False)
    Array([[5., 0.],
           [0., 5.]], dtype=float32)
    """
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, so jnp.fill_diagonal cannot "
                                  "modify its input: pass inplace=False to get a copy "
                                  "with the diagonal filled.")
    if wrap:
        raise NotImplementedError("jnp.fill_diagonal: wrap=True is not supported.")
    a = asarray(a, "fill_diagonal")
    shape = a.aval.shape
    if a.aval.ndim < 2 or (a.aval.ndim > 2 and len(set(shape)) != 1):
        raise ValueError(f"array must be at least 2-d and, if more than 2-d, have all "
                         f"dimensions equal; got shape {shape}")
    d = min(shape)
    val = lax.convert_element_type(ravel(asarray(val, "fill_diagonal", 1)), a.aval.dtype,
                                   a.aval.weak_type)  # (as JAX's .at[].set: a's type)
    if val.aval.size == 0:
        return a
    reps = -(-d // val.aval.size)
    val = lax.slice(lax.reshape(lax.broadcast_in_dim(val, (reps, val.aval.size), (1,)),
                                (reps * val.aval.size,)), (0,), (d,))
    on_diag, values = None, None
    for axis in range(a.aval.ndim):
        idx = lax.broadcasted_iota(dtypes.int32, shape, axis)
        if on_diag is None:
            first, on_diag = idx, lax.full(shape, True)
            values = lax.broadcast_in_dim(
                lax.pad(val, _util.scalar_array(0, a.aval.dtype, False),
                        [(0, shape[0] - d, 0)]), shape, (0,))
        else:
            on_diag = uf.logical_and(on_diag, lax.eq(idx, first))
    return lax.select(on_diag, values, a)


# ---- index grids ----

def _int_arrays(*arrays):
    dt = dtypes.default_int_dtype()
    return tuple(asarray(np.asarray(x, dt)) for x in arrays)


def tril_indices(n, k=0, m=None):
    """Like numpy.tril_indices (a tuple of two int arrays)."""
    return _int_arrays(*np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    """Like numpy.triu_indices."""
    return _int_arrays(*np.triu_indices(n, k, m))


def _square_shape(name, arr):
    s = _util.shape(arr)
    if len(s) != 2:
        raise ValueError(f"{name} only works for 2D arrays, got shape {s}")
    return s


def tril_indices_from(arr, k=0):
    """Like numpy.tril_indices_from."""
    n, m = _square_shape("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """Like numpy.triu_indices_from."""
    n, m = _square_shape("triu_indices_from", arr)
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    """Like numpy.diag_indices."""
    return _int_arrays(*np.diag_indices(operator.index(n), operator.index(ndim)))


def diag_indices_from(arr):
    """Like numpy.diag_indices_from (all dimensions must be equal)."""
    s = _util.shape(arr)
    if len(s) < 2 or len(set(s)) != 1:
        raise ValueError(f"All dimensions of input must be of equal length; got shape {s}")
    return diag_indices(s[0], len(s))


def mask_indices(n, mask_func, k=0, *, size=None):
    """Like numpy.mask_indices: the indices where ``mask_func(ones((n, n)), k)`` is
    non-zero (computed eagerly: the count decides the shape)."""
    mask = np.asarray(mask_func(ones((n, n)), k)) != 0
    i, j = np.nonzero(mask)
    if size is not None:
        i, j = (np.resize(np.concatenate([x, np.zeros(max(size - len(x), 0), x.dtype)]),
                          size) for x in (i, j))
    return _int_arrays(i, j)


def indices(dimensions, dtype=None, sparse=False):
    """Like numpy.indices: a grid of each axis's index."""
    dims = _util.canonical_shape(dimensions, "dimensions")
    dt = _util.user_dtype(dtype) or dtypes.default_int_dtype()
    out = []
    for i, d in enumerate(dims):
        if sparse:
            shape = tuple(d if j == i else 1 for j in range(len(dims)))
            out.append(lax.broadcasted_iota(dt, shape, i))
        else:
            out.append(lax.broadcasted_iota(dt, dims, i))
    if sparse:
        return tuple(out)
    if not out:
        return lax.full((0,), 0, dt)
    return lax.concatenate([lax.expand_dims(x, (0,)) for x in out], 0)


def ix_(*args):
    """Like numpy.ix_: 1-D arrays reshaped to broadcast against each other."""
    out = []
    for i, a in enumerate(args):
        a = asarray(a, "ix_", i)
        if a.aval.dtype == dtypes.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        if a.aval.ndim != 1:
            raise ValueError(f"Cross index must be 1 dimensional, got shape {a.aval.shape}")
        if not a.aval.size:  # (an empty index is an integer index, as NumPy's and JAX's)
            a = lax.convert_element_type(a, dtypes.default_int_dtype())
        shape = [1] * len(args)
        shape[i] = a.aval.shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Like numpy.meshgrid (``indexing`` "xy" or "ij"; ``sparse`` grids broadcast).

    >>> [g.shape for g in jnp.meshgrid(jnp.arange(2), jnp.arange(3))]
    [(3, 2), (3, 2)]
    """
    del copy
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing!r}")
    args = [asarray(x, "meshgrid", i) for i, x in enumerate(xi)]
    if any(x.aval.ndim != 1 for x in args):
        raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                         f"{[x.aval.shape for x in args]}")
    sizes = [x.aval.shape[0] for x in args]
    n = len(args)
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(args):
        dim = i
        if indexing == "xy" and n >= 2 and i < 2:
            dim = 1 - i
        if sparse:
            shape = [1] * n
            shape[dim] = x.aval.shape[0]
            out.append(lax.reshape(x, tuple(shape)))
        else:
            out.append(lax.broadcast_in_dim(x, tuple(sizes), (dim,)))
    return out


# ---- products ----

@composite
def kron(a, b):
    """Like numpy.kron: the Kronecker product.

    >>> jnp.kron(jnp.eye(2, dtype=int), jnp.array([1, 2]))
    Array([[1, 2, 0, 0],
           [0, 0, 1, 2]], dtype=int32)
    """
    a, b = _util.promote_dtypes("kron", a, b)
    nd = max(a.aval.ndim, b.aval.ndim)
    a = lax.reshape(a, (1,) * (nd - a.aval.ndim) + a.aval.shape)
    b = lax.reshape(b, (1,) * (nd - b.aval.ndim) + b.aval.shape)
    sa, sb = a.aval.shape, b.aval.shape
    a = lax.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b = lax.reshape(b, tuple(d for s in sb for d in (1, s)))
    return lax.reshape(uf.multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


@composite(static=("N", "increasing"))
def vander(x, N=None, increasing=False):
    """Like numpy.vander: columns are powers of the 1-D ``x`` (decreasing by default)."""
    x = asarray(x, "vander")
    if x.aval.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array, got shape {x.aval.shape}")
    N = x.aval.shape[0] if N is None else operator.index(N)
    if N < 0:
        raise ValueError("N must be nonnegative")
    if x.aval.dtype == dtypes.bool_:
        raise TypeError("iota does not accept dtype bool. Accepted dtypes are subtypes "
                        "of integer, floating, complexfloating.")
    powers = lax.iota(x.aval.dtype, N)  # in x's dtype, so the result keeps it (as JAX)
    if not increasing:
        powers = lax.sub(_util.scalar_array(N - 1, powers.aval.dtype, False), powers)
    return uf.power(lax.expand_dims(x, (1,)), lax.expand_dims(powers, (0,)))


@composite(static=("axisa", "axisb", "axisc", "axis"))
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Like numpy.cross for vectors of length 2 or 3 (length-2 cross products are
    scalars)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _util.promote_dtypes("cross", a, b)
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    na, nb = a.aval.shape[-1], b.aval.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"Dimension must be either 2 or 3 for cross product, got "
                         f"{na} and {nb}")

    def comp(x, i):
        n = x.aval.ndim
        if i >= x.aval.shape[-1]:
            return _util.scalar_array(0, x.aval.dtype, x.aval.weak_type)
        return lax.squeeze(lax.slice(x, (0,) * (n - 1) + (i,), x.aval.shape[:-1] + (i + 1,)),
                           (n - 1,))

    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    c2 = uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))
    if na == 2 and nb == 2:
        return c2
    c0 = uf.subtract(uf.multiply(a1, b2), uf.multiply(a2, b1))
    c1 = uf.subtract(uf.multiply(a2, b0), uf.multiply(a0, b2))
    c = [c0, c1, c2]
    shape = _util.broadcast_shapes(*(x.aval.shape for x in c))
    out = stack([_util.broadcast_to(x, shape) for x in c], -1)
    out = lax.convert_element_type(out, out.aval.dtype, False)  # (JAX's jnp.array: strong)
    return moveaxis(out, -1, axisc)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Like numpy.vecdot: ``sum(conj(x1) * x2, axis)`` with broadcasting, as one
    dot_general (the dtype is the promoted input dtype, as for ``dot``)."""
    x1, x2 = _util.promote_dtypes("vecdot", x1, x2)
    x1 = moveaxis(conjugate(x1), axis, -1)
    x2 = moveaxis(x2, axis, -1)
    if x1.aval.shape[-1] != x2.aval.shape[-1]:
        raise ValueError(f"vecdot: the contracted axes must have equal sizes, got shapes "
                         f"{x1.aval.shape} and {x2.aval.shape} (axis={axis})")
    batch = _util.broadcast_shapes(x1.aval.shape[:-1], x2.aval.shape[:-1], name="vecdot")
    n = x1.aval.shape[-1]
    x1, x2 = _util.broadcast_to(x1, batch + (n,)), _util.broadcast_to(x2, batch + (n,))
    dims = tuple(range(len(batch)))
    return _general(x1, x2, ((len(batch),), (len(batch),)), (dims, dims),
                    precision=precision, preferred_element_type=preferred_element_type)


@composite
def matvec(x1, x2, /):
    """Like numpy.matvec: matrix (..., m, n) times vector (..., n), batched."""
    x2 = asarray(x2, "matvec", 1)
    out = matmul(x1, lax.expand_dims(x2, (x2.aval.ndim,)))
    return lax.squeeze(out, (out.aval.ndim - 1,))


@composite
def vecmat(x1, x2, /):
    """Like numpy.vecmat: conj(vector (..., n)) times matrix (..., n, m), batched."""
    x1 = conjugate(asarray(x1, "vecmat"))
    out = matmul(lax.expand_dims(x1, (x1.aval.ndim - 1,)), x2)
    return lax.squeeze(out, (out.aval.ndim - 2,))
