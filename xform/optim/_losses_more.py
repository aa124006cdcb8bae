"""The rest of ``optax.losses``: margin, sparsemax and focal classification losses,
generalized KL, Fenchel-Young, ranking, segmentation (Dice), self-supervised (NT-Xent,
triplet) losses and label smoothing."""
import warnings

import xform.numpy as jnp
from xform import lax, nn
from xform.optim._losses import (cosine_similarity, kl_divergence,
                                 sigmoid_binary_cross_entropy, softmax_cross_entropy)
from xform.optim.projections import projection_simplex
from xform.scipy.special import logsumexp
from xform.transforms.custom_derivatives import custom_jvp
from xform.transforms.vmap import vmap


def _check_floating(x, name, fn):
    # TypeError, as Optax's utils.check_subdtype raises
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{fn}: expected `{name}` to have a dtype that is a subdtype of "
                        f"floating, got {x.dtype} instead")
    return x


def _dot_last_dim(x, y):
    return jnp.einsum("...i,...i->...", x, y)


@custom_jvp
def _weighted_logsoftmax(x, weights):
    # weights * log_softmax(x) with 0 * log 0 = 0 where weights == 0 (even at x = -inf).
    logsoftmax_x = nn.log_softmax(x, axis=-1)
    return jnp.where(weights != 0.0, weights * logsoftmax_x, jnp.zeros_like(logsoftmax_x))


@_weighted_logsoftmax.defjvp
def _weighted_logsoftmax_jvp(primals, tangents):
    (x, weights), (x_dot, weights_dot) = primals, tangents
    logsoftmax_x = nn.log_softmax(x, axis=-1)
    out = jnp.where(weights != 0.0, weights * logsoftmax_x, jnp.zeros_like(logsoftmax_x))
    t = (weights * x_dot
         - weights * jnp.sum(x_dot * nn.softmax(x, axis=-1), axis=-1, keepdims=True)
         + weights_dot * logsoftmax_x)
    return out, t


def safe_softmax_cross_entropy(logits, labels):
    """Softmax cross-entropy that counts ``labels * log_softmax(logits)`` as 0 where
    ``labels == 0`` and ``logits == -inf``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.safe_softmax_cross_entropy(jnp.array([0., -jnp.inf]), jnp.array([1., 0.]))
        Array(-0., dtype=float32)
    """
    logits = _check_floating(logits, "logits", "safe_softmax_cross_entropy")
    return -jnp.sum(_weighted_logsoftmax(logits, jnp.asarray(labels, logits.dtype)), axis=-1)


def multiclass_hinge_loss(scores, labels):
    """``max_k(scores_k + 1 - [k == label]) - scores_label``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.multiclass_hinge_loss(jnp.array([2., 0.]), jnp.array(0))
        Array(0., dtype=float32)
    """
    one_hot = nn.one_hot(labels, scores.shape[-1])
    return jnp.max(scores + 1.0 - one_hot, axis=-1) - _dot_last_dim(scores, one_hot)


def perceptron_loss(predictor_outputs, targets):
    """``max(0, -outputs * targets)``, targets in {-1, 1}.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.perceptron_loss(jnp.array([-2., 1.]), jnp.array([1., 1.]))
        Array([2., 0.], dtype=float32)
    """
    if jnp.shape(predictor_outputs) != jnp.shape(targets):
        raise ValueError(f"Shape mismatch: got {jnp.shape(predictor_outputs)} and "
                         f"{jnp.shape(targets)}.")
    return jnp.maximum(0, -predictor_outputs * targets)


def multiclass_perceptron_loss(scores, labels):
    """``max_k scores_k - scores_label``."""
    one_hot = nn.one_hot(labels, scores.shape[-1])
    return jnp.max(scores, axis=-1) - _dot_last_dim(scores, one_hot)


def sparsemax_loss(logits, labels):
    """Binary sparsemax loss, zero iff ``sparse_sigmoid(logits) == labels``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.sparsemax_loss(jnp.array([2.]), jnp.array([1]))
        Array([0.], dtype=float32)
    """
    return nn.sparse_plus(jnp.where(labels, -logits, logits))


def _multiclass_sparsemax_loss(scores, label):
    scores = jnp.asarray(scores)
    proba = projection_simplex(scores)
    # Fenchel conjugate of the Gini negentropy.
    scores = (scores - scores[label]).at[label].set(0.0)
    return jnp.dot(proba, jnp.where(proba, scores, 0.0)) + 0.5 * (1.0 - jnp.dot(proba, proba))


