"""Shape manipulation: reshape, ravel, transpose, swapaxes, moveaxis, expand_dims,
squeeze, flip, stack, concatenate, hstack, vstack, broadcast_to, atleast_Nd."""
import math
import operator

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.core.sharding import NamedSharding
from xform.core.sharding_types import abstract_sharding, explicit_spec
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy._util import asarray, canonicalize_axis, canonicalize_axes


def shape(a):
    """Like numpy.shape."""
    return _util.shape(a)


def ndim(a):
    """Like numpy.ndim."""
    return len(_util.shape(a))


def size(a, axis=None):
    """Like numpy.size."""
    s = _util.shape(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    return s[canonicalize_axis(axis, len(s))]


def _resolve_shape(old_shape, new_shape):
    size = math.prod(old_shape)  # (a symbolic dimension if a dimension is)
    new_shape = tuple(d if shape_poly.is_symbolic_dim(d) else operator.index(d) for d in (
        (new_shape,) if isinstance(new_shape, (int, np.integer)) else new_shape))
    unknown = [i for i, d in enumerate(new_shape) if d == -1]
    known = math.prod(d for d in new_shape if d != -1)
    bad = len(unknown) > 1 or any(d < -1 for d in new_shape) or (
        unknown and (known == 0 or divmod(size, known)[1] != 0)) or (
            not unknown and known != size)
    if bad:
        raise TypeError(f"cannot reshape array of shape {tuple(old_shape)} (size {size}) "
                        f"into shape {new_shape}" + (
                            " (size {})".format(known) if not unknown else ""))
    if unknown:
        new_shape = new_shape[:unknown[0]] + (size // known,) + new_shape[unknown[0] + 1:]
    return new_shape


def reshape(a, shape, order="C", *, copy=None, out_sharding=None):
    """Like numpy.reshape: one dimension may be -1; ``order`` is "C" or "F" ("A" is
    "C": arrays are C-contiguous); ``out_sharding`` as ``lax.reshape``'s.

    >>> jnp.reshape(jnp.arange(6), (2, -1)).shape
    (2, 3)
    """
    a = asarray(a, "reshape")
    new_shape = _resolve_shape(a.aval.shape, shape)
    if order in ("C", "A"):
        return lax.reshape(a, new_shape, out_sharding=out_sharding)
    if order == "F" and out_sharding is None:
        rev = tuple(range(a.aval.ndim))[::-1]
        out = lax.reshape(lax.transpose(a, rev), new_shape[::-1])
        return lax.transpose(out, tuple(range(len(new_shape)))[::-1])
    raise NotImplementedError(f"jnp.reshape: order={order!r} is not supported (use 'C' "
                              "or 'F'; 'C' with out_sharding).")


@composite(static=("order",), as_is=("out_sharding",))
def ravel(a, order="C", *, out_sharding=None):
    """Like numpy.ravel (``out_sharding`` as :func:`reshape`'s)."""
    a = asarray(a, "ravel")
    return reshape(a, (a.aval.size,), order, out_sharding=out_sharding)


def transpose(a, axes=None):
    """Like numpy.transpose (negative axes allowed)."""
    a = asarray(a, "transpose")
    nd = a.aval.ndim
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        perm = tuple(canonicalize_axis(ax, nd) for ax in axes)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"axes {tuple(axes)} don't match array of shape "
                             f"{a.aval.shape}")
    return lax.transpose(a, perm)


def matrix_transpose(x, /):
    """Transpose the last two dimensions (``x.mT``)."""
    x = asarray(x, "matrix_transpose")
    nd = x.aval.ndim
    if nd < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={nd}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


@composite(static=("axis1", "axis2"))
def swapaxes(a, axis1, axis2):
    """Like numpy.swapaxes."""
    a = asarray(a, "swapaxes")
    perm = list(range(a.aval.ndim))
    i, j = canonicalize_axis(axis1, len(perm)), canonicalize_axis(axis2, len(perm))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def moveaxis(a, source, destination):
    """Like numpy.moveaxis (ints or sequences of ints)."""
    a = asarray(a, "moveaxis")
    nd = a.aval.ndim
    src = canonicalize_axes(source, nd)
    dst = canonicalize_axes(destination, nd)
    if len(src) != len(dst):
        raise ValueError("Inconsistent number of elements: "
                         f"{len(src)} vs {len(dst)}")
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return lax.transpose(a, tuple(perm))


def expand_dims(a, axis):
    """Like numpy.expand_dims: ``axis`` an int or a sequence of ints (a concrete array
    of them too, as JAX's)."""
    a = asarray(a, "expand_dims")
    try:
        axes = (operator.index(axis),)
    except TypeError:
        axes = tuple(map(operator.index, axis))
    out_nd = a.aval.ndim + len(axes)
    return lax.expand_dims(a, canonicalize_axes(tuple(axes), out_nd))


def squeeze(a, axis=None):
    """Like numpy.squeeze."""
    a = asarray(a, "squeeze")
    shp = a.aval.shape
    if axis is None:
        axes = tuple(i for i, d in enumerate(shp) if d == 1)
    else:
        axes = canonicalize_axes(axis, len(shp))
        if any(shp[i] != 1 for i in axes):
            raise ValueError(f"cannot select an axis to squeeze out which has size not "
                             f"equal to one, got shape={shp} and dimensions={axes}")
    return lax.squeeze(a, axes)


def flip(m, axis=None):
    """Like numpy.flip."""
    m = asarray(m, "flip")
    return lax.rev(m, canonicalize_axes(axis, m.aval.ndim))  # (one primitive, as JAX's)


def broadcast_to(array, shape, *, out_sharding=None):
    """Like numpy.broadcast_to. ``out_sharding`` (explicit mode): the result's sharding;
    its entries for ``array``'s dimensions must keep their type's (JAX's error)."""
    x, shape = asarray(array, "broadcast_to"), _util.canonical_shape(shape)
    if out_sharding is None:
        return _util.broadcast_to(x, shape)
    s = abstract_sharding(out_sharding, "jnp.broadcast_to")
    if x.aval.shape == shape and x.aval.sharding == s:
        return x
    nlead, spec = len(shape) - x.aval.ndim, explicit_spec(s.spec, s.mesh, len(shape))
    if nlead < 0 or any(o not in (1, d) for o, d in zip(x.aval.shape, shape[nlead:])) or \
            any(p not in (None, q) for p, q in zip(x.aval.sharding.spec, spec[nlead:])):
        want = x.aval.update(shape=shape, weak_type=False, sharding=NamedSharding(s.mesh, spec))
        raise ValueError(f"Incompatible types for broadcasting: input type={x.aval} and "
                         f"requested type={want}")
    return lax.broadcast_in_dim(x, shape, tuple(range(nlead, len(shape))), out_sharding=s)


def broadcast_shapes(*shapes):
    """Like numpy.broadcast_shapes."""
    return _util.broadcast_shapes(*[_util.canonical_shape(s) for s in shapes])


def broadcast_arrays(*args):
    """Like numpy.broadcast_arrays (returns a list)."""
    arrays = [asarray(x, "broadcast_arrays", i) for i, x in enumerate(args)]
    return _util.broadcast_arrays("broadcast_arrays", *arrays, scalars_ok=False,
                                  explicit=True)


def _sequence(name, arrays):
    if isinstance(arrays, np.ndarray):  # (bfloat16 ones reach here unconverted)
        arrays = asarray(arrays, name)
    if _util.is_array(arrays):
        return [arrays[i] for i in range(len(arrays))]
    arrays = list(arrays)
    return [asarray(x, name, i) for i, x in enumerate(arrays)]


def _promote_all(arrays, dtype):
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtype)
        return [lax.convert_element_type(x, dt) for x in arrays]
    dt, weak = _util.result_type(*arrays)
    return [_util.convert(x, dt, weak) for x in arrays]


