"""Optax's linear-algebra helpers (power iteration, inverse p-th roots, NNLS), the
lookahead wrapper and the small utilities (``multi_normal``, ``scale_gradient``)."""
import functools
import logging
from typing import NamedTuple

import xform.numpy as jnp
from xform import lax, random
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation, tree_norm
from xform.optim.tree_utils import tree_scale, tree_sub, tree_vdot
from xform.scipy.stats import norm as _norm
from xform.transforms.custom_derivatives import custom_vjp


def _normalize_tree(x):
    return tree_scale(1.0 / tree_norm(x), x)


def _power_iteration_cond(error_tolerance, num_iters, loop_vars):
    eigvec, z, eig, i = loop_vars
    residual_norm = tree_norm(tree_sub(z, tree_scale(eig, eigvec)))
    converged = jnp.abs(residual_norm / eig) < error_tolerance
    return ~converged & (i < num_iters)


def power_iteration(matrix, *, v0=None, num_iters=100, error_tolerance=1e-6,
                    precision=lax.Precision.HIGHEST, key=None):
    """The dominant eigenvalue and eigenvector of a matrix (an array or a matvec callable
    on pytrees), by power iteration.

    Args:
        matrix: a square array, or a callable ``v -> A v``.
        v0: initial vector (required when ``matrix`` is callable; otherwise uniform
            in [-1, 1] drawn from ``key``, default ``PRNGKey(0)``).
        num_iters: maximum iterations.
        error_tolerance: stop when the relative residual falls below it.
        precision: matmul precision.
        key: PRNG key for ``v0``.

    Returns:
        ``(eigenvalue, eigenvector)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> eig, _ = optax.power_iteration(jnp.diag(jnp.array([1., 3.])))
        >>> round(float(eig), 4)
        3.0
    """
    if callable(matrix):
        mvp = matrix
        if v0 is None:
            raise ValueError("v0 must be provided when `matrix` is a callable.")
    else:
        mvp = lambda v: jnp.matmul(matrix, v, precision=precision)  # noqa: E731
        if v0 is None:
            key = random.PRNGKey(0) if key is None else key
            v0 = random.uniform(key, shape=matrix.shape[-1:], dtype=matrix.dtype,
                                minval=-1.0, maxval=1.0)
    v0 = _normalize_tree(v0)

    def body(loop_vars):
        _, z, _, i = loop_vars
        eigvec = _normalize_tree(z)
        z = mvp(eigvec)
        return eigvec, z, tree_vdot(eigvec, z), i + 1

    cond = functools.partial(_power_iteration_cond, error_tolerance, num_iters)
    _, z, eig, _ = lax.while_loop(cond, body, (v0, mvp(v0), jnp.asarray(0.0), jnp.asarray(0)))
    return eig, _normalize_tree(z)


