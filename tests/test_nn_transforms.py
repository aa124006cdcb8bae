"""Lifted transforms (nn.scan, nn.vmap, nn.remat, nn.jit) vs flax.linen: same variables
(paths and values, incl. split rngs) and outputs; grads through them."""
import warnings

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

    class BcastRNN(lib.Module):  # nn.broadcast nested inside an argument's in_axes
        @lib.compact
        def __call__(self, x):
            def step(m, c, inp):
                xt, (scale, shift) = inp
                return m(c, xt * scale + shift)
            f = lib.scan(step, variable_broadcast="params", split_rngs={"params": False},
                         in_axes=((1, (lib.broadcast, 0)),))
            shift = np_.arange(5, dtype=np_.float32)[:, None, None] / 4
            return f(Cell(), np_.zeros((x.shape[0], 3)), (x, (2.0, shift)))

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

    return dict(RNN=RNN, FnRNN=FnRNN, BcastRNN=BcastRNN, Stack=Stack, Counted=Counted, Ens=Ens,
                Shared=Shared, Named=Named, Remat=Remat, Jit=Jit)


def jax_or_xform(lib):
    return xform if lib is nn else jax


XM, FM = _models(nn, jnp), _models(fnn, jjnp)
CASES = [("RNN", {}), ("RNN", {"reverse": True, "unroll": 2}), ("FnRNN", {}), ("BcastRNN", {}),
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
    fg = jax.jit(jax.grad(lambda v: loss(fm, v, fd, jjnp)))(fv)
    assert_trees(g, fg, rtol=1e-4, atol=1e-5)


def test_scan_rejects_inconsistent_lengths():
    class Twice(nn.Module):
        @nn.compact
        def __call__(self, c, a, b):
            return c, a + b

    S = nn.scan(Twice, variable_broadcast="params")
    with pytest.raises(ValueError, match="Inconsistent scan lengths"):
        S().init(keys(0)[0], jnp.zeros(()), jnp.ones(3), jnp.ones(4))


def test_scan_of_remat_setup_layers_matches_flax():
    """The LLM idiom: nn.scan(nn.remat(Layer)) over stacked layers defined in setup,
    a broadcast `train` flag, per-layer params and dropout keys."""
    def model(lib):
        class Layer(lib.Module):
            def setup(self):
                self.ln = lib.LayerNorm()
                self.mlp = [lib.Dense(8), lib.Dense(4)]
                self.drop = lib.Dropout(0.1)

            def __call__(self, x, train):
                h = self.mlp[1](lib.relu(self.mlp[0](self.ln(x))))
                return x + self.drop(h, deterministic=not train), None

        class Model(lib.Module):
            @lib.compact
            def __call__(self, x, train=True):
                L = lib.scan(lib.remat(Layer, static_argnums=(2,)),
                             variable_axes={"params": 0},
                             split_rngs={"params": True, "dropout": True}, length=3,
                             in_axes=(lib.broadcast,))
                x, _ = L(name="layers")(x, train)
                return lib.Dense(2)(x)
        return Model()

    xm, fm = model(nn), model(fnn)
    xk, fk = keys(6)
    xd, fd = keys(7)
    v = xm.init({"params": xk, "dropout": xd}, X)
    fv = fm.init({"params": fk, "dropout": fd}, X)
    assert sorted(v["params"]["layers"]) == ["ln", "mlp_0", "mlp_1"]
    assert v["params"]["layers"]["mlp_0"]["kernel"].shape == (3, 4, 8)
    assert_trees(v, fv)
    assert_trees(xm.apply(v, X, rngs={"dropout": xd}),
                 fm.apply(fv, X, rngs={"dropout": fd}))
    g = xform.jit(xform.grad(
        lambda v: jnp.sum(xm.apply(v, X, rngs={"dropout": xd}) ** 2)))(v)
    fg = jax.jit(jax.grad(
        lambda v: jjnp.sum(fm.apply(v, X, rngs={"dropout": fd}) ** 2)))(fv)
    assert_trees(g, fg, rtol=1e-5, atol=1e-6)


def test_partitioned_metadata_through_scan_matches_flax():
    def model(lib, np_):
        class Layer(lib.Module):
            @lib.compact
            def __call__(self, x, _):
                init = lib.with_partitioning(lib.initializers.lecun_normal(),
                                             ("embed", "mlp"))
                count = self.variable("stats", "count", lib.with_partitioning(
                    lambda: np_.zeros((2,)), ("embed",)))
                count.value = count.value + 1          # stays boxed
                return x + lib.Dense(4, kernel_init=init)(x), None

        class M(lib.Module):
            @lib.compact
            def __call__(self, x):
                L = lib.scan(Layer, variable_axes={"params": 0, "stats": 0},
                             split_rngs={"params": True}, length=3,
                             metadata_params={lib.PARTITION_NAME: "layers"})
                return L()(x, None)[0]
        return M()

    xm, fm = model(nn, jnp), model(fnn, jjnp)
    x = np.ones((2, 4), np.float32)
    xk, fk = keys(8)
    v, fv = xm.init(xk, x), fm.init(fk, x)
    spec = nn.get_partition_spec(v)
    assert spec["params"]["ScanLayer_0"]["Dense_0"]["kernel"] == \
        xform.sharding.PartitionSpec("layers", "embed", "mlp")
    assert spec == xform.tree_util.tree_map(
        lambda s: xform.sharding.PartitionSpec(*s), fnn.get_partition_spec(fv),
        is_leaf=lambda s: isinstance(s, jax.sharding.PartitionSpec))
    assert_trees(nn.unbox(v), fnn.meta.unbox(fv))
    out, upd = xm.apply(v, x, mutable=["stats"])
    fout, fupd = fm.apply(fv, x, mutable=["stats"])
    assert_trees(out, fout)
    assert isinstance(upd["stats"]["ScanLayer_0"]["count"], nn.Partitioned)
    assert_trees(nn.unbox(upd), fnn.meta.unbox(fupd))


def _control_models(lib, np_):
    rnd = xform.random if lib is nn else jax.random

    class Cond(lib.Module):
        @lib.compact
        def __call__(self, x, flag):
            def t(m, x):
                return lib.Dense(3, name="a")(x)

            def f(m, x):
                drop = lib.Dropout(0.5, deterministic=False)
                return lib.Dense(3, name="a")(x) * 2 + drop(x[:, :3])
            return lib.cond(flag, t, f, self, x)

    class Switch(lib.Module):
        @lib.compact
        def __call__(self, x, i):
            branches = [lambda m, x: lib.Dense(3, name="d")(x),
                        lambda m, x: -lib.Dense(3, name="d")(x),
                        lambda m, x: lib.Dense(3, name="d")(x) * 0.5]
            return lib.switch(i, branches, self, x)

    class Loop(lib.Module):
        @lib.compact
        def __call__(self, x):
            d = lib.Dense(4)

            def body(m, c):
                n = m.variable("state", "n", lambda: np_.zeros((), np_.int32))
                n.value = n.value + 1
                return c[0] + 1, d(c[1]) + rnd.normal(m.make_rng("noise"), c[1].shape)
            return lib.while_loop(lambda m, c: c[0] < 3, body, self, (0, x),
                                  carry_variables="state", split_rngs={"noise": True})
    return Cond, Switch, Loop


@pytest.mark.parametrize("which,arg", [(0, True), (0, False), (1, 1), (1, 2)])
def test_cond_switch_match_flax(which, arg):
    xm, fm = _control_models(nn, jnp)[which](), _control_models(fnn, jjnp)[which]()
    x = X[:, 0]
    xk, fk = keys(9)
    xd, fd = keys(10)
    v = xm.init({"params": xk, "dropout": xd}, x, arg)
    fv = fm.init({"params": fk, "dropout": fd}, x, arg)
    assert_trees(v, fv)
    assert_trees(xm.apply(v, x, arg, rngs={"dropout": xd}),
                 fm.apply(fv, x, arg, rngs={"dropout": fd}))


def test_while_loop_matches_flax():
    xm, fm = _control_models(nn, jnp)[2](), _control_models(fnn, jjnp)[2]()
    x = X[:, 0]
    v = {"params": {"Dense_0": {"kernel": np.full((4, 4), 0.1, np.float32),
                                "bias": np.zeros(4, np.float32)}},
         "state": {"n": np.int32(5)}}   # carried collections exist before the loop
    xn, fn_ = keys(11)
    out, upd = xm.apply(v, x, rngs={"noise": xn}, mutable=["state"])
    fout, fupd = fm.apply(v, x, rngs={"noise": fn_}, mutable=["state"])
    assert_trees(out, fout, rtol=1e-6, atol=1e-6)
    assert int(upd["state"]["n"]) == int(fupd["state"]["n"]) == 8


PER_ROW = dict(variable_axes={"params": 0}, split_rngs={"params": True})


def _pytree_arg_models(lib, np_, struct):
    """A submodule carried in a ``struct.PyTreeNode`` (as a method argument, or as a
    module field) through lifted transforms: Flax lifts its scope too (issue 22 item 13),
    so its params are mapped/stacked like the transformed module's."""
    class Holder(struct.PyTreeNode):
        layer: lib.Module
        scale: float

    class Inner(lib.Module):
        holder: Holder

        def __call__(self, x):
            return self.holder.layer(x) * self.holder.scale

    class Outer(lib.Module):
        kind: str

        def setup(self):
            self.shared = lib.Dense(3)   # a setup submodule: its scope is reused inside
            if self.kind == "vmap_field":
                self.inner = lib.vmap(Inner, in_axes=0, **PER_ROW)(
                    Holder(layer=self.shared, scale=np_.float32(2.0)))

        def __call__(self, x):
            h = Holder(layer=self.shared, scale=np_.float32(2.0))
            if self.kind == "vmap":
                f = lib.vmap(lambda m, h, x: h.layer(x) * h.scale, in_axes=(None, 0),
                             **PER_ROW)
                return f(self, h, x)
            if self.kind == "vmap_field":
                return self.inner(x)
            if self.kind == "scan":
                def body(m, c, h, x):
                    y = h.layer(x) * h.scale + c
                    return y.sum(), y
                return lib.scan(body, in_axes=(lib.broadcast, 0), **PER_ROW)(
                    self, np_.zeros(()), h, x)
            return getattr(lib, self.kind)(lambda m, h, x: h.layer(x) * h.scale)(self, h, x)
    return Outer


@pytest.mark.parametrize("kind", ["vmap", "vmap_field", "scan", "remat", "jit"])
def test_submodule_in_pytree_argument_matches_flax(kind):
    from flax import struct as fstruct

    from xform.training import struct
    x = X[0, :4, :2]
    xm = _pytree_arg_models(nn, jnp, struct)(kind)
    fm = _pytree_arg_models(fnn, jjnp, fstruct)(kind)
    (xk, fk) = keys(6)
    v, fv = xform.jit(xm.init)(xk, x), jax.jit(fm.init)(fk, x)   # (one compile each)
    assert_trees(v, fv, rtol=1e-6, atol=1e-6)
    assert_trees(xform.jit(xm.apply)(v, x), jax.jit(fm.apply)(fv, x), rtol=1e-5,
                 atol=1e-5)


def test_keyword_arguments_dropped_by_vmap_kept_by_jit_like_flax():
    # Flax's vmap/scan/cond/... drop keyword arguments with a RuntimeWarning (only
    # jit, remat, map_variables and fold_rngs pass them on); xform used to raise.
    def model(lib, trafo, **kw):
        class Scaled(lib.Module):
            @lib.compact
            def __call__(self, x, scale=1.0):
                return lib.Dense(2)(x) * scale
        return getattr(lib, trafo)(Scaled, **kw)()
    x = X[:, 0]
    for trafo, kw in (("vmap", dict(variable_axes={"params": None},
                                    split_rngs={"params": False})), ("jit", {})):
        xm, fm = model(nn, trafo, **kw), model(fnn, trafo, **kw)
        xk, fk = keys(12)
        v, fv = xm.init(xk, x), fm.init(fk, x)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            got = xm.apply(v, x, scale=3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fm.apply(fv, x, scale=3.0)
        assert_trees(got, want, rtol=1e-6, atol=1e-6)
        msgs = [str(w.message) for w in rec if w.category is RuntimeWarning]
        assert msgs == (['kwargs are not supported in vmap, so "scale" is(are) ignored']
                        if trafo == "vmap" else []), msgs
