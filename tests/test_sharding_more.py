"""Sharding beyond one jit, against JAX side by side (values and each output's layout):
in/out_shardings kept through grad/vmap/remat of a jit (and ``spmd_axis_name``),
``inspect_array_sharding`` inside jit, eager shard_map on sharded arrays,
``multihost_utils`` in one process and ``P.UNCONSTRAINED``'s checks."""
import jax
import numpy as np

import xform
from test_sharding_arrays import X, _raises as error, both, layout

W = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)


def _check_all(x, j):
    xs, js = jax.tree.leaves(x), jax.tree.leaves(j)
    assert len(xs) == len(js)
    for a, b in zip(xs, js):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        assert layout(a) == layout(b)


def test_jit_shardings_kept_through_grad_and_vmap():
    def run(L, np_, m, NS, P_):
        f = L.jit(lambda a, w: np_.tanh(a @ w), in_shardings=(NS(m, P_("x", "y")), None),
                  out_shardings=NS(m, P_(None, "y")))
        loss = lambda a, w: f(a, w).sum()  # noqa: E731
        sq = L.jit(lambda b: b * b, out_shardings=NS(m, P_("x")))
        g = L.jit(lambda a: np_.sin(a) * 2, in_shardings=NS(m, P_("x")),
                  out_shardings=NS(m, P_("x")))
        out = [L.value_and_grad(loss, argnums=(0, 1))(X, W),
               L.jit(L.grad(lambda a: sq(a).sum()))(X),
               L.grad(L.checkpoint(loss))(X, W),
               L.vjp(f, X, W)[1](np.ones((8, 6), np.float32)),
               L.jvp(f, (X, W), (X, W))[1],
               L.vmap(f, in_axes=(None, 0))(X, np.stack([W, W])),
               L.vmap(g, in_axes=1, out_axes=1)(np.stack([X, X], 1))]
        with L.set_mesh(m):  # the batch dimension split over mesh axis "y"
            out.append(L.jit(L.vmap(g, in_axes=2, spmd_axis_name="y"))(np.stack([X, X], 2)))
            out.append(L.vmap(lambda a: L.lax.with_sharding_constraint(a * 2, P_("x")),
                              spmd_axis_name="y")(np.stack([X, X])))
        return out
    for x, j in zip(*both(run)):
        _check_all(x, j)


def test_derived_jit_params_print_shardings():
    from xform.sharding import NamedSharding, PartitionSpec as P
    from test_sharding_arrays import XMESH
    s = NamedSharding(XMESH, P("x"))
    f = xform.jit(lambda a: a * 2, in_shardings=s)
    eqns = xform.make_jaxpr(xform.grad(lambda a: f(a).sum()))(X).eqns
    calls = [e.params for e in eqns if e.primitive.name == "jit"]
    assert calls[0]["in_shardings"] == (s,) and "out_shardings" not in calls[0]
    assert calls[1]["out_shardings"] == (s,) and "in_shardings" not in calls[1]
    plain = xform.make_jaxpr(xform.jit(lambda a: a * 2))(X).eqns[0].params
    assert set(plain) == {"jaxpr", "name"}  # (unsharded calls carry nothing)


def test_inspect_array_sharding_inside_jit():
    import contextlib
    import io

    def run(L, np_, m, NS, P_):
        seen = []

        def f(a):
            L.debug.inspect_array_sharding({"t": np_.sin(a).T}, callback=seen.append)
            return a
        s = NS(m, P_("x", "y"))
        g = L.jit(f, in_shardings=s)
        g(X), g(X)  # the callback runs when the program compiles: once
        L.jit(lambda a: f(a @ a.T), in_shardings=s)(X)
        L.jit(lambda a: f(a.sum(0)), in_shardings=s)(X)
        L.jit(L.grad(lambda a: f(a).sum()), in_shardings=s)(X)
        L.jit(L.vmap(f), in_shardings=NS(m, P_(None, "x", "y")))(np.stack([X, X]))
        L.jit(L.shard_map(f, mesh=m, in_specs=P_("x"), out_specs=P_("x")),
              in_shardings=NS(m, P_("x")))(X)
        L.jit(L.shard_map(f, mesh=m, in_specs=P_("x"), out_specs=P_("x"),
                          axis_names={"x"}))(L.device_put(X, s))  # ("y" left to XLA)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            L.jit(lambda a: L.debug.visualize_array_sharding(np_.sin(a)) or a,
                  in_shardings=s)(X)
        return [(type(x).__name__, tuple(x.spec)) for x in seen], out.getvalue()
    x, j = both(run)
    assert x == j and len(x[0]) == 7 and "CPU 6 │ CPU 7" in x[1]


