"""``xform.scipy.cluster``: vector quantization (``vq.vq``), as ``jax.scipy.cluster``."""
from xform.scipy.cluster import vq  # noqa: F401