@composite(static=("axis", "out", "dtype"))
def concatenate(arrays, axis=0, dtype=None):
    """Like numpy.concatenate; ``axis=None`` flattens the inputs first.

    Dtypes are promoted like a binary operation.
    """
    arrays = _sequence("concatenate", arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        arrays, axis = [ravel(x) for x in arrays], 0
    if any(not x.aval.ndim for x in arrays):
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, arrays[0].aval.ndim)
    return lax.concatenate(_promote_all(arrays, dtype), axis)   # (its shape errors, as JAX)


@composite(static=("axis", "out", "dtype"))
def stack(arrays, axis=0, out=None, dtype=None):
    """Like numpy.stack."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    arrays = _sequence("stack", arrays)
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shapes = {x.aval.shape for x in arrays}
    if len(shapes) != 1:
        raise ValueError(f"All input arrays must have the same shape, got "
                         f"{[x.aval.shape for x in arrays]}")
    axis = canonicalize_axis(axis, arrays[0].aval.ndim + 1)
    return concatenate([lax.expand_dims(x, (axis,)) for x in arrays], axis, dtype)


@composite
def atleast_1d(*arys):
    """Like numpy.atleast_1d."""
    out = [x if x.aval.ndim >= 1 else lax.reshape(x, (1,))
           for x in map(asarray, arys)]
    return out[0] if len(out) == 1 else out


@composite
def atleast_2d(*arys):
    """Like numpy.atleast_2d."""
    out = [x if x.aval.ndim >= 2 else lax.reshape(x, (1,) * (2 - x.aval.ndim) + x.aval.shape)
           for x in map(asarray, arys)]
    return out[0] if len(out) == 1 else out


@composite
def atleast_3d(*arys):
    """Like numpy.atleast_3d: (N,) becomes (1, N, 1) and (M, N) becomes (M, N, 1)."""
    def fix(x):
        s = x.aval.shape
        new = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
        return lax.reshape(x, new)
    out = [fix(x) for x in map(asarray, arys)]
    return out[0] if len(out) == 1 else out


def hstack(tup, dtype=None):
    """Like numpy.hstack."""
    arrays = [atleast_1d(x) for x in _sequence("hstack", tup)]
    return concatenate(arrays, 0 if arrays and arrays[0].aval.ndim == 1 else 1, dtype)


def vstack(tup, dtype=None):
    """Like numpy.vstack."""
    return concatenate([atleast_2d(x) for x in _sequence("vstack", tup)], 0, dtype)
