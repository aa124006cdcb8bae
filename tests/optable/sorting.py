"""Op-table rows of sort (single, multi-operand, num_keys > 1, NaN/-0.0 order), top_k,
and the permutation-like shape ops rev and split.

Multi-output ops are wrapped to return one array (a chosen output, or the outputs
concatenated) so every harness test applies. Gradient rows use "distinct" values so
no ties make the permutation ambiguous.
"""
import numpy as np

from optable import ALL, F32, I32, NUM, domains, rec


def _signed_zeros_nan(g, shapes, dtype):
    """Keys full of ties, +-0.0 and NaN, and an iota payload revealing the permutation."""
    (shape,) = shapes
    keys = np.asarray(g.ties(shape, F32))
    r = np.asarray(g.which(shape, 4))
    keys = np.where(r == 0, -0.0, np.where(r == 1, np.nan, keys)).astype(dtype)
    return [keys]


def _with_payload(L, x, dim):
    iota = L.broadcasted_iota(np.int32, x.shape, dim)
    return L.sort_key_val(x, iota, dim)[1]


RECORDS = [
    # -- sort --
    rec("sort_1d", 1, NUM, [((7,),)], domains("distinct"), op="sort"),
    rec("sort_axis0", 1, NUM, [((4, 3),)], domains("distinct"),
        call=lambda L, x: L.sort(x, 0), dimension=0),
    rec("sort_negative_dim", 1, (F32,), [((2, 3, 4),)], domains("distinct"),
        call=lambda L, x: L.sort(x, -2), dimension=-2),
    rec("sort_ties_nan_order", 1, (F32,), [((9,),), ((3, 5),)], _signed_zeros_nan,
        grad_order=0, call=lambda L, x: _with_payload(L, x, 0)),
    rec("sort_ties_unstable_values", 1, ALL, [((8,),)], domains("ties"), grad_order=None,
        call=lambda L, x: L.sort(x, is_stable=False)),
    rec("sort_key_val", 2, NUM, [((6,), (6,)), ((3, 4), (3, 4))],
        domains("distinct", "real"), call=lambda L, k, v: L.sort_key_val(k, v)[1]),
    rec("sort_multi_operand", 2, NUM, [((5, 3), (5, 3))], domains("distinct", "real"),
        call=lambda L, k, v: L.concatenate(L.sort((k, v), 0), 0), dimension=0),
    rec("sort_num_keys2", 3, NUM, [((8,), (8,), (8,))], domains("ties", "distinct", "real"),
        call=lambda L, a, b, c: L.concatenate(L.sort((a, b, c), num_keys=2), 0),
        diff_argnums=(1, 2), num_keys=2),
    # -- top_k: values (differentiable) and indices (ties: lower index first) --
    rec("top_k_values", 1, NUM, [((7,),), ((3, 5),)], domains("distinct"),
        call=lambda L, x: L.top_k(x, 3)[0], k=3),
    rec("top_k_indices_ties", 1, (F32, I32), [((8,),), ((2, 6),)], domains("ties_nan"),
        grad_order=0, call=lambda L, x: L.top_k(x, 4)[1], k=4),
    rec("top_k_axis0", 1, NUM, [((5, 3),)], domains("distinct"),
        call=lambda L, x: L.top_k(x, 2, axis=0)[0], k=2, axis=0),
    # -- rev and split --
    rec("rev", 1, ALL, [((3, 4),), ((2, 3, 2),)], domains("real"),
        call=lambda L, x: L.rev(x, (0, x.ndim - 1)), dimensions="first and last"),
    rec("split_concat_reversed", 1, ALL, [((3, 6),)], domains("real"),
        call=lambda L, x: L.concatenate(L.split(x, (1, 0, 2, 3), axis=1)[::-1], 1),
        sizes=(1, 0, 2, 3), axis=1),
    rec("split_one_piece", 1, ALL, [((5, 2),)], domains("real"),
        call=lambda L, x: L.split(x, (2, 1, 2))[1], sizes=(2, 1, 2), axis=0),
]
