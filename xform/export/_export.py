"""``export(jit(f))(*specs) -> Exported``: a jitted function as a StableHLO module in
JAX's export calling convention, serialized as JAX serializes it.

The module is xform's lowering of the traced jaxpr with the attributes JAX's
consumers read (``@main`` public, ``mhlo.num_partitions``/``num_replicas``,
``jax.uses_shape_polymorphism``, ``jax.result_info``; with several platforms a leading
``i32`` platform index argument marked ``jax.global_constant = "_platform_index"``),
stored as a StableHLO portable artifact of the version JAX targets (4 weeks old).
"""
import dataclasses
import re
from typing import Any, Callable

import numpy as np

from xform import backend
from xform.core import dtypes, tree_util
from xform.core.mesh import AbstractMesh
from xform.core.sharding import NamedSharding, PartitionSpec
from xform.core.jaxpr import eval_jaxpr
from xform.interpreters import mlir, mlir_memory
from xform.transforms.ad import vjp as _vjp
from xform.transforms.jit import JitWrapped, ShapeDtypeStruct, jit
from xform.core import shape_poly as _shape_poly
from xform.core import shape_solve as _shape_solve
from xform.export import _serialization, _wrap
from xform.export._checks import check_module

ir = mlir.ir

# The calling conventions JAX 0.10 reads and writes (jax.export's).
minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
CALLING_CONVENTION_VERSION = 10


@dataclasses.dataclass(frozen=True, eq=False)
class Exported:
    """A function lowered for fixed argument avals (see ``export``). Hashes by
    identity: it is the parameter of the ``call_exported`` primitive."""
    fun_name: str
    in_tree: Any
    in_avals: tuple
    out_tree: Any
    out_avals: tuple
    in_shardings_hlo: tuple
    out_shardings_hlo: tuple
    nr_devices: int
    platforms: tuple
    ordered_effects: tuple
    unordered_effects: tuple
    disabled_safety_checks: tuple
    mlir_module_serialized: bytes
    calling_convention_version: int
    module_kept_var_idx: tuple
    uses_global_constants: bool
    _get_vjp: Callable | None = None
    # per flat input / output: None (unspecified) or (AbstractMesh, PartitionSpec,
    # memory kind), as JAX 0.10 keeps NamedShardings over abstract meshes (a one-device
    # jit's out_shardings over the empty mesh); in/out_shardings_hlo stay None
    _in_named_shardings: tuple = ()
    _out_named_shardings: tuple = ()

    def in_shardings_jax(self, mesh):
        """NamedShardings over ``mesh`` (same axis names, sizes and types as the export's)
        for the flat inputs; None where unspecified."""
        return tuple(_named_on(s, mesh) for s in self._in_named_shardings)

    def out_shardings_jax(self, mesh):
        """As ``in_shardings_jax``, for the flat outputs."""
        return tuple(_named_on(s, mesh) for s in self._out_named_shardings)

    def mlir_module(self) -> str:
        """The StableHLO module as text."""
        with backend.make_ir_context() as ctx:
            return str(backend.deserialize_portable_artifact(
                self.mlir_module_serialized, ctx))

    def __str__(self):
        return f"Exported(fun_name={self.fun_name!r}, in_avals={self.in_avals})"

    def has_vjp(self):
        return self._get_vjp is not None

    def vjp(self):
        """The Exported of the VJP: ``(*primals_flat, *out_cts_flat) -> in_cts_flat``."""
        if self._get_vjp is None:
            raise ValueError(f"No VJP is available for the exported function "
                             f"'{self.fun_name}'")
        return self._get_vjp(self)

    def serialize(self, vjp_order=0) -> bytearray:
        """JAX's serialized form; ``vjp_order=k`` includes k orders of VJPs (so the
        deserialized function can be differentiated k times)."""
        return _serialization.serialize(self, vjp_order)

    def call(self, *args, **kwargs):
        from xform.export._call import call  # cycle: _call's primitive takes Exporteds
        return call(self)(*args, **kwargs)


def _named_on(s, mesh):
    if s is None:
        return None
    amesh, spec, kind = s
    if mesh.abstract_mesh != amesh:
        raise ValueError(f"NamedSharding new mesh {mesh} does not match the mesh used for "
                         f"export {amesh}.")
    return NamedSharding(mesh, spec, memory_kind=kind)


def deserialize(blob) -> Exported:
    """An ``Exported`` from ``Exported.serialize()``'s bytes (xform's or JAX's)."""
    return _serialization.deserialize(blob)


