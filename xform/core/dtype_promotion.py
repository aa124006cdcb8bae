"""JAX's type promotion lattice with weak types: ``promote_types`` and ``result_type``
(part of ``dtypes.py``, the face).
"""
import numpy as np

from xform.core.config import config
from xform.core.dtype_table import (all_dtypes, _ARG_KEYS, _as_dtype, _CANONICAL,
                                    _DEFAULT_OF_KIND, _DTYPE_CLASSES, _extended_result_type,
                                    float0, float4_dtypes, float6_dtypes, float8_dtypes,
                                    is_extended, _KIND, narrow_float_dtypes,
                                    narrow_int_dtypes, numeric_dtypes, _PY_SCALAR_KEYS,
                                    _raw_dtype, _unsupported, _weak_attr)


# --------------------------------------------------------------- promotion lattice
# Nodes are dtype names plus the weak nodes "i*", "f*", "c*" (Python int, float,
# complex). Edges point to the immediately higher nodes, as in JAX's lattice. The
# narrow types (float8/6/4, int1/2/4 and unsigned) sit just above the weak node of
# their kind and below nothing: they join only with themselves, bool and the weaker
# nodes (float8 x int8 is float8), so no implicit promotion ever widens them.

_WEAK_NODES = frozenset({"i*", "f*", "c*"})
_WEAK_TYPE_NODES = {int: "i*", float: "f*", complex: "c*"}
_NODE_OF = {d: d.name for d in all_dtypes}
_DTYPE_OF_NODE = {d.name: d for d in all_dtypes}
_WEAK_NODE_OF = {d: {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}[_KIND[d]]
                 for d in numeric_dtypes}
_KIND_OF_WEAK_NODE = {"i*": "i", "f*": "f", "c*": "c"}


_NARROW_INTS = sorted(d.name for d in narrow_int_dtypes)
_NARROW_FLOATS = sorted(d.name for d in narrow_float_dtypes)


def _lattice_edges(x64):
    edges = {
        "bool": ["i*"],
        "i*": ["uint8", "int8", *_NARROW_INTS],
        "uint8": ["int16", "uint16"],
        "uint16": ["int32", "uint32"],
        "uint32": ["int64", "uint64"],
        "uint64": ["f*"],
        "int8": ["int16"],
        "int16": ["int32"],
        "int32": ["int64"],
        "int64": ["f*"],
        "f*": ["bfloat16", "float16", "c*", *_NARROW_FLOATS],
        "bfloat16": ["float32"],
        "float16": ["float32"],
        "float32": ["float64", "complex64"],
        "float64": ["complex128"],
        "c*": ["complex64"],
        "complex64": ["complex128"],
        "complex128": [],
        **{n: [] for n in _NARROW_INTS + _NARROW_FLOATS},
    }
    if not x64:
        # Without x64, uint32 x int32 must not form int64: join them at int32.
        edges["uint32"] = ["int32", "uint64"]
    return edges


def _strict_edges():
    """``jax_numpy_dtype_promotion='strict'``'s lattice: a Python scalar takes any type
    of its kind or higher (int -> float -> complex); two different types never join."""
    nodes = _lattice_edges(True)
    edges = {n: [] for n in nodes}
    for weak, higher in (("i*", "f*"), ("f*", "c*"), ("c*", None)):
        kind = _KIND_OF_WEAK_NODE[weak]
        edges[weak] = ([higher] if higher else []) + [
            n for n in nodes if n not in _WEAK_NODES and n != "bool"
            and _KIND[_DTYPE_OF_NODE[n]] in (("i", "u") if kind == "i" else (kind,))]
    return edges


