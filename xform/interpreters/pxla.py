"""Replicated execution over a mesh of devices: the ``xla_pmap`` primitive.

``xla_pmap`` runs a per-device jaxpr (``jaxpr``) on every device of a mesh whose axes
are ``axes = ((name, size), ...)``. Per operand, ``in_axes`` gives for each mesh axis
the operand dimension that axis indexes (removed from the body's view) or None
(replicated); ``out_axes`` the same for results. pmap is a 1-axis mesh; shard_map
reshapes blocks into such axes. The eager impl compiles the body once as a
replicated StableHLO program (``num_replicas`` = mesh size); collectives inside name
their replica groups from ``lowering_axes()``. Every interpreter has a rule (JVP,
partial evaluation, transpose, batching). A jitted program holding it is compiled
for the mesh (``mesh_jit``: jit-level code on every device, the body per device
on its block); otherwise, inside a one-device program, it lowers as nested vmaps
with the same axis names, which gives the same values on one device.
"""
import contextlib
import math
import threading

import numpy as np

from xform import backend
from xform.core import dtypes, transfer
from xform.core.array import Array, ShardedArray
from xform.core.mesh import Mesh
from xform.core.sharding import UNCONSTRAINED, MeshLayout
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from xform.core.trace import Primitive, Tracer, get_aval, set_current_trace, vma_mode
from xform.interpreters import ad, batching, mlir, placement
from xform.interpreters import partial_eval as pe
from xform.lax.collectives import _sum_prim, all_gather_p, axis_index_p
from xform.lax.dynamic_slicing import dynamic_index_in_dim
from xform.lax.elementwise import div
from xform.lax.shapes import full, reshape


# ---- the mesh of the replicated program being lowered ----

class _Lowering(threading.local):
    def __init__(self):
        self.axes = ()
        self.auto = ()  # mesh axes a partially manual shard_map being lowered left to XLA


_lowering = _Lowering()


@contextlib.contextmanager
def lowering_axes_context(axes, auto=()):
    prev = _lowering.axes, _lowering.auto
    _lowering.axes, _lowering.auto = tuple(axes), tuple(auto)
    try:
        yield
    finally:
        _lowering.axes, _lowering.auto = prev


def fully_manual_scalar(ctx, build):
    """``build()`` (an i32 scalar reading ``partition_id``) lowered where every mesh axis
    is manual: inside a partially manual shard_map, JAX's nested manual computation
    over the automatic axes (XLA rejects ``partition_id`` where some are automatic)."""
    if not _lowering.auto:
        return build()
    i32 = mlir.ir.RankedTensorType.get([], mlir.ir.IntegerType.get_signless(32))
    op = mlir.ir.Operation.create(
        "sdy.manual_computation", results=[i32], operands=[], regions=1, attributes={
            "in_shardings": mlir.ir.Attribute.parse("#sdy.sharding_per_value<[]>"),
            "out_shardings": mlir.ir.Attribute.parse(
                f"#sdy.sharding_per_value<[<{mlir.sdy_sharding_text([], 0)}>]>"),
            "manual_axes": mlir.ir.Attribute.parse(
                "#sdy<manual_axes{" + ", ".join(f'"{n}"' for n in _lowering.auto) + "}>")})
    with mlir.ir.InsertionPoint(op.regions[0].blocks.append()), \
            lowering_axes_context(_lowering.axes):
        mlir.ir.Operation.create("sdy.return", operands=[build()])
    return op.results[0]


def lowering_axes():
    """``((name, size), ...)`` of the replicated program being lowered (row-major)."""
    return _lowering.axes


def auto_axes():
    """The mesh axes the partially manual shard_map being lowered leaves to XLA."""
    return _lowering.auto


# ---- avals of mapped values ----

def unmapped_aval(aval, dims, sizes):
    """The full aval from the per-device one: insert each mapped mesh axis at its dim."""
    shape = list(aval.shape)
    for d, size in sorted((d, s) for d, s in zip(dims, sizes) if d is not None):
        shape.insert(d, size)
    return aval.update(shape=tuple(shape), vma=())


