"""``xform.scipy.integrate``: ``trapezoid``, as ``jax.scipy.integrate`` (the same rule as
``xform.numpy.trapezoid``, re-exported under SciPy's name)."""
from xform.numpy._cumulative import trapezoid

__all__ = ["trapezoid"]
