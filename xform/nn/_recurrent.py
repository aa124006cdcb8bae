"""Recurrent layers of ``flax.linen``: the cells (LSTMCell, OptimizedLSTMCell, GRUCell,
MGUCell, SimpleCell, ConvLSTMCell), each a step ``(carry, x) -> (carry, y)`` with
``initialize_carry``, and RNN / Bidirectional, which run a cell over a sequence with the
lifted ``nn.scan`` (parameters broadcast over time: the cell's tree is the RNN's)."""
import functools

import numpy as np

from xform import numpy as jnp
from xform import random
from xform.core import tree_util
from xform.nn import initializers
from xform.nn._activations import sigmoid
from xform.nn._conv import Conv
from xform.nn._linear import Dense, default_kernel_init, promote_dtype
from xform.nn._module import Module, compact, nowrap
from xform.nn._transforms import scan as lifted_scan
from xform.nn.core.frozen_dict import FrozenDict

tanh = jnp.tanh


class RNNCellBase(Module):
    """Base of the recurrent cells: ``__call__(carry, inputs) -> (carry, outputs)``,
    ``initialize_carry(rng, input_shape)`` and ``num_feature_axes``."""

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """The initial carry for inputs of ``input_shape`` (``(*batch, features)``)."""
        raise NotImplementedError

    @property
    def num_feature_axes(self):
        """How many trailing input axes are features (1; more for ConvLSTMCell)."""
        raise NotImplementedError


def _carry_pair(cell, rng, input_shape):
    key1, key2 = random.split(rng)
    shape = tuple(input_shape[:-1]) + (cell.features,)
    return (cell.carry_init(key1, shape, cell.param_dtype),
            cell.carry_init(key2, shape, cell.param_dtype))


def _carry_one(cell, rng, input_shape):
    return cell.carry_init(rng, tuple(input_shape[:-1]) + (cell.features,), cell.param_dtype)


class LSTMCell(RNNCellBase):
    r"""LSTM cell, as ``flax.linen.LSTMCell``: gates
    :math:`i, f, o = \sigma(W_{x\cdot} x + W_{h\cdot} h + b_{h\cdot})`,
    :math:`g = \tanh(\dots)`, :math:`c' = f c + i g`, :math:`h' = o \tanh(c')`.

    Parameters: Dense ``ii, if, ig, io`` (input, no bias) and ``hi, hf, hg, ho`` (hidden,
    with bias). The carry is ``(c, h)``.

    Attributes:
      features: the hidden size.
      gate_fn, activation_fn: default sigmoid and tanh.
      kernel_init, recurrent_kernel_init, bias_init: default lecun_normal, orthogonal,
        zeros.
      dtype, param_dtype: computation and parameter dtypes.
      carry_init: initializer of the carry (default zeros).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.LSTMCell(features=3)
    >>> x = jnp.ones((2, 4))
    >>> carry = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> v = cell.init(xform.random.key(1), carry, x)
    >>> (c, h), y = cell.apply(v, carry, x)
    >>> y.shape
    (2, 3)
    """

    features: int
    gate_fn: object = sigmoid
    activation_fn: object = tanh
    kernel_init: object = default_kernel_init
    recurrent_kernel_init: object = initializers.orthogonal()
    bias_init: object = initializers.zeros
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``."""
        c, h = carry
        hidden = jnp.shape(h)[-1]
        dense_h = functools.partial(Dense, features=hidden, use_bias=True,
                                    kernel_init=self.recurrent_kernel_init,
                                    bias_init=self.bias_init, dtype=self.dtype,
                                    param_dtype=self.param_dtype)
        dense_i = functools.partial(Dense, features=hidden, use_bias=False,
                                    kernel_init=self.kernel_init, dtype=self.dtype,
                                    param_dtype=self.param_dtype)
        i = self.gate_fn(dense_i(name="ii")(inputs) + dense_h(name="hi")(h))
        f = self.gate_fn(dense_i(name="if")(inputs) + dense_h(name="hf")(h))
        g = self.activation_fn(dense_i(name="ig")(inputs) + dense_h(name="hg")(h))
        o = self.gate_fn(dense_i(name="io")(inputs) + dense_h(name="ho")(h))
        new_c = f * c + i * g
        new_h = o * self.activation_fn(new_c)
        return (new_c, new_h), new_h

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``(c, h)``, each ``(*batch, features)`` from ``carry_init``."""
        return _carry_pair(self, rng, input_shape)

    @property
    def num_feature_axes(self):
        return 1


