"""Keys (PRNGKey, key, split, fold_in, bits) and the samplers built directly on
uniform bits (uniform, normal, bernoulli, randint and simple transforms).

Keys are raw ``uint32[2]`` arrays (``PRNGKey``) or typed ``key<fry>`` scalars (``key``,
see ``_keys``); the functions here take either and return keys of the kind given.
Derivation follows JAX 0.10.2 with its default ``jax_threefry_partitionable=True``:
``split(key, shape)`` encrypts the 64-bit linear index of each output position (hi
word, lo word) under ``key``; ``fold_in(key, d)`` encrypts the counter
``(0, uint32(d))``; ``bits`` encrypts the index of every output element and xors the
two output words.
"""
import math
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.config import config
from xform.core.trace import get_aval
from xform.lax.prng import bitcast_convert_type, threefry2x32
from xform.random import _keys

_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "split",
           "fold_in", "bits",
           "uniform", "normal", "truncated_normal", "bernoulli"]


# ---- keys ----

def _seed_to_key(seed, name):
    if _keys.is_typed_key(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, bool) or (hasattr(seed, "dtype") and seed.dtype == np.bool_):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, float) or (hasattr(seed, "dtype")
                                   and not np.issubdtype(seed.dtype, np.integer)):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, (int, np.integer)) and not hasattr(seed, "shape"):
        s = int(seed)
        if not -2**63 <= s < 2**64:
            raise OverflowError(f"{name} seed {s} does not fit in 64 bits.")
        u = s % 2**64
        # JAX without x64 truncates a Python seed to int32 first, so the high
        # word is 0 and the low word the low 32 bits.
        hi = (u >> 32) if config.jax_enable_x64 else 0
        return jnp.asarray(np.array([hi, u & 0xFFFFFFFF], np.uint32))
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{aval.shape} != (). Use jax.vmap for batching")
    seed = jnp.asarray(seed)
    if aval.dtype.itemsize == 8:
        hi = lax.convert_element_type(
            lax.shift_right_logical(seed, lax.convert_element_type(32, aval.dtype)),
            np.uint32)
    else:
        hi = jnp.zeros((), np.uint32)
    lo = lax.convert_element_type(seed, np.uint32) if aval.dtype.itemsize <= 4 else \
        lax.convert_element_type(jnp.bitwise_and(seed, np.array(0xFFFFFFFF, aval.dtype)),
                                 np.uint32)
    return jnp.stack([hi, lo])


def _check_impl(impl, dtype=None):
    if dtype is not None and dtype != _keys.key_dtype:
        raise ValueError(f"unsupported key dtype {dtype}; xform has key<fry> only.")
    if impl not in (None, "threefry2x32") and str(impl) != "threefry2x32":
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one '
                         f'of: "threefry2x32"?')


def PRNGKey(seed, *, impl=None):
    """A raw (legacy) Threefry key, ``uint32[2]``, from an integer seed.

    >>> import xform.random as random
    >>> random.PRNGKey(0)
    Array([0, 0], dtype=uint32)
    """
    _check_impl(impl)
    return _seed_to_key(seed, "PRNGKey")


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (a scalar of dtype ``key<fry>``) from an integer seed.

    >>> import xform.random as random
    >>> k = random.key(1)
    >>> k.shape, k.dtype
    ((), key<fry>)
    """
    _check_impl(impl, dtype)
    return _keys.random_wrap(_seed_to_key(seed, "key"))


def key_data(keys):
    """The ``uint32[..., 2]`` data under ``keys`` (raw keys are returned as they are).

    >>> import xform.random as random
    >>> random.key_data(random.key(0))
    Array([0, 0], dtype=uint32)
    """
    return _keys.unwrap("key_data", keys, allow_batched=True)[0]


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over ``uint32[..., 2]`` key data (the inverse of ``key_data``).

    >>> import numpy as np, xform.random as random
    >>> random.wrap_key_data(np.zeros((3, 2), np.uint32)).shape
    (3,)
    """
    _check_impl(impl, dtype)
    if _keys.is_typed_key(key_bits_array):
        raise TypeError("wrap_key_data accepts raw uint32 key data, but was given a PRNG "
                        "key array.")
    return _keys.random_wrap(jnp.asarray(key_bits_array))


def key_dtype(impl=None):
    """The dtype of typed keys of PRNG implementation ``impl`` (``key<fry>``).

    >>> import xform.random as random
    >>> random.key_dtype()
    key<fry>
    """
    _check_impl(impl)
    return _keys.key_dtype