def check_module_bytes(exp):
    """Raise unless ``exp.mlir_module_serialized`` is a StableHLO portable artifact
    with a ``@main`` (deserialize's check of foreign bytes; nothing runs)."""
    with backend.make_ir_context() as ctx:
        module = backend.deserialize_portable_artifact(exp.mlir_module_serialized, ctx)
        if module is None or "main" not in ir.SymbolTable(module.operation):
            raise ValueError("the module has no @main")
    if not (minimum_supported_calling_convention_version
            <= exp.calling_convention_version
            <= maximum_supported_calling_convention_version):
        raise ValueError(f"calling convention version {exp.calling_convention_version} "
                         "is not supported")


def default_export_platform() -> str:
    """The platform ``export`` lowers for by default: the running backend's."""
    return backend.platform()


def _module_name(fun_name):
    return "jit_" + re.sub(r"\W", "", fun_name.replace("<", "_"))


def _result_infos(out_tree):
    paths = tree_util.tree_flatten_with_path(out_tree.unflatten(range(out_tree.num_leaves)))[0]
    return ["result" + tree_util.keystr(p) for p, _ in paths]


def arg_path(in_tree, i):
    """``args[0]['x']``: where flat argument ``i`` sits in ``(args, kwargs)``."""
    paths = tree_util.tree_flatten_with_path(in_tree.unflatten(range(in_tree.num_leaves)))[0]
    path = paths[i][0]
    head = "args" if path[0] == tree_util.SequenceKey(0) else "kwargs"
    return head + tree_util.keystr(path[1:])


