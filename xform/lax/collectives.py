"""Collectives over named axes: psum, pmax, pmin, all_gather, psum_scatter, axis_index
(and pmean, axis_size composed from them); ppermute, pshuffle and all_to_all, which
permute blocks between devices, are in ``collectives_permute.py``; ragged_all_to_all,
pbroadcast, psend and precv (no XLA:CPU lowering) in ``collectives_more.py``.

Each primitive carries ``axis_name`` as a tuple of names. Under ``vmap(axis_name=)``
a collective over the vmapped axis is a batching rule (keyed by axis name in
``batching.collective_batchers``); under pmap/shard_map it lowers to a StableHLO
collective whose replica groups come from the replicated program's mesh
(``pxla.lowering_axes``). Nested names resolve innermost-first, so pmap over vmap
and vmap over vmap each see their own axis.

Dtypes follow JAX: psum (hence pmean) counts bools as int32; pmean divides in
``to_inexact_dtype``; the others keep the operand's dtype (psum_scatter rejects bool).
Weak types: psum/pmax/pmin of a mapped operand, and all_to_all in a replicated program,
give non-weak results (JAX's abstract eval, and its jit of vmap); others keep theirs.
"""
import itertools

import numpy as np

from xform.core import dtypes
from xform.core import trace as _trace
from xform.core.avals import ShapedArray
from xform.core.trace import Tracer, get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters.batching import not_mapped
from xform.lax import elementwise as _ew
from xform.lax import reductions as _red
from xform.lax import shapes as _shapes
from xform.lax._prim import standard_primitive
from xform.lax import dynamic_slicing as _slicing
from xform.core import tree_util

ir, hlo = mlir.ir, mlir.hlo


# ---- axis names ----

def _names(axis_name):
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _groups(axis_index_groups):
    if axis_index_groups is None:
        return None
    groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    if len({len(g) for g in groups}) != 1:
        raise ValueError(f"axis_index_groups must all be the same size, got {groups}")
    return groups


def _bound_size(names, groups=None):
    """Size of the (product of the) bound axes ``names``; NameError naming an unbound one."""
    size = 1
    for n in names:
        size *= batching.axis_frame_size(n)
    if groups is not None:
        flat = sorted(itertools.chain(*groups))
        if flat != list(range(size)):
            raise ValueError(f"axis_index_groups must cover every index of axis "
                             f"{names if len(names) > 1 else names[0]} (size {size}) exactly "
                             f"once, got {groups}")
        return len(groups[0])
    return size


def axis_size(axis_name):
    """The size of the bound named axis (a product for a tuple of names).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: x * xform.lax.axis_size('i'), axis_name='i')(jnp.ones(3))
    Array([3., 3., 3.], dtype=float32)
    """
    return _bound_size(_names(axis_name))


def _scalar_like(x, value):
    """``value`` as a scalar of ``x``'s dtype and weak type (ops with it keep both)."""
    aval = get_aval(x)
    return _ew.convert_element_type(value, aval.dtype, aval.weak_type)


# ---- replica groups (lowering inside a replicated program) ----

def _pxla():
    from xform.interpreters import pxla  # (a cycle: pxla's pmap rules bind collectives)
    return pxla


def _mesh():
    return _pxla().lowering_axes()


def _device_groups(names, axis_index_groups=None):
    """Replica groups for a collective over ``names`` of the current mesh: the devices
    that differ only in those axes (ordered by the linear index over ``names``),
    split further by ``axis_index_groups``."""
    mesh = _mesh()
    sizes = dict(mesh)
    order = [n for n, _ in mesh]
    missing = [n for n in names if n not in sizes]
    if missing:
        raise NameError(f"unbound axis name: {missing[0]} (mesh axes: {order})")
    strides, s = {}, 1
    for n, size in reversed(mesh):
        strides[n] = s
        s *= size
    others = [n for n in order if n not in names]
    groups = []
    for other in itertools.product(*[range(sizes[n]) for n in others]):
        base = sum(i * strides[n] for i, n in zip(other, others))
        members = [base + sum(i * strides[n] for i, n in zip(idx, names))
                   for idx in itertools.product(*[range(sizes[n]) for n in names])]
        if axis_index_groups is None:
            groups.append(members)
        else:
            groups.extend([members[i] for i in g] for g in axis_index_groups)
    return groups


