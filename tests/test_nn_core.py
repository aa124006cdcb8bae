"""xform.nn.core (Scope, init/apply, lift) against flax.core at run time: each model is
written once over a namespace of library functions and run on both, then the
variables (bit for bit), outputs, mutated collections, rng keys and errors compared.
The lifted models run under jit on both sides (one compile instead of many eager ops:
keeps the file fast); their variables still match bit for bit."""
import doctest
import types

import flax
import flax.core as fcore
import flax.core.nn as fcnn
import flax.errors as ferrors
import flax.typing as ftyping
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from flax.linen import initializers as finit

import xform
import xform.nn
import xform.numpy as jnp
from nn_oracle import assert_trees, same_leaves
from xform.nn import core as xcore, errors as xerrors, initializers as xinit
from xform.nn.core import nn as xcnn

FLAX = types.SimpleNamespace(core=fcore, lift=fcore.lift, np=jjnp, init=finit,
                             random=jax.random, errors=ferrors, sds=jax.ShapeDtypeStruct,
                             tree=jax.tree_util, jit=jax.jit, grad=jax.grad,
                             layers=fcnn, In=ftyping.In, config=flax.config)
XF = types.SimpleNamespace(core=xcore, lift=xcore.lift, np=jnp, init=xinit,
                           random=xform.random, errors=xerrors,
                           sds=xform.ShapeDtypeStruct, tree=xform.tree_util,
                           jit=xform.jit, grad=xform.grad, layers=xcnn, In=xcore.lift.In,
                           config=xform.nn.config)


def both(run):
    """``run(ns)`` on flax and on xform: ``(theirs, ours)``."""
    return run(FLAX), run(XF)


def dense(ns):
    def f(scope, x, features):
        k = scope.param("kernel", ns.init.lecun_normal(), (x.shape[-1], features))
        b = scope.param("bias", ns.init.normal(0.1), (features,))
        return x @ k + b
    return f


def mlp(ns):
    def f(scope, x):
        h = ns.np.tanh(scope.child(dense(ns), "hidden")(x, 3))
        n = scope.variable("counter", "n", lambda: ns.np.zeros((), ns.np.int32))
        if scope.is_mutable_collection("counter"):
            n.value += 1
        noise = ns.random.uniform(scope.make_rng("dropout"), h.shape)
        return scope.child(dense(ns))(h * noise, 2)   # named dense_0
    return f


def _rngs(ns, *seeds):
    return dict(zip(("params", "dropout"), map(ns.random.PRNGKey, seeds)))


def test_init_apply_mutable_match_flax():
    def run(ns):
        def run_all(rngs, x, k):   # init, apply immutable, then with a mutable collection
            y0, v = ns.core.init(mlp(ns))(rngs, x)
            v = dict(v)
            return (v, y0, ns.core.apply(mlp(ns))(v, x, rngs={"dropout": k}),
                    *ns.core.apply(mlp(ns), mutable=["counter"])(v, x, rngs={"dropout": k}))
        x = ns.np.linspace(-1.0, 1.0, 8).reshape(2, 4)
        v, y0, y1, y2, upd = ns.jit(run_all)(_rngs(ns, 0, 1), x, ns.random.PRNGKey(2))
        return dict(v), y0, y1, y2, dict(upd)
    (fv, *fy, fupd), (xv, *xy, xupd) = both(run)
    assert_trees(xv, fv)                  # same rng -> bit-equal params
    for a, b in zip(xy, fy):
        same_leaves(a, b)
    assert sorted(xupd) == ["counter"] and int(xupd["counter"]["n"]) == 2
    assert_trees(xupd, fupd)


