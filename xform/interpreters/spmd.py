"""Programs partitioned over a mesh by XLA: jit over shardings, eager ops on sharded
arrays.

As JAX lowers them: ONE module for the whole mesh with ``mhlo.num_partitions``, the
mesh as ``sdy.mesh`` and an ``sdy.sharding`` per argument (and per result where
``out_shardings`` says), compiled with SPMD partitioning on (Shardy) and the mesh's
devices as the device assignment. XLA propagates shardings through the program;
each unspecified output's layout is read back from the executable and named as a
NamedSharding over the mesh. Uncommitted inputs (NumPy values, one-device Arrays)
are replicated. Design notes: docs/architecture.md, "Sharding".
"""
import itertools

import numpy as np

from xform import backend
from xform.core import dtypes, sharding_types, transfer
from xform.core.array import Array, ShardedArray
from xform.core.jaxpr import ClosedJaxpr, Jaxpr
from xform.core.profiling import span
from xform.core.mesh import AxisType, Mesh, current_mesh
from xform.core.shape_dtype_struct import ShapeDtypeStruct
from xform.core.sharding import NamedSharding, PartitionSpec, TiledLayout
from xform.interpreters import dispatch, mlir, mlir_memory
from xform.interpreters import partial_eval as pe


def named_sharding_of(x):
    """The NamedSharding of an Array tiled over a mesh (or of a ShapeDtypeStruct that
    names one: AOT lowering partitions as for such an Array), else None."""
    if type(x) is ShardedArray and type(x.layout) is TiledLayout:
        return x.sharding
    if type(x) is ShapeDtypeStruct and x._sharding is not None:
        s = x.sharding
        return s if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh) else None
    return None


def _shardings_in(jaxpr, found):
    """NamedShardings in the params of ``jaxpr``'s equations (at any depth): the
    meshes its sharding constraints (and partially manual shard_maps) name. An
    ``out_sharding=`` type's (over an AbstractMesh) names the mesh in context, so a
    program whose values are typed only so (``broadcasted_iota(out_sharding=)`` in a
    jit of no sharded arguments) is placed over it, as JAX's."""
    ctx = current_mesh()
    for eqn in jaxpr.eqns:
        for v in eqn.params.values():
            for p in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(p, NamedSharding):
                    if isinstance(p.mesh, Mesh):
                        found.append(p)
                    elif ctx is not None and ctx.abstract_mesh == p.mesh:
                        found.append(NamedSharding(ctx, p.spec))
                elif isinstance(p, Mesh):  # a partially manual shard_map's mesh
                    found.append(NamedSharding(p, PartitionSpec()))
                elif isinstance(p, ClosedJaxpr):
                    _shardings_in(p.jaxpr, found)
                elif isinstance(p, Jaxpr):
                    _shardings_in(p, found)
    return found


_constraints = {}  # id(jaxpr) -> (jaxpr, [NamedSharding])


def constraint_shardings(closed):
    """The NamedShardings ``closed`` names anywhere (memoized per jaxpr: a sharded
    call asks on every call)."""
    hit = _constraints.get(id(closed.jaxpr))
    if hit is None or hit[0] is not closed.jaxpr:
        if len(_constraints) > 4096:
            _constraints.clear()
        hit = _constraints[id(closed.jaxpr)] = (closed.jaxpr,
                                                tuple(_shardings_in(closed.jaxpr, [])))
    return hit[1]


def has_sharding_constraints(closed):
    """Whether ``closed`` names a NamedSharding anywhere."""
    return bool(constraint_shardings(closed))


def _mesh_key(mesh):
    return (mesh._flat_devices, mesh.axis_names, mesh.axis_sizes)


def _ids(mesh):
    return [d.id for d in mesh._flat_devices]


