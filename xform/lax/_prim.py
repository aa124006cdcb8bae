"""Family registrars for lax primitives: declare a primitive with its abstract
evaluation, eager impl and (for elementwise families) batching in one call; and the
same-dtype rule of binary ops: a Python scalar operand is a weak array of its default
dtype, so ``lax.add(float32_array, 1)`` is a TypeError, as in JAX (jnp promotes)."""
from functools import partial

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import Primitive
from xform.interpreters import batching, dispatch


_extended_ok = set()
elementwise = {}   # primitive -> "unary" | "nary": the families' (their sharding rules)


def allow_extended(*prims):
    """Let ``prims`` take extended-dtype operands (typed keys); see ``lax/extended.py``."""
    _extended_ok.update(prims)


def standard_primitive(name, abstract_eval, multiple_results=False):
    """A primitive executed eagerly by compiling its lowering (no separate impl).

    Operands of an extended dtype (typed keys) are refused with a clear error unless
    the primitive is structural and allowed (``allow_extended``)."""
    prim = Primitive(name)
    prim.multiple_results = multiple_results

    def checked_abstract_eval(*avals, **params):
        for a in avals:
            if not isinstance(a.dtype, np.dtype) and prim not in _extended_ok:
                raise TypeError(f"{name} does not accept dtype {a.dtype}: arrays of "
                                f"{a.dtype} support only indexing, reshaping, "
                                "concatenation and selection (take the underlying "
                                "integers with jax.random.key_data).")
        return abstract_eval(*avals, **params)
    prim.def_abstract_eval(checked_abstract_eval)
    prim.def_impl(partial(dispatch.apply_primitive, prim), lazy_kind="record")
    return prim


def canonicalize_axis(axis, ndim):
    """``axis`` in ``[-ndim, ndim)`` made nonnegative, else JAX's ValueError."""
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _dtype_names(allowed):
    return ", ".join(sorted(np.dtype(d).name for d in allowed))


def check_dtype(name, dtype, allowed):
    if allowed is not None and np.dtype(dtype) not in allowed:
        if dtype in dtypes.narrow_int_dtypes:  # JAX's wording
            raise TypeError(f"{name} does not accept dtype {np.dtype(dtype).name}. Support "
                            "for narrow-width integers is platform-dependent and limited "
                            "to a few specific operations, e.g. basic arithmetic and type "
                            "casting.")
        raise TypeError(f"{name} does not accept dtype {np.dtype(dtype).name}. "
                        f"Accepted dtypes are: {_dtype_names(allowed)}.")


def unop(name, allowed_dtypes, result_dtype=None):
    """Elementwise unary primitive: same shape; dtype kept (or ``result_dtype(dtype)``)."""
    def abstract_eval(x, accuracy=None):  # (lax/accuracy.py: the transcendental ops')
        check_dtype(name, x.dtype, allowed_dtypes)
        dt = x.dtype if result_dtype is None else result_dtype(x.dtype)
        return ShapedArray(x.shape, dt, x.weak_type)
    prim = standard_primitive(name, abstract_eval)
    batching.defvectorized(prim)
    elementwise[prim] = "unary"
    return prim


def broadcasting_shape(name, *avals):
    """lax's elementwise shape rule, JAX's: rank-0 operands broadcast; the others need
    equal ranks, and per dimension equal sizes or size 1 (``f32[1,3] + f32[2,3]``)."""
    shapes = [tuple(a.shape) for a in avals if a.shape]
    if not shapes:
        return ()
    first = shapes[0]
    if all(s == first for s in shapes):   # (the common case: equal shapes)
        return first
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, "
                        f"got {ranks}")
    out = []
    for ds in zip(*shapes):
        big = [d for d in ds if not d == 1]   # (a symbolic dim is never 1)
        if any(d != big[0] for d in big[1:]):
            shown = ", ".join(map(str, shapes))
            raise TypeError(f"{name} got incompatible shapes for broadcasting: {shown}.")
        out.append(big[0] if big else 1)
    return tuple(out)


_JNP_NAMES = {"sub": "subtract", "mul": "multiply", "div": "divide", "max": "maximum",
              "min": "minimum", "pow": "power", "lt": "less", "le": "less_equal",
              "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
              "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
              "rem": "remainder", "atan2": "arctan2"}


def check_same_dtypes(name, *avals):
    if len({a.dtype for a in avals}) > 1:
        shown = ", ".join(a.dtype.name for a in avals)
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{shown}. (Tip: jnp.{_JNP_NAMES.get(name, name)} is a similar "
                        "function that does automatic type promotion on inputs.)")


def naryop(name, allowed_dtypes, nargs=2, result_dtype=None, check_dtypes=None):
    """Elementwise n-ary primitive with rank-0 broadcasting and weak-type propagation.
    ``check_dtypes(*avals)`` replaces the default check (each dtype allowed, all equal)."""
    def abstract_eval(*avals):
        assert len(avals) == nargs
        if check_dtypes is not None:
            check_dtypes(*avals)
        else:
            for a in avals:
                check_dtype(name, a.dtype, allowed_dtypes)
            check_same_dtypes(name, *avals)
        shape = broadcasting_shape(name, *avals)
        weak = all(a.weak_type for a in avals)   # also for comparisons, as JAX
        dt = avals[0].dtype if result_dtype is None else result_dtype
        return ShapedArray(shape, dt, weak)
    prim = standard_primitive(name, abstract_eval)
    batching.defbroadcasting(prim)
    elementwise[prim] = "nary"
    return prim


float_dtypes = dtypes.float_dtypes
inexact = dtypes.inexact_dtypes
numeric = dtypes.numeric_dtypes
numeric_or_bool = frozenset(numeric) | {dtypes.bool_}  # (dot_general, conv: JAX's set)
integer = dtypes.int_dtypes
any_dtype = None
