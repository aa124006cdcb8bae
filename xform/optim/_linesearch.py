"""Linesearches as extra-args transformations (Optax's ``linesearch.py``): their
``update`` takes ``value=``, ``grad=`` and ``value_fn=`` and scales the incoming
direction by a stepsize found with extra calls to ``value_fn`` inside a ``while_loop``.
"""
import functools
import inspect
from typing import Any, NamedTuple

import numpy as np

import xform.numpy as jnp
from xform import debug, lax
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformationExtraArgs, safe_increment
from xform.optim.tree_utils import (tree_add_scale, tree_cast_like, tree_conj, tree_get,
                                    tree_real, tree_scale, tree_vdot, tree_where,
                                    tree_zeros_like)
from xform.transforms.ad import linearize, value_and_grad
from xform.transforms.ad_extras import linear_transpose


def _value_dtype(params):
    """The real dtype of the first parameter: values, stepsizes and errors use it."""
    return jnp.real(jnp.empty((), tu.tree_leaves(params)[0].dtype)).dtype


def _extract_fns_kwargs(fns, kwargs):
    """Split ``kwargs`` into those each of ``fns`` accepts (by parameter name) and the
    rest, which none accepts."""
    names = [list(inspect.signature(fn).parameters) for fn in fns]
    fns_kwargs = [{k: v for k, v in kwargs.items() if k in n} for n in names]
    every = [k for n in names for k in n]
    return fns_kwargs, {k: v for k, v in kwargs.items() if k not in every}


def _fn_kwargs(name, value_fn, extra_args):
    (fn_kwargs,), remaining = _extract_fns_kwargs((value_fn,), extra_args)
    if remaining:
        raise TypeError(f"Unexpected keyword arguments passed to `{name}.update`. These "
                        f"arguments were not consumed by `value_fn`: {sorted(remaining)}. "
                        "Ensure that all extra keyword arguments are accepted by `value_fn`.")
    return fn_kwargs


def _cond_print(condition, message, **kwargs):
    lax.cond(condition, lambda: debug.print(message, **kwargs, ordered=True), lambda: None)


# ---- backtracking (Armijo) ----

class BacktrackingLinesearchInfo(NamedTuple):
    """Diagnostics of one backtracking round: steps taken and the final decrease error
    (positive: no stepsize with sufficient decrease was found)."""
    num_linesearch_steps: Any
    decrease_error: Any


class ScaleByBacktrackingLinesearchState(NamedTuple):
    """State of :func:`scale_by_backtracking_linesearch`: the accepted ``learning_rate``,
    the ``value`` (and, with ``store_grad``, ``grad``, else None) at the accepted point,
    which :func:`value_and_grad_from_state` reuses, and ``info``."""
    learning_rate: Any
    value: Any
    grad: Any
    info: BacktrackingLinesearchInfo


class BacktrackingLineSearchState(NamedTuple):
    """Carry of the backtracking loop."""
    learning_rate: Any
    new_value: Any
    new_grad: Any
    decrease_error: Any
    iter_num: Any


