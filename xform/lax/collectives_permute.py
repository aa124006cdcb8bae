"""The collectives that permute blocks between the devices of named axes: ``ppermute``
(and ``pshuffle`` composed from it) and ``all_to_all``. Axis names, replica groups and
dtype rules as in ``collectives.py``.
"""
import numpy as np

from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters.batching import not_mapped
from xform.lax import dynamic_slicing as _slicing
from xform.lax import shapes as _shapes
from xform.lax._prim import standard_primitive
from xform.lax.collectives import (_bound_size, _device_groups, _groups, _groups_attr,
                                   _names, _scalar_like, axis_size)
from xform.core import tree_util

ir, hlo = mlir.ir, mlir.hlo


# ---- ppermute / pshuffle ----

def _ppermute_abstract_eval(x, *, axis_name, perm):
    return x


def _ppermute_lowering(ctx, x, *, axis_name, perm):
    pairs = []
    for group in _device_groups(axis_name):
        pairs.extend([group[s], group[t]] for s, t in perm)
    attr = ir.DenseIntElementsAttr.get(np.asarray(pairs, np.int64).reshape(-1, 2))
    return ctx.module_ctx.partitioned(hlo.CollectivePermuteOp(x, attr),
                                      global_ids=False).result


def _ppermute_batch_named(size, name_, vals, dims, *, axis_name, perm):
    (x,), (d,) = vals, dims
    if len(axis_name) > 1:
        raise NotImplementedError("ppermute over several axis names under vmap")
    if d is not_mapped:
        x, d = batching.broadcast(x, size, 0), 0
    src = {t: s for s, t in perm}
    row = list(get_aval(x).shape)
    row[d] = 1   # members receiving nothing get zeros (not x * 0: bools, inf, nan)
    zero = _shapes.broadcast_in_dim(_scalar_like(x, 0), tuple(row), ())
    rows = [_slicing.slice_in_dim(x, src[t], src[t] + 1, axis=d) if t in src else zero
            for t in range(size)]
    return _shapes.concatenate(rows, d), d


ppermute_p = standard_primitive("ppermute", _ppermute_abstract_eval)
mlir.register_lowering(ppermute_p, _ppermute_lowering)
batching.collective_batchers[ppermute_p] = _ppermute_batch_named
batching.primitive_batchers[ppermute_p] = lambda vals, dims, **p: (
    ppermute_p.bind(vals[0], **p), dims[0])
ad.deflinear(ppermute_p, lambda ct, x, *, axis_name, perm: [ppermute_p.bind(
    ct, axis_name=axis_name, perm=tuple((t, s) for s, t in perm))])


def ppermute(x, axis_name, perm):
    """Send member ``s``'s ``x`` to member ``t`` for each ``(s, t)`` in ``perm``;
    members receiving nothing get zeros.

    Raises:
      ValueError: if a source or target repeats or is out of range.

    >>> import xform, xform.numpy as jnp
    >>> f = lambda x: xform.lax.ppermute(x, 'i', [(0, 1), (1, 2), (2, 0)])
    >>> xform.vmap(f, axis_name='i')(jnp.arange(3.0))
    Array([2., 0., 1.], dtype=float32)
    """
    names = _names(axis_name)
    size = _bound_size(names)
    perm = tuple((int(s), int(t)) for s, t in perm)
    srcs, tgts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(tgts)) != len(tgts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}")
    if any(not 0 <= i < size for i in srcs + tgts):
        raise ValueError(f"ppermute perm {perm} has indices out of range for axis "
                         f"{names if len(names) > 1 else names[0]} of size {size}")
    return tree_util.tree_map(lambda v: ppermute_p.bind(v, axis_name=names, perm=perm), x)


def pshuffle(x, axis_name, perm):
    """Member ``i`` gets the value of member ``perm[i]`` (``perm`` a permutation).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pshuffle(x, 'i', [2, 0, 1]),
    ...            axis_name='i')(jnp.arange(3.0))
    Array([2., 0., 1.], dtype=float32)
    """
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"pshuffle perm must be a permutation of range({len(perm)}), "
                         f"got {list(perm)}")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


# ---- all_to_all (tiled form; the untiled one adds/removes unit axes around it) ----

def _all_to_all_abstract_eval(x, *, axis_name, axis_index_groups, axis_size, split_axis,
                              concat_axis):
    shape = list(x.shape)
    if shape[split_axis] % axis_size:
        raise ValueError(f"all_to_all: split_axis {split_axis} of size "
                         f"{shape[split_axis]} is not divisible by the axis size {axis_size}")
    shape[split_axis] //= axis_size
    shape[concat_axis] *= axis_size
    return x.update(shape=tuple(shape), weak_type=False)   # (as JAX's)


