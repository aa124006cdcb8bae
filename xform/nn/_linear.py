"""Linear layers (Flax linen's ``Dense``, ``DenseGeneral``, ``Einsum``, ``Embed``) and
``promote_dtype``, the mixed-precision rule they share."""
import string
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.nn import initializers
from xform.nn._module import Module, compact, merge_param

default_kernel_init = initializers.lecun_normal()


def canonicalize_dtype(*args, dtype=None, inexact=True):
    """The dtype computations run in: ``dtype`` or the promoted dtype of ``args``."""
    if dtype is None:
        dtype = jnp.result_type(*[jnp.asarray(x) for x in args if x is not None])
        if inexact and not jnp.issubdtype(dtype, jnp.inexact):
            dtype = jnp.promote_types(jnp.float32, dtype)
    if inexact and not jnp.issubdtype(dtype, jnp.inexact):
        raise ValueError(f"Dtype must be inexact: {dtype}")
    return dtype


def promote_dtype(*args, dtype=None, inexact=True):
    """Casts ``args`` (``None`` kept) to one dtype: ``dtype`` or their promotion."""
    dtype = canonicalize_dtype(*args, dtype=dtype, inexact=inexact)
    return [None if x is None else jnp.asarray(x, dtype) for x in args]


class Dense(Module):
    """A linear map over the last axis: ``y = x @ kernel + bias``.

    Attributes: features (output size), use_bias, dtype (computation dtype; None:
    promoted from inputs and params), param_dtype, precision, kernel_init (LeCun
    normal), bias_init (zeros), dot_general.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.Dense(3).init(xform.random.PRNGKey(0), jnp.ones((2, 4)))
    >>> v['params']['kernel'].shape, v['params']['bias'].shape
    ((4, 3), (3,))
    """
    features: int
    use_bias: bool = True
    dtype: object = None
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    promote_dtype: object = promote_dtype
    dot_general: object = None
    dot_general_cls: object = None

    @compact
    def __call__(self, inputs):
        kernel = self.param("kernel", self.kernel_init,
                            (jnp.shape(inputs)[-1], self.features), self.param_dtype)
        bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
                if self.use_bias else None)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        dot_general = (self.dot_general_cls() if self.dot_general_cls is not None
                       else self.dot_general or lax.dot_general)
        y = dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())),
                        precision=self.precision)
        if bias is not None:
            y += jnp.reshape(bias, (1,) * (y.ndim - 1) + (-1,))
        return y


def _canonicalize_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _normalize_axes(axes, ndim):
    return tuple(sorted(ax if ax >= 0 else ndim + ax for ax in axes))


class DenseGeneral(Module):
    """A linear map contracting several input ``axis`` into several ``features``,
    optionally batched over leading ``batch_dims`` (one kernel per batch index).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.DenseGeneral((2, 3), axis=(-2, -1))
    >>> v = m.init(xform.random.PRNGKey(0), jnp.ones((5, 4, 6)))
    >>> v['params']['kernel'].shape
    (4, 6, 2, 3)
    """
    features: object
    axis: object = -1
    batch_dims: object = ()
    use_bias: bool = True
    dtype: object = None
    param_dtype: object = jnp.float32
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    precision: object = None
    promote_dtype: object = promote_dtype
    dot_general: object = None
    dot_general_cls: object = None

    @compact
    def __call__(self, inputs):
        features = _canonicalize_tuple(self.features)
        axis = _canonicalize_tuple(self.axis)
        batch_dims = _canonicalize_tuple(self.batch_dims)
        if batch_dims and set(batch_dims) != set(range(max(batch_dims) + 1)):
            raise ValueError(f"batch_dims {batch_dims} must be consecutive leading "
                             f"dimensions starting from 0.")
        ndim, n_batch = inputs.ndim, len(batch_dims)
        axis, batch_dims = _normalize_axes(axis, ndim), _normalize_axes(batch_dims, ndim)
        n_axis, n_features = len(axis), len(features)

        def kernel_init_wrap(rng, shape, dtype=jnp.float32):
            # The initializer sees the kernel as a (batch*in, out) matrix, as in Flax.
            flat = (int(np.prod(shape[:n_batch]) * np.prod(shape[n_batch:n_axis + n_batch])),
                    int(np.prod(shape[-n_features:])))
            return jnp.reshape(self.kernel_init(rng, flat, dtype), shape)

        batch_shape = tuple(inputs.shape[ax] for ax in batch_dims)
        expanded_batch_shape = tuple(inputs.shape[ax] if ax in batch_dims else 1
                                     for ax in range(ndim) if ax not in axis)
        kernel_shape = tuple(inputs.shape[ax] for ax in axis) + features
        kernel = self.param("kernel", kernel_init_wrap, batch_shape + kernel_shape,
                            self.param_dtype)
        batch_ind = tuple(range(n_batch))
        contract_ind = tuple(range(n_batch, n_axis + n_batch))
        bias = None
        if self.use_bias:
            def bias_init_wrap(rng, shape, dtype=jnp.float32):
                flat = (int(np.prod(shape[:n_batch]) * np.prod(shape[-n_features:])),)
                return jnp.reshape(self.bias_init(rng, flat, dtype), shape)
            bias = self.param("bias", bias_init_wrap, batch_shape + features,
                              self.param_dtype)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        dot_general = (self.dot_general_cls() if self.dot_general_cls is not None
                       else self.dot_general or lax.dot_general)
        out = dot_general(inputs, kernel, ((axis, contract_ind), (batch_dims, batch_ind)),
                          precision=self.precision)
        if bias is not None:
            out += jnp.reshape(bias, expanded_batch_shape + features)
        return out


