"""xform.optim.contrib follows optax.contrib step for step: each contributed optimizer runs
30 jitted steps on the same small problem in both libraries and the updates, params and
final states agree leaf by leaf. The gradient is a polynomial of the params, so both
libraries see the same gradients and any difference is the optimizer's."""
import inspect

import jax
import jax.numpy as jjnp
import numpy as np
import optax as ox
import optax.contrib  # noqa: F401
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax

STEPS = 30
_rng = np.random.RandomState(0)
P0 = {"w": _rng.randn(3, 4).astype(np.float32), "b": _rng.randn(4).astype(np.float32),
      "k": _rng.randn(2, 3, 2).astype(np.float32)}
TARGET = {"w": _rng.randn(3, 4).astype(np.float32), "b": np.zeros(4, np.float32),
          "k": np.zeros((2, 3, 2), np.float32)}


def _grad(params):
    return {k: 2.0 * (params[k] - TARGET[k]) * (1.0 + 0.1 * params[k] * params[k])
            for k in params}


def _loss(np_mod, params):
    return sum(np_mod.sum((params[k] - TARGET[k]) ** 2) for k in params)


def _run(lib, tx, extra):
    is_jax = lib == "jax"
    jit, np_mod, apply = ((jax.jit, jjnp, ox.apply_updates) if is_jax
                          else (xform.jit, jnp, optax.apply_updates))
    tu = jax.tree_util if is_jax else xform.tree_util

    def step(params, state):
        kw = extra(lib, np_mod, params) if extra else {}
        updates, state = tx.update(_grad(params), state, params, **kw)
        return apply(params, updates), state, updates

    step = jit(step)
    params = tu.tree_map(np_mod.asarray, P0)
    state = tx.init(params)
    traj = []
    for _ in range(STEPS):
        params, state, updates = step(params, state)
        traj.append([np.asarray(x) for x in tu.tree_leaves((params, updates))])
    key_data = jax.random.key_data if is_jax else xform.random.key_data
    leaves = [np.asarray(key_data(x) if "key" in str(x.dtype) else x)
              for x in tu.tree_leaves(state)]
    return traj, leaves, tu.tree_structure(state)


def _extra(kind):
    if kind is None:
        return None
    if kind == "value":
        return lambda lib, np_mod, params: {"value": _loss(np_mod, params)}
    if kind == "obj_fn":
        return lambda lib, np_mod, params: {"obj_fn": lambda p: _loss(np_mod, p)}
    assert kind == "grad_fn"
    return lambda lib, np_mod, params: {"grad_fn": lambda p, i: _grad(p)}


