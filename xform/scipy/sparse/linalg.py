"""``xform.scipy.sparse.linalg``: JAX's iterative solvers ``cg``, ``bicgstab`` and
``gmres`` for ``A x = b`` with ``A`` a matrix or a linear function over pytrees.

Each solver runs inside ``lax.custom_linear_solve`` (as JAX does), so derivatives come
from another solve of the (transposed) system, never from differentiating the
iterations. The iterations follow JAX's (and SciPy's) algorithms step for step.
NB: real dtypes only (xform's ``vdot`` has no complex conjugate yet).
"""
import functools
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core.tree_util import tree_leaves, tree_map, tree_reduce, tree_structure
from xform.scipy import linalg as sp_linalg

__all__ = ["bicgstab", "cg", "gmres"]

_HIGHEST = lax.Precision.HIGHEST
_dot = functools.partial(jnp.dot, precision=_HIGHEST)


def _vdot(x, y):
    return jnp.vdot(x, y, precision=_HIGHEST)


def _vdot_tree(x, y):
    return sum(tree_leaves(tree_map(_vdot, x, y)))


def _vdot_real_part(x, y):
    """``Re(vdot(x, y))`` without the real-imaginary cross terms: a real float, as JAX's
    (the solvers' ``z^H M z`` with ``M`` Hermitian positive definite are real)."""
    result = _vdot(jnp.real(x), jnp.real(y))
    if jnp.iscomplexobj(x) or jnp.iscomplexobj(y):
        result = result + _vdot(jnp.imag(x), jnp.imag(y))
    return result


def _vdot_real_tree(x, y):
    return sum(tree_leaves(tree_map(_vdot_real_part, x, y)))


def _norm(x):
    """A real norm also for complex ``x`` (a complex one broke GMRES's real loop carry)."""
    return jnp.sqrt(_vdot_real_tree(x, x))


def _mul(scalar, tree):
    return tree_map(lambda x: scalar * x, tree)


def _add(x, y):
    return tree_map(operator.add, x, y)


def _sub(x, y):
    return tree_map(operator.sub, x, y)


def _identity(x):
    return x


def _normalize_matvec(f):
    """``A`` as a function ``x -> A x`` (a square matrix, ``@``-able object or function)."""
    if callable(f):
        return f
    if hasattr(f, "shape") and hasattr(f, "ndim"):
        if f.ndim != 2 or f.shape[0] != f.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: "
                             f"{f.shape}")
        return functools.partial(_dot, f)
    if hasattr(f, "__matmul__"):
        return functools.partial(operator.matmul, f)
    raise TypeError(f"linear operator must be either a function or ndarray: {f}")


def _check_x0(x0, b):
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: "
                         f"{tree_structure(x0)} vs {tree_structure(b)}")
    shapes = lambda t: [np.shape(x) for x in tree_leaves(t)]
    if shapes(x0) != shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: "
                         f"{shapes(x0)} vs {shapes(b)}")


def _cg_solve(A, b, x0, *, maxiter, tol, atol, M):
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))

    def cond_fun(value):
        _, r, gamma, _, k = value
        rs = jnp.real(gamma) if M is _identity else _vdot_real_tree(r, r)
        return (rs > atol2) & (k < maxiter)

    def body_fun(value):
        x, r, gamma, p, k = value
        Ap = A(p)
        alpha = gamma / _vdot_real_tree(p, Ap).astype(dtype)
        x_ = _add(x, _mul(alpha, p))
        r_ = _sub(r, _mul(alpha, Ap))
        z_ = M(r_)
        gamma_ = _vdot_real_tree(r_, z_).astype(dtype)
        p_ = _add(z_, _mul(gamma_ / gamma, p))
        return x_, r_, gamma_, p_, k + 1

    r0 = _sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = jnp.result_type(*tree_leaves(p0))
    gamma0 = _vdot_real_tree(r0, z0).astype(dtype)
    return lax.while_loop(cond_fun, body_fun, (x0, r0, gamma0, p0, 0))[0]


