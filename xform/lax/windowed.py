"""Windowed reductions (pooling): reduce_window_sum / _max / _min, the generic
``reduce_window`` primitive (any computation, several operands), the public
``reduce_window`` that dispatches between them, and ``padtype_to_pads``.

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

from xform.core import dtypes, shape_poly, tree_util
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval, to_concrete_value
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.lax._prim import check_dtype, numeric, numeric_or_bool, standard_primitive
from xform.lax import elementwise as _ew
from xform.lax.general_reduce import reduction_jaxpr
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


def lower_reduce_window(ctx, xs, inits, body, window_dimensions, window_strides, padding,
                        base_dilation, window_dilation):
    """A stablehlo.reduce_window of the operands ``xs`` (ir values) from the scalar
    ``inits`` (NumPy values or ir values) whose body is ``body(*accumulators, *values)``
    (ir values in, a list out); with symbolic window parameters (a cumulative op over a
    symbolic axis) JAX's ``stablehlo.dynamic_reduce_window`` custom call, which shape
    refinement makes static."""
    avals = ctx.avals_in[:len(xs)]
    scalars = [mlir.aval_to_ir_type(ShapedArray((), a.dtype)) for a in avals]
    inits = [mlir.ir_constant(np.array(i, a.dtype)) if not isinstance(i, ir.Value) else i
             for i, a in zip(inits, avals)]
    out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    params = (window_dimensions, window_strides, base_dilation, window_dilation)
    if not shape_poly.is_constant_shape(tuple(itertools.chain(*params, *padding))):
        name = ctx.module_ctx.unique_name("reduce_window_reducer")
        with ir.InsertionPoint(ctx.module_ctx.module.body):
            fn = mlir.func_dialect.FuncOp(name, ir.FunctionType.get(scalars * 2, scalars))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            mlir.func_dialect.ReturnOp(body(*block.arguments))
        i2 = ir.RankedTensorType.get([1, 2], ir.IntegerType.get_signless(32))
        pads = hlo.concatenate([hlo.reshape(i2, mlir.shape_value(p)) for p in padding], 0)
        op = hlo.CustomCallOp(out_types, list(xs) + inits + [mlir.shape_value(p) for p in params]
                              + [pads], "stablehlo.dynamic_reduce_window",
                              called_computations=ir.ArrayAttr.get(
                                  [ir.FlatSymbolRefAttr.get(name)]))
        return list(op.results)
    pads = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(-1, 2))
    op = hlo.ReduceWindowOp(
        out_types, list(xs), inits, mlir.dense_i64(window_dimensions),
        window_strides=mlir.dense_i64(window_strides),
        base_dilations=mlir.dense_i64(base_dilation),
        window_dilations=mlir.dense_i64(window_dilation), padding=pads)
    block = op.regions[0].blocks.append(*scalars, *scalars)
    with ir.InsertionPoint(block):
        hlo.return_(body(*block.arguments))
    return list(op.results)


def lax_body(ctx, fn, dtype):
    """A reduce_window body (see ``lower_reduce_window``) from ``fn``, a binary function
    of lax ops, traced on scalars of ``dtype``."""
    closed = pe.trace_to_jaxpr(lambda a, b: [fn(a, b)], [ShapedArray((), dtype)] * 2)
    return lambda *xs: mlir.jaxpr_subcomp(ctx.module_ctx, closed.jaxpr, closed.consts, list(xs))


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
    padding = tuple(shapes._ints(p, "padding") for p in padding)
    return dict(window_dimensions=window_dimensions, window_strides=window_strides,
                padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


def _abstract_eval(name, allowed=numeric):
    def rule(x, **params):
        check_dtype(name, x.dtype, allowed)
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
        dt = ctx.avals_in[0].dtype
        return lower_reduce_window(ctx, [x], [identity(dt)], lax_body(ctx, combine, dt),
                                   **params)[0]
    return rule


def _declare(name, combine, identity, allowed=numeric):
    prim = standard_primitive(name, _abstract_eval(name, allowed))
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
    ct = shapes.pad(ct, _ew._const(ct, 0), config)
    out = reduce_window_sum_p.bind(
        ct, window_dimensions=window_dimensions, window_strides=base_dilation,
        padding=((0, 0),) * len(in_shape), base_dilation=(1,) * len(in_shape),
        window_dilation=window_dilation)
    assert get_aval(out).shape == in_shape, (get_aval(out).shape, in_shape)
    return [out]


reduce_window_sum_p = _declare("reduce_window_sum", _ew.add, lambda dt: 0)
ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)


# ---- reduce_window_max / reduce_window_min ----

def _window_slices(x, fill, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    """For each window offset, the strided slice of the padded, base-dilated ``x`` that
    holds that offset's element of every window (an output-shaped array)."""
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)]
    xp = shapes.pad(x, _ew._const(x, fill), config)
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
        init = identity(get_aval(x).dtype)
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


