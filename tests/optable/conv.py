"""Op-table rows of conv_general_dilated (1-D and 2-D; strides, SAME/VALID/explicit
padding, lhs and rhs dilation, feature and batch groups, NHWC/HWIO layouts) and of
dot_general's precision / preferred_element_type options."""
import numpy as np

from optable import F32, FLOAT, I32, NUM, domains, rec


def _conv(name, lhs, rhs, strides, padding, dtypes=NUM, **kw):
    params = dict(window_strides=strides, padding=padding, **kw)
    return rec(name, 2, dtypes, [(lhs, rhs)], domains("real", "real"),
               call=lambda L, x, y: L.conv_general_dilated(x, y, **params), **params)


NHWC = ("NHWC", "HWIO", "NHWC")

RECORDS = [
    _conv("conv_1d_strided_explicit", (2, 2, 8), (3, 2, 3), (2,), ((2, 1),)),
    _conv("conv_2d_same_strided", (1, 2, 5, 6), (3, 2, 3, 2), (2, 1), "SAME"),
    _conv("conv_2d_nhwc", (2, 5, 4, 3), (3, 2, 3, 2), (1, 1), "SAME", dimension_numbers=NHWC),
    _conv("conv_2d_lhs_dilation", (1, 2, 3, 4), (2, 2, 2, 2), (1, 1), ((1, 1), (0, 2)),
          lhs_dilation=(2, 1)),
    _conv("conv_2d_rhs_dilation", (1, 2, 6, 5), (2, 2, 2, 2), (1, 2), "VALID",
          rhs_dilation=(2, 2)),
    _conv("conv_2d_feature_groups", (2, 4, 4, 4), (6, 2, 2, 2), (1, 1), "VALID",
          feature_group_count=2),
    _conv("conv_2d_batch_groups", (4, 3, 4, 4), (4, 3, 2, 2), (1, 1), "VALID",
          batch_group_count=2),
    _conv("conv_1d_negative_pad_nwc", (2, 7, 2), (3, 2, 2), (2,), ((-1, 1),), FLOAT,
          dimension_numbers=("NWC", "WIO", "NWC")),
    # -- dot_general options --
    rec("dot_precision_highest", 2, NUM, [((2, 3), (3, 4))], domains("real", "real"),
        call=lambda L, x, y: L.dot_general(x, y, (((1,), (0,)), ((), ())),
                                           precision=L.Precision.HIGHEST)),
    rec("dot_precision_pair", 2, FLOAT, [((2, 3, 4), (2, 4, 5))], domains("real", "real"),
        call=lambda L, x, y: L.dot_general(x, y, (((2,), (1,)), ((0,), (0,))),
                                           precision=("highest", "default"))),
    rec("dot_preferred_f32", 2, (np.float16,), [((2, 3), (3, 4))], domains("real", "real"),
        grad_order=None, tol={F32: 1e-3},
        call=lambda L, x, y: L.dot(x, y, preferred_element_type=np.float32)),
    rec("dot_preferred_i32", 2, (np.int8,), [((2, 3), (3, 4))], domains("real", "real"),
        grad_order=None, call=lambda L, x, y: L.dot(x, y, preferred_element_type=I32)),
    rec("dot_preferred_int_to_f32", 2, (np.int8,), [((2, 30), (30,))], domains("real", "real"),
        grad_order=None, call=lambda L, x, y: L.dot(x, y, preferred_element_type=F32)),
    rec("conv_preferred_int_to_f32", 2, (np.int8,), [((1, 8, 5), (2, 8, 3))],
        domains("real", "real"), grad_order=None,
        call=lambda L, x, y: L.conv_general_dilated(x, y, (1,), "SAME",
                                                    preferred_element_type=F32)),
]