@pytest.mark.parametrize("separator", [False, True])
def test_rng_streams_fold_like_flax(separator):
    def run(ns):
        with ns.config.temp_flip_flag("fix_rng_separator", separator):
            return streams(ns)

    def streams(ns):
        def f(scope):
            a = scope.push("a")
            keys = [scope.make_rng("params"), scope.make_rng("params"),
                    a.make_rng("dropout"), scope.push(prefix="p").make_rng("params"),
                    scope.make_rng("other"),   # falls back to the params stream
                    a.rewound().make_rng("dropout"),   # counters survive a rewind
                    a.rewound(rewind_rngs=True).make_rng("dropout")]
            b = scope.push("b", reuse=False)
            keys.append(b.push("c").make_rng("params"))
            return [scope.has_rng("dropout"), scope.has_rng("nope")], keys
        return ns.core.apply(f)({}, rngs=_rngs(ns, 3, 4))
    (fflags, fkeys), (xflags, xkeys) = both(run)
    assert fflags == xflags == [True, False]
    for a, b in zip(xkeys, fkeys):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_scope_api_matches_flax():
    def run(ns):
        out = {}

        def f(scope):
            s = scope.push("s")
            s.put_variable("state", "d", {"a": 1})
            s.put_variable("state", "d", {"b": 2})   # merged into the existing dict
            out["get"] = s.get_variable("state", "d")
            out["has"] = (s.has_variable("state", "d"), s.has_variable("state", "x"),
                          s.get_variable("state", "x", 7))
            out["mut"] = [scope.is_mutable_collection(c) for c in ("state", "params")]
            scope.reserve("used")
            out["names"] = (scope.default_name("used"), scope.default_name("s"),
                            scope.name_reserved("used"))
            out["flags"] = (scope.has_flag("initializing"), scope.get_flag("x", 3))
            out["eq"] = (s.rewound() == s, scope.push("t") == s)
            out["paths"] = (s.path, s.path_text, scope.push("u").push("v").path)
            out["child"] = scope.child(lambda sc, k: (sc.path, k), k=5)()
            out["vars"] = sorted(scope.variables())
            return 0
        _, upd = ns.core.apply(f, mutable="state", flags={"f": 1})({"params": {}})
        out["upd"] = upd
        return out
    theirs, ours = both(run)
    for k in theirs:
        assert ours[k] == theirs[k], k
    root = xcore.bind({"params": {"w": jnp.ones(2)}}, mutable=["state"])
    assert root.variables()["params"]["w"].shape == (2,)


def test_filters_match_flax():
    from flax.core import scope as fs
    from xform.nn.core import scope as xs
    probes = ("params", "state", "cache", "other")
    filters = lambda m: [True, False, "params", ["params", "state"], (),
                         m.DenyList("params"), m.DenyList(["params", "cache"])]
    for i, (fa, xa) in enumerate(zip(filters(fs), filters(xs))):
        for fb, xb in zip(filters(fs), filters(xs)):
            for op in ("union_filters", "intersect_filters", "subtract_filters"):
                rf, rx = getattr(fs, op)(fa, fb), getattr(xs, op)(xa, xb)
                assert [fs.in_filter(rf, c) for c in probes] == [
                    xs.in_filter(rx, c) for c in probes], (op, fa, fb)
                assert fs.is_filter_empty(rf) == xs.is_filter_empty(rx), (op, fa, fb)
    groups = lambda m: m.group_collections({"params": 1, "state": 2, "x": 3},
                                           ["params", m.DenyList("x"), True])
    assert groups(xs) == groups(fs)
    with pytest.raises(xerrors.InvalidFilterError, match='Invalid Filter: "3"'):
        xs.in_filter(3, "params")


