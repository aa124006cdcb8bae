"""Euclidean projections of pytrees onto convex sets (``optax.projections``): boxes,
simplices, l1 / l2 / l-infinity balls and spheres, hyperplanes and halfspaces."""
import xform.numpy as jnp
from xform import lax, nn
from xform.core import tree_util as tu
from xform.optim._base import tree_full_like, tree_norm
from xform.flatten_util import ravel_pytree
from xform.optim.tree_utils import tree_add_scale, tree_mul, tree_scale, tree_vdot
from xform.transforms.custom_derivatives import custom_jvp

__all__ = ["projection_non_negative", "projection_box", "projection_hypercube",
           "projection_simplex", "projection_l1_sphere", "projection_l1_ball",
           "projection_l2_sphere", "projection_l2_ball", "projection_linf_ball",
           "projection_vector", "projection_hyperplane", "projection_halfspace"]


def projection_non_negative(tree):
    """Projection onto the non-negative orthant (``relu`` leafwise).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_non_negative(jnp.array([-1., 2.]))
        Array([0., 2.], dtype=float32)
    """
    return tu.tree_map(nn.relu, tree)


def projection_box(tree, lower, upper):
    """Projection onto ``lower <= p <= upper`` (scalars or trees like ``tree``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_box(jnp.array([-1., 2.]), 0., 1.)
        Array([0., 1.], dtype=float32)
    """
    return tu.tree_map(jnp.clip, tree, lower, upper)


def projection_hypercube(tree, scale=1):
    """Projection onto ``0 <= p <= scale``."""
    return projection_box(tree, lower=0, upper=scale)


@custom_jvp
def _projection_unit_simplex(values):
    n = values.shape[0]
    u = jnp.sort(values)[::-1]
    cumsum_u = jnp.cumsum(u)
    ind = jnp.arange(n) + 1
    idx = jnp.count_nonzero(1 / ind + (u - cumsum_u / ind) > 0)
    return nn.relu(1 / idx + (values - cumsum_u[idx - 1] / idx))


@_projection_unit_simplex.defjvp
def _projection_unit_simplex_jvp(primals, tangents):
    # d proj = P_S t - (1_S . t / |S|) 1_S on the support S.
    (values,), (values_dot,) = primals, tangents
    out = _projection_unit_simplex(values)
    supp = out > 0
    card = jnp.count_nonzero(supp)
    return out, supp * values_dot - (jnp.dot(supp, values_dot) / card) * supp


def projection_simplex(tree, scale=1):
    """Projection onto ``{p >= 0, sum(p) = scale}`` (all leaves as one vector).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_simplex(jnp.array([2., 0.]))
        Array([1., 0.], dtype=float32)
    """
    values, unravel = ravel_pytree(tree)
    return unravel(scale * _projection_unit_simplex(values / scale))


def projection_l1_sphere(tree, scale=1):
    """Projection onto ``{||p||_1 = scale}``."""
    proj = projection_simplex(tu.tree_map(jnp.abs, tree), scale)
    return tree_mul(tu.tree_map(jnp.sign, tree), proj)


def projection_l1_ball(tree, scale=1):
    """Projection onto ``{||p||_1 <= scale}``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_l1_ball(jnp.array([2., -2.]))
        Array([ 0.5, -0.5], dtype=float32)
    """
    return lax.cond(tree_norm(tree, ord=1) <= scale, lambda t: t,
                    lambda t: projection_l1_sphere(t, scale), tree)


def projection_l2_sphere(tree, scale=1):
    """Projection onto ``{||p||_2 = scale}``."""
    return tree_scale(scale / tree_norm(tree), tree)


def projection_l2_ball(tree, scale=1):
    """Projection onto ``{||p||_2 <= scale}``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_l2_ball(jnp.array([3., 4.]))
        Array([0.6, 0.8], dtype=float32)
    """
    squared = tree_norm(tree, squared=True)
    return tree_scale(scale / jnp.sqrt(jnp.maximum(squared, scale ** 2)), tree)


def projection_linf_ball(tree, scale=1):
    """Projection onto ``{||p||_inf <= scale}``."""
    return projection_box(tree, lower=tree_full_like(tree, -scale),
                          upper=tree_full_like(tree, scale))


def projection_vector(x, a):
    """Projection of ``x`` onto the line spanned by ``a``: ``<x, a> / <a, a> * a``."""
    return tree_scale(tree_vdot(x, a) / tree_vdot(a, a), a)


def projection_hyperplane(x, a, b):
    """Projection onto ``{y : <a, y> = b}``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.projections.projection_hyperplane(jnp.zeros(2), jnp.array([1., 1.]), 2.)
        Array([1., 1.], dtype=float32)
    """
    return tree_add_scale(x, (b - tree_vdot(x, a)) / tree_vdot(a, a), a)


def projection_halfspace(x, a, b):
    """Projection onto ``{y : <a, y> <= b}``."""
    scalar = jnp.clip((b - tree_vdot(x, a)) / tree_vdot(a, a), max=0)
    return tree_add_scale(x, scalar, a)
