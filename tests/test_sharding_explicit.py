"""Explicit sharding mode ("shardings in types"), against JAX side by side: ``typeof``
strings and ``.sharding`` of arrays and tracers, the sharding rules' results and
errors, jit outputs' placement (spec and per-shard indices), values, reshard, grad
and vmap through an explicit-mode jit."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp
from xform.sharding import PartitionSpec as P
from test_sharding_arrays import layout

X = np.arange(32, dtype=np.float32).reshape(8, 4)
W = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)


def both(fn, axis_types=("Explicit", "Explicit")):
    """``fn(lib, numpy, P, put)`` under an explicit (2, 4) mesh in context, run on xform
    and on JAX; ``put(value, *spec)`` device_puts to that spec."""
    out = []
    for L, np_, P_ in ((xform, xnp, P), (jax, jnp, jax.sharding.PartitionSpec)):
        types = tuple(getattr(L.sharding.AxisType, t) for t in axis_types)
        mesh = L.make_mesh((2, 4), ("x", "y"), axis_types=types)
        with L.set_mesh(mesh):
            out.append(fn(L, np_, P_, lambda v, *spec: L.device_put(v, P_(*spec))))
    return out


def error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and text are compared)
        return type(e).__name__, str(e)
    return None


def check(x, j):
    np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-5)
    assert str(xform.typeof(x)) == str(jax.typeof(j))
    assert layout(x) == layout(j)


def test_typeof_of_arrays_and_tracers():
    def run(L, np_, P_, put):
        x = put(X, "x", None)
        seen = []

        @L.jit
        def f(a):
            t = L.typeof(a)
            seen.extend([str(t), repr(t), repr(t.sharding.spec),
                         dict(L.sharding.get_abstract_mesh().shape)])
            return a
        f(x)
        t = L.typeof(x)
        return [str(t), repr(t), t.sharding.spec, t.sharding.mesh.axis_names,
                tuple(t.sharding.mesh.axis_types), repr(L.typeof(put(X, ("x", "y"))).sharding
                                                        .spec),
                str(L.typeof(put(X))), L.typeof(np_.ones(3)).sharding.spec] + seen
    x, j = both(run)
    assert x[0] == "float32[8@x,4]" and x[5] == "P(('x', 'y'), None)"
    assert [str(v) for v in x] == [str(v) for v in j]


def test_jit_types_placement_and_values():
    def run(L, np_, P_, put):
        w = put(W, None, "y")
        seen = []

        @L.jit
        def f(a, b):
            c = a * 2 + b          # [x, None] and [None, y] merge to [x, y]
            d = c @ w
            seen.append(str(L.typeof(d)))
            return d.sum(axis=0), c.T, np_.sin(d).astype(np.int32)
        outs = f(put(X, "x", None), put(np.ones_like(X), None, "y"))
        eager = [put(X, "x", None) * 2 + put(X, None, "y"),
                 put(X, "x", "y").sum(axis=1)]
        jaxpr = str(L.make_jaxpr(lambda a: np_.sin(a).sum(0))(put(X, "x", None)))
        return list(outs) + eager, seen, [line.split("=")[0] for line in
                                          jaxpr.splitlines()[:2]]
    (xo, xs, xj), (jo, js, jj) = both(run)
    for x, j in zip(xo, jo):
        check(x, j)
    assert xs == js == ["float32[8@x,8@y]"]
    assert xj == jj


def test_rules_shapes_reductions_and_dtypes():
    def run(L, np_, P_, put):
        def g(a):
            return [a.sum(axis=1), a.max(axis=0), a.T, np_.expand_dims(a, 0),
                    a.reshape(2, 4, 4), a.reshape(32), a.reshape(2, 2, 2, 4),
                    a.astype(np.int32), np_.where(a > 3, a, 0.0), np_.argmax(a, axis=0),
                    a[:, None, :], a[:4], L.lax.broadcast_in_dim(a, (3, 8, 4), (1, 2)),
                    np_.clip(a, 1.0, 5.0)]
        def h(a):  # shape-changing ops on a dimension left unsplit
            return [np_.concatenate([a, a * 2], axis=1), np_.pad(a, ((0, 0), (1, 1))),
                    *np_.split(a, 2, axis=1), L.lax.dynamic_slice(a, (0, 1), (8, 2)),
                    L.lax.dynamic_update_slice(a, a[:, :2], (0, 1)), a[:, 1:3],
                    np_.flip(a, 0), np_.pad(a, ((1, 1), (0, 0)))]
        return L.jit(g)(put(X, "x", "y")) + L.jit(h)(put(X, "x", None))
    for x, j in zip(*both(run)):
        check(x, j)


def test_rule_errors_match_jax():
    def run(L, np_, P_, put):
        xy = put(X, "x", "y")
        return [error(lambda: L.jit(lambda a, b: a + b)(put(X, "x", None),
                                                        put(X, "y", None))),
                error(lambda: put(X, "x", None) * put(X, "y", None)),   # eager too
                error(lambda: L.jit(lambda a, b: a @ b)(xy, put(W, "y", None))),
                error(lambda: L.jit(lambda a, b: L.lax.dot_general(
                    a, b, (((0,), (0,)), ((), ()))))(put(X, "x", None), put(X, "y", None))),
                error(lambda: L.jit(lambda a: a.reshape(4, 8))(xy)),
                error(lambda: L.jit(lambda a: np_.cumsum(a, axis=0))(xy)),
                error(lambda: L.jit(lambda a, b: np_.concatenate([a, b], axis=1))(
                    xy, put(X, None, "y"))),
                error(lambda: L.jit(lambda a: L.lax.dynamic_slice(a, (1, 1), (3, 2)))(xy)),
                error(lambda: L.jit(lambda a, b: L.lax.dynamic_update_slice(a, b, (0, 0)))(
                    xy, put(X, None, "y"))),
                error(lambda: L.jit(lambda a, b: L.lax.select(a > 0, a, b))(
                    xy, put(X, "x", None)))]
    x, j = both(run)
    assert all(e is not None and e[0] == "ShardingTypeError" for e in x)
    assert x == j


def test_out_sharding_and_reshard_change_the_type():
    def run(L, np_, P_, put):
        xy, wy = put(X, "x", "y"), put(W, "y", None)
        return [L.jit(lambda a, b: np_.dot(a, b, out_sharding=P_("x", None)))(xy, wy),
                L.jit(lambda a, b: L.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                     out_sharding=P_(None, "x")))(xy, wy),
                np_.einsum("ij,jk->ki", xy, wy, out_sharding=P_(None, "x")),
                L.jit(lambda a: L.lax.reshape(a, (4, 8), out_sharding=P_("x", None)))(xy),
                L.jit(lambda a: np_.reshape(a, (4, 8), out_sharding=P_(None, "y")))(xy),
                L.jit(L.grad(lambda a: (L.lax.reshape(a, (4, 8), out_sharding=P_("x", None))
                                        ** 2).sum()))(xy),
                L.jit(L.vmap(lambda r: L.lax.reshape(r, (2, 2), out_sharding=P_())))(xy),
                L.jit(lambda a: L.sharding.reshard(a * 3, P_(None, "x")))(xy),
                L.sharding.reshard(xy, P_(None, "y"))]
    for x, j in zip(*both(run)):
        check(x, j)


def test_grad_and_vmap_through_an_explicit_jit():
    def run(L, np_, P_, put):
        w = put(W, None, "y")
        f = L.jit(lambda a: ((a @ w) ** 2).sum(axis=1))
        loss = lambda a, v: (f(a) * v).sum()  # noqa: E731
        a, v = put(X, "x", None), put(np.arange(8, dtype=np.float32), "x")
        g = L.jit(L.grad(loss, argnums=(0, 1)))(a, v)
        b3 = put(np.arange(64, dtype=np.float32).reshape(2, 8, 4), "x", None, "y")
        w3 = put(np.ones((4, 8), np.float32), "y", None)
        f3 = lambda r: L.lax.dot_general(  # noqa: E731  (contraction split: out_sharding)
            r, w3, (((1,), (0,)), ((), ())), out_sharding=P_(None, None))
        return list(g) + [L.grad(loss)(a, v), L.jit(L.vmap(lambda r: r * 2 + 1))(a),
                          L.vmap(lambda r, s: r * s, in_axes=(0, None))(a, put(X[0])),
                          L.jit(L.vmap(f3))(b3), L.jit(L.grad(lambda b: L.vmap(f3)(b).sum()))(b3)]
    for x, j in zip(*both(run)):
        check(x, j)


@pytest.mark.parametrize("axis_types", [("Explicit", "Auto")])
def test_mixed_mesh_types_only_explicit_axes(axis_types):
    def run(L, np_, P_, put):
        x = put(X, "x", "y")
        return [str(L.typeof(x)), str(L.typeof(L.jit(lambda a: a * 2)(x)))]
    x, j = both(run, axis_types)
    assert x == j == ["float32[8@x,4]"] * 2


def test_untyped_world_is_unchanged():
    a = xform.core.avals.ShapedArray((2,), np.float32)
    assert a._sharding is None and a == a.update(weak_type=False)
    assert hash(a) == hash(xform.core.avals.ShapedArray((2,), np.float32))
    assert str(a) == str(jax.typeof(jnp.ones(2)))


def test_auto_axes_and_explicit_axes_switch_axis_types():
    def run(L, np_, P_, put):
        seen = []

        def body(x):
            seen.append((str(L.typeof(x)), str(L.sharding.get_abstract_mesh().axis_types)))
            y = x * 2
            seen.append(str(L.typeof(y)))
            return y
        a = put(X, "x", "y")
        outs = [L.jit(L.sharding.auto_axes(body, out_sharding=P_("x", None)))(a),
                L.jit(L.sharding.auto_axes(body, axes="y", out_sharding=P_(None, "x")))(a)]
        return outs, seen

    def run_auto(L, np_, P_, put):
        seen = []

        def body(x):
            seen.append((str(L.typeof(x)), str(L.sharding.get_abstract_mesh().axis_types)))
            return x * 2
        out = L.jit(L.sharding.explicit_axes(body, in_sharding=P_("x", None)))(put(X, "x"))
        return [out], seen
    for (xo, xs), (jo, js) in [both(run), both(run_auto, ("Auto", "Auto"))]:
        assert xs == js
        for x, j in zip(xo, jo):
            check(x, j)


def test_shard_map_and_untyped_results_in_an_explicit_jit():
    def run(L, np_, P_, put):
        sm = L.shard_map(lambda b: b * 2, mesh=L.sharding.get_mesh(), in_specs=P_("x"),
                         out_specs=P_("x"))
        a = put(X, "x", None)
        return [sm(a), L.jit(lambda a: sm(a) + 1)(a), L.jit(lambda a: sm(a * 2).sum(0))(a),
                L.jit(lambda a: np_.concatenate([a, a], axis=1))(a)]
    for x, j in zip(*both(run)):
        check(x, j)


def test_shard_map_checks_and_infers_in_specs_from_types():
    def run(L, np_, P_, put):
        mesh = L.sharding.get_mesh()
        seen = []

        def body(b):
            seen.append(str(L.typeof(b)))  # (its vma: both axes)
            return L.lax.psum(b, "y")
        sm = lambda **kw: L.shard_map(body, mesh=mesh, out_specs=P_("x", None), **kw)  # noqa: E731
        a, xy = np.arange(128.0, dtype=np.float32).reshape(8, 16), put(X, "x", "y")

        def typed(b):
            o = sm(in_specs=P_("x", "y"))(b)
            seen.append(str(L.typeof(o)))
            return o * 2
        outs = [sm(in_specs=P_("x", "y"))(xy), L.jit(sm(in_specs=P_("x", "y")))(xy),
                sm()(xy), L.jit(typed)(xy), L.jit(L.shard_map(lambda b: b * 2, mesh=mesh,
                                                              in_specs=P_(), out_specs=P_()))(X)]
        errs = [error(lambda: sm(in_specs=(P_("x", "y"),))(a)),
                error(lambda: sm(in_specs=P_("x"))(xy))]
        meshes = [(o.sharding.spec, tuple(map(str, o.sharding.mesh.axis_types))) for o in outs]
        return outs, errs + seen + meshes
    (xo, xs), (jo, js) = both(run)
    for x, j in zip(xo, jo):
        check(x, j)
    assert xs[0][0] == "ValueError" and [str(v) for v in xs] == [str(v) for v in js]


def test_shard_map_without_in_specs_needs_explicit_axes():
    def run(L, np_, P_, put):
        return error(lambda: L.shard_map(lambda b: b, mesh=L.sharding.get_mesh(),
                                         out_specs=P_())(X))
    x, j = both(run, ("Auto", "Auto"))
    assert x[0] == "TypeError" and x[0] == j[0]
    for part in (0, -1):  # (the frozenset of axis names between may list them in any order)
        assert x[1].split("axis_names=")[part] == j[1].split("axis_names=")[part] or \
            x[1].split("}")[part] == j[1].split("}")[part]


def _text(e):
    """An error's type and text up to JAX's source location (xform names none)."""
    return e and (e[0], e[1].split(" This error occurs at source")[0].rstrip("."))


@pytest.mark.parametrize("axis_types", [("Explicit", "Explicit"), ("Explicit", "Auto")])
def test_with_sharding_constraint_and_reshard_in_explicit_mode(axis_types):
    def run(L, np_, P_, put):
        wsc, xy = L.lax.with_sharding_constraint, put(X, "x", "y")
        auto = L.make_mesh((2, 4), ("x", "y"), axis_types=(L.sharding.AxisType.Auto,) * 2)
        errs = [error(lambda: wsc(xy, P_("x", None))),
                error(lambda: L.jit(lambda a: wsc(a, P_(None, "y")))(xy)),
                error(lambda: wsc(put(X), L.sharding.NamedSharding(auto, P_("x")))),
                error(lambda: L.sharding.reshard(xy, P_(None, "y"))),
                error(lambda: np_.dot(xy, put(W, "y", None), out_sharding=P_(None, "y"))),
                error(lambda: np_.einsum("ij,jk->ik", xy, put(W, "y", None),
                                         out_sharding=P_(None, "y")))]
        spec = P_("x", "y") if axis_types[1] == "Explicit" else P_(None, "y")  # (y: Auto)
        outs = [wsc(xy, spec), L.jit(lambda a: wsc(a * 2, spec))(xy)]
        return [_text(e) for e in errs], outs
    (xe, xo), (je, jo) = both(run, axis_types)
    assert xe == je and (axis_types[1] == "Auto") == any(e and e[0] == "ValueError" for e in xe)
    for x, j in zip(xo, jo):
        check(x, j)


@pytest.mark.parametrize("axis_types", [("Explicit", "Explicit"), ("Explicit", "Auto")])
def test_creation_functions_out_sharding(axis_types):
    def run(L, np_, P_, put):
        xs = P_("x", None)
        outs = [np_.zeros((8, 4), out_sharding=xs), np_.ones((8, 4), np.int32,
                                                             out_sharding=P_(None, "x")),
                np_.full((8, 4), 2.0, out_sharding=xs), np_.arange(8, out_sharding=P_("x")),
                L.jit(lambda a: a + np_.zeros((8, 4), out_sharding=xs))(put(X, "x")),
                L.jit(lambda: np_.arange(8.0, out_sharding=P_("x")) * 2)()]
        errs = [error(lambda: np_.zeros((8, 4), out_sharding=P_(None, "y"))),
                error(lambda: np_.arange(8, out_sharding=P_("y")))]
        return outs, [_text(e) for e in errs]
    (xo, xe), (jo, je) = both(run, axis_types)
    for x, j in zip(xo, jo):
        check(x, j)
    assert xe == je and (axis_types[1] == "Auto") == (xe[0] is not None)


def test_sort_rule():
    def run(L, np_, P_, put):
        a, b = put(X[::-1], "x", None), put(X, None, "y")
        outs = [np_.sort(a, axis=1), L.jit(lambda v: np_.argsort(v, axis=1))(a),
                *L.jit(lambda v: L.lax.sort((v, v * 2), dimension=1, num_keys=1))(a)]
        errs = [error(lambda: L.jit(lambda v: np_.sort(v, axis=0))(a)),
                error(lambda: L.jit(lambda u, v: L.lax.sort((u, v), dimension=0))(b, a))]
        return outs, errs
    (xo, xe), (jo, je) = both(run)
    for x, j in zip(xo, jo):
        check(x, j)
    assert xe == je and all(e[0] == "ShardingTypeError" for e in xe)


def test_at_get_out_sharding():
    def run(L, np_, P_, put):
        a = put(X, "x", None)
        return [L.jit(lambda v: v.at[:, 1].get(out_sharding=P_("x")))(a),
                a.at[np.array([0, 2])].get(out_sharding=P_(None, "y"))]
    for x, j in zip(*both(run)):
        check(x, j)


def test_creation_functions_device():
    def run(L, np_, P_, put):
        d = L.devices()[3]
        outs = [np_.zeros(3, device=d), np_.full((2,), 1.0, device=d),
                np_.arange(4, device=L.sharding.NamedSharding(L.sharding.get_mesh(), P_("y")))]
        return ([(str(o.sharding).split("(")[0], sorted(x.id for x in o.devices()))
                 for o in outs] + [np.asarray(o).tolist() for o in outs],
                _text(error(lambda: np_.ones(3, device=d, out_sharding=P_()))))
    x, j = both(run)
    assert x == j and x[1][0] == "ValueError"


def test_broadcast_iota_full_and_updates_out_sharding():
    def run(L, np_, P_, put):
        a, NS = put(np.arange(8, dtype=np.float32), "x"), L.sharding.NamedSharding
        iota = lambda **kw: L.lax.broadcasted_iota(np.int32, (8, 4), 0, **kw)  # noqa: E731
        outs = [L.lax.broadcast(a, (4,), out_sharding=P_("y", "x")), iota(out_sharding=P_("y")),
                L.jit(lambda v: L.lax.broadcast(v, (4,), out_sharding=P_("y", None)))(a),
                L.jit(lambda: iota(out_sharding=P_(None, "x")))(),
                L.jit(lambda v: L.lax.broadcast_in_dim(v, (8, 2), (0,), out_sharding=P_(
                    None, "x")) * 2)(a),
                L.jit(L.grad(lambda v: L.lax.broadcast(v, (4,), out_sharding=P_(
                    "y", None)).sum()))(a),
                L.lax.full((8, 4), 1.0, sharding=NS(L.sharding.get_mesh(), P_("x"))),
                L.lax.full((8, 4), 1.0, sharding=NS(L.sharding.get_abstract_mesh(), P_("x"))),
                L.jit(lambda v: L.lax.full_like(v, 2))(a), np_.zeros_like(a),
                np_.ones_like(a, out_sharding=P_(("x", "y"))), L.jit(np_.zeros_like)(a),
                np_.broadcast_to(a, (4, 8), out_sharding=P_("y", "x")),
                a.at[1].set(3.0, out_sharding=P_("y")),
                L.jit(lambda v: v.at[1].add(3.0, out_sharding=P_("y")))(a)]
        errs = [error(lambda: iota(out_sharding=P_(None, "z"))),
                error(lambda: L.jit(lambda: L.lax.broadcasted_iota(
                    np.int32, (6,), 0, out_sharding=P_("y")))()),
                error(lambda: np_.broadcast_to(a, (4, 8), out_sharding=P_(None, "y"))),
                error(lambda: a.at[1].multiply(2.0, out_sharding=P_("z")))]
        return outs, errs
    (xo, xe), (jo, je) = both(run)
    for x, j in zip(xo, jo):
        check(x, j)
    assert all(e is not None for e in xe) and xe == je


def test_control_flow_types_must_agree():
    def run(L, np_, P_, put):
        a, b, rs = put(X, "x", None), put(X, None, "y"), L.sharding.reshard
        lax = L.lax
        outs = [L.jit(lambda v: lax.cond(True, lambda: v, lambda: v * 2))(a),
                *L.jit(lambda v: lax.while_loop(lambda c: c[0] < 3,
                                                lambda c: (c[0] + 1, c[1] * 2), (0, v)))(a),
                *L.jit(lambda v: lax.scan(lambda c, x: (c * 2, x * 2), v, b))(a)]
        errs = [error(lambda: L.jit(lambda u, v: lax.cond(True, lambda: u, lambda: v))(a, b)),
                error(lambda: L.jit(lambda v: lax.while_loop(
                    lambda c: c[0] < 3, lambda c: (c[0] + 1, rs(c[1], P_(None, "y"))),
                    (0, v)))(a)),
                error(lambda: L.jit(lambda u, v: lax.fori_loop(0, 3, lambda i, c: v, u))(a, b)),
                error(lambda: L.jit(lambda v: lax.scan(lambda c, x: (c, x), v, v))(a)),
                # an unsharded init (replicated under the mesh) against a split carry out
                error(lambda: L.jit(lambda v: lax.scan(lambda c, _: (c + v, None),
                                                       np_.ones((8, 4)), None, length=2))(a)),
                error(lambda: L.jit(lambda v: lax.fori_loop(0, 2, lambda i, c: np_.ones(
                    (8, 4)), v))(a))]
        return outs, errs
    (xo, xe), (jo, je) = both(run)
    for x, j in zip(xo, jo):
        check(x, j)
    # (the types named; JAX's texts also name the functions by source line)
    types = lambda e: (e[0], re.findall(r"type (\S+\[\S*\])|Got (P\(.*\))", e[1]))  # noqa: E731
    assert [types(e) for e in xe] == [types(e) for e in je] and len(types(xe[0])[1]) == 2


def test_vmap_over_explicit_batch_axes():
    """The batch's Explicit axes type what vmap creates (reshard's and unbatched outputs'
    batch dim) and the per-example type seen inside, as JAX's explicit_mesh_axis."""
    def run(L, np_, P_, put):
        x, w = put(X, "x", None), put(W, None, "y")
        seen = []

        def f(r):
            seen.append(str(L.typeof(r)))
            return r * 2
        return [L.vmap(lambda r: L.sharding.reshard(r, P_("y")))(x),
                L.vmap(L.grad(lambda r: (r @ w).sum()))(x),
                *L.vmap(lambda r: (r, np_.ones((2, 3))), out_axes=(0, 1))(x),
                L.vmap(f, in_axes=1)(put(X, "x", "y")), seen[0]]
    xs, js = both(run)
    assert xs[-1] == js[-1]
    for x, j in zip(xs[:-1], js[:-1]):
        check(x, j)