def test_lifted_vmap_and_scan_match_flax():
    def run(ns):
        lift, d = ns.lift, dense(ns)
        x = ns.np.linspace(-1.0, 1.0, 12).reshape(3, 4)
        ens = lift.vmap(d, variable_axes={"params": 0}, split_rngs={"params": True},
                        in_axes=(None, None), axis_size=3)
        read_only = lift.vmap(d, variable_axes={"params": ns.In(0)},   # mapped in only
                              split_rngs={"params": True}, in_axes=(None, None),
                              axis_size=3)
        shared = lift.vmap(d, variable_axes={"params": None},
                           split_rngs={"params": False}, in_axes=(0, None))

        def body(scope, c, x):
            n = scope.variable("counter", "n")
            n.value += 1
            h = ns.np.tanh(d(scope, x, 4) + c)
            return h, h.sum()
        scan = lift.scan(body, variable_broadcast="params", variable_carry="counter",
                         split_rngs={"params": False})

        def rnn(scope, c, xs):   # carry variables must exist before the loop
            scope.variable("counter", "n", lambda: ns.np.zeros((), ns.np.int32))
            return scan(scope, c, xs)
        stack = lift.scan(lambda s, c, x: (d(s, c, 4) + x, ()),
                          variable_axes={"params": 0}, split_rngs={"params": True},
                          in_axes=0, length=2)

        def model(scope, x):
            mapped = ens if scope.is_mutable_collection("params") else read_only
            return (scope.child(mapped, "ens")(x, 2), scope.child(shared, "shared")(x, 2),
                    scope.child(rnn, "rnn")(ns.np.zeros(4), x),
                    scope.child(stack, "stack")(x[0], x[:2]))
        def run_all(key, x):
            y, v = ns.core.init(model)(key, x)
            return (dict(v), y, *ns.core.apply(model, mutable="counter")(v, x))
        v, y, y2, upd = ns.jit(run_all)(ns.random.PRNGKey(0), x)
        return v, y, y2, dict(upd)
    (fv, fy, fy2, fupd), (xv, xy, xy2, xupd) = both(run)
    assert_trees(xv, fv)
    assert xv["params"]["ens"]["kernel"].shape == (3, 4, 2)
    assert xv["params"]["stack"]["kernel"].shape == (2, 4, 4)
    same_leaves(xy, fy)
    same_leaves(xy2, fy2)
    assert_trees(xupd, fupd)


def test_lifted_control_flow_remat_jit_match_flax():
    def run(ns):
        lift, d = ns.lift, dense(ns)

        def model(scope, x):
            scope.variable("state", "acc", lambda: ns.np.zeros((), ns.np.float32))

            def cond_fn(scope, c):
                return scope.get_variable("state", "acc") < 3

            def body_fn(scope, c):
                acc = scope.variable("state", "acc")
                acc.value += 1
                return c * 0.5 + ns.random.uniform(scope.make_rng("loop"), c.shape)
            w = lift.while_loop(cond_fn, body_fn, scope, x, carry_variables="state",
                                split_rngs={"loop": True})
            branches = [lambda s, x: s.child(d, "b")(x, 2),
                        lambda s, x: -s.child(d, "b")(x, 2)]
            c = lift.cond(x.sum() > 0, *branches, scope, x)
            s = lift.switch(1, branches, scope, x)
            r = scope.child(lift.remat(lambda s, x: ns.np.sin(d(s, x, 3))), "r")(x)
            j = scope.child(lift.jit(lambda s, key, x: d(s, x, 3)), "j")("key", x)
            return w, c, s, r, j
        x = ns.np.linspace(-1.0, 2.0, 8).reshape(2, 4)
        rngs = {"params": ns.random.PRNGKey(0), "loop": ns.random.PRNGKey(5)}
        def run_all(rngs, x):
            y, v = ns.core.init(model)(rngs, x)
            return dict(v), y, ns.core.apply(model, mutable="state")(v, x, rngs=rngs)
        return ns.jit(run_all)(rngs, x)
    (fv, fy, fy2), (xv, xy, xy2) = both(run)
    assert_trees(xv, fv)
    same_leaves(xy, fy)
    same_leaves(xy2, fy2)


def test_lifted_ad_map_variables_match_flax():
    def run(ns):
        lift, d = ns.lift, dense(ns)

        def model(scope, x):
            sv = scope.push("v")
            y, bwd = lift.vjp(lambda s, x: d(s, x, 2), sv, x)
            p_ct, x_ct = bwd(ns.np.ones_like(y))
            val, (g,) = lift.value_and_grad(lambda s, x: (d(s, x, 2) ** 2).sum(),
                                            scope.push("g"), x)
            vs = sv.variables()["params"]
            yj, tj = lift.jvp(lambda s, x: d(s, x, 2), sv, (x,), (ns.np.ones_like(x),),
                              {"params": ns.tree.tree_map(ns.np.ones_like, vs)})
            neg = lift.map_variables(lambda s, x: d(s, x, 2), "params",
                                     lambda v: ns.tree.tree_map(lambda a: -a, v),
                                     init=True)
            m = scope.child(neg, "neg")(x)

            c = scope.child(sign_grad_model(ns), "cv")(x)
            return y, p_ct, x_ct, val, g, yj, tj, m, c
        x = ns.np.linspace(-1.0, 2.0, 8).reshape(2, 4)

        def run_all(key, x):
            y, v = ns.core.init(model)(key, x)
            cv = ns.grad(lambda p: ns.core.apply(
                lambda s, x: s.child(sign_grad_model(ns), "cv")(x).sum())(
                    {"params": p}, x))({"cv": v["params"]["cv"]})
            return dict(v), y, ns.core.apply(model)(v, x), cv
        v, y, y2, cv = ns.jit(run_all)(ns.random.PRNGKey(0), x)
        return dict(v), y, y2, cv
    (fv, fy, fy2, fcv), (xv, xy, xy2, xcv) = both(run)
    assert_trees(xv, fv)
    same_leaves(xy, fy)
    same_leaves(xy2, fy2)
    same_leaves(xcv, fcv)
    assert set(np.unique(np.asarray(xcv["cv"]["kernel"]))) <= {-1.0, 0.0, 1.0}