def mapped_aval(aval, dims):
    """The per-device aval: the full one without the mapped dims."""
    drop = {d for d in dims if d is not None}
    return aval.update(shape=tuple(s for i, s in enumerate(aval.shape) if i not in drop))


def tiled_spec(shape, dims, full_shape):
    """If reshaping ``shape`` (mesh axis k indexing its dim ``dims[k]``) to
    ``full_shape`` merges each run of mapped dims into the dim after it (how shard_map
    assembles its outputs), the spec of the result's tiling: per full dim, the mesh
    axes splitting it, major first. Else None."""
    axis_at = {d: k for k, d in enumerate(dims) if d is not None}
    spec, pending, j = [], [], 0
    for i, s in enumerate(shape):
        if i in axis_at:
            pending.append(axis_at[i])
            continue
        n = math.prod(shape[dims[a]] for a in pending)
        if j >= len(full_shape) or full_shape[j] != s * n:
            return None
        spec.append(tuple(pending))
        pending, j = [], j + 1
    return tuple(spec) if not pending and j == len(full_shape) else None


def _mesh_devices(axes, devices):
    n = math.prod(s for _, s in axes)
    available = backend.devices()
    if devices is not None:
        devices = tuple(devices)
        if len(devices) != n:
            raise ValueError(f"pmap got {len(devices)} devices but the mapped axis has "
                             f"size {n}; the sizes must match")
        return devices
    if n > len(available):
        raise ValueError(f"compiling a computation that requires {n} devices (the mapped "
                         f"axis size), but only {len(available)} devices are available")
    return tuple(available[:n])


# ---- the primitive ----

xla_pmap_p = Primitive("xla_pmap")
xla_pmap_p.multiple_results = True


def _vma_mode(check_vma, axes):
    """While retracing a shard_map(check_vma=True) body: track its varying axes."""
    return vma_mode(tuple(n for n, _ in axes) if check_vma else None)


def _abstract_eval(*avals, jaxpr, axes, in_axes, out_axes, devices, name, check_vma=False):
    sizes = [s for _, s in axes]
    return [unmapped_aval(a, d, sizes) for a, d in zip(jaxpr.out_avals, out_axes)]


xla_pmap_p.def_abstract_eval(_abstract_eval)


class _Compiled:
    __slots__ = ("exe", "const_bufs", "out_avals", "layouts", "devices", "local")


_cache = {}


def _compile(jaxpr, axes, devices, out_axes, name, donated=None):
    key = (id(jaxpr), axes, devices, out_axes, donated)
    hit = _cache.get(key)
    if hit is not None and hit[0] is jaxpr:
        return hit[1]
    callbacks = []
    with lowering_axes_context(axes):  # donated inputs alias same-typed outputs
        text = mlir.lower_jaxpr_to_module(jaxpr, hoist_consts=True, host_callbacks=callbacks,
                                          donated=donated)
    c = _Compiled()
    c.exe = backend.compile_replicated(text, devices, callbacks)
    c.devices = devices
    c.const_bufs = [[backend.device_put(transfer.canonical_numpy(np.asarray(v)), d)
                     for d in _local(devices)] for v in jaxpr.consts]
    sizes = tuple(s for _, s in axes)
    names = tuple(n for n, _ in axes)
    local = _local(devices)
    if len(local) != len(devices):  # multi-process: this process holds its devices' part
        if len(axes) != 1:
            raise NotImplementedError("shard_map across processes is not supported; use "
                                      "pmap over the local devices")
        devices, sizes = local, (len(local),)
    c.out_avals = [unmapped_aval(a, d, sizes) for a, d in zip(jaxpr.out_avals, out_axes)]
    c.layouts = [MeshLayout(devices, sizes, d, names) for d in out_axes]
    c.local = devices
    if len(_cache) > 256:
        _cache.clear()
    _cache[key] = (jaxpr, c)
    return c


class _Deleted(Exception):
    pass