# name -> (factory(contrib, optax), extra kwargs for update, rtol)
CASES = {
    "muon": (lambda c, o: c.muon(0.05), None, 2e-5),
    "muon_dion_aol": (lambda c, o: c.muon(0.05, ns_coeffs="dion", nesterov=False,
                                          preconditioning="aol", weight_decay=0.1), None, 2e-5),
    "muon_3d_schatten": (lambda c, o: c.muon(
        0.05, preconditioning="schatten", adaptive=True, consistent_rms=0.2,
        muon_weight_dimension_numbers=lambda p: {
            "w": c.MuonDimensionNumbers(), "b": None,
            "k": c.MuonDimensionNumbers(reduction_axis=0, output_axis=(2,))}), None, 2e-5),
    "muon_spectral": (lambda c, o: c.muon(0.05, preconditioning="spectral", ns_steps=3),
                      None, 2e-5),
    "sam": (lambda c, o: c.sam(o.sgd(0.05), o.chain(c.normalize(), o.sgd(0.05)),
                               sync_period=3), None, 1e-6),
    "sam_opaque": (lambda c, o: c.sam(o.adam(0.05), o.chain(c.normalize(), o.sgd(0.05)),
                                      opaque_mode=True, reset_state=False), "grad_fn", 1e-6),
    "ademamix": (lambda c, o: c.ademamix(0.05, b3=o.linear_schedule(0.9, 0.999, 20),
                                         weight_decay=0.1), None, 1e-6),
    "simplified_ademamix": (lambda c, o: c.simplified_ademamix(0.01, alpha=2.0), None, 1e-6),
    "prodigy": (lambda c, o: c.prodigy(o.linear_schedule(1.0, 0.0, 40), weight_decay=0.01,
                                       safeguard_warmup=True), None, 2e-5),
    "dadapt_adamw": (lambda c, o: c.dadapt_adamw(weight_decay=0.01), None, 2e-5),
    "schedule_free_adamw": (lambda c, o: c.schedule_free_adamw(0.05, warmup_steps=5,
                                                               weight_decay=0.01), None, 1e-6),
    "schedule_free_sgd": (lambda c, o: c.schedule_free_sgd(0.05, weight_decay=0.01), None,
                          1e-6),
    "mechanize": (lambda c, o: c.mechanize(o.adam(1.0)), None, 2e-5),
    "cocob": (lambda c, o: c.cocob(weight_decay=0.01), None, 1e-6),
    "dog": (lambda c, o: c.dog(weight_decay=0.01), None, 1e-6),
    "dowg": (lambda c, o: c.dowg(), None, 1e-6),
    "reduce_on_plateau": (lambda c, o: o.chain(o.sgd(0.02), c.reduce_on_plateau(
        factor=0.5, patience=2, rtol=0.2, cooldown=1, accumulation_size=2)), "value", 1e-6),
    "momo": (lambda c, o: c.momo(0.5, lower_bound=-1.0, weight_decay=0.01,
                                 adapt_lower_bound=True), "value", 1e-6),
    "momo_adam": (lambda c, o: c.momo_adam(0.05, lower_bound=-1.0, weight_decay=0.01,
                                           adapt_lower_bound=True), "value", 1e-6),
    "acprop": (lambda c, o: c.acprop(0.02, weight_decay=0.01), None, 1e-6),
    "adopt": (lambda c, o: c.adopt(0.02, nesterov=True), None, 1e-6),
    "madgrad": (lambda c, o: c.madgrad(0.02, weight_decay=0.01), None, 1e-6),
    "dpsgd": (lambda c, o: o.chain(_per_example(o), c.dpsgd(
        0.05, l2_norm_clip=1.0, noise_multiplier=0.1, seed=3, momentum=0.9)), None, 1e-6),
    "sophia": (lambda c, o: c.sophia(0.05, update_interval=3), "obj_fn", 1e-6),
    "galore": (lambda c, o: c.galore(0.05, rank=2, update_proj_gap=10, weight_decay=0.01),
               None, 2e-5),
    "galore_3d": (lambda c, o: c.galore(
        0.05, rank=1, update_proj_gap=7, base_optimizer=o.scale_by_lion(),
        weight_dimension_numbers={"w": c.GaLoreDimensionNumbers(1, 0), "b": None,
                                  "k": c.GaLoreDimensionNumbers((0, 2), 1)}), None, 2e-5),
}


def _per_example(o):
    # three per-example gradients (batch on axis 0) made from the one gradient
    np_mod = jjnp if o is ox else jnp
    return o.stateless(lambda u, p: {k: np_mod.stack([g, -2.0 * g, 0.1 * g])
                                     for k, g in u.items()})


@pytest.mark.filterwarnings("ignore:\"seed\" is deprecated")  # dpsgd takes a seed
@pytest.mark.parametrize("name", list(CASES))
def test_step_exact_vs_optax(name):
    make, extra, rtol = CASES[name]
    extra = _extra(extra)
    traj_x, state_x, tree_x = _run("xform", make(optax.contrib, optax), extra)
    traj_j, state_j, tree_j = _run("jax", make(ox.contrib, ox), extra)
    atol = rtol / 10
    for i, (a, b) in enumerate(zip(traj_x, traj_j)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {i}")
    assert tree_x.num_leaves == tree_j.num_leaves == len(state_x)
    for x, y in zip(state_x, state_j):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=10 * rtol, atol=10 * atol)
    assert any(not np.allclose(a, b) for a, b in zip(traj_x[0], traj_x[-1]))


def _simple(v):
    return v is inspect.Parameter.empty or type(v) in (int, float, str, tuple, bool, type(None))


def test_every_optax_contrib_name_exists():
    # same public names, same signatures (names, kinds, plain defaults), same state fields
    public = [n for n in dir(ox.contrib) if not n.startswith("_")]
    missing = [n for n in public if not hasattr(optax.contrib, n)]
    assert not missing, f"xform.optim.contrib lacks {missing}"
    for n in public:
        ours, theirs = getattr(optax.contrib, n), getattr(ox.contrib, n)
        if hasattr(theirs, "_fields"):
            assert ours._fields == theirs._fields, n
        elif callable(theirs):
            ps, qs = (inspect.signature(f).parameters.values() for f in (ours, theirs))
            assert [(p.name, p.kind) for p in ps] == [(q.name, q.kind) for q in qs], n
            for p, q in zip(ps, qs):
                if _simple(q.default):
                    assert p.default == q.default, (n, p.name)


