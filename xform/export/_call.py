"""Calling an ``Exported``: the ``call_exported`` primitive and ``call(exported)``.

The lowering inlines the exported module into the caller's: its functions are renamed
into the caller's module behind a ``@main`` wrapper of the call's static types (a
polymorphic module is refined to those shapes first, by jaxlib's shape refinement,
which also checks its shape assertions). Eagerly the primitive compiles like any
other; reverse mode uses the VJP stored with the Exported (``serialize(vjp_order)``).
"""
import io

import numpy as np

from xform import backend
from xform.core import dtypes, tree_util
from xform.core.avals import ShapedArray
from xform.core.trace import Primitive
from xform.interpreters import ad, batching, dispatch, mlir
from xform.transforms.custom_derivatives import custom_vjp
from xform.core import shape_poly as _shape_poly
from xform.core import shape_solve as _shape_solve
from xform.export import _export
from xform.export._checks import DisabledSafetyCheck

hlo, ir, func_dialect = mlir.hlo, mlir.ir, mlir.func_dialect

call_exported_p = Primitive("call_exported")
call_exported_p.multiple_results = True
call_exported_p.def_impl(lambda *args, exported: dispatch.apply_primitive(
    call_exported_p, *args, exported=exported))


def _describe(exported, i, d=None):
    return _export.arg_path(exported.in_tree, i) + (f".shape[{d}]" if d is not None else "")


def _shape_error(exported, err):
    specs = ", ".join(f"{_describe(exported, i)}.shape = {tuple(a.shape)}"
                      for i, a in enumerate(exported.in_avals)
                      if not _shape_poly.is_constant_shape(a.shape))
    return ValueError(f"{err.head} Using the following polymorphic shapes specifications: "
                      f"{specs}. Obtained dimension variables: {err.obtained}. Please see "
                      "https://docs.jax.dev/en/latest/export/shape_poly.html"
                      "#shape-assertion-errors for more details.")


def _abstract_eval(*avals, exported):
    for i, (exp, a) in enumerate(zip(exported.in_avals, avals, strict=True)):
        if len(exp.shape) != len(a.shape):
            raise ValueError(f"Rank mismatch for {_describe(exported, i)}: expected "
                             f"{tuple(exp.shape)} and called with {tuple(a.shape)}")
        if np.dtype(exp.dtype) != np.dtype(a.dtype):
            raise ValueError(f"Dtype mismatch for {_describe(exported, i)}: expected "
                             f"{exp.dtype} and called with {a.dtype}")
        for d, (ed, actual) in enumerate(zip(exp.shape, a.shape)):
            if not _shape_poly.is_symbolic_dim(ed) and ed != actual:
                raise ValueError(f"Shape mismatch for {_describe(exported, i, d)} "
                                 f"(expected same constant): expected {tuple(exp.shape)} "
                                 f"and called with {tuple(a.shape)}")
    env = _solve(exported, avals)
    return [ShapedArray(_shape_solve.evaluate_shape(o.shape, env), o.dtype,
                        memory_space=o.memory_space)   # (a host result stays there)
            for o in exported.out_avals]


def _solve(exported, avals):
    if all(_shape_poly.is_constant_shape(a.shape) for a in exported.in_avals):
        return {}
    try:
        env = _shape_solve.solve_dim_vars([a.shape for a in exported.in_avals],
                                         [a.shape for a in avals],
                                         lambda i, d: _describe(exported, i, d))
    except _shape_solve.ShapeSolveError as e:
        raise _shape_error(exported, e) from None
    return env


call_exported_p.def_abstract_eval(_abstract_eval)


def _lowering_platforms(mctx, exported):
    platforms = mctx.platforms if mctx.platform_index is not None else (mctx.platform,)
    out = []
    for p in platforms:
        if p in exported.platforms:
            out.append(exported.platforms.index(p))
        elif DisabledSafetyCheck.platform() in exported.disabled_safety_checks:
            out.append(0)
        else:
            raise ValueError(f"Function '{exported.fun_name}' was exported for platforms "
                             f"'{exported.platforms}' but it is used on '{platforms}'.")
    return out


