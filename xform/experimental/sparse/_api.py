"""The format-generic functions, as JAX's ``api`` module: ``todense``, and ``empty``/
``eye``, which dispatch on ``sparse_format`` to each format's constructor."""
from functools import partial

from xform.core.trace import concrete_or_raise
from xform.experimental.sparse._bcoo import _bcoo_empty, _bcoo_eye
from xform.experimental.sparse._bcsr import bcsr_empty
from xform.experimental.sparse._coo import coo_empty, coo_eye
from xform.experimental.sparse._util import JAXSparse
from xform.transforms.jit import jit

# The name of the identity call ``todense`` stages for a traced dense argument: sparsify's
# call rule densifies a sparse array reaching it (JAX has a todense primitive for this).
TODENSE_NAME = "_sparse_todense"


def _sparse_todense(x):
    return x


_dense_identity = jit(_sparse_todense)


def todense(arr):
    """The dense array of a sparse array (any format); a dense array is returned as is.
    Inside ``sparsify`` this densifies the argument it is given (so dense-only ops can
    follow).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> sparse.todense(sparse.BCOO.fromdense(jnp.array([0., 3.]))).tolist()
    [0.0, 3.0]
    """
    if isinstance(arr, JAXSparse):
        return arr.todense()
    return _dense_identity(arr)


_EMPTY = {"bcsr": bcsr_empty, "bcoo": _bcoo_empty, "coo": partial(coo_empty, sparse_format="coo"),
          "csr": partial(coo_empty, sparse_format="csr"),
          "csc": partial(coo_empty, sparse_format="csc")}
_EYE = {"bcoo": _bcoo_eye, "coo": partial(coo_eye, sparse_format="coo"),
        "csr": partial(coo_eye, sparse_format="csr"), "csc": partial(coo_eye, sparse_format="csc")}


def empty(shape, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """An all-zero sparse array of ``shape`` in ``sparse_format`` ('bcoo', 'bcsr', 'coo',
    'csr', 'csc'); format-specific keywords (``nse``, ``n_batch``, ``n_dense``) pass on.

    >>> from xform.experimental import sparse
    >>> sparse.empty((2, 3), sparse_format="bcsr", nse=1)
    BCSR(float32[2, 3], nse=1)
    """
    if sparse_format not in _EMPTY:
        raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(_EMPTY)}")
    return _EMPTY[sparse_format](tuple(shape), dtype=dtype, index_dtype=index_dtype, **kwds)


def eye(N, M=None, k=0, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """A 2-D sparse matrix with ones on diagonal ``k`` ('bcoo' takes ``n_batch`` and
    ``n_dense``). As in JAX, 'bcsr' has no eye (KeyError).

    >>> from xform.experimental import sparse
    >>> sparse.eye(3, k=1).todense().tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    """
    N = int(concrete_or_raise(N, "sparse.eye: N must be concrete.\n"))
    M = N if M is None else int(concrete_or_raise(M, "sparse.eye: M must be concrete.\n"))
    k = int(concrete_or_raise(k, "sparse.eye: k must be concrete.\n"))
    return _EYE[sparse_format](N, M, k, dtype=dtype, index_dtype=index_dtype, **kwds)
