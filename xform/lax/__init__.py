"""``xform.lax``: the primitive operations, under JAX's names and signatures."""
from xform.lax.elementwise import (
    abs, add, add_any, convert_element_type, cos, div, eq, exp, ge, gt, integer_pow, le,
    log, logistic, lt, max, min, mul, ne, neg, pow, rsqrt, select, select_n, sign, sin,
    sqrt, stop_gradient, sub, tanh,
    abs_p, add_p, add_any_p, convert_element_type_p, cos_p, div_p, eq_p, exp_p, ge_p, gt_p,
    integer_pow_p, le_p, log_p, logistic_p, lt_p, max_p, min_p, mul_p, ne_p, neg_p, pow_p,
    rsqrt_p, select_n_p, sign_p, sin_p, sqrt_p, stop_gradient_p, sub_p, tanh_p)
from xform.lax.special import (
    acos, acosh, asin, asinh, atan, atan2, atanh, cbrt, cosh, digamma, erf, erf_inv, erfc,
    exp2, expm1, lgamma, log1p, polygamma, reciprocal, sinh, square, tan,
    acos_p, acosh_p, asin_p, asinh_p, atan_p, atan2_p, atanh_p, cbrt_p, cosh_p, digamma_p,
    erf_p, erf_inv_p, erfc_p, exp2_p, expm1_p, lgamma_p, log1p_p, polygamma_p, sinh_p,
    square_p, tan_p)
from xform.lax.bitwise import (
    bitwise_and, bitwise_not, bitwise_or, bitwise_xor, clz, population_count, shift_left,
    shift_right_arithmetic, shift_right_logical, mulhi, and_p, clz_p, mulhi_p, not_p, or_p,
    population_count_p, shift_left_p, shift_right_arithmetic_p, shift_right_logical_p, xor_p)
from xform.lax.special_series import (
    bessel_i0e, bessel_i1e, zeta, bessel_i0e_p, bessel_i1e_p, zeta_p)
from xform.lax.rounding import (
    RoundingMethod, ceil, clamp, floor, is_finite, nextafter, rem, round, ceil_p, clamp_p,
    floor_p, is_finite_p, nextafter_p, rem_p, round_p)
from xform.lax.complex import complex, conj, imag, real, complex_p, conj_p, imag_p, real_p
from xform.lax.shapes import (
    broadcast, broadcast_in_dim, broadcasted_iota, concatenate, expand_dims, full,
    full_like, iota, pad, reshape, slice, squeeze, transpose, zeros_like_array,
    broadcast_in_dim_p, concatenate_p, iota_p, pad_p, reshape_p, slice_p, squeeze_p,
    transpose_p)
from xform.lax.reductions import (argmax, reduce_max, reduce_min, reduce_sum, argmax_p,
                                  reduce_max_p, reduce_min_p, reduce_sum_p)
from xform.lax.reductions import (
    argmin, reduce_and, reduce_or, reduce_precision, reduce_prod, reduce_xor, argmin_p,
    reduce_and_p, reduce_or_p, reduce_precision_p, reduce_prod_p, reduce_xor_p)
from xform.lax.dot import batch_matmul, dot, dot_general, dot_general_p
from xform.lax.ragged_dot import RaggedDotDimensionNumbers, ragged_dot, ragged_dot_general
from xform.lax.dot import DotDimensionNumbers, Precision, PrecisionLike
from xform.lax.dot_algorithms import DotAlgorithm, DotAlgorithmPreset
from xform.lax.accuracy import AccuracyMode, Tolerance
from xform.lax.conv import (
    ConvDimensionNumbers, ConvGeneralDilatedDimensionNumbers, conv, conv_dimension_numbers, conv_general_dilated,
    conv_general_permutations,
    conv_with_general_padding, conv_general_dilated_p, conv_transpose)
from xform.lax.windowed import (
    padtype_to_pads, reduce_window, reduce_window_shape_tuple, reduce_window_max_p,
    reduce_window_min_p, reduce_window_sum_p)