def _convert(x, typ):
    return x if x.type == typ else hlo.convert(typ, x)


def _wrap_main(sub, exported, in_types, out_types, callee_indices, caller_multi):
    """Give ``sub`` a public ``@main`` of static ``in_types -> out_types`` calling its
    old main with the platform index and converted arguments."""
    table = ir.SymbolTable(sub.operation)
    old = table["main"]
    old.attributes["sym_visibility"] = ir.StringAttr.get("private")
    table.set_symbol_name(old, "_xform_exported_main")
    callee_inputs = list(old.type.inputs)
    index_types = [ir.RankedTensorType.get((), ir.IntegerType.get_signless(32))] \
        if caller_multi else []
    with ir.InsertionPoint.at_block_begin(sub.body):
        main = func_dialect.FuncOp("main", ir.FunctionType.get(index_types + in_types,
                                                               out_types))
    block = main.add_entry_block()
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        call_args = []
        if len(exported.platforms) > 1:
            if caller_multi:
                case = hlo.CaseOp([index_types[0]], args.pop(0), len(callee_indices))
                for region, i in zip(case.regions, callee_indices):
                    with ir.InsertionPoint(region.blocks.append()):
                        hlo.return_([mlir.ir_constant(np.int32(i))])
                idx = case.result
            else:
                idx = mlir.ir_constant(np.int32(callee_indices[0]))
            call_args.append(_convert(idx, callee_inputs[0]))
        elif caller_multi:
            args.pop(0)
        kept = [_constrain(args[i], exported._in_named_shardings[i])
                for i in exported.module_kept_var_idx]
        call_args += [_convert(x, t) for x, t in zip(kept, callee_inputs[len(call_args):])]
        call = func_dialect.CallOp(list(old.type.results),
                                   ir.FlatSymbolRefAttr.get("_xform_exported_main"),
                                   call_args)
        func_dialect.ReturnOp([_constrain(_convert(r, t), s) for r, t, s in zip(
            call.results, out_types, exported._out_named_shardings)])
    return "?" in str(old.type)


def _unshard(sub, mesh, exported):
    """Drop ``sub``'s ``sdy.mesh`` and the shardings on its ``@main``: the caller's
    ``@mesh`` (the same axes, checked) serves its ops, and ``_wrap_main`` constrains
    the arguments and results to the exported shardings, as JAX inlines a sharded
    export (a one-device export's ``@empty_mesh`` serves nothing)."""
    for s in exported._in_named_shardings + exported._out_named_shardings:
        if exported.nr_devices != 1 and s is not None and s[0] != mesh.abstract_mesh:
            raise ValueError(f"Function {exported.fun_name} was exported for the mesh "
                             f"{s[0]} and is called on the mesh {mesh.abstract_mesh}")
    for op in list(sub.body.operations):
        if op.operation.name == "sdy.mesh":
            op.operation.erase()
    main = ir.SymbolTable(sub.operation)["main"]
    for key in ("arg_attrs", "res_attrs"):
        if key in main.attributes:
            main.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get({
                a.name: a.attr for a in ir.DictAttr(d) if a.name != "sdy.sharding"})
                for d in main.attributes[key]])


def _constrain(x, s):
    if s is None or not s[0].axis_names:   # (a one-device export's: nothing to constrain)
        return x
    return ir.Operation.create("sdy.sharding_constraint", results=[x.type], operands=[x],
                               attributes={"sharding": mlir.sdy_sharding(
                                   s[1], ir.RankedTensorType(x.type).rank)}).result


def _merge(mctx, sub, base):
    """Move ``sub``'s functions into the caller's module under fresh names; returns
    the new name of its ``@main``."""
    table = ir.SymbolTable(sub.operation)
    prefix = mctx.unique_name(base)
    names = [op.attributes["sym_name"].value for op in sub.body.operations]
    for op in sub.body.operations:
        table.set_symbol_name(op, f"{prefix}_{op.attributes['sym_name'].value}")
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    for name in names:
        for op in sub.body.operations:
            table.replace_all_symbol_uses(name, f"{prefix}_{name}", op)
    for op in list(sub.body.operations):
        mctx.module.body.append(op)
    return f"{prefix}_main"


