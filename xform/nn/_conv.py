"""Convolution layers of ``flax.linen``: Conv, ConvLocal, ConvTranspose, channels-last
(``(*batch, *spatial, features)``) with Flax's parameters, defaults and padding modes.

The patches of a local convolution (``lax.conv_general_dilated_patches``, which xform's
lax lacks) are a composition of ``lax.conv_general_dilated`` here.
"""
import math

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.nn import initializers
from xform.nn._linear import promote_dtype
from xform.nn._module import Module, compact
from xform.transforms.jit import ShapeDtypeStruct, eval_shape

default_kernel_init = initializers.lecun_normal()


def canonicalize_padding(padding, rank):
    """A conv ``padding`` as lax takes it: a mode string, or one ``(low, high)`` pair per
    spatial axis (an int pads both sides of every axis; ints in a sequence both sides)."""
    if isinstance(padding, str):
        return padding
    if isinstance(padding, int):
        return [(padding, padding)] * rank
    if isinstance(padding, (list, tuple)) and len(padding) == rank:
        pads = []
        for p in padding:
            if isinstance(p, int):
                pads.append((p, p))
            elif isinstance(p, (list, tuple)) and len(p) == 2:
                pads.append(tuple(p))
            else:
                break
        if len(pads) == rank:
            return pads
    raise ValueError(f"Invalid padding format: {padding}, should be str, int, or a "
                     f"sequence of len {rank} where each element is an int or pair of ints.")


def _conv_dimension_numbers(ndim):
    """Channels-last input/output, (*spatial, in, out) kernel, for any rank."""
    lhs_spec = (0, ndim - 1) + tuple(range(1, ndim - 1))
    rhs_spec = (ndim - 1, ndim - 2) + tuple(range(ndim - 2))
    return lax.ConvDimensionNumbers(lhs_spec, rhs_spec, lhs_spec)


def _tuple(x, n, what):
    x = 1 if x is None else x
    if isinstance(x, int):
        return (x,) * n
    x = tuple(x)
    if len(x) != n:
        raise ValueError(f"{what} {x} must have one entry per spatial axis of the kernel "
                         f"({n})")
    return x


def _flatten_batch(inputs, n_spatial, name):
    """Inputs as ``(batch, *spatial, features)`` and the original batch shape (None if
    already one batch axis)."""
    shape = jnp.shape(inputs)
    n_batch = len(shape) - (n_spatial + 1)
    if n_batch < 0:
        raise ValueError(f"{name}: inputs of shape {shape} have too few axes for a "
                         f"{n_spatial}-d kernel (need *batch, {n_spatial} spatial axes, "
                         f"features)")
    if n_batch == 1:
        return inputs, None
    return jnp.reshape(inputs, (-1,) + shape[n_batch:]), shape[:n_batch]


def _unflatten_batch(y, batch_shape):
    return y if batch_shape is None else jnp.reshape(y, batch_shape + jnp.shape(y)[1:])


