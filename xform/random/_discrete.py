"""Discrete samplers: categorical, permutation, choice, poisson, geometric, binomial,
multinomial (JAX's algorithms and key usage; the rejection samplers are while_loops
that run until every element is accepted, freezing accepted ones)."""
import math
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes as _dt
from xform.core.dtypes import finfo, iinfo, to_inexact_dtype
from xform.lax.cumulative import associative_scan
from xform.random._core import (_float_dtype, _int_dtype, _jit, _key_data, _random_bits,
                                _shape_from, _static_shape, randint, split,
                                uniform)
from xform.random import _keys
from xform.random._derived import gumbel

__all__ = ["categorical", "permutation", "choice", "poisson", "geometric", "binomial",
           "multinomial"]


def _canon_axis(axis, ndim, name):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _cumsum(x, axis=0, reverse=False):
    # As JAX on CPU: cumsum lowered as a parallel prefix scan (same rounding).
    return associative_scan(lax.add, x, axis, reverse)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices drawn from unnormalized log-probabilities ``logits``.

    Args:
      key: a PRNG key.
      logits: log-probabilities (up to a constant) along ``axis``.
      axis: the categories' axis.
      shape: output shape; must end with the batch shape (``logits`` without ``axis``).
      replace: with ``False``, draws without replacement (Gumbel top-k) along the
        leading ``shape`` dimensions.
      mode: gumbel mode (``None`` or ``"low"``).

    >>> import numpy as np, xform.random as random
    >>> int(random.categorical(random.PRNGKey(0), np.array([-30., 30., -30.])))
    1
    """
    logits = jnp.asarray(logits)
    axis = operator.index(axis)
    batch_shape = tuple(np.delete(np.array(logits.shape, dtype=int), axis).tolist())
    if shape is None:
        shape = batch_shape
    else:
        shape = _static_shape("categorical", shape)
        if tuple(np.broadcast_shapes(shape, batch_shape)) != shape:
            raise ValueError(
                "categorical parameter shapes must be broadcast-compatible with shape "
                "argument, and the result of broadcasting the shapes must equal the shape "
                f"argument, but got result {np.broadcast_shapes(shape, batch_shape)} for "
                f"shape argument {shape}.")
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= logits.ndim
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % logits.ndim, logits.shape[axis])
        g = gumbel(key, (*prefix, *logits_shape), logits.dtype, mode=mode)
        return jnp.argmax(g + lax.expand_dims(logits, tuple(range(len(prefix)))), axis=axis)
    logits = logits + gumbel(key, logits.shape, logits.dtype, mode=mode)
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed "
                         f"number of categories ({logits.shape[axis]}).")
    _, idx = lax.top_k(jnp.moveaxis(logits, axis, -1), k)
    return lax.reshape(idx, shape, (idx.ndim - 1, *range(idx.ndim - 1)))


@_jit(2)
def _shuffle(key, x, axis):
    # Sort by random 32-bit keys, enough rounds that ties are unlikely (JAX's rule).
    n = math.prod(x.shape)
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = split(key)
        _, x = lax.sort_key_val(_random_bits(subkey, 32, x.shape), x, axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` or of ``x`` along ``axis``.

    Args:
      key: a PRNG key.
      x: an int ``n`` (permute ``arange(n)``) or an array.
      axis: the axis to shuffle along.
      independent: shuffle each slice along ``axis`` independently.

    >>> import xform.random as random
    >>> sorted(random.permutation(random.PRNGKey(0), 5).tolist())
    [0, 1, 2, 3, 4]
    """
    kd = _key_data("permutation", key)
    if not np.ndim(x):
        if not np.issubdtype(np.result_type(x), np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        try:
            n = operator.index(x)
        except TypeError:
            raise TypeError("permutation: x must be a static integer (not a traced value "
                            f"under jit) or an array, got {x!r}.") from None
        return _shuffle(kd, jnp.arange(n), 0)
    x = jnp.asarray(x)
    axis = _canon_axis(axis, x.ndim, "permutation")
    if independent or x.ndim == 1:
        return _shuffle(kd, x, axis)
    ind = _shuffle(kd, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, ind, axis, unique_indices=True)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """A random sample from ``a`` (an array, or ``arange(a)`` for an int).

    Args:
      key: a PRNG key.
      a: an int or an array to sample from along ``axis``.
      shape: the number of draws, as a shape.
      replace: sample with replacement.
      p: optional probabilities, one per entry of ``a`` along ``axis``.
      axis: the axis sampled along.
      mode: gumbel mode, with ``p`` and ``replace=False``.

    >>> import xform.random as random
    >>> random.choice(random.PRNGKey(0), 10, (3,), replace=False).shape
    (3,)
    """
    _key_data("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got "
                        f"{shape}")
    shape = _static_shape("choice", shape)
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        try:
            n_inputs = operator.index(a)
        except TypeError:
            raise TypeError("choice: a must be a static integer (not a traced value under "
                            f"jit) or an array, got {a!r}.") from None
    else:
        axis = _canon_axis(axis, arr.ndim, "choice")
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)[slices]
    else:
        p = jnp.asarray(p)
        p = p.astype(to_inexact_dtype(p.dtype))
        if p.shape != (n_inputs,):
            raise ValueError(
                "p must be None or a 1D vector with the same size as a.shape[axis]. "
                f"p has shape {p.shape} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = _cumsum(p)
            r = p_cuml[-1] * (1 - uniform(key, shape, dtype=p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(int)
        else:
            g = gumbel(key, (n_inputs,), dtype=p.dtype, mode=mode) + jnp.log(p)
            ind = lax.top_k(g, n_draws)[1].astype(int)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return result.reshape(shape if arr.ndim == 0 else
                          arr.shape[0:axis] + tuple(shape) + arr.shape[axis + 1:])


# ---- poisson ----

@_jit(2, 3, 4)
def _poisson_knuth(key, lam, shape, dtype, max_iters):
    # Multiply uniforms until the product drops below exp(-lam).
    def body_fn(carry):
        i, k, rng, log_prod = carry
        rng, subkey = split(rng)
        k = lax.select(log_prod > -lam, k + 1, k)
        u = uniform(subkey, shape, np.float32)
        return i + 1, k, rng, log_prod + jnp.log(u)

    def cond_fn(carry):
        return jnp.any(carry[3] > -lam) & (carry[0] < max_iters)

    init = (np.int32(0), jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    k = lax.while_loop(cond_fn, body_fn, init)[1]
    return (k - 1).astype(dtype)


@_jit(2, 3, 4)
def _poisson_rejection(key, lam, shape, dtype, max_iters):
    # Hormann's transformed rejection with squeeze (PTRS), for lam >= 10.
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split(key, 3)
        u = uniform(subkey_0, shape, lam.dtype) - 0.5
        v = uniform(subkey_1, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, key

    def cond_fn(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond_fn, body_fn, init)[1].astype(dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers (Knuth for lam < 10, transformed rejection above).

    >>> import xform.random as random
    >>> random.poisson(random.PRNGKey(0), 3.0, (4,)).dtype
    dtype('int32')
    """
    kd = _key_data("poisson", key)
    dtype = _int_dtype("poisson", dtype)
    if _keys.impl_of(kd).name != "threefry2x32":   # as JAX
        raise NotImplementedError("`poisson` is only implemented for the threefry2x32 "
                                  f"RNG, not {_keys.impl_of(kd).name}")
    shape = tuple(np.shape(lam)) if shape is None else _static_shape("poisson", shape)
    lam = lax.convert_element_type(jnp.broadcast_to(jnp.asarray(lam), shape), np.float32)
    return _poisson(kd, lam, shape, dtype)


@_jit(2, 3)
def _poisson(key, lam, shape, dtype):
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
    lam_rej = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = dtype.type(iinfo(dtype).max)
    out = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                     _poisson_rejection(key, lam_rej, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(out), out)


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) integers >= 1: trials to the first success.

    >>> import xform.random as random
    >>> bool((random.geometric(random.PRNGKey(0), 0.3, (5,)) >= 1).all())
    True
    """
    kd = _key_data("geometric", key)
    dtype = _int_dtype("geometric", dtype)
    return _geometric(kd, p, _shape_from("geometric", shape, p), dtype)


@_jit(2, 3)
def _geometric(key, p, shape, dtype):
    p = jnp.asarray(p)
    p = p.astype(to_inexact_dtype(p.dtype))
    u = uniform(key, shape, p.dtype)
    u = jnp.where(u == 0, 1, u)   # (JAX's: u = 0 mapped to 1, no inf in log(u))
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1
    return g.astype(dtype)


# ---- binomial ----

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_approx_tail(k):
    # log(k!) - Stirling's approximation: tabulated for k <= 9, a series above.
    table = jnp.asarray(np.array(_STIRLING_TAIL, k.dtype))
    use_table = k <= 9
    k = lax.clamp(np.array(0, k.dtype), k, np.array(9, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return lax.select(use_table, table[jnp.asarray(k, dtype="int32")], approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    # Count geometric waiting times until their sum exceeds count.
    log1minusprob = jnp.log1p(-prob)

    def body_fn(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = split(key)
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform(subkey, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, key

    def cond_fn(carry):
        return jnp.any(carry[2] <= count) & (carry[0] < max_iters)

    zeros = jnp.zeros(shape, prob.dtype)
    k = lax.while_loop(cond_fn, body_fn, (np.int32(0), zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    # Hormann's BTRS transformed rejection for count * p > 10.
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split(key, 3)
        u = uniform(subkey_0, shape, prob.dtype)
        v = uniform(subkey_1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, key

    def cond_fn(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond_fn, body_fn, init)[1].astype(dtype)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (inversion for n * p <= 10, BTRS above).

    >>> import xform.random as random
    >>> random.binomial(random.PRNGKey(0), 10.0, 0.5, (3,)).dtype
    dtype('float32')
    """
    kd = _key_data("binomial", key)
    dtype = _float_dtype("binomial", dtype)
    return _binomial(kd, n, p, _shape_from("binomial", shape, n, p), dtype)


@_jit(3, 4, inline=True)
def _binomial(key, n, p, shape, dtype):
    prob = jnp.asarray(p)
    prob = prob.astype(to_inexact_dtype(prob.dtype))
    count = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(n), prob.dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = jnp.isnan(q)
    q_l_0 = q < 0.0
    q = lax.select(q_is_nan | q_l_0, jnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, jnp.zeros_like(count))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    max_iters = dtype.type(finfo(dtype).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype),
                         samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts over the last axis of ``p``, as a chain of binomials.

    >>> import numpy as np, xform.random as random
    >>> float(random.multinomial(random.PRNGKey(0), 10.0, np.ones(4) / 4).sum())
    10.0
    """
    _key_data("multinomial", key)
    # any dtype, as JAX's (the float counts cast at the end: int32 counts are common)
    dtype = _dt.canonicalize_dtype(_dt.default_float_dtype() if dtype is None else dtype)
    n, p = jnp.asarray(n), jnp.asarray(p)
    dt = to_inexact_dtype(jnp.result_type(n, p))
    n, p = n.astype(dt), p.astype(dt)
    shape = p.shape if shape is None else _static_shape("multinomial", shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = _cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = split(key, ratios.shape[0])

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, jnp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)