def _call_exported_lowering(ctx, *args, exported):
    mctx = ctx.module_ctx
    n = mctx.mesh.size if mctx.mesh is not None else 1
    if n != exported.nr_devices and exported.nr_devices != 1:
        raise ValueError(f"Function {exported.fun_name} was exported for "
                         f"{exported.nr_devices} devices and is called in a context with "
                         f"{n} devices, which is not allowed.")
    callee_indices = _lowering_platforms(mctx, exported)
    caller_multi = mctx.platform_index is not None
    context = mctx.module.context
    sub = backend.deserialize_portable_artifact(exported.mlir_module_serialized, context)
    in_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_in]
    out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    with ir.Location.unknown(context):
        _unshard(sub, mctx.mesh, exported)
        dynamic = _wrap_main(sub, exported, in_types, out_types, callee_indices,
                             caller_multi)
    if dynamic or exported.uses_global_constants:
        sub = _refine(sub, exported, context)
    name = _merge(mctx, sub, f"call_exported_{_export._module_name(exported.fun_name)}")
    operands = ([mctx.platform_index] if caller_multi else []) + list(args)
    return list(func_dialect.CallOp(out_types, ir.FlatSymbolRefAttr.get(name),
                                    operands).results)


def _refine(sub, exported, context):
    """Static shapes throughout ``sub`` (its ``@main`` has them), by jaxlib's shape
    refinement; the module's shape assertions raise their messages here."""
    buf = io.BytesIO()
    sub.operation.write_bytecode(file=buf)
    try:
        refined = backend.refine_polymorphic_shapes(buf.getvalue())
    except Exception as e:  # jaxlib's error type; the message is the assertion's
        raise ValueError(f"calling exported '{exported.fun_name}': {e}") from None
    return ir.Module.parse(refined, context)


mlir.register_lowering(call_exported_p, _call_exported_lowering)


def _no_batching(vals, dims, *, exported):
    raise NotImplementedError(
        "Batching rule for 'call_exported' not implemented (as in JAX): export the "
        f"function '{exported.fun_name}' with a batch dimension (e.g. a symbolic one, "
        "\"b, ...\") and call it on the whole batch")


def _no_jvp(primals, tangents, *, exported):
    raise TypeError("can't apply forward-mode autodiff (jvp) to an exported function: "
                    "it is differentiable in reverse mode through its serialized VJP")


batching.primitive_batchers[call_exported_p] = _no_batching
ad.primitive_jvps[call_exported_p] = _no_jvp


def _fix_float0(ct, aval):
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    return ct


def call(exported):
    """A function of ``exported``'s pytree arguments running its module: eagerly, under
    ``jit`` (inlined), and under ``grad`` where it was serialized with a VJP."""
    if not isinstance(exported, _export.Exported):
        raise ValueError(f"The exported argument must be an export.Exported. Found "
                         f"{exported}.")

    @custom_vjp
    def f_flat(*args):
        return tuple(call_exported_p.bind(*args, exported=exported))

    def fwd(*args):
        return f_flat(*args), args

    def bwd(args, cts):
        exp_vjp = exported.vjp()
        cts = [_fix_float0(c, a) for c, a in zip(cts, exp_vjp.in_avals[len(args):])]
        return tuple(call_exported_p.bind(*args, *cts, exported=exp_vjp))

    f_flat.defvjp(fwd, bwd)

    def f_imported(*args, **kwargs):
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != exported.in_tree:
            raise ValueError(
                "The invocation args and kwargs must have the same pytree structure as "
                f"when the function '{exported.fun_name}' was exported, but they differ: "
                f"called with {in_tree}, exported with {exported.in_tree}")
        return exported.out_tree.unflatten(list(f_flat(*leaves)))
    return f_imported
