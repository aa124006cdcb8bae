"""``import xform.optim as optax`` covers Optax 0.2.8's public surface: every name exists,
the transformations beyond the classic optimizers (clipping, monitoring, lookahead, DoG,
flattening, freezing ...) follow optax step for step, and the utilities (tree_utils,
linear algebra, assignment, microbatching, experimental.aggregating) give optax's values."""
import doctest
import importlib
import inspect
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import optax as ox
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax

_SUBMODULES = ["transforms", "losses", "schedules", "tree_utils", "tree", "projections",
               "second_order", "assignment", "perturbations", "microbatching", "experimental",
               "experimental.aggregating"]


def _public(mod):
    # dir() minus private names and the modules a file merely imports (typing, jax, optax's
    # internals): a module counts only as a child of `mod` (optax.losses, ...).
    def is_child_or_not_module(v):
        return not inspect.ismodule(v) or v.__name__.rsplit(".", 1)[0] == mod.__name__
    return {n for n in dir(mod) if not n.startswith("_")
            and is_child_or_not_module(getattr(mod, n))}


def test_every_optax_name_exists():
    with warnings.catch_warnings():   # the deprecated aliases warn, as in optax
        warnings.simplefilter("ignore", DeprecationWarning)
        missing = {n for n in set(ox.__all__) | _public(ox) if not hasattr(optax, n)}
    for sub in _SUBMODULES:
        ref = importlib.import_module("optax." + sub) if sub != "experimental.aggregating" \
            else ox.experimental.aggregating
        ours = optax
        for part in sub.split("."):
            ours = getattr(ours, part)
        missing |= {f"{sub}.{n}" for n in _public(ref) if not hasattr(ours, n)}
    assert not missing, sorted(missing)
    assert not missing, f"still missing (added on other branches): {sorted(missing)}"
    with pytest.raises(AttributeError, match="monte_carlo is deprecated"):
        optax.monte_carlo   # removed in optax 0.2.7: not in 0.2.8 either


STEPS = 30
RTOL, ATOL = 2e-5, 2e-6
_rng = np.random.RandomState(1)
P0 = {"w": _rng.randn(4, 3).astype(np.float32), "b": _rng.randn(3).astype(np.float32),
      "s": np.float32(0.7)}
TARGET = {"w": _rng.randn(4, 3).astype(np.float32), "b": np.zeros(3, np.float32),
          "s": np.float32(-0.2)}


def _grad(params):
    # a polynomial: bit-identical in both libraries
    return {k: 2.0 * (params[k] - TARGET[k]) * (1.0 + 0.1 * params[k] * params[k])
            for k in params}


def _run(o, make, lookahead):
    lib_jax = o is ox
    jit, np_mod = (jax.jit, jjnp) if lib_jax else (xform.jit, jnp)
    tree_map = jax.tree_util.tree_map if lib_jax else xform.tree_util.tree_map
    leaves = jax.tree_util.tree_leaves if lib_jax else xform.tree_util.tree_leaves
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tx = make(o)

    def step(params, state):
        g = _grad(params.fast if lookahead else params)
        updates, state = tx.update(g, state, params)
        return o.apply_updates(params, updates), state

    params = tree_map(np_mod.asarray, P0)
    if lookahead:
        params = o.LookaheadParams.init_synced(params)
    state, step, traj = tx.init(params), jit(step), []
    for _ in range(STEPS):
        params, state = step(params, state)
        traj.append([np.asarray(x) for x in leaves(params)])
    return traj, [np.asarray(x) for x in leaves(state)]


