"""Elementwise activation functions of ``jax.nn``, composed from xform.numpy and xform.lax.

Each is jitted as in JAX (one executable per call in eager mode, and XLA sees the whole
formula, so values match JAX's to the last bit where the formulas agree); ``@composite``
on top gives eager calls its shorter hit path (under a transformation the jit is called
as before). ``relu``, ``relu6`` and ``log1mexp`` are ``custom_jvp`` functions, as in
JAX: relu'(0) = 0, and log1mexp's derivative is computed stably.
"""
import functools

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.interpreters.composite import composite
from xform.numpy import _util
from xform.transforms.custom_derivatives import custom_jvp
from xform.transforms.jit import jit


def _arraylike(name, x):
    _util.check_arraylike(name, x)
    return _util.asarray(x, name)


def _constant(value, like):
    """``value`` as a strongly typed rank-0 array of ``like``'s dtype (JAX's NumPy
    constants: they make the result strongly typed even for a weak input)."""
    return lax.convert_element_type(value, like.aval.dtype)


@composite
@jit
def identity(x):
    """Identity activation function: returns ``x`` as an array.

    >>> import xform.nn
    >>> xform.nn.identity(xform.numpy.array([-1., 0., 2.]))
    Array([-1.,  0.,  2.], dtype=float32)
    """
    return _arraylike("identity", x)


def _relu(x):
    return jnp.maximum(x, 0)


relu = custom_jvp(jit(_relu))
relu.__doc__ = r"""Rectified linear unit: :math:`\max(x, 0)`, with derivative 0 at 0 (as JAX).

    Args:
      x: input array.

    Returns:
      An array of ``x``'s shape and dtype.

    >>> import xform, xform.nn
    >>> xform.nn.relu(xform.numpy.array([-2., 0., 0.5]))
    Array([0. , 0. , 0.5], dtype=float32)
    >>> xform.grad(xform.nn.relu)(0.)
    Array(0., dtype=float32, weak_type=True)
    """
relu.defjvps(lambda t, ans, x: lax.select(x > 0, t, lax.full_like(t, 0)))


def _relu6(x):
    return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6 = custom_jvp(jit(_relu6))
relu6.__doc__ = r"""Rectified linear unit 6: :math:`\min(\max(x, 0), 6)`, with derivative 0 at
    0 and at 6 (as JAX).

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.relu6(xform.numpy.array([-1., 3., 7.]))
    Array([0., 3., 6.], dtype=float32)
    """
relu6.defjvps(lambda t, ans, x: lax.select((x > 0) & (x < 6), t, lax.full_like(t, 0)))


