"""The named optimizers (Optax's ``alias``): each is a :func:`chain` of building blocks
ending in ``scale_by_learning_rate``, so its state and numerics are Optax's."""
import functools

import xform.numpy as jnp
from xform.optim import _basic as B
from xform.optim import _scaling as S
from xform.optim._base import chain, identity
from xform.optim._wrappers import masked


def sgd(learning_rate, momentum=None, nesterov=False, accumulator_dtype=None):
    """Stochastic gradient descent, optionally with (Nesterov) momentum.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.sgd(0.1, momentum=0.9)
        >>> tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))[0]
        Array([-0.1], dtype=float32)
    """
    m = (B.trace(decay=momentum, nesterov=nesterov, accumulator_dtype=accumulator_dtype)
         if momentum is not None else identity())
    return chain(m, B.scale_by_learning_rate(learning_rate))


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
         nesterov=False):
    """Adam (Kingma & Ba, 2014).

    Args:
        learning_rate: a float or a schedule.
        b1, b2: decay rates of the first and second moments.
        eps, eps_root: added to the denominator outside / inside the square root.
        mu_dtype: dtype of the first moment.
        nesterov: NAdam's Nesterov momentum.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.adam(0.1)
        >>> tx.update(jnp.array([3.]), tx.init(jnp.zeros(1)))[0].round(4)
        Array([-0.09999999], dtype=float32)
    """
    return chain(S.scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                                 nesterov=nesterov),
                 B.scale_by_learning_rate(learning_rate))


nadam = functools.partial(adam, nesterov=True)
nadam.__doc__ = "NAdam: :func:`adam` with Nesterov momentum (``nesterov=True``)."


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
          weight_decay=1e-4, mask=None, *, nesterov=False):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.adamw(0.1, weight_decay=0.0)
        >>> tx.update(jnp.array([3.]), tx.init(jnp.zeros(1)), jnp.zeros(1))[0].round(4)
        Array([-0.09999999], dtype=float32)
    """
    return chain(S.scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                                 nesterov=nesterov),
                 B.add_decayed_weights(weight_decay, mask),
                 B.scale_by_learning_rate(learning_rate))


nadamw = functools.partial(adamw, nesterov=True)
nadamw.__doc__ = "NAdamW: :func:`adamw` with Nesterov momentum (``nesterov=True``)."


def adamax(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    """Adamax: Adam with the infinity norm.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.adamax(0.1).init(jnp.zeros(1))[0].count
        Array(0, dtype=int32)
    """
    return chain(S.scale_by_adamax(b1=b1, b2=b2, eps=eps), B.scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, mask=None):
    """Adamax with decoupled weight decay."""
    return chain(S.scale_by_adamax(b1=b1, b2=b2, eps=eps),
                 B.add_decayed_weights(weight_decay, mask), B.scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
            bias_correction_mu=True, bias_correction_nu=True):
    """AMSGrad (Reddi et al., 2018)."""
    return chain(S.scale_by_amsgrad(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                                    bias_correction_mu=bias_correction_mu,
                                    bias_correction_nu=bias_correction_nu),
                 B.scale_by_learning_rate(learning_rate))


def radam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
          nesterov=False):
    """Rectified Adam (Liu et al., 2020)."""
    return chain(S.scale_by_radam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, threshold=threshold,
                                  nesterov=nesterov),
                 B.scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True,
            centered=False, momentum=None, nesterov=False, bias_correction=False):
    """RMSProp, optionally centered and with momentum.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.rmsprop(0.1, decay=0.0, eps=0.0)
        >>> tx.update(jnp.array([5.]), tx.init(jnp.zeros(1)))[0]
        Array([-0.1], dtype=float32)
    """
    rescale = (S.scale_by_stddev if centered else S.scale_by_rms)(
        decay=decay, eps=eps, initial_scale=initial_scale, eps_in_sqrt=eps_in_sqrt,
        bias_correction=bias_correction)
    return chain(rescale, B.scale_by_learning_rate(learning_rate),
                 B.trace(decay=momentum, nesterov=nesterov) if momentum is not None
                 else identity())


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad (Duchi et al., 2011)."""
    return chain(S.scale_by_rss(initial_accumulator_value=initial_accumulator_value, eps=eps),
                 B.scale_by_learning_rate(learning_rate))


def adadelta(learning_rate=None, rho=0.9, eps=1e-6, weight_decay=0.0, weight_decay_mask=None):
    """Adadelta (Zeiler, 2012); ``learning_rate=None`` means no extra scaling (sign only)."""
    return chain(B.add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 S.scale_by_adadelta(rho=rho, eps=eps), B.scale_by_learning_rate(learning_rate))