def key_impl(keys):
    """The PRNG implementation of ``keys`` (always ``'threefry2x32'`` in xform).

    >>> import xform.random as random
    >>> str(random.key_impl(random.key(0)))
    'threefry2x32'
    """
    _keys.unwrap("key_impl", keys, allow_batched=True)
    return _keys.PRNGSpec("threefry2x32")


def clone(key):
    """A copy of ``key`` that ``jax_debug_key_reuse`` sees as fresh (values unchanged).

    >>> import xform.random as random
    >>> random.clone(random.key(0)).shape
    ()
    """
    data, typed = _keys.unwrap("clone", key, allow_batched=True)
    return _keys.random_wrap(data) if typed else data


def _single_key(name, k):
    data, _ = _keys.unwrap(name, k)
    return data[0], data[1]


def _rewrap(like, data):
    return _keys.random_wrap(data) if _keys.is_typed_key(like) else data


def _static_shape(name, shape):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of static integers (not traced "
                        f"values under jit), got {shape!r}.") from None


def _iota_2x32(shape):
    n = math.prod(shape)
    if n >= 2**32:
        raise NotImplementedError("random arrays of 2**32 or more elements")
    lo = lax.reshape(lax.iota(np.uint32, n), shape) if shape else jnp.zeros((), np.uint32)
    return jnp.zeros(shape, np.uint32), lo


def split(key, num=2):
    """Split a key into ``num`` (an int or a shape) new keys.

    >>> import xform.random as random
    >>> random.split(random.PRNGKey(0)).shape
    (2, 2)
    """
    k1, k2 = _single_key("split", key)
    shape = _static_shape("split", num)
    if not config.jax_threefry_partitionable:
        counts = lax.iota(np.uint32, 2 * math.prod(shape))
        return _rewrap(key, jnp.reshape(_threefry_flat(k1, k2, counts), (*shape, 2)))
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    return _rewrap(key, jnp.stack([b1, b2], axis=-1))


def fold_in(key, data):
    """Fold integer ``data`` into ``key``, giving a new key.

    >>> import xform.random as random
    >>> random.fold_in(random.PRNGKey(0), 1).shape
    (2,)
    """
    k1, k2 = _single_key("fold_in", key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool) \
            and 0 <= int(data) < 2**32:
        data = np.uint32(int(data))          # as JAX's asarray(data, 'uint32')
    data = jnp.asarray(data)
    if data.shape:
        raise TypeError(f"fold_in data must be a scalar, got shape {data.shape}.")
    d = lax.convert_element_type(data, np.uint32)
    b1, b2 = threefry2x32(k1, k2, jnp.zeros((), np.uint32), d)
    return _rewrap(key, jnp.stack([b1, b2]))


def _threefry_flat(k1, k2, counts):
    # JAX's threefry_2x32 on a flat uint32 count vector (jax_threefry_partitionable=False):
    # the first half of the (zero-padded to even) counts are the x1 words, the second
    # half the x2 words; the outputs are concatenated back in that order.
    n = counts.shape[0]
    if n % 2:
        counts = jnp.concatenate([counts, jnp.zeros((1,), np.uint32)])
    half = counts.shape[0] // 2
    b1, b2 = threefry2x32(k1, k2, counts[:half], counts[half:])
    return jnp.concatenate([b1, b2])[:n]