@composite
@jit
def squareplus(x, b=4):
    r"""Squareplus: :math:`(x + \sqrt{x^2 + b}) / 2`.

    Args:
      x: input array.
      b: smoothness parameter (default 4).

    >>> import xform.nn
    >>> xform.nn.squareplus(xform.numpy.array([0., 2.]))
    Array([1.       , 2.4142137], dtype=float32)
    """
    _util.check_arraylike("squareplus", x, b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@composite
def softplus(x):
    r"""Softplus: :math:`\log(1 + e^x)`, computed stably as ``logaddexp(x, 0)``.

    Differentiated through ``logaddexp``'s rule, as JAX's (``exp(x - softplus(x))``,
    not ``sigmoid(x)``: equal in exact arithmetic, an ulp apart in float32 and up to
    1% in bfloat16, which sigmoid cross-entropy gradients inherit).

    Args:
      x: input array (integers are promoted to floats).

    >>> import xform.nn
    >>> xform.nn.softplus(xform.numpy.array([-1000., 0., 1000.]))
    Array([0.000000e+00, 6.931472e-01, 1.000000e+03], dtype=float32)
    """
    # Promoted together with logaddexp's 0, as JAX's: bool input gives a weak float.
    x, _ = _util.promote_dtypes("softplus", x, 0, to="inexact")
    return _softplus(x)


def _softplus_value(x):
    return jnp.logaddexp(x, 0)


_softplus = jit(_softplus_value)


@composite
@jit
def sparse_plus(x):
    r"""Sparse plus: 0 for :math:`x \le -1`, :math:`(x+1)^2/4` on :math:`(-1, 1)`, x for
    :math:`x \ge 1` (the twin of softplus of ``sparse_sigmoid``).

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.sparse_plus(xform.numpy.array([-2., 0., 2.]))
    Array([0.  , 0.25, 2.  ], dtype=float32)
    """
    x = _arraylike("sparse_plus", x)
    return jnp.where(x <= -1., 0., jnp.where(x >= 1., x, (x + 1.) ** 2 / 4))


@composite
@jit
def soft_sign(x):
    r"""Soft sign: :math:`x / (|x| + 1)`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.soft_sign(xform.numpy.array([-1., 3.]))
    Array([-0.5 ,  0.75], dtype=float32)
    """
    x = _arraylike("soft_sign", x)
    return x / (jnp.abs(x) + 1)


@composite
@jit
def sigmoid(x):
    r"""Sigmoid: :math:`1 / (1 + e^{-x})` (``lax.logistic``).

    Args:
      x: input array of a floating dtype.

    >>> import xform.nn
    >>> xform.nn.sigmoid(xform.numpy.array([0., 100.]))
    Array([0.5, 1. ], dtype=float32)
    """
    return lax.logistic(x)


@composite
@jit
def sparse_sigmoid(x):
    r"""Sparse sigmoid: :math:`\mathrm{clip}((x + 1) / 2, 0, 1)`, the derivative of
    ``sparse_plus``.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.sparse_sigmoid(xform.numpy.array([-2., 0., 0.5]))
    Array([0.  , 0.5 , 0.75], dtype=float32)
    """
    return 0.5 * jnp.clip(x + 1., 0., 2.)


@composite
@jit
def silu(x):
    r"""SiLU (also ``swish``): :math:`x \cdot \mathrm{sigmoid}(x)`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.silu(xform.numpy.array([0., 1.]))
    Array([0.       , 0.7310586], dtype=float32)
    """
    x = _arraylike("silu", x)
    return x * sigmoid(x)


swish = silu


@composite
@jit
def mish(x):
    r"""Mish: :math:`x \cdot \tanh(\mathrm{softplus}(x))`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.mish(xform.numpy.array([0., 1.]))
    Array([0.       , 0.8650985], dtype=float32)
    """
    x = _arraylike("mish", x)
    return x * jnp.tanh(softplus(x))


@composite
@jit
def log_sigmoid(x):
    r"""Log-sigmoid: :math:`\log \mathrm{sigmoid}(x) = -\mathrm{softplus}(-x)`, stable for
    large negative ``x``.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.log_sigmoid(xform.numpy.array([-1000., 0.]))
    Array([-1.000000e+03, -6.931472e-01], dtype=float32)
    """
    x = _arraylike("log_sigmoid", x)
    return -softplus(-x)


@composite
@jit
def elu(x, alpha=1.0):
    r"""Exponential linear unit: x for :math:`x > 0`, else :math:`\alpha (e^x - 1)`.

    Args:
      x: input array.
      alpha: scalar or array (default 1.0).

    >>> import xform.nn
    >>> xform.nn.elu(xform.numpy.array([-1., 2.]))
    Array([-0.63212055,  2.        ], dtype=float32)
    """
    x = _arraylike("elu", x)
    # The inner where keeps expm1 away from large positive x, whose inf would make the
    # gradient NaN (0 * inf) in the branch not taken.
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0., x)))


