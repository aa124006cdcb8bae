"""``xform.scipy.sparse``: JAX's ``jax.scipy.sparse`` (the iterative solvers of
``linalg``)."""
from xform.scipy.sparse import linalg  # noqa: F401
