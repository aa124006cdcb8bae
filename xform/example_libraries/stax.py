"""``jax.example_libraries.stax``: neural-network layers as ``(init_fun, apply_fun)``
pairs, and combinators that compose such pairs.

``init_fun(rng, input_shape) -> (output_shape, params)`` and ``apply_fun(params, inputs,
**kwargs) -> outputs`` (``rng=`` for the layers that need randomness). Keys are split
exactly as JAX's stax splits them, and the initializers are ``xform.nn.initializers``
(bit-exact with ``jax.nn.initializers``), so the same key gives JAX's parameters.
Constructors are CamelCase (``Dense(10)``); the parameterless layers (``Relu``,
``Flatten``, ``Identity``, ``FanInSum``, ...) are already pairs, not constructors.

>>> from xform import random
>>> init_fun, apply_fun = serial(Dense(4), Relu, Dense(2), LogSoftmax)
>>> out_shape, params = init_fun(random.key(0), (3, 5))
>>> out_shape, apply_fun(params, jnp.ones((3, 5))).shape
((3, 2), (3, 2))
"""
import functools
import math

import xform.numpy as jnp
from xform import lax, random
from xform.nn._activations import elu, gelu, leaky_relu, relu, selu, sigmoid, softplus
from xform.nn._functions import log_softmax, softmax, standardize
from xform.nn.initializers import glorot_normal, normal, ones, zeros

# aliases kept by JAX for backwards compatibility
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax

__all__ = [
    "Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose",
    "ConvTranspose", "BatchNorm", "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax",
    "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu", "Selu", "Gelu", "MaxPool",
    "SumPool", "AvgPool", "Flatten", "Identity", "FanOut", "FanInSum", "FanInConcat",
    "Dropout", "serial", "parallel", "shape_dependent", "glorot", "randn", "logsoftmax",
    "glorot_normal", "normal", "ones", "zeros", "relu", "log_softmax", "softmax",
    "softplus", "sigmoid", "elu", "leaky_relu", "selu", "gelu", "standardize"]


def _is_layer(layer):
    return (isinstance(layer, (tuple, list)) and len(layer) == 2
            and all(callable(f) for f in layer))