def _shard_arg(x, layout, devices):
    """One buffer per device for operand ``x`` laid out as ``layout``. Raises
    ``_Deleted`` for a donated (deleted) operand: executing it would crash jaxlib."""
    if type(x) is ShardedArray and x.layout == layout:
        if any(backend.is_deleted(b) for b in x._shards):
            raise _Deleted
        return x._shards  # already laid out like this: no transfer
    if (all(d is None for d in layout.dims) if type(layout) is MeshLayout
            else not any(layout.spec)):  # replicated
        if isinstance(x, Array):  # (a ShardedArray: its one-device buffer)
            buf = transfer.to_buffer(x)
            if backend.is_deleted(buf):
                raise _Deleted
            return [buf if backend.buffer_device(buf) == dev
                    else backend.copy_to_device(buf, dev) for dev in devices]
        host = transfer.canonical_numpy(np.asarray(x))
        return [backend.device_put(host, dev) for dev in devices]
    host = (x.physical_value() if isinstance(x, Array)
            else transfer.canonical_numpy(np.asarray(x)))
    out = []
    for k, dev in enumerate(devices):
        index, _ = layout.shard_index(k, host.shape)
        out.append(backend.device_put(np.ascontiguousarray(host[index]), dev))
    return out


def check_deleted(args, name, describe=None):
    """A clear error for an operand donated to an earlier call (its buffers deleted)."""
    for i, x in enumerate(args):
        if type(x) is ShardedArray and any(backend.is_deleted(b) for b in x._shards):
            what = describe(i) if describe is not None else f"argument {i}"
            raise RuntimeError(
                f"Array has been deleted with shape={x.aval.str_short()}: {what} of {name} "
                "was donated to an earlier computation (donate_argnums) and its buffers "
                "were reused; it cannot be used again.") from None
    placement.check_deleted(args, name, describe)


def _local(devices):
    me = backend.process_index()
    return tuple(d for d in devices if d.process_index == me)


def _pmap_impl(*args, jaxpr, axes, in_axes, out_axes, devices, name, donated=None,
               check_vma=False):
    """Run the replicated program (``donated``: per operand, may its buffers be reused;
    only pmap's eager call passes it)."""
    devices = _mesh_devices(axes, devices)
    c = _compile(jaxpr, axes, devices, out_axes, name, donated)
    sizes = tuple(s for _, s in axes)
    if c.local != devices:  # multi-process: operands hold this process's slices
        devices, sizes = c.local, (len(c.local),)
    names = tuple(n for n, _ in axes)
    per_arg = list(c.const_bufs)
    try:
        for x, dims in zip(args, in_axes):
            if isinstance(x, (bool, int, float, complex)):
                x = transfer.device_put_value(x)
            per_arg.append(_shard_arg(x, MeshLayout(devices, sizes, dims, names), devices))
    except _Deleted:
        check_deleted(args, f"pmap({name})")
        raise
    outs = c.exe.execute(per_arg)
    results = []
    for bufs, aval, layout in zip(outs, c.out_avals, c.layouts):
        if aval.dtype == dtypes.float0:  # host zeros, as dispatch.results
            results.append(np.zeros(aval.shape, dtypes.float0))
        elif all(d is None for d in layout.dims):  # replicated over the mesh, as JAX's;
            out = ShardedArray(bufs, aval, layout)  # one-device ops use device 0's copy
            out._buf, out._committed = bufs[0], transfer.committed_to(devices[0])
            results.append(out)
        else:
            results.append(ShardedArray(bufs, aval, layout))
    return results


xla_pmap_p.def_impl(_pmap_impl, lazy_kind="pmap")


# ---- JVP ----

def _pmap_jvp(primals, tangents, *, jaxpr, axes, in_axes, out_axes, devices, name,
              check_vma=False):
    nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
    # (user rules, e.g. custom_jvp's, may name the axes)
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        jvp_jaxpr, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    nz_tangents = [t for t in tangents if type(t) is not ad.Zero]
    t_in_axes = tuple(d for d, nz in zip(in_axes, nonzeros) if nz)
    t_out_axes = tuple(d for d, nz in zip(out_axes, out_nz) if nz)
    outs = xla_pmap_p.bind(*primals, *nz_tangents, jaxpr=jvp_jaxpr, axes=axes,
                           in_axes=in_axes + t_in_axes, out_axes=out_axes + t_out_axes,
                           devices=devices, name=f"jvp({name})", check_vma=check_vma)
    n = len(jaxpr.out_avals)
    primals_out, nz_out = outs[:n], iter(outs[n:])
    full = _abstract_eval(jaxpr=jaxpr, axes=axes, in_axes=in_axes, out_axes=out_axes,
                          devices=devices, name=name)
    return primals_out, [next(nz_out) if nz else ad.Zero(a.to_tangent_aval())
                         for nz, a in zip(out_nz, full)]


