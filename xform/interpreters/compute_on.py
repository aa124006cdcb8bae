"""The ``compute_on`` call primitive (``compute_on2``'s): a traced function that runs as
one call XLA places on a compute type.

Its ``jaxpr`` runs on its operands; the lowering is a private func and a ``func.call``
carrying the compute type as frontend attributes (``_xla_compute_type`` or a GPU
stream; ``backend_config`` with the user's compiler options, else ``inlineable =
"false"`` for ``device``), each result then placed in its ``out_memory_spaces`` entry's
memory, as JAX lowers it. Transformations are the call-primitive rules
(``interpreters/call.py``): derived calls keep the compute type; their outputs stay in
their primal's memory space, residuals and cotangents in device memory.
"""
from xform import backend
from xform.core.avals import MemorySpace
from xform.core.trace import Primitive
from xform.interpreters import call, dispatch, mlir, mlir_compute
from xform.interpreters.mlir_memory import annotate_placement
from xform.interpreters import partial_eval as pe

ir, func_dialect = backend.ir, backend.func_dialect

compute_on_p = Primitive("compute_on")
compute_on_p.multiple_results = True
dispatch.def_structural_impl(compute_on_p)   # eager: compiled, so nesting errors as JAX's


def _abstract_eval(*avals, jaxpr, compute_type, out_memory_spaces, compiler_options_json):
    return [a.update(memory_space=s) for a, s in zip(jaxpr.out_avals, out_memory_spaces,
                                                     strict=True)]


compute_on_p.def_abstract_eval(_abstract_eval)


def _derived_params(params, kind, how):
    spaces = params["out_memory_spaces"]
    return dict(params, out_memory_spaces=tuple(
        spaces[e[1]] if e is not None and e[0] == "out" else MemorySpace.Device
        for e in how().outs))


call.def_call_rules(compute_on_p, derived_params=_derived_params)


def _holds_compute_on(jaxpr):
    return any(e.primitive is compute_on_p
               or any(_holds_compute_on(j) for p in e.params.values()
                      for j in pe._param_jaxprs(p))
               for e in jaxpr.eqns)


def _lowering(ctx, *args, jaxpr, compute_type, out_memory_spaces, compiler_options_json):
    if _holds_compute_on(jaxpr.jaxpr):
        raise ValueError("Nesting `compute_on` with different compute types is not "
                         "allowed.")
    mctx = ctx.module_ctx
    if mctx.dim_vars or mctx.platform_index is not None:   # inlined, as any call there
        outs = mlir.call_lowering(ctx, args, jaxpr, "compute_on")
    else:
        op = func_dialect.CallOp([mlir.aval_to_ir_type(a) for a in jaxpr.out_avals],
                                 ir.FlatSymbolRefAttr.get(mlir.private_func(
                                     mctx, jaxpr, "compute_on")), list(args))
        attrs = mlir_compute.frontend_attrs(compute_type)
        if compiler_options_json is not None:
            attrs["backend_config"] = ir.StringAttr.get(compiler_options_json)
        elif compute_type == "device":
            attrs["inlineable"] = ir.StringAttr.get("false")
        op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(attrs)
        outs = list(op.results)
    return [annotate_placement(x, s.value) for x, s in zip(outs, out_memory_spaces,
                                                           strict=True)]


mlir.register_lowering(compute_on_p, _lowering)
