"""xform.optim follows optax step for step: every optimizer and composition runs 30 jitted
steps on the same small problem with both libraries, and the parameter trajectories and
final states agree. The gradient is a polynomial of the params (no transcendental ops) so
both libraries see bit-identical gradients and any difference is the optimizer's."""
import doctest
import functools
import importlib

import jax
import jax.numpy as jjnp
import numpy as np
import optax as ox
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax

STEPS = 30
RTOL, ATOL = 2e-5, 2e-6   # float32; chained rsqrt/sqrt/divisions differ by a few ulps

_rng = np.random.RandomState(0)
P0 = {"w": _rng.randn(4, 3).astype(np.float32), "b": _rng.randn(3).astype(np.float32),
      "s": np.float32(0.7)}
TARGET = {"w": _rng.randn(4, 3).astype(np.float32), "b": np.zeros(3, np.float32),
          "s": np.float32(-0.2)}


def _grad(np_mod, params, step, nan_every):
    g = {k: 2.0 * (params[k] - TARGET[k]) * (1.0 + 0.1 * params[k] * params[k])
         for k in params}
    if nan_every:
        bad = (step % nan_every) == nan_every - 1
        g["b"] = np_mod.where(bad, np_mod.full_like(g["b"], np.nan), g["b"])
    return g


def _run(lib, tx, nan_every=0, extra=None):
    jit, np_mod, apply = ((jax.jit, jjnp, ox.apply_updates) if lib == "jax"
                          else (xform.jit, jnp, optax.apply_updates))
    tree_map = jax.tree_util.tree_map if lib == "jax" else xform.tree_util.tree_map

    def step(params, state, i):
        g = _grad(np_mod, params, i, nan_every)
        kw = extra(np_mod, params) if extra else {}
        updates, state = tx.update(g, state, params, **kw)
        return apply(params, updates), state

    step = jit(step)
    params = tree_map(np_mod.asarray, P0)
    state = tx.init(params)
    traj = []
    for i in range(STEPS):
        params, state = step(params, state, np.int32(i))
        traj.append([np.asarray(x) for x in jax.tree_util.tree_leaves(dict(params))])
    leaves = [np.asarray(x) for x in (jax.tree_util.tree_leaves(state) if lib == "jax"
                                      else xform.tree_util.tree_leaves(state))]
    return traj, leaves


def _compare(make, nan_every=0, extra=None, rtol=RTOL, atol=ATOL):
    traj_x, state_x = _run("xform", make(optax), nan_every, extra)
    traj_j, state_j = _run("jax", make(ox), nan_every, extra)
    for i, (a, b) in enumerate(zip(traj_x, traj_j)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {i}")
    assert len(state_x) == len(state_j)
    for x, y in zip(state_x, state_j):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=10 * rtol, atol=10 * atol)
    # the run did move the params (a frozen optimizer would pass trivially)
    assert any(not np.allclose(a, b) for a, b in zip(traj_x[0], traj_x[-1]))


