"""Op-table rows of the indexing primitives: gather, the scatter family,
dynamic_slice, dynamic_update_slice and the ``*_in_dim`` conveniences.

Index operands are int32 and never differentiated (``diff_argnums``). Out-of-bounds
rows draw indices past both ends of the operand to check CLIP / FILL_OR_DROP.
"""
import numpy as np

from optable import ALL, F64, NUM, rec

I32 = np.dtype(np.int32)


def _idx(g, batch_shape, bounds, oob=0):
    """Index vectors (last dim) with entry k in [-oob, bounds[k] + oob)."""
    cols = [np.asarray(g.which(batch_shape, b + 2 * oob)) - oob for b in bounds]
    return np.stack(cols, -1).astype(I32)


def _gather(name, op_shape, batch_shape, bounds, dn, sizes, oob=0, dtypes=ALL, grad_order=2,
            **kw):
    def make(g, shapes, dtype):
        return [g.real(shapes[0], dtype), _idx(g, batch_shape, bounds, oob)]
    idx_shape = batch_shape + (len(bounds),)
    return rec(name, 2, dtypes, [(op_shape, idx_shape)], make, grad_order,
               call=lambda L, x, i: L.gather(x, i, L.GatherDimensionNumbers(*dn), sizes,
                                             **kw),
               diff_argnums=(0,), dimension_numbers=dn, slice_sizes=sizes, **kw)


def _scatter(name, op, op_shape, upd_shape, dn, indices, dtypes=NUM, grad_order=2,
             diff_argnums=(0, 2), domain="real", **kw):
    """``indices``: a fixed array, or (batch_shape, bounds, oob) to draw them."""
    def make(g, shapes, dtype):
        if isinstance(indices, tuple):
            idx = _idx(g, *indices)
        else:
            idx = np.asarray(indices, I32)
        if domain == "apart":   # no ties between operand and update values
            x = g.distinct(shapes[0], dtype)
            u = (np.asarray(g.distinct(shapes[2], F64)) + 0.005).astype(dtype)
            return [x, idx, u]
        return [g.real(shapes[0], dtype), idx, g.real(shapes[2], dtype)]
    idx_shape = (np.shape(indices) if not isinstance(indices, tuple)
                 else indices[0] + (len(indices[1]),))
    return rec(name, 3, dtypes, [(op_shape, idx_shape, upd_shape)], make, grad_order,
               call=lambda L, x, i, u: getattr(L, op)(x, i, u,
                                                      L.ScatterDimensionNumbers(*dn), **kw),
               diff_argnums=diff_argnums, dimension_numbers=dn, **kw)


def _dyn(name, nargs, shapes, call, n_real=1, bound=8, **params):
    """Rows whose first ``n_real`` operands are arrays and the rest scalar indices in
    [-2, bound - 2) (negative ones wrap; large ones clamp)."""
    def make(g, shapes, dtype):
        arrays = [g.real(s, dtype) for s in shapes[:n_real]]
        return arrays + [np.asarray(g.which((), bound)) - 2 for _ in shapes[n_real:]]
    return rec(name, nargs, ALL, [shapes], make, call=call,
               diff_argnums=tuple(range(n_real)), **params)


ROWS_DN = ((1,), (0,), (0,))            # x[idx] on the leading axis, rows kept
POINTS_DN = ((), (0,), (0,))            # x[idx] of a vector
PAIRS_DN = ((), (0, 1), (0, 1))         # x[i, j]
WINDOW_DN = ((1, 2), (), (0, 1))        # 2-D windows at 2-D starts
BATCH_GDN = ((2,), (1,), (1,), (0,), (0,))     # per-batch take along axis 1

ROWS_SDN = ((1,), (0,), (0,))
POINTS_SDN = ((), (0, 1), (0, 1))
WINDOW_SDN = ((1, 2), (), (0, 1))
BATCH_SDN = ((2,), (1,), (1,), (0,), (0,))


