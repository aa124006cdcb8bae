"""Loss functions (``optax.losses``): elementwise or per-example losses, unreduced, as
in Optax (reduce with ``.mean()``)."""
from xform.optim._losses import (  # noqa: F401
    softmax_cross_entropy, softmax_cross_entropy_with_integer_labels,
    sigmoid_binary_cross_entropy, l2_loss, squared_error, huber_loss, log_cosh,
    cosine_similarity, cosine_distance, kl_divergence, kl_divergence_with_log_targets,
    hinge_loss, ctc_loss, ctc_loss_with_forward_probs)
from xform.optim._losses_more import (  # noqa: F401
    safe_softmax_cross_entropy, multiclass_hinge_loss, perceptron_loss,
    multiclass_perceptron_loss, sparsemax_loss, multiclass_sparsemax_loss,
    poly_loss_cross_entropy, generalized_kl_divergence, convex_kl_divergence,
    sigmoid_focal_loss, make_fenchel_young_loss, ranking_softmax_loss, dice_loss,
    multiclass_generalized_dice_loss, binary_dice_loss, ntxent, triplet_margin_loss,
    smooth_labels)

__all__ = [n for n in dir() if not n.startswith("_")]