OPTIMIZERS = {
    "sgd": lambda o: o.sgd(0.05),
    "sgd_momentum": lambda o: o.sgd(0.05, momentum=0.9),
    "sgd_nesterov": lambda o: o.sgd(0.05, momentum=0.9, nesterov=True),
    "adam": lambda o: o.adam(0.05),
    "adam_eps_root": lambda o: o.adam(0.05, b1=0.8, eps_root=1e-8),
    "adamw": lambda o: o.adamw(0.05, weight_decay=0.1),
    "adamax": lambda o: o.adamax(0.05),
    "adamaxw": lambda o: o.adamaxw(0.05),
    "amsgrad": lambda o: o.amsgrad(0.05),
    "nadam": lambda o: o.nadam(0.05),
    "nadamw": lambda o: o.nadamw(0.05),
    "radam": lambda o: o.radam(0.05),
    "rmsprop": lambda o: o.rmsprop(0.01),
    "rmsprop_centered_momentum": lambda o: o.rmsprop(0.01, centered=True, momentum=0.9),
    "rmsprop_nesterov_bias": lambda o: o.rmsprop(0.01, momentum=0.5, nesterov=True,
                                                 bias_correction=True, eps_in_sqrt=False),
    "adagrad": lambda o: o.adagrad(0.1),
    "adadelta": lambda o: o.adadelta(1.0, weight_decay=0.01),
    "adafactor": lambda o: o.adafactor(0.05, min_dim_size_to_factor=2),
    "adafactor_momentum": lambda o: o.adafactor(0.05, momentum=0.9, weight_decay_rate=0.01,
                                                factored=False),
    "lamb": lambda o: o.lamb(0.05, weight_decay=0.01),
    "lars": lambda o: o.lars(0.5, weight_decay=0.01),
    "lion": lambda o: o.lion(0.01),
    "adabelief": lambda o: o.adabelief(0.05),
    "novograd": lambda o: o.novograd(0.05, weight_decay=0.01),
    "yogi": lambda o: o.yogi(0.05),
    # optax's sm3 fails on 0-d params: mask the scalar out
    "sm3": lambda o: o.masked(o.sm3(0.05), {"w": True, "b": True, "s": False}),
    "signum": lambda o: o.signum(0.01),
    "fromage": lambda o: o.fromage(0.05),
    "fromage_schedule": lambda o: o.fromage(o.linear_schedule(0.05, 0.01, 20)),
    "adan": lambda o: o.adan(0.05, weight_decay=0.01),
    "rprop": lambda o: o.rprop(0.05),
    "optimistic_gd": lambda o: o.optimistic_gradient_descent(0.05, alpha=0.7, beta=0.3),
    "adam_mu_bfloat16": lambda o: o.adam(0.05, mu_dtype="bfloat16"),
    "sgd_accumulator_bfloat16": lambda o: o.sgd(0.05, momentum=0.9,
                                                accumulator_dtype="bfloat16"),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_optax(name):
    _compare(OPTIMIZERS[name])


def _sched(o):
    return o.warmup_cosine_decay_schedule(0.0, 0.1, 5, 30, end_value=0.01)


COMPOSITIONS = {
    "chain_clip_global_norm_adam": lambda o: o.chain(o.clip_by_global_norm(1.0), o.adam(0.05)),
    "chain_clip_block_rms_trace": lambda o: o.chain(o.clip(0.5), o.clip_by_block_rms(0.3),
                                                   o.trace(0.9), o.scale(-0.1)),
    "named_chain": lambda o: o.named_chain(("scale", o.scale_by_adam()),
                                           ("ema", o.ema(0.9, debias=True)),
                                           ("lr", o.scale_by_learning_rate(0.05))),
    "adam_schedule": lambda o: o.adam(_sched(o)),
    "adamw_schedule_decay": lambda o: o.adamw(_sched(o), weight_decay=o.linear_schedule(
        0.1, 0.0, 20)),
    "masked_weight_decay": lambda o: o.adamw(0.05, weight_decay=0.5,
                                             mask={"w": True, "b": False, "s": True}),
    "masked_callable": lambda o: o.chain(o.masked(o.sgd(0.1, momentum=0.9),
                                                  lambda p: {k: k != "b" for k in p}),
                                         o.masked(o.scale(0.5), {"w": False, "b": True,
                                                                 "s": False})),
    "multi_transform": lambda o: o.multi_transform(
        {"adam": o.adam(0.05), "sgd": o.sgd(0.1), "frozen": o.set_to_zero()},
        {"w": "adam", "b": "sgd", "s": "frozen"}),
    "multi_steps": lambda o: o.MultiSteps(o.adam(0.05), every_k_schedule=3),
    "multi_steps_schedule": lambda o: o.MultiSteps(o.adamw(0.05),
                                                   lambda step: 1 + (step >= 3) * 2),
    "conditionally_mask": lambda o: o.conditionally_mask(o.adam(0.05), lambda s: s % 3 != 1),
    "conditionally_transform": lambda o: o.chain(o.conditionally_transform(
        o.clip_by_global_norm(0.5), lambda s: s >= 10), o.sgd(0.05)),
    "apply_every": lambda o: o.chain(o.apply_every(3), o.sgd(0.05)),
    "partition_callable": lambda o: o.partition(
        {"a": o.lamb(0.05), "b": o.rmsprop(0.01)},
        lambda p: {k: "a" if k == "w" else "b" for k in p}),
    "multi_steps_sum": lambda o: o.MultiSteps(o.sgd(0.05, momentum=0.5), 2,
                                              use_grad_mean=False).gradient_transformation(),
    "inject_hyperparams": lambda o: o.inject_hyperparams(o.adamw)(
        learning_rate=_sched(o), b1=0.85, weight_decay=0.01),
    "inject_static": lambda o: o.inject_hyperparams(o.sgd, static_args="nesterov")(
        0.05, momentum=0.9, nesterov=True),
    "scale_by_schedule": lambda o: o.chain(o.scale_by_stddev(), o.scale_by_schedule(
        o.exponential_decay(-0.05, 5, 0.7, staircase=True))),
    "trust_ratio": lambda o: o.chain(o.scale_by_rms(), o.scale_by_trust_ratio(),
                                     o.scale(-0.05)),
    "lion_smooth": lambda o: o.chain(o.scale_by_lion(mode="smooth"), o.scale(-0.05)),
    "param_block": lambda o: o.chain(o.scale_by_param_block_norm(), o.scale(-0.01)),
    "centralize": lambda o: o.chain(o.centralize(), o.keep_params_nonnegative(),
                                    o.scale(-0.1)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_composition_matches_optax(name):
    _compare(COMPOSITIONS[name])


NONFINITE = {
    "apply_if_finite": lambda o: o.apply_if_finite(o.adam(0.05), max_consecutive_errors=2),
    "zero_nans": lambda o: o.chain(o.zero_nans(), o.adam(0.05)),
    "multi_steps_skip": lambda o: o.MultiSteps(o.sgd(0.05), 2,
                                               should_skip_update_fn=o.skip_not_finite),
    "multi_steps_skip_large": lambda o: o.MultiSteps(
        o.adam(0.05), 2, should_skip_update_fn=functools.partial(o.skip_large_updates,
                                                                 max_squared_norm=1e4)),
}


def _loss_value(np_mod, params):
    return {"value": sum(np_mod.sum((params[k] - TARGET[k]) ** 2) for k in sorted(params))}


@pytest.mark.parametrize("variant", ["sps", "sps+"])
def test_polyak_sgd_with_value_matches_optax(variant):
    _compare(lambda o: o.polyak_sgd(max_learning_rate=0.2, f_min=0.5, variant=variant),
             extra=_loss_value)


@pytest.mark.parametrize("name", sorted(NONFINITE))
def test_nonfinite_handling_matches_optax(name):
    _compare(NONFINITE[name], nan_every=4)


@pytest.mark.parametrize("name", ["adamw", "lion", "adafactor", "inject_hyperparams"])
def test_low_precision_params_match_optax(name, monkeypatch):
    make = {**OPTIMIZERS, **COMPOSITIONS}[name]
    for k in P0:   # bfloat16 params (and gradients); hyperparameters follow their dtype
        monkeypatch.setitem(P0, k, np.asarray(P0[k]).astype(jnp.bfloat16))
    _compare(make, rtol=2e-2, atol=2e-2)


def test_inject_hyperparams_keeps_dtype_arguments_static():
    tx = optax.inject_hyperparams(optax.adam)(0.1, mu_dtype=jnp.bfloat16)
    s = tx.init({"w": jnp.ones(2)})
    assert sorted(s.hyperparams) == ["b1", "b2", "eps", "eps_root", "learning_rate"]
    assert s.inner_state[0].mu["w"].dtype == jnp.bfloat16


@pytest.mark.parametrize("name", ["adafactor", "sm3", "lamb"])
def test_higher_rank_params_match_optax(name, monkeypatch):
    r = np.random.RandomState(2)
    monkeypatch.setitem(P0, "w", r.randn(3, 4, 5).astype(np.float32))
    monkeypatch.setitem(TARGET, "w", r.randn(3, 4, 5).astype(np.float32))
    _compare(OPTIMIZERS[name])


def test_extra_args_reach_the_members_that_take_them():
    seen = []

    def update(updates, state, params=None, *, value, **extra):
        seen.append(value)
        return xform.tree_util.tree_map(lambda g: g * value, updates), state
    scale_by_value = optax.GradientTransformationExtraArgs(optax.init_empty_state, update)
    tx = optax.chain(optax.sgd(1.0), scale_by_value, optax.clip(10.0))
    u, _ = xform.jit(lambda g, s, v: tx.update(g, s, value=v))(jnp.ones(2), tx.init(
        jnp.ones(2)), 3.0)
    np.testing.assert_allclose(u, [-3.0, -3.0])
    assert len(seen) == 1
    ms = optax.MultiSteps(tx, 1)
    u, _ = ms.update(jnp.ones(2), ms.init(jnp.ones(2)), value=jnp.float32(2.0))
    np.testing.assert_allclose(u, [-2.0, -2.0])


def test_apply_if_finite_gives_up_after_max_errors():
    tx = optax.apply_if_finite(optax.sgd(1.0), max_consecutive_errors=2)
    p = jnp.zeros(1)
    s = tx.init(p)
    outs = []
    for _ in range(3):
        u, s = tx.update(jnp.array([np.inf]), s, p)
        outs.append(float(u[0]))
    assert outs[:2] == [0.0, 0.0] and outs[2] == -np.inf
    assert int(s.total_notfinite) == 3 and not bool(s.last_finite)


def test_inject_hyperparams_state_can_be_changed():
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
    p = jnp.ones(2)
    s = tx.init(p)
    s.hyperparams["learning_rate"] = jnp.asarray(0.5)
    u, s = xform.jit(tx.update)(jnp.ones(2), s, p)
    np.testing.assert_allclose(u, [-0.5, -0.5])
    assert float(s.hyperparams["learning_rate"]) == 0.5 and int(s.count) == 1


def test_states_are_pytrees_under_vmap():
    tx = optax.adam(0.1)
    ps = jnp.stack([jnp.ones(3), 2 * jnp.ones(3)])
    states = xform.vmap(tx.init)(ps)
    assert states[0].mu.shape == (2, 3) and states[0].count.shape == (2,)
    u, _ = xform.vmap(tx.update)(ps, states, ps)
    u0, _ = tx.update(ps[1], tx.init(ps[1]), ps[1])
    np.testing.assert_allclose(u[1], u0, rtol=1e-6)


def test_vmap_over_injected_learning_rates():
    tx = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    p = jnp.ones(3)

    def run(lr):
        s = tx.init(p)
        s.hyperparams["learning_rate"] = lr
        u, _ = tx.update(p, s, p)
        return u
    lrs = jnp.array([0.1, 0.2, 0.3])
    out = xform.jit(xform.vmap(run))(lrs)
    np.testing.assert_allclose(out, -np.asarray(lrs)[:, None] * np.ones((3, 3)), rtol=1e-5)


def test_global_norm_and_helpers():
    tree = {"a": jnp.array([3.0]), "b": [jnp.array([[4.0]])]}
    np.testing.assert_allclose(optax.global_norm(tree), 5.0)
    assert optax.tree_utils.tree_norm(tree, ord=1) == 7.0
    assert optax.tree_utils.tree_norm(tree, ord="inf") == 4.0
    assert int(optax.safe_increment(jnp.array(2 ** 31 - 1, jnp.int32))) == 2 ** 31 - 1
    p = optax.apply_updates({"x": jnp.ones(2, jnp.bfloat16)}, {"x": jnp.ones(2)})
    assert p["x"].dtype == jnp.bfloat16
    assert optax.apply_updates({"x": None}, {"x": None}) == {"x": None}


def test_errors_are_clear():
    with pytest.raises(ValueError, match="not passing `params`"):
        optax.adamw(0.1).update(jnp.ones(1), optax.adamw(0.1).init(jnp.ones(1)))
    with pytest.raises(ValueError, match="unique names"):
        optax.named_chain(("a", optax.scale(1.)), ("a", optax.scale(2.)))
    with pytest.raises(TypeError, match="chain argument 1 must be a GradientTransformation"):
        optax.chain(optax.scale(1.), 0.1)
    with pytest.raises(ValueError, match="tuple of 2 states"):
        optax.chain(optax.scale(1.), optax.scale(1.)).update(jnp.ones(1), optax.EmptyState())
    with pytest.raises(ValueError, match="Some parameters have no corresponding"):
        optax.multi_transform({"a": optax.sgd(1.)}, {"w": "a", "b": "c"}).init(
            {"w": jnp.ones(1), "b": jnp.ones(1)})
    with pytest.raises(ValueError, match="Unknown lion mode"):
        optax.scale_by_lion(mode="soft")
    with pytest.raises(ValueError, match="static_args"):
        optax.inject_hyperparams(optax.sgd, static_args="nope")
    with pytest.raises(ValueError, match="positive decay_steps"):
        optax.cosine_decay_schedule(1.0, 0)
    with pytest.raises(ValueError, match="every_k_schedule must be >= 1"):
        optax.MultiSteps(optax.sgd(1.), 0)


def test_doctests():
    for name in ["xform.optim", "xform.optim._base", "xform.optim._basic",
                 "xform.optim._scaling", "xform.optim._wrappers", "xform.optim._alias",
                 "xform.optim._more",
                 "xform.optim.schedules", "xform.optim._losses", "xform.optim.loss_scale",
                 "xform.optim.tree_utils"]:
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, name
        assert result.attempted > 0, name
