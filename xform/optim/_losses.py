"""The regression and cross-entropy losses of ``optax.losses`` (unreduced, as in Optax),
CTC included."""
import xform.numpy as jnp
from xform import lax, nn

__all__ = ["softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
           "sigmoid_binary_cross_entropy", "l2_loss", "squared_error", "huber_loss",
           "log_cosh", "cosine_similarity", "cosine_distance", "kl_divergence",
           "kl_divergence_with_log_targets", "hinge_loss", "ctc_loss",
           "ctc_loss_with_forward_probs"]


def _check_float(x, name, fn):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"{fn}: `{name}` must have a floating dtype, got {x.dtype}")
    return x


def _errors(predictions, targets, fn):
    predictions = _check_float(predictions, "predictions", fn)
    if targets is None:
        return predictions
    targets = jnp.asarray(targets)
    return predictions - targets


def squared_error(predictions, targets=None):
    """``(predictions - targets) ** 2`` elementwise.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.squared_error(jnp.array([1., 3.]), jnp.array([0., 1.]))
        Array([1., 4.], dtype=float32)
    """
    if targets is not None and jnp.shape(predictions) != jnp.shape(targets):
        raise ValueError(f"squared_error: predictions shape {jnp.shape(predictions)} and "
                         f"targets shape {jnp.shape(targets)} differ")
    return _errors(predictions, targets, "squared_error") ** 2


def l2_loss(predictions, targets=None):
    """Half the squared error.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.l2_loss(jnp.array([2.]))
        Array([2.], dtype=float32)
    """
    return 0.5 * squared_error(jnp.asarray(predictions), targets)


def huber_loss(predictions, targets=None, *, delta=1.0):
    """Quadratic for errors below ``delta``, linear above.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.huber_loss(jnp.array([0.5, 3.]))
        Array([0.125, 2.5  ], dtype=float32)
    """
    abs_err = jnp.abs(_errors(predictions, targets, "huber_loss"))
    quad = jnp.minimum(abs_err, delta)
    return 0.5 * quad ** 2 + delta * (abs_err - quad)


def log_cosh(predictions, targets=None):
    """``log(cosh(error))``, computed without overflow.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.log_cosh(jnp.array([0.]))
        Array([0.], dtype=float32)
    """
    e = _errors(predictions, targets, "log_cosh")
    return jnp.logaddexp(e, -e) - jnp.log(2.0).astype(e.dtype)


def cosine_similarity(predictions, targets, *, epsilon=0.0, axis=-1, where=None):
    """Cosine of the angle between ``predictions`` and ``targets`` along ``axis``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.cosine_similarity(jnp.array([1., 0.]), jnp.array([2., 0.]))
        Array(1., dtype=float32)
    """
    a = _check_float(predictions, "predictions", "cosine_similarity")
    b = _check_float(targets, "targets", "cosine_similarity")
    an = jnp.sqrt(jnp.clip(jnp.sum(jnp.square(a), axis=axis, where=where, keepdims=True),
                           epsilon))
    bn = jnp.sqrt(jnp.clip(jnp.sum(jnp.square(b), axis=axis, where=where, keepdims=True),
                           epsilon))
    return jnp.sum((a / an) * (b / bn), axis=axis, where=where)


def cosine_distance(predictions, targets, *, epsilon=0.0, axis=-1, where=None):
    """``1 - cosine_similarity``."""
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis, where=where)


def sigmoid_binary_cross_entropy(logits, labels):
    """Binary cross-entropy of sigmoid(logits) against (possibly soft) labels in [0, 1].

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.sigmoid_binary_cross_entropy(jnp.array([0.]), jnp.array([1.]))
        Array([0.6931472], dtype=float32)
    """
    logits = _check_float(logits, "logits", "sigmoid_binary_cross_entropy")
    labels = jnp.asarray(labels).astype(logits.dtype)
    return -labels * nn.log_sigmoid(logits) - (1.0 - labels) * nn.log_sigmoid(-logits)


def hinge_loss(predictor_outputs, targets):
    """``max(0, 1 - outputs * targets)`` with targets in {-1, 1}.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.hinge_loss(jnp.array([0.5, 2.]), jnp.array([1., 1.]))
        Array([0.5, 0. ], dtype=float32)
    """
    return jnp.maximum(0, 1 - predictor_outputs * targets)