from xform.lax.conv_utils import (
    conv_general_dilated_local, conv_general_dilated_patches, conv_general_shape_tuple,
    conv_shape_tuple, conv_transpose_shape_tuple)
from xform.lax.cumulative import (cumlogsumexp, cummax, cummin, cumprod, cumsum,
                                  cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p)
from xform.lax.control_flow import cond, switch, while_loop
from xform.lax.control_flow.conditionals import cond_p
from xform.lax.control_flow.loops import while_p
from xform.lax.control_flow.scan import scan, scan_p
from xform.lax.control_flow.scan_loops import fori_loop, map  # noqa: A004
from xform.lax.control_flow.associative_scan import associative_scan
from xform.lax.slicing import (
    GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers, gather, gather_p,
    index_take)
from xform.lax.scatter import (
    scatter, scatter_add, scatter_max, scatter_min, scatter_mul, scatter_sub, scatter_p,
    scatter_add_p, scatter_max_p, scatter_min_p, scatter_mul_p, scatter_sub_p)
from xform.lax.dynamic_slicing import (
    dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim, dynamic_update_index_in_dim,
    dynamic_update_slice, dynamic_update_slice_in_dim, index_in_dim, slice_in_dim,
    dynamic_slice_p, dynamic_update_slice_p)
from xform.lax.shapes import rev, split, rev_p, split_p
from xform.lax.shape_utils import (
    broadcast_like, broadcast_shapes, broadcast_to_rank, collapse, empty, stack, tile,
    unstack)
from xform.core.dtypes import dtype
from xform.lax import extended as _extended  # noqa: F401  (structural rules for typed keys)
from xform.lax.sorting import (approx_max_k, approx_min_k, sort, sort_key_val, top_k, sort_p,
                               top_k_p)
from xform.lax.fft import FftType, fft, fft_p
from xform.lax.prng import (RandomAlgorithm, bitcast_convert_type, rng_bit_generator,
                            rng_uniform, bitcast_convert_type_p, rng_bit_generator_p,
                            rng_uniform_p)
from xform.lax.scatter_apply import scatter_apply
from xform.lax.special_incomplete import (
    betainc, igamma, igamma_grad_a, igammac, random_gamma_grad, igamma_p, igamma_grad_a_p,
    igammac_p, regularized_incomplete_beta_p)

from xform.interpreters import ad_util as _ad_util
_ad_util.register_ops(full=full, add_any=add_any, broadcast_in_dim=broadcast_in_dim,
                      transpose=transpose, reduce_sum=reduce_sum)
from xform.lax.collectives import (  # noqa: E402
    all_gather, axis_index, axis_size, pmax, pmean, pmin, psum, psum_scatter, all_gather_p,
    axis_index_p, pmax_p, pmin_p, psum_p, reduce_scatter_p)
from xform.lax.collectives_permute import (  # noqa: E402
    all_to_all, ppermute, pshuffle, pswapaxes, all_to_all_p, ppermute_p)
from xform.lax.collectives_more import (  # noqa: E402
    pbroadcast, precv, psend, ragged_all_to_all, ragged_all_to_all_p)
from xform.lax.vma import pcast  # noqa: E402
from xform.lax.control_flow.solves import (  # noqa: E402
    custom_linear_solve, custom_root, linear_solve_p)
from xform.lax.general_reduce import reduce, reduce_p  # noqa: E402
from xform.lax.sharding_constraint import (  # noqa: E402,F401
    with_sharding_constraint, sharding_constraint_p)
from xform.lax import sharding_rules as _sharding_rules  # noqa: E402,F401
from xform.lax.barriers import (  # noqa: E402
    _array_copy, copy_p, optimization_barrier, optimization_barrier_p)
from xform.lax.control_flow.platform import platform_dependent  # noqa: E402
from xform.lax.tokens import after_all, after_all_p, create_token, create_token_p  # noqa: E402
from xform.lax.composite_op import composite, composite_p  # noqa: E402
from xform.lax.scaled_dot import scaled_dot, scaled_dot_p  # noqa: E402
