"""``jit``, ``make_jaxpr``, ``eval_shape`` and the ahead-of-time stages API.

A jitted call flattens its arguments, keys a cache on (pytree structure, avals,
static arguments), and on a miss traces to a ClosedJaxpr, lowers it to StableHLO
and compiles it with XLA. Positional-Array-only calls take a leaner path keyed
on avals alone. Under another transformation, ``jit`` binds ``pjit`` instead so
that transformation sees through the call.
"""
import functools
import inspect
import weakref

from xform.core import tree_util
from xform.core.array import Array
from xform.core.avals import ShapedArray, aval_of_value
from xform.core.config import config
from xform.core.trace import Tracer, _context, eval_trace, get_aval
from xform.interpreters import dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.pjit import pjit_p

_all_jitted = weakref.WeakSet()


class ShapeDtypeStruct:
    """Shape and dtype of an array, without data (``eval_shape``'s currency)."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        from xform.core import dtypes
        self.shape = tuple(shape)
        self.dtype = dtypes.canonicalize_dtype(dtype)
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: ShapedArray(self.shape, self.dtype).size)

    @property
    def aval(self):
        return ShapedArray(self.shape, self.dtype, self.weak_type)

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


def _abstractify(x, path_fn):
    if isinstance(x, (Array, Tracer, ShapeDtypeStruct)):
        return x.aval
    try:
        return aval_of_value(x)
    except TypeError:
        raise TypeError(
            f"Error interpreting argument to {path_fn()[0]} as an abstract array. The "
            f"problematic value is of type {type(x)} and was passed to the function at "
            f"path {path_fn()[1]}.\nThis typically means that a jit-wrapped function was "
            "called with a non-array argument, and this argument was not marked as static "
            "using the static_argnums or static_argnames parameters of jit.") from None


def _arg_path(path):
    """Show a key path into ``(args, kwargs)`` as ``args[0]['a']`` / ``kwargs['b']``."""
    head, rest = path[0], path[1:]
    return ("args" if head.idx == 0 else "kwargs") + tree_util.keystr(rest)


def _flat_avals(fun_name, leaves, in_tree):
    avals = []
    for i, x in enumerate(leaves):
        if type(x) is Array:
            avals.append(x.aval)
        else:
            def path_fn(i=i):
                tree = tree_util.tree_unflatten(in_tree, leaves)
                path = tree_util.tree_flatten_with_path(tree)[0][i][0]
                return fun_name, _arg_path(path)
            avals.append(_abstractify(x, path_fn))
    return tuple(avals)


def _resolve_static(fun, static_argnums, static_argnames):
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnums = tuple(static_argnums or ())
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


class _Entry:
    """A compiled specialization: executable, consts and how to rebuild outputs."""
    __slots__ = ("compiled", "out_tree", "single")

    def __init__(self, compiled, out_tree):
        self.compiled = compiled
        self.out_tree = out_tree
        self.single = out_tree.num_leaves == 1 and tree_util.treedef_is_leaf(out_tree)


class JitWrapped:
    """The callable ``jit`` returns. Also offers ``lower`` (AOT) and ``trace``."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=()):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._static_argnums, self._static_argnames = _resolve_static(
            fun, static_argnums, static_argnames)
        self._donate_argnums = donate_argnums   # NB: accepted; CPU buffers are not donated
        self._name = getattr(fun, "__name__", "fun")
        self._jaxprs = {}   # key -> (ClosedJaxpr, out_tree)
        self._entries = {}  # key -> _Entry
        self._fast = {}     # tuple of avals (positional Arrays, no statics) -> _Entry
        self._hoisted_cache = {}  # key -> (closed, jaxpr with consts as inputs, consts)
        self._plain = not self._static_argnums and not self._static_argnames
        _all_jitted.add(self)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        if self._plain and not kwargs and _context.trace is eval_trace:
            avals = []
            for a in args:
                if type(a) is not Array:
                    break
                avals.append(a.aval)
            else:
                entry = self._fast.get(tuple(avals))
                if entry is not None:
                    c = entry.compiled
                    bufs = [a._buf for a in args]
                    outs = c.execute(c.const_bufs + bufs if c.const_bufs else bufs)
                    if entry.single:
                        return Array(outs[0], c.out_avals[0])
                    return tree_util.tree_unflatten(
                        entry.out_tree, [Array(b, a) for b, a in zip(outs, c.out_avals)])
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if config.jax_disable_jit:
            return self._fun(*args, **kwargs)
        key, leaves, closed, out_tree = self._specialize(args, kwargs)
        if _context.trace is eval_trace and not any(isinstance(x, Tracer) for x in leaves):
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(
                    dispatch.CompiledJaxpr(closed, name=f"jit({self._name})"), out_tree)
                if self._plain and not kwargs and all(type(a) is Array for a in args):
                    self._fast[tuple(a.aval for a in args)] = entry
            outs = entry.compiled(leaves)
        else:
            # Consts become explicit operands so outer transformations see them (they may
            # be tracers the function closed over).
            hoisted, consts = self._hoisted(key, closed)
            outs = pjit_p.bind(*consts, *leaves, jaxpr=hoisted, name=self._name)
        return tree_util.tree_unflatten(out_tree, outs)

    def _hoisted(self, key, closed):
        hit = self._hoisted_cache.get(key)
        if hit is None or hit[0] is not closed:
            hit = (closed,) + pe.convert_constvars_jaxpr(closed)
            if key in self._jaxprs:
                self._hoisted_cache[key] = hit
        return hit[1], hit[2]

    def _split_static(self, args, kwargs):
        nums, names = self._static_argnums, self._static_argnames
        n = len(args)
        # Static arguments not passed take their defaults inside the function, as in JAX.
        nums = {i % n for i in nums if -n <= i < n}
        # The key holds each static value's type too: 1 == True == 1.0 hash equal, but
        # they trace to different programs (as in JAX, which compares types).
        static = tuple((i, type(args[i]), args[i]) for i in sorted(nums)) + tuple(
            (k, type(kwargs[k]), kwargs[k]) for k in sorted(kwargs) if k in names)
        for where, _, value in static:
            try:
                hash(value)
            except TypeError:
                raise ValueError(
                    f"Non-hashable static arguments are not supported. An error occurred "
                    f"while trying to hash an object of type {type(value)}, {value!r}. "
                    f"The static argument {where!r} of {self._name} must be hashable "
                    "(e.g. a tuple instead of a list).") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        return dyn_args, dyn_kwargs, static, nums

    def _specialize(self, args, kwargs):
        dyn_args, dyn_kwargs, static, nums = self._split_static(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = _flat_avals(self._name, leaves, in_tree)
        key = (in_tree, avals, static, len(args), config.jax_enable_x64)
        hit = self._jaxprs.get(key)
        if hit is None:
            hit = self._trace(in_tree, avals, args, kwargs, nums)
            # A jaxpr that captured tracers of an enclosing transformation is valid only
            # for this call: don't cache it.
            if not any(isinstance(c, Tracer) for c in hit[0].consts):
                self._jaxprs[key] = hit
        return (key, leaves) + hit

    def _trace(self, in_tree, avals, args, kwargs, static_nums):
        out_tree_box = []

        def flat_fun(*flat):
            dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat)
            it = iter(dyn_args)
            full_args = [args[i] if i in static_nums else next(it) for i in range(len(args))]
            full_kwargs = {k: (dyn_kwargs[k] if k in dyn_kwargs else kwargs[k]) for k in kwargs}
            out = self._fun(*full_args, **full_kwargs)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        closed = pe.trace_to_jaxpr(flat_fun, avals)
        return closed, out_tree_box[0]

    def trace(self, *args, **kwargs):
        """Trace without compiling: returns a ``Traced`` with ``.jaxpr`` and ``.lower()``."""
        _, _, closed, out_tree = self._specialize(args, kwargs)
        return Traced(closed, out_tree, self._name)

    def lower(self, *args, **kwargs):
        """Ahead-of-time lowering for these arguments' shapes: returns ``Lowered``."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs):
        return eval_shape(self._fun, *args, **kwargs)

    def clear_cache(self):
        self._jaxprs.clear()
        self._entries.clear()
        self._fast.clear()
        self._hoisted_cache.clear()


class Traced:
    def __init__(self, closed, out_tree, name):
        self.jaxpr = closed
        self.out_tree = out_tree
        self.name = name

    def lower(self):
        return Lowered(self.jaxpr, self.out_tree, self.name)


class Lowered:
    """A program lowered to StableHLO; ``as_text()`` shows it, ``compile()`` builds it."""

    def __init__(self, closed, out_tree, name):
        self._closed = closed
        self._out_tree = out_tree
        self._name = name
        self._text = mlir.lower_jaxpr_to_module(closed)

    def as_text(self, dialect="stablehlo"):
        if dialect not in ("stablehlo", "mhlo"):
            raise ValueError(f"unknown dialect {dialect!r}; xform lowers to 'stablehlo'")
        return self._text

    def compile(self):
        return Compiled(dispatch.CompiledJaxpr(self._closed), self._closed, self._out_tree)

    def cost_analysis(self):
        return self.compile().cost_analysis()


class Compiled:
    """An executable for fixed argument shapes; call it with arrays of those shapes."""

    def __init__(self, compiled, closed, out_tree):
        self._compiled = compiled
        self._in_avals = closed.in_avals
        self._out_tree = out_tree

    def __call__(self, *args, **kwargs):
        leaves, _ = tree_util.tree_flatten((args, kwargs))
        avals = [get_aval(x) for x in leaves]
        if [(a.shape, a.dtype) for a in avals] != [(a.shape, a.dtype) for a in self._in_avals]:
            raise TypeError(
                "Argument types differ from the types for which this computation was "
                f"compiled: expected {[a.str_short() for a in self._in_avals]}, got "
                f"{[a.str_short() for a in avals]}")
        return tree_util.tree_unflatten(self._out_tree, self._compiled(leaves))

    def as_text(self):
        return self._compiled.executable.hlo_text()

    def cost_analysis(self):
        return self._compiled.executable.cost_analysis()


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), in_shardings=None, out_shardings=None, device=None,
        backend=None, inline=False, keep_unused=False):
    """Compile ``fun`` with XLA: traced once per argument signature, then cached.

    Args:
      fun: function of arrays (pytrees of arrays) returning arrays.
      static_argnums, static_argnames: arguments treated as compile-time constants
        (they must be hashable; each new value re-traces).
      donate_argnums, donate_argnames: accepted for compatibility; buffers are not
        donated on CPU.
      in_shardings, out_shardings, device, backend, inline, keep_unused: accepted for
        JAX compatibility; xform runs on the default device.

    Returns:
      A wrapped function with the same signature, plus ``.lower(*args)``.

    >>> import xform, xform.numpy as jnp
    >>> xform.jit(lambda x: x * 2.0)(jnp.arange(3.0))
    Array([0., 2., 4.], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums)