def _bicgstab_solve(A, b, x0, *, maxiter, tol, atol, M):
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))

    def cond_fun(value):
        _, r, *_, k = value
        return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)

    def body_fun(value):
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_ = _vdot_tree(rhat, r)
        beta = rho_ / rho * alpha / omega
        p_ = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
        phat = M(p_)
        q_ = A(phat)
        alpha_ = rho_ / _vdot_tree(rhat, q_)
        s = _sub(r, _mul(alpha_, q_))
        exit_early = _vdot_real_tree(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega_ = _vdot_tree(t, s) / _vdot_tree(t, t)
        x_ = tree_map(functools.partial(jnp.where, exit_early),
                      _add(x, _mul(alpha_, phat)),
                      _add(x, _add(_mul(alpha_, phat), _mul(omega_, shat))))
        r_ = tree_map(functools.partial(jnp.where, exit_early), s,
                      _sub(s, _mul(omega_, t)))
        k_ = jnp.where((omega_ == 0) | (alpha_ == 0), -11, k + 1)   # breakdown codes
        k_ = jnp.where(rho_ == 0, -10, k_)
        return x_, r_, rhat, alpha_, omega_, rho_, p_, q_, k_

    r0 = _sub(b, A(x0))
    one = jnp.asarray(1, jnp.result_type(*tree_leaves(b)))
    init = (x0, r0, r0, one, one, one, r0, r0, 0)
    return lax.while_loop(cond_fun, body_fun, init)[0]


def _isolve(solve, A, b, x0, tol, atol, maxiter, M, check_symmetric):
    b = tree_map(jnp.asarray, b)
    x0 = tree_map(jnp.zeros_like, b) if x0 is None else tree_map(jnp.asarray, x0)
    if maxiter is None:
        maxiter = 10 * sum(np.size(x) for x in tree_leaves(b))   # SciPy's default
    A = _normalize_matvec(A)
    M = _identity if M is None else _normalize_matvec(M)
    _check_x0(x0, b)
    solve = functools.partial(solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve,
                                symmetric=check_symmetric)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solves ``A x = b`` by conjugate gradients (``A`` symmetric positive definite).

    Args:
      A: a square matrix, or a function computing ``A x`` for a pytree ``x`` shaped
        like ``b``.
      b: the right-hand side: an array or a pytree of arrays.
      x0: starting guess shaped like ``b`` (default zeros).
      tol, atol: stop when ``norm(residual) <= max(tol * norm(b), atol)``.
      maxiter: most iterations (default ``10 * size(b)``).
      M: preconditioner approximating ``A``'s inverse (matrix or function).

    Returns:
      ``(x, None)``: the solution shaped like ``b``; derivatives come from a second
      ``cg`` solve (implicit differentiation).

    >>> import xform.numpy as jnp
    >>> x, _ = cg(jnp.array([[4., 1.], [1., 3.]]), jnp.array([1., 2.]))
    >>> [round(float(v), 4) for v in x]
    [0.0909, 0.6364]
    """
    return _isolve(_cg_solve, A, b, x0, tol, atol, maxiter, M, check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solves ``A x = b`` by the stabilized bi-conjugate gradient method (any square
    nonsingular ``A``); arguments and result as :func:`cg`.

    >>> import xform.numpy as jnp
    >>> x, _ = bicgstab(jnp.array([[4., 2.], [1., 3.]]), jnp.array([1., 2.]))
    >>> [round(float(v), 4) for v in x]
    [-0.1, 0.7]
    """
    return _isolve(_bicgstab_solve, A, b, x0, tol, atol, maxiter, M,
                   check_symmetric=False)


# ---- GMRES ----

def _safe_normalize(x, thresh=None):
    """``(x / norm(x), norm(x))``, or zeros and 0 when the norm is below ``thresh``
    (default: the dtype's machine epsilon)."""
    norm = _norm(x)
    dtype = jnp.result_type(*tree_leaves(x))
    if thresh is None:
        thresh = jnp.finfo(norm.dtype).eps
    use_norm = norm > jnp.asarray(thresh, dtype)
    normalized = tree_map(lambda y: jnp.where(use_norm, y / norm.astype(dtype), 0.0), x)
    return normalized, jnp.where(use_norm, norm, 0.0)


def _project_on_columns(Q, v):
    """``Q^H v`` (conjugated: without it complex GMRES diverged)."""
    return tree_reduce(operator.add, tree_map(
        lambda X, y: jnp.einsum("...n,...->n", jnp.conj(X), y, precision=_HIGHEST), Q, v))


def _classical_gram_schmidt(Q, x, xnorm, max_iterations=2):
    """Orthogonalizes ``x`` against ``Q``'s columns, repeating while
    ``norm(r) < norm(x) / sqrt(2)`` (at most ``max_iterations`` passes)."""
    Q0 = tree_leaves(Q)[0]
    r = jnp.zeros(Q0.shape[-1], dtype=Q0.dtype)

    def body_function(carry):
        k, q, r, qnorm_scaled = carry
        h = _project_on_columns(Q, q)
        q = _sub(q, tree_map(lambda X: _dot(X, h), Q))
        r = _add(r, h)

        def qnorm_cond(carry):
            k, not_done, _, _ = carry
            return jnp.logical_and(not_done, k < (max_iterations - 1))

        def qnorm(carry):
            k, _, q, _ = carry
            _, qn = _safe_normalize(q)
            return k, False, q, qn / jnp.sqrt(2.0)
        _, _, q, qnorm_scaled = lax.while_loop(qnorm_cond, qnorm,
                                               (k, True, q, qnorm_scaled))
        return k + 1, q, r, qnorm_scaled

    def cond_function(carry):
        k, _, r, qnorm_scaled = carry
        _, rnorm = _safe_normalize(r)
        return jnp.logical_and(k < (max_iterations - 1), rnorm < qnorm_scaled)
    k, q, r, qnorm_scaled = body_function((0, x, r, xnorm / jnp.sqrt(2.0)))
    _, q, r, _ = lax.while_loop(cond_function, body_function, (k, q, r, qnorm_scaled))
    return q, r


def _kth_arnoldi_iteration(k, A, M, V, H):
    """Adds the orthonormalized Krylov vector ``A(M(V[:, k]))`` as ``V[:, k + 1]`` and
    its overlaps as ``H[k, :]``; flags breakdown (an invariant subspace)."""
    dtype = jnp.result_type(*tree_leaves(V))
    eps = jnp.finfo(dtype).eps
    v = M(A(tree_map(lambda x: x[..., k], V)))
    _, v_norm_0 = _safe_normalize(v)
    v, h = _classical_gram_schmidt(V, v, v_norm_0, max_iterations=2)
    unit_v, v_norm_1 = _safe_normalize(v, thresh=eps * v_norm_0)
    V = tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit_v)
    h = h.at[k + 1].set(v_norm_1.astype(dtype))
    return V, H.at[k, :].set(h), v_norm_1 == 0.0


