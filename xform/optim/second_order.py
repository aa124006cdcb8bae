"""Second-order quantities of a loss (``optax.second_order``, deprecated in Optax 0.2.7):
Hessian-vector products and Hessian / Fisher diagonals over flattened params."""
import functools
import warnings

import xform.numpy as jnp
from xform.flatten_util import ravel_pytree
from xform.transforms.ad import grad, jvp
from xform.transforms.vmap import vmap

__all__ = ["hvp", "hessian_diag", "fisher_diag"]


def _deprecated(fun):
    msg = (f"The function {fun.__name__} is deprecated. This function will be/was removed "
           "in optax 0.2.9.")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        warnings.warn(msg, DeprecationWarning)
        return fun(*args, **kwargs)
    return wrapped


def _ravel(p):
    return ravel_pytree(p)[0]


@_deprecated
def hvp(loss, v, params, inputs, targets):
    """Hessian of ``loss(params, inputs, targets)`` times ``v`` (a flat vector), as a
    params-shaped tree.

    Example:
        >>> import warnings, xform.numpy as jnp, xform.optim as optax
        >>> loss = lambda p, x, y: jnp.sum(p ** 2)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter('ignore')
        ...     optax.second_order.hvp(loss, jnp.ones(2), jnp.ones(2), None, None)
        Array([2., 2.], dtype=float32)
    """
    _, unravel = ravel_pytree(params)
    return jvp(grad(lambda p: loss(p, inputs, targets)), [params], [unravel(v)])[1]


@_deprecated
def hessian_diag(loss, params, inputs, targets):
    """The diagonal of the Hessian of ``loss`` with respect to the flattened params."""
    vs = jnp.eye(_ravel(params).size)
    return vmap(lambda v: jnp.vdot(v, _ravel(hvp.__wrapped__(loss, v, params, inputs,
                                                               targets))))(vs)


@_deprecated
def fisher_diag(negative_log_likelihood, params, inputs, targets):
    """The diagonal of the observed Fisher information: the squared flattened gradient."""
    return jnp.square(_ravel(grad(negative_log_likelihood)(params, inputs, targets)))