def scale_by_backtracking_linesearch(max_backtracking_steps, slope_rtol=1e-4,
                                     decrease_factor=0.8, increase_factor=1.5,
                                     max_learning_rate=1.0, atol=0.0, rtol=0.0,
                                     store_grad=False, verbose=False):
    r"""Backtracking linesearch ensuring sufficient decrease (Armijo criterion).

    Starting from ``min(increase_factor * previous_lr, max_learning_rate)``, multiplies
    the learning rate :math:`\eta` by ``decrease_factor`` until
    :math:`f(w + \eta u) \le (1 + rtol) f(w) + \eta\, c \langle u, \nabla f(w)\rangle +
    atol` (:math:`c` = ``slope_rtol``) or ``max_backtracking_steps`` is reached, then
    returns :math:`\eta u`. A NaN/inf value at every tried step gives a stepsize of 0.
    The incoming updates must be a descent direction (e.g. from ``sgd``).

    Args:
      max_backtracking_steps: maximum number of iterations.
      slope_rtol: ``c`` above.
      decrease_factor: factor shrinking the learning rate.
      increase_factor: factor growing the previous learning rate into the first guess.
      max_learning_rate: cap on the first guess.
      atol: absolute tolerance of the criterion.
      rtol: relative tolerance of the criterion.
      store_grad: also compute the gradient at the accepted point (stored in the state
        for :func:`value_and_grad_from_state`).
      verbose: print diagnostics when the linesearch fails.

    Returns:
      A :class:`GradientTransformationExtraArgs` whose ``update(updates, state, params,
      *, value, grad, value_fn, **extra_args)`` takes the value and gradient at
      ``params``, the objective ``value_fn`` and the keyword arguments ``value_fn``
      accepts (data, ...); other extra arguments raise TypeError.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> fn = lambda p: jnp.sum(p ** 2)
        >>> solver = optax.chain(optax.sgd(1.), optax.scale_by_backtracking_linesearch(15))
        >>> params = jnp.array([1., 2., 3.])
        >>> state = solver.init(params)
        >>> value, grad = xform.value_and_grad(fn)(params)
        >>> updates, state = solver.update(grad, state, params, value=value, grad=grad,
        ...                                value_fn=fn)
        >>> print(f"{fn(optax.apply_updates(params, updates)):.2E}")
        5.04E+00
    """
    def init_fn(params):
        dtype = _value_dtype(params)
        return ScaleByBacktrackingLinesearchState(
            learning_rate=jnp.array(1.0, dtype), value=jnp.array(jnp.inf, dtype),
            grad=tree_zeros_like(params) if store_grad else None,
            info=BacktrackingLinesearchInfo(num_linesearch_steps=jnp.asarray(0),
                                            decrease_error=jnp.array(jnp.inf, dtype)))

    def decrease_error_of(stepsize, slope, value, new_value):
        err = new_value - (1.0 + rtol) * value - stepsize * slope_rtol * slope
        return jnp.maximum(jnp.where(jnp.isnan(err), jnp.inf, err), 0.0)

    def update_fn(updates, state, params, *, value, grad, value_fn, **extra_args):
        fn = functools.partial(value_fn, **_fn_kwargs(
            "scale_by_backtracking_linesearch", value_fn, extra_args))
        # slope of lr -> f(params + lr * updates) at 0: negative for a descent direction
        slope = tree_real(tree_vdot(updates, tree_conj(grad)))

        def cond_fn(s):
            return (~(s.decrease_error <= atol)) & (s.iter_num <= max_backtracking_steps)

        def body_fn(s):
            lr = jnp.where(s.iter_num > 0, decrease_factor * s.learning_rate, s.learning_rate)
            new_params = tree_add_scale(params, lr, updates)
            new_grad = s.new_grad
            if store_grad:   # the gradient by transposing the jvp, only once accepted
                new_value, f_jvp = linearize(fn, new_params)
                err = decrease_error_of(lr, slope, value, new_value)
                new_grad = lax.cond(
                    (err <= atol) | (s.iter_num == max_backtracking_steps),
                    lambda p: linear_transpose(f_jvp, p)(1.0)[0],
                    lambda p: s.new_grad, new_params)
            else:
                new_value = fn(new_params)
                err = decrease_error_of(lr, slope, value, new_value)
            return tree_cast_like(BacktrackingLineSearchState(
                lr, new_value, new_grad, err, s.iter_num + 1), s)

        first_lr = jnp.minimum(increase_factor * state.learning_rate, max_learning_rate)
        s = lax.while_loop(cond_fn, body_fn, BacktrackingLineSearchState(
            first_lr, value, tree_zeros_like(params), jnp.array(jnp.inf), 0))
        # an inf error (NaN/inf values everywhere tried): make no step at all
        lr = jnp.where(jnp.isinf(s.decrease_error), 0.0, s.learning_rate)
        if verbose:
            _cond_print(s.decrease_error > atol,
                        "INFO: optax.scale_by_backtracking_linesearch:\nBacktracking "
                        "linesearch failed to find a stepsize ensuring sufficent decrease.\n"
                        "Value at current params: {value},\nSlope along update direction: "
                        "{slope}\nStepsize: {stepsize}\nDecrease Error: {decrease_error}",
                        stepsize=s.learning_rate, decrease_error=s.decrease_error,
                        value=value, slope=slope)
            _cond_print(jnp.isinf(s.decrease_error),
                        "Using a stepsize of 0 to avoid infinite or nan values.")
        new_state = ScaleByBacktrackingLinesearchState(
            learning_rate=lr, value=s.new_value, grad=s.new_grad if store_grad else None,
            info=BacktrackingLinesearchInfo(s.iter_num, s.decrease_error))
        return tree_scale(lr, updates), tree_cast_like(new_state, state)

    return GradientTransformationExtraArgs(init_fn, update_fn)


