"""The rest of the NumPy surface: logspace/geomspace, host-side constructors and I/O
(frombuffer, load, save, ...), dtype predicates (isscalar, isdtype, can_cast),
printing, vectorize, i0 and the window functions, packbits/unpackbits."""
import functools
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.core.sharding import Sharding
from xform.core.transfer import committed_device
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._creation import array, linspace, ones
from xform.numpy._shape import moveaxis, ravel, swapaxes
from xform.numpy._util import asarray
from xform.numpy._ufuncs import log10
from xform.transforms.devices import device_put
from xform.transforms.vmap import vmap


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """Like numpy.logspace: ``base ** linspace(start, stop, num)``.

    >>> jnp.logspace(0, 2, 3)
    Array([  1.,  10., 100.], dtype=float32)
    """
    return _logspace(start, stop, num, endpoint, base, dtype, axis)


@composite(static=("num", "endpoint", "dtype", "axis"))  # (JAX's jitted _logspace)
def _logspace(start, stop, num, endpoint, base, dtype, axis):
    dt = _util.user_dtype(dtype) or dtypes.to_inexact_dtype(dtypes.result_type(start, stop))
    comp = dtypes.to_inexact_dtype(dt)
    lin = linspace(start, stop, num, endpoint=endpoint, dtype=comp, axis=axis)
    return lax.convert_element_type(uf.power(base, lin), dt)  # (a weak base: comp)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Like numpy.geomspace: a geometric progression from ``start`` to ``stop``."""
    return _geomspace(start, stop, num, endpoint, dtype, axis)


@composite(static=("num", "endpoint", "dtype", "axis"))  # (JAX's jitted _geomspace)
def _geomspace(start, stop, num, endpoint, dtype, axis):
    dt = _util.user_dtype(dtype) or dtypes.to_inexact_dtype(dtypes.result_type(start, stop))
    comp = dtypes.to_inexact_dtype(dt)
    start = lax.convert_element_type(asarray(start, "geomspace"), comp)
    stop = lax.convert_element_type(asarray(stop, "geomspace", 1), comp)
    sign = lax.sign(start)
    res = uf.multiply(sign, _logspace(log10(uf.true_divide(start, sign)),
                                      log10(uf.true_divide(stop, sign)), num, endpoint,
                                      10.0, comp, 0))
    if axis != 0:
        res = moveaxis(res, 0, axis)
    return lax.convert_element_type(res, dt)


# ---- host-side constructors and I/O ----