def matrix_inverse_pth_root(matrix, p, num_iters=100, ridge_epsilon=1e-6,
                            error_tolerance=1e-6, precision=lax.Precision.HIGHEST):
    """``matrix ** (-1/p)`` of a symmetric PSD matrix by coupled Newton iterations
    (Shampoo's preconditioner root); ``p`` is 1, 2, 4 or 8.

    Returns:
        ``(root, error)``, ``error`` the max deviation of the iterate from identity.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> root, _ = optax.matrix_inverse_pth_root(jnp.diag(jnp.array([4., 16.])), 2)
        >>> [round(float(v), 3) for v in jnp.diag(root)]
        [0.5, 0.25]
    """
    n = matrix.shape[0]
    alpha = jnp.asarray(-1.0 / p, jnp.float32)
    identity = jnp.eye(n, dtype=jnp.float32)
    max_ev, _ = power_iteration(matrix=matrix, num_iters=100, error_tolerance=1e-6,
                                precision=precision)
    ridge_epsilon = ridge_epsilon * jnp.maximum(max_ev, 1e-16)

    def mat_power(m, p):
        # m ** p for p in (1, 2, 4, 8) by repeated squaring, picked at run time.
        def pow_k(k):
            def f(x):
                for _ in range(k):
                    x = jnp.matmul(x, x, precision=precision)
                return x
            return f
        return lax.switch(jnp.asarray(jnp.round(jnp.log2(p)), jnp.int32),
                          [pow_k(0), pow_k(1), pow_k(2), pow_k(3)], m)

    def cond(state):
        i, _, _, _, error, run_step = state
        return jnp.logical_and(i < num_iters,
                               jnp.logical_and(error > error_tolerance, run_step))

    def body(state):
        i, mat_m, mat_h, _, error, _ = state
        mat_m_i = (1 - alpha) * identity + alpha * mat_m
        new_m = jnp.matmul(mat_power(mat_m_i, p), mat_m, precision=precision)
        new_h = jnp.matmul(mat_h, mat_m_i, precision=precision)
        new_error = jnp.max(jnp.abs(new_m - identity))
        return i + 1, new_m, new_h, mat_h, new_error, new_error < error * 1.2

    if n == 1:
        return (matrix + ridge_epsilon) ** alpha, 0
    damped = matrix + ridge_epsilon * identity
    z = (1 + p) / (2 * jnp.linalg.norm(damped))
    m0 = damped * z
    h0 = identity * jnp.power(z, 1.0 / p)
    init = (0, m0, h0, h0, jnp.max(jnp.abs(m0 - identity)), True)
    _, mat_m, mat_h, old_h, _, converged = lax.while_loop(cond, body, init)
    error = jnp.max(jnp.abs(mat_m - identity))
    converged = jnp.asarray(converged, old_h.dtype)
    root = converged * mat_h + (1 - converged) * old_h
    return jnp.asarray(root, matrix.dtype), error


def _spectral_radius_upper_bound(matrix):
    a = jnp.linalg.matrix_norm(matrix, ord="fro")
    b = jnp.linalg.matrix_norm(matrix, ord=1) if matrix.size != 0 else 0
    return jnp.minimum(a, b)


def nnls(A, b, iters, unroll=1, L=None):
    """Non-negative least squares ``argmin_{x >= 0} ||A x - b||`` by Polyak's fast
    projected gradient, ``iters`` steps.

    Args:
        A: ``(M, N)`` matrix.
        b: ``(M,)`` vector or ``(M, K)`` matrix.
        iters: number of iterations.
        unroll: passed to ``lax.scan``.
        L: an upper bound on the spectral radius of ``A.T @ A`` (optional).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> x = optax.nnls(jnp.eye(2), jnp.array([1., -1.]), iters=10)
        >>> [round(float(v), 4) for v in x]
        [1.0, 0.0]
    """
    if A.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != A.shape[0]:
        raise ValueError(f"nnls: needs A of shape (M, N) and b of shape (M,) or (M, K); got "
                         f"{A.shape} and {b.shape}")
    Q = A.mT @ A
    q = A.mT @ b
    L = _spectral_radius_upper_bound(Q) if L is None else L
    L = jnp.where(L == 0, 1, L)

    def step(carry, _):
        x, p, c = carry
        cn = (1 + jnp.sqrt(1 + 4 * c ** 2)) / 2
        s = (c - 1) / cn
        xn = (p - (Q @ p - q) / L).clip(0)
        return (xn, xn + s * (xn - x), cn), None

    x = jnp.zeros(A.shape[-1:] + b.shape[1:], dtype=b.dtype)
    (x, _, _), _ = lax.scan(step, (x, x, 0.), length=iters, unroll=unroll)
    return x


class LookaheadState(NamedTuple):
    """State of :func:`lookahead`: the fast optimizer's state and the fast steps taken
    since the last synchronization."""
    fast_state: object
    steps_since_sync: object


class LookaheadParams(NamedTuple):
    """The fast (differentiate these) and slow (evaluate these) parameters."""
    fast: object
    slow: object

    @classmethod
    def init_synced(cls, params):
        """A synchronized pair ``fast = slow = params``."""
        return cls(slow=params, fast=params)