def multiclass_sparsemax_loss(scores, labels):
    """Multiclass sparsemax loss (Martins & Astudillo 2016), batched over rows.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.multiclass_sparsemax_loss(jnp.array([[3., 0.]]), jnp.array([0]))
        Array([0.], dtype=float32)
    """
    return vmap(_multiclass_sparsemax_loss)(scores, labels)


def poly_loss_cross_entropy(logits, labels, *, epsilon=2.0, axis=-1, where=None):
    """Poly-1 loss: cross-entropy plus ``epsilon * (1 - p_t)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.poly_loss_cross_entropy(jnp.zeros(2), jnp.array([1., 0.]))
        Array(1.6931472, dtype=float32)
    """
    _check_floating(logits, "logits", "poly_loss_cross_entropy")
    _check_floating(labels, "labels", "poly_loss_cross_entropy")
    p = nn.softmax(logits, axis=axis, where=where)
    one_minus_pt = jnp.sum(labels * (1 - p), axis=axis, where=where)
    ce = softmax_cross_entropy(logits=logits, labels=labels, axis=axis, where=where)
    return ce + epsilon * one_minus_pt


def generalized_kl_divergence(log_predictions, targets, axis=-1, where=None):
    """KL divergence for unnormalized distributions: ``KL + sum(exp(log_p) - targets)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.generalized_kl_divergence(jnp.zeros(2), jnp.ones(2))
        Array(0., dtype=float32)
    """
    x = kl_divergence(log_predictions, targets, axis=axis, where=where)
    return x + jnp.sum(jnp.exp(log_predictions) - targets, axis=axis, where=where)


def convex_kl_divergence(log_predictions, targets, axis=-1, where=None):
    """Deprecated name of :func:`generalized_kl_divergence`."""
    warnings.warn("The function convex_kl_divergence is deprecated. Please use "
                  "generalized_kl_divergence instead.", DeprecationWarning, stacklevel=2)
    return generalized_kl_divergence(log_predictions, targets, axis=axis, where=where)


def sigmoid_focal_loss(logits, labels, *, alpha=None, gamma=2.0):
    """Focal loss (Lin et al. 2017): sigmoid cross-entropy weighted by
    ``(1 - p_t) ** gamma`` (computed in log space) and optionally by ``alpha_t``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.sigmoid_focal_loss(jnp.array([0.]), jnp.array([1.]))
        Array([0.1732868], dtype=float32)
    """
    logits = _check_floating(logits, "logits", "sigmoid_focal_loss")
    labels = jnp.asarray(labels).astype(logits.dtype)
    ce = sigmoid_binary_cross_entropy(logits, labels)
    log_p, log_q = nn.log_sigmoid(logits), nn.log_sigmoid(-logits)
    log_one_minus_pt = logsumexp(jnp.stack([log_p, log_q], axis=-1), axis=-1,
                                 b=jnp.stack([1 - labels, labels], axis=-1))
    loss = ce * jnp.exp(gamma * log_one_minus_pt)
    if alpha is None:
        return loss
    return (alpha * labels + (1.0 - alpha) * (1.0 - labels)) * loss


def make_fenchel_young_loss(max_fun):
    """The Fenchel-Young loss ``max_fun(scores) - <targets, scores>`` of a max function
    (e.g. ``logsumexp`` gives softmax cross-entropy), over the last axis.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax, xform.scipy.special as sp
        >>> loss = optax.losses.make_fenchel_young_loss(sp.logsumexp)
        >>> loss(jnp.zeros(2), jnp.array([1., 0.]))
        Array(0.6931472, dtype=float32)
    """
    vdot_last_dim = jnp.vectorize(jnp.vdot, signature="(n),(n)->()")
    max_fun_last_dim = jnp.vectorize(max_fun, signature="(n)->()")

    def fenchel_young_loss(scores, targets, *args, **kwargs):
        return max_fun_last_dim(scores, *args, **kwargs) - vdot_last_dim(targets, scores)
    return fenchel_young_loss


def _safe_reduce(a, where=None, reduce_fn=None):
    out = reduce_fn(a, where=where) if reduce_fn is not None else a
    if reduce_fn is jnp.mean:   # an all-masked mean is 0, not NaN
        valid = jnp.logical_not(jnp.any(jnp.isnan(a)))
        out = jnp.where(jnp.isnan(out) & valid, 0.0, out)
    if reduce_fn is None and where is not None:
        out = jnp.where(where, out, 0.0)
    return out