class Einsum(Module):
    """A learned kernel of ``shape`` contracted with the input by ``einsum_str``
    (``'abc,cd->abd'``: input first, kernel second).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.Einsum((3, 5), 'bi,io->bo')
    >>> m.init(xform.random.PRNGKey(0), jnp.ones((2, 3)))['params']['bias'].shape
    (5,)
    """
    shape: tuple
    einsum_str: object = None
    use_bias: bool = True
    dtype: object = None
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros
    promote_dtype: object = promote_dtype
    preferred_element_type: object = None

    @compact
    def __call__(self, inputs, einsum_str=None):
        einsum_str = merge_param("einsum_str", self.einsum_str, einsum_str)
        einsum_str = einsum_str.replace(" ", "")
        if "->" not in einsum_str:
            raise ValueError('`einsum_str` equation must be explicit and include "->".')
        if einsum_str.count(",") != 1:
            raise ValueError(
                f"`einsum_str` equation must have exactly two operands and therefore, "
                f"exactly one comma character, instead of {einsum_str.count(',')}")
        kernel = self.param("kernel", self.kernel_init, self.shape, self.param_dtype)
        bias = None
        if self.use_bias:
            operands, result = _expand_ellipsis(einsum_str, (jnp.ndim(inputs), len(self.shape)))
            rhs = {c: i for i, c in enumerate(operands[1])}
            bias_shape = [self.shape[rhs[c]] for c in result if c in rhs]
            broadcast_shape = [self.shape[rhs[c]] if c in rhs else 1 for c in result]
            bias = self.param("bias", self.bias_init, bias_shape, self.param_dtype)
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        y = jnp.einsum(einsum_str, inputs, kernel, precision=self.precision,
                       preferred_element_type=self.preferred_element_type)
        if bias is not None:
            y += jnp.reshape(bias, broadcast_shape)
        return y


def _expand_ellipsis(einsum_str, ndims):
    """``'...c,cd->...d'`` with each ``...`` spelled as unused letters (right-aligned, as
    opt_einsum's parser does), so the bias axes can be read off the kernel's letters."""
    operands, result = einsum_str.split("->")
    operands = operands.split(",")
    free = [c for c in string.ascii_letters if c not in einsum_str]
    widths = [nd - (len(op) - 3) for op, nd in zip(operands, ndims) if "..." in op]
    ell = "".join(free[:max(widths, default=0)])
    operands = [op.replace("...", ell[len(ell) - (nd - (len(op) - 3)):] if "..." in op else "")
                for op, nd in zip(operands, ndims)]
    return operands, result.replace("...", ell)


default_embed_init = initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)


class Embed(Module):
    """A lookup table ``embedding[num_embeddings, features]`` for integer inputs;
    ``attend(query)`` is the transposed map (logits over the vocabulary).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> m = nn.Embed(10, 4)
    >>> v = m.init(xform.random.PRNGKey(0), jnp.array([1, 2]))
    >>> m.apply(v, jnp.ones((2, 4)), method=m.attend).shape
    (2, 10)
    """
    num_embeddings: int
    features: int
    dtype: object = None
    param_dtype: object = jnp.float32
    embedding_init: object = default_embed_init
    promote_dtype: object = promote_dtype

    def setup(self):
        self.embedding = self.param("embedding", self.embedding_init,
                                    (self.num_embeddings, self.features),
                                    self.param_dtype)

    def __call__(self, inputs):
        if not jnp.issubdtype(inputs.dtype, jnp.integer):
            raise ValueError("Input type must be an integer or unsigned integer.")
        (embedding,) = self.promote_dtype(self.embedding, dtype=self.dtype, inexact=False)
        if self.num_embeddings == 1:
            return jnp.broadcast_to(embedding, inputs.shape + (self.features,))
        return jnp.take(embedding, inputs, axis=0)

    def attend(self, query):
        query, embedding = self.promote_dtype(query, self.embedding, dtype=self.dtype)
        return jnp.dot(query, embedding.T)