ad.primitive_jvps[xla_pmap_p] = _pmap_jvp


# ---- partial evaluation (linearize): known pmap -> residuals -> unknown pmap ----

def _pmap_partial_eval(trace, tracers, params):
    jaxpr, axes = params["jaxpr"], params["axes"]
    in_axes, out_axes = params["in_axes"], params["out_axes"]
    unknowns = tuple(t.jvar is not None for t in tracers)
    check_vma = params.get("check_vma", False)
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns,
                                                                      False)
    res_dims = tuple(range(len(axes)))  # residuals come out stacked over the mesh axes
    known_out_axes = tuple(d for d, u in zip(out_axes, out_unknowns) if not u)
    with set_current_trace(trace.parent):
        known_outs = xla_pmap_p.bind(
            *[t.value for t in tracers if t.jvar is None], jaxpr=known, axes=axes,
            in_axes=tuple(d for d, u in zip(in_axes, unknowns) if not u),
            out_axes=known_out_axes + (res_dims,) * num_res,
            devices=params["devices"], name=params["name"], check_vma=check_vma)
    n_known = len(known_outs) - num_res
    residuals = [pe.JaxprTracer(trace, value=r) for r in known_outs[n_known:]]
    unknown_params = dict(params, jaxpr=unknown,
                          in_axes=(res_dims,) * num_res + tuple(
                              d for d, u in zip(in_axes, unknowns) if u),
                          out_axes=tuple(d for d, u in zip(out_axes, out_unknowns) if u))
    unknown_outs = trace.stage(xla_pmap_p, residuals + [t for t in tracers
                                                        if t.jvar is not None],
                               unknown_params)
    known_it, unknown_it = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
            for u in out_unknowns]


pe.partial_eval_rules[xla_pmap_p] = _pmap_partial_eval


# ---- transpose ----

def _pmap_transpose(cts, *args, jaxpr, axes, in_axes, out_axes, devices, name,
                    check_vma=False):
    """Without check_vma (pmap; JAX's check_vma=False): an output replicated over mesh
    axes counts once but every device along them holds (and back-propagates) a copy,
    so each gets a 1/n share of its cotangent, and a linear input replicated over an
    axis sums its cotangent there. With check_vma the body's pvary/psum_invariant
    transposes do that: cotangents go in as they are, and only a cotangent still
    varying over an axis its input is replicated on is summed there."""
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        t_jaxpr = ad.transpose_jaxpr(jaxpr, linear)  # (a custom_vjp bwd may use axes)
    lin_dims = [d for d, lin in zip(in_axes, linear) if lin]

    def body(*xs):
        outs = eval_jaxpr(t_jaxpr.jaxpr, t_jaxpr.consts, *xs)
        result = []
        for ct, dims in zip(outs, lin_dims):
            names = tuple(n for (n, _), d in zip(axes, dims) if d is None and (
                not check_vma or n in getattr(get_aval(ct), "vma", ())))
            result.append(_sum_prim().bind(ct, axis_name=names, axis_index_groups=None)
                          if names else ct)
        return result
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        t_jaxpr = pe.trace_to_jaxpr(body, t_jaxpr.in_avals)
    res = [a for a in args if not ad.is_undefined_primal(a)]
    res_dims = tuple(d for d, lin in zip(in_axes, linear) if not lin)
    cts = [ad.instantiate_zeros(c) for c in cts]
    for i, dims in enumerate(out_axes):
        n = math.prod(s for (_, s), d in zip(axes, dims) if d is None)
        if n > 1 and not check_vma:
            cts[i] = div(cts[i], full((), n, get_aval(cts[i]).dtype))
    lin_cts = iter(xla_pmap_p.bind(*res, *cts, jaxpr=t_jaxpr, axes=axes,
                                   in_axes=res_dims + tuple(out_axes),
                                   out_axes=tuple(lin_dims), devices=devices,
                                   name=f"transpose({name})", check_vma=check_vma))
    return [next(lin_cts) if lin else None for lin in linear]