@composite
@jit
def leaky_relu(x, negative_slope=1e-2):
    r"""Leaky ReLU: x for :math:`x \ge 0`, else ``negative_slope * x``.

    Args:
      x: input array.
      negative_slope: scalar or array (default 0.01).

    >>> import xform.nn
    >>> xform.nn.leaky_relu(xform.numpy.array([-1., 2.]))
    Array([-0.01,  2.  ], dtype=float32)
    """
    x = _arraylike("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


@composite
@jit
def hard_tanh(x):
    r"""Hard tanh: ``x`` clipped to :math:`[-1, 1]`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.hard_tanh(xform.numpy.array([-2., 0.5, 2.]))
    Array([-1. ,  0.5,  1. ], dtype=float32)
    """
    x = _arraylike("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@composite
@jit
def celu(x, alpha=1.0):
    r"""Continuously differentiable ELU: :math:`\max(x, 0) + \alpha (e^{\min(x, 0)/\alpha}
    - 1)`.

    Args:
      x: input array.
      alpha: scalar or array (default 1.0).

    >>> import xform.nn
    >>> xform.nn.celu(xform.numpy.array([-1., 2.]), alpha=2.)
    Array([-0.78693867,  2.        ], dtype=float32)
    """
    return jnp.maximum(x, 0.) + alpha * jnp.expm1(jnp.minimum(x, 0.) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@composite
@jit
def selu(x):
    r"""Scaled ELU: :math:`\lambda\, \mathrm{elu}(x, \alpha)` with the self-normalizing
    constants :math:`\lambda \approx 1.0507`, :math:`\alpha \approx 1.6733`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.selu(xform.numpy.array([-1., 1.]))
    Array([-1.1113307,  1.050701 ], dtype=float32)
    """
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def gelu(x, approximate=True):
    r"""Gaussian error linear unit.

    ``approximate=False``: :math:`\frac{x}{2} \mathrm{erfc}(-x/\sqrt{2})`; ``approximate=
    True`` (the default): :math:`\frac{x}{2}(1 + \tanh(\sqrt{2/\pi}(x + 0.044715 x^3)))`.

    Args:
      x: input array (integers are promoted to floats).
      approximate: whether to use the tanh approximation.

    Returns:
      A strongly typed floating array (as JAX, even for a Python scalar input).

    >>> import xform.nn
    >>> xform.nn.gelu(xform.numpy.array([-1., 1.]), approximate=False)
    Array([-0.15865527,  0.8413447 ], dtype=float32)
    """
    x, = _util.promote_dtypes("gelu", x, to="inexact")
    x = _util.asarray(x)
    if approximate:
        c = _constant(np.sqrt(2 / np.pi), x)
        return x * (0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3)))))
    out = 0.5 * x * lax.erfc(-x * _constant(np.sqrt(0.5), x))
    return lax.convert_element_type(out, x.aval.dtype)


@composite
@jit
def hard_sigmoid(x):
    r"""Hard sigmoid: :math:`\mathrm{relu6}(x + 3) / 6`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.hard_sigmoid(xform.numpy.array([-4., 0., 4.]))
    Array([0. , 0.5, 1. ], dtype=float32)
    """
    return relu6(x + 3.) / 6.


@composite
@jit
def hard_silu(x):
    r"""Hard SiLU (also ``hard_swish``): :math:`x \cdot \mathrm{hard\_sigmoid}(x)`.

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.hard_silu(xform.numpy.array([-4., 1., 4.]))
    Array([-0.       ,  0.6666667,  4.       ], dtype=float32)
    """
    x = _arraylike("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


_LOG2 = float(np.log(2.0))


def _log1mexp(x):
    x = _arraylike("log1mexp", x)
    # Maechler's split: log(-expm1(-x)) is accurate for small x, log1p(-exp(-x)) for large.
    return jnp.where(x < _LOG2, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp = custom_jvp(jit(_log1mexp))
log1mexp.__doc__ = r"""Numerically stable :math:`\log(1 - e^{-x})` (undefined for x < 0).

    The derivative :math:`1 / (e^x - 1)` is computed directly (a custom JVP).

    Args:
      x: input array.

    >>> import xform.nn
    >>> xform.nn.log1mexp(xform.numpy.array([1e-3, 50.]))
    Array([-6.9082556e+00, -1.9287499e-22], dtype=float32)
    """
log1mexp.defjvps(lambda t, ans, x: t / jnp.expm1(x))


@composite(static=("axis",))
def glu(x, axis=-1):
    r"""Gated linear unit: splits ``x`` in two halves ``a, b`` along ``axis`` and returns
    :math:`a \cdot \mathrm{sigmoid}(b)`.

    Args:
      x: input array.
      axis: the axis to split; its size must be even.

    Raises:
      ValueError: if the size of ``axis`` is odd.

    >>> import xform.nn
    >>> xform.nn.glu(xform.numpy.array([2., 0.]))
    Array([1.], dtype=float32)
    """
    x = _arraylike("glu", x)
    ax = _util.canonicalize_axis(axis, len(x.aval.shape))
    size = x.aval.shape[ax]
    if size % 2:
        raise ValueError(f"glu: the size of axis {axis} of x (shape {x.aval.shape}) must be "
                         f"divisible by 2, got {size}")
    return _glu(x, ax)


@functools.partial(jit, static_argnums=1)
def _glu(x, axis):
    a, b = jnp.split(x, 2, axis)
    return a * sigmoid(b)
