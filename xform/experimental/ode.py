"""``xform.experimental.ode.odeint``: ``jax.experimental.ode``'s adaptive Dormand-Prince
(RK45) integrator, with gradients by the adjoint method.

The forward pass is one jitted program: a ``scan`` over the requested times, each an
adaptive ``while_loop`` of Dormand-Prince steps (a step is kept when its error estimate
is within ``rtol``/``atol``; the next size follows the usual 5th-order controller), the
output at each time read off the 4th-order polynomial fitted through the last kept step.
The VJP integrates the augmented adjoint system backwards between consecutive times
(Chen et al. 2018, appendix C), so memory does not grow with the number of steps. Same
method, tableau, step-size rules and interpolation as JAX's, so the two agree to the
solver's tolerance and usually to rounding.
"""
import functools
import operator

from xform import lax
from xform import numpy as jnp
from xform.core import tree_util
from xform.flatten_util import ravel_pytree
from xform.numpy import _util
from xform.transforms.ad import vjp
from xform.transforms.custom_derivatives import closure_convert, custom_vjp
from xform.transforms.jit import jit
from xform.transforms.vmap import vmap

__all__ = ["odeint"]

# Dormand-Prince 5(4): nodes, stages, 5th-order weights, (5th - 4th)-order weights, and
# the weights of the midpoint used for dense output (Shampine 1986).
_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1.)
_STAGES = ((1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
           (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
           (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
           (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_B5 = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_ERR = (35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
        -2187 / 6784 - -12231 / 42400, 11 / 84 - 649 / 6300, -1. / 60.)
_MID = tuple(c / 2 for c in (6025192743 / 30085553152, 0, 51252292925 / 65400821598,
                             -2691868925 / 45128329728, 187940372067 / 1594534317056,
                             -1776094331 / 19743644256, 11237099 / 235043384))


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)   # (JAX's solver: "highest")


def _table(rows, dtype):
    """The stage coefficients as a (6, 7) matrix (zeros past each row's stages)."""
    return jnp.array([list(r) + [0.] * (7 - len(r)) for r in rows], dtype=dtype)


def _dopri_step(f, y, fy, t, dt):
    """One step from (t, y) with f(y, t) = fy: (y_new, f(y_new), error estimate, the
    seven stage derivatives as rows)."""
    nodes = jnp.array(_NODES + (0.,), dtype=dt.dtype)
    coeffs = _table(_STAGES, fy.dtype)
    h = dt.astype(fy.dtype)

    def stage(i, k):
        yi = y + h * _dot(coeffs[i - 1, :], k)
        return k.at[i, :].set(f(yi, t + dt * nodes[i - 1]))
    k = lax.fori_loop(1, 7, stage, jnp.zeros((7, fy.shape[0]), fy.dtype).at[0, :].set(fy))
    y_new = h * _dot(jnp.array(_B5, fy.dtype), k) + y
    return y_new, k[-1], h * _dot(jnp.array(_ERR, fy.dtype), k), k


def _dense_output(y0, y1, k, dt):
    """Coefficients (highest power first) of the quartic through y0 and y1 with their
    slopes and the midpoint value, in the step's relative time [0, 1]."""
    h = dt.astype(y0.dtype)
    y_mid = y0 + h * _dot(jnp.array(_MID, y0.dtype), k)
    dy0, dy1 = k[0], k[-1]
    return jnp.asarray([
        -2. * h * dy0 + 2. * h * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid,
        5. * h * dy0 - 3. * h * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid,
        -4. * h * dy0 + h * dy1 - 11. * y0 - 5. * y1 + 16. * y_mid,
        h * dy0,
        y0])


def _first_step(f, t0, y0, order, rtol, atol, f0):
    """Hairer, Norsett & Wanner's starting step size (Solving ODEs I, II.4)."""
    y0, f0 = _util.promote_dtypes("odeint", y0, f0, to="inexact")
    scale = (atol + jnp.abs(y0) * rtol).astype(y0.dtype)
    d0, d1 = jnp.linalg.norm(y0 / scale), jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = f(y0 + h0.astype(y0.dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


def _error_ratio(err, rtol, atol, y0, y1):
    """RMS of the error over the per-component tolerance."""
    tol = (atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))).astype(err.dtype)
    r = err / tol
    sq = r.real ** 2 + r.imag ** 2 if jnp.iscomplexobj(r) else r ** 2
    return jnp.sqrt(jnp.mean(sq))


def _next_step(dt, ratio, safety=0.9, grow=10.0, shrink=0.2, order=5.0):
    shrink = jnp.where(ratio < 1, 1.0, shrink)   # (never shrink after an accepted step)
    factor = jnp.minimum(grow, jnp.maximum(ratio ** (-1.0 / order) * safety, shrink))
    return jnp.where(ratio == 0, dt * grow, dt * factor)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=jnp.inf, hmax=jnp.inf):
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; the solution at every
    time in ``t`` (floats, strictly increasing), stacked on a new leading axis. ``y0``
    may be a pytree; ``args`` arrays or pytrees of arrays (differentiable, as are ``y0``
    and ``t``). ``rtol``/``atol``: local error tolerances; ``mxstep``: most steps per
    output time; ``hmax``: largest step.

    >>> import xform.numpy as jnp
    >>> ys = odeint(lambda y, t: -y, jnp.float32(1.), jnp.array([0., 1.]))
    >>> print(abs(float(ys[1]) - float(jnp.exp(-1.))) < 1e-6)
    True
    """
    for arg in tree_util.tree_leaves(args):
        if not _util.is_arraylike(arg):
            raise TypeError(
                f"The contents of odeint *args must be arrays or scalars, but got {arg}.")
    if not jnp.issubdtype(jnp.result_type(t), jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint_flat(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


@functools.partial(jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_flat(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0, unravel = ravel_pytree(y0)

    def flat(y, t, *a):
        return ravel_pytree(func(unravel(y), t, *a))[0]
    return vmap(unravel)(_solve(flat, rtol, atol, mxstep, hmax, y0, ts, *args))


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    def f(y, t):
        return func(y, t, *args)

    def to_time(carry, target):
        def unfinished(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def attempt(state):
            i, y, fy, t, dt, last_t, poly = state
            y1, f1, err, k = _dopri_step(f, y, fy, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, y1)
            dt_next = jnp.clip(_next_step(dt, ratio), min=0., max=hmax)
            ok = ratio <= 1.
            kept = [y1, f1, t + dt, dt_next, t, _dense_output(y, y1, k, dt)]
            stay = [y, fy, t, dt_next, last_t, poly]
            return [i + 1] + [jnp.where(ok, a, b) for a, b in zip(kept, stay)]
        _, *carry = lax.while_loop(unfinished, attempt, [0] + carry)
        _, _, t, _, last_t, poly = carry
        s = (target - last_t) / (t - last_t)
        return carry, jnp.polyval(poly, s.astype(poly.dtype))

    f0 = f(y0, ts[0])
    dt = jnp.clip(_first_step(f, ts[0], y0, 4, rtol, atol, f0), min=0., max=hmax)
    init = [y0, f0, ts[0], dt, ts[0], jnp.array([y0] * 5)]
    _, ys = lax.scan(to_time, init, ts[1:])
    return jnp.concatenate((y0[None], ys))


def _solve_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _solve_bwd(func, rtol, atol, mxstep, hmax, res, g):
    """Integrate (y, y's adjoint, t0's and args' adjoints) backwards from each output
    time to the previous one, adding each output's cotangent on the way."""
    ys, ts, args = res

    def augmented(state, minus_t, *a):   # (time runs backwards: -t forwards)
        y, y_bar = state[0], state[1]
        y_dot, pullback = vjp(func, y, -minus_t, *a)
        return (-y_dot, *pullback(y_bar))

    def back_one(carry, i):
        y_bar, t0_bar, args_bar = carry
        t_bar = _dot(func(ys[i], ts[i], *args), g[i]).real   # (time is real)
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            augmented, (ys[i], y_bar, t0_bar, args_bar), jnp.array([-ts[i], -ts[i - 1]]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_util.tree_map(operator.itemgetter(1),
                                                     (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], 0., tree_util.tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), ts_bar = lax.scan(back_one, init,
                                                 jnp.arange(len(ts) - 1, 0, -1))
    return (y_bar, jnp.concatenate([jnp.array([t0_bar]), ts_bar[::-1]]), *args_bar)


_solve.defvjp(_solve_fwd, _solve_bwd)