def sign_grad_model(ns):
    d = dense(ns)

    def fwd(s, x):
        return ns.lift.vjp(lambda s, x: d(s, x, 2), s, x)

    def bwd(vjp_fn, y_t):
        params_t, *inputs_t = vjp_fn(y_t)
        return (ns.tree.tree_map(ns.np.sign, params_t), *inputs_t)
    return ns.lift.custom_vjp(lambda s, x: d(s, x, 2), fwd, bwd)


def test_pack_over_scope_tree_and_lazy_init():
    def run(ns):
        def inner(scope_fn, repack_fn, variable_groups, rng_groups, x):
            a, b = scope_fn(variable_groups, rng_groups)
            y = dense(ns)(a, x, 2) + dense(ns)(b, x, 2)
            return y, repack_fn((a, b))
        packed = ns.lift.pack(inner, (True,), (True,), (True,), name="pk")

        def model(scope, x):
            return packed((scope.push("a"), scope.push("b")), x)
        return dict(ns.core.lazy_init(model)(ns.random.PRNGKey(1),
                                             ns.sds((1, 3), "float32")))
    theirs, ours = both(run)
    assert sorted(ours["params"]) == ["a", "b"]
    assert_trees(ours, theirs, rtol=1e-6, atol=1e-6)   # Flax's lazy_init runs eagerly


def test_functional_layers_match_flax_core_nn():
    def run(ns):
        nn = ns.layers

        def model(scope, x, ids):
            y = scope.child(nn.dense)(x.reshape(2, -1), 3)
            g = scope.child(nn.dense_general)(x, (2, 3), axis=(-2, -1), batch_dims=0)
            c = scope.child(nn.conv)(x[..., None], 2, (3, 3))
            t = scope.child(nn.conv_transpose)(x[..., None], 2, (2, 2), strides=(2, 2))
            e = scope.child(nn.embedding)(5, 3)
            return (y, g, c, t, e.lookup(ids), e.attend(y), scope.child(nn.batch_norm)(c),
                    scope.child(nn.layer_norm)(c),
                    scope.child(nn.group_norm)(c, num_groups=1),
                    nn.dropout(scope, c, 0.5), nn.relu(y))

        def norm(scope, c):   # applied alone: the running averages update
            return scope.child(nn.batch_norm, "batch_norm_0")(c)

        def run_all(rngs, x, ids):
            y, v = ns.core.init(model)(rngs, x, ids)
            return (dict(v), y, *ns.core.apply(norm, mutable="batch_stats")(v, y[2]))
        x = ns.np.linspace(-1.0, 1.0, 32).reshape(2, 4, 4)
        return ns.jit(run_all)(_rngs(ns, 0, 1), x, ns.np.array([0, 4, 2]))
    (fv, fy, fy2, fu), (xv, xy, xy2, xu) = both(run)
    assert_trees(xv, fv)
    same_leaves(xy, fy)
    same_leaves(xy2, fy2)
    same_leaves(xu, fu)


def _message(e):
    return str(e).split(" (https://")[0].rstrip(".")


@pytest.mark.parametrize("case", ["shape", "param_missing", "collection_empty",
                                  "variable_missing", "immutable", "duplicate",
                                  "no_rng", "invalid_scope", "bad_init_rng",
                                  "extra_params_level", "bad_variables"])