def test_eager_shard_map_on_sharded_arrays():
    held = {}

    def run(L, np_, m, NS, P_):
        sm = lambda f, i, o: L.shard_map(f, mesh=m, in_specs=i, out_specs=o)  # noqa: E731
        x = L.device_put(X, NS(m, P_("x")))
        y = L.device_put(X, NS(m, P_(None, "y")))
        held[L] = (x, y)
        return [sm(lambda b: b * 2, P_("x"), P_("x"))(x),
                sm(lambda b: L.lax.psum(b, "x"), P_("x"), P_())(x),
                sm(lambda b: b + 1, P_("x", "y"), P_("x", "y"))(x),
                sm(lambda b: b * 2, P_("x"), P_("x"))(y),  # other layout: XLA reshards
                sm(lambda a, b: a + b, (P_("x"), P_("x")), P_(None, "x"))(y, X),
                sm(lambda b: b * 2, P_("x"), P_("x", None))(x),  # (the spec as given)
                sm(lambda b: b * 2, P_("x"), P_("x", None))(X),
                L.grad(lambda a: sm(np_.sin, P_("x"), P_("x"))(a).sum())(x),
                L.jvp(sm(np_.sin, P_("x"), P_("x")), (x,), (x,))[1]]
    outs, j = both(run)
    _check_all(outs, j)
    # one partitioned program: neither the arguments nor the results were assembled
    assert all(a._npy is None and a._one is None for a in held[xform])


def test_multihost_utils_in_one_process():
    import jax.experimental.multihost_utils as jmh
    import xform.experimental.multihost_utils as xmh

    def run(L, np_, m, NS, P_):
        mh = xmh if L is xform else jmh
        tree = {"a": X, "b": np.float32(3), "c": L.device_put(X, NS(m, P_("x")))}
        mh.sync_global_devices("step")
        mh.assert_equal(tree)
        g = mh.host_local_array_to_global_array({"a": X, "c": tree["c"]}, m,
                                                {"a": P_("x", "y"), "c": P_("x")})
        return [mh.process_allgather(tree), mh.process_allgather(tree, tiled=True),
                mh.broadcast_one_to_all(tree), g,
                mh.global_array_to_host_local_array(g, m, P_("x")),
                mh.global_array_to_host_local_array(X, m, P_(None, "y")),
                L.jit(lambda a: mh.host_local_array_to_global_array(a, m, P_("x")) * 2)(X)]
    x, j = both(run)
    for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(j)):
        assert type(a) is np.ndarray if type(b) is np.ndarray else hasattr(a, "sharding")
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(x[3:6]), jax.tree.leaves(j[3:6])):
        assert layout(a) == layout(b)
    with np.testing.assert_raises_regex(ValueError, "`None` is not a valid input"):
        xmh.host_local_array_to_global_array(X, None, None)
    assert xmh.reached_preemption_sync_point(3) is jmh.reached_preemption_sync_point(3) is False

    def live(mh):  # (one process: the distributed runtime is not initialized)
        try:
            with mh.live_devices(jax.devices()):
                pass
        except RuntimeError as e:
            return str(e)
    assert live(xmh) == live(jmh) is not None
    assert issubclass(xmh.ProcessFailureError, Exception)


