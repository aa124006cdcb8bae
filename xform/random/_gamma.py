"""The gamma family: gamma and loggamma (Marsaglia-Tsang rejection in a while_loop, one
key per element, as JAX), and what is built on them: beta, dirichlet, t, chisquare, f,
generalized_normal, ball. ``random_gamma_p`` is a primitive, as JAX's: differentiable in
the shape parameter by implicit reparameterization (``lax.random_gamma_grad``: d sample /
d alpha = -dF/dalpha / pdf), batched by flattening keys and lanes together."""
import math

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.avals import ShapedArray
from xform.core.dtypes import finfo
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import allow_extended, standard_primitive
from xform.random import _keys
from xform.random._continuous import _static_int
from xform.random._core import (_check_all_safe_to_cast, _float_dtype, _jit, _key_data,
                                _shape_from, _static_shape, normal, split, uniform)
from xform.random._derived import exponential, rademacher
from xform.transforms.vmap import vmap

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "t", "chisquare", "f",
           "generalized_normal", "ball"]


def _gamma_one(key, alpha, log_space):
    # Marsaglia and Tsang (2000) for one scalar alpha; alpha < 1 is boosted to alpha + 1
    # and the sample scaled by u ** (1 / alpha). Key usage exactly as JAX's _gamma_one.
    dtype = alpha.dtype
    c_ = lambda v: np.array(v, dtype)
    zero, one = c_(0), c_(1)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, c_(1. / 3.))
    c = lax.div(c_(1. / 3.), lax.sqrt(d))

    def cond_fn(state):
        _, X, V, U = state
        return lax.bitwise_and(
            lax.ge(U, lax.sub(one, lax.mul(c_(0.0331), lax.mul(X, X)))),
            lax.ge(lax.log(U), lax.add(lax.mul(X, c_(0.5)),
                                       lax.mul(d, lax.add(lax.sub(one, V), lax.log(V))))))

    def next_xv(state):
        k, _, _ = state
        k, subkey = split(k)
        x = normal(subkey, (), dtype)
        return k, x, lax.add(one, lax.mul(x, c))

    def body_fn(state):
        k, x_key, u_key = split(state[0], 3)
        _, x, v = lax.while_loop(lambda s: lax.le(s[2], zero), next_xv,
                                 (x_key, zero, c_(-1)))
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), uniform(u_key, (), dtype)

    key, subkey = split(key)
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (key, zero, one, c_(2)))
    if log_space:
        log_samples = lax.neg(exponential(subkey, (), dtype))
        log_boost = lax.select(boost_mask | (log_samples == 0), zero,
                               lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    samples = 1 - uniform(subkey, (), dtype)
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, V), boost)


def _gamma_impl(key, a, *, log_space):
    # ``key``: typed keys of shape batch (a batch of keys after vmap, see the batching
    # rule) and ``a`` of shape (*batch, *rest): each key is split into prod(rest) keys,
    # one per element, and the elements run their own rejection loops, vmapped (a
    # vmapped while_loop freezes finished lanes): JAX's lowering of random_gamma, lane
    # for lane. Other than threefry keys run lane by lane (``lax.map``), as JAX's:
    # a vmapped rng_bit_generator would draw every lane from the first key.
    count = math.prod(a.shape[key.ndim:])
    keys = jnp.reshape(vmap(lambda k: split(k, count))(jnp.reshape(key, (-1,))), (-1,))
    one = lambda k, al: _gamma_one(k, al, log_space)   # noqa: E731
    if _keys.impl_of(key).name == "threefry2x32":
        samples = vmap(one)(keys, jnp.ravel(a))
    else:
        samples = lax.map(lambda args: one(*args), (keys, jnp.ravel(a)))
    return jnp.reshape(samples, a.shape)


def _random_gamma_abstract_eval(key, a, *, log_space):
    return ShapedArray(a.shape, a.dtype)


def _random_gamma_batch(vals, dims, *, log_space):
    # As JAX: both operands batched at the front, so the lowering sees one flat batch
    # of lanes (a vmap of a vmap would nest the rejection loops instead).
    size = batching.axis_size_of(vals, dims)
    key, a = (batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims))
    return random_gamma_p.bind(key, a, log_space=log_space), 0


