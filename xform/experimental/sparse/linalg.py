"""``xform.experimental.sparse.linalg``: a sparse direct solve (:func:`spsolve`) and the
top-k symmetric eigensolver :func:`lobpcg_standard`, as ``jax.experimental.sparse.linalg``.

``spsolve`` is what JAX does on CPU: the factorization is scipy's, reached through a
``pure_callback``. JAX declares a primitive with a JVP (``dx = A^-1 (db - dA x)``) and a
transpose (solve with ``A^T``); here ``lax.custom_linear_solve`` with the CSR product as
``matvec`` gives exactly those rules (implicit differentiation through the matvec's
``data``), so jvp, grad and jit need no new primitive; the callback is a ``custom_vmap``
whose rule raises JAX's missing-batching-rule error, as vmap of JAX's spsolve does. ``lobpcg_standard`` is JAX's
algorithm (SVQB orthonormalization, Householder basis extension, Rayleigh-Ritz on
``[X, P, R]``) written over xform's numpy, so the iterates and counts follow JAX's.
"""
import functools

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from xform import lax
from xform import numpy as jnp
from xform.experimental.sparse._coo import _csr_product
from xform.interpreters.callback import pure_callback
from xform.lax.control_flow.solves import custom_linear_solve
from xform.transforms.custom_batching import custom_vmap
from xform.transforms.jit import ShapeDtypeStruct, jit


# ---- spsolve ----

def _check_spsolve(data, indices, indptr, b, reorder):
    """JAX's abstract-eval checks, with its messages."""
    if data.dtype != b.dtype:
        raise ValueError(f"data types do not match: {data.dtype=} {b.dtype=}")
    if not (jnp.issubdtype(indices.dtype, jnp.integer)
            and jnp.issubdtype(indptr.dtype, jnp.integer)):
        raise ValueError("index arrays must be integer typed; got "
                         f"{indices.dtype=} {indptr.dtype=}")
    if not data.ndim == indices.ndim == indptr.ndim == b.ndim == 1:
        raise ValueError("Arrays must be one-dimensional. "
                         f"Got {data.shape=} {indices.shape=} {indptr.shape=} {b.shape=}")
    if indptr.size != b.size + 1 or data.shape != indices.shape:
        raise ValueError("Invalid CSR buffer sizes: "
                         f"{data.shape=} {indices.shape=} {indptr.shape=}")
    if reorder not in [0, 1, 2, 3]:
        raise ValueError(f"{reorder=} not valid, must be one of [1, 2, 3, 4]")


def _scipy_solve(data, indices, indptr, b, *, transpose):
    n = b.shape[0]
    A = scipy.sparse.csr_matrix((np.asarray(data), np.asarray(indices), np.asarray(indptr)),
                                shape=(n, n))
    if transpose:
        A = A.T.tocsr()
    return np.asarray(scipy.sparse.linalg.spsolve(A, np.asarray(b))).astype(b.dtype)


def _no_batching(axis_size, in_batched, *args):
    raise NotImplementedError("Batching rule for 'spsolve' not implemented")


def _host_solve(data, indices, indptr, b, transpose):
    # JAX's spsolve primitive has no batching rule: vmap over any operand raises its error
    solve = custom_vmap(lambda *bufs: pure_callback(
        functools.partial(_scipy_solve, transpose=transpose),
        ShapeDtypeStruct(b.shape, b.dtype), *bufs))
    solve.def_vmap(_no_batching)
    return solve(data, indices, indptr, b)


