"""Array creation: array, asarray, zeros/ones/full/empty (and *_like), arange,
linspace, eye, identity. Values are built with lax ops (iota, broadcast_in_dim), as in
JAX, so the same code traces under jit and keeps jaxprs small."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.core import trace as _trace
from xform.core.sharding_types import abstract_sharding
from xform.core.trace import concrete_or_raise
from xform.core.array import ShardedArray
from xform.core.sharding import MeshLayout, NamedSharding
from xform.core.trace import get_aval
from xform.core.transfer import committed_device, device_put_value, on_default_device
from xform.interpreters.composite import composite
from xform.lax.sharding_constraint import reshard
from xform.lax.shapes import eager_placement
from xform.transforms.devices import device_put
from xform.numpy import _util
from xform.numpy._util import asarray as _asarray
from xform.numpy._util import canonical_shape, user_dtype
from xform.numpy._shape import concatenate, stack
from xform.numpy._ufuncs import add, multiply, subtract, true_divide

_PY_SCALAR_TYPES = frozenset(_util.PY_SCALARS)


def _leaves(obj, out):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            _leaves(o, out)
    else:
        out.append(obj)
    return out


def array(object, dtype=None, copy=True, order="K", ndmin=0, *, device=None,
          out_sharding=None):
    """Like numpy.array, with JAX's dtypes.

    A Python scalar gives a weakly typed array; in a (nested) list the dtype is the
    JAX promotion of the elements (Python ints give the default int). Lists that hold
    arrays or tracers are stacked, so this works under transformations too. ``device``
    commits the result there (as ``device_put``); ``out_sharding``: as ``full``'s.

    >>> jnp.array([1, 2.5])
    Array([1. , 2.5], dtype=float32)
    >>> jnp.array(3)
    Array(3, dtype=int32, weak_type=True)
    """
    if order not in (None, "K", "A", "C"):
        raise NotImplementedError(f"jnp.array: order={order!r} is not supported.")
    dt = user_dtype(dtype)
    t = type(object)
    if _util.is_array(object):  # (a copy has a buffer of its own, as JAX's: deleting or
        # donating the original must leave it)
        out = _copy(object) if copy else object
        out = out if dt is None else lax.convert_element_type(out, dt)
    elif t in _PY_SCALAR_TYPES:
        # NB: no wrap-around here (JAX raises OverflowError too), unlike ``x + 300``.
        out = _util.scalar_array(object, dt or dtypes.dtype(object),
                                 dt is None and t is not bool)
        if _trace._context.trace is _trace.eval_trace:
            out = lax._array_copy(out)  # (not the eager ops' shared cached scalar)
    elif isinstance(object, (np.ndarray, np.generic)):
        out = device_put_value(np.asarray(object) if dt is None
                               else np.asarray(object).astype(dt))
    elif isinstance(object, (list, tuple)):
        leaves = _leaves(object, [])
        if any(leaf is None for leaf in leaves):
            raise TypeError("None is not a valid value for jnp.array")
        if dt is None:
            if not leaves:
                dt = dtypes.default_float_dtype()
            elif all(type(leaf) in _PY_SCALAR_TYPES for leaf in leaves):
                dt = dtypes.result_type(*{type(leaf) for leaf in leaves})
            else:
                dt = dtypes.result_type(*leaves)
        if any(_util.is_array(leaf) for leaf in leaves):
            out = stack([array(o, dt) for o in object])
        else:
            host = [np.asarray(leaf) if isinstance(leaf, np.ndarray) else leaf
                    for leaf in object] if isinstance(object, tuple) else object
            out = device_put_value(np.array(host, dtype=dt))
    else:
        value = np.asarray(object)
        if value.dtype == object:
            raise TypeError(f"Cannot convert {type(object).__name__} to an xform array.")
        out = device_put_value(value if dt is None else value.astype(dt))
    nd = out.aval.ndim
    if ndmin > nd:
        out = lax.reshape(out, (1,) * (ndmin - nd) + out.aval.shape)
    if device is None and out_sharding is None:
        return out
    return _placed(out, out_sharding, "array", device)


def _copy(x):
    """``x`` in buffers of its own (as JAX's ``copy_p``); pmap's arrays as they are (a
    one-device program would assemble them, losing their sharding)."""
    if isinstance(x, ShardedArray) and type(x.layout) is MeshLayout:
        return x
    return lax._array_copy(on_default_device(x))


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """Like numpy.asarray (see :func:`array` for the dtype rules); ``copy=True``: a
    buffer of its own."""
    return array(a, dtype, copy=bool(copy), order=order or "K", device=device,
                 out_sharding=out_sharding)


def _filled(shape, fill, dt, weak, sharding=None):
    """``fill`` (a scalar or array) broadcast to ``shape`` as ``dt`` (a scalar ``fill``
    placed or typed as ``sharding``: see ``lax.full``)."""
    if dtypes.is_extended(dt):   # typed keys (jnp.zeros_like(keys)): lax.full fills data
        return lax.full(shape, fill, dt)
    if dt == dtypes.float0:   # (an integer input's tangent, as a custom_jvp rule makes)
        return np.zeros(shape, dtypes.float0)
    cached = None
    if type(fill) in _PY_SCALAR_TYPES:
        fill = cached = _util.scalar_operand(fill, dt, weak)
    else:
        fill = _asarray(fill, "full")
        if dtypes.is_complex(fill.aval.dtype) and dt == dtypes.bool_:  # (asarray's: x != 0)
            fill = lax.ne(fill, lax.full_like(fill, 0))
        fill = lax.convert_element_type(fill, dt, weak)
    if not fill.aval.shape:
        out = lax.full(shape, fill, sharding=sharding)
        if out is cached and _trace._context.trace is _trace.eval_trace:
            out = lax._array_copy(out)   # (as jnp.array's: not the shared cached scalar)
        return out
    return _util.broadcast_to(fill, shape)


def _eager_weak(out, device):
    """Is ``out`` a weak eager value that ``device=`` makes strong? (JAX's eager
    full/full_like on a device build it shard by shard, not weak; its jit keeps it.)"""
    return device is not None and out.aval.weak_type and not isinstance(out, _trace.Tracer)


def _placed(out, out_sharding, name, device=None):
    """``out`` laid out (and typed, in explicit mode) as ``out_sharding``: the creation
    functions' (and ``.at[].get``'s) ``out_sharding=``, which may name only Explicit
    axes (JAX's error names ``name``); or put on ``device`` (a Device or Sharding)."""
    if device is not None:
        if out_sharding is not None:
            raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got "
                             f"{device=} and {out_sharding=}")
        return device_put(out, device)
    if out_sharding is None:
        return out
    abstract_sharding(out_sharding, name)
    return reshard(out, out_sharding)


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    """Like numpy.full; without ``dtype`` the result has ``fill_value``'s dtype and
    weak type. ``out_sharding`` (here and in zeros/ones/empty/arange): the result's
    sharding (NamedSharding, or PartitionSpec under a mesh in context); or ``device``
    (a Device or Sharding) to put it on.

    >>> jnp.full((2,), 1.0)
    Array([1., 1.], dtype=float32, weak_type=True)
    """
    shape = canonical_shape(shape)
    if dtype is None:
        fill = _asarray(fill_value, "full")
        src = fill_value if type(fill_value) in _PY_SCALAR_TYPES else fill  # (see _filled)
        out = _filled(shape, src, fill.aval.dtype, fill.aval.weak_type)
        if _eager_weak(out, device):
            out = _filled(shape, src, fill.aval.dtype, False)
    else:
        out = _filled(shape, fill_value, dtypes.canonicalize_dtype(dtype), False)
    return _placed(out, out_sharding, "full", device)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    """Like numpy.zeros (default dtype: the default float)."""
    return _placed(_filled(canonical_shape(shape), 0, user_dtype(dtype) or
                           dtypes.default_float_dtype(), False), out_sharding, "jnp.zeros",
                   device)


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    """Like numpy.ones (default dtype: the default float)."""
    return _placed(_filled(canonical_shape(shape), 1, user_dtype(dtype) or
                           dtypes.default_float_dtype(), False), out_sharding, "jnp.ones",
                   device)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    """Like numpy.empty, but zero-filled (arrays are immutable)."""
    return _placed(zeros(shape, dtype), out_sharding, "jnp.empty", device)