ad.primitive_transposes[xla_pmap_p] = _pmap_transpose


# ---- inside a one-device program: nested vmaps with the same axis names ----

def vmap_eval(jaxpr, axes, in_axes, out_axes, args):
    """Evaluate the mapped body with one vmap per mesh axis (outermost axis first)."""
    if not axes:
        return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
    (name, size), rest = axes[0], axes[1:]

    def inner_dims(dims):
        d0 = dims[0]
        return tuple(d if d is None or d0 is None or d < d0 else d - 1 for d in dims[1:])

    in_d0 = [dims[0] for dims in in_axes]
    out_d0 = [dims[0] for dims in out_axes]

    def fun(*xs):
        return vmap_eval(jaxpr, rest, [inner_dims(d) for d in in_axes],
                         [inner_dims(d) for d in out_axes], xs)
    return batching.batch_flat(fun, size, list(args), in_d0, lambda _: out_d0, name)


# ---- inside a replicated program over the same mesh: the body runs per device ----

def take_block(x, dims, axes):
    """This device's block of the full value ``x`` (mapped over ``dims``)."""
    for d, name in sorted(((d, n) for d, (n, _) in zip(dims, axes) if d is not None),
                          key=lambda t: -t[0]):  # highest dim first: the rest stay put
        x = dynamic_index_in_dim(x, axis_index_p.bind(axis_name=(name,)), axis=d,
                                 keepdims=False)
    return x


def gather_block(x, dims, axes):
    """The full value from every device's block (``all_gather`` over mapped axes)."""
    for d, (name, size) in sorted((d, a) for d, a in zip(dims, axes) if d is not None):
        x = all_gather_p.bind(x, axis_name=(name,), axis_index_groups=None,
                              axis_size=size, axis=d, tiled=False)
    return x


def _per_device_eval(jaxpr, axes, in_axes, out_axes, args):
    blocks = [take_block(x, d, axes) for x, d in zip(args, in_axes)]
    outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *blocks)
    return [gather_block(o, d, axes) for o, d in zip(outs, out_axes)]


def _is_module_mesh(ctx, axes, devices):
    """Whether the SPMD module being lowered is over this shard_map's mesh: the same
    devices, its axes all or (partially manual) some of the module mesh's."""
    mesh = ctx.module_ctx.mesh
    if isinstance(devices, Mesh):  # (a partially manual shard_map's)
        devices = devices._flat_devices
    return mesh is not None and tuple(mesh._flat_devices) == tuple(devices) and \
        set(axes) <= set(zip(mesh.axis_names, mesh.axis_sizes))


