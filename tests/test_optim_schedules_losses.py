"""Schedules and losses equal optax's (values, jitted with a traced step, and gradients of
the losses), and jmp-style dynamic loss scaling behaves as jmp's does."""
import jax
import jax.numpy as jjnp
import numpy as np
import optax as ox
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax

STEPS = np.arange(0, 60, dtype=np.int32)

SCHEDULES = {
    "constant": lambda o: o.constant_schedule(0.3),
    "linear": lambda o: o.linear_schedule(1.0, 0.1, 20, transition_begin=5),
    "polynomial": lambda o: o.polynomial_schedule(1.0, 0.01, 2.5, 30, transition_begin=3),
    "cosine_decay": lambda o: o.cosine_decay_schedule(0.5, 40, alpha=0.1, exponent=2.0),
    "cosine_onecycle": lambda o: o.cosine_onecycle_schedule(50, 0.8),
    "linear_onecycle": lambda o: o.linear_onecycle_schedule(50, 0.8),
    "exponential_decay": lambda o: o.exponential_decay(1.0, 7, 0.6, transition_begin=4),
    "exponential_staircase_end": lambda o: o.exponential_decay(1.0, 5, 0.5, staircase=True,
                                                               end_value=0.1),
    "exponential_growth_end": lambda o: o.exponential_decay(0.1, 5, 1.5, end_value=1.0),
    "piecewise_constant": lambda o: o.piecewise_constant_schedule(1.0, {10: 0.5, 25: 0.1,
                                                                        40: 2.0}),
    "piecewise_interpolate_linear": lambda o: o.piecewise_interpolate_schedule(
        "linear", 1.0, {10: 0.5, 30: 0.2}),
    "piecewise_interpolate_cosine": lambda o: o.piecewise_interpolate_schedule(
        "cosine", 1.0, {10: 0.5, 30: 0.2}),
    "warmup_cosine_decay": lambda o: o.warmup_cosine_decay_schedule(0.0, 1.0, 10, 50, 0.05),
    "warmup_exponential_decay": lambda o: o.warmup_exponential_decay_schedule(
        0.0, 1.0, 10, 5, 0.8, end_value=0.2),
    "warmup_constant": lambda o: o.warmup_constant_schedule(0.0, 1.0, 10),
    "sgdr": lambda o: o.sgdr_schedule([dict(init_value=0.0, peak_value=1.0, warmup_steps=5,
                                            decay_steps=20),
                                       dict(init_value=0.1, peak_value=0.5, warmup_steps=3,
                                            decay_steps=25)]),
    "join": lambda o: o.join_schedules([o.constant_schedule(1.0),
                                        o.linear_schedule(1.0, 0.0, 20),
                                        o.cosine_decay_schedule(0.5, 10)], [10, 30]),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_matches_optax(name):
    ours, theirs = SCHEDULES[name](optax), SCHEDULES[name](ox)
    want = np.array([np.asarray(theirs(int(s)), np.float32) for s in STEPS])
    eager = np.array([np.asarray(ours(int(s)), np.float32) for s in STEPS])
    np.testing.assert_allclose(eager, want, rtol=1e-6, atol=1e-7)
    # jitted with a traced step (XLA may rewrite x / c as x * (1 / c), so compare with
    # optax under jax.jit: polynomial_schedule gives NaN at its end under both)
    jitted = np.asarray(xform.jit(xform.vmap(ours))(jnp.asarray(STEPS)))
    want_jit = np.asarray(jax.jit(jax.vmap(theirs))(STEPS))
    np.testing.assert_allclose(np.broadcast_to(jitted, want.shape),
                               np.broadcast_to(want_jit, want.shape), rtol=1e-6, atol=1e-7)


def test_schedule_at_numpy_step_is_strongly_typed_as_optax():
    """A NumPy int32 step makes staircase's ``p`` a np.float64: strongly typed in JAX
    (np.float64 subclasses float, and was taken for a weak Python scalar)."""
    for step in (np.int32(7), np.float64(7.0)):
        want = SCHEDULES["exponential_staircase_end"](ox)(step)
        got = SCHEDULES["exponential_staircase_end"](optax)(step)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type), step
        np.testing.assert_array_equal(got, want)


