"""Symbolic constraints (``symbolic_shape(..., constraints=)``, ``SymbolicScope``) as
jax.export uses them: deciding comparisons, rewriting equalities, and the shape
assertion errors at call time, in both directions of serialization."""
import jax
import numpy as np
import pytest

import xform
from xform import export

F32 = np.float32
_CONSTRAINTS = ("a >= b", "b >= 3", "c == 2*d", "mod(a, 2) <= 1")


def _outcome(thunk):
    try:
        return ("value", str(thunk()))
    except Exception as e:  # the kind and message of a failed decision
        return (type(e).__name__, str(e).splitlines()[0])


def _decisions(ex):
    a, b, c, d = ex.symbolic_shape("a, b, c, d", constraints=_CONSTRAINTS)
    mx = xform.core.shape_poly.max_dim if ex is export else jax.core.max_dim
    return [_outcome(t) for t in (
        lambda: a >= b, lambda: a >= 3, lambda: a - 2 >= 1, lambda: b > 2, lambda: a < b,
        lambda: a >= b + 1, lambda: max(a, 4), lambda: mx(a, b), lambda: mx(b, 2),
        lambda: c, lambda: c + d, lambda: c % 2, lambda: c // 2, lambda: d >= c,
        lambda: a * b >= b)]


def test_constraints_decide_comparisons_and_rewrite_equalities_as_jax():
    assert _decisions(export) == _decisions(jax.export)
    scope = export.SymbolicScope(("n >= 2",))
    n, = export.symbolic_shape("n", scope=scope)
    assert n >= 2 and export.symbolic_shape("n", scope=scope)[0].scope is scope
    for bad in (["a >= 3", "b"], "a >= b"):
        with pytest.raises(ValueError) as ours:
            export.SymbolicScope(bad)
        with pytest.raises(ValueError) as theirs:
            jax.export.SymbolicScope(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="Unsatisfiable explicit constraint: 2 >= 3"):
        export.SymbolicScope(["2 >= 3"])


def _exported(lib):
    a, b = lib.export.symbolic_shape("a, b", constraints=("a >= b", "b >= 3"))
    f = lib.jit(lambda x: x[:, :3] * 2.0 + x[:, -1:])   # needs b >= 3 to trace
    return lib.export.export(f)(lib.ShapeDtypeStruct((a, b), F32))


def test_constraints_checked_at_call_time_with_jaxs_errors_both_ways():
    ours, theirs = _exported(xform), _exported(jax)
    x = np.arange(20, dtype=F32).reshape(5, 4)
    want = np.asarray(theirs.call(x))
    np.testing.assert_allclose(np.asarray(ours.call(x)), want)
    for shape in ((3, 4), (4, 2)):   # a >= b, then b >= 3 fails
        bad = np.ones(shape, F32)
        with pytest.raises(ValueError) as e_ours:
            ours.call(bad)
        with pytest.raises(ValueError) as e_theirs:
            theirs.call(bad)
        assert str(e_ours.value) == str(e_theirs.value)
    # bytes cross: the constraints are not serialized (as in JAX); the modules check them
    in_jax = jax.export.deserialize(ours.serialize())
    np.testing.assert_allclose(np.asarray(in_jax.call(x)), want)
    in_xform = export.deserialize(bytearray(theirs.serialize()))
    np.testing.assert_allclose(np.asarray(in_xform.call(x)), want)
    with pytest.raises(ValueError, match="Error refining shapes"):
        in_jax.call(np.ones((3, 4), F32))
    with pytest.raises(ValueError, match="symbolic shape constraint a >= b. Expected "
                       "'- b \\+ a' to be greater or equal to 0, but found -1"):
        in_xform.call(np.ones((3, 4), F32))