TRANSFORMS = {   # name: (factory of either library, params are LookaheadParams)
    "adaptive_grad_clip": (lambda o: o.chain(o.adaptive_grad_clip(0.05), o.sgd(0.1)), False),
    "adaptive_grad_clip_axis": (lambda o: o.chain(o.masked(
        o.adaptive_grad_clip(0.1, axis=0), {"w": True, "b": True, "s": False}),
        o.sgd(0.1)), False),
    "flatten_adam": (lambda o: o.flatten(o.adam(0.05)), False),
    "monitor_measure_with_ema": (lambda o: o.chain(
        o.sgd(0.05, momentum=0.9),
        o.monitor({"norm": o.tree.norm,
                   "clipped": o.measure_with_ema(lambda u: o.tree.norm(u) > 0.5, 0.9)}),
        o.clip_by_global_norm(0.5)), False),
    "snapshot": (lambda o: o.chain(o.adam(0.05), o.snapshot("n", o.tree.norm)), False),
    "freeze": (lambda o: o.chain(o.freeze({"w": True, "b": False, "s": False}),
                                 o.sgd(0.05)), False),
    "selective_transform": (lambda o: o.selective_transform(
        o.adam(0.05), freeze_mask={"w": False, "b": True, "s": False}), False),
    "distance_over_gradients": (lambda o: o.scale_by_distance_over_gradients(
        reps_rel=1e-3, global_scale=-1.0), False),
    "normalize_by_update_norm": (lambda o: o.normalize_by_update_norm(-0.05), False),
    "optimistic_adam": (lambda o: o.optimistic_adam(0.05), False),
    "optimistic_adam_v2": (lambda o: o.optimistic_adam_v2(0.05, alpha=0.7, beta=0.3), False),
    "lookahead": (lambda o: o.lookahead(o.adam(0.05), sync_period=4, slow_step_size=0.5),
                  True),
    "lookahead_reset": (lambda o: o.lookahead(o.sgd(0.05, momentum=0.9), 3, 0.3,
                                              reset_state=True), True),
    "aggregating_accumulate": (lambda o: o.chain(
        o.experimental.aggregating.accumulate_avg_updates(3), o.sgd(0.1)), False),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transformation_matches_optax(name):
    make, lookahead = TRANSFORMS[name]
    traj_x, state_x = _run(optax, make, lookahead)
    traj_j, state_j = _run(ox, make, lookahead)
    for i, (a, b) in enumerate(zip(traj_x, traj_j)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL, err_msg=f"step {i}")
    assert len(state_x) == len(state_j)
    for x, y in zip(state_x, state_j):
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_allclose(x, y, rtol=10 * RTOL, atol=10 * ATOL)
    assert any(not np.allclose(a, b) for a, b in zip(traj_x[0], traj_x[-1]))


def _close(x, y, rtol=1e-5, atol=1e-6):
    lx, ly = xform.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)
    assert len(lx) == len(ly)
    for a, b in zip(lx, ly):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def test_per_example_clipping_and_unitwise():
    g = [np.arange(12.0, dtype=np.float32).reshape(4, 3) - 5,
         np.ones((4, 2), np.float32)]
    for clip in (0.0, 1.25, 10.0, np.inf):
        _close(optax.per_example_global_norm_clip([jnp.asarray(x) for x in g], clip),
               ox.per_example_global_norm_clip([jjnp.asarray(x) for x in g], clip))
        for uniform in (True, False):
            _close(optax.per_example_layer_norm_clip(g, clip, uniform),
                   ox.per_example_layer_norm_clip(g, clip, uniform))
    for shape in [(3,), (3, 4), (2, 2, 2, 3)]:
        x = np.random.RandomState(0).randn(*shape).astype(np.float32)
        _close(optax.transforms.unitwise_norm(x), ox.transforms.unitwise_norm(x))
    with pytest.raises(ValueError, match="batch dimension"):
        optax.per_example_global_norm_clip([jnp.ones((2, 1)), jnp.ones((3, 1))], 1.0)


def test_tree_utils_match_optax():
    p = {"a": np.array([1.0, -4.0], np.float32), "b": (np.float32(2.0), np.zeros((0,)))}
    for name in ["tree_max", "tree_min", "tree_size", "tree_real", "tree_conj"]:
        _close(getattr(optax.tree_utils, name)(p), getattr(ox.tree_utils, name)(p))
    _close(optax.tree.clip(p, -1.0, 1.5), ox.tree.clip(p, -1.0, 1.5))
    _close(optax.tree.batch_shape(p, (2,)), ox.tree.batch_shape(p, (2,)))
    assert bool(optax.tree.allclose(p, p)) and not bool(optax.tree.allclose(p, {
        "a": p["a"] + 1, "b": p["b"]}))
    mixed = {"a": np.ones(1, np.float32), "b": jnp.ones(1, jnp.bfloat16)}
    for h in ("promote", "highest", "lowest"):
        assert optax.tree.dtype(mixed, h) == ox.tree.dtype(
            {"a": mixed["a"], "b": jjnp.ones(1, jjnp.bfloat16)}, h)
    with pytest.raises(ValueError, match="Expected dtype"):
        optax.tree.dtype(mixed)
    _close(optax.tree.random_like(xform.random.key(3), p["a"]),
           ox.tree.random_like(jax.random.key(3), p["a"]))
    # state utilities, on a nested optimizer state
    params = {"w": jnp.ones((2, 2)), "b": jnp.zeros(2)}
    def make(o):
        return o.chain(o.add_decayed_weights(0.1), o.inject_hyperparams(o.adam)(0.1))
    sx, sj = make(optax).init(params), make(ox).init(jax.tree_util.tree_map(jjnp.asarray,
                                                                            params))
    for key in ("count", "learning_rate", "mu", "ScaleByAdamState"):
        px = optax.tree.get_all_with_path(sx, key)
        pj = ox.tree.get_all_with_path(sj, key)
        assert [str(e) for p, _ in px for e in p] == [str(e) for p, _ in pj for e in p]
        _close([v for _, v in px], [v for _, v in pj])
    with pytest.raises(KeyError, match="multiple values"):
        optax.tree.get(sx, "count")
    assert optax.tree.get(sx, "nothing", default=7) == 7
    set_x = optax.tree.set(sx, learning_rate=jnp.asarray(0.5))
    set_j = ox.tree.set(sj, learning_rate=jjnp.asarray(0.5))
    _close(set_x, set_j)
    with pytest.raises(KeyError, match="Found no values"):
        optax.tree.set(sx, nothing=1)
    _close(optax.tree.map_params(make(optax), lambda v: v + 1, sx),
           ox.tree.map_params(make(ox), lambda v: v + 1, sj))


