"""Op-table rows of the further reductions: reduce_prod, logical reductions, argmin,
reduce_precision; empty and size-1 reduced dimensions."""
import numpy as np

from optable import BOOL, F32, FLOAT, I32, NUM, _canon, domains, rec


def _red(op, axes, shape, dtypes=NUM, domain="real", grad_order=2, tag=""):
    name = f"{op}{tag}_{'_'.join(str(a) for a in axes) or 'none'}"
    return rec(name, 1, dtypes, [(shape,)], domains(domain), grad_order,
               call=lambda L, x: getattr(L, op)(x, axes),
               call_jax=lambda L, x: getattr(L, op)(x, _canon(axes, len(shape))), axes=axes)


def _arg(op, axis, shape, domain, dtypes=NUM, tag="", grad_order=0):
    canon = axis % len(shape)
    return rec(f"{op}_{tag}", 1, dtypes, [(shape,)], domains(domain), grad_order,
               call=lambda L, x: getattr(L, op)(x, axis, np.int32),
               call_jax=lambda L, x: getattr(L, op)(x, canon, np.int32), axis=axis)


def _cum(op, axis, shape, reverse, domain="real", dtypes=NUM):
    canon = axis % len(shape)
    return rec(f"{op}_{axis}{'_reverse' if reverse else ''}", 1, dtypes, [(shape,)],
               domains(domain), call=lambda L, x: getattr(L, op)(x, axis, reverse),
               call_jax=lambda L, x: getattr(L, op)(x, canon, reverse), axis=axis,
               reverse=reverse)


def _max_pair(L):
    """(value, payload) pairs reduced to the pair of the largest value (argmax-like)."""
    def computation(a, b):
        pick = L.ge(a[0], b[0])
        return L.select(pick, a[0], b[0]), L.select(pick, a[1], b[1])
    return computation


# NB: grad_order=None (no zero-tangent test) for bool/int-only rows: the harness draws
# tangents of the operand dtype, which jvp rejects for bool/int primals.
LOGICAL = (BOOL, I32)

RECORDS = [
    # -- reduce_prod: odd lengths exercise the tree's padding; "ties" puts zeros in --
    _red("reduce_prod", (1,), (2, 5)),
    _red("reduce_prod", (0, -1), (2, 2, 1)),
    _red("reduce_prod", (0, 1), (2, 3), domain="ties", tag="_zeros"),
    # -- empty and size-1 reduced dimensions --
    _red("reduce_sum", (0,), (0, 3), tag="_empty"),
    _red("reduce_prod", (1,), (3, 0), tag="_empty"),
    _red("reduce_max", (0,), (1, 4), tag="_unit"),
    _red("reduce_min", (1,), (2, 0), dtypes=(F32,), grad_order=None, tag="_empty"),
    _red("reduce_prod", (1,), (4, 1), tag="_unit"),
    # -- logical / bitwise reductions (not differentiable) --
    *[_red(op, axes, shape, LOGICAL, "real", grad_order=None)
      for op in ("reduce_and", "reduce_or", "reduce_xor")
      for axes, shape in (((1,), (3, 4)), ((0, -1), (2, 3, 4)))],
    _red("reduce_and", (0,), (0, 2), LOGICAL, grad_order=None, tag="_empty"),
    # -- argmin: ties go to the first index, NaN counts as minimal --
    _arg("argmin", 1, (4, 5), "ties", tag="ties"),
    _arg("argmin", 0, (6, 5), "ties_nan", FLOAT, tag="nan"),
    _arg("argmin", -2, (2, 3, 4), "ties", tag="negative_axis"),
    _arg("argmin", 1, (3, 4), "ties", (BOOL,), tag="bool", grad_order=None),
    # -- cumulative ops: odd and even lengths, reverse, negative axis --
    _cum("cumsum", 1, (3, 5), False),
    _cum("cumsum", -2, (4, 3), True),
    _cum("cumprod", 0, (3, 2), True),
    _cum("cummax", 1, (2, 4), False, "distinct"),
    _cum("cummin", -1, (2, 3), True, "distinct"),
    _cum("cumsum", 0, (0, 2), False),
    # -- reduce_precision: to bfloat16 (values only: a step function for finite
    #    differences), and to float64's own format (the identity; differentiable) --
    rec("reduce_precision_bf16", 1, (F32,), [((3, 4),)], domains("real"), None,
        op="reduce_precision", exponent_bits=8, mantissa_bits=7),
    rec("reduce_precision_f64", 1, (F32,), [((3, 4),), ((),)], domains("real"),
        op="reduce_precision", exponent_bits=11, mantissa_bits=52),
    # -- general lax.reduce: max from 0 is no known monoid (so it binds `reduce`), and a
    #    variadic reduction of two operands with a coupled computation --
    rec("reduce_general_max_from_0", 1, (F32,), [((3, 4),), ((2, 3, 2),)],
        domains("distinct"), 1, call=lambda L, x: L.reduce(x, np.zeros((), x.dtype), L.max, (1,))),
    rec("reduce_general_variadic", 2, (F32,), [((3, 4), (3, 4))],
        domains("distinct", "real"), 1,
        call=lambda L, x, y: L.reduce((x, y), (np.full((), -np.inf, x.dtype),
                                               np.zeros((), y.dtype)), _max_pair(L), (0,))),
    # -- optimization_barrier: the identity, which XLA may not move computation across --
    rec("optimization_barrier", 1, (F32, I32), [((3, 4),), ((),)], domains("real")),
]