def _all_to_all_lowering(ctx, x, *, axis_name, axis_index_groups, axis_size, split_axis,
                         concat_axis):
    groups = _device_groups(axis_name, axis_index_groups)
    op = ctx.module_ctx.partitioned(
        hlo.AllToAllOp([x], split_axis, concat_axis, axis_size, _groups_attr(groups),
                       results=[mlir.aval_to_ir_type(ctx.avals_out[0])]), global_ids=False)
    return op.results[0]


def _all_to_all_batch_named(size, name_, vals, dims, *, axis_name, axis_index_groups,
                            axis_size, split_axis, concat_axis):
    (x,), (d,) = vals, dims
    if axis_index_groups is not None or len(axis_name) > 1:
        raise NotImplementedError("all_to_all with axis_index_groups or several axis "
                                  "names under vmap")
    if d is not_mapped:
        x, d = batching.broadcast(x, size, 0), 0
    x = batching.moveaxis(x, d, 0)  # (j, ...) with member j's value
    shape = list(get_aval(x).shape)
    s = split_axis + 1
    shape[s:s + 1] = [size, shape[s] // size]  # (j, ..., k, chunk, ...)
    x = _shapes.reshape(x, tuple(shape))
    # member k receives chunk k of every j, concatenated along concat_axis in order of j
    x = batching.moveaxis(x, s, 0)  # (k, j, per-example dims with the chunk)
    c = concat_axis + 2             # where the concat dim now sits
    x = batching.moveaxis(x, 1, c - 1)  # j just before it, then merge (j major)
    shape = list(get_aval(x).shape)
    shape[c - 1:c + 1] = [shape[c - 1] * shape[c]]
    out = _shapes.reshape(x, tuple(shape))
    return out, 0


def _all_to_all_batch_other(vals, dims, *, split_axis, concat_axis, **params):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                             **params), 0


all_to_all_p = standard_primitive("all_to_all", _all_to_all_abstract_eval)
mlir.register_lowering(all_to_all_p, _all_to_all_lowering)
batching.collective_batchers[all_to_all_p] = _all_to_all_batch_named
batching.primitive_batchers[all_to_all_p] = _all_to_all_batch_other
ad.deflinear(all_to_all_p, lambda ct, x, *, split_axis, concat_axis, **p: [
    all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis, **p)])


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None,
               tiled=False):
    """Split ``x`` along ``split_axis`` into one chunk per member, send chunk ``j`` to
    member ``j``, and concatenate the received chunks along ``concat_axis`` (untiled:
    ``split_axis`` must have the axis size; it is removed and a new ``concat_axis`` of
    that size inserted).

    >>> import xform, xform.numpy as jnp
    >>> f = lambda x: xform.lax.all_to_all(x, 'i', 0, 0)
    >>> xform.vmap(f, axis_name='i')(jnp.arange(4.0).reshape(2, 2))
    Array([[0., 2.],
           [1., 3.]], dtype=float32)
    """
    names, groups = _names(axis_name), _groups(axis_index_groups)
    size = _bound_size(names, groups)

    def one(v):
        aval = get_aval(v)
        sa, ca = split_axis % aval.ndim, concat_axis % aval.ndim
        params = dict(axis_name=names, axis_index_groups=groups, axis_size=size)
        if tiled:
            return all_to_all_p.bind(v, split_axis=sa, concat_axis=ca, **params)
        if aval.shape[sa] != size:
            raise ValueError(f"all_to_all: split_axis {split_axis} of the operand (shape "
                             f"{aval.shape}) must have the axis size {size}")
        # a unit axis to concatenate into, placed so that it ends up at concat_axis
        # once the (then unit) split axis is squeezed away
        p = ca if ca <= sa else ca + 1
        v = _shapes.expand_dims(v, (p,))
        sa2 = sa + 1 if p <= sa else sa
        out = all_to_all_p.bind(v, split_axis=sa2, concat_axis=p, **params)
        return _shapes.squeeze(out, (sa2,))
    return tree_util.tree_map(one, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the mapped axis ``axis_name`` with the unmapped ``axis`` (whose size must be
    the axis size): ``all_to_all(x, axis_name, axis, axis)``.

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pswapaxes(x, 'i', 0), axis_name='i')(
    ...     jnp.arange(4.0).reshape(2, 2))
    Array([[0., 2.],
           [1., 3.]], dtype=float32)
    """
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
