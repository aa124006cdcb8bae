"""Lifted transforms (nn.scan, nn.vmap, nn.remat, nn.jit) vs flax.linen: same variables
(paths and values, incl. split rngs) and outputs; grads through them."""
import numpy as np
import pytest

import flax.linen as fnn
import jax
import jax.numpy as jjnp

import xform
import xform.numpy as jnp
import xform.nn as nn
from nn_oracle import assert_trees, keys

X = np.random.RandomState(0).randn(2, 5, 4).astype(np.float32)   # batch, time, feat


def _models(lib, np_):
    class Cell(lib.Module):
        @lib.compact
        def __call__(self, c, x):
            c = lib.tanh(lib.Dense(3)(x) + lib.Dense(3, use_bias=False)(c))
            return c, c * 2

    def time_major(x):
        return np_.swapaxes(x, 0, 1)

    class RNN(lib.Module):       # shared params over steps (variable_broadcast)
        reverse: bool = False
        unroll: int = 1

        @lib.compact
        def __call__(self, x):
            S = lib.scan(Cell, variable_broadcast="params", split_rngs={"params": False},
                         reverse=self.reverse, unroll=self.unroll)
            return S()(np_.zeros((x.shape[0], 3)), time_major(x))

    class FnRNN(lib.Module):     # function target; the cell is a sibling scope
        @lib.compact
        def __call__(self, x):
            def step(m, c, x):
                c, y = m(c, x)
                return c, (c, y)
            f = lib.scan(step, variable_broadcast="params", split_rngs={"params": False},
                         in_axes=1, out_axes=(0, 1))   # as flax's RNN(seq_lengths=...)
            return f(Cell(), np_.zeros((x.shape[0], 3)), x)

    class Block(lib.Module):
        @lib.compact
        def __call__(self, c, _):
            h = lib.Dropout(0.5, deterministic=False)(lib.Dense(4)(c))
            return lib.relu(h), None

    class Stack(lib.Module):     # one param set per step, per-step dropout keys
        @lib.compact
        def __call__(self, x):
            S = lib.scan(Block, variable_axes={"params": 0},
                         split_rngs={"params": True, "dropout": True}, length=3)
            return S()(x, None)[0]

    class Counter(lib.Module):   # variable_carry
        @lib.compact
        def __call__(self, c, x):
            n = self.variable("state", "n", lambda: np_.zeros((), np_.float32))
            n.value = n.value + 1
            return c + x.sum() * n.value, n.value

    class Counted(lib.Module):
        @lib.compact
        def __call__(self, x):
            S = lib.scan(Counter, variable_carry="state", in_axes=1)
            return S()(np_.zeros(()), x)

    class Ens(lib.Module):       # vmap with per-member params
        @lib.compact
        def __call__(self, x):
            E = lib.vmap(lib.Dense, variable_axes={"params": 0},
                         split_rngs={"params": True}, in_axes=None, axis_size=3)
            return E(2)(x)

    class Shared(lib.Module):    # vmap with shared params, in/out axes 1
        @lib.compact
        def __call__(self, x):
            V = lib.vmap(lib.Dense, variable_axes={"params": None},
                         split_rngs={"params": False}, in_axes=1, out_axes=1)
            return V(2)(x)

    class Norm(lib.Module):
        @lib.compact
        def __call__(self, x):
            return x - jax_or_xform(lib).lax.pmean(x.mean(), "b")

    class Named(lib.Module):     # vmap axis_name for collectives
        @lib.compact
        def __call__(self, x):
            V = lib.vmap(Norm, variable_axes={}, split_rngs={}, axis_name="b")
            return V()(x)

    class Remat(lib.Module):
        @lib.compact
        def __call__(self, x):
            y = lib.remat(lib.Dense, policy=jax_or_xform(lib).checkpoint_policies
                          .nothing_saveable)(3)(x)
            return lib.remat(Scale, static_argnums=(2,))()(y, 2.0)

    class Scale(lib.Module):
        @lib.compact
        def __call__(self, x, k):
            return lib.Dense(2)(x) * k

    class Jit(lib.Module):
        @lib.compact
        def __call__(self, x):
            y = lib.jit(lib.Dense)(3)(x)
            return lib.Dropout(0.5, deterministic=False)(lib.jit(lib.Dense)(2)(y))

    return dict(RNN=RNN, FnRNN=FnRNN, Stack=Stack, Counted=Counted, Ens=Ens,
                Shared=Shared, Named=Named, Remat=Remat, Jit=Jit)


def jax_or_xform(lib):
    return xform if lib is nn else jax


XM, FM = _models(nn, jnp), _models(fnn, jjnp)
CASES = [("RNN", {}), ("RNN", {"reverse": True, "unroll": 2}), ("FnRNN", {}),
         ("Stack", {}), ("Ens", {}), ("Shared", {}), ("Named", {}), ("Remat", {}),
         ("Jit", {})]


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}{i}" for i, (n, _) in
                                                 enumerate(CASES)])
def test_lifted_matches_flax(name, kw):
    xk, fk = keys(1)
    xd, fd = keys(2)
    xm, fm = XM[name](**kw), FM[name](**kw)
    v = xm.init({"params": xk, "dropout": xd}, X)
    fv = fm.init({"params": fk, "dropout": fd}, X)
    assert_trees(v, fv)                                   # bit-exact
    want = fm.apply(fv, X, rngs={"dropout": fd})
    assert_trees(xm.apply(v, X, rngs={"dropout": xd}), want)   # eager: bit-exact too
    if name in ("RNN", "Stack", "Ens", "Jit"):    # under jit too (compiles: a subset)
        got = xform.jit(lambda v, x, k: xm.apply(v, x, rngs={"dropout": k}))(v, X, xd)
        assert_trees(got, want, rtol=1e-5, atol=1e-5)


def test_scan_variable_carry_matches_flax():
    # (as in Flax, a carried collection must exist before the scan: init can't create it)
    v = {"state": {"ScanCounter_0": {"n": np.float32(2.0)}}}
    xm, fm = XM["Counted"](), FM["Counted"]()
    out, upd = xm.apply(v, X, mutable=["state"])
    fout, fupd = fm.apply(v, X, mutable=["state"])
    assert_trees(out, fout, rtol=1e-5)
    assert_trees(upd, fupd)
    assert float(upd["state"]["ScanCounter_0"]["n"]) == 7.0


@pytest.mark.parametrize("name", ["RNN", "Stack", "Remat", "Ens"])
def test_grad_through_lifted_matches_flax(name):
    xk, fk = keys(4)
    xd, fd = keys(5)
    xm, fm = XM[name](), FM[name]()
    v = xm.init({"params": xk, "dropout": xd}, X)
    fv = fm.init({"params": fk, "dropout": fd}, X)
    loss = lambda m, v, k, lib: lib.sum(m.apply(v, X, rngs={"dropout": k})[0] ** 2)
    g = xform.jit(xform.grad(lambda v: loss(xm, v, xd, jnp)))(v)
    fg = jax.grad(lambda v: loss(fm, v, fd, jjnp))(fv)
    assert_trees(g, fg, rtol=1e-4, atol=1e-5)


def test_scan_rejects_inconsistent_lengths():
    class Twice(nn.Module):
        @nn.compact
        def __call__(self, c, a, b):
            return c, a + b

    S = nn.scan(Twice, variable_broadcast="params")
    with pytest.raises(ValueError, match="Inconsistent scan lengths"):
        S().init(keys(0)[0], jnp.zeros(()), jnp.ones(3), jnp.ones(4))
