"""``jax.ad_checkpoint`` names: ``checkpoint``, ``remat``, ``checkpoint_name``,
``checkpoint_policies`` (implemented in ``xform.transforms.checkpoint``)."""
from xform.transforms.checkpoint import (checkpoint, checkpoint_name, checkpoint_policies,
                                         remat)

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