def test_schedule_errors():
    with pytest.raises(ValueError, match="non-negative scale factors"):
        optax.piecewise_constant_schedule(1.0, {3: -1.0})
    with pytest.raises(ValueError, match="'cosine' or 'linear'"):
        optax.piecewise_interpolate_schedule("cubic", 1.0)
    with pytest.raises(ValueError, match="2 schedules and 0 boundaries"):
        optax.join_schedules([optax.constant_schedule(1.), optax.constant_schedule(2.)], [])


_r = np.random.RandomState(1)
LOGITS = _r.randn(4, 5).astype(np.float32) * 3
PROBS = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
LABELS = np.array([0, 3, 4, 1], np.int32)
PRED = _r.randn(4, 5).astype(np.float32)
TGT = _r.randn(4, 5).astype(np.float32)
WHERE = _r.rand(4, 5) > 0.3
CTC_LOGITS = _r.randn(2, 6, 4).astype(np.float32)
CTC_LPAD = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]], np.float32)
CTC_LABELS = np.array([[1, 2, 2], [3, 1, 0]], np.int32)
CTC_LABPAD = np.array([[0, 0, 0], [0, 0, 1]], np.float32)

# name -> (fn(module, x) of the differentiable argument x, x)
LOSSES = {
    "softmax_cross_entropy": (lambda o, x: o.softmax_cross_entropy(x, PROBS[::-1].copy()),
                              LOGITS),
    "softmax_cross_entropy_where": (lambda o, x: o.softmax_cross_entropy(
        x, PROBS[::-1].copy(), where=WHERE), LOGITS),
    "softmax_xent_int": (lambda o, x: o.softmax_cross_entropy_with_integer_labels(x, LABELS),
                         LOGITS),
    "softmax_xent_int_axis0": (lambda o, x: o.softmax_cross_entropy_with_integer_labels(
        x.T, LABELS, axis=0), LOGITS),
    "sigmoid_bce": (lambda o, x: o.sigmoid_binary_cross_entropy(x, (TGT > 0).astype(
        np.float32)), LOGITS),
    "l2_loss": (lambda o, x: o.l2_loss(x, TGT), PRED),
    "squared_error": (lambda o, x: o.squared_error(x, TGT), PRED),
    "huber_loss": (lambda o, x: o.huber_loss(x, TGT, delta=0.7), PRED),
    "log_cosh": (lambda o, x: o.log_cosh(x * 30, TGT), PRED),
    "cosine_similarity": (lambda o, x: o.cosine_similarity(x, TGT, epsilon=1e-6), PRED),
    "cosine_distance": (lambda o, x: o.cosine_distance(x, TGT, axis=0), PRED),
    "kl_divergence": (lambda o, x: o.kl_divergence(x - 2.0, PROBS), PRED),
    "kl_divergence_log_targets": (lambda o, x: o.kl_divergence_with_log_targets(
        x, np.log(PROBS)), PRED),
    "hinge_loss": (lambda o, x: o.hinge_loss(x, np.sign(TGT)), PRED),
    "ctc_loss": (lambda o, x: o.ctc_loss(x, CTC_LPAD, CTC_LABELS, CTC_LABPAD), CTC_LOGITS),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_and_gradient_match_optax(name):
    f, x = LOSSES[name]
    want = f(ox.losses, jjnp.asarray(x))
    weights = 1.0 + np.arange(want.size, dtype=np.float32).reshape(want.shape)

    def weighted(losses, np_mod):   # (weighted sum, unreduced losses)
        return lambda x: (np_mod.sum(f(losses, x) * weights), f(losses, x))

    (_, got), g_ours = xform.jit(xform.value_and_grad(weighted(optax.losses, jnp),
                                                      has_aux=True))(jnp.asarray(x))
    g_theirs = jax.grad(weighted(ox.losses, jjnp), has_aux=True)(jjnp.asarray(x))[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(g_ours, g_theirs, rtol=2e-4, atol=2e-5)


def test_loss_errors_name_the_argument():
    with pytest.raises(ValueError, match="`labels` must be integer class indices"):
        optax.softmax_cross_entropy_with_integer_labels(LOGITS, LABELS.astype(np.float32))
    with pytest.raises(ValueError, match=r"labels shape \(3,\) does not match logits shape"):
        optax.softmax_cross_entropy_with_integer_labels(LOGITS, LABELS[:3])
    with pytest.raises(ValueError, match=r"logits shape \(4, 5\) and labels shape \(4,\)"):
        optax.softmax_cross_entropy(LOGITS, LABELS)
    with pytest.raises(ValueError, match="`logits` must have a floating dtype"):
        optax.sigmoid_binary_cross_entropy(LABELS, LABELS)
    with pytest.raises(ValueError, match="predictions shape"):
        optax.squared_error(PRED, TGT[:2])


def test_dynamic_loss_scale_float16_training():
    ls = optax.DynamicLossScale(jnp.float32(2.0 ** 4), period=3)
    w = jnp.asarray(np.float16(1.5))

    @xform.jit
    def step(w, ls, big):
        grads = xform.grad(lambda w: ls.scale(w * w * big))(w)
        grads = ls.unscale(grads)
        finite = optax.all_finite(grads)
        new_w = optax.select_tree(finite, w - jnp.float16(0.01) * grads, w)
        return new_w, ls.adjust(finite), finite

    history = []
    for big in [1.0, 1.0, 1.0, 1.0, 1e4, 1e4, 1.0]:
        w, ls, finite = step(w, ls, jnp.float16(big))
        history.append((bool(finite), float(ls.loss_scale), int(ls.counter)))
    # 3 finite steps grow the scale (period 3); overflow halves it and resets the counter
    assert history == [(True, 16.0, 1), (True, 16.0, 2), (True, 32.0, 0), (True, 32.0, 1),
                       (False, 16.0, 0), (False, 8.0, 0), (True, 8.0, 1)]
    assert w.dtype == jnp.float16
    # never below min_loss_scale, never grown to inf
    s = optax.DynamicLossScale(jnp.float32(1.0))
    assert float(s.adjust(jnp.array(False)).loss_scale) == 1.0
    s = optax.DynamicLossScale(jnp.float32(3e38), counter=jnp.int32(1999))
    assert float(s.adjust(jnp.array(True)).loss_scale) == np.float32(3e38)
    assert optax.StaticLossScale(4.0).unscale(jnp.ones(1))[0] == 0.25
    assert optax.NoOpLossScale().scale(3.0) == 3.0
    assert bool(optax.all_finite({}))
    with pytest.raises(ValueError, match="scalar bool"):
        optax.select_tree(jnp.ones(2) > 0, jnp.ones(2), jnp.zeros(2))


def test_mixed_precision_policy():
    p = optax.get_policy("params=float32,compute=float16,output=float32")
    tree = {"w": jnp.ones(2), "step": jnp.int32(1), "h": jnp.ones(1, jnp.bfloat16)}
    c = p.cast_to_compute(tree)
    assert (c["w"].dtype, c["step"].dtype, c["h"].dtype) == (jnp.float16, jnp.int32,
                                                              jnp.float16)
    assert p.cast_to_output(c)["w"].dtype == jnp.float32
    assert str(optax.get_policy("bf16")) == "p=bfloat16,c=bfloat16,o=bfloat16"
    assert p.with_output_dtype("bfloat16").output_dtype == jnp.bfloat16
    with pytest.raises(ValueError, match="Unknown key 'x' in policy"):
        optax.get_policy("x=f32")
    with pytest.raises(ValueError, match="Unknown dtype 'f8' in policy"):
        optax.get_policy("p=f8")


def test_add_noise_follows_optax():
    random = pytest.importorskip("xform.random")
    del random
    tx_x, tx_j = optax.add_noise(0.1, 0.55, 3), ox.add_noise(0.1, 0.55, 3)
    g = np.ones((3, 2), np.float32)
    sx, sj = tx_x.init(jnp.asarray(g)), tx_j.init(jjnp.asarray(g))
    for _ in range(3):
        ux, sx = xform.jit(tx_x.update)(jnp.asarray(g), sx)
        uj, sj = jax.jit(tx_j.update)(jjnp.asarray(g), sj)
        np.testing.assert_allclose(ux, uj, rtol=1e-5, atol=1e-6)
