"""Loops built on ``scan``: ``fori_loop`` (a scan when the trip count is static, else a
``while_loop``), ``map`` (with ``batch_size``) and ``bounded_while_loop`` (a
``while_loop`` with a static step bound, so reverse mode works: a scan of guarded
steps).
"""
import operator

import numpy as np

from xform.core import dtypes, shape_poly, tree_util
from xform.core.trace import get_aval, to_concrete_value
from xform.core.traceback_util import api_boundary
from xform.lax.control_flow.common import check_same_types, per_function
from xform.lax.control_flow.loops import while_loop
from xform.lax.control_flow.scan import _infer_length, scan
from xform.lax.elementwise import _const, add, convert_element_type, select
from xform.lax.shapes import concatenate, dimension_as_value, reshape, slice as lax_slice
from xform.transforms.vmap import vmap


@api_boundary
def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """Loop ``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``, like JAX's.

    With concrete bounds (Python/NumPy ints, or values known at trace time) this is a
    ``scan`` of ``upper - lower`` steps, so it is reverse-differentiable; otherwise it
    is a ``while_loop``, which supports forward-mode differentiation only.

    Args:
      lower: the first loop index (an integer scalar).
      upper: the end of the range (exclusive), same integer type as ``lower``.
      body_fun: ``(i, val) -> val`` keeping ``val``'s structure, shapes and dtypes.
      init_val: the initial value (a pytree of arrays).
      unroll: as in ``scan``; only allowed with concrete bounds.

    Returns:
      The final value.

    Raises:
      TypeError: if the bounds have different integer types or ``body_fun`` changes
        the type of ``val``.

    >>> from xform import lax
    >>> float(lax.fori_loop(0, 4, lambda i, v: v + i, 0.5))
    6.5
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    if shape_poly.is_symbolic_dim(lower) or shape_poly.is_symbolic_dim(upper):
        dtype = np.dtype(np.int32)   # a symbolic trip count: a scan of symbolic length
        lo, hi = lower, upper
    else:
        dtype = _fori_index_dtype(lower, upper)
        lo, hi = to_concrete_value(lower), to_concrete_value(upper)
        lo, hi = (None, None) if lo is None or hi is None else (int(lo), int(hi))
    if lo is not None and hi is not None:
        start = (convert_element_type(dimension_as_value(lo), dtype)
                 if shape_poly.is_symbolic_dim(lo) else lo)
        (_, result), _ = scan(_fori_scan_body(body_fun), (start, init_val), None,
                              length=shape_poly.max_dim(hi - lo, 0),
                              unroll=1 if unroll is None else unroll)
        return result
    if unroll not in (None, False, 1):
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    # (a bound already of the index type is kept as is: a Python int stays weak, as JAX's)
    lower, upper = (b if dtypes.dtype(b) == dtype else convert_element_type(b, dtype)
                    for b in (lower, upper))
    return while_loop(_fori_cond, _fori_while_body(body_fun), (lower, upper, init_val))[2]


# (one wrapper per body function, holding it weakly: eager calls reuse their traces)
@per_function
def _fori_scan_body(ref):
    def step(carry, _):
        i, val = carry
        return (add(i, _const(i, 1)), ref()(i, val)), None
    return step


@per_function
def _fori_while_body(ref):
    def body(carry):
        i, hi, val = carry
        return add(i, _const(i, 1)), hi, ref()(i, val)
    return body


def _fori_cond(carry):
    return carry[0] < carry[1]


def _fori_index_dtype(lower, upper):
    lo_t, hi_t = dtypes.dtype(lower), dtypes.dtype(upper)
    for t, name in ((lo_t, "lower"), (hi_t, "upper")):
        if not dtypes.is_integer(t):
            raise TypeError(f"fori_loop {name} bound must be an integer, got dtype {t.name}")
    if lo_t == hi_t:
        return lo_t
    lo_w, hi_w = dtypes.is_weakly_typed(lower), dtypes.is_weakly_typed(upper)
    if lo_w != hi_w:
        return hi_t if lo_w else lo_t
    raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo_t.name} and {hi_t.name}")


@api_boundary
def map(f, xs, *, batch_size=None):  # noqa: A001  (JAX's name)
    """Map ``f`` over the leading axis of ``xs`` sequentially (a ``scan`` with no carry).

    Args:
      f: a function of one slice of ``xs`` (a pytree).
      xs: a pytree of arrays with a common leading axis.
      batch_size: if given, ``f`` is vmapped over chunks of this many elements and the
        chunks are scanned (the remainder is one more vmapped call); 0 is one vmap.

    Returns:
      ``f``'s outputs stacked along a new leading axis.

    >>> from xform import lax
    >>> lax.map(lambda x: x * 2, np.arange(3.)).tolist()
    [0.0, 2.0, 4.0]
    """
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    batch_size = operator.index(batch_size)
    if batch_size < 0:
        raise ValueError(f"lax.map batch_size must be a non-negative integer, got "
                         f"{batch_size}")
    if batch_size == 0:   # (JAX's documented meaning: one full batch, i.e. vmap)
        return vmap(f)(xs)
    leaves, tree = tree_util.tree_flatten(xs)
    n = _infer_length(leaves, None)
    num_batches, rem = divmod(n, batch_size)
    main = [reshape(lax_slice(x, (0,) * x.ndim, (num_batches * batch_size,) + x.shape[1:]),
                    (num_batches, batch_size) + x.shape[1:]) for x in leaves]
    vf = vmap(f)
    _, ys = scan(lambda _, x: ((), vf(x)), (), tree_util.tree_unflatten(tree, main))
    ys = tree_util.tree_map(
        lambda y: reshape(y, (num_batches * batch_size,) + get_aval(y).shape[2:]), ys)
    if rem:
        tail = [lax_slice(x, (num_batches * batch_size,) + (0,) * (x.ndim - 1), x.shape)
                for x in leaves]
        tail_ys = vf(tree_util.tree_unflatten(tree, tail))
        ys = tree_util.tree_map(lambda a, b: concatenate([a, b], 0), ys, tail_ys)
    return ys


def bounded_while_loop(cond_fun, body_fun, init_val, max_steps):
    """``while cond_fun(val): val = body_fun(val)``, for at most ``max_steps`` steps,
    as a ``scan``: reverse-differentiable, unlike ``while_loop``.

    Each of the ``max_steps`` iterations evaluates ``cond_fun`` and ``body_fun`` and
    keeps the new value only while the condition holds (a done-mask: once it fails the
    value is frozen, so it keeps failing). So the cost is always ``max_steps``
    iterations of work, and reverse mode stores residuals for all of them.
    ``while_loop(..., max_steps=n)`` calls this.

    Args:
      cond_fun: ``val -> bool scalar``.
      body_fun: ``val -> val`` keeping the structure, shapes and dtypes.
      init_val: the initial value (a pytree of arrays).
      max_steps: a concrete non-negative int.

    Returns:
      The value after the loop stopped or ran ``max_steps`` steps.

    Raises:
      TypeError: if ``cond_fun`` does not return a boolean scalar or ``body_fun``
        changes the type of the value.

    >>> from xform import lax
    >>> float(bounded_while_loop(lambda v: v < 10, lambda v: v * 2, 1., 100))
    16.0
    """
    try:
        max_steps = operator.index(max_steps)
    except TypeError:
        raise TypeError(f"while_loop max_steps must be a concrete int, got {max_steps!r}"
                        ) from None
    if max_steps < 0:
        raise ValueError(f"while_loop max_steps must be non-negative, got {max_steps}")
    in_leaves, in_tree = tree_util.tree_flatten(init_val)

    def step(val, _):
        pred = cond_fun(val)
        p = get_aval(pred)
        if p.shape or p.dtype != np.bool_:
            raise TypeError("while_loop cond_fun must return a boolean scalar, but got "
                            f"output type(s) [{p.str_short()}].")
        new = body_fun(val)
        new_leaves, new_tree = tree_util.tree_flatten(new)
        check_same_types("while_loop", ["init_val", "body_fun output"], [in_tree, new_tree],
                         [[get_aval(x) for x in in_leaves], [get_aval(x) for x in new_leaves]])
        return tree_util.tree_map(lambda n, o: select(pred, n, o), new, val), None
    return scan(step, init_val, None, length=max_steps)[0]
