"""Solving dimension variables from actual argument shapes (JAX's ``solve_dim_vars``):
the plan that the exported ``@main`` follows in StableHLO and the static check a
caller runs, with the user's explicit constraints checked after the solution."""
from xform.core.shape_poly import _DimExpr


def all_dim_vars(avals):
    out = set()
    for a in avals:
        for d in a.shape:
            if isinstance(d, _DimExpr):
                out |= d.variables()
    return sorted(out)


class ShapeSolveError(ValueError):
    """Actual shapes that do not fit the specification: ``why``, and ``obtained`` (the
    variables solved so far, described as JAX's errors describe them)."""

    def __init__(self, why, obtained, head=None):
        super().__init__(why)
        self.why, self.obtained = why, obtained
        self.head = head or ("Input shapes do not match the polymorphic shapes "
                             f"specification. {why}.")


def solution_plan(exp_shapes, describe=None, specs=""):
    """How to solve the dimension variables of arguments of shapes ``exp_shapes``:
    ``(steps, checks)``; a step ``(var, i, d, coeff, rest)`` reads
    ``var = (shape[i][d] - rest) / coeff`` (``rest`` uses earlier variables), a check
    ``(i, d, expr)`` is a dimension to compare with ``expr`` once all are known."""
    pending = [(i, d, e) for i, es in enumerate(exp_shapes) for d, e in enumerate(es)
               if isinstance(e, _DimExpr)]
    known, steps, progress = set(), [], True
    while progress:
        progress = False
        for item in list(pending):
            unknown = item[2].variables() - known
            if len(unknown) != 1:
                continue
            v, = unknown
            lin = [(m, c) for m, c in item[2].terms() if any(f == v for f, _ in m)]
            if len(lin) != 1 or lin[0][0] != ((v, 1),):
                continue
            steps.append((v, item[0], item[1], lin[0][1], item[2] - _DimExpr((lin[0],))))
            known.add(v)
            pending.remove(item)
            progress = True
    missing = sorted(set().union(*(e.variables() for _, _, e in pending)) - known)
    if missing:
        unprocessed = ", ".join(f"'{e}' for dimension size {describe(i, d)}"
                                for i, d, e in pending if e.variables() - known
                                ) if describe else ""
        raise ValueError(
            "Cannot solve for values of dimension variables {" + ", ".join(
                repr(v) for v in missing) + "}. We can only solve linear uni-variate "
            f"constraints. Using the following polymorphic shapes specifications: {specs}. "
            f"Unprocessed specifications: {unprocessed}. Please see https://docs.jax.dev/"
            "en/latest/export/shape_poly.html#dimension-variables-must-be-solvable-from-"
            "the-input-shapes for more details.")
    return steps, pending


def solve_dim_vars(exp_shapes, shapes, describe):
    """Values of the dimension variables from actual ``shapes`` of the arguments whose
    exported shapes are ``exp_shapes`` (see ``solution_plan``); ``describe(i, d)``
    names argument i's dimension d for errors."""
    try:
        steps, checks = solution_plan(exp_shapes)
    except ValueError as e:
        raise ShapeSolveError(str(e), "") from None
    env, obtained = {}, ""
    for v, i, d, coeff, rest in steps:
        actual = shapes[i][d]
        q, r = divmod(actual - (rest.evaluate(env) if isinstance(rest, _DimExpr) else rest),
                      coeff)
        if r:
            raise ShapeSolveError(f"Division had remainder {r} when computing the "
                                  f"value of '{v}'", obtained)
        env[v] = q
        obtained += (f"'{v}' = {q} from specification '{exp_shapes[i][d]}' for "
                     f"dimension {describe(i, d)} (= {actual}), ")
        if q < 1:
            raise ShapeSolveError(f"Expected value >= 1 for dimension variable '{v}'",
                                  obtained)
    for i, d, e in checks:
        if e.evaluate(env) != shapes[i][d]:
            raise ShapeSolveError(
                f"Found inconsistency between dimension size {describe(i, d)} "
                f"(= {shapes[i][d]}) and the specification '{e}' (= {e.evaluate(env)})",
                obtained)
    for text, op, diff in explicit_constraints(exp_shapes):
        value = diff.evaluate(env)
        if value < 0 or (op == "==" and value != 0):
            raise ShapeSolveError(text, obtained, constraint_message(text, op, diff, value))
    return env


def explicit_constraints(exp_shapes):
    """``(text, op, e1 - e2)`` for the user's constraints in the scope of ``exp_shapes``
    (none after deserialization: JAX does not serialize them, the module checks them)."""
    scope = next((d.scope for s in exp_shapes for d in s
                  if isinstance(d, _DimExpr) and d.scope is not None), None)
    return scope.constraints if scope is not None else []


def constraint_message(text, op, diff, found):
    return (f"Input shapes do not match the symbolic shape constraint {text}. Expected "
            f"'{diff}' to be {'equal' if op == '==' else 'greater or equal'} to 0, but "
            f"found {found}. ")

def evaluate_shape(shape, env):
    return tuple(d.evaluate(env) if isinstance(d, _DimExpr) else d for d in shape)
