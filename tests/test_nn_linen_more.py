"""The remaining linen names vs flax.linen at run time: WeightNorm, SpectralNorm,
PReLU, map_variables, the lifted nn.grad/value_and_grad/vjp/jvp/custom_vjp, and the
module aliases (same init rng -> identical variables; same outputs and gradients)."""
import functools

import numpy as np

import flax.linen as fnn
import jax
import jax.numpy as fjnp

import xform
import xform.nn as xnn
import xform.numpy as xjnp
from nn_oracle import keys, same_leaves

LIBS = {"x": (xform, xnn, xjnp), "f": (jax, fnn, fjnp)}


def _both(build, *args, tol=1e-5, **kw):
    """Builds the model with each library, inits with the same key and applies it;
    returns ``{lib: (variables, output)}`` after comparing them."""
    out = {}
    for (lib, (jx, nn, jnp)), key in zip(LIBS.items(), keys(0)):
        model = build(jx, nn, jnp)
        a = [jnp.asarray(x) for x in args]   # jitted: one compile per model
        v = jx.jit(functools.partial(model.init, **kw))(key, *a)
        out[lib] = (v, jx.jit(functools.partial(model.apply, **kw))(v, *a))
    same_leaves(out["x"][0], out["f"][0], 0.0)
    same_leaves(out["x"][1], out["f"][1], tol)
    return out


def _norm_model(jx, nn, jnp):
    class Bar(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(nn.Dense(2, name="inner")(x))

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            x = nn.Dense(3)(x)
            x = nn.WeightNorm(nn.Dense(4), variable_filter=None)(x)
            x = nn.PReLU(negative_slope_init=0.2)(x - 0.5)
            x = nn.WeightNorm(Bar(), variable_filter={"kernel"}, feature_axes=None)(x)
            x = nn.SpectralNorm(nn.Dense(5), n_steps=2)(x, update_stats=train)
            return nn.SpectralNorm(nn.Conv(2, (2,)))(x[..., None], update_stats=train)
    return Foo()


def test_weight_spectral_norm_prelu():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    res = _both(_norm_model, x, train=False)
    # training: the power-iteration stats update identically, and gradients match
    out = {}
    for lib, (jx, nn, jnp) in LIBS.items():
        model, v = _norm_model(jx, nn, jnp), res[lib][0]

        def loss(params, v=v, model=model, jnp=jnp):
            y, upd = model.apply({**v, "params": params}, jnp.asarray(x), train=True,
                                 mutable=["batch_stats"])
            return jnp.sum(y ** 2), upd
        out[lib] = jx.jit(jx.grad(loss, has_aux=True))(v["params"])
    same_leaves(out["x"], out["f"], 1e-4)


def test_lifted_autodiff_and_map_variables():
    def build(jx, nn, jnp):
        class Scale(nn.Module):
            @nn.compact
            def __call__(self, x):
                return self.param("s", nn.initializers.ones_init(), x.shape[-1:]) * x

        class Foo(nn.Module):
            @nn.compact
            def __call__(self, x):
                d = nn.Dense(2)
                y, bwd = nn.vjp(lambda m, x: m(x), d, x)
                out = {"vjp": (y, bwd(jnp.ones_like(y)))}
                f = lambda m, x: jnp.sum(jnp.sin(m(x)))
                out["vg"] = nn.value_and_grad(f, d, x)
                out["g"] = nn.grad(lambda m, x: (f(m, x), 2.0), d, x, has_aux=True)
                s = Scale()
                s(x)
                if not self.is_initializing():
                    out["jvp"] = nn.jvp(lambda m, x: m(x) ** 2, s, (x,), (x,),
                                        {"params": {"s": jnp.full((2,), 3.0)}})

                def fwd(m, x):
                    return nn.vjp(lambda m, x: m(x), m, x)

                def bwd_fn(vjp_fn, y_t):
                    p_t, x_t = vjp_fn(y_t)
                    return jx.tree.map(lambda t: 2 * t, p_t), x_t
                cv = nn.custom_vjp(lambda m, x: m(x), fwd, bwd_fn)
                out["cv"] = cv(nn.Dense(2), x)
                Neg = nn.map_variables(nn.Dense, "params", lambda v: jx.tree.map(
                    lambda t: -t, v), init=self.is_initializing())
                out["mv"] = Neg(2)(x)
                return out
        return Foo()

    x = np.array([[0.5, -1.0]], np.float32)
    res = _both(build, x)
    grads = {}
    for lib, (jx, nn, jnp) in LIBS.items():
        model, v = build(jx, nn, jnp), res[lib][0]
        grads[lib] = jx.jit(jx.grad(
            lambda v: jnp.sum(model.apply(v, jnp.asarray(x))["cv"])))(v)
    same_leaves(grads["x"], grads["f"])


def test_errors():
    class Foo(xnn.Module):
        @xnn.compact
        def __call__(self, x):
            return xnn.value_and_grad(lambda m, x: m(x), xnn.Dense(2), x)
    with np.testing.assert_raises_regex(ValueError, "scalar-valued outputs"):
        Foo().init(xform.random.PRNGKey(0), xjnp.ones((1, 2)))
    with np.testing.assert_raises_regex(ValueError, "Module method"):
        xnn.vjp(xnn.Dense, xnn.Dense(2), 1.0)


def test_jit_traces_once_per_module_hash():
    traces = []

    class Block(xnn.Module):
        features: int

        @xnn.compact
        def __call__(self, x, train=True):
            traces.append(self.features)
            x = xnn.Dense(self.features)(x)
            return xnn.Dropout(0.5, deterministic=not train)(x)

    JX, JF = xnn.jit(Block), None

    class Net(xnn.Module):
        @xnn.compact
        def __call__(self, x):
            J = JX
            return J(3, name="a")(x) + J(3, name="b")(x) + J(4 - 1, name="c")(x)

    class FBlock(fnn.Module):
        features: int

        @fnn.compact
        def __call__(self, x, train=True):
            x = fnn.Dense(self.features)(x)
            return fnn.Dropout(0.5, deterministic=not train)(x)

    JF = fnn.jit(FBlock)

    class FNet(fnn.Module):
        @fnn.compact
        def __call__(self, x):
            J = JF
            return J(3, name="a")(x) + J(3, name="b")(x) + J(4 - 1, name="c")(x)

    x = np.ones((1, 2), np.float32)
    (kx, kf), (dx, df) = keys(0), keys(1)
    vx = Net().init({"params": kx, "dropout": dx}, x)
    vf = FNet().init({"params": kf, "dropout": df}, x)
    same_leaves(vx, vf, 0.0)
    n_init = len(traces)
    for _ in range(3):   # eager applies: the identical modules reuse one trace
        yx = Net().apply(vx, x, rngs={"dropout": dx})
    assert len(traces) == n_init + 1, traces
    same_leaves(yx, FNet().apply(vf, x, rngs={"dropout": df}), 1e-6)


def test_scan_broadcast_out_and_data_transform():
    def build(jx, nn, jnp):
        class Cell(nn.Module):
            @nn.compact
            def __call__(self, c, x):
                k = self.param("k", nn.initializers.normal(), (2,))
                c = jnp.tanh(c * k + x)
                return c, (c, k * 2.0)

        def scale_params(variable_groups, rng_groups):   # a data_transform
            bcast = tuple({col: jx.tree.map(lambda t: t * 0.5, v) for col, v in g.items()}
                          for g in variable_groups[0])
            return (bcast,) + tuple(variable_groups[1:]), rng_groups

        class Net(nn.Module):
            @nn.compact
            def __call__(self, xs):
                S = nn.scan(Cell, variable_broadcast="params", split_rngs={"params": False},
                            in_axes=1, out_axes=(1, nn.broadcast),
                            data_transform=scale_params)
                return S(name="s")(jnp.zeros((3, 2)), xs)
        return Net()
    res = _both(build, np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 4, 2))
    c, (ys, k2) = res["x"][1]
    assert ys.shape == (3, 4, 2) and k2.shape == (2,)