def test_errors_match_flax(case):
    def run(ns):
        d = dense(ns)
        x = ns.np.ones((1, 3))
        _, v = ns.core.init(d)(ns.random.PRNGKey(0), x, 2)
        saved = []
        calls = {
            "shape": lambda: ns.core.apply(d)(v, x, 4),
            "param_missing": lambda: ns.core.apply(
                lambda s: s.param("w", ns.init.zeros, (1,)))(v),
            "collection_empty": lambda: ns.core.apply(
                lambda s: s.param("w", ns.init.zeros, (1,)))({}),
            "variable_missing": lambda: ns.core.apply(
                lambda s: s.variable("state", "n"))({"state": {"m": 1}}),
            "immutable": lambda: ns.core.apply(
                lambda s: s.put_variable("state", "n", 1))({}),
            "duplicate": lambda: ns.core.apply(
                lambda s: (s.push("a"), s.push("a")))({}),
            "no_rng": lambda: ns.core.apply(lambda s: s.make_rng("dropout"))({}),
            "invalid_scope": lambda: (ns.core.apply(saved.append)({}),
                                      saved[0].push("late")),
            "bad_init_rng": lambda: ns.core.init(d)(0, x, 2),
            "extra_params_level": lambda: ns.core.apply(d)({"params": v}, x, 2),
            "bad_variables": lambda: ns.core.apply(d)({"params": 3}, x, 2),
        }
        with pytest.raises(Exception) as info:
            calls[case]()
        return info.value
    theirs, ours = both(run)
    assert type(ours).__name__ == type(theirs).__name__, (ours, theirs)
    if case not in ("no_rng", "bad_variables"):   # xform names the path / adds a hint
        assert str(ours).startswith(_message(theirs)), (str(ours), str(theirs))


def test_doctests():
    for mod in (xcore.scope, xcore.lift):
        result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted and not result.failed, mod.__name__


def test_attention_layers_match_flax_core_nn():
    """Masks (causal, padding, segmentation), dropout, N-d attention axes and two
    cached decoding steps (on the first model's params), under one jit per side."""
    def run(ns):
        mhdpa = ns.layers.multi_head_dot_product_attention
        cos_init = lambda _, shape, dtype: ns.np.cos(   # noqa: E731 (no rng: compiles fast)
            ns.np.arange(np.prod(shape), dtype=dtype)).reshape(shape)

        def model(scope, x, x2, pad, seg):
            return (mhdpa(scope, x, None, 2, causal_mask=True, padding_mask=pad,
                          segmentation=seg, dropout_rate=0.3, qkv_features=4),
                    scope.child(mhdpa)(x2, x2, 2, attention_axis=(1,), out_features=3,
                                       kernel_init=cos_init))

        def decode(scope, x):
            return mhdpa(scope, x, None, 2, causal_mask=True, cache=True, qkv_features=4)

        def run_all(rngs, x, x2, pad, seg):
            y, v = ns.core.init(model)(rngs, x, x2, pad, seg)
            _, dv = ns.core.apply(decode, mutable="cache")({"params": v["params"]}, x)
            dv = {"params": v["params"], "cache": {"entry": dv["cache"]["entry"]((2, 4))}}
            ys = []
            for t in range(2):
                yt, upd = ns.core.apply(decode, mutable="cache")(dv, x[:, t:t + 1])
                dv = {"params": v["params"], "cache": upd["cache"]}
                ys.append(yt)
            return dict(v), y, ys, dv["cache"]["entry"].key
        x = ns.np.linspace(-1.0, 1.0, 48).reshape(2, 4, 6)
        x2 = ns.np.cos(ns.np.arange(48.0)).reshape(2, 3, 2, 4)
        pad = ns.np.array([[1.0, 1, 0, 1], [1, 1, 1, 0]])
        seg = ns.np.array([[0, 0, 1, 1], [0, 1, 1, 1]])
        return ns.jit(run_all)(_rngs(ns, 0, 1), x, x2, pad, seg)
    (fv, *fy), (xv, *xy) = both(run)
    assert_trees(xv, fv)
    same_leaves(xy, fy)
