"""L-BFGS and the linesearches against optax at run time: 25 jitted steps in both
libraries on a Rosenbrock function and a small logistic regression (data passed as the
extra keyword arguments of ``value_fn``), parameters compared after every step and the
final optimizer states leaf by leaf; ``value_and_grad_from_state`` reuse; the errors."""
import doctest

import jax
import jax.numpy as jnp_ref
import numpy as np
import optax
import pytest

import xform
import xform.numpy as jnp
import xform.optim as xoptax
from xform.optim import _lbfgs, _linesearch

STEPS = 25
RNG = np.random.RandomState(0)
X_DATA = RNG.randn(32, 3).astype(np.float32) * np.float32([1, 10, 100])  # ill-conditioned
Y_DATA = (RNG.rand(32) > 0.5).astype(np.float32)


def rosenbrock(np_):
    def fn(params):
        x = params["x"]
        return np_.sum(100. * (x[1:] - x[:-1] ** 2) ** 2 + (1. - x[:-1]) ** 2)
    return fn, {"x": np.array([-1.2, 1., -1.2, 1.], np.float32)}, {}


def logistic(np_):
    def fn(params, x, y):
        z = x @ params["w"] + params["b"]
        return np_.mean(np_.logaddexp(0., z) - y * z) + 0.01 * np_.sum(params["w"] ** 2)
    params = {"w": np.zeros(3, np.float32), "b": np.zeros((), np.float32)}
    return fn, params, {"x": X_DATA, "y": Y_DATA}


def _run(lib, api, np_, make_tx, problem, from_state):
    """``STEPS`` jitted steps; the parameters after each and the final state."""
    fn, params, data = problem(np_)
    tx = make_tx(lib)
    state = tx.init(params)
    value_and_grad = (lib.value_and_grad_from_state(fn) if from_state
                      else api.value_and_grad(fn))

    @api.jit
    def step(params, state):
        if from_state:
            value, grad = value_and_grad(params, state=state, **data)
        else:
            value, grad = value_and_grad(params, **data)
        updates, state = tx.update(grad, state, params, value=value, grad=grad,
                                   value_fn=fn, **data)
        return lib.apply_updates(params, updates), state

    trajectory = []
    for _ in range(STEPS):
        params, state = step(params, state)
        trajectory.append(params)
    return trajectory, state


def _lbfgs_backtracking(o):
    return o.lbfgs(linesearch=o.scale_by_backtracking_linesearch(15, store_grad=True))


def _sgd_backtracking(o):
    return o.chain(o.sgd(1.), o.scale_by_backtracking_linesearch(40))


