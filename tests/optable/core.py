"""Op-table rows of the spine primitives: elementwise, shapes, reductions, dot."""
import numpy as np
from jax._src.lax.lax import _array_copy as _jax_array_copy  # (private, as xform's)

from optable import (ALL, F16, F32, I32, BOOL, FLOAT, NUM,
                     _concat, _dot, _reduction, binary, domains, rec, select_args,
                     separated, unary)


RECORDS = [
    # -- elementwise unary --
    unary("neg", NUM),
    unary("exp", FLOAT),
    unary("log", FLOAT, "positive"),
    unary("sin", FLOAT),
    unary("cos", FLOAT),
    unary("tanh", FLOAT),
    unary("logistic", FLOAT),
    unary("sqrt", FLOAT, "positive"),
    unary("rsqrt", FLOAT, "positive"),
    unary("abs", NUM, "nonzero"),   # away from the kink at 0
    unary("sign", NUM, "ties", grad_order=0),
    unary("stop_gradient", ALL, grad_order=0),
    unary("integer_pow_3", NUM, op="integer_pow", y=3),
    unary("integer_pow_2", NUM, op="integer_pow", y=2),
    unary("integer_pow_1", NUM, op="integer_pow", y=1),
    unary("integer_pow_0", NUM, op="integer_pow", y=0),
    unary("integer_pow_neg1", FLOAT, "nonzero", op="integer_pow", y=-1),
    unary("integer_pow_neg3", FLOAT, "nonzero", op="integer_pow", y=-3),
    # -- elementwise binary (rank-0 operands broadcast) --
    binary("add", NUM),
    binary("sub", NUM),
    binary("mul", NUM),
    binary("div", NUM, domains("real", "nonzero")),   # int division rounds toward zero
    binary("max", NUM, separated),                    # no ties: the derivative is defined
    binary("min", NUM, separated),
    # y != 0: like JAX, d(x^y)/dx is defined as 0 at y == 0, so the second derivative
    # there is not the limit that finite differences see.
    binary("pow", FLOAT, domains("positive", "nonzero")),
    binary("add_any", NUM, shapes=[((3, 4), (3, 4)), ((), ())],
           call_jax=lambda L, x, y: L.add(x, y)),     # jax.lax has no public add_any
    # -- comparisons (ties on purpose) --
    *[binary(c, ALL, domains("ties", "ties"), grad_order=0)
      for c in ("eq", "ne", "lt", "le", "gt", "ge")],
    # -- select_n: which bool (array or rank 0) or int32 --
    rec("select_n_bool", 3, ALL, [((3, 4), (3, 4), (3, 4)), ((), (2, 3), (2, 3))],
        select_args(2, True), op="select_n", diff_argnums=(1, 2)),
    rec("select_n_int", 4, ALL, [((3, 4),) * 4, ((), (5,), (5,), (5,))],
        select_args(3, False), op="select_n", diff_argnums=(1, 2, 3)),
    rec("select_n_one_case", 2, NUM, [((3,), (3,))], select_args(1, False),
        op="select_n", diff_argnums=(1,)),
    # -- convert_element_type between float, int and bool --
    unary("convert_to_f32", (I32, BOOL), op="convert_element_type", new_dtype=F32,
          # f64 -> f32 in the gradient tests: linear, so a large finite-difference step
          # is exact, but every check sees float32 rounding.
          grad_kw=dict(eps=1e-2, atol=1e-4, rtol=1e-4)),
    unary("convert_to_i32", (F32, BOOL), grad_order=0, op="convert_element_type",
          new_dtype=I32),
    unary("convert_to_bool", (F32, I32), "ties", grad_order=0, op="convert_element_type",
          new_dtype=BOOL),
    unary("convert_to_f16", (F32, I32, BOOL), grad_order=None, op="convert_element_type",
          new_dtype=F16),   # values only: float16 is too coarse for finite differences
    # -- shapes --
    rec("broadcast_in_dim", 1, ALL, [((3,),)], domains("real"), op="broadcast_in_dim",
        shape=(2, 3, 4), broadcast_dimensions=(1,)),
    rec("broadcast_in_dim_unit", 1, ALL, [((3, 1),)], domains("real"),
        op="broadcast_in_dim", shape=(2, 3, 4), broadcast_dimensions=(1, 2)),
    rec("broadcast_in_dim_scalar", 1, ALL, [((),)], domains("real"),
        op="broadcast_in_dim", shape=(2, 3), broadcast_dimensions=()),
    rec("reshape", 1, ALL, [((3, 4),)], domains("real"), new_sizes=(2, 6)),
    rec("reshape_flat", 1, ALL, [((2, 3, 2),)], domains("real"), op="reshape",
        new_sizes=(12,)),
    rec("reshape_dimensions", 1, ALL, [((2, 3, 4),)], domains("real"), op="reshape",
        new_sizes=(4, 6), dimensions=(2, 0, 1)),
    rec("transpose", 1, ALL, [((2, 3, 4),)], domains("real"), permutation=(2, 0, 1)),
    rec("transpose_2d", 1, ALL, [((3, 4),)], domains("real"), op="transpose",
        permutation=(1, 0)),
    rec("squeeze", 1, ALL, [((3, 1, 4, 1),)], domains("real"), dimensions=(1, 3)),
    rec("squeeze_negative", 1, ALL, [((1, 3, 1),)], domains("real"), op="squeeze",
        dimensions=(-1, 0)),
    rec("expand_dims", 1, ALL, [((3, 4),)], domains("real"), dimensions=(0, 3)),
    rec("expand_dims_negative", 1, ALL, [((3,),)], domains("real"), op="expand_dims",
        dimensions=(-1,)),
    rec("iota", 0, (I32, F32), [()], domains(), grad_order=0,
        call=lambda L: L.iota(np.int32, 5)),
    rec("iota_f32", 0, (F32,), [()], domains(), grad_order=0,
        call=lambda L: L.iota(np.float32, 4)),
    rec("broadcasted_iota", 0, (I32,), [()], domains(), grad_order=0,
        call=lambda L: L.broadcasted_iota(np.int32, (2, 3, 4), 1)),
    rec("slice", 1, ALL, [((5, 6),)], domains("real"), start_indices=(1, 2),
        limit_indices=(4, 6)),
    rec("slice_strided", 1, ALL, [((5, 7),)], domains("real"), op="slice",
        start_indices=(0, 1), limit_indices=(5, 7), strides=(2, 3)),
    rec("slice_strided_1d", 1, ALL, [((8,),)], domains("real"), op="slice",
        start_indices=(1,), limit_indices=(7,), strides=(4,)),
    rec("pad", 2, ALL, [((3, 4), ())], domains("real", "real"),
        padding_config=((1, 2, 0), (0, 3, 0))),
    rec("pad_interior_negative", 2, ALL, [((3, 4), ())], domains("real", "real"),
        op="pad", padding_config=((1, -1, 1), (-2, 2, 2))),
    rec("pad_negative_1d", 2, ALL, [((6,), ())], domains("real", "real"), op="pad",
        padding_config=((-2, -1, 1),)),
    _concat("concatenate_0", ((2, 3), (4, 3), (1, 3)), 0),
    _concat("concatenate_1", ((2, 3), (2, 1)), 1),
    # -- reductions, multiple and negative axes --
    _reduction("reduce_sum", (0,), (3, 4)),
    _reduction("reduce_sum", (0, 2), (2, 3, 4)),
    _reduction("reduce_sum", (-1,), (2, 3, 4)),
    _reduction("reduce_sum", (-1, 0, 1), (2, 3, 4)),
    _reduction("reduce_sum", (), (3, 4)),
    _reduction("reduce_max", (1,), (3, 4), "distinct"),
    _reduction("reduce_max", (0, -1), (2, 3, 4), "distinct"),
    _reduction("reduce_min", (0,), (3, 4), "distinct"),
    _reduction("reduce_min", (-2, 2), (2, 3, 4), "distinct"),
    rec("argmax_ties", 1, NUM, [((4, 5),)], domains("ties"), grad_order=0,
        call=lambda L, x: L.argmax(x, 1, np.int32), axis=1),
    rec("argmax_nan", 1, FLOAT, [((6, 5),)], domains("ties_nan"), grad_order=0,
        call=lambda L, x: L.argmax(x, 0, np.int32), axis=0),
    rec("argmax_negative_axis", 1, NUM, [((2, 3, 4),)], domains("ties"), grad_order=0,
        call=lambda L, x: L.argmax(x, -2, np.int32),
        call_jax=lambda L, x: L.argmax(x, 1, np.int32), axis=-2),
    # -- dot_general: contracting and batch dimensions in unusual positions --
    _dot("dot_matmul", (2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    _dot("dot_contract_first_last", (3, 2), (4, 3), (((0,), (1,)), ((), ()))),
    _dot("dot_vector", (3,), (3,), (((0,), (0,)), ((), ()))),
    _dot("dot_outer", (2,), (3,), (((), ()), ((), ()))),
    _dot("dot_batch_middle", (4, 2, 5, 3), (3, 5, 6, 4),
         (((0, 3), (3, 0)), ((2,), (1,)))),
    _dot("dot_two_batch_swapped", (2, 3, 4), (4, 3, 2), (((1,), (1,)), ((0, 2), (2, 0)))),
    # -- copy (x.copy(), jnp.array(x)): the identity in a buffer of its own --
    rec("copy", 1, ALL, [((3, 4),), ((),)], domains("real"), 1,
        call=lambda L, x: L._array_copy(x), call_jax=lambda L, x: _jax_array_copy(x)),
]