class Placement:
    """Where a partitioned program runs: ``mesh``, a spec per flat input and a spec
    (or None: XLA chooses) per output. Hashable: part of jit's cache key. ``free``:
    the inputs nothing placed (replicated; an export records them unspecified, as JAX's)."""
    __slots__ = ("mesh", "in_shardings", "out_shardings", "key", "free")

    def __init__(self, mesh, in_shardings, out_shardings, free=()):
        self.mesh, self.free = mesh, frozenset(free)
        self.in_shardings, self.out_shardings = tuple(in_shardings), tuple(out_shardings)
        self.key = (_mesh_key(mesh), tuple(s.spec for s in in_shardings),
                    tuple(None if s is None else s.spec for s in out_shardings))

    def specs(self):
        """``(mesh, in_specs, out_specs)``: what ``mlir.lower_jaxpr_to_module`` takes."""
        return (self.mesh, [s.spec for s in self.in_shardings],
                [None if s is None else s.spec for s in self.out_shardings])


def placement(closed, leaves, in_shardings=None, out_shardings=None, describe=None,
              name="jit"):
    """The Placement of a jitted call, or None when nothing in it is sharded (no
    shardings given, no argument tiled over a mesh, no constraint in the program).

    ``in_shardings`` / ``out_shardings``: per flat input / output, a NamedSharding or
    None (unspecified). Raises JAX's errors for arguments on other devices or whose
    sharding differs from the one asked for."""
    n_out = len(closed.out_avals)
    in_shardings = list(in_shardings or [None] * len(leaves))
    out_shardings = list(out_shardings or [None] * n_out)
    describe = describe or (lambda i: f"{i}")
    arg_shardings = [named_sharding_of(x) for x in leaves]

    # (what, i) pairs name each sharding's source; messages are built only to raise
    where = [(s, ("in", i)) for i, s in enumerate(in_shardings) if s]
    where += [(s, ("arg", i)) for i, s in enumerate(arg_shardings) if s]
    where += [(s, ("out", 0)) for s in out_shardings if s]
    where += [(s, ("constraint", 0)) for s in constraint_shardings(closed)]
    if not where:
        return None

    def what(source):
        kind, i = source
        arg = (f"argument {describe(i)} of {name} with shape "
               f"{closed.in_avals[i].str_short()} and")
        return {"in": f"in_shardings of {arg}", "arg": arg, "out": "out_shardings",
                "constraint": "a sharding constraint"}[kind]
    mesh, key = where[0][0].mesh, _mesh_key(where[0][0].mesh)
    for s, source in where[1:]:
        if s.mesh is not mesh and _mesh_key(s.mesh) != key:
            raise ValueError(
                "Received incompatible devices for jitted computation. Got "
                f"{what(where[0][1])} with device ids {_ids(mesh)} on platform "
                f"{backend.platform().upper()} and {what(source)} with device ids "
                f"{_ids(s.mesh)} on platform {backend.platform().upper()}")
    ins, free = [], []
    for i, (x, want, have) in enumerate(zip(leaves, in_shardings, arg_shardings)):
        aval = closed.in_avals[i]
        if have is not None and type(x) is ShapeDtypeStruct:
            have.check_shape(aval.shape)  # (as device_put of such an argument would)
        if want is not None:
            if have is not None and type(x) is not ShapeDtypeStruct:
                check_memory_kind(want, have, aval)
            if have is not None and have is not want and have.layout() != want.layout():
                raise ValueError(
                    "Sharding passed to jit does not match the sharding on the respective "
                    f"arg. Got jit sharding: {want},\narg sharding: {have} for arg type: "
                    f"{aval} ({describe(i)})")
            try:
                want.check_shape(aval.shape)
            except ValueError:  # (again, to name the argument)
                want.check_shape(aval.shape, f"One of pjit arguments ({describe(i)})")
            ins.append(want)
        elif have is not None:
            ins.append(have)
        else:
            ins.append(NamedSharding(mesh, PartitionSpec()))
            free.append(i)
    for i, (s, aval) in enumerate(zip(out_shardings, closed.out_avals)):
        if s is not None:
            s.check_shape(aval.shape, "One of pjit outputs")
        elif getattr(aval, "_sharding", None) is not None and \
                aval._sharding.mesh.axis_names == mesh.axis_names and \
                AxisType.Auto not in mesh.axis_types:  # explicit mode: the type says
            out_shardings[i] = NamedSharding(  # (Auto: XLA's)
                mesh, aval._sharding.spec, memory_kind=aval.memory_space.value)
    return Placement(mesh, ins, out_shardings, free)


