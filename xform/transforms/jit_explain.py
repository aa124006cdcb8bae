"""``jax_explain_cache_misses``: say why ``jit`` traces a function again.

On a trace-cache miss, jit compares the new cache key (pytree structure, avals,
static arguments) with the closest key it has seen for that function and logs, on
the ``xform`` logger at WARNING, which argument changed and how, e.g.::

    TRACING CACHE MISS at train.py:12 (f) because:
      for f defined at train.py:3
      x: now f32[4], before f32[3]

Also the leaf names used by the donated-Array error (``args[0]['w']`` becomes
``params['w']``).
"""
import inspect
import logging
import os

from xform.core import tree_util

logger = logging.getLogger("xform")
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_seen_code = {}  # (file, first line) of traced functions -> how many were traced


def _code_key(fun):
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno)


def note_traced(fun):
    """Remember that a function defined at ``fun``'s source line was traced."""
    key = _code_key(fun)
    if key is not None:
        _seen_code[key] = _seen_code.get(key, 0) + 1


def _source(fun):
    key = _code_key(fun)
    return "<unknown>" if key is None else f"{key[0]}:{key[1]}"


def _user_frame():
    frame = inspect.currentframe()
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PKG_DIR + os.sep):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _param_names(wrapped):
    cache = wrapped._cache
    if cache.sig is None:
        try:
            params = inspect.signature(wrapped._fun).parameters.values()
            cache.sig = [p.name for p in params
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            cache.sig = []
    return cache.sig


def _arg_name(wrapped, pos):
    names = _param_names(wrapped)
    return names[pos] if pos < len(names) else f"args[{pos}]"


def _dyn_positions(nargs, static):
    static_pos = {where for where, _, _ in static if isinstance(where, int)}
    return [i for i in range(nargs) if i not in static_pos]


def _name_of_path(wrapped, path, positions):
    head, rest = path[0], path[1:]
    if head.idx == 0:
        name = _arg_name(wrapped, positions[rest[0].idx])
    else:
        name = str(rest[0].key)
    return name + tree_util.keystr(rest[1:])


def _leaf_names(wrapped, in_tree, nargs, static):
    try:
        tree = tree_util.tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
        paths = [p for p, _ in tree_util.tree_leaves_with_path(tree)]
    except Exception:  # noqa: BLE001  (a custom node refusing placeholder leaves)
        return [f"argument leaf {i}" for i in range(in_tree.num_leaves)]
    positions = _dyn_positions(nargs, static)
    return [_name_of_path(wrapped, p, positions) for p in paths]


def leaf_name(wrapped, args, kwargs, i):
    """The user's name for flat argument leaf ``i`` of a call (``params['w']``)."""
    names = leaf_names(wrapped, args, kwargs)
    return names[i] if i < len(names) else f"argument leaf {i}"


def leaf_names(wrapped, args, kwargs):
    """The user's names of a call's flat argument leaves."""
    dyn_args, dyn_kwargs, static, _ = wrapped._split_static(args, kwargs)
    _, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
    return _leaf_names(wrapped, in_tree, len(args), static)


def _short(aval):
    return aval.str_short() + ("{weak_type=True}" if aval.weak_type else "")


def _arg_structures(wrapped, in_tree, nargs, static):
    """{argument name: its pytree structure} for one key."""
    try:
        dyn_args, dyn_kwargs = tree_util.tree_unflatten(
            in_tree, list(range(in_tree.num_leaves)))
    except Exception:  # noqa: BLE001
        return None
    positions = _dyn_positions(nargs, static)
    out = {_arg_name(wrapped, p): tree_util.tree_structure(a)
           for p, a in zip(positions, dyn_args)}
    out.update({k: tree_util.tree_structure(v) for k, v in dyn_kwargs.items()})
    return out


_CONTEXT_FLAGS = ("jax_default_matmul_precision", "jax_numpy_dtype_promotion",
                  "jax_numpy_rank_promotion",   # (jit's trace key holds their values)
                  "user contexts (make_user_context)", "compute_on's compute type",
                  "the mesh in context")


def _differences(wrapped, new, old):
    in_tree, avals, static, nargs, x64, context, axes = new
    o_tree, o_avals, o_static, o_nargs, o_x64, o_context, o_axes = old
    out = []
    if x64 != o_x64:
        out.append(f"jax_enable_x64: now {x64}, before {o_x64}")
    for flag, now, before in zip(_CONTEXT_FLAGS, context, o_context):
        if now != before:
            out.append(f"{flag}: now {now!r}, before {before!r}")
    if axes != o_axes:
        out.append(f"bound axis names and sizes: now {list(axes)}, before {list(o_axes)}")
    if nargs != o_nargs:
        out.append(f"number of positional arguments: now {nargs}, before {o_nargs}")
    now_static = {w: (t, v) for w, t, v in static}
    before_static = {w: (t, v) for w, t, v in o_static}
    for where in sorted(set(now_static) | set(before_static), key=str):
        a, b = now_static.get(where), before_static.get(where)
        if a != b or (a and b and a[0] is not b[0]):
            name = _arg_name(wrapped, where) if isinstance(where, int) else where
            show = (lambda tv: "not passed" if tv is None
                    else f"{tv[1]!r} ({tv[0].__name__})")
            out.append(f"static argument {name}: now {show(a)}, before {show(b)}")
    if in_tree != o_tree:
        now_s = _arg_structures(wrapped, in_tree, nargs, static)
        before_s = _arg_structures(wrapped, o_tree, o_nargs, o_static)
        if now_s is None or before_s is None:
            out.append(f"different input pytree structure: now {in_tree}, before {o_tree}")
        else:
            for name in list(now_s) + [n for n in before_s if n not in now_s]:
                a, b = now_s.get(name), before_s.get(name)
                if a != b:
                    out.append(f"{name}: different pytree structure: now {a}, before {b}")
    elif avals != o_avals:
        names = _leaf_names(wrapped, in_tree, nargs, static)
        for name, a, b in zip(names, avals, o_avals):
            if a != b:
                out.append(f"{name}: now {_short(a)}, before {_short(b)}")
    return out


def explain_cache_miss(wrapped, key, args, static_nums):
    """Log why ``wrapped`` (a JitWrapped) is about to trace for cache key ``key``."""
    fun, name = wrapped._fun, wrapped._name
    lines = [f"TRACING CACHE MISS at {_user_frame()} ({name}) because:"]
    seen = wrapped._cache.jaxprs
    if not seen:
        lines.append(f"  never seen function:\n    {name} id={id(fun)} defined at "
                     f"{_source(fun)}")
        if _seen_code.get(_code_key(fun), 0):
            lines.append("  but seen another function defined on the same line; maybe the "
                         "function is being re-defined repeatedly, preventing caching?")
    else:
        diffs = min((_differences(wrapped, key, old) for old in seen), key=len)
        lines.append(f"  for {name} defined at {_source(fun)}")
        lines += [f"  {d}" for d in diffs] or ["  a key that differs in no argument"]
    logger.warning("\n".join(lines))
