"""Collectives whose lowerings this jaxlib's XLA:CPU lacks, as in JAX 0.10.2:
``ragged_all_to_all`` (a custom call XLA:CPU refuses when compiling), ``pbroadcast``
(``collective_broadcast``, lowered on GPU only) and ``psend``/``precv`` (``send``/``recv``
inside shard_map, GPU only). On CPU each fails as JAX's does: ragged_all_to_all with
XLA's ``JaxRuntimeError``, the others with ``NotImplementedError`` when lowered.

NB where JAX's rule is broken, xform's differs: ``pbroadcast`` under ``vmap`` of its axis
gives the source's value (JAX's ``take`` of a list raises TypeError); ``psend``/``precv``
there raise NotImplementedError (JAX's batcher returns an array for a token); under
``check_vma`` precv's and ragged_all_to_all's results vary over their axes (JAX types
them as ``out_shape``/``output``, though members receive different data).
"""
import numpy as np

from xform.core import dtypes
from xform.core import tree_util
from xform.core.avals import ShapedArray
from xform.core.tokens import abstract_token, is_token
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.batching import not_mapped
from xform.interpreters.ffi import GPU_PLATFORMS
from xform.lax import bitwise as _bitwise
from xform.lax import dynamic_slicing as _slicing
from xform.lax import elementwise as _ew
from xform.lax import reductions as _red
from xform.lax import shapes as _shapes
from xform.lax import vma as _vma
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.collectives import (_bound_size, _device_groups, _groups, _groups_attr,
                                   _names, axis_index, psum)
from xform.lax.collectives_permute import all_to_all_p

ir, hlo = mlir.ir, mlir.hlo
_CHANNEL = "#stablehlo.channel_handle<handle = 1, type = 1>"  # JAX's collective channel


# ---- ragged_all_to_all ----

_INDEX_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _ragged_abstract_eval(operand, output, *index_avals, axis_name, axis_index_groups):
    for name, a in zip(_INDEX_ARGS, index_avals):   # JAX's checks and wording
        if not dtypes.issubdtype(a.dtype, np.integer):
            raise ValueError(f"ragged_all_to_all {name} must be integer type.")
    for name, a in zip(_INDEX_ARGS, index_avals):
        if a.ndim != 1 or a.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {name} must be rank 1 with positive "
                             f"dimension size, but got shape {a.shape}")
    # NB checked here, where JAX leaves them to XLA (a compile error on GPU/TPU)
    shapes = {name: a.shape for name, a in zip(_INDEX_ARGS, index_avals)}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"ragged_all_to_all {', '.join(_INDEX_ARGS)} must have the same "
                         f"shape, got {shapes}")
    if operand.ndim < 1 or operand.shape[1:] != output.shape[1:] \
            or operand.dtype != output.dtype:
        raise ValueError(f"ragged_all_to_all operand and output must have the same dtype "
                         f"and the same shape but for the leading axis, got "
                         f"{operand.str_short()} and {output.str_short()}")
    return output.update(weak_type=False)


def _ragged_lowering(ctx, *args, axis_name, axis_index_groups):
    groups = _device_groups(axis_name, axis_index_groups)
    attrs = {"replica_groups": _groups_attr(groups)}
    # NB a channel in replicated programs (pmap) too: XLA crashes converting the call
    # without one there (JAX's pmap is SPMD, its lowering always has one)
    attrs["channel_id"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
    return hlo.CustomCallOp(
        [args[1].type], list(args), call_target_name=ir.StringAttr.get("ragged_all_to_all"),
        backend_config=ir.DictAttr.get(attrs),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4)).results[0]


def _ragged_jvp(primals, tangents, **params):
    operand, output, *index = primals
    t_operand, t_output = tangents[:2]
    out = ragged_all_to_all_p.bind(operand, output, *index, **params)
    if type(t_operand) is ad.Zero and type(t_output) is ad.Zero:
        return out, ad.Zero(get_aval(out).to_tangent_aval())
    t_out = ragged_all_to_all_p.bind(ad.instantiate_zeros(t_operand),
                                     ad.instantiate_zeros(t_output), *index, **params)
    return out, t_out


