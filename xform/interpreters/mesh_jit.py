"""jit of a program that maps over devices: compiled for the whole mesh.

A jitted jaxpr whose ``xla_pmap`` equations (at any depth) all use one mesh is compiled
as one replicated program over that mesh: jit-level code runs on every device (on
whole values), each pmap equation runs its body on this device's block. A value
produced by a pmap is kept as a block and all-gathered only where jit-level code
needs it whole; inputs only ever fed to pmaps arrive as blocks; outputs that are pmap
blocks come back sharded over the mesh (shard_map's, tiled per its ``out_specs``), the
others replicated on every device. Deeper pmaps lower per device too
(``pxla._pmap_lowering``). Design and the roads not taken: docs/architecture.md.
"""
import math

import numpy as np

from xform import backend
from xform.core import dtypes, transfer
from xform.core.array import Array, ShardedArray
from xform.core.mesh import AxisType, Mesh
from xform.core.sharding import MeshLayout, NamedSharding, TiledLayout
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, eval_jaxpr
from xform.core.profiling import span
from xform.interpreters import batching, mlir, pjit
from xform.interpreters import partial_eval as pe
from xform.interpreters.pxla import (
    _Deleted, _mesh_devices, _shard_arg, check_deleted, gather_block, lowering_axes_context,
    mapped_aval, take_block, tiled_spec, xla_pmap_p)
from xform.lax.collectives import all_gather_p


def _sub_jaxprs(params):
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, Jaxpr):
                yield x


def _meshes(jaxpr, found):
    for eqn in jaxpr.eqns:
        if eqn.primitive is xla_pmap_p:
            p = eqn.params
            devs = p["devices"]  # (a Mesh: a partially manual shard_map's)
            devs = devs._flat_devices if isinstance(devs, Mesh) else \
                _mesh_devices(p["axes"], devs)
            found.add((p["axes"], tuple(devs)))
        else:
            for sub in _sub_jaxprs(eqn.params):
                _meshes(sub, found)
    return found


def pmap_meshes(closed):
    """``{(axes, devices)}`` of the pmap/shard_map equations in ``closed``."""
    return {(tuple(a), tuple(d)) for a, d in _meshes(closed.jaxpr, set())}


def partitioned_placement(closed, named, make_place):
    """The placement ``make_place()`` gives a sharded jit call of ``closed`` (an
    ``spmd.Placement`` or None), or None where it keeps this module's replicated path:
    its pmap/shard_maps run over another mesh, or are fully manual while nothing it is
    given (``named``: shardings, arguments tiled over a mesh) names a sharding."""
    pmaps = pmap_meshes(closed)
    partial = any(len(d) != math.prod(n for _, n in a) for a, d in pmaps)
    if pmaps and not partial and not named:
        return None  # (pmap/shard_map of unsharded values: the replicated program)
    place = make_place()
    if place is None or not pmaps:
        return place
    axes = set(zip(place.mesh.axis_names, place.mesh.axis_sizes))
    if any(d != place.mesh._flat_devices or not set(a) <= axes for a, d in pmaps):
        return None  # a pmap over another mesh
    return place  # (shard_maps over its mesh lower as Shardy manual computations)


def compile_jaxpr(closed, name, donated=None):
    """For jit: a :class:`ReplicatedJaxpr` if ``closed`` maps over exactly one mesh of
    several devices (single process), else None (compile for one device as usual)."""
    if not closed.jaxpr.eqns or backend.process_count() > 1:
        return None
    found = _meshes(closed.jaxpr, set())
    if len(found) != 1:
        return None
    ((axes, devices),) = found
    if len(devices) < 2:
        return None
    return ReplicatedJaxpr(closed, axes, devices, name, donated)


# A per-device value's *kind*: None (the whole value), ("m", dims) (a pmap block: mesh
# axis k indexes dim dims[k], squeezed) or ("t", spec) (tiles, as shard_map lays out
# its results: spec[i] the mesh axes splitting dim i, major first).