def ranking_softmax_loss(logits, labels, *, where=None, weights=None, reduce_fn=jnp.mean):
    """Listwise softmax ranking loss ``-sum_i y_i log softmax(s)_i`` over the last axis.

    Args:
        logits: ``[..., list_size]`` item scores.
        labels: ``[..., list_size]`` relevance labels.
        where: optional mask of valid items.
        weights: optional per-item weights.
        reduce_fn: ``jnp.mean``, ``jnp.sum`` or None (no reduction).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.ranking_softmax_loss(jnp.zeros(2), jnp.array([1., 0.]))
        Array(0.6931472, dtype=float32)
    """
    logits = _check_floating(logits, "logits", "ranking_softmax_loss")
    labels = jnp.asarray(labels).astype(logits.dtype)
    if where is not None:
        labels = jnp.where(where, labels, jnp.zeros_like(labels))
        logits = jnp.where(where, logits, -jnp.ones_like(logits) * jnp.inf)
    if weights is not None:
        labels = labels * weights
    loss = -jnp.sum(labels * nn.log_softmax(logits, axis=-1), axis=-1, where=where)
    if where is not None:
        where = jnp.any(where, axis=-1)
    return _safe_reduce(loss, where=where, reduce_fn=reduce_fn)


def _reduce_loss(loss, reduction, axis=None):
    if reduction == "mean":
        return jnp.mean(loss, axis=axis)
    if reduction == "sum":
        return jnp.sum(loss, axis=axis)
    if reduction == "none":
        return loss
    raise ValueError(f"Unsupported reduction: {reduction}")


def dice_loss(predictions, targets, *, class_weights=None, smooth=1., alpha=0.5, beta=0.5,
              apply_softmax=True, reduction="mean", ignore_background=False, axis=None):
    """Soft Dice (Tversky for ``alpha != beta``) loss for segmentation, per class then
    reduced over classes.

    Args:
        predictions: logits ``[batch, ..., classes]`` (or probabilities when
            ``apply_softmax=False``; one class means sigmoid).
        targets: one-hot targets of the same shape.
        class_weights: optional ``[classes]`` weights.
        smooth: added to numerator and denominator.
        alpha: weight of false positives.
        beta: weight of false negatives.
        apply_softmax: apply softmax (sigmoid for one class) to ``predictions``.
        reduction: ``'mean'``, ``'sum'`` or ``'none'`` over classes.
        ignore_background: drop class 0.
        axis: summed axes (default: all but the first and last).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> t = jnp.array([[[1., 0.], [0., 1.]]])
        >>> optax.losses.dice_loss(t * 100, t, smooth=0.)
        Array([0.], dtype=float32)
    """
    predictions, targets = jnp.asarray(predictions), jnp.asarray(targets)
    if predictions.ndim == targets.ndim - 1:
        predictions = predictions[..., None]
    if targets.ndim == predictions.ndim - 1:
        targets = targets[..., None]
    if predictions.shape != targets.shape:
        raise ValueError(f"Shape mismatch: got {predictions.shape} and {targets.shape}.")
    if not apply_softmax:
        sums = jnp.sum(predictions, axis=-1)
        if not jnp.allclose(sums, 1.0, rtol=1e-5):
            raise ValueError(
                "When apply_softmax=False, predictions must be valid probability "
                "distributions that sum to 1 along the class axis. Found sum range: "
                f"[{jnp.min(sums):.6f}, {jnp.max(sums):.6f}]")
        probs = predictions
    elif predictions.shape[-1] == 1:
        probs = nn.sigmoid(predictions)
    else:
        probs = nn.softmax(predictions, axis=-1)
    axis = tuple(range(1, probs.ndim - 1)) if axis is None else axis
    inter = jnp.sum(probs * targets, axis=axis)
    pred_sum = jnp.sum(probs, axis=axis)
    target_sum = jnp.sum(targets, axis=axis)
    denom = inter + alpha * (pred_sum - inter) + beta * (target_sum - inter) + smooth
    loss = 1.0 - (inter + smooth) / denom
    if class_weights is not None:
        if jnp.ndim(class_weights) != 1:
            raise ValueError("Expected the input to have rank 1, got "
                             f"{jnp.ndim(class_weights)} instead")
        loss = loss * class_weights
    if ignore_background and probs.shape[-1] > 1:
        loss = loss[..., 1:]
    return _reduce_loss(loss, reduction, axis=-1)


