"""jit's caches: per function (weakly keyed, shared by every ``jit`` wrapper of it with
the same options) its traces, executables and the keys of its cache-hit fast paths;
cleared where a config change alters what tracing or compiling produces."""

import inspect
import operator
import weakref

from xform.core import tree_util
from xform.core.config import config
from xform.core.pytree import builtin_treedef


def index_tuple(nums):
    """Argument numbers as a tuple of ints (JAX's ``_ensure_index_tuple``: one int-like,
    NumPy integers included, or a sequence of them)."""
    if nums is None:
        return ()
    try:
        return (operator.index(nums),)
    except TypeError:
        return tuple(map(operator.index, nums))


def resolve_static(fun, static_argnums, static_argnames):
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnums = index_tuple(static_argnums)
    static_argnames = tuple(static_argnames or ())
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return static_argnums, static_argnames
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = set(static_argnums)
    names = set(static_argnames)
    for i in static_argnums:
        if -len(positional) <= i < len(positional):
            names.add(positional[i])
    for n in static_argnames:
        if n in positional:
            nums.add(positional.index(n))
    return tuple(sorted(nums)), tuple(sorted(names))


class Entry:
    """A compiled specialization: executable, consts and how to rebuild outputs.

    ``c_out_tree`` is the output structure as a jaxlib C++ treedef (None when the
    output holds nodes only xform's registry knows): the hit paths rebuild with it."""
    __slots__ = ("compiled", "out_tree", "single", "c_out_tree", "run", "handlers",
                 "consts", "out_avals", "out_aval")

    def __init__(self, compiled, out_tree):
        self.compiled = compiled
        self.out_tree = out_tree
        self.single = out_tree.num_leaves == 1 and tree_util.treedef_is_leaf(out_tree)
        self.c_out_tree = builtin_treedef(out_tree)
        # What the hit paths use, copied here (one attribute load each, not two). A
        # mesh_jit.ReplicatedJaxpr has no run/handlers: it never enters a fast path.
        self.run = getattr(compiled, "run", None)
        self.handlers = getattr(compiled, "handlers", None)
        self.consts, self.out_avals = compiled.const_bufs, compiled.out_avals
        self.out_aval = self.out_avals[0] if self.single else None


class FunCache:
    """The traces and executables of one function under one set of jit options.

    Every ``jit`` wrapper of the same function object (with the same options) shares
    it, as JAX keys its cache on the function, weakly referenced: ``jit(f)(x)`` written
    inline re-traces nothing, and a global read by ``f`` keeps its traced value until
    the argument types change (JAX's "Common Gotchas")."""
    __slots__ = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames",
                 "plain", "jaxprs", "entries", "fast", "tree_fast", "hoisted", "sig",
                 "static_at",
                 "consumed", "placements", "__weakref__")

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums,
                 donate_argnames):
        self.static_argnums, self.static_argnames = resolve_static(
            fun, static_argnums, static_argnames)
        self.donate_argnums, self.donate_argnames = resolve_static(
            fun, donate_argnums, donate_argnames)
        self.plain = not self.static_argnums and not self.static_argnames
        self.jaxprs = {}    # key -> (ClosedJaxpr, out_tree)
        self.entries = {}   # key -> Entry
        self.fast = {}      # avals of positional Arrays (and statics' types, values) -> Entry
        self.static_at = {}  # number of positional arguments -> positions that are static
        self.tree_fast = {}  # (C++ treedef of args, avals) -> Entry
        self.hoisted = {}   # key -> (closed, jaxpr with consts as inputs, consts)
        self.sig = None     # parameter names, for cache-miss explanations
        self.consumed = {}  # key -> argument leaves whose typed keys the function consumes
        self.placements = {}  # sharded calls: jit_sharding.placement's memo
        all_caches.add(self)

    def clear(self):
        for d in (self.jaxprs, self.entries, self.fast, self.tree_fast, self.hoisted,
                  self.consumed, self.placements):
            d.clear()


fun_caches = weakref.WeakKeyDictionary()  # fun -> {options: FunCache}
all_caches = weakref.WeakSet()


