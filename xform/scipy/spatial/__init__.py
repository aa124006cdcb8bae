"""``xform.scipy.spatial``: ``transform`` (Rotation, Slerp), as ``jax.scipy.spatial``."""
from xform.scipy.spatial import transform  # noqa: F401
