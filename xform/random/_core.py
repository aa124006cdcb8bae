"""Keys (PRNGKey, key, split, fold_in, bits) and the samplers built directly on
uniform bits (uniform, normal, truncated_normal, bernoulli, randint); ``_derived`` has
their simple transforms.

Keys are raw ``uint32`` arrays (``PRNGKey``) or typed key scalars (``key``, see
``_keys``); the functions here take either and return keys of the kind given. Inside,
every key is typed (a raw key is the default implementation's data, as in JAX), and
split/fold_in/bits go to its implementation (``_prng``: threefry2x32, rbg,
unsafe_rbg). Each sampler checks its arguments, then calls its jitted impl where JAX
does (``_jit``): one executable eagerly, a ``func.call`` under an outer jit.
"""
import functools
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes as _dt, shape_poly
from xform.core.dtype_promotion import TypePromotionError
from xform.core.trace import get_aval
from xform.lax.prng import bitcast_convert_type
from xform.random import _keys, _prng
from xform.interpreters import partial_eval as pe
from xform.transforms.jit import jit

_UINT = _prng.UINT

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "split",
           "fold_in", "bits",
           "uniform", "normal", "truncated_normal", "bernoulli"]


# ---- keys ----

def PRNGKey(seed, *, impl=None):
    """A raw (legacy) key, ``uint32[2]`` (``uint32[4]`` for rbg and unsafe_rbg), from an
    integer seed. ``impl`` defaults to ``jax_default_prng_impl``; as in JAX, the raw key
    does not remember it: pass it where that same default is set.

    >>> import xform.random as random
    >>> random.PRNGKey(0)
    Array([0, 0], dtype=uint32)
    >>> random.PRNGKey(0, impl="rbg")
    Array([0, 0, 0, 0], dtype=uint32)
    """
    return _prng.seed(_keys.resolve_impl(impl), seed, "PRNGKey")


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (a scalar of dtype ``key<fry>``, or ``key<rbg>``/``key<urbg>``
    for ``impl="rbg"``/``"unsafe_rbg"``) from an integer seed.

    >>> import xform.random as random
    >>> k = random.key(1)
    >>> k.shape, k.dtype
    ((), key<fry>)
    >>> random.key(1, impl="rbg").dtype
    key<rbg>
    """
    impl = _impl_or_dtype(impl, dtype, "key")
    return _keys.random_wrap(_prng.seed(impl, seed, "key"), impl)


def _impl_or_dtype(impl, dtype, fn):
    """The implementation an ``impl=`` or (its other name) ``dtype=`` argument picks."""
    if dtype is not None:
        if impl is not None:
            raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                             f"jax.random.{fn}")
        impl = dtype
    return _keys.resolve_impl(impl)


def key_data(keys):
    """The ``uint32[..., *key_shape]`` data under ``keys`` (raw keys are returned as
    they are).

    >>> import xform.random as random
    >>> random.key_data(random.key(0))
    Array([0, 0], dtype=uint32)
    """
    return _keys.random_unwrap(_keys.typed_key("key_data", keys, allow_batched=True)[0])


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over ``uint32[..., *key_shape]`` key data (the inverse of ``key_data``).

    >>> import numpy as np, xform.random as random
    >>> random.wrap_key_data(np.zeros((3, 2), np.uint32)).shape
    (3,)
    """
    impl = _impl_or_dtype(impl, dtype, "wrap_key_data")
    if _keys.is_typed_key(key_bits_array):
        raise TypeError("wrap_key_data accepts raw uint32 key data, but was given a PRNG "
                        "key array.")
    # checked as given (JAX's errors; uint64 data is refused, never narrowed)
    _keys.check_has_array_attrs(key_bits_array)
    _keys.check_key_data(key_bits_array, impl)
    return _keys.random_wrap(jnp.asarray(key_bits_array), impl)


