"""``jax.ad_checkpoint`` names: ``checkpoint``, ``remat``, ``checkpoint_name``,
``checkpoint_policies``, ``print_saved_residuals`` and a policy's answers ``Saveable``,
``Recompute``, ``Offloadable(src, dst)`` (implemented in ``xform.transforms.checkpoint``;
offloading is saving, since xform's backends have one memory space)."""
from xform.transforms.checkpoint import (Offloadable, Recompute, Saveable, checkpoint,
                                         checkpoint_name, checkpoint_policies,
                                         print_saved_residuals, remat)

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name",
           "checkpoint_policies", "print_saved_residuals", "remat"]