def check_memory_kind(want, have, aval):
    """JAX's error for an argument in another memory than jit's in_shardings entry
    ``want`` names (jit moves no argument between memories: device_put does)."""
    if want.memory_kind != have.memory_kind:
        raise ValueError(
            "Memory kinds passed to jax.jit does not match memory kind on the respective "
            f"arg. Got jit memory kind: {want.memory_kind}, arg memory kind: "
            f"{have.memory_kind} for arg type: {aval}")


class PartitionedJaxpr:
    """A jaxpr compiled as one SPMD program over a mesh; called like
    ``dispatch.CompiledJaxpr``: ``(args, describe) -> output Arrays``."""

    def __init__(self, closed, place, name="jit", donated=None):
        self.name, self.mesh = name, place.mesh
        self.in_layouts = [s.layout() for s in place.in_shardings]
        self.in_kinds = [a.memory_space.value for a in closed.in_avals]  # (their types')
        callbacks = []
        kinds = mlir_memory.out_memory_kinds(place.out_shardings, closed.in_avals,
                                             closed.out_avals)
        with span("xform.jit.lower", name=name):
            self.module = mlir.lower_jaxpr_to_module(
                closed, hoist_consts=dispatch.EMBED_CONSTS_UP_TO, host_callbacks=callbacks,
                donated=donated, spmd=place.specs(), out_kinds=kinds)
        devices = place.mesh._flat_devices
        with span("xform.compile", name=name):
            self.exe = backend.compile_replicated(
                self.module, devices, callbacks, partitioned=True,
                propagate_to_outputs=[s is None for s in place.out_shardings])
        mask = mlir.hoist_mask(closed, dispatch.EMBED_CONSTS_UP_TO)
        replicated = NamedSharding(place.mesh, PartitionSpec()).layout()
        self.const_bufs = [transfer.shard_buffers(transfer.canonical_numpy(np.asarray(c)),
                                                  replicated)
                           for c, h in zip(closed.consts, mask) if h]
        self.out_avals = mlir_memory.with_memory_kinds(closed.out_avals, kinds)
        tilings = backend.output_tilings(self.exe) or [None] * len(self.out_avals)
        self.in_shardings = place.in_shardings
        self.out_shardings = [
            s if s is not None else _typed_rank(named_from_tiling(
                t, a.shape, place.mesh, zip(place.in_shardings, closed.in_avals)), a)
            .with_memory_kind(a.memory_space.value)  # (the memory its type says)
            for s, t, a in zip(place.out_shardings, tilings, self.out_avals)]
        self.out_layouts = [s.layout() for s in self.out_shardings]
        self.executable = self.exe  # (what the stages API asks for its analyses)

    def __call__(self, args, describe=None):
        per_arg = list(self.const_bufs)
        for i, (x, layout) in enumerate(zip(args, self.in_layouts)):
            if isinstance(x, Array) and x.is_deleted():  # (jaxlib would crash on it)
                what = describe(i) if describe is not None else f"argument {i}"
                raise RuntimeError(
                    f"Array has been deleted with shape={x.aval.str_short()}: {what} of "
                    f"{self.name} was donated to an earlier computation (donate_argnums) "
                    "and its buffers were reused; it cannot be used again.")
            per_arg.append(transfer.shard_buffers(x, layout, self.in_kinds[i]))
        outs = self.exe.execute(per_arg)
        return [np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0
                else ShardedArray(bufs, a, layout)
                for bufs, a, layout in zip(outs, self.out_avals, self.out_layouts)]