def _rotate_vectors(H, i, cs, sn):
    x1, y1 = H[i], H[i + 1]
    H = H.at[i].set(jnp.conj(cs) * x1 - jnp.conj(sn) * y1)   # unitary also when complex
    return H.at[i + 1].set(sn * x1 + cs * y1)


def _givens_rotation(a, b):
    b_zero = abs(b) == 0
    a_lt_b = abs(a) < abs(b)
    t = -jnp.where(a_lt_b, a, b) / jnp.where(a_lt_b, b, a)
    r = lax.rsqrt(1 + abs(t) ** 2).astype(t.dtype)
    cs = jnp.where(b_zero, 1, jnp.where(a_lt_b, r * t, r))
    sn = jnp.where(b_zero, 0, jnp.where(a_lt_b, r, r * t))
    return cs, sn


def _apply_givens_rotations(H_row, givens, k):
    """Applies the stored rotations to ``H_row``, then a new one zeroing its ``k``-th
    subdiagonal element."""
    R_row = lax.fori_loop(0, k, lambda i, h: _rotate_vectors(h, i, *givens[i, :]), H_row)
    factors = _givens_rotation(R_row[k], R_row[k + 1])
    givens = givens.at[k, :].set(jnp.stack(factors))
    return _rotate_vectors(R_row, k, *factors), givens


def _krylov_basis(unit_residual, restart):
    return tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)),
                    unit_residual)


def _finish_restart(A, b, M, x0, V, y):
    x = _add(x0, tree_map(lambda X: _dot(X[..., :-1], y), V))
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
    return x, unit_residual, residual_norm


