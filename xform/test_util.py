"""Testing helpers, like ``jax.test_util``: ``check_grads`` (autodiff against finite
differences and jvp against vjp) and, when hypothesis is installed, strategies for
shapes and arrays.

The checks follow JAX's ``check_jvp``/``check_vjp``/``check_grads``: tangents and
cotangents are random directions, forward mode is compared with central differences,
reverse mode with the dot-product identity ``<u, J v> == <J^T u, v>``, and order ``n``
repeats the checks on the jvp/vjp functions themselves.

NB: unlike JAX, ``check_vjp`` also compares the vjp with the *autodiff* jvp (when
given ``f_jvp``, as ``check_grads`` does), under a tolerance close to machine precision:
that catches transpose-rule bugs that finite differences' looser tolerance would let
through. The default finite-difference step also depends on the dtype (JAX uses 1e-4
for all), which makes float32 checks meaningful.
"""
import functools

import numpy as np

import xform
from xform import dtypes, tree_util

__all__ = ["check_grads", "check_jvp", "check_vjp", "numerical_jvp", "shapes", "arrays",
           "float_elements"]

# Tolerances of finite-difference comparisons (JAX's default_gradient_tolerance).
_FD_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
           np.dtype(np.float64): 1e-5}
# Tolerances of the jvp-vs-vjp dot-product identity: both sides are exact up to rounding.
_AD_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5,
           np.dtype(np.float64): 1e-12}
# Finite-difference steps: rounding error ~ ulp / eps, truncation error ~ eps**2.
_EPS = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-4}
_DEFAULT_TOL = 1e-2   # dtypes not listed above (bfloat16 and friends)
_FLOAT0 = dtypes.float0   # the tangent dtype of int/bool values


# ---- pytree arithmetic in NumPy ----

def _np(x):
    return np.asarray(x)


def _dtype(x):
    return np.result_type(x) if not hasattr(x, "dtype") else np.dtype(x.dtype)


def _is_float(x):
    dt = _dtype(x)
    return dt != _FLOAT0 and np.issubdtype(dt, np.inexact)


def _leaf_tol(table, leaves, default=_DEFAULT_TOL):
    """The loosest tolerance among the leaves' dtypes (ints/bools count as exact)."""
    tols = [table.get(_dtype(x), default) for x in leaves if _is_float(x)]
    return max(tols) if tols else 0.0


def _rand_like(rng, x):
    return rng.standard_normal(np.shape(x)).astype(_dtype(x))


def _check_float_args(args, what):
    for path, leaf in tree_util.tree_flatten_with_path(args)[0]:
        if not _is_float(leaf):
            raise TypeError(
                f"{what} differentiates every argument leaf, so each must be floating "
                f"point; got dtype {_dtype(leaf).name} at args{tree_util.keystr(path)}. "
                "Close over integer and boolean arguments instead (e.g. with a lambda).")


def _perturb(args, tangents, eps):
    def step(x, t):
        x = _np(x)
        return xform.device_put(np.asarray(x + eps * t.astype(x.dtype), x.dtype))
    return tree_util.tree_map(step, args, tangents)


def numerical_jvp(f, args, tangents, eps=None):
    """Central finite difference ``(f(x + eps t) - f(x - eps t)) / (2 eps)``.

    Args:
      f: function of ``*args`` returning a pytree of arrays.
      args: tuple of primal arguments (pytrees of floating arrays).
      tangents: pytree like ``args`` of NumPy arrays: the direction.
      eps: the step; by default chosen from the arguments' dtype.

    Returns:
      A pytree like ``f``'s output of float64 NumPy arrays (zeros for int/bool outputs).
    """
    if eps is None:
        eps = _leaf_tol(_EPS, tree_util.tree_leaves(args), 1e-2) or 1e-4
    f_pos = f(*_perturb(args, tangents, eps))
    f_neg = f(*_perturb(args, tangents, -eps))

    def diff(a, b):
        if not _is_float(a):
            return np.zeros(np.shape(a), np.float64)
        return (_np(a).astype(np.float64) - _np(b).astype(np.float64)) * (0.5 / eps)
    return tree_util.tree_map(diff, f_pos, f_neg)