reduce_window_max_p = _declare("reduce_window_max", _ew.max, _lowest, numeric_or_bool)
ad.primitive_jvps[reduce_window_max_p] = _chooser_jvp(reduce_window_max_p, _ew.gt, _lowest)
reduce_window_min_p = _declare("reduce_window_min", _ew.min, _highest, numeric_or_bool)
ad.primitive_jvps[reduce_window_min_p] = _chooser_jvp(reduce_window_min_p, _ew.lt, _highest)


# ---- reduce_window: any computation, any number of operands ----

def _generic_abstract_eval(*avals, computation, **params):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    if any(o.dtype != i.dtype for o, i in zip(ops, inits)):
        raise TypeError(f"reduce_window got inconsistent dtypes for operands and init_values: "
                        f"got operand dtypes {[o.dtype.name for o in ops]} and init_value "
                        f"dtypes {[i.dtype.name for i in inits]}.")
    if any(i.shape for i in inits):
        raise TypeError(f"reduce_window expected init_values to be scalars but init_values "
                        f"have shapes {[i.shape for i in inits]}.")
    if any(o.shape != ops[0].shape for o in ops):
        raise TypeError(f"reduce_window got operands of different shapes "
                        f"{[o.shape for o in ops]}")
    if len(params["window_dimensions"]) != ops[0].ndim:
        raise TypeError(f"reduce_window got operand shape {ops[0].shape} with "
                        f"window_dimensions {params['window_dimensions']}: one per "
                        f"dimension needed")
    return [ShapedArray(window_out_shape(ops[0].shape, **params), o.dtype) for o in ops]


def _generic_lowering(ctx, *args, computation, **params):
    n = len(args) // 2

    def body(*xs):
        return mlir.jaxpr_subcomp(ctx.module_ctx, computation.jaxpr, computation.consts,
                                  list(xs))
    return lower_reduce_window(ctx, args[:n], args[n:], body, **params)


def _generic_batch(vals, dims, *, computation, **params):
    n = len(vals) // 2
    ops = batching.operands_at_front(
        vals, dims, n, "reduce_window batching is not implemented for initial values")
    params = {k: ((0, 0) if k == "padding" else 1,) + v for k, v in params.items()}
    return reduce_window_p.bind(*ops, *vals[n:], computation=computation, **params), [0] * n


def _generic_jvp(primals, tangents, *, computation, **params):
    # JAX's rule: reduce (primal, tangent) pairs with the JVP of the computation. The
    # result is not linear in a form transpose understands, so (as in JAX) no grad.
    n = len(primals) // 2
    if any(type(t) is not ad.Zero for t in tangents[n:]):
        raise TypeError("reduce_window jvp does not support non-zero init_value_tangent.")
    outs = reduce_window_p.bind(*primals, computation=computation, **params)
    if all(type(t) is ad.Zero for t in tangents[:n]):
        return outs, [ad.Zero(get_aval(o).to_tangent_aval()) for o in outs]
    dots = [ad.instantiate_zeros(t) for t in tangents[:n]]
    zeros = [np.zeros((), get_aval(t).dtype) for t in dots]

    def pair(*xs):   # (primals, tangents) of the accumulators, then of the values
        pl, tl, pr, tr = (xs[k * n:(k + 1) * n] for k in range(4))
        p, t = ad.jvp_flat(computation, [*pl, *pr], [*tl, *tr])
        return [*p, *map(ad.instantiate_zeros, t)]
    scalars = [ShapedArray((), get_aval(x).dtype) for x in [*primals[:n], *dots]]
    closed = pe.trace_to_jaxpr(pair, scalars * 2)
    both = reduce_window_p.bind(*primals[:n], *dots, *primals[n:], *zeros,
                                computation=closed, **params)
    return outs, both[n:]