def multiclass_generalized_dice_loss(predictions, targets, *, smooth=1., apply_softmax=True,
                                     ignore_background=False):
    """Dice loss with classes weighted by inverse squared frequency, averaged to a scalar.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> t = jnp.array([[[1., 0.], [0., 1.]]])
        >>> optax.losses.multiclass_generalized_dice_loss(t * 100, t, smooth=0.)
        Array(0., dtype=float32)
    """
    if jnp.shape(predictions) != jnp.shape(targets):
        raise ValueError(f"Shape mismatch: got {jnp.shape(predictions)} and "
                         f"{jnp.shape(targets)}.")
    freq = jnp.sum(targets, axis=tuple(range(targets.ndim - 1)))
    w = 1.0 / (freq ** 2 + 1e-7)
    w = w / jnp.sum(w) * len(w)
    return jnp.mean(dice_loss(predictions, targets, class_weights=w, smooth=smooth,
                              apply_softmax=apply_softmax, reduction="none",
                              ignore_background=ignore_background))


def binary_dice_loss(predictions, targets, *, smooth=1., apply_sigmoid=True):
    """Dice loss for one foreground class (logits ``[...]`` or ``[..., 1]``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.losses.binary_dice_loss(jnp.array([[100., -100.]]), jnp.array([[1., 0.]]),
        ...                               smooth=0.)
        Array([0.], dtype=float32)
    """
    predictions, targets = jnp.asarray(predictions), jnp.asarray(targets)
    if predictions.ndim == targets.ndim and predictions.shape[-1] != 1:
        predictions, targets = predictions[..., None], targets[..., None]
    return dice_loss(predictions, targets, smooth=smooth, apply_softmax=apply_sigmoid,
                     reduction="mean")


def ntxent(embeddings, labels, temperature=0.07):
    """Normalized temperature-scaled cross-entropy (SimCLR's NT-Xent) over a batch of
    embeddings; rows with equal ``labels`` are positives.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> e = jnp.array([[1., 0.], [1., 0.1], [0., 1.], [0.1, 1.]])
        >>> float(optax.ntxent(e, jnp.array([0, 0, 1, 1]))) < 0.01
        True
    """
    embeddings = _check_floating(embeddings, "embeddings", "ntxent")
    labels = jnp.asarray(labels)
    if labels.shape[0] != embeddings.shape[0]:
        raise ValueError("Labels and embeddings must have the same leading dimension, found "
                         f"{labels.shape[0]} for labels and {embeddings.shape[0]} for "
                         "embeddings.")
    xcs = cosine_similarity(embeddings[None, :, :], embeddings[:, None, :],
                            epsilon=jnp.finfo(embeddings.dtype).eps) / temperature
    matches = jnp.expand_dims(labels, 1) == jnp.expand_dims(labels, 0)
    diffs = matches ^ 1
    matches = jnp.bool_(matches - jnp.eye(matches.shape[0]))    # no self similarity
    xcs_diffs = jnp.where(diffs == 1, xcs, -jnp.inf)
    xcs_matches = jnp.where(matches == 1, xcs, -jnp.inf)
    xcs_max = jnp.max(jnp.concatenate((xcs_diffs, xcs_matches), axis=-1), axis=1,
                      keepdims=True)
    shift_diffs = xcs_diffs - lax.stop_gradient(xcs_max)
    shift_matches = xcs_matches - lax.stop_gradient(xcs_max)
    denom = jnp.sum(jnp.exp(shift_diffs), axis=1, keepdims=True) + jnp.exp(shift_matches)
    log_softm = shift_matches - jnp.log(denom)
    return -jnp.where(matches == 1, log_softm, 0.0).sum() / matches.sum()


def triplet_margin_loss(anchors, positives, negatives, axis=-1, norm_degree=2, margin=1.0,
                        eps=1e-6):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the ``norm_degree`` distance.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> a = jnp.zeros((1, 2))
        >>> optax.losses.triplet_margin_loss(a, a, a + 3.)
        Array([0.], dtype=float32)
    """
    for name, x in (("anchors", anchors), ("positives", positives), ("negatives", negatives)):
        _check_floating(x, name, "triplet_margin_loss")

    def dist(x):
        return jnp.power(jnp.power(anchors - x, norm_degree).sum(axis) + eps, 1 / norm_degree)
    return jnp.maximum(dist(positives) - dist(negatives) + margin, 0)


def smooth_labels(labels, alpha, *, axis=-1, where=None):
    """Label smoothing: ``(1 - alpha) * labels + alpha / num_categories``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.smooth_labels(jnp.array([1., 0.]), 0.5)
        Array([0.75, 0.25], dtype=float32)
    """
    labels = _check_floating(labels, "labels", "smooth_labels")
    n = jnp.size(labels, axis) if where is None else jnp.sum(where, axis, keepdims=True)
    return (1.0 - alpha) * labels + alpha / n