class DenseParams(Module):
    """The kernel and bias of a Dense, returned instead of applied (OptimizedLSTMCell
    concatenates them into one matmul)."""

    features: int
    use_bias: bool = True
    param_dtype: object = jnp.float32
    precision: object = None
    kernel_init: object = default_kernel_init
    bias_init: object = initializers.zeros

    @compact
    def __call__(self, inputs):
        """``(kernel, bias or None)`` for ``inputs``' feature size."""
        k = self.param("kernel", self.kernel_init, (jnp.shape(inputs)[-1], self.features),
                       self.param_dtype)
        b = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
             if self.use_bias else None)
        return k, b


class OptimizedLSTMCell(RNNCellBase):
    """LSTMCell computing the four gates with one matmul per input (the same parameter
    tree and values as :class:`LSTMCell`), as ``flax.linen.OptimizedLSTMCell``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.OptimizedLSTMCell(features=3)
    >>> x = jnp.ones((2, 4))
    >>> carry = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> cell.init_with_output(xform.random.key(1), carry, x)[0][1].shape
    (2, 3)
    """

    features: int
    gate_fn: object = sigmoid
    activation_fn: object = tanh
    kernel_init: object = default_kernel_init
    recurrent_kernel_init: object = initializers.orthogonal()
    bias_init: object = initializers.zeros
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``."""
        c, h = carry
        hidden = jnp.shape(h)[-1]
        params_i, params_h = {}, {}
        for gate in "ifgo":
            params_i[gate] = DenseParams(
                features=hidden, use_bias=False, param_dtype=self.param_dtype,
                kernel_init=self.kernel_init, bias_init=self.bias_init,
                name=f"i{gate}")(inputs)
            params_h[gate] = DenseParams(
                features=hidden, use_bias=True, param_dtype=self.param_dtype,
                kernel_init=self.recurrent_kernel_init, bias_init=self.bias_init,
                name=f"h{gate}")(h)
        zh = self._concat_dense(h, params_h, True)
        zi = self._concat_dense(inputs, params_i, False)
        i = self.gate_fn(zh["i"] + zi["i"])
        f = self.gate_fn(zh["f"] + zi["f"])
        g = self.activation_fn(zh["g"] + zi["g"])
        o = self.gate_fn(zh["o"] + zi["o"])
        new_c = f * c + i * g
        new_h = o * self.activation_fn(new_c)
        return (new_c, new_h), new_h

    @nowrap
    def _concat_dense(self, inputs, params, use_bias):
        kernels = [k for k, _ in params.values()]
        kernel = jnp.concatenate(kernels, axis=-1)
        bias = jnp.concatenate([b for _, b in params.values()], -1) if use_bias else None
        inputs, kernel, bias = promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        y = jnp.dot(inputs, kernel)
        if use_bias:
            y = y + jnp.reshape(bias, (1,) * (jnp.ndim(y) - 1) + (-1,))
        splits = np.cumsum([jnp.shape(k)[-1] for k in kernels[:-1]]).tolist()
        return dict(zip(params, jnp.split(y, splits, axis=-1)))

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``(c, h)``, each ``(*batch, features)`` from ``carry_init``."""
        return _carry_pair(self, rng, input_shape)

    @property
    def num_feature_axes(self):
        return 1