def validate_argnums(fun, static_argnums, static_argnames, donate_argnums,
                     donate_argnames):
    """JAX's checks when ``jit`` is applied: each argnum within ``fun``'s positional
    parameters (unless it takes ``*args``), each argname one of its keyword parameters
    (unless it takes ``**kwargs``), and no argument both static and donated."""
    if all(a is None or type(a) in (tuple, list) and not a for a in (
            static_argnums, static_argnames, donate_argnums, donate_argnames)):
        return  # (the common jit(f): no inspect.signature per wrapper)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return
    kinds = [p.kind for p in params]
    n_pos = sum(k in (_POS_ONLY, _POS_OR_KW) for k in kinds)
    names = {}
    for what, nums in (("static_argnums", static_argnums), ("donate_argnums", donate_argnums)):
        nums = index_tuple(nums)
        if _VAR_POS not in kinds and nums and (-min(nums) > n_pos or max(nums) >= n_pos):
            raise ValueError(f"Jitted function has {what}={nums}, but only accepts "
                             f"{n_pos} positional arguments.")
        names[what] = {p.name for i, p in enumerate(params)
                       if p.kind is _POS_OR_KW and i in nums}
    kw = {p.name for p in params if p.kind in (_POS_OR_KW, _KW_ONLY)}
    for what, given in (("static_argnames", static_argnames),
                        ("donate_argnames", donate_argnames)):
        given = set(_as_tuple(given))
        if bad := given & {p.name for p in params if p.kind in (_POS_ONLY, _VAR_POS)}:
            raise ValueError(f"Jitted function has invalid argnames {bad} in {what}. "
                             "These are positional-only")
        if _VAR_KW not in kinds and (bad := given - kw):
            raise ValueError(f"Jitted function has invalid argnames {bad} in {what}. "
                             "Function does not take these args.")
    static = set(_as_tuple(static_argnames)) | names["static_argnums"]
    if both := static & (set(_as_tuple(donate_argnames)) | names["donate_argnums"]):
        raise ValueError("static_argnames and donate_argnames cannot intersect. Argument "
                         f"names {both} appear in both static_argnames and donate_argnames")


_POS_ONLY, _POS_OR_KW, _VAR_POS, _KW_ONLY, _VAR_KW = (
    inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY,
    inspect.Parameter.VAR_KEYWORD)


def _as_tuple(x):
    if x is None:
        return ()
    return (x,) if isinstance(x, (int, str)) else tuple(x)


def fun_cache(fun, shared, static_argnums, static_argnames, donate_argnums,
               donate_argnames, shardings_key=None):
    opts = (index_tuple(static_argnums), _as_tuple(static_argnames),
            index_tuple(donate_argnums), _as_tuple(donate_argnames))
    try:
        if not shared:
            raise TypeError
        per_fun = fun_caches.get(fun)
        if per_fun is None:
            per_fun = fun_caches[fun] = {}
    except Exception:  # noqa: BLE001  (not weakly referenceable, not hashable, or an
        per_fun = {}   # __eq__ that raises, e.g. on array fields): a private cache
    cache = per_fun.get(opts + (shardings_key,))
    if cache is None:
        cache = per_fun[opts + (shardings_key,)] = FunCache(fun, *opts)
    return cache


def _clear_all(name, value):
    # x64 (and the PRNG's counter layout) change what tracing produces; disable_jit must
    # bypass the fast paths, which check no flags (they stay empty while jit is
    # disabled: _call returns early).
    for c in list(all_caches):
        if name in ("jax_enable_x64", "jax_threefry_partitionable"):
            c.clear()
        elif name == "jax_debug_key_reuse":   # traces record consumed keys only with it
            c.clear()
        elif name in ("jax_disable_jit", "jax_debug_nans", "jax_debug_infs",
                      "jax_default_matmul_precision", "jax_default_device",
                      "jax_numpy_dtype_promotion", "jax_numpy_rank_promotion",
                      "user_context", "compute_on", "mesh"):
            if name in ("jax_debug_nans", "jax_debug_infs", "jax_default_device"):
                c.entries.clear()  # (executables bake them in)
            c.fast.clear()
            c.tree_fast.clear()


config._add_listener(_clear_all)