def _random_bits_original(k1, k2, bit_width, shape):
    # JAX's non-partitionable bits: one cipher call over iota(ceil(bits needed / 32)).
    size = math.prod(shape)
    max_count = -(-bit_width * size // 32)
    if max_count >= 2**32 - 1:
        raise NotImplementedError("random arrays of 2**32 or more words with "
                                  "jax_threefry_partitionable=False")
    words = _threefry_flat(k1, k2, lax.iota(np.uint32, max_count)) if max_count else \
        jnp.zeros((0,), np.uint32)
    dt = _UINT[bit_width]
    if bit_width == 64:
        half = max_count // 2
        hi = lax.convert_element_type(words[:half], dt)
        lo = lax.convert_element_type(words[half:], dt)
        out = jnp.bitwise_or(lax.shift_left(hi, np.full(hi.shape, 32, dt)), lo)
    elif bit_width == 32:
        out = words
    else:   # each word gives 32 // bit_width values, low bits first
        per = 32 // bit_width
        shifts = np.arange(per, dtype=np.uint32)[None, :] * np.uint32(bit_width)
        parts = jnp.bitwise_and(lax.shift_right_logical(
            jnp.broadcast_to(words[:, None], (max_count, per)),
            jnp.broadcast_to(shifts, (max_count, per))), np.uint32(np.iinfo(dt).max))
        out = lax.convert_element_type(jnp.reshape(parts, (max_count * per,)), dt)[:size]
    return jnp.reshape(out, shape)


def _random_bits(key, bit_width, shape):
    k1, k2 = _single_key("random_bits", key)
    if not config.jax_threefry_partitionable:
        return _random_bits_original(k1, k2, bit_width, shape)
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    dt = _UINT[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(b1, dt)
        lo = lax.convert_element_type(b2, dt)
        return jnp.bitwise_or(lax.shift_left(hi, np.full(shape, 32, dt)), lo)
    out = jnp.bitwise_xor(b1, b2)
    return out if bit_width == 32 else lax.convert_element_type(out, dt)


def bits(key, shape=(), dtype=None):
    """Uniform random bits of an unsigned integer ``dtype`` (default uint32).

    >>> import xform.random as random
    >>> random.bits(random.PRNGKey(0), (3,)).dtype
    dtype('uint32')
    """
    dtype = np.dtype(np.uint32 if dtype is None else dtype)
    if not np.issubdtype(dtype, np.unsignedinteger):
        raise TypeError(f"dtype argument to `bits` must be an unsigned int dtype, "
                        f"got {dtype}")
    return _random_bits(key, dtype.itemsize * 8, _static_shape("bits", shape))


def _float_dtype(name, dtype):
    # JAX's default is Python ``float``: float32, or float64 under x64.
    from xform.core import dtypes as _dt
    dtype = _dt.default_float_dtype() if dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating) and dtype.name != "bfloat16":
        raise TypeError(f"{name} only accepts floating point dtypes, got {dtype}.")
    return _dt.canonicalize_dtype(dtype)


def _check_param_shape(name, argname, val, shape):
    s = np.shape(val) if not hasattr(val, "aval") else get_aval(val).shape
    s = tuple(getattr(val, "shape", s))
    try:
        np.broadcast_shapes(s, shape)
        ok = len(s) <= len(shape) and np.broadcast_shapes(s, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: {argname} of shape {s} cannot be broadcast to the "
                         f"requested shape {shape}.")


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)``.

    >>> import xform.random as random
    >>> random.uniform(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    shape = _static_shape("uniform", shape)
    dtype = _float_dtype("uniform", dtype)
    _check_param_shape("uniform", "minval", minval, shape)
    _check_param_shape("uniform", "maxval", maxval, shape)
    minval = lax.convert_element_type(jnp.asarray(minval), dtype)
    maxval = lax.convert_element_type(jnp.asarray(maxval), dtype)
    fi = jnp.finfo(dtype)
    nbits, nmant = fi.bits, fi.nmant
    rng_bits = 8 if nmant < 8 else nbits
    udt = _UINT[nbits]
    b = _random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        b = lax.convert_element_type(b, udt)
    fb = lax.shift_right_logical(b, np.full(shape, rng_bits - nmant, udt))
    one_bits = np.array(1.0, dtype).view(udt)
    fb = jnp.bitwise_or(fb, np.full(shape, one_bits, udt))
    floats = lax.sub(bitcast_convert_type(fb, dtype), np.full(shape, 1.0, dtype))
    out = lax.add(lax.mul(floats, jnp.broadcast_to(lax.sub(maxval, minval), shape)),
                  jnp.broadcast_to(minval, shape))
    return lax.max(jnp.broadcast_to(minval, shape), out)


def normal(key, shape=(), dtype=None):
    """Standard normal samples (``sqrt(2) * erfinv(u)``, u uniform in (-1, 1)).

    >>> import xform.random as random
    >>> random.normal(random.PRNGKey(0), (3,)).shape
    (3,)
    """
    shape = _static_shape("normal", shape)
    dtype = _float_dtype("normal", dtype)
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(np.full(shape, np.sqrt(2), dtype), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples truncated to ``[lower, upper]``.

    >>> import xform.random as random
    >>> x = random.truncated_normal(random.PRNGKey(0), -1.0, 1.0, (4,))
    >>> bool((abs(x) <= 1).all())
    True
    """
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower), np.shape(upper))
    shape = _static_shape("truncated_normal", shape)
    _check_param_shape("truncated_normal", "lower", lower, shape)
    _check_param_shape("truncated_normal", "upper", upper, shape)
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(lower), dtype), shape)
    upper = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(upper), dtype), shape)
    a = lax.erf(lax.div(lower, jnp.broadcast_to(sqrt2, shape)))
    b = lax.erf(lax.div(upper, jnp.broadcast_to(sqrt2, shape)))
    u = uniform(key, shape, dtype, a, b)
    out = lax.mul(jnp.broadcast_to(sqrt2, shape), lax.erf_inv(u))
    lo = lax.nextafter(lax.stop_gradient(lower), np.full(shape, np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper), np.full(shape, -np.inf, dtype))
    return jnp.clip(out, lo, hi)


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p``.

    >>> import xform.random as random
    >>> random.bernoulli(random.PRNGKey(0), 0.5, (3,)).dtype
    dtype('bool')
    """
    p = jnp.asarray(p)
    dtype = p.dtype
    if not np.issubdtype(dtype, np.floating) and dtype.name != "bfloat16":
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got "
                        f"{dtype}.")
    if shape is None:
        shape = p.shape
    shape = _static_shape("bernoulli", shape)
    _check_param_shape("bernoulli", "p", p, shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    if mode == "high":   # u2 < p - u1 with u2 scaled below u1's resolution
        u = uniform(key, (2, *shape), dtype)
        u2 = u[1] * 2 ** -int(jnp.finfo(dtype).nmant)
        return u2 < jnp.broadcast_to(p, shape) - u[0]
    return lax.lt(uniform(key, shape, dtype), jnp.broadcast_to(p, shape))


# ---- samplers derived from uniform/normal (JAX's formulas) ----

def _shape_from(name, shape, *params):
    if shape is None:
        return tuple(np.broadcast_shapes(*(np.shape(p) for p in params)))
    shape = _static_shape(name, shape)
    for argname, p in zip(("parameter",) * len(params), params):
        _check_param_shape(name, argname, p, shape)
    return shape


def exponential(key, shape=(), dtype=None):
    """Standard exponential samples ``-log1p(-u)``.

    >>> import xform.random as random
    >>> bool((random.exponential(random.PRNGKey(0), (4,)) >= 0).all())
    True
    """
    dtype = _float_dtype("exponential", dtype)
    u = uniform(key, _static_shape("exponential", shape), dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key, shape=(), dtype=None):
    """Standard Laplace samples.

    >>> import xform.random as random
    >>> random.laplace(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    dtype = _float_dtype("laplace", dtype)
    shape = _static_shape("laplace", shape)
    u = uniform(key, shape, dtype, -1.0 + float(jnp.finfo(dtype).epsneg), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples ``log(u) - log1p(-u)``.

    >>> import xform.random as random
    >>> random.logistic(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    dtype = _float_dtype("logistic", dtype)
    shape = _static_shape("logistic", shape)
    x = uniform(key, shape, dtype, float(jnp.finfo(dtype).tiny), 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples ``-log(-log(u))`` (JAX's default mode ``"low"``).

    >>> import xform.random as random
    >>> random.gumbel(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    if mode not in (None, "low", "high"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode} (xform: 'low' "
                         "or 'high')")
    dtype = _float_dtype("gumbel", dtype)
    shape = _static_shape("gumbel", shape)
    fi = jnp.finfo(dtype)
    if mode == "high":
        # Two uniforms: the second fills the low-order bits below 1/2 (more dynamic range).
        u = uniform(key, (2,) + shape, dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + 2 ** -int(fi.nmant) * low + float(fi.tiny))
        return -jnp.log(-jnp.log1p(-x))
    u = uniform(key, shape, dtype, float(fi.tiny), 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples ``tan(pi * (u - 1/2))``.

    >>> import xform.random as random
    >>> random.cauchy(random.PRNGKey(0), (2,)).shape
    (2,)
    """
    dtype = _float_dtype("cauchy", dtype)
    shape = _static_shape("cauchy", shape)
    u = uniform(key, shape, dtype, float(jnp.finfo(dtype).eps), 1.0)
    return lax.tan(lax.mul(np.full(shape, np.pi, dtype),
                           lax.sub(u, np.full(shape, 0.5, dtype))))


def rademacher(key, shape=(), dtype=None):
    """Uniform samples from ``{-1, +1}``.

    >>> import xform.random as random
    >>> random.rademacher(random.PRNGKey(0), (3,)).dtype
    dtype('int32')
    """
    from xform.core import dtypes as _dt
    dtype = _dt.canonicalize_dtype(_dt.default_int_dtype() if dtype is None else dtype)
    b = bernoulli(key, 0.5, _static_shape("rademacher", shape)).astype(dtype)
    return (2 * b - 1).astype(dtype)


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """Log-normal samples ``exp(sigma * normal)``.

    >>> import xform.random as random
    >>> bool((random.lognormal(random.PRNGKey(0), shape=(3,)) > 0).all())
    True
    """
    dtype = _float_dtype("lognormal", dtype)
    shape = _shape_from("lognormal", shape, sigma)
    sigma = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(sigma), dtype), shape)
    return lax.exp(lax.mul(normal(key, shape, dtype), sigma))