class SimpleCell(RNNCellBase):
    r"""Elman cell, as ``flax.linen.SimpleCell``:
    :math:`h' = \tanh(W_i x + b_i + W_h h)` (``+ h`` inside with ``residual``).

    Parameters: Dense ``i`` (with bias) and ``h`` (no bias).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.SimpleCell(features=3)
    >>> x = jnp.ones((2, 4))
    >>> h = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> cell.init_with_output(xform.random.key(1), h, x)[0][1].shape
    (2, 3)
    """

    features: int
    activation_fn: object = tanh
    kernel_init: object = default_kernel_init
    recurrent_kernel_init: object = initializers.orthogonal()
    bias_init: object = initializers.zeros
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros
    residual: bool = False

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        hidden = jnp.shape(carry)[-1]
        new = (Dense(hidden, use_bias=True, dtype=self.dtype, param_dtype=self.param_dtype,
                     kernel_init=self.kernel_init, bias_init=self.bias_init,
                     name="i")(inputs)
               + Dense(hidden, use_bias=False, dtype=self.dtype,
                       param_dtype=self.param_dtype,
                       kernel_init=self.recurrent_kernel_init, name="h")(carry))
        if self.residual:
            new = new + carry
        new = self.activation_fn(new)
        return new, new

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``h`` ``(*batch, features)`` from ``carry_init``."""
        return _carry_one(self, rng, input_shape)

    @property
    def num_feature_axes(self):
        return 1


class GRUCell(RNNCellBase):
    r"""GRU cell, as ``flax.linen.GRUCell``: :math:`r, z = \sigma(W_{i\cdot} x + b +
    W_{h\cdot} h)`, :math:`n = \tanh(W_{in} x + b_{in} + r (W_{hn} h + b_{hn}))`,
    :math:`h' = (1 - z) n + z h`.

    Parameters: Dense ``ir, iz, in`` (with bias), ``hr, hz`` (no bias), ``hn`` (bias).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.GRUCell(features=3)
    >>> x = jnp.ones((2, 4))
    >>> h = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> cell.init_with_output(xform.random.key(1), h, x)[0][1].shape
    (2, 3)
    """

    features: int
    gate_fn: object = sigmoid
    activation_fn: object = tanh
    kernel_init: object = default_kernel_init
    recurrent_kernel_init: object = initializers.orthogonal()
    bias_init: object = initializers.zeros
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        h = carry
        hidden = jnp.shape(h)[-1]
        dense_h = functools.partial(Dense, features=hidden, use_bias=False,
                                    dtype=self.dtype, param_dtype=self.param_dtype,
                                    kernel_init=self.recurrent_kernel_init,
                                    bias_init=self.bias_init)
        dense_i = functools.partial(Dense, features=hidden, use_bias=True,
                                    dtype=self.dtype, param_dtype=self.param_dtype,
                                    kernel_init=self.kernel_init, bias_init=self.bias_init)
        r = self.gate_fn(dense_i(name="ir")(inputs) + dense_h(name="hr")(h))
        z = self.gate_fn(dense_i(name="iz")(inputs) + dense_h(name="hz")(h))
        n = self.activation_fn(dense_i(name="in")(inputs)
                               + r * dense_h(name="hn", use_bias=True)(h))
        new_h = (1.0 - z) * n + z * h
        return new_h, new_h

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``h`` ``(*batch, features)`` from ``carry_init``."""
        return _carry_one(self, rng, input_shape)

    @property
    def num_feature_axes(self):
        return 1