# ---- zoom (strong Wolfe), Nocedal & Wright algorithms 3.5 and 3.6 ----

FLAG_INTERVAL_NOT_FOUND = ("No interval satisfying curvature condition. Consider increasing "
                           "maximal possible stepsize of the linesearch.")
FLAG_INTERVAL_TOO_SMALL = "Length of searched interval has been reduced below threshold."
FLAG_CURVATURE_COND_NOT_SATISFIED = ("Returning stepsize with sufficient decrease but "
                                     "curvature condition not satisfied.")
FLAG_NO_STEPSIZE_FOUND = "Linesearch failed, no stepsize satisfying sufficient decrease found."
FLAG_NOT_A_DESCENT_DIRECTION = ("The linesearch failed because the provided direction is not "
                                "a descent direction. ")


class ZoomLinesearchState(NamedTuple):
    """Carry of the zoom loop. ``low``/``high`` bracket an acceptable stepsize with
    ``value(high) >= value(low)`` (not ``low < high``); ``safe_*`` is the best point
    with sufficient decrease seen, the fallback when curvature cannot be met."""
    count: Any
    params: Any
    updates: Any
    stepsize_guess: Any
    stepsize: Any
    value: Any
    grad: Any
    slope: Any
    value_init: Any
    slope_init: Any
    decrease_error: Any
    curvature_error: Any
    error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any
    value_cubic_ref: Any
    safe_stepsize: Any
    safe_value: Any
    safe_grad: Any


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """Critical point of the cubic through (a, fa), (b, fb), (c, fc) with slope fpa at a
    (NaN when there is none; callers then ignore it)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = jnp.array([[dc ** 2, -(db ** 2)], [-(dc ** 3), db ** 3]])
    ab = jnp.dot(d1, jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc]),
                 precision=lax.Precision.HIGHEST) / denom
    A, B = ab[0], ab[1]  # noqa: N806
    return a + (-B + jnp.sqrt(B * B - 3.0 * A * fpa)) / (3.0 * A)


def _quadmin(a, fa, fpa, b, fb):
    """Critical point of the quadratic through (a, fa), (b, fb) with slope fpa at a."""
    db = b - a
    B = (fb - fa - fpa * db) / (db ** 2)  # noqa: N806
    return a - fpa / (2.0 * B)


def zoom_linesearch(max_linesearch_steps, max_stepsize=None, tol=0.0, increase_factor=2.0,
                    slope_rtol=1e-4, curv_rtol=0.9, approx_dec_rtol=1e-6,
                    interval_threshold=1e-5, verbose=False):
    """The zoom linesearch as ``(init_fn, step_fn, cond_step_fn)`` over a
    :class:`ZoomLinesearchState` (see :func:`scale_by_zoom_linesearch`)."""

    def on_line(value_and_grad_fn, params, stepsize, updates, fn_kwargs):
        step = tree_add_scale(params, stepsize, updates)
        value, grad = value_and_grad_fn(step, **fn_kwargs)
        return value, grad, tree_real(tree_vdot(tree_conj(grad), updates))

    def decrease_error_of(stepsize, value, slope, value_init, slope_init):
        err = value - value_init - slope_rtol * stepsize * slope_init     # Armijo
        if approx_dec_rtol is not None:
            # Hager & Zhang's approximate decrease, taken only close to the minimum
            approx = slope - (2 * slope_rtol - 1.0) * slope_init
            delta = value - value_init - approx_dec_rtol * jnp.abs(value_init)
            err = jnp.minimum(jnp.maximum(approx, delta), err)
        err = jnp.maximum(err, 0.0)
        return jnp.where(jnp.isnan(err), jnp.inf, err)

    def curvature_error_of(slope, slope_init):
        err = jnp.maximum(jnp.abs(slope) - curv_rtol * jnp.abs(slope_init), 0.0)
        return jnp.where(jnp.isnan(err), jnp.inf, err)

    def try_safe_step(state):
        outside_domain = jnp.isinf(state.decrease_error)
        stepsize, value, grad = tree_where(
            (state.safe_stepsize > 0.0) | outside_domain,
            [state.safe_stepsize, state.safe_value, state.safe_grad],
            [state.stepsize, state.value, state.grad])
        if verbose:
            debug.print("INFO: optax.scale_by_zoom_linesearch:\nValue at current params: "
                        "{value_init}\nSlope along update direction: {slope_init}\n"
                        "Stepsize reached: {stepsize}\nDecrease Error: {decrease_error}\n"
                        "Curvature Error: {curvature_error}", value_init=state.value_init,
                        slope_init=state.slope_init, stepsize=state.stepsize,
                        decrease_error=state.decrease_error,
                        curvature_error=state.curvature_error, ordered=True)
            length = jnp.abs(state.low - state.high)
            _cond_print(length <= interval_threshold,
                        FLAG_INTERVAL_TOO_SMALL + " Interval length: {interval_length}.",
                        interval_length=length)
            lax.cond(state.safe_stepsize > 0.0,
                     lambda s: debug.print(FLAG_CURVATURE_COND_NOT_SATISFIED + " Stepsize "
                                           "ensuring sufficient decrease: {safe_stepsize}.",
                                           safe_stepsize=s.safe_stepsize),
                     failure_diagnostic, state)
        return tree_cast_like(state._replace(stepsize=stepsize, grad=grad, value=value),
                              state)

    def failure_diagnostic(state):
        debug.print(FLAG_NO_STEPSIZE_FOUND)
        descent = state.slope_init < 0.0
        _cond_print(~descent, FLAG_NOT_A_DESCENT_DIRECTION + "The slope (={slope_init}) at "
                    "stepsize=0 should be negative", slope_init=state.slope_init)
        _cond_print(descent, "Consider augmenting the maximal number of linesearch "
                    "iterations.")
        eps = np.finfo(np.float32).eps
        _cond_print((state.stepsize < eps) & descent,
                    "Computed stepsize (={stepsize}) is below machine precision (={eps}), "
                    "consider passing to higher precision like x64, using "
                    "jax.config.update('jax_enable_x64', True).",
                    stepsize=state.stepsize, eps=eps)
        _cond_print((jnp.abs(state.slope_init) > 1e16) & descent,
                    "Very large absolute slope at stepsize=0. (|slope|={abs_slope_init}). "
                    "The objective is badly conditioned. Consider reparameterizing "
                    "objective (e.g., normalizing parameters) or finding a better guess for "
                    "the initial parameters for the solver.",
                    abs_slope_init=jnp.abs(state.slope_init))
        outside_domain = jnp.isinf(state.decrease_error)
        _cond_print(outside_domain, "Cannot even make a step without getting Inf or Nan. "
                    "The linesearch won't make a step and the optimizer is stuck.")
        _cond_print(~outside_domain, "Making an unsafe step, not decreasing enough the "
                    "objective. Convergence of the solver is compromised as it does not "
                    "reduce values.")

    def search_interval(state, value_and_grad_fn, fn_kwargs):
        """Algorithm 3.5: grow the stepsize until an interval brackets a good one."""
        it = state.count
        new = jnp.where(it == 0, state.stepsize_guess, increase_factor * state.stepsize)
        if max_stepsize is not None:
            max_reached = new >= max_stepsize
            new = jnp.minimum(new, max_stepsize)
        else:
            max_reached = jnp.asarray(False)
        value, grad, slope = on_line(value_and_grad_fn, state.params, new, state.updates,
                                     fn_kwargs)
        dec = decrease_error_of(new, value, slope, state.value_init, state.slope_init)
        curv = curvature_error_of(slope, state.slope_init)
        error = jnp.maximum(dec, curv)
        safe = tree_where(dec <= tol, [new, value, grad],
                          [state.safe_stepsize, state.safe_value, state.safe_grad])
        set_high = (dec > 0.0) | ((value >= state.value) & (it > 0))
        set_low = (slope >= 0.0) & ~set_high
        prev = [state.stepsize, state.value, state.slope]
        low, value_low, slope_low, high, value_high, slope_high = tree_where(
            set_low, [new, value, slope] + prev, prev + [new, value, slope])
        interval_found = set_high | set_low | (error <= tol)
        # at the maximal stepsize with no interval, curvature cannot be met: stop there
        done = (error <= tol) | (max_reached & ~interval_found)
        if verbose:
            _cond_print(max_reached & ~interval_found,
                        "INFO: optax.scale_by_zoom_linesearch:\nValue at current params: "
                        "{value_init}\nSlope along update direction: {slope_init}\n"
                        "Stepsize reached: {stepsize}\nDecrease Error: {decrease_error}\n"
                        "Curvature Error: {curvature_error}" + FLAG_INTERVAL_NOT_FOUND + "\n"
                        + FLAG_CURVATURE_COND_NOT_SATISFIED, value_init=state.value_init,
                        slope_init=state.slope_init, stepsize=new, decrease_error=dec,
                        curvature_error=curv)
        failed = (it + 1 >= max_linesearch_steps) & ~done
        new_state = state._replace(
            count=safe_increment(it), stepsize=new, value=value, grad=grad, slope=slope,
            decrease_error=dec, curvature_error=curv, error=error,
            interval_found=jnp.asarray(interval_found), done=jnp.asarray(done),
            failed=jnp.asarray(failed), low=low, value_low=value_low, slope_low=slope_low,
            high=high, value_high=value_high, slope_high=slope_high, cubic_ref=low,
            value_cubic_ref=value_low, safe_stepsize=safe[0], safe_value=safe[1],
            safe_grad=safe[2])
        return tree_cast_like(new_state, state)

    def zoom_into_interval(state, value_and_grad_fn, fn_kwargs):
        """Algorithm 3.6: shrink [low, high] by cubic/quadratic/bisection steps."""
        s = state
        delta = jnp.abs(s.high - s.low)
        left, right = jnp.minimum(s.high, s.low), jnp.maximum(s.high, s.low)
        cubic = _cubicmin(s.low, s.value_low, s.slope_low, s.high, s.value_high, s.cubic_ref,
                          s.value_cubic_ref)
        use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
        quad = _quadmin(s.low, s.value_low, s.slope_low, s.high, s.value_high)
        use_quad = ~use_cubic & (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
        middle = jnp.where(use_cubic, cubic, s.cubic_ref)
        middle = jnp.where(use_quad, quad, middle)
        middle = jnp.where(~use_cubic & ~use_quad, (s.low + s.high) / 2.0, middle)
        value, grad, slope = on_line(value_and_grad_fn, s.params, middle, s.updates,
                                     fn_kwargs)
        dec = decrease_error_of(middle, value, slope, s.value_init, s.slope_init)
        curv = curvature_error_of(slope, s.slope_init)
        error = jnp.maximum(dec, curv)
        # keep the lowest point with sufficient decrease as the fallback
        safe = tree_where((dec <= tol) & (value < s.safe_value), [middle, value, grad],
                          [s.safe_stepsize, s.safe_value, s.safe_grad])
        done = error <= tol
        set_high_to_middle = (dec > 0.0) | (value >= s.value_low)
        set_high_to_low = (slope * (s.high - s.low) >= 0.0) & ~set_high_to_middle
        high = tree_where(set_high_to_middle, [middle, value, slope],
                          [s.high, s.value_high, s.slope_high])
        high = tree_where(set_high_to_low, [s.low, s.value_low, s.slope_low], high)
        low = tree_where(~set_high_to_middle, [middle, value, slope],
                         [s.low, s.value_low, s.slope_low])
        # the point that high or low stopped being is the next cubic reference
        cubic_ref = tree_where(set_high_to_middle | set_high_to_low,
                               [s.high, s.value_high], [s.low, s.value_low])
        # stop below the interval threshold only once some step decreases enough
        # (very steep functions need tiny stepsizes)
        failed = (jnp.asarray(s.count + 1 >= max_linesearch_steps)
                  | ((delta <= interval_threshold) & (safe[0] > 0.0))) & ~done
        new_state = s._replace(
            count=safe_increment(s.count), stepsize=middle, value=value, grad=grad,
            slope=slope, decrease_error=dec, curvature_error=curv, error=error, done=done,
            failed=failed, low=low[0], value_low=low[1], slope_low=low[2], high=high[0],
            value_high=high[1], slope_high=high[2], cubic_ref=cubic_ref[0],
            value_cubic_ref=cubic_ref[1], safe_stepsize=safe[0], safe_value=safe[1],
            safe_grad=safe[2])
        return tree_cast_like(new_state, s)

    def init_fn(updates, params, *, value, grad, prev_stepsize=1.0,
                initial_guess_strategy="one"):
        if initial_guess_strategy == "one":
            guess = jnp.asarray(1.0)
        elif initial_guess_strategy == "keep":
            guess = prev_stepsize
        else:
            raise ValueError(f"Unknown initial guess strategy: {initial_guess_strategy}")
        dtype = _value_dtype(params)
        slope = tree_real(tree_vdot(updates, grad))
        inf, zero = jnp.asarray(jnp.inf), jnp.asarray(0.0)
        false = jnp.asarray(False)
        return ZoomLinesearchState(
            count=jnp.asarray(0), params=params, updates=updates, stepsize_guess=guess,
            stepsize=jnp.asarray(0.0, dtype), value=jnp.array(value, dtype), grad=grad,
            slope=slope, value_init=value, slope_init=slope, decrease_error=inf,
            curvature_error=inf, error=inf, interval_found=false, done=false, failed=false,
            low=zero, value_low=value, slope_low=slope, high=zero, value_high=value,
            slope_high=slope, cubic_ref=zero, value_cubic_ref=value, safe_stepsize=zero,
            safe_value=value, safe_grad=grad)

    def step_fn(state, *, value_and_grad_fn, fn_kwargs):
        new_state = lax.cond(
            state.interval_found,
            functools.partial(zoom_into_interval, value_and_grad_fn=value_and_grad_fn,
                              fn_kwargs=fn_kwargs),
            functools.partial(search_interval, value_and_grad_fn=value_and_grad_fn,
                              fn_kwargs=fn_kwargs),
            state)
        new_state = lax.cond(new_state.failed, try_safe_step, lambda s: s, new_state)
        return tree_cast_like(new_state, state)

    def cond_step_fn(state):
        return ~(state.done | state.failed)

    return init_fn, step_fn, cond_step_fn


class ZoomLinesearchInfo(NamedTuple):
    """Diagnostics of one zoom round: steps taken, and the final sufficient-decrease
    and curvature errors (0 when met; a positive decrease error means the values may not
    decrease monotonically)."""
    num_linesearch_steps: Any
    decrease_error: Any
    curvature_error: Any


class ScaleByZoomLinesearchState(NamedTuple):
    """State of :func:`scale_by_zoom_linesearch`: the accepted ``learning_rate``, the
    ``value`` and ``grad`` at the accepted point (reused by
    :func:`value_and_grad_from_state`) and ``info``."""
    learning_rate: Any
    value: Any
    grad: Any
    info: ZoomLinesearchInfo


def scale_by_zoom_linesearch(max_linesearch_steps, max_learning_rate=None, tol=0.0,
                             increase_factor=2.0, slope_rtol=1e-4, curv_rtol=0.9,
                             approx_dec_rtol=1e-6, stepsize_precision=1e-5,
                             initial_guess_strategy="keep", verbose=False):
    r"""Linesearch ensuring sufficient decrease and small curvature (strong Wolfe).

    Finds :math:`\eta` with :math:`f(w + \eta u) \le f(w) + \eta c_1 \langle u, \nabla
    f(w)\rangle + tol` and :math:`|\langle \nabla f(w + \eta u), u\rangle| \le c_2
    |\langle \nabla f(w), u\rangle| + tol` (:math:`c_1` = ``slope_rtol``, :math:`c_2` =
    ``curv_rtol``): first grows the stepsize by ``increase_factor`` until an interval
    brackets one, then zooms in by cubic/quadratic interpolation or bisection (Nocedal &
    Wright, algorithms 3.5-3.6). Near a minimum it switches to Hager & Zhang's
    approximate decrease criterion (disable with ``approx_dec_rtol=None``). If the
    interval shrinks below ``stepsize_precision`` or the steps run out, it falls back to
    the best stepsize with sufficient decrease seen.

    Args:
      max_linesearch_steps: maximum number of linesearch iterations.
      max_learning_rate: cap on the stepsize (None: none).
      tol: tolerance of both criteria.
      increase_factor: growth of the stepsize while searching for an interval.
      slope_rtol: :math:`c_1`.
      curv_rtol: :math:`c_2` (``jnp.inf`` drops the curvature criterion).
      approx_dec_rtol: relative tolerance on the value for switching to the approximate
        decrease criterion, or None.
      stepsize_precision: interval length below which a stepsize with sufficient
        decrease is accepted without the curvature criterion.
      initial_guess_strategy: ``'one'`` (start at 1, for quasi-Newton directions) or
        ``'keep'`` (start at the previous stepsize, for SGD).
      verbose: print diagnostics when the linesearch fails.

    Returns:
      A :class:`GradientTransformationExtraArgs` whose ``update(updates, state, params,
      *, value, grad, value_fn, **extra_args)`` takes the value and gradient at
      ``params``, the objective ``value_fn`` and the keyword arguments it accepts.

    Example:
        >>> import xform, xform.numpy as jnp, xform.optim as optax
        >>> fn = lambda p: jnp.sum(p ** 2)
        >>> solver = optax.chain(optax.sgd(1.), optax.scale_by_zoom_linesearch(15))
        >>> params = jnp.array([1., 2., 3.])
        >>> state = solver.init(params)
        >>> value, grad = xform.value_and_grad(fn)(params)
        >>> updates, state = solver.update(grad, state, params, value=value, grad=grad,
        ...                                value_fn=fn)
        >>> print(f"{fn(optax.apply_updates(params, updates)):.2E}")
        0.00E+00
    """
    init_ls, step_ls, cond_step_ls = zoom_linesearch(
        max_linesearch_steps=max_linesearch_steps, max_stepsize=max_learning_rate, tol=tol,
        increase_factor=increase_factor, slope_rtol=slope_rtol, curv_rtol=curv_rtol,
        approx_dec_rtol=approx_dec_rtol, interval_threshold=stepsize_precision,
        verbose=verbose)

    def init_fn(params):
        dtype = _value_dtype(params)
        inf = jnp.asarray(jnp.inf)
        return ScaleByZoomLinesearchState(
            learning_rate=jnp.asarray(1.0, dtype), value=jnp.asarray(jnp.inf, dtype),
            grad=tree_zeros_like(params),
            info=ZoomLinesearchInfo(jnp.asarray(0), inf, inf))

    def update_fn(updates, state, params, *, value, grad, value_fn, **extra_args):
        fn_kwargs = _fn_kwargs("scale_by_zoom_linesearch", value_fn, extra_args)
        init_state = init_ls(updates, params, value=value, grad=grad,
                             prev_stepsize=state.learning_rate,
                             initial_guess_strategy=initial_guess_strategy)
        final = lax.while_loop(cond_step_ls, functools.partial(
            step_ls, value_and_grad_fn=value_and_grad(value_fn), fn_kwargs=fn_kwargs),
            init_state)
        new_state = ScaleByZoomLinesearchState(
            learning_rate=final.stepsize, value=final.value, grad=final.grad,
            info=ZoomLinesearchInfo(final.count, final.decrease_error,
                                    final.curvature_error))
        return tree_scale(final.stepsize, updates), tree_cast_like(new_state, state)

    return GradientTransformationExtraArgs(init_fn, update_fn)


def value_and_grad_from_state(value_fn):
    """Like ``value_and_grad(value_fn)``, but reuses the value and gradient a linesearch
    stored in the optimizer state (found by name with ``tree_get``).

    The returned ``f(params, *args, state, **kwargs)`` recomputes them when the stored
    value is inf or NaN (e.g. the first step).

    Args:
      value_fn: the scalar objective.

    Returns:
      The ``(value, grad)`` function.

    Raises:
      ValueError: (when called) the state holds no ``value`` or ``grad`` (e.g. a
        backtracking linesearch without ``store_grad=True``).

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> fn = lambda x: jnp.sum(x ** 2)
        >>> solver = optax.chain(optax.sgd(1.), optax.scale_by_backtracking_linesearch(
        ...     max_backtracking_steps=15, store_grad=True))
        >>> params = jnp.array([1., 2., 3.])
        >>> state = solver.init(params)
        >>> value_and_grad = optax.value_and_grad_from_state(fn)
        >>> for _ in range(2):
        ...     value, grad = value_and_grad(params, state=state)
        ...     updates, state = solver.update(grad, state, params, value=value, grad=grad,
        ...                                    value_fn=fn)
        ...     params = optax.apply_updates(params, updates)
        ...     print(f"{fn(params):.2E}")
        5.04E+00
        1.81E+00
    """
    def _value_and_grad(params, *fn_args, state, **fn_kwargs):
        value, grad = tree_get(state, "value"), tree_get(state, "grad")
        if value is None or grad is None:
            raise ValueError("Value or gradient not found in the state. Make sure that "
                             "these values are stored in the state by the optimizer.")
        return lax.cond((~jnp.isinf(value)) & (~jnp.isnan(value)),
                        lambda *_: (value, grad),
                        lambda p, a, kwa: value_and_grad(value_fn)(p, *a, **kwa),
                        params, fn_args, fn_kwargs)
    return _value_and_grad