def _check_layers(combinator, layers):
    for k, layer in enumerate(layers):
        if not _is_layer(layer):
            raise TypeError(
                f"{combinator}: layer {k} is not an (init_fun, apply_fun) pair, got "
                f"{layer!r}. Constructors such as Dense(10) must be called; Relu, "
                "Flatten, Identity and FanInSum are already layers (no parentheses).")


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A dense (fully connected) layer: ``inputs @ W + b``, ``W`` of shape
    ``(input_shape[-1], out_dim)``."""
    def init_fun(rng, input_shape):
        if len(input_shape) < 1:
            raise ValueError(f"Dense needs inputs of rank >= 1, got input_shape {input_shape}")
        k1, k2 = random.split(rng)
        W, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return tuple(input_shape[:-1]) + (out_dim,), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _conv_kernel_shape(name, dimension_numbers, filter_shape, strides):
    """Validates a conv layer's specs; returns ``(lhs_spec, rhs_spec, out_spec, strides,
    kernel_shape)``, the last a function of ``(out_chan, input_shape)``."""
    if not (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3
            and all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError(f"{name}: dimension_numbers must be three spec strings such as "
                        f"('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nspatial = len(rhs_spec) - 2
    if not isinstance(filter_shape, (tuple, list)):
        raise TypeError(f"{name}: filter_shape must be a tuple of {nspatial} window sizes, "
                        f"got {filter_shape!r}")
    if len(filter_shape) != nspatial:
        raise ValueError(f"{name}: filter_shape {tuple(filter_shape)} has {len(filter_shape)} "
                         f"spatial dimensions but the kernel spec {rhs_spec!r} has {nspatial}")
    strides = strides or (1,) * nspatial
    if len(strides) != nspatial:
        raise ValueError(f"{name}: strides {tuple(strides)} must have one entry per spatial "
                         f"dimension ({nspatial})")

    def kernel_shape(out_chan, input_shape):
        if len(input_shape) != len(lhs_spec):
            raise ValueError(f"{name}: input_shape {tuple(input_shape)} must have rank "
                             f"{len(lhs_spec)} for the input spec {lhs_spec!r}")
        spatial = iter(filter_shape)
        return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
                else next(spatial) for c in rhs_spec]
    return lhs_spec, rhs_spec, out_spec, tuple(strides), kernel_shape


def _conv_layer(name, shape_rule, apply_rule, dimension_numbers, out_chan, filter_shape,
                strides, padding, W_init, b_init):
    lhs_spec, rhs_spec, out_spec, strides, kernel_shape = _conv_kernel_shape(
        name, dimension_numbers, filter_shape, strides)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng, input_shape):
        kshape = kernel_shape(out_chan, input_shape)
        output_shape = shape_rule(input_shape, kshape, strides, padding, dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, kshape), b_init(k2, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return apply_rule(inputs, W, strides, padding, dimension_numbers) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=normal(1e-6)):
    """A convolution layer with any ``(lhs, rhs, out)`` dimension specs (``Conv`` is
    ``('NHWC', 'HWIO', 'NHWC')``); ``padding`` is 'VALID', 'SAME' or explicit pairs.

    Raises:
      TypeError: for malformed ``dimension_numbers``.
      ValueError: when ``filter_shape``/``strides`` do not match the spatial rank, or (at
        init) the input's rank does not match the input spec.
    """
    def conv(x, W, strides, padding, dn):
        one = (1,) * len(strides)
        return lax.conv_general_dilated(x, W, strides, padding, one, one,
                                        dimension_numbers=dn)
    return _conv_layer("GeneralConv", lax.conv_general_shape_tuple, conv, dimension_numbers,
                       out_chan, filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A transposed-convolution layer (``lax.conv_transpose``) with any dimension specs.

    Raises:
      TypeError: for malformed ``dimension_numbers``.
      ValueError: as :func:`GeneralConv`.
    """
    def conv_t(x, W, strides, padding, dn):
        return lax.conv_transpose(x, W, strides, padding, dimension_numbers=dn)
    return _conv_layer("GeneralConvTranspose", lax.conv_transpose_shape_tuple, conv_t,
                       dimension_numbers, out_chan, filter_shape, strides, padding,
                       W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Normalizes over ``axis`` with the batch's own statistics (no running averages),
    then scales by ``gamma`` and shifts by ``beta`` (shaped as the other axes)."""
    axis = (axis,) if jnp.isscalar(axis) else tuple(axis)

    def axes(ndim, shape):   # NB: negative axes count from the end (JAX's miscount them)
        if any(not -ndim <= a < ndim for a in axis):
            raise ValueError(f"BatchNorm: axis {axis} out of range for inputs of shape "
                             f"{tuple(shape)}")
        return tuple(a % ndim for a in axis)

    def init_fun(rng, input_shape):
        ax = axes(len(input_shape), input_shape)
        shape = tuple(d for i, d in enumerate(input_shape) if i not in ax)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        ax = axes(jnp.ndim(x), jnp.shape(x))
        ed = tuple(None if i in ax else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, ax, epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        return gamma[ed] * z if scale else z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying ``fun(inputs, **fun_kwargs)``."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _window_sizes(window_shape, strides, padding, inputs, non_spatial):
    """How many real (unpadded) elements each window covers, broadcastable to the output."""
    spatial = tuple(d for i, d in enumerate(inputs.shape) if i not in non_spatial)
    sizes = lax.reduce_window(jnp.ones(spatial, inputs.dtype), 0., lax.add, window_shape,
                              strides, padding)
    for i in sorted(non_spatial):
        sizes = jnp.expand_dims(sizes, i)
    return sizes


def _pooling_layer(name, reducer, init_val, average=False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        window_shape = tuple(window_shape)
        strides = tuple(strides or (1,) * len(window_shape))
        if len(strides) != len(window_shape):
            raise ValueError(f"{name}: strides {strides} and window_shape {window_shape} "
                             "must have the same length")
        rank = len(window_shape) + 2
        if spec is not None and (len(spec) != rank or "N" not in spec or "C" not in spec):
            raise ValueError(f"{name}: spec {spec!r} must name {rank} dimensions including "
                             f"'N' and 'C' for window_shape {window_shape}")
        non_spatial = (0, rank - 1) if spec is None else (spec.index("N"), spec.index("C"))
        full_window, full_strides = list(window_shape), list(strides)
        for i in sorted(non_spatial):
            full_window.insert(i, 1)
            full_strides.insert(i, 1)

        def check_rank(shape):
            if len(shape) != rank:
                raise ValueError(f"{name}: window_shape {window_shape} needs inputs of rank "
                                 f"{rank} (batch, spatial..., channel, or as `spec` says), "
                                 f"got shape {tuple(shape)}")

        def init_fun(rng, input_shape):
            check_rank(input_shape)
            pads = lax.padtype_to_pads(input_shape, full_window, full_strides, padding)
            one = (1,) * rank
            return lax.reduce_window_shape_tuple(input_shape, full_window, full_strides,
                                                 pads, one, one), ()

        def apply_fun(params, inputs, **kwargs):
            check_rank(inputs.shape)
            out = lax.reduce_window(inputs, init_val, reducer, full_window, full_strides,
                                    padding)
            if average:
                out = out / _window_sizes(window_shape, strides, padding, inputs, non_spatial)
            return out
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
    PoolingLayer.__doc__ = (
        f"A {name} layer over the spatial axes (inputs ``(N, spatial..., C)`` unless "
        "``spec``, e.g. 'NCHW', says where N and C are); padding 'VALID', 'SAME' or pairs."
        + (" Padded elements do not count towards a window's average." if average else ""))
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, -jnp.inf)
SumPool = _pooling_layer("SumPool", lax.add, 0.)
AvgPool = _pooling_layer("AvgPool", lax.add, 0., average=True)


def _flatten():
    """Flattens all but the leading (batch) axis."""
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()
Identity = (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: inputs)


def FanOut(num):
    """Copies its input to a list of ``num`` outputs (for :func:`parallel`)."""
    return (lambda rng, input_shape: ([input_shape] * num, ()),
            lambda params, inputs, **kwargs: [inputs] * num)


FanInSum = (lambda rng, input_shape: (input_shape[0], ()),
            lambda params, inputs, **kwargs: sum(inputs))


def FanInConcat(axis=-1):
    """Concatenates a list of inputs along ``axis``."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Dropout: in ``mode='train'`` keeps each input with probability ``rate`` (scaling
    kept ones by ``1 / rate``) using the ``rng=`` key; otherwise the identity.

    NB: as in JAX's stax, ``rate`` is the probability to *keep* (Flax's and Keras'
    ``rate`` is the probability to drop); kept for the same results as JAX's.

    Raises:
      ValueError: from ``apply_fun`` in train mode without an ``rng`` key.
    """
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError(
                "Dropout layer requires apply_fun to be called with a PRNG key argument. "
                "That is, instead of `apply_fun(params, inputs)`, call it like "
                "`apply_fun(params, inputs, rng=key)` where `key` is a PRNG key "
                "(e.g. from `xform.random.key`).")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


# ---- combinators ----

def serial(*layers):
    """Composes ``layers`` in sequence; params are a list, one entry per layer.

    Args:
      *layers: ``(init_fun, apply_fun)`` pairs.

    Returns:
      The composed ``(init_fun, apply_fun)`` pair. Its ``apply_fun`` splits an ``rng=``
      key into one per layer.

    Raises:
      TypeError: if an argument is not a layer (e.g. an uncalled constructor).
    """
    _check_layers("serial", layers)
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
        for fun, param, r in zip(apply_funs, params, rngs, strict=True):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def _check_arity(combinator, what, got, nlayers):
    if len(got) != nlayers:
        raise ValueError(f"{combinator}: got {len(got)} {what} for {nlayers} layers")


def parallel(*layers):
    """Applies ``layers[k]`` to the k-th of a sequence of inputs (often between
    :func:`FanOut` and :func:`FanInSum`).

    Args:
      *layers: ``(init_fun, apply_fun)`` pairs.

    Returns:
      The combined pair, taking and returning sequences as long as ``layers``.

    Raises:
      TypeError: if an argument is not a layer.
      ValueError: when the number of inputs (or input shapes) differs from the layers'.
    """
    _check_layers("parallel", layers)
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        _check_arity("parallel", "input shapes", input_shape, nlayers)
        rngs = random.split(rng, nlayers)
        results = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]
        return tuple(zip(*results)) if results else ((), ())

    def apply_fun(params, inputs, **kwargs):
        _check_arity("parallel", "inputs", inputs, nlayers)
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
        return [f(p, x, rng=r, **kwargs)
                for f, p, x, r in zip(apply_funs, params, inputs, rngs, strict=True)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built by ``make_layer(input_shape)`` once the input shape is known.

    Args:
      make_layer: input shape -> ``(init_fun, apply_fun)`` pair.

    Returns:
      An ``(init_fun, apply_fun)`` pair that builds the layer on each call.
    """
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