def test_split_real_and_imaginary_complex_params():
    # complex leaves go to the inner optimizer as (real, imag) pairs; real ones pass through
    p0 = {"z": np.array([1 + 2j, -0.5j], np.complex64), "r": np.array([0.3], np.float32)}

    def run(c, o, np_mod, jit, tu):
        tx = c.split_real_and_imaginary(o.adam(0.1))

        @jit
        def step(p, s):
            g = tu.tree_map(lambda x: np_mod.conj(x) * (1 + x * np_mod.conj(x)), p)
            u, s = tx.update(g, s, p)
            return o.apply_updates(p, u), s
        p = tu.tree_map(np_mod.asarray, p0)
        s = tx.init(p)
        for _ in range(3):
            p, s = step(p, s)
        return [np.asarray(x) for x in tu.tree_leaves((p, s))]

    got = run(optax.contrib, optax, jnp, xform.jit, xform.tree_util)
    want = run(ox.contrib, ox, jjnp, jax.jit, jax.tree_util)
    assert len(got) == len(want)
    for x, y in zip(got, want):
        assert x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
    assert got[1].dtype == np.complex64 and not np.allclose(got[1], p0["z"])


def _error(fn):
    with pytest.raises((ValueError, TypeError)) as e:
        fn()
    return e.type, str(e.value)


@pytest.mark.filterwarnings("ignore:\"seed\" is deprecated")
def test_errors_match_optax():
    p = {"w": np.ones((2, 2), np.float32)}
    cases = [
        lambda c, o: c.sam(o.sgd(1.0), o.sgd(1.0), sync_period=0),
        lambda c, o: c.muon(0.1, ns_coeffs="nope"),
        lambda c, o: c.scale_by_muon(ns_coeffs=(1.0, 2.0)).init(p),
        lambda c, o: c.scale_by_muon(ns_coeffs=((1.0, 2.0, 3.0),) * 6).init(p),
        lambda c, o: c.reduce_on_plateau(factor=1.5),
        lambda c, o: c.reduce_on_plateau(rtol=0.0, atol=0.0),
        lambda c, o: c.reduce_on_plateau(rtol=-1.0),
        lambda c, o: c.reduce_on_plateau(rtol=2.0),
        lambda c, o: c.galore(0.1, rank=0),
        lambda c, o: c.galore(0.1, rank=2.0),
        lambda c, o: c.dog(init_step=("nope", 1.0)).init(p),
        lambda c, o: c.prodigy().update(p, c.prodigy().init(p)),
        lambda c, o: c.dadapt_adamw().update(p, c.dadapt_adamw().init(p)),
        lambda c, o: c.momo().update(p, c.momo().init(p), p, value=None),
        lambda c, o: c.momo_adam().update(p, c.momo_adam().init(p), None, value=1.0),
        lambda c, o: c.sam(o.sgd(1.0), o.sgd(1.0), opaque_mode=True).update(
            p, c.sam(o.sgd(1.0), o.sgd(1.0), opaque_mode=True).init(p), p),
        lambda c, o: c.schedule_free_eval_params(c.ScheduleFreeState(None, 0, 0, 0, 0, None),
                                                 p),
        lambda c, o: c.sophia(0.1).update(p, c.sophia(0.1).init(p)),
        lambda c, o: c.hutchinson_estimator_diag_hessian().update(p, None, p),
        lambda c, o: c.differentially_private_aggregate(1.0, 1.0, key=1, seed=1),
    ]
    for i, case in enumerate(cases):
        assert _error(lambda: case(optax.contrib, optax)) == \
            _error(lambda: case(ox.contrib, ox)), i


def test_doctests():
    import doctest
    import importlib
    import pkgutil
    mods = ["xform.optim.contrib"] + [f"xform.optim.contrib.{m.name}" for m in
                                      pkgutil.iter_modules(optax.contrib.__path__)]
    attempted = 0
    for name in mods:
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, name
        attempted += result.attempted
    assert attempted > 40