def _ragged_transpose(ct, operand, output, input_offsets, send_sizes, output_offsets,
                      recv_sizes, *, axis_name, axis_index_groups):
    # The operand's cotangent is the reverse exchange of ct's received slices; the
    # output's is ct where nothing was received (the rest was overwritten).
    if type(ct) is ad.Zero:
        return [ad.Zero(a.aval) if ad.is_undefined_primal(a) else None
                for a in (operand, output)] + [None] * 4
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
    size = _bound_size(axis_name, axis_index_groups)
    swap = lambda v: all_to_all_p.bind(v, split_axis=0, concat_axis=0, axis_size=size,
                                       **params)
    recv_offsets = swap(output_offsets)   # where this member's received slices start
    cts = [None, None]
    if ad.is_undefined_primal(operand):
        zero = _shapes.full(operand.aval.shape, 0, operand.aval.dtype)
        cts[0] = ragged_all_to_all_p.bind(ct, zero, recv_offsets, recv_sizes,
                                          swap(input_offsets), send_sizes, **params)
    if ad.is_undefined_primal(output):
        ct_aval, k_aval = get_aval(ct), get_aval(recv_offsets)
        grid = (ct_aval.shape[0], k_aval.shape[0])   # (output row, received slice)
        pos = _shapes.broadcasted_iota(k_aval.dtype, grid, 0)
        ends = _ew.add(recv_offsets, _ew.convert_element_type(recv_sizes, k_aval.dtype))
        hit = _bitwise.bitwise_and(
            _ew.ge(pos, _shapes.broadcast_in_dim(recv_offsets, grid, (1,))),
            _ew.lt(pos, _shapes.broadcast_in_dim(ends, grid, (1,))))
        hit = _red.reduce_or(hit, (1,))
        hit = _shapes.broadcast_in_dim(hit, ct_aval.shape, (0,))
        cts[1] = _ew.select(hit, _shapes.full(ct_aval.shape, 0, ct_aval.dtype), ct)
    return cts + [None] * 4


def _ragged_batch_named(size, name_, vals, dims, **params):
    raise NotImplementedError("ragged_all_to_all over an axis bound by vmap is not "
                              "implemented (as in JAX); use it under shard_map or pmap")


def _ragged_batch_other(vals, dims, *, axis_name, axis_index_groups):
    # Several exchanges at once: stack the batch into the leading axis, each member's
    # slices offset by its block (JAX's rule).
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all with axis_index_groups under vmap")
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)

    def front(v, d):
        return batching.broadcast(v, size, 0) if d is not_mapped else \
            batching.moveaxis(v, d, 0)
    data = [front(v, d) for v, d in zip(vals[:2], dims[:2])]
    index = [batching.moveaxis(front(v, d), 0, 1) for v, d in zip(vals[2:], dims[2:])]
    for i, block in ((0, get_aval(data[0]).shape[1]), (2, get_aval(data[1]).shape[1])):
        aval = get_aval(index[i])   # (K, batch): batch member b's block starts at b * block
        step = _shapes.broadcasted_iota(aval.dtype, aval.shape, 1)
        index[i] = _ew.add(index[i], _ew.mul(step, _shapes.full(aval.shape, block,
                                                                aval.dtype)))

    def merge(v):
        shape = get_aval(v).shape
        return _shapes.reshape(v, (shape[0] * shape[1],) + shape[2:])
    out = ragged_all_to_all_p.bind(*map(merge, data + index), axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    return _shapes.reshape(out, get_aval(data[1]).shape), 0


ragged_all_to_all_p = standard_primitive("ragged_all_to_all", _ragged_abstract_eval)
_vma.def_collective(ragged_all_to_all_p, lambda avals, p: frozenset().union(
    *(a.vma for a in avals)))
mlir.register_lowering(ragged_all_to_all_p, _ragged_lowering)
ad.primitive_jvps[ragged_all_to_all_p] = _ragged_jvp
ad.primitive_transposes[ragged_all_to_all_p] = _ragged_transpose
ad.defnonlinear_operands(ragged_all_to_all_p, slice(2, 6))
batching.collective_batchers[ragged_all_to_all_p] = _ragged_batch_named
batching.primitive_batchers[ragged_all_to_all_p] = _ragged_batch_other


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets,
                      recv_sizes, *, axis_name, axis_index_groups=None):
    """Ragged :func:`all_to_all`: member ``i`` sends ``operand[input_offsets[k]:
    input_offsets[k] + send_sizes[k]]`` to member ``k // (K / axis size)``, which writes
    it into its copy of ``output`` at ``output_offsets[k]`` (offsets on the receiver);
    ``recv_sizes`` are the sizes this member receives, in the senders' order. Offsets
    and sizes are integer arrays of one shape ``(K,)``, K a multiple of the axis size.

    NB XLA:CPU cannot compile it (a ``JaxRuntimeError``, as JAX's); it runs on GPU/TPU.

    Raises:
      ValueError: for offsets/sizes that are not integer vectors of one shape, or an
        ``output`` whose dtype or trailing shape differs from ``operand``'s.
      NotImplementedError: under ``vmap`` of ``axis_name`` (as JAX).
    """
    names, groups = _names(axis_name), _groups(axis_index_groups)
    _bound_size(names, groups)
    return ragged_all_to_all_p.bind(operand, output, input_offsets, send_sizes,
                                    output_offsets, recv_sizes, axis_name=names,
                                    axis_index_groups=groups)


