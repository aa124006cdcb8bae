"""A line search for the strong Wolfe conditions (Nocedal & Wright, Algorithms 3.5 and
3.6): bracket a step by doubling, then "zoom" into the bracket by cubic, quadratic or
bisection steps. Both phases are ``while_loop``s, so it runs under jit and vmap.

Everything in a loop state is an array of a fixed dtype (steps in the search direction's
dtype, values in the objective's), which keeps the loop carries' types stable."""
from typing import NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes
from xform.transforms.ad import value_and_grad


class _LineSearchResults(NamedTuple):
    """What :func:`line_search` returns (JAX's fields)."""
    failed: object
    nit: object
    nfev: object
    ngev: object
    k: object
    a_k: object
    f_k: object
    g_k: object
    status: object


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * rb - db ** 2 * rc) / denom
    B = (-dc ** 3 * rb + db ** 3 * rc) / denom
    return a + (-B + jnp.sqrt(B * B - 3. * A * fpa)) / (3. * A)


def _quadmin(a, fa, fpa, b, fb):
    """The minimizer of the quadratic through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    return a - fpa / (2. * ((fb - fa - fpa * db) / db ** 2))


def _pick(cond, new, old):
    """``old`` (a dict of arrays) with the entries of ``new`` where ``cond`` holds."""
    return {**old, **{k: jnp.where(cond, v, old[k]) for k, v in new.items()}}


def _zoom(phi_dphi, wolfe_one, wolfe_two, lo, hi, g_0, pass_through):
    """Shrink the bracket ``lo``/``hi`` (each (a, phi, dphi)) until a step satisfies both
    Wolfe conditions; nothing runs where ``pass_through``."""
    (a_lo, phi_lo, dphi_lo), (a_hi, phi_hi, dphi_hi) = lo, hi
    zero = jnp.asarray(0)   # counters are weak default ints (int64 under x64), as JAX's
    state = dict(done=jnp.array(False), failed=jnp.array(False), j=zero,
                 a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo,
                 a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi,
                 a_rec=(a_lo + a_hi) / 2., phi_rec=(phi_lo + phi_hi) / 2.,
                 a_star=jnp.ones_like(a_lo), phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_0,
                 nfev=zero, ngev=zero)
    tiny = 1e-5 if dtypes.finfo(a_lo.dtype).bits < 64 else 1e-10

    def body(s):
        gap = s["a_hi"] - s["a_lo"]
        left, right = jnp.minimum(s["a_hi"], s["a_lo"]), jnp.maximum(s["a_hi"], s["a_lo"])
        failed = s["failed"] | (gap <= tiny)
        cubic = _cubicmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"],
                          s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (cubic > left + 0.2 * gap) & (cubic < right - 0.2 * gap)
        quad = _quadmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"])
        use_quad = ~use_cubic & (quad > left + 0.1 * gap) & (quad < right - 0.1 * gap)
        a_j = jnp.where(use_cubic, cubic,
                        jnp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2.))
        phi_j, dphi_j, g_j = phi_dphi(a_j)
        phi_j, dphi_j = phi_j.astype(phi_lo.dtype), dphi_j.astype(dphi_lo.dtype)
        g_j = g_j.astype(g_0.dtype)
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s["phi_lo"])
        star_to_j = wolfe_two(dphi_j) & ~hi_to_j
        lo_to_j = ~hi_to_j & ~star_to_j
        hi_to_lo = lo_to_j & (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0.)
        new = dict(s, failed=failed, nfev=s["nfev"] + 1, ngev=s["ngev"] + 1,
                   done=s["done"] | star_to_j)
        # the step is too long: it becomes the new high end
        new = _pick(hi_to_j, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j,
                                  a_rec=s["a_hi"], phi_rec=s["phi_hi"]), new)
        new = _pick(star_to_j, dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j,
                                    g_star=g_j), new)
        # a sufficient decrease: the new low end (the old low end becomes the high end
        # when the slope points back across the bracket)
        new = _pick(hi_to_lo, dict(a_hi=s["a_lo"], phi_hi=s["phi_lo"],
                                   dphi_hi=s["dphi_lo"]), new)
        new = _pick(lo_to_j, dict(
            a_rec=jnp.where(hi_to_lo, s["a_hi"], s["a_lo"]),
            phi_rec=jnp.where(hi_to_lo, s["phi_hi"], s["phi_lo"]),
            a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j), new)
        j = s["j"] + 1
        return dict(new, j=j, failed=new["failed"] | (j >= 30))
    return lax.while_loop(lambda s: ~s["done"] & ~pass_through & ~s["failed"], body, state)


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
    """Find a step ``a`` along ``pk`` from ``xk`` meeting the strong Wolfe conditions, as
    ``jax.scipy.optimize.line_search`` (``scipy.optimize.line_search``'s algorithm).

    Args:
      f: the objective, a scalar function of ``xk``'s shape.
      xk, pk: the start point and the (descent) search direction.
      old_fval, gfk: ``f(xk)`` and its gradient, when known (saves an evaluation).
      old_old_fval: the previous iterate's value, for the first step's guess.
      c1, c2: the sufficient-decrease and curvature constants.
      maxiter: the most bracketing iterations.

    Returns:
      ``_LineSearchResults`` (``failed``, ``a_k``, ``f_k``, ``g_k``, counts, ``status``:
      0 ok, 1 zoom failed, 3 maxiter reached).

    >>> r = xform.scipy.optimize.line_search(lambda x: (x ** 2).sum(),
    ...                                      jnp.array([1.]), jnp.array([-1.]))
    >>> float(r.a_k), bool(r.failed)
    (1.0, False)
    """
    xk, pk = (jnp.asarray(v) for v in (xk, pk))
    xk, pk = (v.astype(jnp.result_type(xk, pk, 1.0)) for v in (xk, pk))
    a_dtype = np.empty((), pk.dtype).real.dtype

    def phi_dphi(t):
        value, g = value_and_grad(f)(xk + jnp.asarray(t, pk.dtype) * pk)
        return value, jnp.real(_dot(g, pk)), g

    counted = old_fval is None or gfk is None
    if counted:
        phi_0, dphi_0, gfk = phi_dphi(0)
    else:
        phi_0, dphi_0 = jnp.asarray(old_fval), jnp.real(_dot(gfk, pk))
    start = jnp.ones((), a_dtype)
    if old_old_fval is not None:
        guess = (1.01 * 2 * (phi_0 - old_old_fval) / dphi_0).astype(a_dtype)
        start = jnp.where(guess > 1, start, guess)

    def wolfe_one(a, phi):   # sufficient decrease fails
        return phi > phi_0 + c1 * a * dphi_0

    def wolfe_two(dphi):     # the curvature condition holds
        return jnp.abs(dphi) <= -c2 * dphi_0

    count = jnp.asarray(int(counted))   # weak default int, as JAX's Python-int counters
    state = dict(done=jnp.array(False), failed=jnp.array(False),
                 i=jnp.asarray(1), a_i1=jnp.zeros((), a_dtype), phi_i1=phi_0,
                 dphi_i1=dphi_0, nfev=count, ngev=count, a_star=jnp.zeros((), a_dtype),
                 phi_star=phi_0, dphi_star=dphi_0, g_star=gfk)

    def body(s):
        a_i = jnp.where(s["i"] == 1, start, s["a_i1"] * 2.)
        phi_i, dphi_i, g_i = phi_dphi(a_i)
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s["phi_i1"]) & (s["i"] > 1))
        to_i = wolfe_two(dphi_i) & ~to_zoom1
        to_zoom2 = (dphi_i >= 0.) & ~to_zoom1 & ~to_i
        prev, here = (s["a_i1"], s["phi_i1"], s["dphi_i1"]), (a_i, phi_i, dphi_i)
        zoom1 = _zoom(phi_dphi, wolfe_one, wolfe_two, prev, here, gfk, ~to_zoom1)
        zoom2 = _zoom(phi_dphi, wolfe_one, wolfe_two, here, prev, gfk, ~to_zoom2)
        new = dict(s, nfev=s["nfev"] + 1 + zoom1["nfev"] + zoom2["nfev"],
                   ngev=s["ngev"] + 1 + zoom1["ngev"] + zoom2["ngev"],
                   done=s["done"] | to_zoom1 | to_i | to_zoom2,
                   failed=s["failed"] | (to_zoom1 & zoom1["failed"])
                   | (to_zoom2 & zoom2["failed"]))
        star = ("a_star", "phi_star", "dphi_star", "g_star")
        new = _pick(to_zoom1, {k: zoom1[k] for k in star}, new)
        new = _pick(to_i, dict(zip(star, (a_i, phi_i, dphi_i, g_i))), new)
        new = _pick(to_zoom2, {k: zoom2[k] for k in star}, new)
        return dict(new, i=s["i"] + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)

    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body,
                       state)
    status = jnp.where(s["failed"], 1, jnp.where(s["i"] > maxiter, 3, 0))
    a_k = s["a_star"]
    if dtypes.finfo(a_k.dtype).bits != 64:   # keep a float32 step off (subnormal) zero
        a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
    return _LineSearchResults(failed=s["failed"] | ~s["done"], nit=s["i"] - 1,
                              nfev=s["nfev"], ngev=s["ngev"], k=s["i"], a_k=a_k,
                              f_k=s["phi_star"], g_k=s["g_star"], status=status)
