"""``xform.experimental.sparse``: batched-COO and -CSR sparse arrays (:class:`BCOO`,
:class:`BCSR`; the older 2-D :class:`COO`/:class:`CSR`/:class:`CSC`), their operations,
``sparsify``, sparsity-aware ``grad``/``jacfwd``/``jacrev`` and ``linalg`` (``spsolve``,
``lobpcg_standard``), as ``jax.experimental.sparse``.

Every operation is a composition of xform's lax/numpy (gather, scatter-add, sort,
dot_general), so jit, vmap and grad apply to it like to any code (see
docs/architecture.md, "Sparse arrays").
"""
from xform.experimental.sparse._ad import grad, jacfwd, jacobian, jacrev, value_and_grad
from xform.experimental.sparse._api import empty, eye, todense
from xform.experimental.sparse._bcoo import BCOO, bcoo_extract, bcoo_fromdense, bcoo_todense
from xform.experimental.sparse._bcsr import (BCSR, bcsr_broadcast_in_dim, bcsr_concatenate,
                                             bcsr_dot_general, bcsr_eliminate_zeros,
                                             bcsr_extract, bcsr_fromdense,
                                             bcsr_sum_duplicates, bcsr_todense)
from xform.experimental.sparse._coo import (COO, CSC, CSR, coo_fromdense, coo_matmat,
                                            coo_matvec, coo_todense, csr_fromdense, csr_matmat,
                                            csr_matvec, csr_todense)
from xform.experimental.sparse._dot import (bcoo_conv_general_dilated, bcoo_dot_general,
                                            bcoo_dot_general_sampled, bcoo_spdot_general)
from xform.experimental.sparse._ops import (bcoo_eliminate_zeros, bcoo_multiply_dense,
                                            bcoo_multiply_sparse, bcoo_reduce_sum,
                                            bcoo_sort_indices, bcoo_sum_duplicates,
                                            bcoo_transpose)
from xform.experimental.sparse._ops2 import (bcoo_broadcast_in_dim, bcoo_concatenate,
                                             bcoo_reshape, fromdense, random_bcoo)
from xform.experimental.sparse._slicing import (bcoo_dynamic_slice, bcoo_gather, bcoo_rev,
                                                bcoo_slice, bcoo_squeeze, bcoo_update_layout)
from xform.experimental.sparse._transform import sparsify
from xform.experimental.sparse import linalg
from xform.experimental.sparse._util import (CuSparseEfficiencyWarning, JAXSparse,
                                             SparseEfficiencyError, SparseEfficiencyWarning)

__all__ = [
    "BCOO", "BCSR", "COO", "CSC", "CSR", "CuSparseEfficiencyWarning", "JAXSparse",
    "SparseEfficiencyError", "SparseEfficiencyWarning", "bcoo_broadcast_in_dim",
    "bcoo_concatenate", "bcoo_conv_general_dilated", "bcoo_dot_general",
    "bcoo_dot_general_sampled", "bcoo_dynamic_slice", "bcoo_eliminate_zeros",
    "bcoo_extract", "bcoo_fromdense", "bcoo_gather", "bcoo_multiply_dense",
    "bcoo_multiply_sparse", "bcoo_reduce_sum", "bcoo_reshape", "bcoo_rev", "bcoo_slice",
    "bcoo_sort_indices", "bcoo_spdot_general", "bcoo_squeeze", "bcoo_sum_duplicates",
    "bcoo_todense", "bcoo_transpose", "bcoo_update_layout", "bcsr_broadcast_in_dim",
    "bcsr_concatenate", "bcsr_dot_general", "bcsr_eliminate_zeros", "bcsr_extract",
    "bcsr_fromdense", "bcsr_sum_duplicates", "bcsr_todense", "coo_fromdense", "coo_matmat",
    "coo_matvec", "coo_todense", "csr_fromdense", "csr_matmat", "csr_matvec", "csr_todense",
    "empty", "eye", "fromdense", "grad", "jacfwd", "jacobian", "jacrev", "linalg", "random_bcoo",
    "sparsify", "todense", "value_and_grad",
]