def _groups_attr(groups):
    return ir.DenseIntElementsAttr.get(np.asarray(groups, np.int64))


def _all_reduce_lowering(op, reduce_fn=None):
    def rule(ctx, x, *, axis_name, axis_index_groups):
        aval = ctx.avals_in[0]
        if reduce_fn is not None and aval.dtype in dtypes.complex_dtypes:
            return mlir.lower_fun(_gather_reduce(reduce_fn, axis_name, axis_index_groups),
                                  multiple_results=False)(ctx, x)
        groups = _device_groups(axis_name, axis_index_groups)
        result = ctx.module_ctx.partitioned(
            hlo.AllReduceOp([mlir.aval_to_ir_type(aval)], [x], _groups_attr(groups)))
        scalar = ir.RankedTensorType.get([], mlir.dtype_to_ir_type(aval.dtype))
        block = result.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.return_([op(*block.arguments)])
        return result.results[0]
    return rule


def _gather_reduce(reduce_fn, axis_name, axis_index_groups):
    # NB: XLA's all-reduce has no complex max/min (JAX fails in XLA there): gather the
    # members' values and reduce them, which gives vmap's (lexicographic) answer.
    sizes = dict(_mesh())
    size = (len(axis_index_groups[0]) if axis_index_groups is not None
            else int(np.prod([sizes[n] for n in axis_name])))

    def fun(x):
        g = all_gather_p.bind(x, axis_name=axis_name, axis_index_groups=axis_index_groups,
                              axis_size=size, axis=0, tiled=False)
        return reduce_fn(g, (0,))
    return fun


# ---- psum / pmax / pmin ----

def _reducer_abstract_eval(x, *, axis_name, axis_index_groups):
    return x.update(weak_type=False)


def _make_reducer(name, op, reduce_fn):
    prim = standard_primitive(name, _reducer_abstract_eval)
    mlir.register_lowering(prim, _all_reduce_lowering(
        op, None if name == "psum" else reduce_fn))

    def batch_named(size, name_, vals, dims, *, axis_name, axis_index_groups):
        (x,), (d,) = vals, dims
        rest = tuple(n for n in axis_name if n != name_)
        if axis_index_groups is not None and rest:
            raise NotImplementedError(f"{prim.name} with axis_index_groups over several "
                                      "axes under vmap")
        if d is not_mapped:
            n = size if axis_index_groups is None else len(axis_index_groups[0])
            out = _ew.mul(x, _scalar_like(x, n)) if prim is psum_p else x
            out_d = not_mapped
        else:  # (not weak, as the primitive's result: JAX's jit of vmap)
            if axis_index_groups is None:
                out, out_d = reduce_fn(x, (d,)), not_mapped
            else:  # per group: reduce the group's members, give each member the result
                out, out_d = _grouped_reduce(prim, x, d, size, axis_index_groups), d
            out = _ew.convert_element_type(out, get_aval(out).dtype, False)
        if rest:
            out = prim.bind(out, axis_name=rest, axis_index_groups=None)
        return out, out_d

    def batch_other(vals, dims, **params):
        return prim.bind(*vals, **params), dims[0]

    batching.collective_batchers[prim] = batch_named
    batching.primitive_batchers[prim] = batch_other
    return prim


def _grouped_reduce(prim, x, d, size, groups):
    x = batching.moveaxis(x, d, 0)
    rows = [None] * size
    for g in groups:
        parts = [_slicing.slice_in_dim(x, i, i + 1, axis=0) for i in g]
        acc = parts[0]
        for p in parts[1:]:
            acc = {psum_p: _ew.add, pmax_p: _ew.max, pmin_p: _ew.min}[prim](acc, p)
        for i in g:
            rows[i] = acc
    return batching.moveaxis(_shapes.concatenate(rows, 0), 0, d)