def test_lazy_init():
    out = {}
    for (lib, (jx, nn, jnp)), key in zip(LIBS.items(), keys(0)):
        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.BatchNorm(use_running_average=False)(nn.Dense(3)(x))
        out[lib] = Net().lazy_init(key, jx.ShapeDtypeStruct((2, 4), jnp.float32))
    same_leaves(out["x"], out["f"], 0.0)


def test_remat_scan_batch_apply_intercept():
    calls = {}

    def build(jx, nn, jnp):
        def interceptor(next_fun, args, kwargs, context):
            calls.setdefault(nn, []).append((type(context.module).__name__,
                                             context.method_name))
            return next_fun(*args, **kwargs)

        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                y = nn.remat_scan(nn.Dense, lengths=(2, 3))(3, name="stack")(x)
                with nn.intercept_methods(interceptor):
                    z = nn.BatchApply(nn.Dense(2))(y[None])
                return y, z[0]
        return Net()
    _both(build, np.ones((2, 3), np.float32))
    assert calls[xnn] == calls[fnn] and calls[xnn]


def test_compact_name_scope_fold_rngs_add_metadata_axis():
    def build(jx, nn, jnp):
        class Foo(nn.Module):
            @nn.compact_name_scope
            def up(self, x):
                return nn.Dense(3)(x)

            @nn.compact_name_scope
            def down(self, x):
                return nn.Dropout(0.5, deterministic=False)(nn.Dense(3)(x))

            @nn.compact
            def __call__(self, x):
                F = nn.fold_rngs(nn.Dropout)
                P = nn.add_metadata_axis(nn.Dense, {"params": 0},
                                         {nn.PARTITION_NAME: "layers"})
                P(2, kernel_init=nn.with_partitioning(nn.initializers.ones, ("a", "b")),
                  name="p")(x)
                return self.up(x) + self.down(x), F(0.5, deterministic=False)(x)
        return Foo()
    res = {}
    for (lib, (jx, nn, jnp)), key, rng in zip(LIBS.items(), keys(0), keys(1)):
        rngs = {"params": key, "dropout": rng}
        v = build(jx, nn, jnp).init(rngs, jnp.ones((1, 2)))
        y = build(jx, nn, jnp).apply(v, jnp.ones((1, 2)), rngs={"dropout": rng})
        down = build(jx, nn, jnp).apply(v, jnp.ones((1, 2)), method="down",
                                        rngs={"dropout": rng})
        res[lib] = (jx.tree.map(lambda x: x, nn.unbox(v)), y, down,
                    tuple(nn.get_partition_spec(v)["params"]["p"]["kernel"]))
    same_leaves(res["x"][:3], res["f"][:3], 1e-6)
    assert res["x"][3] == res["f"][3] == ("layers", "a", "b")


