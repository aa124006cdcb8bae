"""``xform.scipy.optimize``: ``minimize`` (BFGS) and ``line_search``, as
``jax.scipy.optimize``."""
from xform.scipy.optimize._line_search import line_search
from xform.scipy.optimize._minimize import OptimizeResults, minimize

__all__ = ["OptimizeResults", "line_search", "minimize"]