# ---- pbroadcast (collective_broadcast) ----

def _pbroadcast_lowering(ctx, x, *, axis_name, source):
    platform = ctx.module_ctx.platform
    if platform not in GPU_PLATFORMS:   # JAX registers it for GPU only
        raise NotImplementedError(f"MLIR translation rule for primitive 'pbroadcast' not "
                                  f"found for platform {platform}")
    groups = [[g[source]] + g[:source] + g[source + 1:] for g in _device_groups(axis_name)]
    op = hlo.CollectiveBroadcastOp(x, _groups_attr(groups))
    return ctx.module_ctx.partitioned(op, global_ids=False).result


def _pbroadcast_batch_named(size, name_, vals, dims, *, axis_name, source):
    (x,), (d,) = vals, dims
    if len(axis_name) > 1:
        raise NotImplementedError("pbroadcast batcher only supports a single axis")
    if d is not_mapped:
        return x, not_mapped
    return _shapes.squeeze(_slicing.slice_in_dim(x, source, source + 1, axis=d), (d,)), \
        not_mapped


def _pbroadcast_transpose(ct, x, *, axis_name, source):
    # every member's value is the source's: its cotangent is the sum of all of them
    is_source = _ew.eq(axis_index(axis_name), np.int32(source))
    total = psum(ct, axis_name)
    return [_ew.select(_shapes.broadcast_in_dim(is_source, get_aval(total).shape, ()),
                       total, _shapes.full(get_aval(total).shape, 0, get_aval(total).dtype))]


pbroadcast_p = standard_primitive("pbroadcast", lambda x, **_: x)
_vma.def_rule(pbroadcast_p, lambda avals, p: avals[0].vma)   # (JAX's type)
mlir.register_lowering(pbroadcast_p, _pbroadcast_lowering)
ad.deflinear(pbroadcast_p, _pbroadcast_transpose)
batching.collective_batchers[pbroadcast_p] = _pbroadcast_batch_named
batching.primitive_batchers[pbroadcast_p] = lambda vals, dims, **p: (
    pbroadcast_p.bind(vals[0], **p), dims[0])


def pbroadcast(x, axis_name, source):
    """Every member of ``axis_name`` gets member ``source``'s ``x`` (a pytree): XLA's
    ``collective_broadcast``, lowered on GPU only (as JAX's).

    Raises:
      ValueError: if ``source`` is not an index of the axis, or (inside
        ``shard_map(check_vma=True)``) ``x`` does not vary over ``axis_name`` (as JAX).
      NotImplementedError: when lowered for CPU (as JAX).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x: xform.lax.pbroadcast(x, 'i', 1), axis_name='i')(
    ...     jnp.arange(3.0))
    Array([1., 1., 1.], dtype=float32)
    """
    names = _names(axis_name)
    size = _bound_size(names)
    if not 0 <= int(source) < size:
        raise ValueError(f"pbroadcast source {source} is out of range for axis "
                         f"{names if len(names) > 1 else names[0]} of size {size}")

    def one(v):
        vma = getattr(get_aval(v), "vma", frozenset())
        if _vma.active() and not set(names) <= vma:   # JAX's check (no implicit pvary)
            raise ValueError(f"Collective pbroadcast must be applied to a device-varying "
                             f"type, but got {vma} for collective acting over axis name "
                             f"{names}; pass check_vma=False to shard_map to broadcast an "
                             "invariant value")
        return pbroadcast_p.bind(v, axis_name=names, source=int(source))
    return tree_util.tree_map(one, x)


# ---- psend / precv (send / recv) ----

def _check_perm(name, names, perm):
    size = _bound_size(names)
    perm = tuple((int(s), int(t)) for s, t in perm)
    srcs, tgts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(tgts)) != len(tgts):
        raise ValueError(f"{name} sources and destinations must be unique, got {perm}.")
    if any(not 0 <= i < size for i in srcs + tgts):
        raise ValueError(f"{name} perm {perm} has indices out of range for axis "
                         f"{names if len(names) > 1 else names[0]} of size {size}")
    return perm