def _build_join_table(edges):
    """All pairwise least upper bounds of the lattice ``edges``, as {(node, node): node}
    (None where there is none: only in the strict lattice)."""
    upper = {}
    for node in edges:
        seen, stack = {node}, [node]
        while stack:
            for nxt in edges[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        upper[node] = seen
    table = {}
    for a in edges:
        for b in edges:
            common = upper[a] & upper[b]
            lub = [c for c in common if common <= upper[c]]  # unique, if any
            table[a, b] = lub[0] if lub else None
    return table


_JOIN = (_build_join_table(_lattice_edges(False)), _build_join_table(_lattice_edges(True)))
_STRICT_JOIN = _build_join_table(_strict_edges())
_strict = [False]  # jax_numpy_dtype_promotion == "strict" (set by _on_flag)


class TypePromotionError(ValueError):
    """No implicit promotion joins these dtypes (``jax.dtypes.TypePromotionError``)."""


def _join_table(x64):
    return _STRICT_JOIN if _strict[0] else _JOIN[x64]


# Why a standard-lattice join fails, by the narrow type met first (JAX's wording).
_NO_JOIN_WHY = [(float8_dtypes, "8-bit floats", "float32"),
                (float6_dtypes, "6-bit floats", "float32"),
                (float4_dtypes, "4-bit floats", "float32"),
                (narrow_int_dtypes, "1-bit, 2-bit and 4-bit integers", "int32")]


def _no_join(nodes):
    names = tuple(_WEAK_NAMES.get(n, n) for n in nodes)
    head = f"Input dtypes {names} have no available implicit dtype promotion path"
    if _strict[0]:
        return TypePromotionError(
            f"{head} when jax_numpy_dtype_promotion=strict. Try explicitly casting inputs "
            "to the desired output type, or set jax_numpy_dtype_promotion=standard.")
    for group, what, to in _NO_JOIN_WHY:
        if any(_DTYPE_OF_NODE.get(n) in group for n in nodes):
            return TypePromotionError(
                f"{head}. To avoid unintended promotion, {what} do not support implicit "
                "promotion. If you'd like your inputs to be promoted to another type, you "
                f"can do so explicitly using e.g. x.astype('{to}')")
    return TypePromotionError(f"{head}. Try explicitly casting inputs to the desired "
                              "output type.")


_WEAK_NAMES = {"i*": str(int), "f*": str(float), "c*": str(complex)}


def _node_dtype(node, x64):
    if node in _WEAK_NODES:
        return _DEFAULT_OF_KIND[x64][_KIND_OF_WEAK_NODE[node]]
    return _DTYPE_OF_NODE[node]


def _join(nodes, x64):
    table = _join_table(x64)
    it = iter(nodes)
    out = next(it)
    for node in it:
        out = table[out, node]
        if out is None:
            raise _no_join(nodes)
    return out


def _promotion_node(x):
    if isinstance(x, type) and x in _WEAK_TYPE_NODES:
        return _WEAK_TYPE_NODES[x]
    dt = _as_dtype(x)
    node = _NODE_OF.get(dt)
    if node is None:
        if dt == float0:
            raise TypeError("float0 does not participate in type promotion.")
        raise _unsupported(dt, x)
    return node


def promote_types(a, b):
    """The dtype a binary operation casts ``a`` and ``b`` to (``jnp.promote_types``).

    Python ``int``/``float``/``complex`` are weak: they never widen the other type.
    Neither inputs nor output are canonicalized (as in JAX); the x64 flag only
    affects uint32 x int32.

    Args:
      a: a dtype-like.
      b: a dtype-like.

    Returns:
      The promoted ``np.dtype``.

    Raises:
      TypeError: for unsupported dtypes, including float0.

    >>> promote_types("int8", "uint8"), promote_types("bfloat16", "float16")
    (dtype('int16'), dtype('float32'))
    >>> promote_types("uint8", int)
    dtype('uint8')
    """
    node = _join([_promotion_node(a), _promotion_node(b)], config.jax_enable_x64)
    # As in JAX, a weak-only result is np.dtype of the Python type (64-bit) here.
    return _node_dtype(node, x64=True)


_ndarray = np.ndarray


def _arg_key(x):
    """(uncanonicalized dtype, weak) of a result_type argument."""
    t = type(x)
    key = _ARG_KEYS.get(t)
    if key is not None:
        return key
    dt = getattr(x, "dtype", None)
    if type(dt) in _DTYPE_CLASSES:
        if t is _ndarray:
            return dt, False
        # Inlined _weak_attr: this is the per-operand cost of every eager op.
        w = getattr(x, "weak_type", None)
        if w is None:
            w = getattr(getattr(x, "aval", None), "weak_type", False)
        return dt, (True if w else False)
    if t in _DTYPE_CLASSES:
        return x, False
    if isinstance(x, type) and x in _PY_SCALAR_KEYS:
        return _PY_SCALAR_KEYS[x]  # the types int/float/complex are weak too
    if is_extended(dt):
        return dt, False
    return _raw_dtype(x), _weak_attr(x)


def _result_type_uncached(pairs, x64):
    """result_type over a set of (dtype, weak) pairs; mirrors JAX's lattice_result_type."""
    canonical = _CANONICAL[x64]
    items = set()
    for dt, weak in pairs:
        c = canonical.get(dt)
        if c is None:
            raise _unsupported(dt, dt)
        items.add((c, weak))
    dts = {d for d, _ in items}
    all_weak = all(w for _, w in items)
    if len(dts) == 1:
        (out,) = dts
        weak = all_weak
    else:
        if float0 in dts:
            names = ", ".join(sorted(str(d) for d in dts))
            raise TypeError(f"float0 does not participate in type promotion (got {names}).")
        # All-weak inputs join their strong counterparts (as JAX does), so weak
        # uint8 + weak uint16 is a weak unsigned, not a weak int. A weak bool
        # counts as weak for this test, but is a strong node in the join.
        node = _join([_WEAK_NODE_OF.get(d, "bool") if w and not all_weak else _NODE_OF[d]
                      for d, w in items], x64)
        out = _node_dtype(node, x64)
        weak = all_weak or node in _WEAK_NODES
    weak = weak and out in _WEAK_NODE_OF  # bool and float0 results are never weak
    if weak:
        out = _DEFAULT_OF_KIND[x64][_KIND[out]]
    return out, weak


# Indexed by the x64 flag. Keys: (dt, weak) for one argument, (dt, weak, dt, weak)
# for two, a frozenset of (dt, weak) pairs for more (the result only depends on
# the set). The dtypes in keys are uncanonicalized.
_RESULT_CACHE = ({}, {})


def result_type(*args, return_weak_type_flag=False):
    """The dtype JAX's promotion gives ``args`` (``jnp.result_type``), canonicalized.

    Python ``int``/``float``/``complex`` values and types, and arrays/tracers with
    ``weak_type``, are weak: they take the other operands' width. The result is
    weak only if the lattice join is a weak node or all inputs are weak; a weak
    result has the default dtype of its kind. ``None`` means the default float.

    Args:
      *args: values (Python scalars, arrays, tracers) or dtype-likes.
      return_weak_type_flag: if True, return ``(dtype, weak_type)``.

    Returns:
      The result ``np.dtype``, or ``(dtype, weak_type)``.

    Raises:
      TypeError: on no arguments, unsupported dtypes, or float0 mixed with others.

    >>> result_type(np.zeros(2, np.int8), 1), result_type(np.int32, 1.0)
    (dtype('int8'), dtype('float32'))
    >>> result_type(2, 1.5, return_weak_type_flag=True)
    (dtype('float32'), True)
    """
    cache = _RESULT_CACHE[config.jax_enable_x64]
    n = len(args)
    if n == 2:
        key = _arg_key(args[0]) + _arg_key(args[1])
    elif n == 1:
        key = _arg_key(args[0])
    elif n == 0:
        # NB: JAX raises ValueError here.
        raise TypeError("result_type() needs at least one argument (an array, a "
                        "scalar or a dtype); got no arguments.")
    else:
        key = frozenset(map(_arg_key, args))
    out = cache.get(key)
    if out is None:
        pairs = key if n > 2 else (key[:2], key[2:]) if n == 2 else (key,)
        if any(is_extended(dt) for dt, _ in pairs):
            dt = _extended_result_type(args)
            return (dt, False) if return_weak_type_flag else dt
        out = cache[key] = _result_type_uncached(pairs, config.jax_enable_x64)
    return out if return_weak_type_flag else out[0]


def _check_mode(value):
    if value not in ("standard", "strict"):
        raise ValueError(f"{value!r} is not a valid NumpyDtypePromotion")


def _on_flag(name, value):
    if name == "jax_numpy_dtype_promotion":
        _strict[0] = value == "strict"
        for cache in _RESULT_CACHE:
            cache.clear()


config._add_validator("jax_numpy_dtype_promotion", _check_mode)
config._add_listener(_on_flag)
