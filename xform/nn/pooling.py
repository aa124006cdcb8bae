"""``xform.nn.pooling``: flax.linen.pooling's names (pooling functions), re-exported
from ``xform.nn``."""
from xform.nn import (  # noqa: F401
    avg_pool, max_pool, pool)

__all__ = ["avg_pool", "max_pool", "pool"]
