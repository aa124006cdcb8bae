"""``xform.experimental.shard_map.shard_map``: JAX's older import path for ``shard_map``."""
from xform.transforms.shard_map import shard_map  # noqa: F401

__all__ = ["shard_map"]