def fromfunction(function, shape, *, dtype=float, **kwargs):
    """Like numpy.fromfunction: ``function`` applied to the index grids (vmapped over
    each axis, so it may be any function of scalar indices)."""
    shape = _util.canonical_shape(shape)
    dt = dtypes.canonicalize_dtype(dtype)
    fn = functools.partial(function, **kwargs)
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        fn = vmap(fn, in_axes=tuple(in_axes[::-1]))
    return fn(*(lax.iota(dt, s) for s in shape))


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """Like numpy.frombuffer (a copy on the device)."""
    return asarray(np.frombuffer(buffer, dtypes.canonicalize_dtype(dtype), count, offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """Like numpy.fromstring with a text separator."""
    return asarray(np.fromstring(string, dtypes.canonicalize_dtype(dtype), count, sep=sep))


def fromiter(*args, **kwargs):
    """Not supported, as in JAX: iterating a Python iterable is not a pure function."""
    raise NotImplementedError("jnp.fromiter() is not implemented because it may be "
                              "non-pure and thus unsafe for use with JIT and other JAX "
                              "transformations. Consider using jnp.asarray(np.fromiter(...)) "
                              "instead, and note that the result will not be traceable.")


def fromfile(*args, **kwargs):
    """Not supported, as in JAX: reading a file is not a pure function."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be "
                              "non-pure and thus unsafe for use with JIT and other JAX "
                              "transformations. Consider using jnp.asarray(np.fromfile(...)) "
                              "instead, and note that the result will not be traceable.")


def from_dlpack(x, /, *, device=None, copy=None):
    """Like numpy.from_dlpack (through a host copy)."""
    return asarray(np.from_dlpack(x))


def load(file, *args, **kwargs):
    """Like numpy.load; arrays come back as xform Arrays."""
    out = np.load(file, *args, **kwargs)
    return asarray(out) if isinstance(out, np.ndarray) and out.dtype != object else out


save = np.save
savez = np.savez


def copy(a, order=None):
    """Like numpy.copy (arrays are immutable, so this is a no-op on xform arrays)."""
    return array(a, copy=True, order=order)


def astype(x, dtype, /, *, copy=False, device=None):
    """Like numpy.astype: ``x`` converted to ``dtype`` (strongly typed); ``device``
    commits the result there (as ``device_put``)."""
    x = asarray(x, "astype")
    dtype = dtypes.canonicalize_dtype(dtype)
    if dtypes.is_complex(x.aval.dtype) and dtype == dtypes.bool_:
        x = lax.ne(x, _util.scalar_array(0, x.aval.dtype, False))  # not just the real part
    out = lax.convert_element_type(x, dtype)
    if copy and out is x:   # (a buffer of its own, as JAX's copy_p)
        out = lax._array_copy(out)
    if device is None:
        return out
    if isinstance(device, Sharding) and len(device._device_assignment) > 1:
        return device_put(out, device)  # (laid out as that sharding says, as JAX's)
    d = device._device_assignment[0] if isinstance(device, Sharding) else device
    if committed_device(x) not in (None, d):
        raise ValueError(  # (JAX's, its conversion being a computation placed on ``d``)
            "Received incompatible devices for jitted computation. Got argument args[0] "
            f"of convert_element_type with shape {x.aval.str_short()} and with device ids "
            f"[{committed_device(x).id}] on platform {d.platform.upper()} and "
            f"sharding_constraint inside jit with device ids [{d.id}] on platform "
            f"{d.platform.upper()}")
    return device_put(out, d)


# ---- predicates ----

def isscalar(element):
    """Like numpy.isscalar, with JAX's rule: rank-0 arrays count as scalars."""
    if _util.is_array(element):
        return element.aval.ndim == 0
    return (type(element) in _util.PY_SCALARS or np.isscalar(element)
            or (isinstance(element, np.ndarray) and element.ndim == 0))


def iterable(y):
    """Like numpy.iterable: whether ``iter(y)`` works."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


_KINDS = {
    "bool": lambda d: d == dtypes.bool_,
    "signed integer": lambda d: dtypes.is_integer(d) and not dtypes.is_unsigned(d),
    "unsigned integer": dtypes.is_unsigned,
    "integral": dtypes.is_integer,
    "real floating": dtypes.is_floating,
    "complex floating": dtypes.is_complex,
    "numeric": lambda d: d != dtypes.bool_,
}


def isdtype(dtype, kind):
    """Like numpy.isdtype: ``kind`` is a dtype, a kind name ("bool", "signed integer",
    "unsigned integer", "integral", "real floating", "complex floating", "numeric") or
    a tuple of them."""
    dt = np.dtype(dtypes.canonicalize_dtype(dtype))
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"Unrecognized {k!r} passed to isdtype")
            if _KINDS[k](dt):
                return True
        elif dt == np.dtype(dtypes.canonicalize_dtype(k)):
            return True
    return False


def can_cast(from_, to, casting="safe"):
    """Like numpy.can_cast on dtypes (or arrays' dtypes)."""
    src = dtypes.dtype(from_) if not isinstance(from_, (np.dtype, type, str)) else from_
    return bool(np.can_cast(np.dtype(src), np.dtype(to), casting))


# ---- printing ----

array_str = np.array_str     # NumPy's own, as in JAX (they read arrays via __array__)
array_repr = np.array_repr
printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions


# ---- vectorize ----

def _parse_signature(signature):
    ins, outs = signature.replace(" ", "").split("->")

    def dims(part):
        groups = part[1:-1].split("),(") if part else []
        return [tuple(d for d in g.split(",") if d) for g in groups]
    return dims(ins), dims(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """Like numpy.vectorize, by ``vmap``: broadcast the loop dimensions of the
    arguments and map ``pyfunc`` over them (``signature`` gives core dimensions,
    e.g. "(n),(n)->()").

    >>> jnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(jnp.ones((2, 3)),
    ...                                                           jnp.ones(3))
    Array([3., 3.], dtype=float32)
    """

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        excl = {i for i in excluded if isinstance(i, int)}
        pos = [i for i in range(len(args)) if i not in excl]
        arrays = [asarray(args[i], "vectorize", i) for i in pos]
        cores = (_parse_signature(signature)[0] if signature is not None
                 else [()] * len(arrays))
        if len(cores) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected "
                            f"{len(cores)}, got {len(arrays)}")
        loops = [a.aval.shape[:a.aval.ndim - len(c)] for a, c in zip(arrays, cores)]
        for a, c in zip(arrays, cores):
            if a.aval.ndim < len(c):
                raise ValueError(f"input with shape {a.aval.shape} does not have enough "
                                 f"dimensions for its signature {c}")
        loop = _util.broadcast_shapes(*loops, name="vectorize")
        arrays = [_util.broadcast_to(a, loop + a.aval.shape[len(lp):])
                  for a, lp in zip(arrays, loops)]

        def call(*xs):
            full = list(args)
            for i, x in zip(pos, xs):
                full[i] = x
            return pyfunc(*full, **{k: v for k, v in kwargs.items()})

        fn = call
        for _ in loop:
            fn = vmap(fn)
        return fn(*arrays)
    return wrapped


# ---- special function and windows ----

@composite
def i0(x, /):
    """Like numpy.i0: the modified Bessel function of order 0, computed as JAX's:
    ``exp(|x|) * bessel_i0e(|x|)`` (so NaN at +-inf, where inf * 0)."""
    x, = _util.promote_dtypes("i0", x, to="inexact")
    if dtypes.is_complex(x.aval.dtype):
        raise ValueError("i0 does not support complex-valued inputs")
    ax = lax.abs(x)
    return lax.mul(lax.exp(ax), lax.bessel_i0e(ax))


def _window(name, M):
    # (int(), as JAX: a float M is truncated, ``hanning(2.5)`` has 2 points)
    M = int(_util.concrete_or_error(M, "M", name).item())
    dt = dtypes.default_float_dtype()
    return M, dt, lax.iota(dt, max(M, 0))


def _cos_window(name, M, coeffs):
    M, dt, n = _window(name, M)
    if M <= 1:
        return ones(max(M, 0), dt)
    out = lax.full((M,), coeffs[0], dt)
    for k, c in enumerate(coeffs[1:], 1):
        angle = lax.mul(n, _util.scalar_array(2 * np.pi * k / (M - 1), dt, False))
        out = lax.add(out, lax.mul(_util.scalar_array(c, dt, False), lax.cos(angle)))
    return out


def bartlett(M):
    """Like numpy.bartlett: the triangular window."""
    M, dt, n = _window("bartlett", M)
    if M <= 1:
        return ones(max(M, 0), dt)
    dist = lax.abs(lax.sub(lax.mul(n, _util.scalar_array(2, dt, False)),
                           _util.scalar_array(M - 1, dt, False)))
    return lax.sub(_util.scalar_array(1, dt, False),
                   lax.div(dist, _util.scalar_array(M - 1, dt, False)))


def blackman(M):
    """Like numpy.blackman."""
    return _cos_window("blackman", M, (0.42, -0.5, 0.08))


def hamming(M):
    """Like numpy.hamming."""
    return _cos_window("hamming", M, (0.54, -0.46))


def hanning(M):
    """Like numpy.hanning."""
    return _cos_window("hanning", M, (0.5, -0.5))


def kaiser(M, beta):
    """Like numpy.kaiser: ``i0(beta sqrt(1 - ((n - a) / a)**2)) / i0(beta)``."""
    M, dt, n = _window("kaiser", M)
    if M <= 1:
        return ones(max(M, 0), dt)
    alpha = _util.scalar_array(0.5 * (M - 1), dt, False)
    beta = lax.convert_element_type(asarray(beta, "kaiser", 1), dt)
    ratio = lax.div(lax.sub(n, alpha), alpha)
    arg = lax.mul(beta, lax.sqrt(lax.sub(_util.scalar_array(1, dt, False),
                                         lax.integer_pow(ratio, 2))))
    return lax.div(i0(arg), i0(beta))


# ---- bits ----

@composite(static=("axis", "bitorder"))
def packbits(a, axis=None, bitorder="big"):
    """Like numpy.packbits: groups of 8 truth values as uint8 bytes."""
    a = asarray(a, "packbits")
    if not (dtypes.is_integer(a.aval.dtype) or a.aval.dtype == dtypes.bool_):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = lax.convert_element_type(uf.not_equal(a, 0), dtypes.uint8)
    if axis is None:
        bits, axis = ravel(bits), 0
    bits = swapaxes(bits, axis, -1)
    rem = bits.aval.shape[-1] % 8
    if rem:
        bits = lax.pad(bits, _util.scalar_array(0, dtypes.uint8, False),
                       [(0, 0, 0)] * (bits.aval.ndim - 1) + [(0, 8 - rem, 0)])
    bits = lax.reshape(bits, bits.aval.shape[:-1] + (bits.aval.shape[-1] // 8, 8))
    shifts = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        shifts = shifts[::-1].copy()
    shifts = lax.broadcast_in_dim(asarray(shifts), bits.aval.shape, (bits.aval.ndim - 1,))
    packed = lax.reduce_sum(lax.shift_left(bits, shifts), (bits.aval.ndim - 1,))
    return swapaxes(packed, axis, -1)


@composite(static=("axis", "count", "bitorder"))
def unpackbits(a, axis=None, count=None, bitorder="big"):
    """Like numpy.unpackbits: each uint8 as 8 bits (``count`` crops or zero-pads)."""
    a = asarray(a, "unpackbits")
    if a.aval.dtype != dtypes.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    if axis is None:
        a, axis = ravel(a), 0
    a = swapaxes(a, axis, -1)
    masks = np.left_shift(np.uint8(1), np.arange(8, dtype=np.uint8))
    if bitorder == "big":
        masks = masks[::-1].copy()
    shape = a.aval.shape + (8,)
    anded = lax.bitwise_and(lax.broadcast_in_dim(a, shape, tuple(range(a.aval.ndim))),
                            lax.broadcast_in_dim(asarray(masks), shape, (a.aval.ndim,)))
    bits = lax.convert_element_type(lax.ne(anded, lax.full_like(anded, 0)), dtypes.uint8)
    bits = lax.reshape(bits, a.aval.shape[:-1] + (a.aval.shape[-1] * 8,))
    if count is not None:
        n = bits.aval.shape[-1]
        count = operator.index(count)
        if count < 0:  # (NumPy's: that many bits trimmed from the end, none below 0)
            count = max(n + count, 0)
        if count > n:
            bits = lax.pad(bits, _util.scalar_array(0, dtypes.uint8, False),
                           [(0, 0, 0)] * (bits.aval.ndim - 1) + [(0, count - n, 0)])
        else:
            bits = lax.slice(bits, (0,) * bits.aval.ndim, bits.aval.shape[:-1] + (count,))
    return swapaxes(bits, axis, -1)