def test_module_aliases_cover_flax():
    """Every xform.nn.<m> alias holds each public name of flax.linen.<m> that xform.nn
    has, and the listed leftovers are exactly the ones xform.nn lacks."""
    import importlib
    import types
    for m in ["activation", "linear", "attention", "normalization", "pooling",
              "recurrent", "stochastic", "module", "combinators", "summary",
              "transforms", "batch_apply", "kw_only_dataclasses", "spmd"]:
        ours, theirs = (importlib.import_module(f"{p}.{m}") for p in ("xform.nn",
                                                                      "flax.linen"))
        assert getattr(xnn, m) is ours
        names = [n for n in dir(theirs) if not n.startswith("_") and hasattr(fnn, n)
                 and not isinstance(getattr(theirs, n), types.ModuleType)]
        missing = [n for n in names if not hasattr(ours, n)]
        assert set(missing) <= LEFT_OUT, (m, missing)
    top = {n for n in dir(fnn) if not n.startswith("_") and not hasattr(xnn, n)}
    assert top == LEFT_OUT, top - LEFT_OUT


# flax.linen names xform.nn does not provide (none left)
LEFT_OUT = set()


def test_tabulate_text_matches_flax(monkeypatch):
    import flax.linen.summary as fsummary
    import xform.nn._summary as xsummary
    # Flax orders the collections as a set (varies per run): pin it to xform's order
    table_init = fsummary.Table.__init__
    monkeypatch.setattr(fsummary.Table, "__init__", lambda self, m, cols, rows: table_init(
        self, m, tuple(sorted(cols, key=lambda c: (c != "params", c))), rows))

    def build(jx, nn, jnp):
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x, train: bool = True):
                return nn.BatchNorm(use_running_average=not train)(nn.Dense(3)(x))

        class Net(nn.Module):
            def setup(self):
                self.b, self.head = Block(), nn.Dense(2)

            def __call__(self, x):
                y = self.b(self.b(x, train=True))
                return self.head(y), {"aux": y.sum()}

            def encode(self, x):
                return self.b(x)
        return Net()
    options = [{}, {"depth": 1}, {"depth": 0}, {"show_repeated": True},
               {"method": "encode"},
               {"console_kwargs": {"width": 70, "force_terminal": False},
                "column_kwargs": {"justify": "right"}, "table_kwargs": {"show_edge": False}}]
    for opts in options:
        texts = [build(jx, nn, jnp).tabulate(key, jnp.ones((1, 3)), **opts)
                 for (jx, nn, jnp), key in zip(LIBS.values(), keys(0))]
        assert texts[0] == texts[1], opts
    # FLOPs: XLA's cost analysis; equal where the lowered HLO matches JAX's (a Dense;
    # rng and normalization ops lower differently, so their counts differ)
    texts = [nn.Dense(4).tabulate(key, jnp.ones((2, 3)), compute_flops=True)
             for (jx, nn, jnp), key in zip(LIBS.values(), keys(0))]
    assert texts[0] == texts[1]
    # without rich: the same cells, markup removed
    monkeypatch.setattr(xsummary, "rich", None)
    text = build(xform, xnn, xjnp).tabulate(keys(0)[0], xjnp.ones((1, 3)))
    assert "│ b/Dense_0 " in text and "kernel: float32[3,3]" in text and "[dim]" not in text
    assert text.rstrip().endswith("Total Parameters: 32 (128 B)")


def test_docstring_examples():
    import doctest
    import importlib
    # (_module, _transforms, _summary: test_nn_module.py)
    for name in ("xform.nn._weight_norm", "xform.nn._lifted_ad", "xform.nn._lifted_jit",
                 "xform.nn._lifted_extras", "xform.nn.batch_apply"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