def key_dtype(impl=None):
    """The dtype of typed keys of PRNG implementation ``impl`` (default: the
    ``jax_default_prng_impl`` one).

    >>> import xform.random as random
    >>> random.key_dtype(), random.key_dtype("unsafe_rbg")
    (key<fry>, key<urbg>)
    """
    return _keys.KEY_DTYPES[_keys.resolve_impl(impl).name]


def key_impl(keys):
    """The name of the PRNG implementation of ``keys`` (of a raw key: the default one),
    as JAX's for its built-in implementations.

    >>> import xform.random as random
    >>> random.key_impl(random.key(0, impl="rbg"))
    'rbg'
    """
    keys = _keys.typed_key("key_impl", keys, allow_batched=True)[0]
    return _keys.impl_of(keys).name


def clone(key):
    """A copy of ``key`` that ``jax_debug_key_reuse`` sees as fresh (values unchanged).

    >>> import xform.random as random
    >>> random.clone(random.key(0)).shape
    ()
    """
    if not _keys.is_typed_key(key):
        # JAX's random_clone is the identity on anything else (a raw key of any
        # implementation: uint32[4] rbg data is not checked against the default's).
        return key if isinstance(key, (bool, int, float, complex)) else jnp.asarray(key)
    return _keys.random_wrap(_keys.random_unwrap(key), _keys.impl_of(key))


def _key_data(name, k):
    # What the jitted impls take: a single typed key (a raw key wrapped, as the default
    # implementation's, here, outside the jit, as the key checks and key-reuse marks are).
    return _keys.typed_key(name, k)[0]


def _rewrap(raw, keys):
    # Keys returned as given: raw data for a raw key, typed keys for a typed one.
    return _keys.random_unwrap(keys) if raw else keys


def _jit(*static_argnums, static_argnames=(), inline=False):
    """JAX's ``@jit(static_argnums=...)`` on a sampler's private impl, mirrored.

    Each public function checks and canonicalizes its arguments and calls its impl
    through this, wherever JAX does (``_uniform``, ``_normal``, ``_gamma``, ...). Inside
    an outer jit the impl lowers to a ``func.call``, so parameters (``minval``, ``a``)
    reach its body as call arguments exactly as in JAX's program, and XLA's constant
    folding and algebraic simplification fall the same way: inlined, they are literals
    in the body and XLA folds them differently (1 to ~100 ulp apart). Eagerly, a call
    runs one cached executable, as JAX's. ``inline`` is JAX's ``inline=True``: no
    boundary when staged into an enclosing jit, a jitted call otherwise."""

    def wrap(fn):
        jitted = jit(fn, static_argnums=static_argnums, static_argnames=static_argnames)
        if not inline:
            return jitted

        @functools.wraps(fn)
        def call(*args, **kwargs):
            return (fn if pe.staging() else jitted)(*args, **kwargs)
        return call
    return wrap


def _static_shape(name, shape):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(d if shape_poly.is_symbolic_dim(d) else operator.index(d)
                     for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of static integers (not traced "
                        f"values under jit), got {shape!r}.") from None


def split(key, num=2):
    """Split a key into ``num`` (an int or a shape) new keys.

    >>> import xform.random as random
    >>> random.split(random.PRNGKey(0)).shape
    (2, 2)
    """
    keys, raw = _keys.typed_key("split", key)
    return _rewrap(raw, _split(keys, _static_shape("split", num)))


@_jit(1)
def _split(key, shape):
    return _prng.random_split(key, shape)


def fold_in(key, data):
    """Fold integer ``data`` into ``key``, giving a new key.

    >>> import xform.random as random
    >>> random.fold_in(random.PRNGKey(0), 1).shape
    (2,)
    """
    keys, raw = _keys.typed_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use jax.vmap for batching.")
    # as JAX: a Python int outside uint32's range is an OverflowError, arrays convert
    return _rewrap(raw, _fold_in(keys, jnp.asarray(data, dtype=np.uint32)))


@_jit()
def _fold_in(key, data):
    return _prng.random_fold_in(key, data)


def _random_bits(key, bit_width, shape):
    # No jit boundary inside samplers: JAX's random_bits lowers inline.
    return _prng.random_bits(_key_data("random_bits", key), bit_width, shape)


def bits(key, shape=(), dtype=None):
    """Uniform random bits of an unsigned integer ``dtype`` (default uint32, or uint64
    under x64).

    As in JAX, ``dtype`` is canonicalized first: without ``jax_enable_x64`` a requested
    ``uint64`` gives the uint32 draw (the same values as ``dtype=uint32``), not the
    64-bit draw truncated.

    >>> import xform.random as random
    >>> random.bits(random.PRNGKey(0), (3,)).dtype
    dtype('uint32')
    """
    kd = _key_data("bits", key)
    dtype = _dt.default_uint_dtype() if dtype is None else _dt.canonicalize_dtype(dtype)
    if not np.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, "
                         f"got {dtype}")
    return _bits(kd, dtype.itemsize * 8, _static_shape("bits", shape))


