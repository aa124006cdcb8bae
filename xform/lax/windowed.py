"""Windowed reductions (pooling): reduce_window_sum / _max / _min, the public
``reduce_window`` that dispatches to them, and ``padtype_to_pads``.

NB: JAX differentiates max/min pooling with two extra primitives
(select_and_gather_add and its transpose select_and_scatter_add). xform composes the
same computation instead: the tangent is gathered by scanning the window offsets
(one strided slice per offset, a strict comparison keeps the first extremum), which
is linear in the tangent and built from slice/pad/select_n, so every higher
derivative and the transpose come from those primitives' rules. The cost is one slice
per window element (4 for a 2x2 pool, 9 for 3x3).
"""
import enum
import itertools
import operator

import numpy as np

from xform.core import dtypes, shape_poly
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval, to_concrete_value
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import check_dtype, numeric, standard_primitive
from xform.lax import elementwise as _ew
from xform.lax import shapes
from xform.lax.reductions import _highest, _lowest

hlo, ir = mlir.hlo, mlir.ir


class PaddingType(enum.Enum):
    VALID = 1
    SAME = 2
    SAME_LOWER = 3


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) pads per dimension for a padding name ('VALID', 'SAME', 'SAME_LOWER').

    'SAME' pads so the output has ``ceil(in / stride)`` elements, odd padding going to
    the high side ('SAME_LOWER': to the low side).

    >>> padtype_to_pads((5, 6), (3, 3), (2, 1), "SAME")
    [(1, 1), (1, 1)]
    """
    if isinstance(padding, str):
        try:
            padding = PaddingType[padding.upper()]
        except KeyError:
            raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                               f"'SAME_LOWER', got {padding}.") from None
    if padding is PaddingType.VALID:
        return [(0, 0)] * len(in_shape)
    if not isinstance(padding, PaddingType):
        raise TypeError(f"Unknown padding type: {padding}.")
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-d // s) - 1) * s + w - d, 0)
        lo = total // 2 if padding is PaddingType.SAME else total - total // 2
        pads.append((lo, total - lo))
    return pads


def dilate_shape(shape, dilation):
    """Size of each dimension after inserting ``dilation - 1`` holes between elements."""
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def conv_vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding,
                         lhs_dilation, rhs_dilation):
    """Pads of the (stride-dilated) output cotangent whose windowed sum (or convolution
    with the flipped kernel) gives the input cotangent of a windowed op."""
    lhs_d = dilate_shape(in_shape, lhs_dilation)
    rhs_d = dilate_shape(window_dimensions, rhs_dilation)
    out_d = dilate_shape(out_shape, window_strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_d, padding)]
    after = [ld + r - 1 - od - b for ld, r, od, b in zip(lhs_d, rhs_d, out_d, before)]
    return list(zip(before, after))


def window_out_shape(shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation):
    padded = [d + lo + hi for d, (lo, hi) in
              zip(dilate_shape(shape, base_dilation), padding)]
    win = dilate_shape(window_dimensions, window_dilation)
    return tuple(max((p - w) // s + 1, 0) for p, w, s in
                 zip(padded, win, window_strides))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of a ``reduce_window`` with explicit ``(low, high)`` padding."""
    ones = (1,) * len(operand_shape)
    return window_out_shape(operand_shape, window_dimensions, window_strides, padding,
                            base_dilation or ones, window_dilation or ones)


def lower_reduce_window(ctx, x, init, combine, window_dimensions, window_strides, padding,
                        base_dilation, window_dilation):
    """A stablehlo.reduce_window of one operand with a scalar NumPy ``init``; with
    symbolic window parameters (a cumulative op over a symbolic axis) JAX's
    ``stablehlo.dynamic_reduce_window`` custom call, which shape refinement makes static."""
    aval = ctx.avals_in[0]
    scalar = mlir.aval_to_ir_type(ShapedArray((), aval.dtype))
    init_v = mlir.ir_constant(np.array(init, aval.dtype))
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    params = (window_dimensions, window_strides, base_dilation, window_dilation)
    if not shape_poly.is_constant_shape(tuple(itertools.chain(*params, *padding))):
        name = ctx.module_ctx.unique_name("reduce_window_reducer")
        with ir.InsertionPoint(ctx.module_ctx.module.body):
            fn = mlir.func_dialect.FuncOp(name, ir.FunctionType.get([scalar] * 2, [scalar]))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            mlir.func_dialect.ReturnOp([combine(*block.arguments)])
        i2 = ir.RankedTensorType.get([1, 2], ir.IntegerType.get_signless(32))
        pads = hlo.concatenate([hlo.reshape(i2, mlir.shape_value(p)) for p in padding], 0)
        op = hlo.CustomCallOp([out_type], [x, init_v] + [mlir.shape_value(p) for p in params]
                              + [pads], "stablehlo.dynamic_reduce_window",
                              called_computations=ir.ArrayAttr.get(
                                  [ir.FlatSymbolRefAttr.get(name)]))
        return op.result
    pads = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(-1, 2))
    op = hlo.ReduceWindowOp(
        [out_type], [x], [init_v], mlir.dense_i64(window_dimensions),
        window_strides=mlir.dense_i64(window_strides),
        base_dilations=mlir.dense_i64(base_dilation),
        window_dilations=mlir.dense_i64(window_dilation), padding=pads)
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([combine(*block.arguments)])
    return op.result