def _manual_lowering(ctx, args, jaxpr, axes, in_axes, out_axes):
    """shard_map inside an SPMD module over its mesh, as JAX lowers it: Shardy's
    ``sdy.manual_computation`` over the shard_map's (manual) axes. Operand dimension
    ``d`` mapped by axis ``a`` is sharded ``{"a"}`` (the others are left open to the
    partitioner when some mesh axes stay automatic); each partition's block (that
    dimension 1) is squeezed for the body, whose collectives name partitions
    (``partitioned``) over the whole mesh."""
    names = [n for n, _ in axes]
    mesh = ctx.module_ctx.mesh
    whole = tuple(zip(mesh.axis_names, mesh.axis_sizes))
    rest = UNCONSTRAINED if len(axes) < len(whole) else None

    def sharding(dims, rank):
        parts = [rest] * rank
        for n, d in zip(names, dims):
            if d is not None:
                parts[d] = n
        return mlir.sdy_sharding_text(parts, rank)

    def local(aval, dims):
        shape = list(aval.shape)
        for d in dims:
            if d is not None:
                shape[d] = 1
        return aval.update(shape=tuple(shape))
    ins = [local(a, d) for a, d in zip(ctx.avals_in, in_axes)]
    outs = [local(a, d) for a, d in zip(ctx.avals_out, out_axes)]
    per_value = lambda avals, dims: mlir.ir.Attribute.parse(  # noqa: E731
        "#sdy.sharding_per_value<[" + ", ".join(
            f"<{sharding(d, len(a.shape))}>" for a, d in zip(avals, dims)) + "]>")
    op = mlir.ir.Operation.create(
        "sdy.manual_computation", results=[mlir.aval_to_ir_type(a) for a in ctx.avals_out],
        operands=list(args), regions=1, attributes={
            "in_shardings": per_value(ctx.avals_in, in_axes),
            "out_shardings": per_value(ctx.avals_out, out_axes),
            "manual_axes": mlir.ir.Attribute.parse(
                "#sdy<manual_axes{" + ", ".join(f'"{n}"' for n in names) + "}>")})
    block = op.regions[0].blocks.append(*[mlir.aval_to_ir_type(a) for a in ins])
    auto = [n for n, _ in whole if n not in names]
    with mlir.ir.InsertionPoint(block), lowering_axes_context(whole, auto), \
            batching.extend_axis_env(axes):
        xs = [mlir.hlo.reshape(mlir.aval_to_ir_type(v.aval), b)
              for b, v in zip(block.arguments, jaxpr.jaxpr.invars)]
        ys = mlir.jaxpr_subcomp(ctx.module_ctx, jaxpr.jaxpr, jaxpr.consts, xs)
        ys = [mlir.hlo.reshape(mlir.aval_to_ir_type(a), y) for a, y in zip(outs, ys)]
        mlir.ir.Operation.create("sdy.return", operands=ys)
    return list(op.results)


def _pmap_lowering(ctx, *args, jaxpr, axes, in_axes, out_axes, devices, name,
                   check_vma=False):
    if _is_module_mesh(ctx, axes, devices):  # shard_map in a jit partitioned over its mesh
        return _manual_lowering(ctx, args, jaxpr, axes, in_axes, out_axes)
    if lowering_axes() == axes:  # jit of pmap, compiled for the pmap's mesh
        def fun(*xs, **_):
            with batching.extend_axis_env(axes):
                return _per_device_eval(jaxpr, axes, in_axes, out_axes, xs)
    else:
        if backend.process_count() > 1:  # the mapped size is global, the operands local
            raise NotImplementedError(
                f"jit of pmap/shard_map ({name}) is not supported across processes; "
                "call the pmap outside jit (it compiles its body itself)")

        def fun(*xs, **_):
            return vmap_eval(jaxpr, axes, in_axes, out_axes, xs)
    return mlir.lower_fun(fun, multiple_results=True)(ctx, *args)


mlir.register_lowering(xla_pmap_p, _pmap_lowering)


