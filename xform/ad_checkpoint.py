"""``jax.ad_checkpoint`` names: ``checkpoint``, ``remat``, ``checkpoint_name``,
``checkpoint_policies``, ``print_saved_residuals`` (implemented in
``xform.transforms.checkpoint``)."""
from xform.transforms.checkpoint import (checkpoint, checkpoint_name, checkpoint_policies,
                                         print_saved_residuals, remat)

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "print_saved_residuals",
           "remat"]
