"""``xform.nn.pooling``: flax.linen.pooling's names (pooling functions), re-exported
from ``xform.nn``."""
from xform.nn._pooling import avg_pool, max_pool, min_pool, pool  # noqa: F401

__all__ = ["avg_pool", "max_pool", "min_pool", "pool"]