def _inner(xs, ys):
    """``sum(x * y)`` over matching float leaves, and ``sum(|x| * |y|)`` as its scale."""
    total = scale = 0.0
    for x, y in zip(tree_util.tree_leaves(xs), tree_util.tree_leaves(ys)):
        if not (_is_float(x) and _is_float(y)):
            continue
        x, y = _np(x).astype(np.float64), _np(y).astype(np.float64)
        total += float(np.sum(x * y))
        scale += float(np.sum(np.abs(x) * np.abs(y)))
    return total, scale


def _fail(err_msg, what, detail):
    raise AssertionError(f"check_grads: {err_msg}: {what} mismatch: {detail}")


def _check_close(actual, expected, atol, rtol, err_msg, what):
    """Leafwise ``|actual - expected| <= atol + rtol * |expected|`` (float leaves)."""
    a_leaves, a_tree = tree_util.tree_flatten(actual)
    e_leaves, e_tree = tree_util.tree_flatten(expected)
    if a_tree != e_tree:
        _fail(err_msg, what, f"tree structures differ: {a_tree} vs {e_tree}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = _np(a), _np(e)
        if a.shape != e.shape:
            _fail(err_msg, what, f"output leaf {i} has shape {a.shape}, expected {e.shape}")
        if not (_is_float(a) and _is_float(e)):
            if _is_float(a) or _is_float(e):   # a float tangent for an int output: zeros
                z = a if _is_float(a) else e
                if np.any(z != 0):
                    _fail(err_msg, what, f"output leaf {i}: nonzero tangent for an "
                          "integer-valued output")
            continue
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        err = np.abs(a64 - e64)
        bad = ~(err <= atol + rtol * np.abs(e64))   # NaN counts as a mismatch
        if np.any(bad):
            _fail(err_msg, what,
                  f"output leaf {i} (shape {a.shape}): max abs error "
                  f"{np.nanmax(np.where(np.isnan(err), np.inf, err)):.3g}, max rel error "
                  f"{np.max(np.where(bad, err / np.maximum(np.abs(e64), 1e-300), 0)):.3g} "
                  f"at {int(np.sum(bad))} of {a.size} elements (atol={atol:g}, "
                  f"rtol={rtol:g})\nactual:   {a64.ravel()[:8]}\nexpected: "
                  f"{e64.ravel()[:8]}")


def _check_scalar(actual, expected, scale, atol, rtol, err_msg, what):
    err = abs(actual - expected)
    if not err <= atol + rtol * scale:
        _fail(err_msg, what, f"max abs error {err:.3g} between {actual!r} and {expected!r} "
              f"(atol={atol:g}, rtol={rtol:g}, scale {scale:.3g})")


def _tolerances(args, outs, atol, rtol, table=_FD_TOL):
    leaves = tree_util.tree_leaves(args) + tree_util.tree_leaves(outs)
    default = _leaf_tol(table, leaves)
    return (default if atol is None else atol), (default if rtol is None else rtol)


def _float_tree(tree, fn):
    """``fn(leaf)`` on float leaves; float0 zeros on int/bool leaves."""
    return tree_util.tree_map(
        lambda x: fn(x) if _is_float(x) else np.zeros(np.shape(x), _FLOAT0), tree)


# ---- the checks ----

def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=None, err_msg=""):
    """Check ``f_jvp(args, tangents)`` against central finite differences of ``f``.

    Args:
      f: function of ``*args``.
      f_jvp: ``(primals, tangents) -> (f(*primals), J @ tangents)``, e.g.
        ``functools.partial(xform.jvp, f)``.
      args: tuple of floating-point arguments (pytrees allowed).
      atol, rtol: tolerances (default: by dtype, float32 looser than float64).
      eps: finite-difference step (default: by dtype).
      err_msg: prefix naming the check in failure messages.

    Raises:
      AssertionError: naming the check and the max error, if the primal output or the
        tangent differ from the reference.
    """
    args = tuple(args)
    err_msg = err_msg or "JVP"
    _check_float_args(args, "check_jvp")
    rng = np.random.RandomState(0)
    tangents = tree_util.tree_map(lambda x: _rand_like(rng, x), args)
    out, t_out = f_jvp(args, tree_util.tree_map(
        lambda x, t: xform.device_put(t.astype(_dtype(x))), args, tangents))
    out_expected = f(*args)
    atol, rtol = _tolerances(args, out, atol, rtol)
    _check_close(out, out_expected, atol, rtol, err_msg, "primal")
    t_expected = numerical_jvp(f, args, tangents, eps)
    _check_close(t_out, t_expected, atol, rtol, err_msg, "tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=None, err_msg="", f_jvp=None):
    """Check ``f_vjp`` with the dot-product test ``<u, J v> == <J^T u, v>``.

    ``J v`` comes from central finite differences of ``f``; when ``f_jvp`` is given it
    also comes from autodiff, compared under a tolerance close to machine precision.

    Args:
      f: function of ``*args``.
      f_vjp: ``*args -> (f(*args), vjp_fun)``, e.g. ``functools.partial(xform.vjp, f)``.
      args: tuple of floating-point arguments (pytrees allowed).
      atol, rtol: finite-difference tolerances (default: by dtype).
      eps: finite-difference step (default: by dtype).
      err_msg: prefix naming the check in failure messages.
      f_jvp: optional ``(primals, tangents) -> (out, J @ tangents)``.

    Raises:
      AssertionError: naming the check and the error, on a mismatch.
    """
    args = tuple(args)
    err_msg = err_msg or "VJP"
    _check_float_args(args, "check_vjp")
    rng = np.random.RandomState(0)
    out, vjp_fun = f_vjp(*args)
    out_expected = f(*args)
    atol_fd, rtol_fd = _tolerances(args, out, atol, rtol)
    _check_close(out, out_expected, atol_fd, rtol_fd, err_msg, "primal")
    tangents = tree_util.tree_map(lambda x: _rand_like(rng, x), args)
    cotangents = _float_tree(out, lambda y: _rand_like(rng, y))
    ct_in = vjp_fun(tree_util.tree_map(
        lambda y, c: c if c.dtype == _FLOAT0 else xform.device_put(c), out, cotangents))
    ip, ip_scale = _inner(tangents, ct_in)   # <v, J^T u>
    t_fd = numerical_jvp(f, args, tangents, eps)
    ip_fd, fd_scale = _inner(t_fd, cotangents)   # <J v, u>
    _check_scalar(ip, ip_fd, max(ip_scale, fd_scale), atol_fd, rtol_fd, err_msg,
                  "cotangent projection (vs finite differences)")
    if f_jvp is not None:
        _, t_ad = f_jvp(args, tree_util.tree_map(
            lambda x, t: xform.device_put(t.astype(_dtype(x))), args, tangents))
        ip_ad, ad_scale = _inner(t_ad, cotangents)
        atol_ad, rtol_ad = _tolerances(args, out, None, None, _AD_TOL)
        atol_ad = atol_ad if atol is None else max(atol_ad, min(atol, atol_fd))
        rtol_ad = rtol_ad if rtol is None else max(rtol_ad, min(rtol, rtol_fd))
        _check_scalar(ip, ip_ad, max(ip_scale, ad_scale), atol_ad, rtol_ad, err_msg,
                      "cotangent projection (vs jvp)")


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives up to ``order`` against finite differences.

    Order 1 checks ``jvp(f)`` and ``vjp(f)``; order ``n`` also checks, to order ``n-1``,
    the functions ``(x, t) -> jvp(f, x, t)`` (mode ``"fwd"``) and
    ``x -> vjp(f, x)[1](f(x))`` (mode ``"rev"``). Use float64 (``jax_enable_x64``) for
    tight checks.

    Args:
      f: function of ``*args`` returning a pytree of arrays.
      args: tuple of arguments: pytrees of floating-point arrays.
      order: highest derivative order to check (1, 2, ...).
      modes: any of ``"fwd"`` (jvp) and ``"rev"`` (vjp).
      atol, rtol: tolerances (default: by dtype, e.g. 2e-3 for float32, 1e-5 for
        float64).
      eps: finite-difference step (default: by dtype).

    Raises:
      AssertionError: on a mismatch; the message names the check (e.g. ``JVP of VJP``,
        i.e. the jvp of the vjp function), the order and the max error.
      TypeError: for integer or boolean arguments (close over them instead).

    >>> import numpy as np, xform
    >>> from xform import lax
    >>> from xform.test_util import check_grads
    >>> x = xform.device_put(np.array([0.5, 1.0, 2.0], np.float32))
    >>> check_grads(lambda x: lax.reduce_sum(lax.sin(x), (0,)), (x,), order=2)
    >>> check_grads(lambda x: lax.stop_gradient(lax.sin(x)), (x,), order=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    AssertionError: check_grads: JVP (order 1 of 1): tangent mismatch: ...
    """
    args = tuple(args)
    unknown = set(modes) - {"fwd", "rev"}
    if unknown or not modes:
        raise ValueError(f"check_grads modes must be among ('fwd', 'rev'), got {modes!r}")
    if order < 1:
        raise ValueError(f"check_grads order must be at least 1, got {order}")
    _check_float_args(args, "check_grads")
    kw = dict(atol=atol, rtol=rtol, eps=eps)

    def check(f, args, level, name):
        def label(mode):
            full = f"{mode} of {name}" if name else mode
            return full, f"{full} (order {level} of {order})"
        f_jvp = functools.partial(xform.jvp, f)
        if "fwd" in modes:
            full, msg = label("JVP")
            check_jvp(f, f_jvp, args, err_msg=msg, **kw)
            if level < order:
                check(f_jvp, (args, args), level + 1, full)
        if "rev" in modes:
            full, msg = label("VJP")
            check_vjp(f, functools.partial(xform.vjp, f), args, err_msg=msg, f_jvp=f_jvp,
                      **kw)
            if level < order:
                def f_vjp(*primals):
                    out, vjp_fun = xform.vjp(f, *primals)
                    return vjp_fun(_float_tree(out, lambda y: y))
                check(f_vjp, args, level + 1, full)

    check(f, args, 1, "")


# ---- hypothesis strategies (hypothesis is only needed by tests) ----

def _hypothesis():
    try:
        import hypothesis.strategies as st
        import hypothesis.extra.numpy as hnp
    except ImportError as e:   # pragma: no cover
        raise ImportError("xform.test_util strategies need hypothesis: "
                          "pip install 'xform[test]'") from e
    return st, hnp


def shapes(min_rank=0, max_rank=3, min_side=1, max_side=4):
    """A hypothesis strategy for array shapes (tuples of ints).

    >>> from xform.test_util import shapes
    >>> s = shapes(1, 2, max_side=3)   # e.g. (2,), (3, 1)
    """
    _, hnp = _hypothesis()
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min_side,
                            max_side=max_side)


def float_elements(min_value=-3.0, max_value=3.0, width=64):
    """Finite floats in ``[min_value, max_value]`` (no NaN, inf or subnormals); ``width``
    (16, 32 or 64) makes every drawn value exactly representable in that float type.

    >>> from xform.test_util import float_elements
    >>> s = float_elements(-1.0, 1.0, width=32)
    """
    st, _ = _hypothesis()
    return st.floats(min_value, max_value, allow_nan=False, allow_infinity=False,
                     allow_subnormal=False, width=width)


def arrays(shape, dtype, elements=None, unique=False):
    """A hypothesis strategy for NumPy arrays of ``shape`` (or a shapes strategy) and
    ``dtype``; by default finite floats in [-3, 3], ints in [-5, 5], any bools.

    With ``check_grads`` it property-tests a derivative rule (see
    ``notebooks/02_autodiff_and_property_testing.ipynb``)::

        @given(arrays(shapes(1, 2), np.float32, float_elements(-8, 8, width=32)))
        def test_rule(x):
            check_grads(f, (xform.numpy.asarray(x),), order=1)

    >>> import numpy as np
    >>> from xform.test_util import arrays, shapes
    >>> s = arrays(shapes(1, 2, max_side=3), np.float32)   # float32 arrays, rank 1 or 2
    """
    st, hnp = _hypothesis()
    dtype = np.dtype(dtype)
    if elements is None:
        if np.issubdtype(dtype, np.floating):
            elements = float_elements(width=min(dtype.itemsize * 8, 64))
        elif np.issubdtype(dtype, np.integer):
            lo = -5 if np.issubdtype(dtype, np.signedinteger) else 0
            elements = st.integers(lo, 5)
        elif dtype == np.bool_:
            elements = st.booleans()
    return hnp.arrays(dtype, shape, elements=elements, unique=unique)