class MGUCell(RNNCellBase):
    r"""Minimal gated unit, as ``flax.linen.MGUCell``: :math:`f = \sigma(W_{if} x +
    b_{if} + W_{hf} h)`, :math:`n = \tanh(W_{in} x + b_{in} + f (W_{hn} h + b_{hn}))`,
    :math:`h' = (1 - f) n + f h` (without the ``f`` factor and ``b_{hn}`` when
    ``reset_gate`` is False).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.MGUCell(features=3)
    >>> x = jnp.ones((2, 4))
    >>> h = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> cell.init_with_output(xform.random.key(1), h, x)[0][1].shape
    (2, 3)
    """

    features: int
    gate_fn: object = sigmoid
    activation_fn: object = tanh
    kernel_init: object = default_kernel_init
    recurrent_kernel_init: object = initializers.orthogonal()
    forget_bias_init: object = initializers.ones
    activation_bias_init: object = initializers.zeros
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros
    reset_gate: bool = True

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        h = carry
        hidden = jnp.shape(h)[-1]
        dense_h = functools.partial(Dense, features=hidden, use_bias=False,
                                    dtype=self.dtype, param_dtype=self.param_dtype,
                                    kernel_init=self.recurrent_kernel_init,
                                    bias_init=self.activation_bias_init)
        dense_i = functools.partial(Dense, features=hidden, use_bias=True,
                                    dtype=self.dtype, param_dtype=self.param_dtype,
                                    kernel_init=self.kernel_init)
        f = self.gate_fn(dense_i(name="if", bias_init=self.forget_bias_init)(inputs)
                         + dense_h(name="hf")(h))
        x = dense_h(name="hn", use_bias=self.reset_gate)(h)
        if self.reset_gate:
            x = x * f
        n = self.activation_fn(
            dense_i(name="in", bias_init=self.activation_bias_init)(inputs) + x)
        new_h = (1.0 - f) * n + f * h
        return new_h, new_h

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``h`` ``(*batch, features)`` from ``carry_init``."""
        return _carry_one(self, rng, input_shape)

    @property
    def num_feature_axes(self):
        return 1


class ConvLSTMCell(RNNCellBase):
    """Convolutional LSTM cell, as ``flax.linen.ConvLSTMCell``: the gates are
    convolutions ``ih`` (of the input) plus ``hh`` (of the hidden state); the forget gate
    gets +1.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> cell = nn.ConvLSTMCell(features=2, kernel_size=(3, 3))
    >>> x = jnp.ones((1, 5, 5, 3))
    >>> carry = cell.initialize_carry(xform.random.key(0), x.shape)
    >>> cell.init_with_output(xform.random.key(1), carry, x)[0][1].shape
    (1, 5, 5, 2)
    """

    features: int
    kernel_size: object
    strides: object = None
    padding: object = "SAME"
    use_bias: bool = True
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = initializers.zeros

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``, all channels-last images."""
        c, h = carry
        conv = functools.partial(Conv, features=4 * self.features,
                                 kernel_size=self.kernel_size, strides=self.strides,
                                 padding=self.padding, use_bias=self.use_bias,
                                 dtype=self.dtype, param_dtype=self.param_dtype)
        gates = conv(name="ih")(inputs) + conv(name="hh")(h)
        i, g, f, o = jnp.split(gates, 4, axis=-1)
        f = sigmoid(f + 1)
        new_c = f * c + sigmoid(i) * jnp.tanh(g)
        new_h = sigmoid(o) * jnp.tanh(new_c)
        return (new_c, new_h), new_h

    @nowrap
    def initialize_carry(self, rng, input_shape):
        """``(c, h)``, each ``(*batch, *spatial, features)``."""
        n = self.num_feature_axes
        key1, key2 = random.split(rng)
        shape = tuple(input_shape[:-n]) + tuple(input_shape[-n:-1]) + (self.features,)
        return (self.carry_init(key1, shape, self.param_dtype),
                self.carry_init(key2, shape, self.param_dtype))

    @property
    def num_feature_axes(self):
        return len(self.kernel_size) + 1



