"""optax.losses beyond the classic ones, optax.projections, optax.perturbations and
optax.second_order against optax itself: values on small inputs and, where the function is
meant to be differentiated, gradients (xform.grad against jax.grad)."""
import doctest
import importlib
import types
import warnings

import jax
import jax.numpy as jjnp
import jax.scipy.special as jsp
import numpy as np
import optax as ox
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax
import xform.scipy.special as xsp

XF = types.SimpleNamespace(o=optax, np=jnp, sp=xsp, grad=xform.grad, key=xform.random.key,
                           tree=xform.tree_util)
JX = types.SimpleNamespace(o=ox, np=jjnp, sp=jsp, grad=jax.grad, key=jax.random.key,
                           tree=jax.tree_util)

_r = np.random.RandomState(0)
LOGITS = _r.randn(3, 4).astype(np.float32)
PROBS = np.abs(_r.randn(3, 4)).astype(np.float32)
PROBS /= PROBS.sum(-1, keepdims=True)
ONEHOT = np.eye(4, dtype=np.float32)[[0, 2, 3]]
INT = np.array([0, 2, 3])
BIN = (_r.rand(3, 4) > 0.5).astype(np.float32)
SIGNS = np.sign(_r.randn(3, 4)).astype(np.float32)
MASK = np.array([[1, 1, 0, 1], [1, 1, 1, 1], [0, 1, 1, 1]], bool)
SEG = _r.randn(2, 3, 3, 4).astype(np.float32)
SEG_T = np.eye(4, dtype=np.float32)[_r.randint(0, 4, (2, 3, 3))]
EMB = _r.randn(6, 3).astype(np.float32)
CTC = _r.randn(2, 5, 4).astype(np.float32)
CTC_LABELS, CTC_LPAD = np.array([[1, 2, 2], [3, 1, 0]]), np.array([[0., 0, 0], [0, 0, 1]])
CTC_PAD = np.array([[0., 0, 0, 0, 0], [0, 0, 0, 1, 1]], np.float32)

# name: (f(L, x) with x the differentiated input, x0, check the gradient)
LOSSES = {
    "sigmoid_focal_loss": (lambda L, x: L.o.losses.sigmoid_focal_loss(x, BIN, alpha=0.25),
                           LOGITS, True),
    "sigmoid_focal_loss_soft": (lambda L, x: L.o.sigmoid_focal_loss(x, PROBS, gamma=1.5),
                                LOGITS, True),
    "safe_softmax_cross_entropy": (lambda L, x: L.o.safe_softmax_cross_entropy(x, PROBS),
                                   LOGITS, True),
    "safe_softmax_cross_entropy_inf": (
        lambda L, x: L.o.safe_softmax_cross_entropy(L.np.where(ONEHOT > 0, x, -L.np.inf),
                                                    ONEHOT), LOGITS, False),
    "multiclass_hinge_loss": (lambda L, x: L.o.losses.multiclass_hinge_loss(x, INT),
                              LOGITS, True),
    "perceptron_loss": (lambda L, x: L.o.losses.perceptron_loss(x, SIGNS), LOGITS, True),
    "multiclass_perceptron_loss": (lambda L, x: L.o.losses.multiclass_perceptron_loss(x, INT),
                                   LOGITS, True),
    "sparsemax_loss": (lambda L, x: L.o.losses.sparsemax_loss(x, BIN > 0), LOGITS, True),
    "multiclass_sparsemax_loss": (lambda L, x: L.o.losses.multiclass_sparsemax_loss(x, INT),
                                  LOGITS, True),
    "poly_loss_cross_entropy": (lambda L, x: L.o.losses.poly_loss_cross_entropy(
        x, PROBS, epsilon=1.5), LOGITS, True),
    "poly_loss_where": (lambda L, x: L.o.losses.poly_loss_cross_entropy(
        x, ONEHOT, where=MASK), LOGITS, False),
    "generalized_kl_divergence": (lambda L, x: L.o.generalized_kl_divergence(x, PROBS + 0.1),
                                  LOGITS, True),
    "generalized_kl_divergence_where": (lambda L, x: L.o.generalized_kl_divergence(
        x, PROBS, where=MASK), LOGITS, False),
    "fenchel_young_logsumexp": (lambda L, x: L.o.losses.make_fenchel_young_loss(
        L.sp.logsumexp)(x, PROBS), LOGITS, True),
    "ranking_softmax_loss": (lambda L, x: L.o.losses.ranking_softmax_loss(
        x, PROBS, where=MASK, weights=PROBS + 1), LOGITS, True),
    "ranking_softmax_loss_none": (lambda L, x: L.o.losses.ranking_softmax_loss(
        x, BIN, reduce_fn=None), LOGITS, False),
    "ranking_softmax_loss_sum": (lambda L, x: L.o.losses.ranking_softmax_loss(
        x, BIN, reduce_fn=L.np.sum), LOGITS, False),
    "dice_loss": (lambda L, x: L.o.losses.dice_loss(x, SEG_T), SEG, True),
    "dice_loss_tversky": (lambda L, x: L.o.losses.dice_loss(
        x, SEG_T, alpha=0.7, beta=0.3, class_weights=L.np.arange(1., 5.), reduction="none",
        ignore_background=True), SEG, True),
    "multiclass_generalized_dice_loss": (
        lambda L, x: L.o.losses.multiclass_generalized_dice_loss(x, SEG_T), SEG, True),
    "binary_dice_loss": (lambda L, x: L.o.losses.binary_dice_loss(x, BIN), LOGITS, True),
    "ntxent": (lambda L, x: L.o.ntxent(x, np.array([0, 0, 1, 1, 2, 2])), EMB, True),
    "triplet_margin_loss": (lambda L, x: L.o.losses.triplet_margin_loss(
        x[:2], x[2:4], x[4:], margin=2.0), EMB, True),
    "smooth_labels": (lambda L, x: L.o.smooth_labels(x, 0.1), ONEHOT, False),
    "smooth_labels_where": (lambda L, x: L.o.losses.smooth_labels(x, 0.2, where=MASK),
                            ONEHOT, False),
    "ctc_loss_with_forward_probs": (lambda L, x: L.o.ctc_loss_with_forward_probs(
        x, CTC_PAD, CTC_LABELS, CTC_LPAD, blank_id=0), CTC, False),
    "ctc_loss": (lambda L, x: L.o.losses.ctc_loss(x, CTC_PAD, CTC_LABELS, CTC_LPAD), CTC,
                 False),
}