reduce_window_p = standard_primitive("reduce_window", _generic_abstract_eval,
                                     multiple_results=True)
dispatch.def_structural_impl(reduce_window_p)
ad.primitive_jvps[reduce_window_p] = _generic_jvp
batching.primitive_batchers[reduce_window_p] = _generic_batch
mlir.register_lowering(reduce_window_p, _generic_lowering)


def _monoid(computation, init):
    """The reduce_window_{sum,max,min} primitive for ``computation`` started at its
    identity (JAX's monoid reducers), else None: then the generic primitive runs."""
    table = {_ew.add: (reduce_window_sum_p, lambda dt: 0),
             _ew.max: (reduce_window_max_p, _lowest),
             _ew.min: (reduce_window_min_p, _highest)}
    init = to_concrete_value(init)
    if computation not in table or init is None or np.shape(init) != ():
        return None
    prim, identity = table[computation]
    dt = dtypes.dtype(init)
    return prim if np.asarray(init) == np.asarray(identity(dt), dt) else None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each (strided, padded, dilated) window of ``operand`` with ``computation``.

    ``lax.add`` from 0 and ``lax.max``/``lax.min`` from their identities become the
    differentiable reduce_window_{sum,max,min} primitives; anything else (another
    computation or init, several operands) the generic ``reduce_window`` primitive, as
    in JAX: forward-mode differentiable and batchable, but without a transpose.

    Args:
      operand: the array, or a pytree of arrays of one shape.
      init_value: scalar start of every window's reduction, of the operand's dtype (a
        pytree like ``operand``); it also fills the padding.
      computation: ``(accumulators, values) -> accumulators`` on scalars.
      window_dimensions: window size per dimension.
      window_strides: step per dimension (default 1).
      padding: 'VALID', 'SAME', 'SAME_LOWER', or one ``(low, high)`` pair per dimension.
      base_dilation: holes inserted between operand elements (default 1: none).
      window_dilation: spacing between window elements (default 1: contiguous).

    Returns:
      One element per window, with ``operand``'s structure and dtypes.

    Raises:
      TypeError: for an init of another dtype, parameters of the wrong length or
        non-positive sizes.

    >>> x = jnp.arange(16.).reshape(4, 4)
    >>> reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")
    Array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    """
    flat_ops, tree = tree_util.tree_flatten(operand)
    flat_inits, init_tree = tree_util.tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    if not flat_ops:
        raise ValueError("reduce_window must have at least one operand.")
    aval = get_aval(flat_ops[0])
    ndim = aval.ndim
    if window_strides is None:
        window_strides = (1,) * ndim
    if isinstance(padding, str):
        win = (window_dimensions if window_dilation is None
               else dilate_shape(window_dimensions, window_dilation))
        padding = padtype_to_pads(aval.shape, win, window_strides, padding)
    if not shape_poly.is_constant_shape([d for p in padding for d in p]) and all(
            d == 1 for d in base_dilation or ()):
        # symbolic pads (a strided 'SAME' of a symbolic dimension): pad with the init
        # values first (lax.pad computes the amounts), then a window without padding
        flat_ops = [shapes.pad(x, _ew.convert_element_type(i, get_aval(x).dtype),
                               [(lo, hi, 0) for lo, hi in padding])
                    for x, i in zip(flat_ops, flat_inits)]
        operand, padding = tree_util.tree_unflatten(tree, flat_ops), [(0, 0)] * ndim
    name = getattr(computation, "__name__", "computation")
    params = _window_params(f"reduce_window ({name})", ndim, window_dimensions,
                            window_strides, padding, base_dilation, window_dilation)
    prim = _monoid(computation, flat_inits[0]) if len(flat_ops) == 1 else None
    if prim is not None:
        return tree_util.tree_unflatten(tree, [prim.bind(flat_ops[0], **params)])
    closed, out_tree = reduction_jaxpr(computation, init_value)
    if out_tree != tree:
        raise ValueError(f"reduce_window output must have the same tree structure as the "
                         f"operands {tree} vs. {out_tree}")
    outs = reduce_window_p.bind(*flat_ops, *flat_inits, computation=closed, **params)
    return tree_util.tree_unflatten(tree, outs)