class RNN(Module):
    """Runs a cell over the time axis, as ``flax.linen.RNN`` (the lifted ``nn.scan``;
    the cell's parameters are shared by every step and live under ``cell``).

    Attributes:
      cell: an :class:`RNNCellBase` instance.
      time_major: inputs are ``(time, *batch, *features)`` instead of
        ``(*batch, time, *features)``.
      return_carry: also return the final carry.
      reverse: run from the last step to the first (with ``seq_lengths``, each sequence
        from its own last valid step).
      keep_order: with ``reverse``, flip the outputs back to input order.
      unroll: steps unrolled per loop iteration.
      variable_axes, variable_broadcast, variable_carry, split_rngs: as ``nn.scan``
        (defaults: parameters broadcast, no rng splitting for ``params``).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.RNN(nn.LSTMCell(features=3))
    >>> x = jnp.ones((2, 5, 4))                      # (batch, time, features)
    >>> v = layer.init(xform.random.key(0), x)
    >>> sorted(v['params']['cell'])
    ['hf', 'hg', 'hi', 'ho', 'if', 'ig', 'ii', 'io']
    >>> layer.apply(v, x).shape
    (2, 5, 3)
    """

    cell: object
    time_major: bool = False
    return_carry: bool = False
    reverse: bool = False
    keep_order: bool = False
    unroll: int = 1
    variable_axes: object = FrozenDict()
    variable_broadcast: object = "params"
    variable_carry: object = False
    split_rngs: object = FrozenDict({"params": False})

    def __call__(self, inputs, *, initial_carry=None, init_key=None, seq_lengths=None,
                 return_carry=None, time_major=None, reverse=None, keep_order=None):
        """Run the cell over ``inputs``.

        Args:
          inputs: ``(*batch, time, *features)`` (``time_major``: time first).
          initial_carry: the starting carry (default ``cell.initialize_carry(init_key,
            ...)``).
          init_key: key for ``initialize_carry`` (default ``random.key(0)``).
          seq_lengths: ``(*batch,)`` ints: valid steps per sequence (the returned carry
            is the one after each sequence's last valid step; ``reverse`` flips only the
            valid part).
          return_carry, time_major, reverse, keep_order: override the attributes.

        Returns:
          The outputs ``(*batch, time, *out_features)``, or ``(carry, outputs)``.
        """
        return_carry = self.return_carry if return_carry is None else return_carry
        time_major = self.time_major if time_major is None else time_major
        reverse = self.reverse if reverse is None else reverse
        keep_order = self.keep_order if keep_order is None else keep_order
        ndim = jnp.ndim(inputs)
        n_feat = self.cell.num_feature_axes
        time_axis = 0 if time_major else ndim - (n_feat + 1)
        if time_axis < 0 or ndim < n_feat + 1:
            raise ValueError(f"RNN at {self.scope.path_text}: inputs of shape "
                             f"{jnp.shape(inputs)} have no time axis "
                             f"(need (*batch, time, {n_feat} feature axes))")
        shape = jnp.shape(inputs)
        batch_dims = shape[1:-n_feat] if time_major else shape[:time_axis]
        flip = functools.partial(flip_sequences, seq_lengths=seq_lengths,
                                 num_batch_dims=len(batch_dims), time_major=time_major)
        if reverse:
            inputs = flip(inputs)
        if initial_carry is None:
            init_key = random.key(0) if init_key is None else init_key
            carry = self.cell.initialize_carry(init_key, shape[:time_axis]
                                               + shape[time_axis + 1:])
        else:
            carry = initial_carry
        slice_carry = seq_lengths is not None and return_carry

        def scan_fn(cell, carry, x):
            carry, y = cell(carry, x)
            return carry, ((carry, y) if slice_carry else y)

        # NB: Flax scans with out_axes=(0, time_axis) when slicing the carry; nn.scan
        # takes an int out_axes only, so the outputs are moved to time_axis below.
        scan = lifted_scan(
            scan_fn, in_axes=time_axis, out_axes=0 if slice_carry else time_axis,
            unroll=self.unroll,
            variable_axes=self.variable_axes, variable_broadcast=self.variable_broadcast,
            variable_carry=self.variable_carry, split_rngs=self.split_rngs)
        carry, outputs = scan(self.cell, carry, inputs)
        if slice_carry:
            carries, outputs = outputs
            outputs = tree_util.tree_map(lambda y: jnp.moveaxis(y, 0, time_axis), outputs)
            carry = _select_last_carry(carries, seq_lengths)
        if reverse and keep_order:
            outputs = flip(outputs)
        return (carry, outputs) if return_carry else outputs