def lookahead(fast_optimizer, sync_period, slow_step_size, reset_state=False):
    """Lookahead (Zhang et al. 2019): ``fast_optimizer`` steps the fast params; every
    ``sync_period`` steps the slow params move ``slow_step_size`` of the way to them and
    the fast params are reset there. Params and updates are :class:`LookaheadParams`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.lookahead(optax.sgd(1.), sync_period=2, slow_step_size=0.5)
        >>> params = optax.LookaheadParams.init_synced(jnp.zeros(1))
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     updates, state = tx.update(jnp.ones(1), state, params)
        ...     params = optax.apply_updates(params, updates)
        >>> params.slow
        Array([-1.], dtype=float32)
    """
    if sync_period < 1:
        raise ValueError("Synchronization period must be >= 1.")

    def init_fn(params):
        fast = getattr(params, "fast", None)
        if fast is None:
            logging.warning("`params` has no attribute `fast`. Continuing by assuming that "
                            "only fast parameters were passed to lookahead init.")
            fast = params
        return LookaheadState(fast_optimizer.init(fast), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params):
        updates, fast_state = fast_optimizer.update(updates, state.fast_state, params.fast)
        sync_next = state.steps_since_sync == (sync_period - 1)
        diff = tu.tree_map(lambda f, u, s: f + u - s, params.fast, updates, params.slow)
        slow = tu.tree_map(lambda d: slow_step_size * sync_next * d, diff)
        fast = tu.tree_map(lambda u, d: u - sync_next * (1 - slow_step_size) * d,
                           updates, diff)
        if reset_state:
            initial = fast_optimizer.init(params.fast)
            fast_state = tu.tree_map(lambda c, i: (1 - sync_next) * c + sync_next * i,
                                     fast_state, initial)
        steps = (state.steps_since_sync + 1) % sync_period
        return LookaheadParams(fast=fast, slow=slow), LookaheadState(fast_state, steps)
    return GradientTransformation(init_fn, update_fn)


class MultiNormalDiagFromLogScale:
    """A diagonal Gaussian parameterized by ``loc`` and ``log_scale``."""

    def __init__(self, loc, log_scale):
        self._log_scale = jnp.asarray(log_scale)
        self._scale = jnp.exp(log_scale)
        self._mean = jnp.asarray(loc)
        self._param_shape = jnp.broadcast_shapes(self._mean.shape, self._scale.shape)

    def sample(self, shape, key):
        """Samples of shape ``shape + param_shape``."""
        return random.normal(key, shape=tuple(shape) + self._param_shape) * self._scale \
            + self._mean

    def log_prob(self, x):
        """Log density, summed over the parameter axes."""
        lp = _norm.logpdf(x, loc=self._mean, scale=self._scale)
        return jnp.sum(lp, axis=[-(i + 1) for i in range(len(self._param_shape))])

    @property
    def log_scale(self):
        return self._log_scale

    @property
    def params(self):
        return [self._mean, self._log_scale]


def multi_normal(loc, log_scale):
    """A diagonal Gaussian with ``sample(shape, key)`` and ``log_prob(x)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> d = optax.multi_normal(jnp.zeros(2), jnp.zeros(2))
        >>> round(float(d.log_prob(jnp.zeros(2))), 4)
        -1.8379
    """
    return MultiNormalDiagFromLogScale(loc=loc, log_scale=log_scale)


@custom_vjp
def _scale_gradient(inputs, scale):
    return inputs


def _scale_gradient_fwd(inputs, scale):
    return inputs, scale


def _scale_gradient_bwd(scale, g):
    return tu.tree_map(lambda g_: g_ * scale, g), None


_scale_gradient.defvjp(_scale_gradient_fwd, _scale_gradient_bwd)


def scale_gradient(inputs, scale):
    """Identity on the forward pass; multiplies the gradient by ``scale`` on the way back.

    Example:
        >>> import xform, xform.optim as optax
        >>> float(xform.grad(lambda x: optax.scale_gradient(x, 0.5) ** 2)(3.))
        3.0
    """
    if scale == 1.0:
        return inputs
    if scale == 0.0:
        return tu.tree_map(lax.stop_gradient, inputs)
    return _scale_gradient(inputs, scale)
