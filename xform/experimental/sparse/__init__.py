"""``xform.experimental.sparse``: batched-COO sparse arrays, ``sparsify``, and
sparsity-aware ``grad``, as ``jax.experimental.sparse``."""
from xform.experimental.sparse._bcoo import (BCOO, bcoo_extract, bcoo_fromdense,  # noqa: F401
                                             bcoo_todense, empty, eye)