RECORDS = [
    # -- gather: jnp-style x[idx], 2-D index maps, windows, batching dims, modes --
    _gather("gather_rows", (5, 3), (4,), (5,), ROWS_DN, (1, 3)),
    _gather("gather_points_2d_batch", (6,), (2, 3), (6,), POINTS_DN, (1,)),
    _gather("gather_pairs", (4, 5), (3,), (4, 5), PAIRS_DN, (1, 1)),
    _gather("gather_windows", (5, 6), (3,), (4, 4), WINDOW_DN, (2, 3)),
    _gather("gather_index_map_reversed", (4, 5), (3,), (4, 4), ((1,), (0,), (1, 0)), (1, 2)),
    _gather("gather_batching_dims", (3, 5, 2), (3, 4), (5,), BATCH_GDN, (1, 1, 2)),
    _gather("gather_clip_oob", (5, 3), (4,), (5,), ROWS_DN, (1, 3), oob=3, mode="clip"),
    # values only: the default fill (NaN) defeats finite differences; the next row
    # (fill_value=-1) checks the gradients of filled windows.
    _gather("gather_fill_oob", (5, 6), (3,), (4, 4), WINDOW_DN, (2, 3), oob=2,
            grad_order=None, mode="fill"),
    _gather("gather_fill_value", (6,), (5,), (6,), POINTS_DN, (1,), oob=2, dtypes=NUM,
            mode="fill", fill_value=-1),
    # -- scatters: duplicates accumulate; out-of-bounds windows dropped or clipped --
    _scatter("scatter_add_dup", "scatter_add", (5, 3), (6, 3), ROWS_SDN, ((6,), (5,), 0)),
    _scatter("scatter_add_points", "scatter_add", (4, 5), (5,), POINTS_SDN,
             ((5,), (4, 5), 0)),
    _scatter("scatter_add_batching_dims", "scatter_add", (3, 5, 2), (3, 4, 2), BATCH_SDN,
             ((3, 4), (5,), 0)),
    _scatter("scatter_add_drop_oob", "scatter_add", (5, 6), (3, 2, 3), WINDOW_SDN,
             ((3,), (4, 4), 2)),
    _scatter("scatter_add_clip_oob", "scatter_add", (5, 6), (3, 2, 3), WINDOW_SDN,
             ((3,), (4, 4), 2), mode="clip"),
    _scatter("scatter_unique", "scatter", (5, 3), (3, 3), ROWS_SDN, [[3], [0], [4]],
             dtypes=ALL, unique_indices=True),
    _scatter("scatter_dup", "scatter", (5, 3), (4, 3), ROWS_SDN, [[1], [3], [1], [0]],
             dtypes=ALL),
    _scatter("scatter_mul_unique", "scatter_mul", (5, 3), (3, 3), ROWS_SDN,
             [[3], [0], [4]], unique_indices=True),
    _scatter("scatter_mul_dup", "scatter_mul", (5, 3), (4, 3), ROWS_SDN,
             [[1], [3], [1], [0]], diff_argnums=(0,)),
    _scatter("scatter_min", "scatter_min", (5, 3), (6, 3), ROWS_SDN, ((6,), (5,), 0),
             grad_order=1, domain="apart"),
    _scatter("scatter_max", "scatter_max", (4, 5), (5,), POINTS_SDN, ((5,), (4, 5), 0),
             grad_order=1, domain="apart"),
]

RECORDS += [
    # -- dynamic slicing: traced start indices (negative wrap, out of range clamps) --
    _dyn("dynamic_slice", 3, ((5, 6), (), ()),
         lambda L, x, i, j: L.dynamic_slice(x, (i, j), (2, 3)), slice_sizes=(2, 3)),
    _dyn("dynamic_slice_static_index", 2, ((4, 5), ()),
         lambda L, x, i: L.dynamic_slice(x, (np.int32(-1), i), (1, 4)), slice_sizes=(1, 4)),
    _dyn("dynamic_update_slice", 4, ((5, 6), (2, 3), (), ()),
         lambda L, x, u, i, j: L.dynamic_update_slice(x, u, (i, j)), n_real=2),
    _dyn("dynamic_slice_in_dim", 2, ((4, 5), ()),
         lambda L, x, i: L.dynamic_slice_in_dim(x, i, 3, axis=1)),
    _dyn("dynamic_index_in_dim", 2, ((4, 5), ()),
         lambda L, x, i: L.dynamic_index_in_dim(x, i, 0, keepdims=False), bound=6),
    _dyn("dynamic_update_index_in_dim", 3, ((4, 5), (4,), ()),
         lambda L, x, u, i: L.dynamic_update_index_in_dim(x, u, i, 1), n_real=2),
    _dyn("dynamic_update_slice_in_dim", 3, ((4, 5), (2, 5), ()),
         lambda L, x, u, i: L.dynamic_update_slice_in_dim(x, u, i, 0), n_real=2),
    _dyn("slice_in_dim", 1, ((6, 4),),
         lambda L, x: L.slice_in_dim(x, -5, None, 2, axis=0)),
    _dyn("index_in_dim", 1, ((3, 4),),
         lambda L, x: L.index_in_dim(x, -2, axis=1, keepdims=False)),
]