def named_from_tiling(tiling, shape, mesh, inputs):
    """The NamedSharding over ``mesh`` of an output XLA tiled as ``tiling`` (see
    ``backend.output_tilings``): an input's own sharding when it lays out alike (as
    JAX reports it), else the spec whose blocks match, found by search over the mesh
    axes (a handful of candidates for meshes of a few axes)."""
    if tiling is None:
        return NamedSharding(mesh, PartitionSpec())
    dims, parts, _ = tiling
    rank = len(shape)
    tiles = dims[:rank]
    target = _blocks_of_tiling(dims, parts, rank, shape)
    for s, aval in inputs:  # ``inputs``: (sharding, aval) per input
        if len(aval.shape) == rank and _mesh_key(s.mesh) == _mesh_key(mesh) and \
                _blocks(s, shape) == target:
            return s
    names, sizes = mesh.axis_names, mesh.axis_sizes
    axes = [i for i, n in enumerate(sizes) if n > 1]
    for choice in itertools.product(range(rank + 1), repeat=len(axes)):
        per_dim = [[axes[j] for j, c in enumerate(choice) if c == d] for d in range(rank)]
        if any(int(np.prod([sizes[a] for a in p])) != t for p, t in zip(per_dim, tiles)):
            continue
        for orders in itertools.product(*[itertools.permutations(p) for p in per_dim]):
            parts = [None if not o else names[o[0]] if len(o) == 1 else
                     tuple(names[a] for a in o) for o in orders]
            while parts and parts[-1] is None:  # (as JAX names XLA's choice)
                parts.pop()
            spec = PartitionSpec(*parts)
            cand = NamedSharding(mesh, spec)
            if _blocks(cand, shape) == target:
                return cand
    raise NotImplementedError(f"XLA chose a layout for an output of shape {shape} that "
                              f"no PartitionSpec over {mesh} describes: {tiling}")


def _typed_rank(s, aval):
    """An output XLA placed on a mesh with Explicit axes: its spec one entry per
    dimension, as JAX's typed results (other meshes: trailing Nones dropped)."""
    if not sharding_types.is_explicit(s.mesh) or len(s.spec) >= len(aval.shape):
        return s
    return s.with_spec(PartitionSpec(*s.spec, *[None] * (len(aval.shape) - len(s.spec))))


def _blocks(sharding, shape):
    lay = sharding.layout()
    return [tuple((s.start, s.stop) for s in lay.shard_index(k, shape)[0])
            for k in range(len(lay.devices))]


def _blocks_of_tiling(dims, parts, rank, shape):
    """Per partition, the (start, stop) per dimension of the block it holds."""
    grid = np.array(parts).reshape(dims)
    out = [None] * grid.size
    for coords in itertools.product(*[range(d) for d in dims]):
        block = []
        for i in range(rank):
            size = shape[i] // dims[i]
            block.append((None, None) if dims[i] == 1 else
                         (coords[i] * size, (coords[i] + 1) * size))
        out[grid[coords]] = tuple(block)
    return out


# ---- eager ops on sharded arrays: each a small SPMD program ----

_eager = {}


def apply_primitive(prim, args, params):
    """Run ``prim`` on arguments some of which are tiled over a mesh, as one SPMD
    program over that mesh (as JAX runs eager ops on sharded arrays); cached per
    (primitive, avals, params, placement)."""
    avals = tuple(x.aval if isinstance(x, Array) else dispatch._eager_aval(prim, x)
                  for x in args)
    layouts = tuple(x.layout if type(x) is ShardedArray else None for x in args)
    try:
        key = (prim, avals, tuple(params.items()), layouts)
        compiled = _eager.get(key)
    except TypeError:  # unhashable params
        key = compiled = None
    if compiled is None:
        closed = pe.trace_to_jaxpr(lambda *xs: _bind_list(prim, xs, params), avals)
        compiled = PartitionedJaxpr(closed, placement(closed, args, name=prim.name),
                                    prim.name)
        if key is not None and len(_eager) < 1024:
            _eager[key] = compiled
    outs = compiled(args)
    return outs if prim.multiple_results else outs[0]


def _bind_list(prim, xs, params):
    out = prim.bind(*xs, **params)
    return list(out) if prim.multiple_results else [out]


dispatch.sharded_apply = apply_primitive  # (dispatch's slow path calls it: same layer)