def _gmres_incremental(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart, building the Krylov basis's QR factorization by Givens rotations
    (stops early once the residual estimate is below ``ptol``)."""
    V = _krylov_basis(unit_residual, restart)
    dtype = jnp.result_type(*tree_leaves(b))
    R = jnp.eye(restart, restart + 1, dtype=dtype)
    givens = jnp.zeros((restart, 2), dtype=dtype)
    beta_vec = jnp.zeros(restart + 1, dtype=dtype).at[0].set(residual_norm.astype(dtype))

    def loop_cond(carry):
        k, err = carry[:2]
        return jnp.logical_and(k < restart, err > ptol)

    def arnoldi_qr_step(carry):
        k, _, V, R, beta_vec, givens = carry
        V, H, _ = _kth_arnoldi_iteration(k, A, M, V, R)
        R_row, givens = _apply_givens_rotations(H[k, :], givens, k)
        R = R.at[k, :].set(R_row)
        beta_vec = _rotate_vectors(beta_vec, k, *givens[k, :])
        return k + 1, abs(beta_vec[k + 1]), V, R, beta_vec, givens
    _, _, V, R, beta_vec, _ = lax.while_loop(
        loop_cond, arnoldi_qr_step, (0, residual_norm, V, R, beta_vec, givens))
    y = sp_linalg.solve_triangular(R[:, :-1].T, beta_vec[:-1])
    return _finish_restart(A, b, M, x0, V, y)


def _gmres_batched(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart: the whole Arnoldi process, then a dense least-squares solve."""
    del ptol
    V = _krylov_basis(unit_residual, restart)
    dtype = jnp.result_type(*tree_leaves(b))
    H = jnp.eye(restart, restart + 1, dtype=dtype)

    def loop_cond(carry):
        _, _, breakdown, k = carry
        return jnp.logical_and(k < restart, jnp.logical_not(breakdown))

    def arnoldi_process(carry):
        V, H, _, k = carry
        V, H, breakdown = _kth_arnoldi_iteration(k, A, M, V, H)
        return V, H, breakdown, k + 1
    V, H, _, _ = lax.while_loop(loop_cond, arnoldi_process, (V, H, False, 0))
    beta_vec = jnp.zeros(restart + 1, dtype=dtype).at[0].set(residual_norm.astype(dtype))
    a = H.T   # least squares by the (Hermitian) normal equations, as JAX
    y = sp_linalg.solve(_dot(jnp.conj(a.T), a), _dot(jnp.conj(a.T), beta_vec), assume_a="pos")
    return _finish_restart(A, b, M, x0, V, y)


def _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, gmres_func):
    """Restarts GMRES from the last projection until ``norm(M(b - A x)) <= atol``."""
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

    def cond_fun(value):
        _, k, _, residual_norm = value
        return jnp.logical_and(k < maxiter, residual_norm > atol)

    def body_fun(value):
        x, k, unit_residual, residual_norm = value
        x, unit_residual, residual_norm = gmres_func(A, b, x, unit_residual,
                                                     residual_norm, ptol, restart, M)
        return x, k + 1, unit_residual, residual_norm
    return lax.while_loop(cond_fun, body_fun, (x0, 0, unit_residual, residual_norm))[0]


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Solves ``A x = b`` by restarted GMRES (any square nonsingular ``A``).

    Args:
      A, b, x0, tol, atol, M: as :func:`cg`.
      restart: dimension of the Krylov subspace built between restarts.
      maxiter: most restarts (default ``10 * size(b)``).
      solve_method: ``'batched'`` (least squares after each Arnoldi process) or
        ``'incremental'`` (Givens-rotation QR during it, with early termination).

    Returns:
      ``(x, info)``: the solution shaped like ``b`` and ``-1`` if it holds NaNs, else 0.

    Raises:
      ValueError: for an unknown ``solve_method`` or an ``x0`` unlike ``b``.

    >>> import xform.numpy as jnp
    >>> x, info = gmres(jnp.array([[4., 2.], [1., 3.]]), jnp.array([1., 2.]))
    >>> [round(float(v), 4) for v in x], int(info)
    ([-0.1, 0.7], 0)
    """
    b = tree_map(jnp.asarray, b)
    x0 = tree_map(jnp.zeros_like, b) if x0 is None else tree_map(jnp.asarray, x0)
    A = _normalize_matvec(A)
    M = _identity if M is None else _normalize_matvec(M)
    size = sum(np.size(x) for x in tree_leaves(b))
    if maxiter is None:
        maxiter = 10 * size   # SciPy's default
    restart = min(restart, size)
    _check_x0(x0, b)
    funcs = {"incremental": _gmres_incremental, "batched": _gmres_batched}
    if solve_method not in funcs:
        raise ValueError(f"invalid solve_method {solve_method}, must be either "
                         f"'incremental' or 'batched'")
    b_norm = _norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = _norm(M(b)) * jnp.minimum(1.0, atol / b_norm)

    def solve(A, b):
        return _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, funcs[solve_method])
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, jnp.where(jnp.isnan(_norm(x)), -1, 0)
