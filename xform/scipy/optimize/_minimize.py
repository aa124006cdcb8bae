"""``minimize`` with BFGS: quasi-Newton steps ``-H g`` along which a strong-Wolfe line
search picks the length, with the inverse-Hessian estimate ``H`` updated by the BFGS
formula (Nocedal & Wright, Algorithm 6.1). One ``while_loop``: jit- and vmap-able."""
from typing import NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.scipy.optimize._lbfgs import minimize_lbfgs
from xform.scipy.optimize._line_search import _dot, line_search
from xform.transforms.ad import value_and_grad


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize`.

    Attributes:
      x: the final point. success: whether it converged without a line-search failure.
      status: 0 converged, 1 maxiter reached, 2 + line-search status when that failed.
      fun, jac, hess_inv: the objective, its gradient and the inverse-Hessian estimate
        at ``x``. nfev, njev, nit: evaluation and iteration counts.
    """
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


def _bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    if maxiter is None:
        maxiter = np.size(x0) * 200
    x0 = jnp.asarray(x0)
    eye = jnp.eye(x0.shape[0], dtype=x0.dtype)
    f_0, g_0 = value_and_grad(fun)(x0)
    i0 = jnp.asarray(0)   # weak default int (int64 under x64), as JAX's Python-int counters
    state = dict(converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=jnp.array(False),
                 k=i0, nfev=i0 + 1, ngev=i0 + 1, x=x0, f=f_0, g=g_0, H=eye,
                 old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, ls_status=i0)

    def body(s):
        p = -_dot(s["H"], s["g"])
        ls = line_search(fun, s["x"], p, old_fval=s["f"], old_old_fval=s["old_old_fval"],
                         gfk=s["g"], maxiter=line_search_maxiter)
        step = ls.a_k.astype(p.dtype) * p
        y = ls.g_k - s["g"]
        rho = jnp.reciprocal(_dot(y, step))
        # H+ = (I - rho s y^T) H (I - rho y s^T) + rho s s^T
        w = eye - rho * jnp.outer(step, y)
        H = _dot(_dot(w, s["H"]), w.T) + rho * jnp.outer(step, step)
        return dict(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed,
                    k=s["k"] + 1, nfev=s["nfev"] + ls.nfev, ngev=s["ngev"] + ls.ngev,
                    x=s["x"] + step, f=ls.f_k, g=ls.g_k,
                    H=jnp.where(jnp.isfinite(rho), H, s["H"]), old_old_fval=s["f"],
                    ls_status=ls.status)

    s = lax.while_loop(lambda s: ~s["converged"] & ~s["failed"] & (s["k"] < maxiter),
                       body, state)
    status = jnp.where(s["converged"], 0, jnp.where(
        s["k"] == maxiter, 1, jnp.where(s["failed"], 2 + s["ls_status"], -1)))
    return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"], status=status,
                           fun=s["f"], jac=s["g"], hess_inv=s["H"], nfev=s["nfev"],
                           njev=s["ngev"], nit=s["k"])


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize a scalar function of a 1-D array, as ``jax.scipy.optimize.minimize``.

    Args:
      fun: ``fun(x, *args)``, differentiable in ``x``.
      x0: the initial point (1-D).
      args: extra arguments to ``fun`` (a tuple).
      method: ``"BFGS"`` or (as JAX, experimental) ``"l-bfgs-experimental-do-not-rely-on-this"``
        (case-insensitive).
      tol: unused (as in JAX; pass ``options={"gtol": ...}``).
      options: BFGS: ``maxiter``, ``norm``, ``gtol``, ``line_search_maxiter``; L-BFGS:
        ``maxiter``, ``norm``, ``maxcor``, ``ftol``, ``gtol``, ``maxfun``, ``maxgrad``,
        ``maxls``.

    Returns:
      :class:`OptimizeResults`.

    Raises:
      TypeError: ``args`` is not a tuple. ValueError: an unknown ``method``.

    >>> r = xform.scipy.optimize.minimize(lambda x: ((x - 2.) ** 2).sum(),
    ...                                   jnp.zeros(2), method="BFGS")
    >>> r.x.round(3), bool(r.success)
    (Array([2., 2.], dtype=float32), True)
    """
    del tol
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, "
                        f"got {args}")
    if method.lower() == "bfgs":
        return _bfgs(lambda x: fun(x, *args), x0, **(options or {}))
    if method.lower() == "l-bfgs-experimental-do-not-rely-on-this":
        s = minimize_lbfgs(lambda x: fun(x, *args), x0, **(options or {}))
        return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"],
                               status=s["status"], fun=s["f"], jac=s["g"], hess_inv=None,
                               nfev=s["nfev"], njev=s["ngev"], nit=s["k"])
    raise ValueError(f"Method {method} not recognized")