# Gamma samples as a primitive, as JAX's random_gamma: its own batching rule (above) and
# JVP (implicit reparameterization); the lowering is the vmapped rejection sampler.
random_gamma_p = standard_primitive("random_gamma", _random_gamma_abstract_eval)
allow_extended(random_gamma_p)   # its key operand
mlir.register_lowering(random_gamma_p, mlir.lower_fun(_gamma_impl, multiple_results=False))
batching.primitive_batchers[random_gamma_p] = _random_gamma_batch
ad.defjvp2(random_gamma_p, None,
           lambda t, ans, key, a, log_space: t * _gamma_grad(ans, a, log_space))


def _gamma_grad(sample, a, log_space):
    if log_space:   # d log(x) / da = (dx / da) / x, with x = 0 clamped to tiny
        x = lax.exp(sample)
        x = lax.select(lax.eq(x, jnp.zeros_like(x)),
                       jnp.full_like(x, float(finfo(x.dtype).tiny)), x)
        return lax.random_gamma_grad(a, x) / x
    return lax.random_gamma_grad(a, sample)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples, differentiable in ``a`` (implicit reparameterization).

    Args:
      key: a PRNG key.
      a: shape parameter(s), broadcast to ``shape``.
      shape: output shape (default ``a``'s shape).
      dtype: float dtype (default float32, float64 under x64).

    >>> import xform.random as random
    >>> bool((random.gamma(random.PRNGKey(0), 2.0, (4,)) > 0).all())
    True
    """
    kd = _key_data("gamma", key)
    dtype = _float_dtype("gamma", dtype)
    if shape is not None:
        shape = _shape_from("gamma", shape, a)
    return _gamma(kd, a, shape=shape, dtype=dtype)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a, 1) samples, accurate for small ``a`` (where samples underflow).

    >>> import xform.random as random
    >>> random.loggamma(random.PRNGKey(0), 0.01, (2,)).shape
    (2,)
    """
    kd = _key_data("loggamma", key)
    dtype = _float_dtype("loggamma", dtype)
    if shape is not None:
        shape = _shape_from("loggamma", shape, a)
    return _gamma(kd, a, shape=shape, dtype=dtype, log_space=True)


@_jit(static_argnames=("shape", "dtype", "log_space"))
def _gamma(key, a, shape, dtype, log_space=False):
    shape = np.shape(a) if shape is None else shape
    a = lax.convert_element_type(a, dtype)
    if np.shape(a) != shape:
        a = jnp.broadcast_to(a, shape)
    return random_gamma_p.bind(key, a, log_space=log_space)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples as ratios of (log-space) gamma samples.

    >>> import xform.random as random
    >>> x = random.beta(random.PRNGKey(0), 2.0, 3.0, (4,))
    >>> bool(((x > 0) & (x < 1)).all())
    True
    """
    kd = _key_data("beta", key)
    dtype = _float_dtype("beta", dtype)
    _check_all_safe_to_cast("beta", dtype, a, b)
    return _beta(kd, a, b, _shape_from("beta", shape, a, b), dtype)


@_jit(3, 4)
def _beta(key, a, b, shape, dtype):
    a = lax.convert_element_type(a, dtype)
    b = lax.convert_element_type(b, dtype)
    key_a, key_b = split(key)
    a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
    log_gamma_a = loggamma(key_a, a, shape, dtype)
    log_gamma_b = loggamma(key_b, b, shape, dtype)
    log_max = lax.max(log_gamma_a, log_gamma_b)   # gamma_a / (gamma_a + gamma_b), scaled
    ga = jnp.exp(log_gamma_a - log_max)
    gb = jnp.exp(log_gamma_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples: the softmax of log-gamma samples over the last axis.

    >>> import numpy as np, xform.random as random
    >>> x = random.dirichlet(random.PRNGKey(0), np.ones(3, np.float32))
    >>> round(float(x.sum()), 5)
    1.0
    """
    kd = _key_data("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    if np.ndim(alpha) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    if shape is not None:
        shape = _shape_from("dirichlet", shape, np.zeros(np.shape(alpha)[:-1]))
    return _dirichlet(kd, alpha, shape, dtype)


@_jit(2, 3)
def _dirichlet(key, alpha, shape, dtype):
    shape = np.shape(alpha)[:-1] if shape is None else shape
    alpha = lax.convert_element_type(alpha, dtype)
    x = loggamma(key, alpha, tuple(shape) + np.shape(alpha)[-1:], dtype)
    # softmax as JAX's jax.nn.softmax
    e = jnp.exp(x - lax.stop_gradient(jnp.max(x, -1, keepdims=True)))
    return e / jnp.sum(e, -1, keepdims=True)


def t(key, df, shape=None, dtype=None):
    """Student's t samples ``normal * sqrt(df / 2 / gamma(df / 2))``.

    >>> import xform.random as random
    >>> random.t(random.PRNGKey(0), 3.0, (2,)).shape
    (2,)
    """
    kd = _key_data("t", key)
    dtype = _float_dtype("t", dtype)
    shape = _shape_from("t", shape, df)
    _check_all_safe_to_cast("t", dtype, df)
    return _t(kd, df, shape, dtype)


@_jit(2, 3)
def _t(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = split(key)
    n = normal(key_n, shape, dtype)
    half_df = lax.div(df, np.array(2, dtype))
    g = gamma(key_g, half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples ``2 * exp(loggamma(df / 2))``.

    >>> import xform.random as random
    >>> bool((random.chisquare(random.PRNGKey(0), 2.0, (3,)) > 0).all())
    True
    """
    kd = _key_data("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    shape = _shape_from("chisquare", shape, df)
    _check_all_safe_to_cast("chisquare", dtype, df)
    return _chisquare(kd, df, shape, dtype)


@_jit(2, 3)
def _chisquare(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    two = np.array(2, dtype)
    log_g = loggamma(key, lax.div(df, two), shape, dtype)
    return lax.mul(jnp.exp(log_g), two)


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples: a ratio of scaled chi-squares.

    >>> import xform.random as random
    >>> random.f(random.PRNGKey(0), 2.0, 3.0, (2,)).shape
    (2,)
    """
    kd = _key_data("f", key)
    dtype = _float_dtype("f", dtype)
    shape = _shape_from("f", shape, dfnum, dfden)
    _check_all_safe_to_cast("f", dtype, dfnum, dfden)
    return _f(kd, dfnum, dfden, shape, dtype)


@_jit(3, 4)
def _f(key, dfnum, dfden, shape, dtype):
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    key_dfd, key_dfn = split(key)
    chi2_dfn = chisquare(key_dfn, dfnum, shape, dtype)
    chi2_dfd = chisquare(key_dfd, dfden, shape, dtype)
    return lax.div(lax.div(chi2_dfn, dfnum), lax.div(chi2_dfd, dfden))


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal samples (density ~ exp(-|x|^p)).

    >>> import xform.random as random
    >>> random.generalized_normal(random.PRNGKey(0), 1.5, (3,)).shape
    (3,)
    """
    kd = _key_data("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    return _generalized_normal(kd, p, _static_shape("generalized_normal", shape), dtype)


@_jit(2, 3)
def _generalized_normal(key, p, shape, dtype):
    k_g, k_r = split(key)
    g = gamma(k_g, 1 / p, shape, dtype)
    r = rademacher(k_r, shape, dtype)
    return r * g ** (1 / p)


def ball(key, d, p=2, shape=(), dtype=None):
    """Samples uniform in the unit ``p``-norm ball of dimension ``d``.

    >>> import xform.random as random
    >>> random.ball(random.PRNGKey(0), 3, shape=(2,)).shape
    (2, 3)
    """
    kd = _key_data("ball", key)
    dtype = _float_dtype("ball", dtype)
    shape = _static_shape("ball", shape)
    return _ball(kd, p, _static_int("ball", "d", d), shape, dtype)


@_jit(2, 3, 4)
def _ball(key, p, d, shape, dtype):
    k1, k2 = split(key)
    g = generalized_normal(k1, p, (*shape, d), dtype)
    e = exponential(k2, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]