def pareto(key, b, shape=None, dtype=None):
    """Pareto samples ``exp(exponential / b)``.

    >>> import xform.random as random
    >>> random.pareto(random.PRNGKey(0), 3.0, (2,)).shape
    (2,)
    """
    dtype = _float_dtype("pareto", dtype)
    shape = _shape_from("pareto", shape, b)
    b = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(b), dtype), shape)
    return lax.exp(lax.div(exponential(key, shape, dtype), b))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples ``scale * sqrt(-2 log u)``.

    >>> import xform.random as random
    >>> random.rayleigh(random.PRNGKey(0), 1.0, (2,)).shape
    (2,)
    """
    dtype = _float_dtype("rayleigh", dtype)
    shape = _shape_from("rayleigh", shape, scale)
    u = uniform(key, shape, dtype)
    scale = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(scale), dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.full(shape, -2, dtype))))


__all__ += ["exponential", "laplace", "logistic", "gumbel", "cauchy", "rademacher",
            "lognormal", "pareto", "rayleigh"]


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
    from xform.core import dtypes as _dt
    shape = _static_shape("randint", shape)
    dtype = _dt.canonicalize_dtype(_dt.default_int_dtype() if dtype is None else dtype)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    _check_param_shape("randint", "minval", minval, shape)
    _check_param_shape("randint", "maxval", maxval, shape)
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not np.issubdtype(minval.dtype, np.integer):
        minval = minval.astype(int)
    if not np.issubdtype(maxval.dtype, np.integer):
        maxval = maxval.astype(int)
    if dtype.itemsize < 4:
        # As JAX: sample at least 32 bits (clip the bounds to dtype's range, draw in
        # the promoted dtype, convert back).
        info = jnp.iinfo(dtype)
        minval = jnp.clip(minval, info.min, info.max)
        maxval = jnp.clip(maxval, info.min, info.max + 1)
        wide = np.promote_types(dtype, np.int32)
        return lax.convert_element_type(randint(key, shape, minval, maxval, wide), dtype)
    top = _convert_and_clip(jnp.asarray(np.array(jnp.iinfo(dtype).max, dtype)), maxval.dtype)
    out_of_range = jnp.broadcast_to(lax.gt(maxval, top), shape)
    minval = jnp.broadcast_to(_convert_and_clip(minval, dtype), shape)
    maxval = jnp.broadcast_to(_convert_and_clip(maxval, dtype), shape)
    nbits = dtype.itemsize * 8
    k1, k2 = split(key)
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    udt = np.dtype(_UINT[nbits])
    span = lax.convert_element_type(lax.sub(maxval, minval), udt)
    one = np.ones(shape, udt)
    span = lax.select(lax.le(maxval, minval), one, span)
    span = lax.select(jnp.logical_and(out_of_range, lax.gt(maxval, minval)),
                      lax.add(span, one), span)
    mult = lax.rem(np.full(shape, 2 ** (nbits // 2), udt), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    off = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    off = lax.rem(off, span)
    return lax.add(minval, lax.convert_element_type(off, dtype))


__all__ += ["randint"]


# ---- helpers shared by the sampler modules ----

def _bcast_param(x, dtype, shape):
    """``x`` converted to ``dtype`` and broadcast to ``shape``."""
    return jnp.broadcast_to(lax.convert_element_type(jnp.asarray(x), dtype), shape)


def _int_dtype(name, dtype):
    # JAX's default is Python ``int``: int32, or int64 under x64.
    from xform.core import dtypes as _dt
    dtype = _dt.default_int_dtype() if dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `{name}` must be an int dtype, got {dtype}")
    return _dt.canonicalize_dtype(dtype)