def like_sharding(x, shape, weak):
    """The sharding ``jnp.full_like(x)`` gives its result, as JAX's: a traced ``x``'s type;
    unless the result is weakly typed, a committed one-device Array's device, or an
    Array's NamedSharding unless reshaped (shards of another shape) from a split ``x``;
    else None (the default device)."""
    if shape is None and isinstance(x, _trace.Tracer):
        return x.aval._sharding
    if weak or not eager_placement():  # (full ignores it then)
        return None
    if committed_device(x) is not None:   # (its memory kind too: pinned_host stays there)
        return x.sharding
    s = x.sharding if type(x) is ShardedArray else None
    if isinstance(s, NamedSharding) and (
            shape is None or tuple(shape) == get_aval(x).shape or s.is_fully_replicated):
        return s
    return None


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Like numpy.full_like; keeps ``a``'s weak type when ``dtype`` is None. As in JAX,
    ``a`` may also be any object with ``shape`` and ``dtype`` (a ``ShapeDtypeStruct``).
    The result has ``a``'s sharding (as ``lax.full_like``'s) unless ``out_sharding`` or
    ``device`` (as ``full``'s) is given."""
    duck = not _util.is_arraylike(a) and hasattr(a, "shape") and hasattr(a, "dtype")
    if not duck:
        _util.check_arraylike("full_like", a)
    # (an array fill_value is asarray(fill, a's dtype) in JAX: strong)
    weak = dtype is None and dtypes.is_weakly_typed(a) and not np.ndim(fill_value)
    dt = dtypes.dtype(a) if dtype is None else dtypes.canonicalize_dtype(dtype)
    shp = canonical_shape(shape if shape is not None else a.shape if duck else _util.shape(a))
    like = None if duck or device is not None or out_sharding is not None or \
        np.ndim(fill_value) else like_sharding(a, shape, weak)
    out, vma = _filled(shp, fill_value, dt, weak, like), _trace._context.vma
    if _eager_weak(out, device):
        out = _filled(shp, fill_value, dt, False, like)
    out = _placed(out, out_sharding, "full_like", device)
    return out if vma is None else vma.like(out, a)  # (in shard_map: varying like ``a``)


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Like numpy.zeros_like."""
    return full_like(a, 0, dtype, shape, device=device, out_sharding=out_sharding)


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Like numpy.ones_like."""
    return full_like(a, 1, dtype, shape, device=device, out_sharding=out_sharding)


def empty_like(prototype, dtype=None, shape=None, *, device=None):
    """Like numpy.empty_like, but zero-filled."""
    return full_like(prototype, 0, dtype, shape, device=device)


def _concrete(x, what):
    x = concrete_or_raise(x, f"It arose in the jnp.arange argument '{what}'.\n")
    if x is not None and np.ndim(x) != 0:
        raise ValueError(f"jax.numpy.arange: arguments must be scalars; got {what}={x}")
    return x


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """Like numpy.arange, with JAX's dtypes (Python ints give the default int).

    Arguments must be concrete scalars. Floating ranges are computed as
    ``start + step * iota`` in the result dtype (float32 for narrower floats).

    >>> jnp.arange(3), jnp.arange(0, 1, 0.25)
    (Array([0, 1, 2], dtype=int32), Array([0.  , 0.25, 0.5 , 0.75], dtype=float32))
    """
    if out_sharding is not None or device is not None:
        return _placed(arange(start, stop, step, dtype), out_sharding, "jnp.arange", device)
    if shape_poly.is_symbolic_dim(start) and stop is None and step is None:
        return lax.iota(user_dtype(dtype) or dtypes.canonicalize_dtype(np.int64), start)
    if any(shape_poly.is_symbolic_dim(v) for v in (start, stop, step)):   # as JAX's
        start, stop = (0, start) if stop is None else (start, stop)
        if step == 0:
            raise ValueError("arange: step must not be zero.")
        step = 1 if step is None else step
        gap, dist = (step, stop - start) if step > 0 else (-step, start - stop)
        dt = user_dtype(dtype) or dtypes.canonicalize_dtype(np.int64)
        return lax.add(_util.scalar_operand(start, dt, False), lax.mul(
            _util.scalar_operand(step, dt, False),
            lax.iota(dt, shape_poly.max_dim(0, dist + gap - 1) // gap)))
    start = _concrete(start, "stop" if stop is None and step is None else "start")
    stop, step = _concrete(stop, "stop"), _concrete(step, "step")
    if dtype is None:
        dt = dtypes.result_type(start, *(v for v in (stop, step) if v is not None))
    else:
        dt = dtypes.canonicalize_dtype(dtype)
    if any(dtypes.is_complex(dtypes.dtype(v)) for v in (start, stop, step)
           if v is not None):
        raise ValueError("Passing complex start/stop/step to jnp.arange is not supported.")
    start, stop, step = (None if v is None else np.asarray(v).item()
                         for v in (start, stop, step))
    if stop is None:
        start, stop = 0, start
    if step is not None:
        if step == 0:
            raise ValueError("arange: step must not be zero.")
        work = (dtypes.float32 if dtypes.is_floating(dt) and dt.itemsize < 4 else dt)
        size = max(0, int(np.ceil((stop - start) / step)))
        out = lax.add(_util.scalar_operand(start, work, False),
                      lax.mul(_util.scalar_operand(step, work, False),
                              lax.iota(work, size)))
        return lax.convert_element_type(out, dt)
    size = max(0, int(np.ceil(stop - start)))
    if start == 0:
        return lax.iota(dt, size)
    return lax.add(_util.scalar_operand(start, dt, False), lax.iota(dt, size))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """Like numpy.linspace, computed as JAX does:
    ``start * (1 - i/d) + stop * (i/d)``, so both endpoints are exact. One compiled
    call, so XLA fuses it as it does JAX's jitted one (values agree to the last bit).
    ``device`` commits the result there (as ``device_put``).

    >>> jnp.linspace(0, 1, 5)
    Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    out = _linspace(start, stop, num, endpoint, retstep, dtype, axis)
    return out if device is None else device_put(out, device)


@composite(static=("num", "endpoint", "retstep", "dtype", "axis"))
def _linspace(start, stop, num, endpoint, retstep, dtype, axis):
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = _asarray(start, "linspace"), _asarray(stop, "linspace", 1)
    if dtype is None:
        dt = dtypes.to_inexact_dtype(dtypes.result_type(start, stop))
    else:
        dt = dtypes.canonicalize_dtype(dtype)
    comp = dtypes.to_inexact_dtype(dt)
    start = lax.convert_element_type(start, comp)
    stop = lax.convert_element_type(stop, comp)
    bshape = _util.broadcast_shapes(start.aval.shape, stop.aval.shape)
    b_start, b_stop = _util.broadcast_to(start, bshape), _util.broadcast_to(stop, bshape)
    axis = len(bshape) + axis + 1 if axis < 0 else axis
    bounds = list(bshape)
    bounds.insert(axis, 1)
    div = num - 1 if endpoint else num
    if num > 1:
        delta = true_divide(subtract(stop, start), _util.scalar_array(div, comp, False))
        iota_shape = [1] * len(bounds)
        iota_shape[axis] = div
        real = np.dtype(dtypes.finfo(comp).dtype)
        step = true_divide(lax.reshape(lax.iota(real, div), iota_shape),
                           _util.scalar_array(div, real, False))
        step = lax.convert_element_type(step, comp)
        out = add(multiply(lax.reshape(b_start, bounds), subtract(1, step)),
                  multiply(lax.reshape(b_stop, bounds), step))
        if endpoint:
            out = concatenate([out, lax.expand_dims(b_stop, (axis,))], axis)
    elif num == 1:
        delta = _util.scalar_array(np.nan, comp, False) if endpoint else subtract(stop, start)
        out = lax.reshape(b_start, bounds)
    else:
        bounds[axis] = 0
        delta = _util.scalar_array(np.nan, comp, False)
        out = zeros(bounds, dt)
    if dtypes.is_integer(dt) and not dtypes.is_integer(out.aval.dtype):
        out = lax.floor(out)  # JAX's: negatives saturate to 0 in an unsigned dt
    out = lax.convert_element_type(out, dt)
    return (out, delta) if retstep else out


def _dim(d):
    """A dimension argument: an int, or a symbolic dimension kept as is."""
    return d if shape_poly.is_symbolic_dim(d) else operator.index(d)


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """Like numpy.eye; ``device`` commits the result there (as ``device_put``)."""
    N = _dim(N)
    M = N if M is None else _dim(M)
    k = operator.index(k)
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got {N} and {M}")
    dt = user_dtype(dtype) or dtypes.default_float_dtype()
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    if k:
        rows = lax.add(rows, _util.scalar_array(k, dtypes.int32, False))
    return _placed(lax.convert_element_type(lax.eq(rows, cols), dt), None, "eye", device)


def identity(n, dtype=None):
    """Like numpy.identity."""
    return eye(n, dtype=dtype)