def _conv_patches(lhs, filter_shape, strides, padding, lhs_dilation, rhs_dilation, dn,
                  precision):
    """``lax.conv_general_dilated_patches``: each output position's input window, channel
    major (c * prod(filter) + k), as a grouped convolution with an identity kernel."""
    channels = jnp.shape(lhs)[dn.lhs_spec[1]]
    size = math.prod(filter_shape)
    eye = np.broadcast_to(np.eye(size, dtype=np.float32), (channels, size, size))
    rhs = np.reshape(eye, (channels * size, 1) + tuple(filter_shape))
    rhs = np.moveaxis(rhs, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    return lax.conv_general_dilated(
        lhs, jnp.asarray(rhs, jnp.result_type(lhs)), strides, padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=channels,
        precision=None if precision is None else (precision, lax.Precision.DEFAULT))


class _Conv(Module):
    """Shared attributes and computation of Conv (shared weights) and ConvLocal."""

    features: int
    kernel_size: object
    strides: object = 1
    padding: object = "SAME"
    input_dilation: object = 1
    kernel_dilation: object = 1
    feature_group_count: int = 1
    use_bias: bool = True
    mask: object = None
    dtype: object = None
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    promote_dtype: object = promote_dtype
    conv_general_dilated: object = None
    conv_general_dilated_cls: object = None

    shared_weights = True

    def _conv_fn(self):
        """The convolution to run (Flax's order: ``conv_general_dilated_cls()``, then
        ``conv_general_dilated``, then lax's); ConvLocal uses it only for the output
        shape, as Flax."""
        if self.conv_general_dilated_cls is not None:
            return self.conv_general_dilated_cls()
        return self.conv_general_dilated or lax.conv_general_dilated

    @compact
    def __call__(self, inputs):
        """Convolve ``inputs`` ``(*batch, *spatial, features)`` (no batch axis: one
        example; several: flattened and restored)."""
        name = f"{type(self).__name__} at {self.scope.path_text}"
        kernel_size = ((self.kernel_size,) if isinstance(self.kernel_size, int)
                       else tuple(self.kernel_size))
        n = len(kernel_size)
        inputs, batch_shape = _flatten_batch(jnp.asarray(inputs), n, name)
        strides = _tuple(self.strides, n, "strides")
        input_dilation = _tuple(self.input_dilation, n, "input_dilation")
        kernel_dilation = _tuple(self.kernel_dilation, n, "kernel_dilation")
        padding = canonicalize_padding(self.padding, n)
        if padding in ("CIRCULAR", "REFLECT"):
            dilated = [(k - 1) * d + 1 for k, d in zip(kernel_size, kernel_dilation)]
            pads = [(0, 0)] + [((k - 1) // 2, k // 2) for k in dilated] + [(0, 0)]
            mode = {"CIRCULAR": "wrap", "REFLECT": "reflect"}[padding]
            inputs, padding = jnp.pad(inputs, pads, mode=mode), "VALID"
        elif padding == "CAUSAL":
            if n != 1:
                raise ValueError(f"{name}: Causal padding is only implemented for 1D "
                                 f"convolutions.")
            left = kernel_dilation[0] * (kernel_size[0] - 1)
            inputs, padding = jnp.pad(inputs, [(0, 0), (left, 0), (0, 0)]), "VALID"
        if isinstance(padding, str) and any(d != 1 for d in input_dilation):
            raise ValueError(
                f"{name}: string padding {padding!r} is not implemented with "
                f"input_dilation {input_dilation} (as in lax.conv_general_dilated); give "
                f"explicit (low, high) padding pairs")
        dn = _conv_dimension_numbers(jnp.ndim(inputs))
        in_features = jnp.shape(inputs)[-1]
        if self.shared_weights:
            if in_features % self.feature_group_count:
                raise ValueError(f"{name}: input features {in_features} are not divisible "
                                 f"by feature_group_count {self.feature_group_count}")
            kernel_shape = kernel_size + (in_features // self.feature_group_count,
                                          self.features)
        else:
            if self.feature_group_count != 1:
                raise NotImplementedError(
                    f"{name}: `lax.conv_general_dilated_local` does not support "
                    f"`feature_group_count != 1`, got `{self.feature_group_count}`.")
            out_spatial = self._local_out_spatial(inputs, kernel_size, strides, padding,
                                                  input_dilation, kernel_dilation, dn,
                                                  in_features)
            kernel_shape = out_spatial + (math.prod(kernel_size) * in_features,
                                          self.features)
        if self.mask is not None and tuple(jnp.shape(self.mask)) != kernel_shape:
            raise ValueError(f"{name}: Mask needs to have the same shape as weights. Shapes "
                             f"are: {tuple(jnp.shape(self.mask))}, {kernel_shape}")
        kernel = self.param("kernel", self.kernel_init, kernel_shape, self.param_dtype)
        if self.mask is not None:
            kernel = kernel * self.mask
        bias = None
        if self.use_bias:
            bias_shape = ((self.features,) if self.shared_weights
                          else out_spatial + (self.features,))
            bias = self.param("bias", self.bias_init, bias_shape, self.param_dtype)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        if self.shared_weights:
            y = self._conv_fn()(
                inputs, kernel, strides, padding, lhs_dilation=input_dilation,
                rhs_dilation=kernel_dilation, dimension_numbers=dn,
                feature_group_count=self.feature_group_count, precision=self.precision)
        else:
            y = self._local_conv(inputs, kernel, kernel_size, strides, padding,
                                 input_dilation, kernel_dilation, dn)
        if bias is not None:
            y = y + jnp.reshape(bias, (1,) * (jnp.ndim(y) - jnp.ndim(bias))
                                + jnp.shape(bias))
        return _unflatten_batch(y, batch_shape)

    def _local_out_spatial(self, inputs, kernel_size, strides, padding, input_dilation,
                           kernel_dilation, dn, in_features):
        if self.conv_general_dilated is not None or self.conv_general_dilated_cls is not None:
            conv = self._conv_fn()
            rhs = ShapeDtypeStruct(kernel_size + (in_features, self.features), inputs.dtype)
            return tuple(eval_shape(lambda lhs, rhs: conv(
                lhs=lhs, rhs=rhs, window_strides=strides, padding=padding,
                dimension_numbers=dn, lhs_dilation=input_dilation,
                rhs_dilation=kernel_dilation), inputs, rhs).shape[1:-1])
        shape = jnp.shape(inputs)
        dilated_in = [(s - 1) * d + 1 for s, d in zip(shape[1:-1], input_dilation)]
        window = [(k - 1) * d + 1 for k, d in zip(kernel_size, kernel_dilation)]
        if isinstance(padding, str):
            padding = lax.padtype_to_pads(dilated_in, window, strides, padding)
        return tuple(max(0, (i + lo + hi - w) // s + 1) for i, (lo, hi), w, s
                     in zip(dilated_in, padding, window, strides))

    def _local_conv(self, inputs, kernel, kernel_size, strides, padding, input_dilation,
                    kernel_dilation, dn):
        # ``lax.conv_general_dilated_local``: patches (N, *out, C*K) contracted with the
        # per-position kernel (*out, C*K, O), batched over the output positions.
        patches = _conv_patches(inputs, kernel_size, strides, padding, input_dilation,
                                kernel_dilation, dn, self.precision)
        ndim = jnp.ndim(patches)
        spatial = tuple(range(1, ndim - 1))
        out = lax.dot_general(
            patches, kernel, (((ndim - 1,), (ndim - 2,)), (spatial, tuple(range(ndim - 2)))),
            precision=self.precision)
        return jnp.moveaxis(out, (-2, -1), (0, ndim - 1))


class Conv(_Conv):
    """Convolution (``lax.conv_general_dilated``), channels-last, as ``flax.linen.Conv``.

    Attributes:
      features: number of output features (filters).
      kernel_size: int or one size per spatial axis.
      strides: int or one stride per spatial axis (default 1).
      padding: ``'SAME'`` (default), ``'VALID'``, ``'CIRCULAR'`` (periodic),
        ``'REFLECT'``, ``'CAUSAL'`` (1-d: left padding, same length), an int, or one int
        or ``(low, high)`` pair per spatial axis.
      input_dilation: int or per-axis dilation of the input (a transposed conv).
      kernel_dilation: int or per-axis dilation of the kernel (atrous conv).
      feature_group_count: split the input features into groups (depthwise: = features).
      use_bias: add a bias (default True).
      mask: optional array multiplied into the kernel (same shape as it).
      dtype: computation dtype (default: promoted from inputs and params).
      param_dtype: parameter dtype (default float32).
      precision: ``lax.Precision`` of the convolution.
      kernel_init, bias_init: initializers (default lecun_normal, zeros).
      promote_dtype: ``promote_dtype(inputs, kernel, bias, dtype=)`` replacement.
      conv_general_dilated, conv_general_dilated_cls: a replacement for
        ``lax.conv_general_dilated`` (e.g. quantized), or a class built per call.

    Parameters: ``kernel`` ``(*kernel_size, in_features // feature_group_count,
    features)``, ``bias`` ``(features,)``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.Conv(features=4, kernel_size=(3,), padding='VALID')
    >>> out, variables = layer.init_with_output(xform.random.key(0), jnp.ones((1, 8, 3)))
    >>> xform.tree_util.tree_map(jnp.shape, variables)
    {'params': {'bias': (4,), 'kernel': (3, 3, 4)}}
    >>> out.shape
    (1, 6, 4)
    """

    shared_weights = True


class ConvLocal(_Conv):
    """Locally connected ("unshared") convolution, as ``flax.linen.ConvLocal``: a
    different kernel at every output position (attributes as :class:`Conv`;
    ``feature_group_count`` must be 1).

    Parameters: ``kernel`` ``(*out_spatial, prod(kernel_size) * in_features, features)``,
    ``bias`` ``(*out_spatial, features)``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.ConvLocal(features=4, kernel_size=(3,), padding='VALID')
    >>> out, variables = layer.init_with_output(xform.random.key(0), jnp.ones((1, 8, 3)))
    >>> xform.tree_util.tree_map(jnp.shape, variables)
    {'params': {'bias': (6, 4), 'kernel': (6, 9, 4)}}
    """

    shared_weights = False


class ConvTranspose(Module):
    """Transposed convolution (``lax.conv_transpose``), channels-last, as
    ``flax.linen.ConvTranspose``.

    Attributes:
      features: number of output features.
      kernel_size: int or one size per spatial axis.
      strides: one stride per spatial axis (the input is dilated by it; default 1).
      padding: ``'SAME'`` (default), ``'VALID'``, ``'CIRCULAR'``, an int or per-axis
        ints/pairs (explicit pairs pad the dilated input, as in lax.conv_transpose).
      kernel_dilation: per-axis kernel dilation.
      use_bias, mask, dtype, param_dtype, precision, kernel_init, bias_init,
      promote_dtype: as in :class:`Conv`.
      transpose_kernel: flip the kernel's spatial axes and swap its in/out axes (the
        gradient of a Conv with that kernel; kernel shape ``(*k, features, in)``).
      preferred_element_type: accumulation dtype of the convolution.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.ConvTranspose(features=4, kernel_size=(3,), padding='VALID')
    >>> out, variables = layer.init_with_output(xform.random.key(0), jnp.ones((1, 8, 3)))
    >>> out.shape
    (1, 10, 4)
    """

    features: int
    kernel_size: object
    strides: object = None
    padding: object = "SAME"
    kernel_dilation: object = None
    use_bias: bool = True
    mask: object = None
    dtype: object = None
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    transpose_kernel: bool = False
    promote_dtype: object = promote_dtype
    preferred_element_type: object = None

    @compact
    def __call__(self, inputs):
        """Apply the transposed convolution to ``inputs`` ``(*batch, *spatial,
        features)``."""
        kernel_size = ((self.kernel_size,) if isinstance(self.kernel_size, int)
                       else tuple(self.kernel_size))
        n = len(kernel_size)
        name = f"ConvTranspose at {self.scope.path_text}"
        inputs, batch_shape = _flatten_batch(jnp.asarray(inputs), n, name)
        strides = _tuple(self.strides, n, "strides")
        kernel_dilation = _tuple(self.kernel_dilation, n, "kernel_dilation")
        in_features = jnp.shape(inputs)[-1]
        kernel_shape = kernel_size + ((self.features, in_features) if self.transpose_kernel
                                      else (in_features, self.features))
        if self.mask is not None and tuple(jnp.shape(self.mask)) != kernel_shape:
            raise ValueError(f"{name}: Mask needs to have the same shape as weights. Shapes "
                             f"are: {tuple(jnp.shape(self.mask))}, {kernel_shape}")
        kernel = self.param("kernel", self.kernel_init, kernel_shape, self.param_dtype)
        if self.mask is not None:
            kernel = kernel * self.mask
        padding = canonicalize_padding(self.padding, n)
        if padding == "CIRCULAR":
            padding = "VALID"
        bias = None
        if self.use_bias:
            bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        y = lax.conv_transpose(inputs, kernel, strides, padding,
                               rhs_dilation=kernel_dilation, transpose_kernel=self.transpose_kernel, precision=self.precision,
                               preferred_element_type=self.preferred_element_type)
        if self.padding == "CIRCULAR":
            y = self._fold_circular(y, jnp.shape(inputs)[1:-1], strides)
        if bias is not None:
            y = y + jnp.reshape(bias, (1,) * (jnp.ndim(y) - 1) + (-1,))
        return _unflatten_batch(y, batch_shape)

    def _fold_circular(self, y, in_spatial, strides):
        """Periodic boundary: pad each spatial axis to a multiple of the scaled input size
        and sum the periods onto one."""
        scaled = [x * s for x, s in zip(in_spatial, strides)]
        diffs = [-(yd - xd) % (2 * xd) for yd, xd in zip(jnp.shape(y)[1:-1], scaled)]
        if self.transpose_kernel:
            pads = [(d // 2, (d + 1) // 2) for d in diffs]
        else:
            pads = [((d + 1) // 2, d // 2) for d in diffs]
        y = jnp.pad(y, [(0, 0)] + pads + [(0, 0)])
        for i in range(1, jnp.ndim(y) - 1):
            shape = jnp.shape(y)
            y = jnp.reshape(y, shape[:i] + (-1, scaled[i - 1]) + shape[i + 1:]).sum(axis=i)
        return y