def _export_jaxpr(closed, in_tree, out_tree, fun_name, platforms, disabled_checks,
                  place=None, out_shardings=None):
    """``out_shardings``: a one-device jit's (per output, or None), for memory kinds."""
    platforms = tuple(platforms) if platforms else (default_export_platform(),)
    dim_vars = _shape_solve.all_dim_vars(closed.in_avals)
    callbacks = []
    spmd = place.specs() if place is not None else None
    kinds = mlir_memory.out_memory_kinds(place.out_shardings if place is not None
                                         else out_shardings, closed.in_avals,
                                         closed.out_avals)
    text = mlir.lower_jaxpr_to_module(closed, hoist_consts=False, host_callbacks=callbacks,
                                      platforms=platforms, dim_vars=dim_vars, spmd=spmd,
                                      out_kinds=kinds)
    if callbacks:
        # JAX's words: its format has no way to carry the Python functions
        raise NotImplementedError("serialization of host_callbacks is not yet implemented")
    multi = len(platforms) > 1
    with backend.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        attrs = module.operation.attributes
        i32 = ir.IntegerType.get_signless(32)
        attrs["sym_name"] = ir.StringAttr.get(_module_name(fun_name))
        attrs["jax.uses_shape_polymorphism"] = ir.BoolAttr.get(multi or bool(dim_vars))
        attrs["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, spmd[0].size if spmd else 1)
        attrs["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
        main = ir.SymbolTable(module.operation)["main"]
        old = (list(main.attributes["res_attrs"]) if "res_attrs" in main.attributes
               else [ir.DictAttr.get({})] * out_tree.num_leaves)  # sdy.sharding of results
        device = {"mhlo.memory_kind": ir.StringAttr.get("device")} if kinds else {}
        main.attributes["res_attrs"] = ir.ArrayAttr.get([   # (with a kind, all: JAX's)
            ir.DictAttr.get({"jax.result_info": ir.StringAttr.get(s), **device,
                             **{a.name: a.attr for a in ir.DictAttr(d)}})
            for s, d in zip(_result_infos(out_tree), old)])
        if dim_vars:
            _wrap.wrap_main(module, closed.in_avals, lambda i: arg_path(in_tree, i),
                            int(multi))
        check_module(module, disabled_checks)
        serialized = backend.serialize_portable_artifact(module)
    return Exported(
        fun_name=fun_name, in_tree=in_tree, in_avals=tuple(closed.in_avals),
        out_tree=out_tree, out_avals=tuple(closed.out_avals if place is None else  # (JAX's)
                                           mlir_memory.with_memory_kinds(closed.out_avals,
                                                                         kinds)),
        in_shardings_hlo=(None,) * len(closed.in_avals),
        out_shardings_hlo=(None,) * len(closed.out_avals),
        nr_devices=spmd[0].size if spmd else 1, platforms=platforms, ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=tuple(disabled_checks),
        mlir_module_serialized=serialized,
        calling_convention_version=CALLING_CONVENTION_VERSION,
        module_kept_var_idx=tuple(range(len(closed.in_avals))),
        uses_global_constants=multi or bool(dim_vars),
        _get_vjp=lambda primal: _export_vjp(primal, closed),
        _in_named_shardings=_named(place, "in_shardings", closed.in_avals),
        _out_named_shardings=_named(place, "out_shardings", closed.out_avals,
                                    out_shardings))


_EMPTY_MESH = AbstractMesh((), (), ())


def _named(place, field, avals, one_device=None):
    if place is None:   # a one-device jit's explicit shardings: over the empty mesh
        return tuple(None if s is None else (_EMPTY_MESH, PartitionSpec(*[None] * a.ndim),
                                             s.memory_kind)
                     for s, a in zip(one_device or [None] * len(avals), avals))
    free = place.free if field == "in_shardings" else ()
    return tuple(None if s is None or i in free else
                 (s.mesh.abstract_mesh, s.spec, s.memory_kind)
                 for i, s in enumerate(getattr(place, field)))


def _tangent_aval(a):
    return ShapeDtypeStruct(a.shape, a.to_tangent_aval().dtype)


def _export_vjp(primal, closed):
    """Export ``(*primals, *out_cts) -> in_cts`` of ``closed`` (JAX's VJP convention)."""
    n = len(primal.in_avals)

    def fun_vjp(*flat):
        _, pullback = _vjp(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                           *flat[:n])
        return pullback(list(flat[n:]))
    fun_vjp.__name__ = f"vjp_{primal.fun_name}"
    specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in primal.in_avals] + [
        _tangent_aval(a) for a in primal.out_avals]
    return export(jit(fun_vjp), platforms=primal.platforms,
                  disabled_checks=primal.disabled_safety_checks)(*specs)


def export(fun_jit, *, platforms=None, disabled_checks=()):
    """``export(jit(f))(*args_specs, **kwargs_specs)`` -> ``Exported``.

    Args:
      fun_jit: a function wrapped by ``xform.jit``.
      platforms: the platforms to lower for (default: the running one); with several,
        ``lax.platform_dependent`` branches are all kept and chosen when called.
      disabled_checks: ``DisabledSafetyCheck``s to skip: without
        ``DisabledSafetyCheck.custom_call(target)``, a module calling a custom-call
        target with no compatibility guarantee (``xform.ffi.ffi_call``'s, a LAPACK
        kernel JAX does not keep stable) is refused with a ValueError naming the op.

    The specs are ``ShapeDtypeStruct``s or arrays (pytrees of them).
    """
    if not isinstance(fun_jit, JitWrapped):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: "
                         f"{fun_jit}")
    name = getattr(fun_jit, "__name__", None) or getattr(fun_jit._fun, "__name__", "fun")
    for p in platforms or ():
        if p not in ("cpu", "cuda", "rocm", "tpu"):
            raise ValueError(f"Unsupported platform {p!r}: use 'cpu', 'cuda', 'rocm' or "
                             "'tpu'")

    def do_export(*args_specs, **kwargs_specs):
        dyn_args, dyn_kwargs, _, _ = fun_jit._split_static(args_specs, kwargs_specs)
        in_tree = tree_util.tree_structure((dyn_args, dyn_kwargs))  # static args are baked in
        traced = fun_jit.trace(*args_specs, **kwargs_specs)
        return _export_jaxpr(traced.jaxpr, in_tree, traced.out_tree, name, platforms,
                             disabled_checks, traced._place, traced._out_shardings)
    return do_export


def symbolic_args_specs(args, shapes_specs, constraints=(), scope=None):
    """``ShapeDtypeStruct``s like ``args`` with the shapes given as strings (a pytree
    prefix of ``args``; None keeps an argument's shape)."""
    scope = scope if scope is not None else _shape_poly.SymbolicScope(constraints)
    leaves, tree = tree_util.tree_flatten(args)
    if isinstance(shapes_specs, (str, type(None))):
        specs = [shapes_specs] * len(leaves)
    else:
        specs = tree_util.broadcast_prefix(shapes_specs, args)
    out = []
    for x, spec in zip(leaves, specs):
        shape = tuple(np.shape(x))
        if spec is not None:
            shape = _shape_poly.symbolic_shape(spec, scope=scope, like=shape)
        out.append(ShapeDtypeStruct(shape, dtypes.canonicalize_dtype(   # (as JAX's)
            getattr(x, "dtype", np.asarray(x).dtype))))
    return tree_util.tree_unflatten(tree, out)