# ---- shared rules of the three primitives ----

def _window_params(name, ndim, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    """Validate and canonicalize (tuples of ints) the window parameters."""
    def ints(xs, what, default, positive=True):
        xs = default if xs is None else tuple(operator.index(v) for v in xs)
        if len(xs) != ndim:
            raise TypeError(f"{name}: {what} {xs} must have one entry per operand "
                            f"dimension ({ndim})")
        if positive and any(v < 1 for v in xs):
            raise TypeError(f"{name}: {what} must be positive, got {xs}")
        return xs
    window_dimensions = ints(window_dimensions, "window_dimensions", None)
    window_strides = ints(window_strides, "window_strides", (1,) * ndim)
    base_dilation = ints(base_dilation, "base_dilation", (1,) * ndim)
    window_dilation = ints(window_dilation, "window_dilation", (1,) * ndim)
    if len(padding) != ndim or any(len(p) != 2 for p in padding):
        raise TypeError(f"{name}: padding {padding} must be one (low, high) pair per "
                        f"operand dimension ({ndim})")
    padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    return dict(window_dimensions=window_dimensions, window_strides=window_strides,
                padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


def _abstract_eval(name):
    def rule(x, **params):
        check_dtype(name, x.dtype, numeric)
        if len(params["window_dimensions"]) != x.ndim:
            raise TypeError(f"{name} got operand shape {x.shape} with window_dimensions "
                            f"{params['window_dimensions']}: one per dimension needed")
        return ShapedArray(window_out_shape(x.shape, **params), x.dtype, x.weak_type)
    return rule


def _batch(prim):
    def rule(vals, dims, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        (x,), (d,) = vals, dims

        def ins(xs, v):
            return xs[:d] + (v,) + xs[d:]
        return prim.bind(x, window_dimensions=ins(window_dimensions, 1),
                         window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                         base_dilation=ins(base_dilation, 1),
                         window_dilation=ins(window_dilation, 1)), d
    return rule


def _lowering(combine, identity):
    def rule(ctx, x, **params):
        return lower_reduce_window(ctx, x, identity(ctx.avals_in[0].dtype), combine,
                                   **params)
    return rule


def _declare(name, combine, identity):
    prim = standard_primitive(name, _abstract_eval(name))
    batching.primitive_batchers[prim] = _batch(prim)
    mlir.register_lowering(prim, _lowering(combine, identity))
    return prim


# ---- reduce_window_sum ----

def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    # Each input element feeds the outputs whose windows cover it: dilate ct by the
    # strides, pad it, and sum it over the same (symmetric, all-ones) window, stepping
    # by the base dilation to land on the undilated input positions.
    in_shape = x.aval.shape
    pads = conv_vjp_lhs_padding(in_shape, window_dimensions, window_strides,
                                get_aval(ct).shape, padding, base_dilation, window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    ct = shapes.pad(ct, 0, config)
    out = reduce_window_sum_p.bind(
        ct, window_dimensions=window_dimensions, window_strides=base_dilation,
        padding=((0, 0),) * len(in_shape), base_dilation=(1,) * len(in_shape),
        window_dilation=window_dilation)
    assert get_aval(out).shape == in_shape, (get_aval(out).shape, in_shape)
    return [out]


reduce_window_sum_p = _declare("reduce_window_sum", hlo.add, lambda dt: 0)
ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)


# ---- reduce_window_max / reduce_window_min ----

def _window_slices(x, fill, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    """For each window offset, the strided slice of the padded, base-dilated ``x`` that
    holds that offset's element of every window (an output-shaped array)."""
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)]
    xp = shapes.pad(x, fill, config)
    out = window_out_shape(get_aval(x).shape, window_dimensions, window_strides, padding,
                           base_dilation, window_dilation)
    for offset in itertools.product(*map(range, window_dimensions)):
        start = tuple(k * r for k, r in zip(offset, window_dilation))
        limit = tuple(s + (n - 1) * st + 1 if n else s
                      for s, n, st in zip(start, out, window_strides))
        yield shapes.slice(xp, start, limit, window_strides)


def _chooser_jvp(prim, better, identity):
    # The tangent at the first position (in window order) attaining the extremum.
    def jvp(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        init = np.array(identity(get_aval(x).dtype), get_aval(x).dtype)
        best_x = best_t = None
        for xs, ts in zip(_window_slices(x, init, **params),
                          _window_slices(ad.instantiate_zeros(t), 0, **params)):
            if best_x is None:
                best_x, best_t = xs, ts
            else:
                pick = better(xs, best_x)
                best_x, best_t = _ew.select(pick, xs, best_x), _ew.select(pick, ts, best_t)
        return ans, best_t
    return jvp


reduce_window_max_p = _declare("reduce_window_max", hlo.maximum, _lowest)
ad.primitive_jvps[reduce_window_max_p] = _chooser_jvp(reduce_window_max_p, _ew.gt, _lowest)
reduce_window_min_p = _declare("reduce_window_min", hlo.minimum, _highest)
ad.primitive_jvps[reduce_window_min_p] = _chooser_jvp(reduce_window_min_p, _ew.lt, _highest)


# ---- public reduce_window ----

def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each (strided, padded, dilated) window of ``operand`` with ``computation``.

    Args:
      operand: the array.
      init_value: scalar start of every window's reduction; it also fills the padding.
        Must be the identity of ``computation`` (0 for ``lax.add``, ``-inf`` or the
        dtype's minimum for ``lax.max``, ``inf`` or its maximum for ``lax.min``).
      computation: ``lax.add``, ``lax.max`` or ``lax.min``.
      window_dimensions: window size per dimension.
      window_strides: step per dimension (default 1).
      padding: 'VALID', 'SAME', 'SAME_LOWER', or one ``(low, high)`` pair per dimension.
      base_dilation: holes inserted between operand elements (default 1: none).
      window_dilation: spacing between window elements (default 1: contiguous).

    Returns:
      An array of the operand's dtype with one element per window.

    Raises:
      NotImplementedError: for other computations, or add with a non-zero init.
      TypeError: for parameters of the wrong length or non-positive sizes.

    >>> x = jnp.arange(16.).reshape(4, 4)
    >>> reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")
    Array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    """
    aval = get_aval(operand)
    table = {_ew.add: (reduce_window_sum_p, lambda dt: 0),
             _ew.max: (reduce_window_max_p, _lowest),
             _ew.min: (reduce_window_min_p, _highest)}
    if computation not in table:
        raise NotImplementedError(
            f"reduce_window supports computation lax.add, lax.max or lax.min, got "
            f"{getattr(computation, '__name__', computation)!r}")
    prim, identity = table[computation]
    init = to_concrete_value(init_value)
    # (the identity of the operand's dtype or, as JAX, of the init's own: -inf is max's
    # also for float8_e4m3fn, whose own identity is -448)
    is_identity = init is not None and np.shape(init) == () and any(
        np.asarray(init) == np.asarray(identity(d), d)
        for d in (aval.dtype, dtypes.dtype(init)))
    # XLA pads with init and folds it in once: for max/min that is op(result, init), so
    # any scalar init works; a non-zero init for add would count the padding.
    extra_init = (not is_identity and computation is not _ew.add
                  and np.ndim(init_value) == 0)
    if not is_identity and not extra_init:
        raise NotImplementedError(
            f"reduce_window with {computation.__name__} needs init_value equal to its "
            f"identity {identity(aval.dtype)!r} for dtype {aval.dtype.name}, got "
            f"{init_value!r}")
    ndim = aval.ndim
    if window_strides is None:
        window_strides = (1,) * ndim
    if isinstance(padding, str):
        padding = padtype_to_pads(aval.shape, window_dimensions, window_strides, padding)
    params = _window_params(f"reduce_window ({computation.__name__})", ndim,
                            window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    out = prim.bind(operand, **params)
    if extra_init:
        out = computation(out, _ew.convert_element_type(init_value, aval.dtype))
    return out