def spsolve(data, indices, indptr, b, tol=1e-6, reorder=1):
    """Solve ``A x = b`` for a square CSR matrix ``A = (data, indices, indptr)``.

    As JAX on CPU, the solve is scipy's ``spsolve`` (via a host callback); ``tol`` and
    ``reorder`` (JAX's cuSOLVER options) are validated and otherwise unused.

    Args:
      data, indices, indptr: the CSR buffers of the ``(n, n)`` matrix.
      b: the right-hand side, shape ``(n,)``, of ``data``'s dtype.
      tol: singularity tolerance (GPU only in JAX).
      reorder: fill-in reordering scheme, one of 0..3 (GPU only in JAX).

    Returns:
      ``x`` of ``b``'s shape and dtype; differentiable in ``data`` and ``b``.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCSR.fromdense(jnp.array([[2., 0.], [1., 4.]]))
    >>> sparse.linalg.spsolve(M.data, M.indices, M.indptr, jnp.array([2., 9.])).tolist()
    [1.0, 2.0]
    """
    data, indices, indptr, b = map(jnp.asarray, (data, indices, indptr, b))
    _check_spsolve(data, indices, indptr, b, reorder)
    float(tol)
    n = b.shape[0]
    return custom_linear_solve(
        lambda x: _csr_product(data, indices, indptr, x, n, False), b,
        solve=lambda _, rhs: _host_solve(data, indices, indptr, rhs, False),
        transpose_solve=lambda _, rhs: _host_solve(data, indices, indptr, rhs, True))


# ---- lobpcg_standard ----

def _mm(a, b):
    return lax.dot(a, b, precision=(lax.Precision.HIGHEST, lax.Precision.HIGHEST))


def _colnorms(x):
    return jnp.linalg.norm(x, ord=2, axis=0, keepdims=True)


def _eigh_descending(a):
    w, v = jnp.linalg.eigh(a)
    return w[::-1], v[:, ::-1]


def _svqb(x):
    """One SVQB pass: orthonormalize ``x``'s columns through the eigenbasis of the small
    Gram matrix, zeroing the columns a rank-deficient ``x`` cannot span."""
    x = x / jnp.where(_colnorms(x) == 0, 1.0, _colnorms(x))
    gram = _mm(x.T, x)
    w, v = _eigh_descending(gram)
    tau = jnp.finfo(x.dtype).eps * w[0]
    scale = jnp.where(tau > 0, jnp.maximum(w, tau), 1.0) ** -0.5
    out = _mm(x, v * scale[None, :])
    keep = ((w > tau) * (jnp.diag(gram) > 0.0))[None, :]
    out = out * keep.astype(out.dtype)
    keep = keep * (_colnorms(out) > 0.0)
    return out / jnp.where(keep, _colnorms(out), 1.0)


def _orthonormalize(x):
    return _svqb(_svqb(x))


def _project_out(basis, u):
    """``u``'s component orthogonal to the orthonormal ``basis`` (columns that were
    mostly inside it are dropped: orthogonality over rank)."""
    for _ in range(2):
        u = _orthonormalize(u - _mm(basis, _mm(basis.T, u)))
    for _ in range(2):
        u = u - _mm(basis, _mm(basis.T, u))
    return u * (_colnorms(u) >= 0.99).astype(u.dtype)


def _extend_basis(x, m):
    """``m`` columns completing the orthonormal ``x`` (n, k), from a block Householder
    reflector (deterministic, unlike projecting out a random block)."""
    n, k = x.shape
    top, bottom = x[:k], x[k:]
    u, s, vt = jnp.linalg.svd(top)
    y = jnp.concatenate([top + _mm(u, vt), bottom], axis=0)
    other = jnp.concatenate([jnp.eye(m, dtype=x.dtype),
                             jnp.zeros((n - k - m, m), dtype=x.dtype)], axis=0)
    w = _mm(y, vt.T * ((2 * (1 + s)) ** -0.5)[None, :])
    h = -2 * _mm(_mm(w, w[k:, :].T), other)
    return h.at[k:].add(other)