def _split_dims(spec, full_shape, shape, sizes):
    """The mapped dims if reshaping tiles of ``spec`` from ``full_shape`` to ``shape``
    splits each tiled dim into (its mesh axes..., block) (shard_map's input reshape)."""
    dims, expect = [None] * len(sizes), []
    for i, s in enumerate(full_shape):
        axes_i = spec[i] if i < len(spec) else ()
        for a in axes_i:
            dims[a] = len(expect)
            expect.append(sizes[a])
        expect.append(s // math.prod(sizes[a] for a in axes_i))
    return tuple(dims) if tuple(expect) == tuple(shape) else None


def _is_reshape(eqn):
    return eqn.primitive.name == "reshape" and type(eqn.invars[0]) is not Literal


def _input_kinds(jaxpr):
    """Per input, the kind it arrives as: blocks if it only feeds pmaps mapped one way
    (or shard_map's split reshapes into them), else the whole value."""
    uses = {}

    def use(v, kind):
        if type(v) is not Literal:
            uses.setdefault(v, set()).add(kind)
    reshapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive is xla_pmap_p:
            for v, d in zip(eqn.invars, eqn.params["in_axes"]):
                use(v, ("m", d) if any(x is not None for x in d) else None)
        elif _is_reshape(eqn):
            reshapes.append(eqn)
        else:
            for v in eqn.invars:
                use(v, None)
    for v in jaxpr.outvars:
        use(v, None)
    for eqn in reshapes:
        (v,), (u,) = eqn.invars, eqn.outvars
        ku, kind = uses.get(u, set()), None
        if len(ku) == 1 and next(iter(ku)) is not None:
            spec = tiled_spec(u.aval.shape, next(iter(ku))[1], v.aval.shape)
            kind = ("t", spec) if spec is not None else None
        use(v, kind)
    return [next(iter(uses[v])) if len(uses.get(v, ())) == 1 else None
            for v in jaxpr.invars]


def gather_tiles(x, spec, axes):
    """The full value from every device's tile (tiled ``all_gather``, minor axes first)."""
    for i, axes_i in enumerate(spec):
        for a in reversed(axes_i):
            x = all_gather_p.bind(x, axis_name=(axes[a][0],), axis_index_groups=None,
                                  axis_size=axes[a][1], axis=i, tiled=True)
    return x


def _block_aval(aval, kind, sizes):
    if kind is None:
        return aval
    if kind[0] == "m":
        return mapped_aval(aval, kind[1])
    return aval.update(shape=tuple(
        s // math.prod(sizes[a] for a in (kind[1][i] if i < len(kind[1]) else ()))
        for i, s in enumerate(aval.shape)))


def _per_device_jaxpr(closed, axes, in_kinds):
    """The program each device runs, and the kind of each of its outputs."""
    jaxpr = closed.jaxpr
    sizes = tuple(s for _, s in axes)
    in_avals = [_block_aval(a, k, sizes) for a, k in zip(closed.in_avals, in_kinds)]
    out_kinds = []

    def fun(*args):
        full, blocks, lazy = dict(zip(jaxpr.constvars, closed.consts)), {}, {}

        def read(v):
            if type(v) is Literal:
                return v.val
            if v not in full:
                if v in lazy:
                    full[v] = lazy.pop(v)()
                else:
                    b, (kind, how) = blocks[v]
                    full[v] = (gather_block if kind == "m" else gather_tiles)(b, how, axes)
            return full[v]

        def read_block(v, d):
            if type(v) is not Literal and blocks.get(v, (None, None))[1] == ("m", d):
                return blocks[v][0]
            return take_block(read(v), d, axes)

        for v, x, k in zip(jaxpr.invars, args, in_kinds):
            if k is None:
                full[v] = x
            else:
                blocks[v] = (x, k)
        for eqn in jaxpr.eqns:
            if eqn.primitive is xla_pmap_p:
                p = eqn.params
                ops = [read_block(v, d) for v, d in zip(eqn.invars, p["in_axes"])]
                outs = eval_jaxpr(p["jaxpr"].jaxpr, p["jaxpr"].consts, *ops)
                for v, o, d in zip(eqn.outvars, outs, p["out_axes"]):
                    if any(x is not None for x in d):
                        blocks[v] = (o, ("m", d))
                    else:
                        full[v] = o
                continue
            if _is_reshape(eqn) and eqn.invars[0] in blocks:  # shard_map's reshapes:
                (v,), (u,) = eqn.invars, eqn.outvars         # the same block, relabelled
                b, (kind, how) = blocks[v]
                if kind == "m":
                    spec = tiled_spec(v.aval.shape, how, u.aval.shape)
                    new = None if spec is None else ("t", spec)
                else:
                    dims = _split_dims(how, v.aval.shape, u.aval.shape, sizes)
                    new = None if dims is None else ("m", dims)
                if new is not None:
                    blocks[u] = (b, new)
                    lazy[u] = lambda eqn=eqn: eqn.primitive.bind(read(eqn.invars[0]),
                                                                 **eqn.params)
                    continue
            outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
            for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
                full[v] = o
        res = []
        for v in jaxpr.outvars:
            if type(v) is not Literal and v in blocks:
                res.append(blocks[v][0])
                out_kinds.append(blocks[v][1])
            else:
                res.append(read(v))
                out_kinds.append(None)
        return res

    with batching.extend_axis_env(axes):
        per_device = pe.trace_to_jaxpr(fun, in_avals)
    return per_device, out_kinds


def _typed_name(layout, aval):
    """``layout`` named, for a typed (explicit mode) ``aval``, over the mesh with its
    type's axis types: JAX's sharding, with the type's spec where all axes are
    Explicit (a whole value's reads as ``P(None, None)``, not ``P()``)."""
    s = aval._sharding
    if s is None or type(layout) is not TiledLayout or \
            (s.mesh.axis_names, s.mesh.axis_sizes) != (layout.names, layout.sizes):
        return layout
    named = layout.sharding()
    mesh = Mesh(named.mesh.devices, layout.names, s.mesh.axis_types)
    all_explicit = all(t is AxisType.Explicit for t in s.mesh.axis_types)
    layout.named = NamedSharding(mesh, s.spec if all_explicit else named.spec)
    return layout


class ReplicatedJaxpr:
    """A jitted jaxpr compiled as one replicated program over a mesh (see above);
    called like ``dispatch.CompiledJaxpr``: ``(args, describe) -> output Arrays``."""

    def __init__(self, closed, axes, devices, name, donated=None):
        self.name, self.devices = name, devices
        in_kinds = _input_kinds(closed.jaxpr)
        per_device, out_kinds = _per_device_jaxpr(closed, axes, in_kinds)
        callbacks = []
        with lowering_axes_context(axes), span("xform.jit.lower", name=name):
            text = mlir.lower_jaxpr_to_module(per_device, hoist_consts=True,
                                              host_callbacks=callbacks, donated=donated)
        with span("xform.compile", name=name):
            self.exe = backend.compile_replicated(text, devices, callbacks)
        self.const_bufs = [[backend.device_put(transfer.canonical_numpy(np.asarray(c)), d)
                            for d in devices] for c in per_device.consts]
        names, sizes = tuple(n for n, _ in axes), tuple(s for _, s in axes)

        def layout(kind):  # a whole value: tiles of an empty spec (replicated)
            if kind is None or kind[0] == "t":
                return TiledLayout(devices, sizes, names, () if kind is None else kind[1])
            return MeshLayout(devices, sizes, kind[1], names)
        self.in_layouts = [layout(k) for k in in_kinds]
        self.out_layouts = [_typed_name(layout(k), a)
                            for k, a in zip(out_kinds, closed.out_avals)]
        self.whole = [k is None for k in out_kinds]
        self.out_avals = closed.out_avals

    def __call__(self, args, describe=None):
        per_arg = list(self.const_bufs)
        try:
            for x, layout in zip(args, self.in_layouts):
                if not isinstance(x, Array):
                    x = transfer.device_put_value(x)
                per_arg.append(_shard_arg(x, layout, self.devices))
        except _Deleted:
            check_deleted(args, self.name, describe)
            raise
        outs = self.exe.execute(per_arg)
        results = []
        for bufs, aval, layout, whole in zip(outs, self.out_avals, self.out_layouts,
                                             self.whole):
            if aval.dtype == dtypes.float0:  # host zeros, as dispatch.results
                results.append(np.zeros(aval.shape, dtypes.float0))
                continue
            out = ShardedArray(bufs, aval, layout)
            if whole:
                out._buf = bufs[0]  # replicated: one-device ops use device 0's copy
            results.append(out)
        return results


pjit.mesh_compile = compile_jaxpr   # the jit primitive's impl compiles over meshes here
pjit.partitioned_placement = partitioned_placement