def _clear_all(name, value):
    # x64 changes what tracing produces; disable_jit must bypass the fast path, which
    # checks no flags (it stays empty while jit is disabled: _call returns early).
    for f in list(_all_jitted):
        if name == "jax_enable_x64":
            f.clear_cache()
        elif name == "jax_disable_jit":
            f._fast.clear()
        elif name == "jax_debug_nans":  # executables bake the flag in
            f._entries.clear()
            f._fast.clear()


config._add_listener(_clear_all)


def make_jaxpr(fun, static_argnums=(), return_shape=False):
    """A function returning the ClosedJaxpr of ``fun`` for the given arguments.

    >>> import xform, xform.numpy as jnp
    >>> print(xform.make_jaxpr(jnp.sin)(1.0))
    { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """
    wrapped = JitWrapped(fun, static_argnums)

    @functools.wraps(fun)
    def make(*args, **kwargs):
        _, _, closed, out_tree = wrapped._specialize(args, kwargs)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in closed.out_avals]
            return closed, tree_util.tree_unflatten(out_tree, shapes)
        return closed
    return make


def eval_shape(fun, *args, **kwargs):
    """Shapes and dtypes of ``fun``'s outputs, without running it (arguments may be
    ShapeDtypeStructs)."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = _flat_avals(getattr(fun, "__name__", "fun"), leaves, in_tree)
    out_tree_box = []

    def flat_fun(*flat):
        a, k = tree_util.tree_unflatten(in_tree, flat)
        out_leaves, out_tree = tree_util.tree_flatten(fun(*a, **k))
        out_tree_box.append(out_tree)
        return out_leaves

    closed = pe.trace_to_jaxpr(flat_fun, avals)
    return tree_util.tree_unflatten(out_tree_box[0], [
        ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in closed.out_avals])