def adafactor(learning_rate=None, min_dim_size_to_factor=128, decay_rate=0.8, decay_offset=0,
              multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
              dtype_momentum=jnp.float32, weight_decay_rate=None, eps=1e-30, factored=True,
              weight_decay_mask=None):
    """Adafactor (Shazeer & Stern, 2018): factored second moments, update clipping,
    relative step sizes.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.adafactor(0.01)
        >>> p = jnp.ones((4, 3))
        >>> tx.update(jnp.ones((4, 3)), tx.init(p), p)[0].shape
        (4, 3)
    """
    tx = [S.scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                  eps)]
    if clipping_threshold is not None:
        tx.append(B.clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        tx.append(B.scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        tx.append(B.scale_by_param_block_rms())
    if momentum is not None:
        tx.append(B.ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        tx.append(B.add_decayed_weights(weight_decay_rate, mask=weight_decay_mask))
    tx.append(B.scale(-1))
    return chain(*tx)


def lamb(learning_rate, b1=0.9, b2=0.999, eps=1e-6, eps_root=0.0, weight_decay=0.0, mask=None):
    """LAMB (You et al., 2020): Adam with layer-wise trust ratios."""
    return chain(S.scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root),
                 B.add_decayed_weights(weight_decay=weight_decay, mask=mask),
                 B.scale_by_trust_ratio(), B.scale_by_learning_rate(learning_rate))


def lars(learning_rate, weight_decay=0.0, weight_decay_mask=True, trust_coefficient=0.001,
         eps=0.0, trust_ratio_mask=True, momentum=0.9, nesterov=False):
    """LARS (You et al., 2017): SGD with momentum and layer-wise trust ratios."""
    return chain(B.add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 masked(B.scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
                        mask=trust_ratio_mask),
                 B.scale_by_learning_rate(learning_rate),
                 B.trace(decay=momentum, nesterov=nesterov))


def lion(learning_rate, b1=0.9, b2=0.99, mu_dtype=None, weight_decay=1e-3, mask=None):
    """Lion (Chen et al., 2023): signed momentum with decoupled weight decay."""
    return chain(S.scale_by_lion(b1=b1, b2=b2, mu_dtype=mu_dtype),
                 B.add_decayed_weights(weight_decay, mask), B.scale_by_learning_rate(learning_rate))


def adabelief(learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov=False):
    """AdaBelief (Zhuang et al., 2020)."""
    return chain(S.scale_by_belief(b1=b1, b2=b2, eps=eps, eps_root=eps_root, nesterov=nesterov),
                 B.scale_by_learning_rate(learning_rate))


def novograd(learning_rate, b1=0.9, b2=0.25, eps=1e-6, eps_root=0.0, weight_decay=0.0):
    """NovoGrad (Ginsburg et al., 2019)."""
    return chain(S.scale_by_novograd(b1=b1, b2=b2, eps=eps, eps_root=eps_root,
                                     weight_decay=weight_decay),
                 B.scale_by_learning_rate(learning_rate))


def yogi(learning_rate, b1=0.9, b2=0.999, eps=1e-3):
    """Yogi (Zaheer et al., 2018)."""
    return chain(S.scale_by_yogi(b1=b1, b2=b2, eps=eps), B.scale_by_learning_rate(learning_rate))


def sm3(learning_rate, momentum=0.9):
    """SM3 (Anil et al., 2019). NB: like Optax, ``learning_rate`` must be a float."""
    return chain(S.scale_by_sm3(momentum), B.scale(-learning_rate))


def sign_sgd(learning_rate):
    """signSGD: the sign of the gradient times the learning rate."""
    return chain(B.scale_by_sign(), B.scale_by_learning_rate(learning_rate))


def signum(learning_rate, beta=0.9, accumulator_dtype=None):
    """Signum: the sign of an (unbiased-free) EMA of the gradients."""
    return chain(B.ema(beta, debias=False, accumulator_dtype=accumulator_dtype),
                 B.scale_by_sign(), B.scale_by_learning_rate(learning_rate))


def noisy_sgd(learning_rate, eta=0.01, gamma=0.55, key=None, *, seed=None):
    """SGD with annealed Gaussian gradient noise (needs ``xform.random``)."""
    return chain(B.add_noise(eta, gamma, key, seed=seed), B.scale_by_learning_rate(learning_rate))


def fromage(learning_rate, min_norm=1e-6):
    """Fromage (Bernstein et al., 2020); ``learning_rate`` is a float or a schedule."""
    if callable(learning_rate):
        def mult_lr(c):
            return 1 / (1 + learning_rate(c) ** 2) ** 0.5
        return chain(B.scale_by_trust_ratio(min_norm),
                     B.scale_by_learning_rate(lambda c: mult_lr(c) * learning_rate(c)),
                     B.add_decayed_weights(lambda c: mult_lr(c) - 1))
    mult = 1 / (1 + learning_rate ** 2) ** 0.5
    return chain(B.scale_by_trust_ratio(min_norm), B.scale_by_learning_rate(learning_rate * mult),
                 B.add_decayed_weights(mult - 1))