def _check_lobpcg(A, X):
    n, k = X.shape
    if k == 0:
        raise ValueError(f"must have search dim > 0, got {k}")
    if k * 5 >= n:
        raise ValueError(f"expected search dim * 5 < matrix dim (got {k * 5}, {n})")
    probe = A(jnp.zeros((n, 1), dtype=X.dtype))
    if probe.dtype != X.dtype:
        raise ValueError(f"A, X must have same dtypes (were {probe.dtype}, {X.dtype})")
    if probe.shape != (n, 1):
        raise ValueError(f"A must be ({n}, {n}) matrix A, got output {probe.shape}")


@functools.partial(jit, static_argnames=("A", "m"))
def _lobpcg(A, X, m, tol):
    n, k = X.shape
    _check_lobpcg(A, X)
    if tol is None:
        tol = float(jnp.finfo(X.dtype).eps)
    X = _orthonormalize(X)
    P = _extend_basis(X, k)
    AX = A(X)
    theta = jnp.sum(X * AX, axis=0, keepdims=True)

    def step(state):
        i, X, P, R, _, _ = state
        R = _project_out(jnp.concatenate((X, P), axis=1), R)
        XPR = jnp.concatenate((X, P, R), axis=1)
        theta, Q = _eigh_descending(_mm(XPR.T, A(XPR)))   # Rayleigh-Ritz on [X, P, R]
        B = Q[:, :k]
        X = _mm(XPR, B / _colnorms(B))
        X = X / _colnorms(X)
        q, _ = jnp.linalg.qr(Q[:k, k:].T)
        P = _mm(XPR, _mm(Q[:, k:], q))   # the new directions, orthogonal to X's
        P = P / jnp.where(_colnorms(P) == 0, 1.0, _colnorms(P))
        AX = A(X)
        R = AX - theta[None, :k] * X
        # converged: residual below tol times the worst-case rounding of an exact pair
        bound = (jnp.linalg.norm(AX, ord=2, axis=0) + theta[:k]) * n * 10
        converged = jnp.sum(jnp.linalg.norm(R, ord=2, axis=0) < tol * bound)
        return i + 1, X, P, R, converged, theta[None, :k]

    state = (0, X, P, AX - theta * X, 0, theta)
    i, X, _, _, _, theta = lax.while_loop(lambda s: (s[0] < m) & (s[4] < k), step, state)
    return theta[0, :], X, i


def lobpcg_standard(A, X, m=100, tol=None):
    """The top-``k`` eigenpairs of a symmetric (Hermitian) ``A`` by LOBPCG (JAX's
    variant: an orthonormal block basis always, no soft locking, no preconditioner).

    Args:
      A: an ``(n, n)`` array, or a function computing ``A @ X`` for ``X`` of shape
        ``(n, j)`` (hashable: it is a static argument of the jitted loop).
      X: ``(n, k)`` initial directions, linearly independent, with ``0 < 5 k < n``.
      m: the maximum number of iterations.
      tol: a pair ``(lambda, v)`` has converged when ``|A v - lambda v|`` is below
        ``tol * 10 * n * (lambda + |A v|)``; None: ``A``'s dtype's epsilon. The loop
        stops early once all ``k`` have.

    Returns:
      ``(theta, U, i)``: the ``k`` eigenvalues (descending), the ``(n, k)``
      eigenvectors and the number of iterations done.

    Raises:
      ValueError: ``A``/``X`` dtypes or sizes disagree, ``k == 0`` or ``5 k >= n``.
    """
    if isinstance(A, (np.ndarray, jnp.ndarray)):
        n = np.shape(X)[0] if np.ndim(X) else None
        if np.shape(A) != (n, n):   # JAX fails inside lax.dot here
            raise ValueError(f"A must be ({n}, {n}) matrix A, got shape {np.shape(A)} for "
                             f"X of shape {np.shape(X)}")
        return _lobpcg_matrix(A, X, m, tol)
    return _lobpcg(A, X, m, tol)


@functools.partial(jit, static_argnames=("m",))
def _lobpcg_matrix(A, X, m, tol):
    return _lobpcg(functools.partial(_mm, A), X, m, tol)
