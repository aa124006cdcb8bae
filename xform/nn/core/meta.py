"""``flax.core.meta``: axis-metadata boxes (``Partitioned``) and the tree helpers that
map over them; the implementation is :mod:`xform.nn._meta`, shared with ``xform.nn``."""
from xform.nn._meta import (  # noqa: F401
    PARTITION_NAME, AxisMetadata, Partitioned, add_axis, get_global_mesh,
    get_partition_spec, get_sharding, global_mesh_defined, is_axis_metadata, map_axis_meta,
    remove_axis, replace_boxed, unbox, with_partitioning)
from xform.nn._meta import __all__  # noqa: F401
