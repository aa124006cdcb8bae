"""Matrix functions of ``xform.scipy.linalg``: ``expm`` (and its Frechet derivative),
``polar`` (QDWH: ``lax.linalg.qdwh``, or the SVD), and the Schur-based ``sqrtm``,
``rsf2csf``, ``funm`` and ``solve_sylvester``, composed as JAX composes them so that
values agree to rounding.

``expm`` is JAX's scaling and squaring with the same Pade degrees and thresholds; it is
differentiated straight through (the switch, the solve and the squaring scan), so
``expm_frechet`` is ``jvp(expm)``, as in JAX.
"""
import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.lax import linalg as lax_linalg
from xform.numpy import _util
from xform.numpy import linalg as np_linalg
from xform.scipy._linalg_decomp import _to_complex, schur
from xform.transforms.ad import jvp

_HIGHEST = lax.Precision.HIGHEST


def _dot(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


# ---- expm ----

# Pade numerator coefficients b_0..b_m of degree m (Higham 2005), as JAX's.
_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}


def _pade(m):
    """(U, V) of the degree-m Pade approximant: exp(A) ~ (V - U)^-1 (V + U)."""
    b = _PADE[m]

    def uv(a):
        ident = jnp.eye(*a.shape, dtype=a.dtype)
        a2 = _dot(a, a)
        if m == 13:
            a4 = _dot(a2, a2)
            a6 = _dot(a4, a2)
            u = _dot(a, _dot(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
                     + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
            v = (_dot(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
                 + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident)
            return u, v
        powers = [ident, a2]                  # A^0, A^2, A^4, ... up to A^(m-1)
        while len(powers) < (m + 1) // 2:
            powers.append(_dot(powers[-1], a2) if len(powers) > 2 else _dot(a2, a2))
        # Highest power first, as JAX sums them (same rounding).
        u = _dot(a, _poly(powers, b[1::2]))
        return u, _poly(powers, b[0::2])
    return uv


def _poly(powers, coeffs):
    terms = [c * p for c, p in zip(coeffs, powers)][::-1]
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _calc_p_q(a):
    a_l1 = np_linalg.norm(a, 1)
    if a.dtype in (np.float64, np.complex128):
        maxnorm, degrees = 5.371920351148152, (3, 5, 7, 9, 13)
        conds = (1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                 2.097847961257068e+000)
    else:
        maxnorm, degrees = 3.925724783138660, (3, 5, 7)
        conds = (4.258730016922831e-001, 1.880152677804762e+000)
    n_squarings = jnp.maximum(0, jnp.floor(jnp.log2(a_l1 / maxnorm)))
    a = a / 2 ** n_squarings.astype(a.dtype)
    idx = jnp.digitize(a_l1, jnp.array(conds, dtype=a_l1.dtype))
    u, v = lax.switch(idx, [_pade(m) for m in degrees], a)
    return u + v, -u + v, n_squarings


def _expm_2d(a, upper_triangular, max_squarings):
    p, q, n_squarings = _calc_p_q(a)

    def compute(a, p, q):
        r = (lax_linalg.triangular_solve(q, p, left_side=True, lower=False)
             if upper_triangular else np_linalg.solve(q, p))

        def square(r, i):   # undo the scaling: r^(2^n_squarings)
            return lax.cond(i < n_squarings, lambda r: _dot(r, r), lambda r: r, r), None
        r, _ = lax.scan(square, r, jnp.arange(max_squarings, dtype=n_squarings.dtype))
        return r
    return lax.cond(n_squarings > max_squarings, lambda a, p, q: jnp.full_like(a, np.nan),
                    compute, a, p, q)


@composite(static=("upper_triangular", "max_squarings"))
def expm(A, *, upper_triangular=False, max_squarings=16):
    """Matrix exponential by scaling and squaring with a Pade approximant (JAX's).

    Args:
      A: array of shape ``(..., N, N)``.
      upper_triangular: whether ``A`` is upper triangular (solves triangularly).
      max_squarings: the most squarings; a larger norm gives NaN.

    Returns:
      ``exp(A)``, shape ``(..., N, N)``.

    >>> expm(xform.numpy.zeros((2, 2)))
    Array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    (A,) = _util.promote_dtypes("expm", jnp.asarray(A), to="inexact")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape}.")
    return jnp.vectorize(lambda a: _expm_2d(a, upper_triangular, max_squarings),
                         signature="(n,n)->(n,n)")(A)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """Frechet derivative of ``expm`` at ``A`` in direction ``E`` (``jvp`` of expm).

    Returns:
      ``(expm(A), L(A, E))``, or ``L(A, E)`` alone without ``compute_expm``.
    """
    del method
    A, E = jnp.asarray(A), jnp.asarray(E)
    if A.ndim < 2 or A.shape[-2] != A.shape[-1]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={A.shape}")
    if E.ndim < 2 or E.shape[-2] != E.shape[-1]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={E.shape}")
    if A.shape != E.shape:
        raise ValueError("expected A and E to be the same shape, got "
                         f"A.shape={A.shape} E.shape={E.shape}")
    expm_a, frechet = _expm_jvp(A, E)
    return (expm_a, frechet) if compute_expm else frechet


@composite
def _expm_jvp(a, e):
    return jvp(lambda a: expm(a), (a,), (e,))


# ---- polar ----

def _polar_2d(a, side, method, eps):
    m, n = a.shape
    if method == "qdwh":
        # JAX's: the iteration needs m >= n, so side='left' factors a^H.
        if m >= n and side == "right":
            unitary, posdef, _, _ = lax_linalg.qdwh(a, eps=eps)
            return unitary, posdef
        if m < n and side == "left":
            unitary, posdef, _, _ = lax_linalg.qdwh(jnp.conj(a.T), eps=eps)
            return jnp.conj(unitary.T), jnp.conj(posdef.T)
        raise NotImplementedError(
            "method='qdwh' only supports mxn matrices where m < n where side='right' and "
            f"m >= n side='left', got {a.shape} with side={side!r}")
    if method != "svd":
        raise ValueError(f"Unknown polar decomposition method {method}.")
    u, s, vh = lax_linalg.svd(a, full_matrices=False)
    s = s.astype(u.dtype)
    unitary = _dot(u, vh)
    if side == "right":
        return unitary, _dot(jnp.conj(vh.T) * s[None, :], vh)
    return unitary, _dot(u * s[None, :], jnp.conj(u.T))


@composite(static=("side", "method", "eps", "max_iterations"))
def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """Polar decomposition ``a = u p`` (``side='right'``) or ``a = p u`` (``'left'``),
    ``p`` positive semidefinite: by QDWH iterations (``method='qdwh'``, JAX's default;
    ``eps`` sets its tolerance; ``max_iterations`` is unused, as in JAX) or the SVD.

    Returns:
      ``(unitary, posdef)``: shapes ``(..., m, n)`` and ``(..., n, n)`` (right) or
      ``(..., m, m)`` (left).

    >>> u, p = polar(xform.numpy.array([[2., 0.], [0., -3.]]), method="svd")
    >>> p
    Array([[2., 0.],
           [0., 3.]], dtype=float32)
    """
    del max_iterations
    arr = jnp.asarray(a)
    if arr.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    (arr,) = _util.promote_dtypes("polar", arr, to="inexact")
    sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
    return jnp.vectorize(lambda x: _polar_2d(x, side, method, eps), signature=sig)(arr)


# ---- Schur-based: sqrtm, rsf2csf, funm, solve_sylvester (CPU only, as schur) ----

def _sqrtm_triu(t):
    # Bjorck & Hammarling (1983): the upper triangular root U of T, column by column.
    diag = jnp.sqrt(jnp.diag(t))
    n = diag.size

    def i_loop(l, data):
        j, u = data
        i = j - 1 - l
        s = lax.fori_loop(i + 1, j, lambda k, val: val + u[i, k] * u[k, j],
                          jnp.zeros((), t.dtype))
        value = jnp.where(t[i, j] == s, 0.0, (t[i, j] - s) / (diag[i] + diag[j]))
        return j, u.at[i, j].set(value)

    def j_loop(j, u):
        return lax.fori_loop(0, j, i_loop, (j, u))[1]
    return lax.fori_loop(0, n, j_loop, jnp.diag(diag))


@composite
def _sqrtm(a):
    t, z = schur(a, output="complex")
    return _dot(_dot(z, _sqrtm_triu(t)), jnp.conj(z.T))


def sqrtm(A, blocksize=1):
    """Matrix square root from the complex Schur form (CPU only; always complex).

    >>> sqrtm(xform.numpy.array([[4., 0.], [0., 9.]]))
    Array([[2.+0.j, 0.+0.j],
           [0.+0.j, 3.+0.j]], dtype=complex64)
    """
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    return _sqrtm(jnp.asarray(A))


def _rsf2csf_2d(t, z):
    t, z = _util.promote_dtypes("rsf2csf", t, z)
    t, z = t.astype(_to_complex(t.dtype)), z.astype(_to_complex(z.dtype))
    eps = dtypes.finfo(t.dtype).eps
    n = t.shape[0]
    if n == 1:
        return t, z

    def update(m, t, z):   # a Givens rotation zeroing t[m, m-1]
        mu = np_linalg.eigvals(lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))) - t[m, m]
        r = np_linalg.norm(jnp.stack([mu[0], t[m, m - 1]])).astype(t.dtype)
        c, s = mu[0] / r, t[m, m - 1] / r
        g = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        rows = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=0)
        col_mask = jnp.arange(n) >= m - 1
        rows = jnp.where(~col_mask, rows, g @ jnp.where(col_mask, rows, 0))
        t = lax.dynamic_update_slice_in_dim(t, rows, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=1)
        row_mask = jnp.arange(n)[:, None] < m + 1
        cols = jnp.where(~row_mask, cols, jnp.where(row_mask, cols, 0) @ jnp.conj(g).T)
        t = lax.dynamic_update_slice_in_dim(t, cols, m - 1, axis=1)
        z_cols = lax.dynamic_slice_in_dim(z, m - 1, 2, axis=1)
        return t, lax.dynamic_update_slice_in_dim(z, z_cols @ jnp.conj(g).T, m - 1, axis=1)

    def step(i, tz):
        m = n - i
        t, z = tz
        t, z = lax.cond(
            jnp.abs(t[m, m - 1]) > eps * (jnp.abs(t[m - 1, m - 1]) + jnp.abs(t[m, m])),
            update, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0.0), z
    return lax.fori_loop(1, n, step, (t, z))


@composite(static=("check_finite",))
def rsf2csf(T, Z, check_finite=True):
    """Real Schur form ``(T, Z)`` to the complex one (upper triangular ``T``), by Givens
    rotations of the 2x2 blocks; leading axes batch."""
    del check_finite
    T, Z = jnp.asarray(T), jnp.asarray(Z)
    if T.ndim < 2 or T.shape[-1] != T.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if Z.ndim < 2 or Z.shape[-1] != Z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if T.shape[-1] != Z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {Z.shape} vs. T: {T.shape}")
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(T, Z)


def _funm_triu(f, t):
    # Golub & Van Loan, "Matrix Computations", Algorithm 11.1.1 (Parlett's recurrence).
    n = t.shape[0]
    idx = jnp.arange(n)

    def inner(i, p_f_minden):
        p, f, minden = p_f_minden
        j = i + p
        s = t[i - 1, j - 1] * (f[j - 1, j - 1] - f[i - 1, i - 1])
        ind = (idx >= i) & (idx < j - 1)
        s = s + (jnp.where(ind, t[i - 1], 0) @ jnp.where(ind, f[:, j - 1], 0)
                 - jnp.where(ind, f[i - 1], 0) @ jnp.where(ind, t[:, j - 1], 0))
        den = t[j - 1, j - 1] - t[i - 1, i - 1]
        s = jnp.where(den != 0, s / den, s)
        return p, f.at[i - 1, j - 1].set(s), jnp.minimum(minden, jnp.abs(den))

    def outer(p, f_minden):
        _, f, minden = lax.fori_loop(1, n - p + 1, inner, (p, *f_minden))
        return f, minden
    return lax.fori_loop(1, n, outer, (f, jnp.abs(t[0, 0])))


def funm(A, func, disp=True):
    """``func`` of the square matrix ``A`` from its Schur form (CPU only; complex).

    Returns:
      ``F``, or ``(F, err)`` (an error estimate) when ``disp`` is False.

    >>> funm(xform.numpy.array([[1., 0.], [0., 2.]]), lambda x: x * x)
    Array([[1.+0.j, 0.+0.j],
           [0.+0.j, 4.+0.j]], dtype=complex64)
    """
    a = jnp.asarray(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square array_like input")
    # func runs as it is, outside the composites (no compile keyed on each new lambda).
    t, z = _complex_schur(a)
    f = jnp.diag(func(jnp.diag(t))).astype(t.dtype)
    return _funm_finish(f, t, z, disp)


@composite
def _complex_schur(a):
    return rsf2csf(*schur(a))


@composite(static=("disp",))
def _funm_finish(f, t, z, disp):
    f, minden = _funm_triu(f, t)
    f = z @ f @ jnp.conj(z.T)
    if disp:
        return f
    tol = dtypes.finfo(np.float32 if f.dtype == np.complex64 else np.float64).eps
    minden = jnp.where(minden == 0.0, tol, minden)
    err = jnp.where(jnp.any(jnp.isinf(f)), np.inf, jnp.minimum(1, jnp.maximum(
        tol, (tol / minden) * np_linalg.norm(jnp.triu(t, 1), 1))))
    return f, err


def _sylvester_triangular(r, s, f):
    """Y with r Y + Y s^T = f, r and s upper triangular (Bartels-Stewart), element by
    element from the bottom right."""
    m, n = f.shape
    km, kn = jnp.arange(m), jnp.arange(n)

    def step(y, idx):
        i, j = idx // n, idx % n
        y2 = y.reshape((m, n))
        row = jnp.sum(jnp.where(km > i, r[i, :] * y2[:, j], 0.0))
        col = jnp.sum(jnp.where(kn > j, y2[i, :] * s[:, j], 0.0))
        return y.at[i * n + j].set((f[i, j] - (row + col)) / (r[i, i] + s[j, j])), None
    y, _ = lax.scan(step, jnp.zeros((m * n,), f.dtype), jnp.arange(m * n - 1, -1, -1))
    return y.reshape((m, n))


def _solve_sylvester_2d(a, b, c, method, tol):
    m, n = c.shape
    if method == "schur":
        r, u = schur(a, output="complex")
        s, v = schur(jnp.conj(b.T), output="complex")
        f = jnp.conj(u.T) @ c.astype(r.dtype) @ v
        x = u @ _sylvester_triangular(r, jnp.conj(s.T), f) @ jnp.conj(v.T)
    elif method == "eigen":
        ra, ua = np_linalg.eig(a)
        rb, ub = np_linalg.eig(b)
        f = np_linalg.solve(ua, c.astype(ra.dtype) @ ub)
        x = ua[:m, :m] @ (f / (ra[:, None] + rb[None, :]))[:m, :n] @ np_linalg.inv(ub)[:n, :n]
    else:
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either '
                         '"schur" or "eigen".')
    if not dtypes.issubdtype(c.dtype, np.complexfloating):
        x = x.real
    near_singular = jnp.any(jnp.abs(np_linalg.eigvals(a)[:, None]
                                    + np_linalg.eigvals(b)[None, :]) < tol)
    return lax.cond(near_singular, lambda: jnp.zeros_like(x) * np.nan, lambda: x)


@composite(static=("method",))
def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """Solve ``A X + X B = C`` (Bartels-Stewart on Schur forms, or by eigendecomposition
    with ``method='eigen'``; schur needs the CPU); NaNs where eigenvalues of A and -B come within
    ``tol``. Leading axes batch.

    >>> solve_sylvester(xform.numpy.eye(2), xform.numpy.eye(2), 2 * xform.numpy.eye(2))
    Array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    A, B, C = _util.promote_dtypes("solve_sylvester", jnp.asarray(A), jnp.asarray(B),
                                   jnp.asarray(C), to="inexact")
    m, n = C.shape[-2:]
    if A.shape[-2:] != (m, m) or B.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {A.shape}\n"
                         f"B: {B.shape}\nC: {C.shape}")
    return jnp.vectorize(lambda a, b, c: _solve_sylvester_2d(a, b, c, method, tol),
                         signature="(m,m),(n,n),(m,n)->(m,n)")(A, B, C)