def _close(x, y, rtol=1e-5, atol=1e-6):
    lx, ly = xform.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)
    assert len(lx) == len(ly)
    for a, b in zip(lx, ly):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _value_and_grad(L, f, x0, check_grad, first):
    # one jitted program per loss and library: compiling it beats running op by op
    def run(x):
        value = f(L, x)
        if not check_grad:
            return value, None
        return value, L.grad(lambda x: L.np.sum(f(L, x)[0] if first else f(L, x)))(x)
    jit = xform.jit if L is XF else jax.jit
    return jit(run)(L.np.asarray(x0))


def test_losses_match_optax():
    for name, (f, x0, check_grad) in LOSSES.items():
        first = name.startswith("ctc_")   # (loss, alphas...): differentiate the loss
        (vx, gx), (vj, gj) = (_value_and_grad(L, f, x0, check_grad, first) for L in (XF, JX))
        try:
            _close(vx, vj, rtol=2e-5, atol=2e-6)
            if check_grad:
                _close(gx, gj, rtol=1e-4, atol=1e-5)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    for lib in (optax, ox):
        with pytest.warns(DeprecationWarning, match="convex_kl_divergence is deprecated"):
            lib.convex_kl_divergence(jnp.zeros(2) if lib is optax else jjnp.zeros(2), PROBS[0, :2])
    probs = np.abs(SEG) / np.abs(SEG).sum(-1, keepdims=True)   # checked eagerly: not jittable
    _close(optax.losses.dice_loss(probs, SEG_T, apply_softmax=False, reduction="sum", axis=(1,)),
           ox.losses.dice_loss(probs, SEG_T, apply_softmax=False, reduction="sum", axis=(1,)))
    with pytest.raises(ValueError, match="sum to 1"):
        optax.losses.dice_loss(SEG, SEG_T, apply_softmax=False)
    with pytest.raises(ValueError, match="leading dimension"):
        optax.ntxent(EMB, np.zeros(5, int))
    for lib in (optax, ox):   # optax raises TypeError for integer inputs
        with pytest.raises(TypeError, match="subdtype of"):
            lib.losses.ranking_softmax_loss(INT[None], INT[None])