# (transformation, problem, value and grad from the state); the zoom linesearch behind
# sgd is the case that zooms (cubic and quadratic steps): L-BFGS mostly takes step 1
CASES = {
    "lbfgs-zoom-rosenbrock": (lambda o: o.lbfgs(), rosenbrock, True),
    "lbfgs-zoom-logistic": (lambda o: o.lbfgs(memory_size=3), logistic, True),
    "lbfgs-backtracking-rosenbrock": (_lbfgs_backtracking, rosenbrock, True),
    "sgd-backtracking-rosenbrock": (_sgd_backtracking, rosenbrock, False),
    "sgd-backtracking-logistic": (_sgd_backtracking, logistic, False),
    "sgd-zoom-rosenbrock": (
        lambda o: o.chain(o.sgd(1.), o.scale_by_zoom_linesearch(15)), rosenbrock, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_steps_match_optax(case):
    make_tx, problem, from_state = CASES[case]
    ours, our_state = _run(xoptax, xform, jnp, make_tx, problem, from_state)
    want, want_state = _run(optax, jax, jnp_ref, make_tx, problem, from_state)
    for i, (p, q) in enumerate(zip(ours, want)):
        for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(q)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
    leaves, ref_leaves = xform.tree_util.tree_leaves(our_state), jax.tree.leaves(want_state)
    assert [type(s).__name__ for s in our_state] == [type(s).__name__ for s in want_state]
    assert len(leaves) == len(ref_leaves)
    for a, b in zip(leaves, ref_leaves):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the optimizer made progress (a test of a stuck optimizer would also "match")
    fn, params, data = problem(jnp)
    assert float(fn(ours[-1], **data)) < 0.99 * float(fn(params, **data))


def test_state_fields_reuse_and_errors(capsys):
    params = jnp.array([1., 2., 3.])
    fn = lambda x: jnp.sum(x ** 2)  # noqa: E731
    assert xoptax.ScaleByLBFGSState._fields == optax.ScaleByLBFGSState._fields
    assert (xoptax.ScaleByZoomLinesearchState._fields
            == optax.ScaleByZoomLinesearchState._fields)
    assert (xoptax.ScaleByBacktrackingLinesearchState._fields
            == optax.ScaleByBacktrackingLinesearchState._fields)
    assert xoptax.ZoomLinesearchInfo._fields == optax.ZoomLinesearchInfo._fields
    # value_and_grad_from_state: recomputes on the first step (value inf), then reuses
    solver = xoptax.chain(xoptax.sgd(1.),
                          xoptax.scale_by_backtracking_linesearch(5, store_grad=True))
    state = solver.init(params)
    value_and_grad = xoptax.value_and_grad_from_state(fn)
    value, grad = value_and_grad(params, state=state)
    np.testing.assert_allclose(grad, 2 * params)
    updates, state = solver.update(grad, state, params, value=value, grad=grad, value_fn=fn)
    new_params = xoptax.apply_updates(params, updates)
    poison = lambda x: jnp.sum(x) * np.nan  # noqa: E731  (a reused value ignores it)
    reused = xoptax.value_and_grad_from_state(poison)(new_params, state=state)
    np.testing.assert_allclose(reused[0], fn(new_params), rtol=1e-6)
    np.testing.assert_allclose(reused[1], 2 * new_params, rtol=1e-6)
    # a backtracking linesearch without store_grad stores no gradient
    bt = xoptax.chain(xoptax.sgd(1.), xoptax.scale_by_backtracking_linesearch(5))
    with pytest.raises(ValueError, match="Value or gradient not found in the state"):
        value_and_grad(params, state=bt.init(params))
    with pytest.raises(TypeError, match=r"not consumed by `value_fn`: \['bogus'\]"):
        bt.update(grad, bt.init(params), params, value=value, grad=grad, value_fn=fn,
                  bogus=1)
    with pytest.raises(ValueError, match="memory_size must be >= 1"):
        xoptax.scale_by_lbfgs(memory_size=0)
    zoom = xoptax.scale_by_zoom_linesearch(5, initial_guess_strategy="bogus")
    with pytest.raises(ValueError, match="Unknown initial guess strategy: bogus"):
        zoom.update(grad, zoom.init(params), params, value=value, grad=grad, value_fn=fn)
    # verbose diagnostics when a linesearch fails (an ascent direction)
    for ls in (xoptax.scale_by_zoom_linesearch(2, verbose=True),
               xoptax.scale_by_backtracking_linesearch(2, verbose=True)):
        xform.jit(lambda g, s: ls.update(g, s, params, value=value, grad=grad,
                                         value_fn=fn))(grad, ls.init(params))
        xform.effects_barrier()
    out = capsys.readouterr().out
    assert _linesearch.FLAG_NOT_A_DESCENT_DIRECTION in out
    assert "Backtracking linesearch failed" in out


def test_tree_get_matches_optax():
    def paths(found):
        return [("/".join(str(k) for k in p), type(v).__name__) for p, v in found]
    states = []
    for lib, np_ in ((xoptax, jnp), (optax, jnp_ref)):
        tx = lib.chain(lib.add_decayed_weights(0.1), lib.inject_hyperparams(lib.adam)(0.1),
                       lib.scale_by_zoom_linesearch(3))
        states.append(tx.init({"a": np_.zeros(2)}))
    for key in ["count", "learning_rate", "ScaleByAdamState", "mu", "grad", "absent"]:
        ours = xoptax.tree_utils.tree_get_all_with_path(states[0], key)
        want = optax.tree_utils.tree_get_all_with_path(states[1], key)
        assert paths(ours) == [(p, t.replace("ArrayImpl", "Array")) for p, t in paths(want)]
    with pytest.raises(KeyError, match="Found multiple values for 'count'"):
        xoptax.tree_utils.tree_get(states[0], "count")
    assert xoptax.tree_utils.tree_get(states[0], "absent", 7) == 7
    assert xoptax.tree.get is xoptax.tree_utils.tree_get


def test_docstring_examples():
    for module in (_linesearch, _lbfgs):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__
