"""xform.nn recurrent layers vs flax.linen: every cell (same key -> same variables,
carry and outputs), RNN over the lifted scan (seq_lengths, return_carry, reverse,
keep_order, time_major, unroll), Bidirectional; jit, gradients, bfloat16, errors,
doctests."""
import doctest

import flax.linen as fnn
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
from xform import nn
from xform.nn import _recurrent

from nn_oracle import close, fjit, same_leaves

R = np.random.RandomState(0)
X = R.randn(2, 5, 4).astype(np.float32)            # (batch, time, features)
LENS = np.array([3, 5], np.int32)


@pytest.mark.parametrize("cls,kw,x", [
    ("LSTMCell", dict(features=3), X[:, 0]),
    ("OptimizedLSTMCell", dict(features=3), X[:, 0]),
    ("GRUCell", dict(features=3), X[:, 0]),
    ("MGUCell", dict(features=3, reset_gate=False), X[:, 0]),
    ("SimpleCell", dict(features=3, residual=True), X[:, 0]),
    ("ConvLSTMCell", dict(features=2, kernel_size=(3,)), X),    # 1-d "images" (5, 4)
])
def test_cells_vs_flax(cls, kw, x):
    ours, theirs = getattr(nn, cls)(**kw), getattr(fnn, cls)(**kw)
    carry = ours.initialize_carry(xform.random.PRNGKey(0), x.shape)
    fcarry = theirs.initialize_carry(jax.random.PRNGKey(0), x.shape)
    same_leaves(carry, fcarry, 0)
    v = ours.init(xform.random.PRNGKey(1), carry, x)
    fv = fjit(theirs.init)(jax.random.PRNGKey(1), fcarry, x)
    same_leaves(v, fv, 0)
    expected = fjit(theirs.apply)(fv, fcarry, x)
    same_leaves(ours.apply(v, carry, x), expected)
    same_leaves(xform.jit(ours.apply)(v, carry, x), expected)


def _rnn(lib_nn, cell="LSTMCell", **kw):
    return lib_nn.RNN(getattr(lib_nn, cell)(3), **kw)


@pytest.mark.parametrize("kw,call", [
    (dict(), dict()),
    (dict(return_carry=True, unroll=2), dict(seq_lengths=LENS)),
    (dict(reverse=True, keep_order=True), dict(seq_lengths=LENS, return_carry=True)),
    (dict(time_major=True, reverse=True), dict()),
])
def test_rnn_vs_flax(kw, call):
    x = np.swapaxes(X, 0, 1) if kw.get("time_major") else X
    ours, theirs = _rnn(nn, "GRUCell", **kw), _rnn(fnn, "GRUCell", **kw)
    v = ours.init(xform.random.PRNGKey(0), x, **call)
    fv = fjit(theirs.init, **call)(jax.random.PRNGKey(0), x)
    same_leaves(v, fv, 0)
    expected = fjit(theirs.apply, **call)(fv, x)
    same_leaves(ours.apply(v, x, **call), expected)
    same_leaves(xform.jit(lambda v, x: ours.apply(v, x, **call))(v, x), expected)


def test_rnn_carry_grad_and_bidirectional():
    ours, theirs = _rnn(nn), _rnn(fnn)
    v, fv = ours.init(xform.random.PRNGKey(0), X), fjit(theirs.init)(jax.random.PRNGKey(0), X)
    carry = (X[:, 0, :3] * 0.5, X[:, 1, :3])
    call = dict(initial_carry=carry, return_carry=True)
    same_leaves(ours.apply(v, X, **call), fjit(theirs.apply, **call)(fv, X))
    loss = lambda m: lambda p, x: (m.apply(p, x, seq_lengths=LENS) ** 2).sum()
    g = xform.jit(xform.grad(loss(ours), (0, 1)))(v, X)
    same_leaves(g, jax.jit(jax.grad(loss(theirs), (0, 1)))(fv, X), 1e-4)
    mk = lambda m: m.Bidirectional(m.RNN(m.SimpleCell(3)), m.RNN(m.OptimizedLSTMCell(2)))
    ours, theirs = mk(nn), mk(fnn)
    call = dict(seq_lengths=LENS, return_carry=True)
    v = ours.init(xform.random.PRNGKey(0), X, **call)
    fv = fjit(theirs.init, **call)(jax.random.PRNGKey(0), X)
    same_leaves(v, fv, 0)
    same_leaves(ours.apply(v, X, **call), fjit(theirs.apply, **call)(fv, X))


def test_rnn_over_conv_lstm_cell():
    """Two feature axes (width, channels): the time axis is found from the cell."""
    x = R.randn(2, 4, 6, 3).astype(np.float32)          # (batch, time, width, channels)
    mk = lambda m: m.RNN(m.ConvLSTMCell(2, (3,)), return_carry=True)
    ours, theirs = mk(nn), mk(fnn)
    v = ours.init(xform.random.PRNGKey(0), x)
    fv = fjit(theirs.init)(jax.random.PRNGKey(0), x)
    same_leaves(v, fv, 0)
    lens = np.array([2, 4], np.int32)
    same_leaves(ours.apply(v, x, seq_lengths=lens),
               fjit(theirs.apply, seq_lengths=lens)(fv, x))


def test_rnn_bf16_and_errors():
    mk = lambda m: m.RNN(m.LSTMCell(3, dtype=jjnp.bfloat16))
    ours, theirs = mk(nn), mk(fnn)
    v, fv = ours.init(xform.random.PRNGKey(0), X), fjit(theirs.init)(jax.random.PRNGKey(0), X)
    same_leaves(v, fv, 0)
    y, fy = ours.apply(v, X), fjit(theirs.apply)(fv, X)
    assert y.dtype == fy.dtype
    close(y, fy, 3e-2)
    with pytest.raises(ValueError, match=r"no time axis"):
        ours.init(xform.random.PRNGKey(0), X[0, 0])


def test_rnn_over_zero_time_steps():
    # nn.scan's first (broadcast-variable) call has no step to take: it used to index
    # x[0] and raise IndexError; Flax initializes and returns (batch, 0, features).
    x = X[:, :0]
    ours, theirs = (_rnn(m, "GRUCell", return_carry=True) for m in (nn, fnn))
    v, fv = ours.init(xform.random.PRNGKey(0), x), theirs.init(jax.random.PRNGKey(0), x)
    same_leaves(v, fv, 0)
    same_leaves(ours.apply(v, x), theirs.apply(fv, x))


def test_recurrent_doctests():
    result = doctest.testmod(_recurrent, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