def test_vmap_explicit_batch_axes_errors():
    """JAX's checks of the mapped inputs' Explicit axes (xform's texts add the argument
    names after JAX's)."""
    def run(L, np_, P_, put):
        a, b = put(X, "x", None), put(X, "y", None)
        add = lambda u, v: u + v  # noqa: E731
        return [error(lambda: L.vmap(add)(a, b)),
                error(lambda: L.vmap(add)(a, put(X, None, None))),
                error(lambda: L.vmap(add, in_axes=(0, None))(a, a)),
                error(lambda: L.vmap(add)(a, v=b)),
                error(lambda: L.jit(L.vmap(add))(a, b)),
                error(lambda: L.vmap(lambda u: u, spmd_axis_name="y")(a)),
                error(lambda: L.vmap(lambda u: (u, {"k": u}), out_axes=(0, {"k": None}))(a))]
    xs, js = both(run)
    for x, j in zip(xs, js):
        assert x is not None and x[0] == j[0] and x[1].startswith(j[1]), (x, j)
    assert "args[0]" in xs[0][1] and "args[1]" in xs[0][1] and "kwargs['v']" in xs[3][1]


def test_jit_traces_again_under_a_mesh_in_context():
    # JAX keys its traces on the context's abstract mesh: a jit called outside set_mesh
    # traces again inside it (where a replicated init against a split carry fails)
    out = []
    for L, np_, P_ in ((xform, xnp, P), (jax, jnp, jax.sharding.PartitionSpec)):
        mesh = L.make_mesh((2, 4), ("x", "y"), axis_types=(L.sharding.AxisType.Explicit,) * 2)
        x = L.device_put(X, L.sharding.NamedSharding(mesh, P_("x", None)))
        f = L.jit(lambda v: L.lax.scan(lambda c, _: (c + v, None), np_.ones((8, 4)), None,
                                       length=2)[0])
        before = str(L.typeof(f(x)))
        with L.set_mesh(mesh):
            inside = error(lambda: f(x))
        out.append((before, inside[0], str(L.typeof(f(x)))))
    assert out[0] == out[1]
