"""TrainState follows flax.training.train_state.TrainState (with optax) step for step
under jit and, data-parallel with pmean of the grads, under pmap; it is a pytree whose
apply_fn/tx are static."""
import dataclasses

import flax.training.train_state as flax_ts
import jax
import jax.numpy as jjnp
import numpy as np
import optax as ox
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax
from xform.training import struct
from xform.training.train_state import TrainState

_r = np.random.RandomState(0)
W0 = {"dense": {"kernel": _r.randn(3, 2).astype(np.float32),
                "bias": np.zeros(2, np.float32)}}
X = _r.randn(8, 3).astype(np.float32)
Y = _r.randn(8, 2).astype(np.float32)


def apply_fn(params, x):
    return x @ params["dense"]["kernel"] + params["dense"]["bias"]


def _train(lib, steps=6):
    if lib == "jax":
        state = flax_ts.TrainState.create(apply_fn=apply_fn, params=jax.tree_util.tree_map(
            jjnp.asarray, W0), tx=ox.adamw(0.05, weight_decay=0.1))
        grad, jit, np_mod = jax.grad, jax.jit, jjnp
    else:
        state = TrainState.create(apply_fn=apply_fn, params=xform.tree_util.tree_map(
            jnp.asarray, W0), tx=optax.adamw(0.05, weight_decay=0.1))
        grad, jit, np_mod = xform.grad, xform.jit, jnp

    @jit
    def step(state, x, y):
        def loss(p):
            return np_mod.mean((state.apply_fn(p, x) - y) ** 2)
        return state.apply_gradients(grads=grad(loss)(state.params))

    out = []
    for _ in range(steps):
        state = step(state, X, Y)
        out.append(np.asarray(state.params["dense"]["kernel"]))
    return state, out


def test_train_state_matches_flax_under_jit():
    xs, xtraj = _train("xform")
    js, jtraj = _train("jax")
    for a, b in zip(xtraj, jtraj):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(xs.step) == int(js.step) == 6
    for a, b in zip(xform.tree_util.tree_leaves(xs.opt_state),
                    jax.tree_util.tree_leaves(js.opt_state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_train_state_data_parallel_under_pmap_matches_single_device():
    """A replicated TrainState stepped by pmap over 4 devices with pmean'd grads follows
    the single-device jitted step on the whole batch (the flax/optax trajectory)."""
    n = 4
    state = TrainState.create(apply_fn=apply_fn, params=xform.tree_util.tree_map(
        jnp.asarray, W0), tx=optax.adamw(0.05, weight_decay=0.1))
    rep = xform.device_put_replicated(state, xform.local_devices()[:n])

    def step(state, x, y):
        def loss(p):
            return jnp.mean((state.apply_fn(p, x) - y) ** 2)
        grads = xform.lax.pmean(xform.grad(loss)(state.params), "batch")
        return state.apply_gradients(grads=grads)

    pstep = xform.pmap(step, axis_name="batch")
    xs, ys = X.reshape(n, -1, 3), Y.reshape(n, -1, 2)
    _, jtraj = _train("jax", steps=3)
    for k in range(3):
        rep = pstep(rep, xs, ys)
        kern = np.asarray(rep.params["dense"]["kernel"])
        assert kern.shape == (n, 3, 2)
        for d in range(n):
            np.testing.assert_allclose(kern[d], jtraj[k], rtol=1e-5, atol=1e-6)
    assert np.asarray(rep.step).tolist() == [3] * n


def test_train_state_is_a_pytree_with_static_fields():
    tx = optax.sgd(0.1)
    s = TrainState.create(apply_fn=apply_fn, params={"w": jnp.ones(2)}, tx=tx)
    leaves, treedef = xform.tree_util.tree_flatten(s)
    assert len(leaves) == 2          # step and w (sgd has an empty state)
    assert s.step == 0 and s.tx is tx and s.apply_fn is apply_fn
    paths = [xform.tree_util.keystr(p) for p, _ in
             xform.tree_util.tree_flatten_with_path(s)[0]]
    assert paths == [".step", ".params['w']"]
    s2 = xform.tree_util.tree_unflatten(treedef, [5, jnp.zeros(2)])
    assert s2.step == 5 and s2.tx is tx
    assert s.replace(step=3).step == 3 and s.step == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.step = 1
    # under jit the static fields stay Python objects and the step becomes an array
    out = xform.jit(lambda st: st.apply_gradients(grads={"w": jnp.ones(2)}))(s)
    assert out.tx is tx and int(out.step) == 1
    np.testing.assert_allclose(out.params["w"], [0.9, 0.9])


def test_train_state_subclass_with_extra_fields():
    class BNState(TrainState):
        batch_stats: dict

    s = BNState.create(apply_fn=apply_fn, params={"w": jnp.ones(1)}, tx=optax.adam(0.1),
                       batch_stats={"mean": jnp.zeros(1)})
    s = xform.jit(lambda st: st.apply_gradients(grads={"w": jnp.ones(1)},
                                                batch_stats={"mean": jnp.ones(1)}))(s)
    assert isinstance(s, BNState) and float(s.batch_stats["mean"][0]) == 1.0
    assert int(s.step) == 1 and float(s.params["w"][0]) < 1.0


def test_overwrite_with_gradient_collection():
    params = {"params": {"w": jnp.ones(1)}, "_overwrite_with_gradient": {"s": jnp.zeros(1)}}
    s = TrainState.create(apply_fn=apply_fn, params=params, tx=optax.sgd(1.0))
    grads = {"params": {"w": jnp.ones(1)}, "_overwrite_with_gradient": {"s": jnp.full(1, 7.)}}
    s = s.apply_gradients(grads=grads)
    assert float(s.params["params"]["w"][0]) == 0.0
    assert float(s.params["_overwrite_with_gradient"]["s"][0]) == 7.0


def test_create_rejects_a_non_transformation():
    with pytest.raises(TypeError, match="tx must be an xform.optim GradientTransformation"):
        TrainState.create(apply_fn=apply_fn, params={}, tx=0.1)


def test_struct_dataclass():
    @struct.dataclass
    class Cfg:
        w: object
        name: str = struct.field(pytree_node=False, default="n")

    c = Cfg(jnp.ones(1))
    assert xform.tree_util.tree_leaves(c)[0].shape == (1,)
    doubled = xform.tree_util.tree_map(lambda x: 2 * x, c)
    assert doubled.name == "n" and float(doubled.w[0]) == 2.0


def test_doctests():
    import doctest
    import xform.training.struct
    import xform.training.train_state
    for m in (xform.training.struct, xform.training.train_state):
        r = doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert r.failed == 0 and r.attempted > 0, m.__name__
