"""Ragged (grouped) matrix products: ``ragged_dot`` and ``ragged_dot_general``.

As JAX lowers them off TPU: each ragged dimension is expanded into a dense operand with
a leading group axis, zero outside each group's rows (a mask from the cumulative group
sizes), and one ``dot_general`` contracts or batches that axis. The three modes, by
where ``lhs``'s ragged dimension sits: non-contracting (``[m, k] x [g, k, n] -> [m, n]``,
one ``rhs`` per group), contracting (``[m, k] x [k, n] -> [g, m, n]``, one product per
group) and batch (the groups only partition a batch dimension: a plain dot).
"""
import dataclasses

from xform.core.trace import get_aval
from xform.lax import shapes
from xform.lax.bitwise import bitwise_and
from xform.lax.cumulative import cumsum
from xform.lax.dot import dot_general
from xform.lax.elementwise import le, lt, select, sub


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """``dot_dimension_numbers`` ``((lhs_contract, rhs_contract), (lhs_batch,
    rhs_batch))``, plus ``lhs``'s ragged dimension and ``rhs``'s group dimension."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None):
    """Grouped matrix product: consecutive row groups of ``lhs`` (m, k), of sizes
    ``group_sizes`` (g,), each times its own ``rhs[i]`` (k, n); rows past the groups give
    zeros.

    >>> import numpy as np
    >>> ragged_dot(np.ones((3, 2)), np.stack([np.eye(2), 2 * np.eye(2)]),
    ...            np.array([1, 2], np.int32))[:, 0]
    Array([1., 2., 2.], dtype=float32)
    """
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision,
                              preferred_element_type, group_offset)


def _remaining(n, *used):
    taken = {d for u in used for d in u}
    return [d for d in range(n) if d not in taken]


def _mode_and_prefix(rank, dims, ragged):
    (contract, _), (batch, _) = dims.dot_dimension_numbers
    contract, batch = list(contract), list(batch)
    noncontract = _remaining(rank, contract, batch)
    if ragged in noncontract:
        return "noncontracting", batch + noncontract[:noncontract.index(ragged)]
    if ragged in contract:
        return "contracting", batch + contract[:contract.index(ragged)]
    if ragged in batch:
        return "batch", batch[:batch.index(ragged)]
    raise TypeError(f"lhs_ragged_dim {ragged} not found in lhs_noncontracting "
                    f"{noncontract}, lhs_contracting {contract}, or lhs_batch {batch}.")


def _expand(x, dim, group_sizes, axes):
    """``x`` with a leading group axis: entry ``[i, idx]`` is ``x[idx]`` where
    ``idx[dim]`` lies in group ``i`` (the groups of ``x[idx[axes]]``), else 0."""
    shape = get_aval(x).shape
    gs = get_aval(group_sizes)
    out = (gs.shape[-1], *shape)
    ends = cumsum(group_sizes, gs.ndim - 1)
    # (group, prefix...) axes -> out's (0, 1 + axes...), ordered as broadcast_in_dim needs
    target = [0] + [1 + a for a in axes]
    order = sorted(range(gs.ndim), key=lambda i: target[i])
    perm = [gs.ndim - 1 if i == 0 else i - 1 for i in order]
    where = tuple(target[i] for i in order)

    def spread(v):
        return shapes.broadcast_in_dim(shapes.transpose(v, perm), out, where)
    pos = shapes.broadcasted_iota(gs.dtype, out, dim + 1)
    mask = bitwise_and(le(spread(sub(ends, group_sizes)), pos), lt(pos, spread(ends)))
    return select(mask, shapes.broadcast_in_dim(x, out, tuple(range(1, len(out)))),
                  shapes.full(out, 0, get_aval(x).dtype))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None):
    """``dot_general`` with one ragged ``lhs`` dimension split into groups of
    ``group_sizes`` (see the module docstring for the three modes)."""
    if group_offset is not None:
        raise NotImplementedError("Unimplemented group_offset support.")
    dims = ragged_dot_dimension_numbers
    if len(dims.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general requires exactly one lhs ragged dimension, got "
                        f"{dims.lhs_ragged_dimensions}")
    l_rank = get_aval(lhs).ndim
    ragged = dims.lhs_ragged_dimensions[0]
    mode, l_prefix = _mode_and_prefix(l_rank, dims, ragged)
    (lc, rc), (lb, rb) = (list(map(list, p)) for p in dims.dot_dimension_numbers)
    if get_aval(group_sizes).ndim == 1:
        group_sizes = shapes.broadcast(group_sizes,
                                       [get_aval(lhs).shape[i] for i in l_prefix])
    incr = lambda ds: [d + 1 for d in ds]  # noqa: E731
    kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    if mode == "noncontracting":
        if len(dims.rhs_group_dimensions) != 1:
            raise TypeError("ragged_dot_general requires one rhs group dimension, got "
                            f"{dims.rhs_group_dimensions}")
        return dot_general(_expand(lhs, ragged, group_sizes, l_prefix), rhs,
                           ((incr(lc) + [0], rc + [dims.rhs_group_dimensions[0]]),
                            (incr(lb), rb)), **kw)
    if mode == "contracting":
        r_ragged = rc[lc.index(ragged)]
        r_prefix = rb + rc[:rc.index(r_ragged)]
        return dot_general(_expand(lhs, ragged, group_sizes, l_prefix),
                           _expand(rhs, r_ragged, group_sizes, r_prefix),
                           ((incr(lc), incr(rc)), ([0] + incr(lb), [0] + incr(rb))), **kw)
    return dot_general(lhs, rhs, dims.dot_dimension_numbers, **kw)
