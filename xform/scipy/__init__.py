"""``xform.scipy``: the parts of SciPy's API that JAX provides (``scipy.linalg``)."""
from xform.scipy import linalg  # noqa: F401