# (JAX binds its random_bits primitive: one executable eagerly, inline under jit; a
# boundary here changes no value, the bits being integers)
_bits = _jit(1, 2)(_random_bits)


def _float_dtype(name, dtype, complex_ok=False):
    # JAX's default is Python ``float``: float32, or float64 under x64. A wrong kind is
    # JAX's ValueError ("dtype argument to `uniform` must be a float dtype, got int32").
    dtype = _dt.default_float_dtype() if dtype is None else np.dtype(dtype)
    if not (np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16"
            or (complex_ok and np.issubdtype(dtype, np.complexfloating))):
        kinds = "a float or complex" if complex_ok else "a float"
        raise ValueError(f"dtype argument to `{name}` must be {kinds} dtype, got "
                         f"{_dt.canonicalize_dtype(dtype)}")
    return _dt.canonicalize_dtype(dtype)


def _check_all_safe_to_cast(name, dtype, *args):
    """JAX's check on parameters cast to the sample ``dtype``: a strongly typed
    parameter of a wider dtype (``np.float32(2)`` for ``dtype=float16``) is a
    TypePromotionError, not silently rounded; Python scalars (weak) are fine."""
    for arg in args:
        src = _dt.dtype(arg)
        if src != dtype and _dt.result_type(arg, dtype) != dtype:
            raise TypePromotionError(f"In arguments to {name}, cannot safely cast "
                                     f"argument of type {src} to {dtype}")


def _check_param_shape(name, argname, val, shape):
    s = np.shape(val) if not hasattr(val, "aval") else get_aval(val).shape
    s = tuple(getattr(val, "shape", s))
    try:
        ok = len(s) <= len(shape) and jnp.broadcast_shapes(s, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: {argname} of shape {s} cannot be broadcast to the "
                         f"requested shape {shape}.")


