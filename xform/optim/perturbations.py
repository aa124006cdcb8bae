"""Smoothing by stochastic perturbation (``optax.perturbations``): Monte-Carlo estimates
of ``E_z f(x + sigma z)`` whose autodiff gradients are the score-function estimates."""
import xform.numpy as jnp
from xform import lax, random
from xform.core import tree_util as tu
from xform.optim.tree_utils import tree_add_scale, tree_random_like, tree_scale, tree_sum
from xform.transforms.vmap import vmap

__all__ = ["Normal", "Gumbel", "make_perturbed_fun"]


class Normal:
    """Standard normal noise: ``sample(key, sample_shape, dtype)`` and an unnormalized
    ``log_prob``."""

    def sample(self, key, sample_shape=(), dtype=float):
        return random.normal(key, sample_shape, dtype)

    def log_prob(self, inputs):
        return -0.5 * inputs ** 2


class Gumbel:
    """Standard Gumbel noise: ``sample(key, sample_shape, dtype)`` and ``log_prob``."""

    def sample(self, key, sample_shape=(), dtype=float):
        return random.gumbel(key, sample_shape, dtype)

    def log_prob(self, inputs):
        return -inputs - jnp.exp(-inputs)


def _magicbox(x):
    # 1 in value, with the gradient of exp(x): the score-function trick.
    return jnp.exp(x - lax.stop_gradient(x))


def make_perturbed_fun(fun, num_samples=1000, sigma=0.1, noise=Gumbel(), use_baseline=True):
    """``(key, x) -> mean over num_samples of fun(x + sigma * z)``, ``z ~ noise``, whose
    derivatives (through ``grad``) are unbiased estimates of the smoothed function's; only
    values of ``fun`` are used, so ``fun`` need not be differentiable.

    Args:
        fun: pytree -> pytree function.
        num_samples: number of perturbations averaged.
        sigma: perturbation scale.
        noise: an object with ``sample`` and ``log_prob`` (:class:`Gumbel`,
            :class:`Normal`).
        use_baseline: subtract ``fun(x)`` as a control variate.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> f = optax.perturbations.make_perturbed_fun(jnp.sign, num_samples=10)
        >>> f(xform.random.key(0), jnp.array([5.]))
        Array([1.], dtype=float32)
    """
    def mc_estimator(key, x):
        def stoch_estimator(key, x, baseline):
            sample = tree_random_like(key, x, sampler=noise.sample)
            shifted = lax.stop_gradient(tu.tree_map(lambda x, z: x + sigma * z, x, sample))
            sample = tu.tree_map(lambda x, y: (y - x) / sigma, x, shifted)
            box = _magicbox(tree_sum(tu.tree_map(noise.log_prob, sample)))
            out = tree_scale(box, fun(shifted))
            if use_baseline:
                out = tree_add_scale(out, 1 - box, baseline)
            return out

        baseline = fun(lax.stop_gradient(x)) if use_baseline else None
        out = vmap(stoch_estimator, in_axes=(0, None, None))(
            random.split(key, num_samples), x, baseline)
        return tu.tree_map(lambda v: jnp.mean(v, axis=0), out)
    return mc_estimator