def softmax_cross_entropy(logits, labels, axis=-1, where=None):
    """Cross-entropy between softmax(logits) and a label distribution along ``axis``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.softmax_cross_entropy(jnp.zeros((1, 2)), jnp.array([[1., 0.]]))
        Array([0.6931472], dtype=float32)
    """
    logits = _check_float(logits, "logits", "softmax_cross_entropy")
    labels = jnp.asarray(labels)
    if logits.shape != labels.shape:
        raise ValueError(f"softmax_cross_entropy: logits shape {logits.shape} and labels "
                         f"shape {labels.shape} differ (use "
                         "softmax_cross_entropy_with_integer_labels for class indices)")
    if where is not None and where.ndim != logits.ndim:
        where = jnp.expand_dims(where, axis)
    log_probs = nn.log_softmax(logits, axis, where=where)
    return -jnp.sum(labels * log_probs, axis=axis, where=where)


def softmax_cross_entropy_with_integer_labels(logits, labels, axis=-1, where=None):
    """Cross-entropy of softmax(logits) against integer class labels.

    Args:
        logits: ``[..., num_classes]`` floats (classes along ``axis``).
        labels: integer class indices, shaped like ``logits`` without ``axis``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.softmax_cross_entropy_with_integer_labels(jnp.zeros((1, 4)), jnp.array([2]))
        Array([1.3862944], dtype=float32)
    """
    fn = "softmax_cross_entropy_with_integer_labels"
    logits = _check_float(logits, "logits", fn)
    labels = jnp.asarray(labels)
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(f"{fn}: `labels` must be integer class indices, got dtype "
                         f"{labels.dtype} (use softmax_cross_entropy for one-hot labels)")
    if where is not None and where.ndim != logits.ndim:
        where = jnp.expand_dims(where, axis)
    if isinstance(axis, int):
        axis = axis + logits.ndim if axis < 0 else axis
        if not 0 <= axis < logits.ndim:
            raise ValueError(f"{fn}: axis {axis} is out of bounds for logits of rank "
                             f"{logits.ndim}")
    elif isinstance(axis, tuple):
        logit_axes = tuple(a % logits.ndim for a in axis)
        batch = tuple(a for a in range(logits.ndim) if a not in logit_axes)
        logits = logits.transpose(batch + logit_axes)
        logits = logits.reshape(logits.shape[:len(batch)] + (-1,))
        if where is not None:
            where = where.transpose(batch + logit_axes)
            where = where.reshape(where.shape[:len(batch)] + (-1,))
        axis = len(batch)
    else:
        raise ValueError(f"Keyword argument 'axis' must be of type 'int' or 'tuple[int, ...]' "
                         f"but actual type is {type(axis)}.")
    expected = logits.shape[:axis] + logits.shape[axis + 1:]
    if labels.shape != expected:
        raise ValueError(f"{fn}: labels shape {labels.shape} does not match logits shape "
                         f"{logits.shape} without the class axis {axis} (expected {expected})")
    label_logits = jnp.take(jnp.take_along_axis(logits, jnp.expand_dims(labels, axis),
                                                axis=axis), 0, axis=axis)
    out = nn.logsumexp(logits, axis=axis, where=where) - label_logits
    if where is not None:
        out = jnp.where(jnp.any(where, axis), out, 0.0)
    return out


def kl_divergence(log_predictions, targets, axis=-1, where=None):
    """KL(targets || predictions) with predictions given as log-probabilities.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> p = jnp.array([0.5, 0.5])
        >>> optax.kl_divergence(jnp.log(p), p)
        Array(0., dtype=float32)
    """
    log_predictions = _check_float(log_predictions, "log_predictions", "kl_divergence")
    targets = _check_float(targets, "targets", "kl_divergence")
    loss = targets * (jnp.where(targets == 0, 0, jnp.log(targets)) - log_predictions)
    return jnp.sum(loss, axis=axis, where=where)


def kl_divergence_with_log_targets(log_predictions, log_targets, axis=-1, where=None):
    """KL divergence with both arguments as log-probabilities."""
    loss = jnp.exp(log_targets) * (log_targets - log_predictions)
    return jnp.sum(loss, axis=axis, where=where)


def ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings, *,
                                blank_id=0, log_epsilon=-1e5):
    """CTC loss and the forward (alpha) log-probabilities of the blank and label states.

    Args:
        logits: ``[B, T, K]`` unnormalized scores.
        logit_paddings: ``[B, T]``, 1.0 at padded frames.
        labels: ``[B, N]`` integer labels (right-padded).
        label_paddings: ``[B, N]``, 1.0 at padded labels.
        blank_id: the class id of the blank symbol.
        log_epsilon: a stand-in for ``log(0)``.

    Returns:
        ``(loss [B], logalpha_blank [T, B, N+1], logalpha_nonblank [T, B, N])``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> loss, blank, emit = optax.ctc_loss_with_forward_probs(
        ...     jnp.zeros((1, 3, 2)), jnp.zeros((1, 3)), jnp.array([[1]]), jnp.zeros((1, 1)))
        >>> blank.shape, emit.shape
        ((3, 1, 2), (3, 1, 1))
    """
    logits, labels = jnp.asarray(logits), jnp.asarray(labels)
    if logits.ndim != 3 or labels.ndim != 2:
        raise ValueError(f"ctc_loss: logits must be [B, T, K] and labels [B, N], got shapes "
                         f"{logits.shape} and {labels.shape}")
    if labels.shape != label_paddings.shape or logits.shape[:2] != logit_paddings.shape:
        raise ValueError("ctc_loss: paddings must match labels / logits[..., 0] in shape, got "
                         f"{label_paddings.shape} vs {labels.shape} and "
                         f"{logit_paddings.shape} vs {logits.shape[:2]}")
    b, _, k = logits.shape
    if labels.shape[0] != b:
        raise ValueError(f"Expected `labels` to have batch size {b}, got {labels.shape[0]}.")
    n = labels.shape[1]
    logprobs = nn.log_softmax(logits)
    labellens = n - jnp.sum(label_paddings, axis=1).astype(jnp.int32)
    repeat = (labels[:, :-1] == labels[:, 1:]).astype(jnp.float32)
    repeat = jnp.pad(repeat, ((0, 0), (0, 1)))
    phi = jnp.transpose(logprobs[:, :, blank_id:blank_id + 1], (1, 0, 2))
    emit = jnp.transpose(jnp.einsum("btk,bnk->btn", logprobs, nn.one_hot(labels, k)), (1, 0, 2))
    phi0 = (jnp.ones((b, n + 1)) * log_epsilon).at[:, 0].set(0.0)
    emit0 = jnp.ones((b, n)) * log_epsilon

    def upd_phi(p, added):
        return jnp.concatenate([p[:, :1], jnp.logaddexp(p[:, 1:], added)], axis=-1)

    def body(prev, x):
        prev_phi, prev_emit = prev
        orig = prev_phi
        prev_phi = upd_phi(prev_phi, prev_emit + log_epsilon * repeat)
        lp_emit, lp_phi, pad = x
        next_emit = jnp.logaddexp(prev_phi[:, :-1] + lp_emit, prev_emit + lp_emit)
        next_phi = upd_phi(prev_phi + lp_phi, prev_emit + lp_phi + log_epsilon * (1.0 - repeat))
        pad = pad.reshape((b, 1))
        next_emit = pad * prev_emit + (1.0 - pad) * next_emit
        next_phi = pad * orig + (1.0 - pad) * next_phi
        return (next_phi, next_emit), (next_phi, next_emit)

    _, (logalpha_phi, logalpha_emit) = lax.scan(
        body, (phi0, emit0), (emit, phi, jnp.transpose(logit_paddings, (1, 0))))
    last = upd_phi(logalpha_phi[-1], logalpha_emit[-1])
    logalpha_phi = logalpha_phi.at[-1].set(last)
    loss = -jnp.einsum("bn,bn->b", last, nn.one_hot(labellens, n + 1))
    return loss, logalpha_phi, logalpha_emit


def ctc_loss(logits, logit_paddings, labels, label_paddings, *, blank_id=0, log_epsilon=-1e5):
    """Connectionist temporal classification loss, one value per sequence (the first
    output of :func:`ctc_loss_with_forward_probs`, whose arguments it takes).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.ctc_loss(jnp.zeros((1, 2, 2)), jnp.zeros((1, 2)), jnp.array([[1]]),
        ...                jnp.zeros((1, 1))).shape
        (1,)
    """
    return ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings,
                                       blank_id=blank_id, log_epsilon=log_epsilon)[0]
