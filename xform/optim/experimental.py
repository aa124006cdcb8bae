"""``optax.experimental``: Optax's experimental modules (``aggregating``)."""
from xform.optim import _aggregating as aggregating

__all__ = ["aggregating"]