TREE = {"a": np.array([0.5, -1.5, 2.0], np.float32), "b": np.array([[0.3, -0.2]], np.float32)}
W = {"a": np.array([1.0, -2.0, 0.5], np.float32), "b": np.array([[3.0, 1.0]], np.float32)}
PROJECTIONS = {   # name: (f(L, tree), check the gradient)
    "non_negative": (lambda L, t: L.o.projections.projection_non_negative(t), True),
    "box": (lambda L, t: L.o.projections.projection_box(t["a"], -0.25, 1.0), True),
    "box_tree": (lambda L, t: L.o.projections.projection_box(
        t, L.tree.tree_map(lambda x: x - 1, W), W), True),
    "hypercube": (lambda L, t: L.o.projections.projection_hypercube(t["a"], 0.5), True),
    "simplex": (lambda L, t: L.o.projections.projection_simplex(t), True),
    "simplex_scale": (lambda L, t: L.o.projections.projection_simplex(t, 2.5), True),
    "l1_sphere": (lambda L, t: L.o.projections.projection_l1_sphere(t, 2.0), True),
    "l1_ball": (lambda L, t: L.o.projections.projection_l1_ball(t, 1.0), True),
    "l1_ball_inside": (lambda L, t: L.o.projections.projection_l1_ball(t, 100.0), True),
    "l2_sphere": (lambda L, t: L.o.projections.projection_l2_sphere(t, 2.0), True),
    "l2_ball": (lambda L, t: L.o.projections.projection_l2_ball(t, 1.0), True),
    "linf_ball": (lambda L, t: L.o.projections.projection_linf_ball(t, 0.4), True),
    "vector": (lambda L, t: L.o.projections.projection_vector(t, W), True),
    "hyperplane": (lambda L, t: L.o.projections.projection_hyperplane(t, W, 1.0), True),
    "halfspace": (lambda L, t: L.o.projections.projection_halfspace(t, W, -1.0), True),
    "halfspace_inside": (lambda L, t: L.o.projections.projection_halfspace(t, W, 10.0), True),
}


def test_projections_match_optax():
    def objective(L, f, t):   # <w, proj(t)>
        return sum(L.np.vdot(p, w) for p, w in zip(L.tree.tree_leaves(f(L, t)),
                                                   L.tree.tree_leaves(W)))
    for name, (f, check_grad) in PROJECTIONS.items():
        outs = []
        for L, jit in ((XF, xform.jit), (JX, jax.jit)):
            t = L.tree.tree_map(L.np.asarray, TREE)
            grad = L.grad(lambda t: objective(L, f, t)) if check_grad else lambda t: None
            outs.append(jit(lambda t: (f(L, t), grad(t)))(t))
        try:
            _close(*outs, rtol=1e-5, atol=1e-6)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def test_perturbed_fun_matches_optax():
    def argmax_onehot(L):
        return lambda x: (x == L.np.max(x)).astype(x.dtype)
    x0 = np.array([0.3, 0.1, 0.25, -0.5], np.float32)
    for noise, baseline in (("Gumbel", True), ("Normal", False)):
        def run(L):
            f = L.o.perturbations.make_perturbed_fun(
                argmax_onehot(L), num_samples=16, sigma=0.5,
                noise=getattr(L.o.perturbations, noise)(), use_baseline=baseline)
            grad = L.grad(lambda x: L.np.vdot(f(L.key(1), x), L.np.arange(4.)))
            return (xform.jit if L is XF else jax.jit)(
                lambda x: (f(L.key(1), x), grad(x)))(L.np.asarray(x0))
        _close(run(XF), run(JX), rtol=1e-4, atol=1e-5)


def test_second_order_matches_optax():
    rng = np.random.RandomState(0)
    params = {"w": rng.randn(3, 2).astype(np.float32), "b": rng.randn(2).astype(np.float32)}
    inputs, targets = rng.randn(5, 3).astype(np.float32), rng.randn(5, 2).astype(np.float32)

    def loss(L):
        return lambda p, x, y: L.np.sum(L.np.tanh(x @ p["w"] + p["b"]) - y) ** 2

    v = rng.randn(8).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, args in (("hvp", (v,)), ("hessian_diag", ()), ("fisher_diag", ())):
            _close(getattr(optax.second_order, name)(loss(XF), *args, params, inputs, targets),
                   getattr(ox.second_order, name)(loss(JX), *args, params, inputs, targets),
                   rtol=1e-4, atol=1e-4)
    with pytest.warns(DeprecationWarning, match="hvp is deprecated"):
        optax.second_order.hvp(loss(XF), v, params, inputs, targets)


def test_doctests():
    for name in ("xform.optim._losses_more", "xform.optim.projections",
                 "xform.optim.perturbations", "xform.optim.second_order"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
