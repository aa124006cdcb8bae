"""The PRNG implementations' derivations on raw key data (JAX 0.10.2's ``PRNGImpl``s),
and their dispatch on typed keys (``random_split``, ``random_fold_in``,
``random_bits``; a key's dtype names its implementation).

* ``threefry2x32`` (the default): ``uint32[2]`` keys, Threefry-2x32 counters (see
  docs/architecture.md for the ``jax_threefry_partitionable`` layouts).
* ``rbg``: ``uint32[4]`` keys, two threefry keys side by side: seed, split and fold_in
  are threefry's on each half; random bits come from XLA's ``RngBitGenerator``
  (``lax.rng_bit_generator``, algorithm RNG_DEFAULT), whose bits are only stable for
  one XLA version and platform, as JAX warns.
* ``unsafe_rbg``: ``rbg``'s seed and bits; split takes every 10th of ``10 * n`` rows of
  ``RngBitGenerator`` output, fold_in xors the key with the last of 10 rows drawn from
  the seeded message. Under ``vmap``, ``rng_bit_generator`` draws the whole batch from
  the first key (JAX's batching rule), so batched rbg bits and unsafe_rbg splits do too.
"""
import math

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import shape_poly
from xform.core.config import config
from xform.core.trace import get_aval
from xform.lax.prng import rng_bit_generator, threefry2x32
from xform.random import _keys

UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ---- seeds ----

def threefry_seed(seed, name):
    """``uint32[2]`` key data ``(hi, lo)`` of an integer ``seed``, with JAX's checks."""
    if _keys.is_typed_key(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, bool) or (hasattr(seed, "dtype") and seed.dtype == np.bool_):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, float) or (hasattr(seed, "dtype")
                                   and not np.issubdtype(seed.dtype, np.integer)):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, (int, np.integer)) and not hasattr(seed, "shape"):
        s = int(seed)
        if not -2**63 <= s < 2**63:   # as JAX, which converts a Python seed to int64
            raise OverflowError(f"{name} seed {s} is out of bounds for int64 (a Python "
                                "int seed must be a 64-bit signed integer).")
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


def seed(impl, seed, name):
    """Raw key data of ``impl`` from an integer ``seed`` (rbg: the threefry key twice)."""
    half = threefry_seed(seed, name)
    return half if impl.name == "threefry2x32" else jnp.concatenate([half, half])


# ---- threefry2x32 ----

def _iota_2x32(shape):
    n = math.prod(shape)
    if not shape_poly.is_symbolic_dim(n) and n >= 2**32:
        raise NotImplementedError("random arrays of 2**32 or more elements")
    lo = lax.reshape(lax.iota(np.uint32, n), shape) if shape else jnp.zeros((), np.uint32)
    return jnp.zeros(shape, np.uint32), lo


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


def threefry_split(key, shape):
    if not config.jax_threefry_partitionable:
        counts = lax.iota(np.uint32, 2 * math.prod(shape))
        return jnp.reshape(_threefry_flat(key[0], key[1], counts), (*shape, 2))
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(key[0], key[1], c1, c2)
    return jnp.stack([b1, b2], axis=-1)


def threefry_fold_in(key, data):
    b1, b2 = threefry2x32(key[0], key[1], jnp.zeros((), np.uint32), data)
    return jnp.stack([b1, b2])


def _threefry_bits_original(k1, k2, bit_width, shape):
    # JAX's non-partitionable bits: one cipher call over iota(ceil(bits needed / 32)).
    size = math.prod(shape)
    max_count = -(-bit_width * size // 32)
    if not shape_poly.is_symbolic_dim(max_count) and max_count >= 2**32 - 1:
        raise NotImplementedError("random arrays of 2**32 or more words with "
                                  "jax_threefry_partitionable=False")
    words = _threefry_flat(k1, k2, lax.iota(np.uint32, max_count)) if max_count else \
        jnp.zeros((0,), np.uint32)
    dt = UINT[bit_width]
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


def threefry_bits(key, bit_width, shape):
    k1, k2 = key[0], key[1]
    if not config.jax_threefry_partitionable:
        return _threefry_bits_original(k1, k2, bit_width, shape)
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    dt = UINT[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(b1, dt)
        lo = lax.convert_element_type(b2, dt)
        return jnp.bitwise_or(lax.shift_left(hi, np.array(32, dt)), lo)
    out = jnp.bitwise_xor(b1, b2)
    return out if bit_width == 32 else lax.convert_element_type(out, dt)


# ---- rbg and unsafe_rbg ----

def rbg_split(key, shape):
    halves = [threefry_split(key[:2], shape), threefry_split(key[2:], shape)]
    return jnp.reshape(jnp.stack(halves, axis=-2), (*shape, 4))


def rbg_fold_in(key, data):
    return jnp.concatenate([threefry_fold_in(key[:2], data), threefry_fold_in(key[2:], data)])


def rbg_bits(key, bit_width, shape):
    return rng_bit_generator(key, shape, dtype=UINT[bit_width])[1]


def unsafe_rbg_split(key, shape):
    # 10 rows of generator output per key, as a hash; every 10th row is a new key
    num = math.prod(shape)
    rows = rng_bit_generator(key, (10 * num, 4), dtype=np.uint32)[1]
    return jnp.reshape(rows[::10], (*shape, 4))


def unsafe_rbg_fold_in(key, data):
    rows = rng_bit_generator(seed(_keys.IMPLS["rbg"], data, "fold_in"), (10, 4),
                             dtype=np.uint32)[1]
    return jnp.bitwise_xor(key, rows[-1])


_DERIVE = {"threefry2x32": (threefry_split, threefry_fold_in, threefry_bits),
           "rbg": (rbg_split, rbg_fold_in, rbg_bits),
           "unsafe_rbg": (unsafe_rbg_split, unsafe_rbg_fold_in, rbg_bits)}


# ---- on typed keys ----

def random_split(key, shape):
    """A single typed ``key`` split into keys of ``shape``, by its implementation."""
    impl = _keys.impl_of(key)
    return _keys.random_wrap(_DERIVE[impl.name][0](_keys.random_unwrap(key), shape), impl)


def random_fold_in(key, data):
    """``uint32`` scalar ``data`` folded into a single typed ``key``."""
    impl = _keys.impl_of(key)
    return _keys.random_wrap(_DERIVE[impl.name][1](_keys.random_unwrap(key), data), impl)


def random_bits(key, bit_width, shape):
    """Unsigned ``bit_width``-bit random bits of ``shape`` from a single typed ``key``."""
    return _DERIVE[_keys.impl_of(key).name][2](_keys.random_unwrap(key), bit_width, shape)