def _pmap_batch(vals, dims, *, jaxpr, axes, in_axes, out_axes, devices, name,
                check_vma=False):
    # vmap of pmap: the vmapped axis becomes an extra (unmapped-by-the-mesh) axis of the
    # body, batched with batch_jaxpr; batched outputs carry it at the front. With vmap's
    # ``spmd_axis_name`` naming mesh axes of a shard_map (as JAX), the batch dimension
    # is split over them too: each device's body sees size / their product.
    size = batching.axis_size_of(vals, dims)
    spmd = _spmd_axes(axes, in_axes, dims, size)
    k, m = math.prod(dict(axes)[a] for a in spmd), len(spmd)
    spmd_pos = {a: i for i, a in enumerate(spmd)}
    new_in, body_dims, new_vals = [], [], []
    for v, b, mesh_dims in zip(vals, dims, in_axes):
        if b is batching.not_mapped:
            new_in.append(mesh_dims)
            body_dims.append(batching.not_mapped)
            new_vals.append(v)
            continue
        if m:  # (size,) -> (sizes of the spmd axes..., size / k) at dim b
            shape = get_aval(v).shape
            v = reshape(v, shape[:b] + tuple(dict(axes)[a] for a in spmd) + (size // k,)
                        + shape[b + 1:])
        shifted = tuple(
            b + spmd_pos[a] if a in spmd_pos else None if d is None else
            (d if d < b else d + m + 1) for (a, _), d in zip(axes, mesh_dims))
        body_dims.append(b - sum(1 for d in mesh_dims if d is not None and d < b))
        new_in.append(shifted)
        new_vals.append(v)
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        b_jaxpr, out_batched = batching.batch_jaxpr(jaxpr, size // k, body_dims)
    if any(bat and any(d is not None and a in spmd_pos for (a, _), d in zip(axes, dims_))
           for dims_, bat in zip(out_axes, out_batched)):
        raise ValueError("vmap spmd_axis_name cannot appear in shard_map out_specs")
    new_out = tuple(
        tuple(spmd_pos[a] if a in spmd_pos else None if d is None else d + m + 1
              for (a, _), d in zip(axes, dims_)) if bat else dims_
        for dims_, bat in zip(out_axes, out_batched))
    outs = xla_pmap_p.bind(*new_vals, jaxpr=b_jaxpr, axes=axes, in_axes=tuple(new_in),
                           out_axes=new_out, devices=devices, name=name,
                           check_vma=check_vma)
    if m:  # the spmd axes' dimensions and the batch merge back
        outs = [reshape(o, (size,) + get_aval(o).shape[m + 1:]) if bat else o
                for o, bat in zip(outs, out_batched)]
    return outs, [0 if bat else batching.not_mapped for bat in out_batched]


def _spmd_axes(axes, in_axes, dims, size):
    """The mesh axes vmap's ``spmd_axis_name`` splits the batch over (none for a pmap,
    whose axis is not one of them); JAX's errors where a spec already names them."""
    spmd = batching._axis_env.rule_spmd_name
    spmd = () if spmd is None else (spmd,) if isinstance(spmd, str) else tuple(spmd)
    names = [n for n, _ in axes]
    if not spmd or not all(a in names for a in spmd):
        return ()
    for mesh_dims, b in zip(in_axes, dims):
        if b is not batching.not_mapped and any(
                d is not None and n in spmd for n, d in zip(names, mesh_dims)):
            raise ValueError("vmap spmd_axis_name cannot appear in shard_map in_specs")
    k = math.prod(dict(axes)[a] for a in spmd)
    if size % k:
        raise ValueError(f"vmap spmd_axis_name {spmd} splits the mapped axis of size "
                         f"{size} over {k} devices, which does not divide it")
    return spmd


batching.primitive_batchers[xla_pmap_p] = _pmap_batch


def trace_body(fun, in_avals, axes, check_vma=False):
    """Trace the per-device function with the mesh's axis names bound (and with
    ``check_vma``, its values typed with the axes they vary over). Values it closed
    over are the jaxpr's consts: tracers among them go through ``closure_convert``."""
    with batching.extend_axis_env(axes), _vma_mode(check_vma, axes):
        return pe.trace_to_jaxpr(fun, in_avals)


def closure_convert(jaxpr, axes, args, in_axes):
    """Closure conversion before binding ``xla_pmap``: the tracers of enclosing
    transformations (grad/jvp, vmap, jit tracing) that the body closed over become
    leading operands replicated over the mesh (in_axes None), so those transformations
    see them (a const would be hidden from them). Returns ``(jaxpr, args, in_axes)``."""
    hoist = [isinstance(c, Tracer) for c in jaxpr.consts]
    if not any(hoist):
        return jaxpr, tuple(args), tuple(in_axes)
    j, consts = jaxpr.jaxpr, jaxpr.consts
    pick = lambda xs, h: [x for x, hx in zip(xs, hoist) if hx == h]  # noqa: E731
    body = Jaxpr(pick(j.constvars, False), pick(j.constvars, True) + list(j.invars),
                 j.outvars, j.eqns)
    tracers = pick(consts, True)
    return (ClosedJaxpr(body, pick(consts, False)), (*tracers, *args),
            ((None,) * len(axes),) * len(tracers) + tuple(in_axes))