def _p2p_lowering(name, make):
    def rule(ctx, x, *, axis_name, perm, **params):
        mod = ctx.module_ctx
        if mod.platform not in GPU_PLATFORMS:
            raise NotImplementedError(f"{name} is currently only implemented on GPU")
        if mod.mesh is None:
            raise NotImplementedError(f"{name} currently only supports manual sharding "
                                      "(shard_map), not pmap")
        pairs = [[g[s], g[t]] for g in _device_groups(axis_name) for s, t in perm]
        pairs = ir.DenseIntElementsAttr.get(np.asarray(pairs, np.int64).reshape(-1, 2))
        return make(ctx, x, ir.Attribute.parse(_CHANNEL), pairs, **params)
    return rule


def _p2p_batch_named(name):
    def rule(size, name_, vals, dims, **params):
        raise NotImplementedError(f"{name} under vmap of its axis {name_!r}: a token "
                                  "has no batch dimension; use ppermute")
    return rule


def _no_jvp(name):
    def rule(primals, tangents, **params):
        raise NotImplementedError(f"Differentiation rule for '{name}' not implemented")
    return rule


def _psend_batch(vals, dims, **params):
    raise NotImplementedError("psend of an operand batched by vmap: the matching precv's "
                              "out_shape cannot see the batch; send outside the vmap")


psend_p = standard_primitive("psend", lambda x, **_: abstract_token)
mlir.register_lowering(psend_p, _p2p_lowering("psend", lambda ctx, x, channel, pairs: (
    hlo.SendOp([x], hlo.create_token(), channel, source_target_pairs=pairs).result)))
precv_p = standard_primitive("precv", lambda token, *, out_shape, **_: out_shape)
allow_extended(precv_p)   # its operand is a token
mlir.register_lowering(precv_p, _p2p_lowering("precv", lambda ctx, token, channel, pairs, *,
                                              out_shape: hlo.RecvOp(
    [mlir.aval_to_ir_type(out_shape), token.type], token, channel,
    source_target_pairs=pairs).results[0]))
batching.primitive_batchers[psend_p] = _psend_batch
batching.primitive_batchers[precv_p] = lambda vals, dims, **p: (precv_p.bind(*vals, **p),
                                                                 not_mapped)
_vma.def_collective(psend_p, lambda avals, p: avals[0].vma)
_vma.def_rule(precv_p, lambda avals, p: avals[0].vma | frozenset(p["axis_name"]))
for _p in (psend_p, precv_p):
    pe.effectful_primitives.add(_p)   # a send/recv whose result is unused still runs
    ad.primitive_jvps[_p] = _no_jvp(_p.name)   # (JAX has none)
    batching.collective_batchers[_p] = _p2p_batch_named(_p.name)


def psend(x, axis_name, perm):
    """Send member ``s``'s ``x`` (a pytree) to member ``t`` for each ``(s, t)`` in
    ``perm``: XLA's ``send``, inside shard_map on GPU only (as JAX's). Returns a token
    per leaf, for :func:`precv` or ``optimization_barrier`` to order on.

    Raises:
      ValueError: if a source or destination repeats or is out of range.
      NotImplementedError: when lowered for CPU or under pmap (as JAX).
    """
    names = _names(axis_name)
    perm = _check_perm("psend", names, perm)
    return tree_util.tree_map(lambda v: psend_p.bind(v, axis_name=names, perm=perm), x)


def precv(token, out_shape, axis_name, perm):
    """Receive an array shaped like ``out_shape`` (a ``ShapeDtypeStruct``) sent by
    :func:`psend` with the same ``perm``, after ``token``: XLA's ``recv``.

    Raises:
      TypeError: if ``token`` is not a token.
      ValueError: if a source or destination of ``perm`` repeats or is out of range.
      NotImplementedError: when lowered for CPU or under pmap (as JAX).
    """
    names = _names(axis_name)
    perm = _check_perm("precv", names, perm)
    if not is_token(get_aval(token)):
        raise TypeError(f"precv token must be a token (from psend or lax.create_token), "
                        f"got {get_aval(token).str_short()}")
    aval = ShapedArray(tuple(out_shape.shape), np.dtype(out_shape.dtype))
    return precv_p.bind(token, out_shape=aval, axis_name=names, perm=perm)
