"""The ``@main`` of a module exported with symbolic shapes (JAX's calling convention).

The lowered function takes the dimension variables as leading ``i32`` arguments
(``jax.global_constant = "<name>"``); the public ``@main`` takes only the arrays,
computes each variable from ``stablehlo.get_dimension_size`` of the argument that
determines it, checks the specification with ``shape_assertion`` custom calls (their
``{i}`` placeholders are the values of the operands after the predicate, filled in
when shape refinement finds an assertion false) and calls the lowered function.
"""
import numpy as np

from xform.core import shape_poly, shape_solve
from xform.interpreters import mlir

hlo, ir, func_dialect = mlir.hlo, mlir.ir, mlir.func_dialect

_HELP = ("Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
         "#shape-assertion-errors for more details.")


def _assert(pred, operands, message):
    hlo.CustomCallOp([], [pred] + operands, "shape_assertion", has_side_effect=True,
                     api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2),
                     backend_config=ir.StringAttr.get(""),
                     called_computations=ir.ArrayAttr.get([])
                     ).operation.attributes["error_message"] = ir.StringAttr.get(message)


def _cmp(a, b, direction):
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))


def wrap_main(module, in_avals, describe, n_platform_args):
    """Rename ``module``'s ``@main`` (which takes the platform index, the dimension
    variables, then the arrays) and add the ``@main`` that takes the arrays only."""
    specs = ", ".join(f"{describe(i)}.shape = {tuple(a.shape)}" for i, a in
                      enumerate(in_avals) if not shape_poly.is_constant_shape(a.shape))
    steps, checks = shape_solve.solution_plan([a.shape for a in in_avals],
                                             lambda i, d: f"{describe(i)}.shape[{d}]", specs)
    dim_vars = shape_solve.all_dim_vars(in_avals)
    table = ir.SymbolTable(module.operation)
    inner = table["main"]
    inner.attributes["sym_visibility"] = ir.StringAttr.get("private")
    table.set_symbol_name(inner, "_wrapped_jax_export_main")
    in_types = list(inner.type.inputs)
    outer_types = in_types[:n_platform_args] + in_types[n_platform_args + len(dim_vars):]
    with ir.InsertionPoint.at_block_begin(module.body):
        main = func_dialect.FuncOp("main", ir.FunctionType.get(outer_types,
                                                               list(inner.type.results)))
    main.attributes["sym_visibility"] = ir.StringAttr.get("public")
    if "res_attrs" in inner.attributes:
        main.attributes["res_attrs"] = inner.attributes["res_attrs"]
    block = main.add_entry_block()
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        arrays = args[n_platform_args:]
        env, ops, obtained = {}, [], ""

        def message(why):
            return (f"Input shapes do not match the polymorphic shapes specification. {why}. "
                    f"Using the following polymorphic shapes specifications: {specs}. "
                    f"Obtained dimension variables: {obtained}. {_HELP}")

        def size(i, d):
            return hlo.get_dimension_size(arrays[i], d)

        with mlir.dim_vars_bound(env):
            for v, i, d, coeff, rest in steps:
                actual = size(i, d)
                num = hlo.subtract(actual, mlir.dim_value(rest)) if rest != 0 else actual
                c = mlir.ir_constant(np.int32(coeff))
                value = hlo.divide(num, c) if coeff != 1 else num
                if coeff != 1:
                    rem = hlo.remainder(num, c)
                    _assert(_cmp(rem, mlir.ir_constant(np.int32(0)), "EQ"), ops + [rem],
                            message(f"Division had remainder {{{len(ops)}}} when computing "
                                    f"the value of '{v}'"))
                env[v] = value
                ops.append(value)
                k = len(ops) - 1
                if value is not actual:
                    ops.append(actual)
                obtained += (f"'{v}' = {{{k}}} from specification '{in_avals[i].shape[d]}' "
                             f"for dimension {describe(i)}.shape[{d}] (= {{{len(ops) - 1}}}), ")
                _assert(_cmp(value, mlir.ir_constant(np.int32(1)), "GE"), list(ops),
                        message(f"Expected value >= 1 for dimension variable '{v}'"))
            for i, d, e in checks:
                actual, want = size(i, d), mlir.dim_value(e)
                _assert(_cmp(actual, want, "EQ"), list(ops) + [actual, want],
                        message(f"Found inconsistency between dimension size "
                                f"{describe(i)}.shape[{d}] (= {{{len(ops)}}}) and the "
                                f"specification '{e}' (= {{{len(ops) + 1}}})"))
            for text, op, diff in shape_solve.explicit_constraints(
                    [a.shape for a in in_avals]):
                value = mlir.dim_value(diff)
                _assert(_cmp(value, mlir.ir_constant(np.int32(0)), "EQ" if op == "==" else
                             "GE"), list(ops) + [value],
                        shape_solve.constraint_message(text, op, diff, f"{{{len(ops)}}}")
                        + f" Using the following polymorphic shapes specifications: {specs}. "
                        f"Obtained dimension variables: {obtained}. {_HELP}")
            values = [env[v] for v in dim_vars]
        call = func_dialect.CallOp(list(inner.type.results),
                                   ir.FlatSymbolRefAttr.get("_wrapped_jax_export_main"),
                                   args[:n_platform_args] + values + arrays)
        func_dialect.ReturnOp(list(call.results))