def test_linear_algebra_matches_optax():
    rng = np.random.RandomState(0)
    a = rng.randn(4, 4).astype(np.float32)
    psd = a @ a.T + np.eye(4, dtype=np.float32)
    b = rng.randn(4, 2).astype(np.float32)

    def run(o, jit):   # one program per library: these are loops, slow to run op by op
        return jit(lambda psd, a, b: (
            o.power_iteration(psd, num_iters=50), o.matrix_inverse_pth_root(psd, 2),
            o.matrix_inverse_pth_root(psd, 4), o.nnls(a, b, iters=20)))(psd, a, b)
    _close(run(optax, xform.jit), run(ox, jax.jit), rtol=1e-4, atol=1e-5)
    d = optax.multi_normal(jnp.array([0.5, -1.0]), jnp.array([0.1, -0.3]))
    dj = ox.multi_normal(jjnp.array([0.5, -1.0]), jjnp.array([0.1, -0.3]))
    _close(d.log_prob(jnp.array([[0.2, 0.3]])), dj.log_prob(jjnp.array([[0.2, 0.3]])))
    _close(d.sample((3,), xform.random.key(0)), dj.sample((3,), jax.random.key(0)))
    for s in (0.0, 0.5, 1.0):
        gx = xform.grad(lambda x: jnp.sum(optax.scale_gradient(x, s) ** 2))(jnp.ones(2))
        gj = jax.grad(lambda x: jjnp.sum(ox.scale_gradient(x, s) ** 2))(jjnp.ones(2))
        _close(gx, gj)


def test_assignment_matches_optax():
    rng = np.random.RandomState(0)
    for shape in [(4, 4), (5, 3), (0, 2)]:   # square; rectangular, transposed inside
        c = rng.randn(*shape).astype(np.float32)
        for name in ("hungarian_algorithm", "base_hungarian_algorithm"):
            rx, cx = xform.jit(getattr(optax.assignment, name))(jnp.asarray(c))
            rj, cj = jax.jit(getattr(ox.assignment, name))(jjnp.asarray(c))
            np.testing.assert_array_equal(np.asarray(rx), np.asarray(rj))
            np.testing.assert_array_equal(np.asarray(cx), np.asarray(cj))


def test_microbatching_matches_optax():
    mb, mbj = optax.microbatching, ox.microbatching
    data = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    fun = lambda x, y: (x * 2 + y, jnp.sum(x * y), jnp.mean(x))  # noqa: E731
    funj = lambda x, y: (x * 2 + y, jjnp.sum(x * y), jjnp.mean(x))  # noqa: E731
    acc = (mb.AccumulationType.CONCAT, mb.AccumulationType.SUM, mb.AccumulationType.MEAN)
    accj = (mbj.AccumulationType.CONCAT, mbj.AccumulationType.SUM, mbj.AccumulationType.MEAN)
    _close(optax.microbatch(fun, (0, 1), 2, acc)(data, data + 1),
           ox.microbatch(funj, (0, 1), 2, accj)(data, data + 1))
    _close(mb.micro_vmap(lambda x: x ** 2, microbatch_size=2,
                         accumulator=mb.AccumulationType.RUNNING_MEAN)(data),
           mbj.micro_vmap(lambda x: x ** 2, microbatch_size=2,
                          accumulator=mbj.AccumulationType.RUNNING_MEAN)(data))

    def loss(np_mod):
        return lambda p, x, y: 0.5 * np_mod.mean((x @ p - y) ** 2)
    x, y = np.ones((4, 1), np.float32), np.array([0.0, 2.0, 4.0, 6.0], np.float32)
    kw = dict(batch_argnums=(1, 2), microbatch_size=2, transform_fn=lambda g: (g, g ** 2))
    _close(mb.micro_grad(loss(jnp), accumulator=mb.AccumulationType.MEAN, **kw)(
        jnp.zeros(1), x, y),
        mbj.micro_grad(loss(jjnp), accumulator=mbj.AccumulationType.MEAN, **kw)(
        jjnp.zeros(1), x, y))
    with pytest.raises(ValueError, match="divisible"):
        optax.microbatch(fun, (0, 1), 3)(data, data)


def test_aggregating_matches_optax():
    rng = np.random.RandomState(0)
    grads = [rng.randn(4, 3).astype(np.float32) for _ in range(4)]

    def run(o, np_mod):
        agg = o.experimental.aggregating
        tx = agg.add_mean_variance_to_opt(o.sgd(0.1), per_elt_axis=0, accumulation_steps=2)
        params, state, out = np_mod.zeros(3), None, []
        state = tx.init(params)
        for g in grads:
            u, state = tx.update(np_mod.asarray(g), state, params)
            params = o.apply_updates(params, u)
            out.append(params)
        return out, agg.get_unbiased_mean_and_variance_ema(state)
    _close(run(optax, jnp), run(ox, jjnp))


@pytest.mark.parametrize("module", [
    "xform.optim._transforms_more", "xform.optim._linalg", "xform.optim._tree_state",
    "xform.optim.tree", "xform.optim.assignment", "xform.optim.microbatching",
    "xform.optim._alias_more", "xform.optim._aggregating"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, module
