"""Limited-memory BFGS (Nocedal & Wright, Algorithm 7.4/7.5): the search direction from
the last ``maxcor`` steps and gradient changes by the two-loop recursion, lengths from
the strong-Wolfe line search; ``minimize``'s
``method="l-bfgs-experimental-do-not-rely-on-this"``, as JAX's (whose stopping rules and
statuses it keeps: 1 maxiter, 2 maxfun, 3 maxgrad, 4 ftol, 5 line search failed)."""
import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.scipy.optimize._line_search import _dot, line_search
from xform.transforms.ad import value_and_grad


def _two_loop(s):
    """``-H g`` with ``H`` the L-BFGS inverse-Hessian estimate (histories oldest first,
    the last ``min(k, maxcor)`` rows filled)."""
    rho, dtype = s["rho_history"], s["rho_history"].dtype
    size = rho.shape[0]
    used = jnp.minimum(s["k"], size)

    def newest_first(j, carry):
        q, alphas = carry
        i = size - 1 - j
        a = rho[i] * jnp.real(_dot(jnp.conj(s["s_history"][i]), q)).astype(dtype)
        return q - a * jnp.conj(s["y_history"][i]), alphas.at[i].set(a)
    q, alphas = lax.fori_loop(0, used, newest_first, (-jnp.conj(s["g"]), jnp.zeros_like(rho)))

    def oldest_first(j, q):
        i = size - used + j
        b = rho[i] * jnp.real(_dot(s["y_history"][i], q)).astype(dtype)
        return q + (alphas[i] - b) * s["s_history"][i]
    return lax.fori_loop(0, used, oldest_first, s["gamma"] * q)


def _push(history, new):
    """``history`` with its oldest row dropped and ``new`` appended."""
    return jnp.concatenate([history[1:], new[None]], 0)


def minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
                   gtol=1e-5, maxfun=None, maxgrad=None, maxls=20):
    """(x, f, g, converged, failed, k, nfev, ngev, status) of L-BFGS from ``x0``."""
    x0 = jnp.asarray(x0)
    d, dtype = x0.shape[0], x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter, maxfun, maxgrad = (np.inf if v is None else v for v in (maxiter, maxfun, maxgrad))
    f_0, g_0 = value_and_grad(fun)(x0)
    i0 = jnp.asarray(0)   # weak default int (int64 under x64), as JAX's Python-int counters
    state = dict(converged=jnp.array(False), failed=jnp.array(False), k=i0, nfev=i0 + 1,
                 ngev=i0 + 1, x=x0, f=f_0, g=g_0, s_history=jnp.zeros((maxcor, d), dtype),
                 y_history=jnp.zeros((maxcor, d), dtype), rho_history=jnp.zeros(maxcor, dtype),
                 gamma=jnp.ones((), g_0.dtype), status=i0, ls_status=i0)

    def body(s):
        p = _two_loop(s)
        ls = line_search(fun, s["x"], p, old_fval=s["f"], gfk=s["g"], maxiter=maxls)
        step = ls.a_k.astype(p.dtype) * p
        y = ls.g_k - s["g"]
        rho_inv = jnp.real(_dot(y, step))
        status = jnp.where(s["f"] - ls.f_k < ftol, 4, 0)
        status = jnp.where(s["ngev"] >= maxgrad, 3, status)
        status = jnp.where(s["nfev"] >= maxfun, 2, status)
        status = jnp.where(s["k"] >= maxiter, 1, status)
        status = jnp.where(ls.failed, 5, status)
        converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
        return dict(converged=converged, failed=(status > 0) & ~converged, k=s["k"] + 1,
                    nfev=s["nfev"] + ls.nfev, ngev=s["ngev"] + ls.ngev,
                    x=(s["x"] + step).astype(dtype), f=ls.f_k.astype(s["f"].dtype),
                    g=ls.g_k.astype(s["g"].dtype), s_history=_push(s["s_history"], step),
                    y_history=_push(s["y_history"], y),
                    rho_history=_push(s["rho_history"], jnp.reciprocal(rho_inv).astype(
                        y.dtype)),
                    gamma=(rho_inv / jnp.real(_dot(jnp.conj(y), y))).astype(s["g"].dtype),
                    status=jnp.where(converged, 0, status), ls_status=ls.status)
    return lax.while_loop(lambda s: ~s["converged"] & ~s["failed"], body, state)