psum_p = _make_reducer("psum", hlo.add, _red.reduce_sum)
pmax_p = _make_reducer("pmax", hlo.maximum, _red.reduce_max)
pmin_p = _make_reducer("pmin", hlo.minimum, _red.reduce_min)

# psum is linear; its transpose sums the cotangents across the axis again (JAX's rule:
# psum = reduce + broadcast, so the transpose is reduce + broadcast too).
ad.deflinear(psum_p, lambda ct, x, *, axis_name, axis_index_groups: [
    psum_p.bind(ct, axis_name=axis_name, axis_index_groups=axis_index_groups)])


def _pminmax_jvp(prim):
    # d max_i x_i = the tangent at the maximizing members, averaged over ties.
    def jvp(primals, tangents, *, axis_name, axis_index_groups):
        (x,), (t,) = primals, tangents
        params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
        out = prim.bind(x, **params)
        if type(t) is ad.Zero:
            return out, ad.Zero(get_aval(out).to_tangent_aval())
        hit = _ew.convert_element_type(_ew.eq(x, out), get_aval(t).dtype)
        sum_p = _sum_prim()
        num = sum_p.bind(_ew.mul(t, hit), **params)
        return out, _ew.div(num, sum_p.bind(hit, **params))
    ad.primitive_jvps[prim] = jvp


_pminmax_jvp(pmax_p)
_pminmax_jvp(pmin_p)


def _sum_prim():
    """The sum's primitive: ``psum_invariant`` inside ``shard_map(check_vma=True)``."""
    if _trace._context.vma is None:
        return psum_p
    from xform.lax.vma import psum_invariant_p  # (a cycle: vma builds on this module)
    return psum_invariant_p


def _reduce(prim, x, axis_name, axis_index_groups):
    names, groups = _names(axis_name), _groups(axis_index_groups)
    _bound_size(names, groups)
    return tree_util.tree_map(
        lambda v: prim.bind(v, axis_name=names, axis_index_groups=groups), x)