def _select_last_carry(carries, seq_lengths):
    """The carry after each sequence's last valid step, from the (time, batch, ...) stack."""
    last = jnp.asarray(seq_lengths) - 1
    return tree_util.tree_map(lambda x: x[last, jnp.arange(jnp.shape(x)[1])], carries)


def flip_sequences(inputs, seq_lengths, num_batch_dims, time_major):
    """Reverse each sequence along time; with ``seq_lengths`` only its valid prefix
    (its padding is rotated to the front, as Flax does)."""
    time_axis = 0 if time_major else num_batch_dims
    steps = jnp.shape(inputs)[time_axis]
    if seq_lengths is None:
        return jnp.flip(inputs, axis=time_axis)
    lengths = jnp.expand_dims(jnp.asarray(seq_lengths), time_axis)
    idxs = jnp.arange(steps - 1, -1, -1)
    idxs = jnp.reshape(idxs, ((steps,) + (1,) * num_batch_dims) if time_major
                       else ((1,) * num_batch_dims + (steps,)))
    idxs = (idxs + lengths) % steps
    idxs = jnp.reshape(idxs, jnp.shape(idxs) + (1,) * (jnp.ndim(inputs) - jnp.ndim(idxs)))
    return jnp.take_along_axis(inputs, idxs, axis=time_axis)


def _concatenate(a, b):
    return jnp.concatenate([a, b], axis=-1)


class Bidirectional(Module):
    """A forward and a backward RNN over the same inputs, outputs merged (default:
    concatenated features), as ``flax.linen.Bidirectional``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> layer = nn.Bidirectional(nn.RNN(nn.GRUCell(3)), nn.RNN(nn.GRUCell(3)))
    >>> x = jnp.ones((2, 5, 4))
    >>> layer.init_with_output(xform.random.key(0), x)[0].shape
    (2, 5, 6)
    """

    forward_rnn: object
    backward_rnn: object
    merge_fn: object = _concatenate
    time_major: bool = False
    return_carry: bool = False

    def __call__(self, inputs, *, initial_carry=None, init_key=None, seq_lengths=None,
                 return_carry=None, time_major=None, reverse=None, keep_order=None):
        """Run both directions (the backward one reversed with ``keep_order``); carries
        are ``(forward, backward)``."""
        del reverse, keep_order     # fixed per direction
        time_major = self.time_major if time_major is None else time_major
        return_carry = self.return_carry if return_carry is None else return_carry
        if init_key is not None:
            key_fwd, key_bwd = random.split(init_key)
        else:
            key_fwd = key_bwd = None
        carry_fwd, carry_bwd = (initial_carry if initial_carry is not None
                                else (None, None))
        carry_fwd, out_fwd = self.forward_rnn(
            inputs, initial_carry=carry_fwd, init_key=key_fwd, seq_lengths=seq_lengths,
            return_carry=True, time_major=time_major, reverse=False)
        carry_bwd, out_bwd = self.backward_rnn(
            inputs, initial_carry=carry_bwd, init_key=key_bwd, seq_lengths=seq_lengths,
            return_carry=True, time_major=time_major, reverse=True, keep_order=True)
        outputs = tree_util.tree_map(self.merge_fn, out_fwd, out_bwd)
        carry = (carry_fwd, carry_bwd)
        return (carry, outputs) if return_carry else outputs