def _to_rank(x, rank):
    # lax.broadcast_to_rank: leading size-1 axes up to ``rank``.
    x = jnp.asarray(x)
    return lax.expand_dims(x, tuple(range(rank - x.ndim))) if x.ndim < rank else x


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)``.

    >>> import xform.random as random
    >>> random.uniform(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    kd = _key_data("uniform", key)
    shape = _static_shape("uniform", shape)
    dtype = _float_dtype("uniform", dtype)
    _check_param_shape("uniform", "minval", minval, shape)
    _check_param_shape("uniform", "maxval", maxval, shape)
    return _uniform(kd, minval, maxval, shape, dtype)


@_jit(3, 4)
def _uniform(key, minval, maxval, shape, dtype):
    # The mantissa of a float in [1, 2) filled with random bits, minus 1, scaled.
    minval = _to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    fi = jnp.finfo(dtype)
    nbits, nmant = fi.bits, fi.nmant
    rng_bits = 8 if nmant < 8 else nbits
    udt = _UINT[nbits]
    b = _random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        b = lax.convert_element_type(b, udt)
    fb = lax.shift_right_logical(b, np.array(rng_bits - nmant, udt))
    fb = lax.bitwise_or(fb, np.array(1.0, dtype).view(udt))
    floats = lax.sub(bitcast_convert_type(fb, dtype), np.array(1.0, dtype))
    # minval and maxval may have different shapes that broadcast to ``shape`` (e.g.
    # (2, 1) and (3,)): jnp's broadcasting, as JAX's ``floats * (maxval - minval)``.
    out = jnp.add(jnp.multiply(floats, jnp.subtract(maxval, minval)), minval)
    return lax.max(jnp.broadcast_to(minval, shape), jnp.broadcast_to(out, shape))


def normal(key, shape=(), dtype=None):
    """Standard normal samples (``sqrt(2) * erfinv(u)``, u uniform in (-1, 1)); for a
    complex ``dtype``, real and imaginary parts each of variance 1/2, as JAX's.

    >>> import xform.random as random
    >>> random.normal(random.PRNGKey(0), (3,)).shape
    (3,)
    """
    kd = _key_data("normal", key)
    dtype = _float_dtype("normal", dtype, complex_ok=True)
    return _normal(kd, _static_shape("normal", shape), dtype)


@_jit(1, 2)
def _normal(key, shape, dtype):
    if not np.issubdtype(dtype, np.complexfloating):
        return _normal_real(key, shape, dtype)
    # complex: independent real and imaginary parts, each of variance 1/2
    key_re, key_im = split(key)
    real_dtype = np.array(0, dtype).real.dtype
    re = _normal_real(key_re, shape, real_dtype).astype(dtype)
    im = _normal_real(key_im, shape, real_dtype).astype(dtype)
    return (re + 1j * im) / np.array(np.sqrt(2), dtype)


@_jit(1, 2)
def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples truncated to ``[lower, upper]``.

    >>> import xform.random as random
    >>> x = random.truncated_normal(random.PRNGKey(0), -1.0, 1.0, (4,))
    >>> bool((abs(x) <= 1).all())
    True
    """
    kd = _key_data("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is not None:
        shape = _static_shape("truncated_normal", shape)
        _check_param_shape("truncated_normal", "lower", lower, shape)
        _check_param_shape("truncated_normal", "upper", upper, shape)
    return _truncated_normal(kd, lower, upper, shape, dtype)


@_jit(3, 4)
def _truncated_normal(key, lower, upper, shape, dtype):
    if shape is None:
        shape = tuple(np.broadcast_shapes(np.shape(lower), np.shape(upper)))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(jnp.true_divide(lower, sqrt2))
    b = lax.erf(jnp.true_divide(upper, sqrt2))
    u = uniform(key, shape, dtype, a, b)
    out = lax.mul(sqrt2, lax.erf_inv(u))
    # clamped into the open interval: rounding (or u == a) must not leave it
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p``.

    >>> import xform.random as random
    >>> random.bernoulli(random.PRNGKey(0), 0.5, (3,)).dtype
    dtype('bool')
    """
    if shape is not None:
        shape = _static_shape("bernoulli", shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    kd = _key_data("bernoulli", key)
    p = jnp.asarray(p)
    if not np.issubdtype(p.dtype, np.floating) and p.dtype.name != "bfloat16":
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got "
                        f"{p.dtype}.")
    if shape is not None:
        _check_param_shape("bernoulli", "p", p, shape)
    return _bernoulli(kd, p, shape=shape, mode=mode)


@_jit(static_argnames=("shape", "mode"))
def _bernoulli(key, p, shape, mode):
    shape = p.shape if shape is None else shape
    dtype = p.dtype
    if mode == "high":   # u2 < p - u1 with u2 scaled below u1's resolution
        u = uniform(key, (2, *shape), dtype)
        u2 = u[1] * 2 ** -int(jnp.finfo(dtype).nmant)
        return u2 < p - u[0]
    return uniform(key, shape, dtype) < p


def _convert_and_clip(val, dtype):
    # Clip to dtype's range in val's own dtype, then convert (no wrap-around).
    src, dst = jnp.iinfo(val.dtype), jnp.iinfo(dtype)
    lo, hi = max(src.min, dst.min), min(src.max, dst.max)
    val = jnp.clip(val, np.array(lo, val.dtype), np.array(hi, val.dtype))
    return lax.convert_element_type(val, dtype)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers uniform in ``[minval, maxval)`` (JAX's 2*nbits modulus scheme).

    >>> import xform.random as random
    >>> x = random.randint(random.PRNGKey(0), (5,), 0, 10)
    >>> bool(((x >= 0) & (x < 10)).all())
    True
    """
    kd = _key_data("randint", key)
    shape = _static_shape("randint", shape)
    dtype = _dt.canonicalize_dtype(_dt.default_int_dtype() if dtype is None else dtype)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    _check_param_shape("randint", "minval", minval, shape)
    _check_param_shape("randint", "maxval", maxval, shape)
    if dtype.itemsize >= 4:
        return _randint(kd, minval, maxval, shape, dtype)
    # As JAX: sample at least 32 bits (bounds clipped to dtype's range, drawn in int32,
    # converted back).
    info = jnp.iinfo(dtype)
    minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
    maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min),
                      int(info.max) + 1)
    return _randint(kd, minval, maxval, shape, np.dtype(np.int32)).astype(dtype)


@_jit(3, 4)
def _randint(key, minval, maxval, shape, dtype):
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not np.issubdtype(minval.dtype, np.integer):
        minval = minval.astype(int)
    if not np.issubdtype(maxval.dtype, np.integer):
        maxval = maxval.astype(int)
    top = _convert_and_clip(jnp.asarray(np.array(jnp.iinfo(dtype).max, dtype)), maxval.dtype)
    out_of_range = jnp.broadcast_to(lax.gt(maxval, top), shape)
    minval = jnp.broadcast_to(_convert_and_clip(minval, dtype), shape)
    maxval = jnp.broadcast_to(_convert_and_clip(maxval, dtype), shape)
    nbits = dtype.itemsize * 8
    k1, k2 = split(key)
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    udt = np.dtype(_UINT[nbits])
    span = lax.convert_element_type(lax.sub(maxval, minval), udt)
    one = np.array(1, udt)
    span = lax.select(lax.le(maxval, minval), jnp.broadcast_to(one, shape), span)
    span = lax.select(jnp.logical_and(out_of_range, lax.gt(maxval, minval)),
                      lax.add(span, one), span)
    # (a * b) % n = ((a % n) * (b % n)) % n, with a = 2**nbits: multiplier = a % n
    mult = lax.rem(jnp.broadcast_to(np.array(2 ** (nbits // 2), udt), shape), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    off = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    off = lax.rem(off, span)
    return lax.add(minval, lax.convert_element_type(off, dtype))


__all__ += ["randint"]


# ---- helpers shared by the sampler modules ----

def _shape_from(name, shape, *params):
    if shape is None:
        return tuple(np.broadcast_shapes(*(np.shape(p) for p in params)))
    shape = _static_shape(name, shape)
    for argname, p in zip(("parameter",) * len(params), params):
        _check_param_shape(name, argname, p, shape)
    return shape


def _bcast_param(x, dtype, shape):
    """``x`` converted to ``dtype`` and broadcast to ``shape``."""
    return jnp.broadcast_to(lax.convert_element_type(jnp.asarray(x), dtype), shape)


def _int_dtype(name, dtype):
    # JAX's default is Python ``int``: int32, or int64 under x64.
    dtype = _dt.default_int_dtype() if dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `{name}` must be an int dtype, got {dtype}")
    return _dt.canonicalize_dtype(dtype)