def test_unconstrained_refused_without_auto_axes():
    def run(L, np_, P_, NS, put):
        out = []
        for types in [("Explicit",) * 2, ("Explicit", "Auto")]:
            m = L.make_mesh((2, 4), ("x", "y"),
                            axis_types=tuple(getattr(L.sharding.AxisType, t) for t in types))
            out += [error(lambda: NS(m, P_("x", P_.UNCONSTRAINED))),
                    error(lambda: NS(m.abstract_mesh, P_(P_.UNCONSTRAINED))),
                    error(lambda: L.jit(lambda a: a, out_shardings=NS(m, P_(P_.UNCONSTRAINED))))]
        with L.set_mesh(m):
            out.append(error(lambda: L.jit(lambda a: a, in_shardings=P_(P_.UNCONSTRAINED))))
        return out
    x, j = [run(L, None, L.sharding.PartitionSpec, L.sharding.NamedSharding, None)
            for L in (xform, jax)]
    assert x == j and x[0][0] == "ValueError" and x[3] is None


def test_vmap_spmd_axis_name_splits_shard_map():
    from test_sharded_jit import _raises
    b = np.arange(128, dtype=np.float32).reshape(4, 8, 4) / 50

    def run(L, np_, m, NS, P_):
        sm = L.shard_map(lambda v: np_.sin(v) * 2 + L.lax.psum(v.sum(), "x"), mesh=m,
                         in_specs=P_("x"), out_specs=P_("x"))
        v = L.vmap(sm, spmd_axis_name="y")
        bad = L.shard_map(lambda v: v, mesh=m, in_specs=P_("y"), out_specs=P_("y"))
        with L.set_mesh(m):  # (on sharded arrays: one partitioned program, JAX's layout)
            out = [L.jit(v)(L.device_put(b, NS(m, P_(None, "x")))),
                   v(L.device_put(b, NS(m, P_("y", "x")))),
                   L.jit(L.vmap(sm, in_axes=2, out_axes=1, spmd_axis_name="y"))(
                       L.device_put(b.transpose(1, 2, 0), NS(m, P_("x"))))]
            return out, L.jit(v)(b), L.jit(L.grad(lambda a: v(a).sum()))(b), _raises(
                lambda: L.jit(L.vmap(bad, spmd_axis_name="y"))(b))
    (x, xv, xg, xe), (j, jv, jg, je) = both(run)
    _check_all(x, j)
    for a, c in ((xv, jv), (xg, jg)):  # (NumPy arguments: mesh_jit's replicated path)
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5)
    assert xe == je and xe[0] == "ValueError"


def test_kwargs_with_in_shardings_is_jax_error():
    from test_sharded_jit import _raises
    from test_sharding_arrays import JMESH, XMESH

    def call(L, m):
        s = L.sharding.NamedSharding(m, L.sharding.PartitionSpec("x"))
        return L.jit(lambda a, k=1.0: a * k, in_shardings=s)(X, k=2.0)
    x, j = _raises(lambda: call(xform, XMESH)), _raises(lambda: call(jax, JMESH))
    assert x == j and x[0] == "ValueError", (x, j)


def test_uneven_constraint_inside_jit_and_errors_outside():
    """Inside a program XLA pads uneven blocks (JAX checks the rank only); eagerly, and for
    jit's own shardings, JAX's IndivisibleError."""
    v = np.arange(10, dtype=np.float32)

    def run(L, np_, m, NS, P_):
        s = NS(m, P_("x"))
        out = [L.jit(lambda a: L.lax.with_sharding_constraint(a * 2, s) + 1)(v)]
        for call in (lambda: L.lax.with_sharding_constraint(v, s),
                     lambda: L.jit(lambda a: a, out_shardings=s)(v),
                     lambda: L.jit(lambda a: L.lax.with_sharding_constraint(
                         a, NS(m, P_("x", None))))(v)):
            try:
                call()
                out.append(None)
            except Exception as e:  # noqa: BLE001 (the error is the result compared)
                out.append((type(e).__name__, str(e).replace("jax._src", "")))
        return out
    x, j = both(run)
    _check_all(x[0], j[0])
    assert x[1:] == j[1:] and None not in x[1:]