def _psum(x, axis_name, axis_index_groups):
    # As JAX: bools are counted (int32); values that are not tracers (constants the
    # same on every member) are multiplied by the axis size without a collective.
    leaves, tree = tree_util.tree_flatten(x)
    leaves = [_ew.convert_element_type(v, np.int32) if get_aval(v).dtype == np.bool_
              else v for v in leaves]
    if _trace._context.vma is not None:  # inside shard_map(check_vma=True)
        from xform.lax.vma import psum_varying  # (a cycle, as in _sum_prim)
        return psum_varying(tree_util.tree_unflatten(tree, leaves), axis_name,
                            axis_index_groups)
    if not any(isinstance(v, Tracer) for v in leaves):
        n = _bound_size(_names(axis_name), _groups(axis_index_groups))
        leaves = [_scalar_like(v, v) for v in leaves]   # (Python scalars: weak Arrays)
        return tree_util.tree_unflatten(
            tree, [_ew.mul(v, _scalar_like(v, n)) for v in leaves])
    return _reduce(psum_p, tree_util.tree_unflatten(tree, leaves), axis_name,
                   axis_index_groups)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum ``x`` (a pytree) over the named mapped axis (all members get the sum).

    Args:
      x: array or pytree of arrays.
      axis_name: a name bound by pmap, ``vmap(axis_name=)`` or shard_map, or a tuple.
      axis_index_groups: optional list of index groups, each reduced separately.

    Returns:
      The sum over the axis, with ``x``'s shape and dtype; bools are counted (int32), as
      in JAX. A value that is not traced (a constant) is multiplied by the axis size.

    Raises:
      NameError: if ``axis_name`` is not bound.

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.psum(x, 'i'), axis_name='i')(jnp.arange(3.0))
    Array([3., 3., 3.], dtype=float32)
    >>> xform.vmap(lambda x: xform.lax.psum(x > 0, 'i'), axis_name='i')(jnp.arange(3.0))
    Array([2, 2, 2], dtype=int32)
    """
    return _psum(x, axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    """Maximum of ``x`` over the named axis (see :func:`psum`); the dtype is kept (for
    bools: any). Complex operands compare lexicographically (real part, then imaginary).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pmax(x, 'i'), axis_name='i')(jnp.arange(3.0))
    Array([2., 2., 2.], dtype=float32)
    """
    return _reduce(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Minimum of ``x`` over the named axis (see :func:`psum`); the dtype is kept (for
    bools: all). Complex operands compare lexicographically (real part, then imaginary).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pmin(x, 'i'), axis_name='i')(jnp.arange(3.0))
    Array([0., 0., 0.], dtype=float32)
    """
    return _reduce(pmin_p, x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of ``x`` over the named axis: ``psum(x) / axis size``, a true division as
    JAX's: bools and integers give floats (``to_inexact_dtype``: float32 up to 32 bits).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pmean(x, 'i'), axis_name='i')(jnp.arange(3.0))
    Array([1., 1., 1.], dtype=float32)
    >>> xform.vmap(lambda x: xform.lax.pmean(x > 0, 'i'), axis_name='i')(jnp.arange(4.0))
    Array([0.75, 0.75, 0.75, 0.75], dtype=float32)
    """
    n = _bound_size(_names(axis_name), _groups(axis_index_groups))
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)

    def mean(v):  # (the weak type of the sum is kept, as JAX's ``v / n``)
        aval = get_aval(v)
        v = _ew.convert_element_type(v, dtypes.to_inexact_dtype(aval.dtype), aval.weak_type)
        return _ew.div(v, _scalar_like(v, n))
    return tree_util.tree_map(mean, total)


# ---- axis_index ----

def _axis_index_abstract_eval(*, axis_name):
    return ShapedArray((), np.dtype(np.int32))


def _axis_index_lowering(ctx, *, axis_name):
    return _pxla().fully_manual_scalar(ctx, lambda: _axis_index_hlo(ctx, axis_name))


def _axis_index_hlo(ctx, axis_name):
    mesh = dict(_mesh())
    strides, s = {}, 1
    for n, size in reversed(_mesh()):
        strides[n] = s
        s *= size
    rid = hlo.convert(ir.RankedTensorType.get([], ir.IntegerType.get_signless(32)),
                      hlo.partition_id() if ctx.module_ctx.mesh is not None
                      else hlo.replica_id())  # (a shard_map in an SPMD module: partitions)
    out = None
    for n in axis_name:  # linear index over the named axes, first name major
        idx = hlo.remainder(hlo.divide(rid, mlir.ir_constant(np.int32(strides[n]))),
                            mlir.ir_constant(np.int32(mesh[n])))
        out = idx if out is None else hlo.add(
            hlo.multiply(out, mlir.ir_constant(np.int32(mesh[n]))), idx)
    return out


def _axis_index_batch_named(size, name_, vals, dims, *, axis_name):
    rest = tuple(n for n in axis_name if n != name_)
    idx = _shapes.iota(np.int32, size)
    if rest:  # the named axis is the minor one: outer_index * size + own index
        outer = axis_index_p.bind(axis_name=rest)
        idx = _ew.add(_ew.mul(outer, np.int32(size)), idx)
    return idx, 0


axis_index_p = standard_primitive("axis_index", _axis_index_abstract_eval)
mlir.register_lowering(axis_index_p, _axis_index_lowering)
ad.defnondiff(axis_index_p)
batching.collective_batchers[axis_index_p] = _axis_index_batch_named
batching.primitive_batchers[axis_index_p] = lambda vals, dims, **p: (
    axis_index_p.bind(**p), not_mapped)


def axis_index(axis_name):
    """This member's index along the named axis (int32).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.axis_index('i'), axis_name='i')(jnp.zeros(3))
    Array([0, 1, 2], dtype=int32)
    """
    names = _names(axis_name)
    _bound_size(names)
    return axis_index_p.bind(axis_name=names)


# ---- all_gather ----

def _all_gather_abstract_eval(x, *, axis_name, axis_index_groups, axis_size, axis, tiled):
    shape = list(x.shape)
    if tiled:
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return x.update(shape=tuple(shape))


def _all_gather_lowering(ctx, x, *, axis_name, axis_index_groups, axis_size, axis, tiled):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    groups = _device_groups(axis_name, axis_index_groups)
    if not tiled:  # gather along a new unit axis
        shape = list(aval_in.shape)
        shape.insert(axis, 1)
        x = hlo.reshape(ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(aval_in.dtype)),
                        x)
    op = ctx.module_ctx.partitioned(
        hlo.AllGatherOp([mlir.aval_to_ir_type(aval_out)], [x], axis, _groups_attr(groups)))
    return op.results[0]


def _all_gather_batch_named(size, name_, vals, dims, *, axis_name, axis_index_groups,
                            axis_size, axis, tiled):
    (x,), (d,) = vals, dims
    if axis_index_groups is not None or len(axis_name) > 1:
        raise NotImplementedError("all_gather with axis_index_groups or several axis "
                                  "names under vmap")
    if d is not_mapped:
        x, d = batching.broadcast(x, size, 0), 0
    out = batching.moveaxis(x, d, axis)  # every member gets the whole stack
    if tiled:
        shape = list(get_aval(out).shape)
        shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
        out = _shapes.reshape(out, tuple(shape))
    return out, not_mapped


def _all_gather_batch_other(vals, dims, *, axis, **params):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return all_gather_p.bind(x, axis=axis + 1, **params), 0


all_gather_p = standard_primitive("all_gather", _all_gather_abstract_eval)
mlir.register_lowering(all_gather_p, _all_gather_lowering)
batching.collective_batchers[all_gather_p] = _all_gather_batch_named
batching.primitive_batchers[all_gather_p] = _all_gather_batch_other
ad.deflinear(all_gather_p, lambda ct, x, *, axis_name, axis_index_groups, axis_size, axis,
             tiled: [reduce_scatter_p.bind(ct, axis_name=axis_name,
                                           axis_index_groups=axis_index_groups,
                                           axis_size=axis_size, scatter_dimension=axis,
                                           tiled=tiled)])


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False,
               to="varying"):
    """Gather ``x`` from every member of the named axis, stacked along ``axis`` (or
    concatenated along it with ``tiled=True``). Inside ``shard_map`` the result varies
    over the axis (its transpose is ``psum_scatter``); ``to='invarying'`` makes it
    invariant (transpose: each member's own slice).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.all_gather(x, 'i'), axis_name='i')(jnp.arange(2.0))
    Array([[0., 1.],
           [0., 1.]], dtype=float32)
    """
    names, groups = _names(axis_name), _groups(axis_index_groups)
    size = _bound_size(names, groups)
    prim = all_gather_p
    if to != "varying":
        from xform.lax.vma import all_gather_prim  # (a cycle, as in _sum_prim)
        prim = all_gather_prim(to, groups)

    def one(v):
        aval = get_aval(v)
        ndim = aval.ndim + (0 if tiled else 1)
        if not -ndim <= axis < max(ndim, 1):
            raise ValueError(f"all_gather axis {axis} is out of bounds for an operand of "
                             f"shape {aval.shape} (tiled={tiled})")
        return prim.bind(v, axis_name=names, axis_index_groups=groups,
                         axis_size=size, axis=axis % max(ndim, 1), tiled=tiled)
    return tree_util.tree_map(one, x)


# ---- psum_scatter (reduce_scatter) ----

def _reduce_scatter_abstract_eval(x, *, axis_name, axis_index_groups, axis_size,
                                  scatter_dimension, tiled):
    shape = list(x.shape)
    if tiled:
        if shape[scatter_dimension] % axis_size:
            raise ValueError(f"psum_scatter: dimension {scatter_dimension} of size "
                             f"{shape[scatter_dimension]} is not divisible by the axis size "
                             f"{axis_size}")
        shape[scatter_dimension] //= axis_size
    else:
        if shape[scatter_dimension] != axis_size:
            raise ValueError(f"psum_scatter: dimension {scatter_dimension} has size "
                             f"{shape[scatter_dimension]}, which must equal the axis size "
                             f"{axis_size} (or use tiled=True)")
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape))


def _reduce_scatter_lowering(ctx, x, *, axis_name, axis_index_groups, axis_size,
                             scatter_dimension, tiled):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    groups = _device_groups(axis_name, axis_index_groups)
    shape = list(aval_in.shape)
    shape[scatter_dimension] //= axis_size
    elt = mlir.dtype_to_ir_type(aval_in.dtype)
    op = ctx.module_ctx.partitioned(hlo.ReduceScatterOp(
        ir.RankedTensorType.get(shape, elt), x, scatter_dimension, _groups_attr(groups)))
    scalar = ir.RankedTensorType.get([], elt)
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([hlo.add(*block.arguments)])
    out = op.results[0]
    if not tiled:
        out = hlo.reshape(mlir.aval_to_ir_type(aval_out), out)
    return out


def _reduce_scatter_batch_named(size, name_, vals, dims, *, axis_name, axis_index_groups,
                                axis_size, scatter_dimension, tiled):
    (x,), (d,) = vals, dims
    if axis_index_groups is not None or len(axis_name) > 1:
        raise NotImplementedError("psum_scatter with axis_index_groups or several axis "
                                  "names under vmap")
    if d is not_mapped:
        total = _ew.mul(x, _shapes.full((), size, get_aval(x).dtype))
    else:
        total = _red.reduce_sum(x, (d,))
    if tiled:  # split the scattered dimension into (members, chunk)
        shape = list(get_aval(total).shape)
        shape[scatter_dimension:scatter_dimension + 1] = [size, shape[scatter_dimension]
                                                          // size]
        total = _shapes.reshape(total, tuple(shape))
    return total, scatter_dimension


def _reduce_scatter_batch_other(vals, dims, *, scatter_dimension, **params):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension + 1, **params), 0


reduce_scatter_p = standard_primitive("reduce_scatter", _reduce_scatter_abstract_eval)
mlir.register_lowering(reduce_scatter_p, _reduce_scatter_lowering)
batching.collective_batchers[reduce_scatter_p] = _reduce_scatter_batch_named
batching.primitive_batchers[reduce_scatter_p] = _reduce_scatter_batch_other
ad.deflinear(reduce_scatter_p, lambda ct, x, *, axis_name, axis_index_groups, axis_size,
             scatter_dimension, tiled: [all_gather_p.bind(
                 ct, axis_name=axis_name, axis_index_groups=axis_index_groups,
                 axis_size=axis_size, axis=scatter_dimension, tiled=tiled)])


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None,
                 tiled=False):
    """Sum ``x`` over the named axis and give member ``i`` the ``i``-th slice of the sum
    along ``scatter_dimension`` (a block of it with ``tiled=True``).

    >>> import xform, xform.numpy as jnp
    >>> f = lambda x: xform.lax.psum_scatter(x, 'i')
    >>> xform.vmap(f, axis_name='i')(jnp.ones((2, 2)))
    Array([2., 2.], dtype=float32)

    Raises:
      TypeError: for a bool operand (as JAX: the sum is an ``add``, undefined on bools).
    """
    names, groups = _names(axis_name), _groups(axis_index_groups)
    size = _bound_size(names, groups)

    def one(v):
        aval = get_aval(v)
        if aval.dtype == np.bool_:
            raise TypeError(f"psum_scatter does not accept dtype bool (operand of shape "
                            f"{aval.shape}); convert it to a numeric dtype first")
        return reduce_scatter_p.bind(
            v, axis_name=names, axis_index_groups=groups, axis_size=size,
            scatter_dimension=scatter_dimension % max(aval.ndim, 1), tiled=tiled)
    return tree_util.tree_map(one, x)
