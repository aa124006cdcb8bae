"""Mutable array references (JAX's ``jax.ref``: ``new_ref``, ``empty_ref``, ``freeze``,
``get``, ``set``, ``swap``, ``addupdate``, ``Ref``).

Design: a ``Ref`` is a Python box holding its current value, and every read or write is
an ordinary functional array operation on that value (``x[idx]``,
``x.at[idx].set(v)``). Executing the user's Python *is* the state discharge: inside any
transformation the box holds that transformation's tracers, so ``grad``, ``vmap`` and
``jit`` of a function that creates and uses its own refs see plain dataflow, and the
jaxpr needs no state primitives (nothing for DCE to drop: a write that matters is an
output of the computation).

``jit`` is where a program can outlive its tracing, so it is where refs need care: a
ref from outside the function (a closed-over ref, or a ref argument) is a *ref scope*
input. The first access while tracing adds a jaxpr input for the ref's value; its
final value becomes an extra output; every call passes the ref's current value in and
writes the result back (``transforms/jit.py``). Nested jits compose (the caller's reads
and writes are themselves scoped).

``lax`` loops and conditionals (``scan``, ``while_loop``, ``fori_loop``, ``cond``,
``switch``) thread refs from outside their functions through the carry/operands
(``thread_refs``): the functions are traced under a scope that detects such refs, and
traced again with each ref found as an extra carry (a retrace only when refs are used).

NB (differences from JAX): writing, inside a ``custom_jvp``/``custom_vjp`` function or
``checkpoint``, to a ref created outside it raises (JAX threads it through).
``empty_ref`` works eagerly too (filled with zeros). Under ``grad``, writing a
differentiated value into a ref created outside the differentiated function raises,
as in JAX.
"""
import threading

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import Tracer, current_trace, get_aval
from xform.core.transfer import device_put_value
from xform.interpreters.ad import JVPTrace, JVPTracer, Zero
from xform.interpreters.batching import BatchTrace
from xform.interpreters.partial_eval import JaxprTracer
from xform.lax.elementwise import convert_element_type
from xform.lax.shapes import broadcast_in_dim, full

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "freeze", "get", "new_ref",
           "set", "swap"]


class AbstractRef:
    """The type of a ``Ref``: ``Ref{float32[3]}``."""
    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval):
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: self.inner_aval.ndim)
    size = property(lambda self: self.inner_aval.size)

    def __eq__(self, other):
        return type(other) is AbstractRef and other.inner_aval == self.inner_aval

    def __hash__(self):
        return hash(("ref", self.inner_aval))

    def str_short(self):
        return f"Ref{{{self.inner_aval.str_short()}}}"

    def __repr__(self):
        a = self.inner_aval
        return f"Ref{{{a.dtype.name}[{','.join(map(str, a.shape))}]}}"


class _Scopes(threading.local):
    def __init__(self):
        self.stack = []


_scopes = _Scopes()


class RefScope:
    """A traced function's view of refs from outside it: for each such ref, the jaxpr
    input holding its value on entry (``inputs``) and its current value (``values``).

    A jit scope adds inputs as refs are first touched. A ``lookup_only`` scope (a loop
    body or cond branch, see ``thread_refs``) knows its refs in advance; touching any
    other outside ref raises ``_FoundRef`` so the caller can retrace with it."""

    def __init__(self, trace, lookup_only=False):
        self.trace = trace
        self.lookup_only = lookup_only
        self.inputs = {}   # Ref -> tracer (jaxpr input), in order of first access
        self.values = {}   # Ref -> current value inside the trace

    def __enter__(self):
        _scopes.stack.append(self)
        return self

    def __exit__(self, *exc):
        _scopes.stack.pop()

    def seed(self, ref, tracer):
        """Make ``ref`` (a ref argument) start as ``tracer``."""
        self.inputs[ref] = tracer
        self.values[ref] = tracer


def _scope():
    return _scopes.stack[-1] if _scopes.stack else None


class _Parent:
    """Run a block in the enclosing scope (to read an outer ref's value there)."""

    def __enter__(self):
        self.top = _scopes.stack.pop()

    def __exit__(self, *exc):
        _scopes.stack.append(self.top)


class Ref:
    """A mutable array reference. Read with ``ref[idx]`` (``ref[...]`` for all of it),
    write with ``ref[idx] = v`` and ``ref[idx] += v``; create with ``new_ref``.

    >>> import xform, xform.numpy as jnp
    >>> r = xform.new_ref(jnp.zeros(3))
    >>> r[1] += 2.0
    >>> r
    Ref([0., 2., 0.], dtype=float32)
    """
    __slots__ = ("_value", "_scope", "_trace", "_aval", "__weakref__")

    def __init__(self, value):
        self._value = value
        self._scope = _scope()          # the jit scope it was created in (None: eager)
        self._trace = current_trace()   # the trace it was created under
        a = get_aval(value)
        self._aval = ShapedArray(a.shape, a.dtype)

    @classmethod
    def placeholder(cls, scope, tracer):
        """A ref argument of a jit: a ref from outside ``scope`` starting as ``tracer``."""
        ref = cls(tracer)
        ref._scope = _OUTSIDE
        scope.seed(ref, tracer)
        return ref

    # -- the value as seen from the current scope --
    def _read(self):
        scope = _scope()
        if scope is None or self._scope is scope:
            return self._value
        value = scope.values.get(self)
        if value is None:
            if scope.lookup_only:
                raise _FoundRef(self)
            with _Parent():
                outer = self._read()
            value = scope.trace.new_arg(get_aval(outer).strip_weak_type())
            scope.inputs[self] = value
            scope.values[self] = value
        return value

    def _write(self, value):
        scope = _scope()
        owner = self._trace if scope is None or self._scope is scope else scope.trace
        value = _check_write(self, value, owner)
        if scope is None or self._scope is scope:
            self._value = value
        else:
            self._read()  # registers the ref as an input of the scope
            scope.values[self] = value

    aval = property(lambda self: AbstractRef(self._aval))
    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: self._aval.ndim)
    size = property(lambda self: self._aval.size)

    def __getitem__(self, idx):
        return get(self, idx)

    def __setitem__(self, idx, value):
        set(self, idx, value)

    def get(self, idx=None):
        return get(self, idx)

    def set(self, value, idx=None):
        set(self, idx, value)

    def swap(self, value, idx=None):
        return swap(self, idx, value)

    def addupdate(self, x, idx=None):
        addupdate(self, idx, x)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._read(), dtype=dtype)

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __repr__(self):
        value = self._read()
        if isinstance(value, Tracer):
            return f"Ref<{self.aval!r}>"
        r = repr(value)
        return "Ref" + r[len("Array"):] if r.startswith("Array") else f"Ref({r})"


_OUTSIDE = object()  # the scope of jit's ref-argument placeholders: none they can see


def check_no_ref_outputs(fun, out_leaves):
    """jit cannot return a ref (its identity would not survive compilation), as in JAX."""
    for x in out_leaves:
        if isinstance(x, Ref):
            name = getattr(fun, "__name__", "fun")
            raise ValueError(
                f"function {name} traced for jit returned a mutable array reference of "
                f"type {x.aval!r}, but mutable array references cannot be returned.")


class _FoundRef(Exception):
    """Internal: a loop body or branch touched a ref from outside it (``thread_refs``)."""

    def __init__(self, ref):
        super().__init__("internal: a ref from outside a traced body (please report)")
        self.ref = ref


def thread_refs(call, funs, adapt):
    """Run a control-flow construct whose functions may use refs from outside them.

    ``call(funs, values)`` runs the construct with functions ``funs``; with ``values``
    (the refs' values) non-empty it appends them to its carry/operands and returns
    ``(result, final values)``, else ``(result, [])``. First it runs with the user's
    functions under a detecting scope; each ref found makes it run again with that ref
    threaded through: ``adapt(i, inner)`` builds function ``i`` from
    ``inner(values, *args) -> (out, new values)``, which runs ``funs[i]`` in a
    ``lookup_only`` scope seeded with ``values``. The refs get their final values after
    the construct."""
    found = []
    while True:
        values = [r._read() for r in found]   # in the caller's scope
        try:
            with RefScope(None, lookup_only=True):
                fs = [adapt(i, _seeded(f, found)) for i, f in enumerate(funs)] if found \
                    else funs
                result, new_values = call(fs, values)
        except _FoundRef as e:
            if e.ref in found:
                raise
            found.append(e.ref)
            continue
        for r, v in zip(found, new_values):
            r._write(v)
        return result


def _seeded(f, refs):
    def inner(values, *args):
        with RefScope(current_trace(), lookup_only=True) as scope:
            for r, v in zip(refs, values):
                scope.seed(r, v)
            out = f(*args)
            return out, [scope.values[r] for r in refs]
    return inner


def check_no_aliasing(name, arg_refs, positions, closed_refs):
    """A jit call may see each ref once (no aliasing), as in JAX: not twice as an
    argument, nor both as an argument and closed over."""
    seen = {}
    for r, i in zip(arg_refs, positions):
        if id(r) in seen:
            raise ValueError(
                "only one reference to a mutable array may be passed as an argument to a "
                f"function, but when tracing {name} for jit the mutable array reference of "
                f"type {r.aval!r} appeared at both leaf {seen[id(r)]} and leaf {i} of the "
                "arguments.")
        seen[id(r)] = i
    for r in closed_refs:
        if id(r) in seen:
            raise ValueError(
                f"when tracing {name} for jit, a mutable array reference of type "
                f"{r.aval!r} was both closed over and passed as the argument at leaf "
                f"{seen[id(r)]}.")


def _check_write(ref, value, owner):
    """Under a transformation, a ref may only receive values of the trace that owns it
    (or of traces around it): a tracer of an inner trace would outlive it. A value that
    only looks inner (a JVP tracer with a zero tangent, e.g. after ``stop_gradient``; a
    known value under partial evaluation) is stored as its plain value. Returns the
    value to store."""
    if not isinstance(value, Tracer) or _owned(value, owner):
        return value
    plain = _strip(value)
    if plain is not value and (not isinstance(plain, Tracer) or _owned(plain, owner)):
        return plain
    if isinstance(value._trace, JVPTrace):
        raise ValueError(
            "Exception performing a set/swap operation with a differentiated value on a "
            f"non-differentiated array reference of type {ref.aval!r}. Move the array "
            "reference to be an argument of the differentiated function?")
    if isinstance(value._trace, BatchTrace):
        raise ValueError(
            "Exception performing a set/swap operation with vmapped value on an unbatched "
            f"array reference of type {ref.aval!r}. Move the array reference to be an "
            "argument to the vmapped function?")
    raise NotImplementedError(
        f"Writing a value traced by {type(value._trace).__name__} into an array reference "
        f"of type {ref.aval!r} created outside that transformation is not supported in "
        "xform (e.g. from a custom_jvp/custom_vjp function or a checkpoint to a ref "
        "created outside it): return the value from the function instead.")


def _owned(value, owner):
    t = owner
    while t is not None:
        if value._trace is t:
            return True
        t = t.parent
    scope = _scope()
    if owner is not None and scope is not None and scope.lookup_only:
        # A loop body or branch: values of enclosing traces are fine (they become the
        # body's constants); only those of traces inside the body would leak.
        t = value._trace.parent
        while t is not None and t is not owner:
            t = t.parent
        return t is None
    return False


def _strip(value):
    while True:
        if type(value) is JVPTracer and type(value.tangent) is Zero:
            value = value.primal
        elif type(value) is JaxprTracer and value.jvar is None:
            value = value.value
        else:
            return value


def batch_refs(flat_fun, leaves, dims, out_dims_fn):
    """``vmap`` of a function with ref arguments (JAX allows it): each ref's value is
    mapped at the ref's in_axis; inside, the function sees a ref holding the batched
    value (an unbatched ref accepts only unbatched writes), and the final values come
    back at the same axes. Returns ``(fun, leaves, out_dims_fn, finish)``;
    ``finish(outs)`` writes the refs and returns the function's own outputs."""
    pos = [i for i, x in enumerate(leaves) if isinstance(x, Ref)]
    refs = [leaves[i] for i in pos]
    leaves = list(leaves)
    for i in pos:
        leaves[i] = leaves[i]._read()

    def fun(*xs):
        xs = list(xs)
        inner = []
        for i in pos:
            r = Ref(xs[i])
            if dims[i] is None:   # unbatched: owned by the trace around the vmap
                r._trace = current_trace().parent
            inner.append(r)
            xs[i] = r
        outs = flat_fun(*xs)
        return list(outs) + [r._read() for r in inner]

    def dims_fn(out_avals):
        n = len(out_avals) - len(pos)
        return list(out_dims_fn(out_avals[:n])) + [dims[i] for i in pos]

    def finish(outs):
        n = len(outs) - len(pos)
        for r, v in zip(refs, outs[n:]):
            r._write(v)
        return outs[:n]
    return fun, leaves, dims_fn, finish


def _check_ref(ref, what):
    if not isinstance(ref, Ref):
        raise TypeError(f"{what} requires an array reference (a Ref), got "
                        f"{type(ref).__name__}")


def _idx(idx):
    return Ellipsis if idx is None or (type(idx) is tuple and not idx) else idx


def new_ref(init_val, *, memory_space=None, kind=None):
    """Create a mutable array reference holding ``init_val``.

    Args:
      init_val: the initial value (an array or scalar).
      memory_space: accepted for JAX compatibility (one memory space).
      kind: accepted for JAX compatibility (``None`` or ``"no_grad_no_remat"``).

    Returns:
      A ``Ref``.

    >>> import xform
    >>> xform.new_ref(1.0)[...]
    Array(1., dtype=float32)
    """
    del memory_space
    if kind not in (None, "no_grad_no_remat"):
        raise ValueError(f"new_ref: unknown kind {kind!r}")
    if isinstance(init_val, Ref):
        raise TypeError("new_ref: the initial value must be an array, not a Ref")
    value = _as_array(init_val)
    a = get_aval(value)
    if a.weak_type:
        value = convert_element_type(value, a.dtype)
    return Ref(value)


def _as_array(x):
    """``x`` (an Array, tracer, NumPy value, Python scalar or nested list of numbers) as
    ``jnp.asarray`` makes it; refs sit below numpy."""
    if isinstance(x, Tracer):
        return x
    return device_put_value(np.asarray(x) if isinstance(x, (list, tuple)) else x)


def empty_ref(ty, *, memory_space=None, kind=None):
    """A ``Ref`` of type ``ty`` (anything with ``.shape`` and ``.dtype``, e.g. a
    ``ShapeDtypeStruct``) to be written before it is read.

    NB: JAX leaves the contents undefined (and has no eager rule); xform fills zeros.

    >>> import xform, xform.numpy as jnp
    >>> xform.empty_ref(xform.ShapeDtypeStruct((2,), jnp.float32)).shape
    (2,)
    """
    dtype = dtypes.canonicalize_dtype(np.dtype(ty.dtype))
    return new_ref(full(tuple(ty.shape), 0, dtype), memory_space=memory_space, kind=kind)


def freeze(ref):
    """The final value of ``ref`` (JAX invalidates the ref; xform leaves it usable).

    >>> import xform
    >>> xform.freeze(xform.new_ref(2.0))
    Array(2., dtype=float32)
    """
    _check_ref(ref, "freeze")
    return ref._read()


def get(ref, idx=None):
    """``ref[idx]``: read (part of) a ref's value."""
    _check_ref(ref, "get")
    value = ref._read()
    idx = _idx(idx)
    return value if idx is Ellipsis else value[idx]


def swap(ref, idx, value):
    """Write ``value`` at ``ref[idx]`` and return the previous value there."""
    _check_ref(ref, "swap")
    old = ref._read()
    idx = _idx(idx)
    prev = old if idx is Ellipsis else old[idx]
    value = _as_array(value)
    if get_aval(value).dtype != ref.dtype:
        value = convert_element_type(value, ref.dtype)
    if idx is Ellipsis:
        if get_aval(value).shape != ref.shape:
            if np.broadcast_shapes(get_aval(value).shape, ref.shape) != ref.shape:
                raise ValueError(f"Invalid shape for `swap`: the Ref has shape {ref.shape} "
                                 f"but the value has shape {get_aval(value).shape}")
            nd = len(ref.shape)
            value = broadcast_in_dim(value, ref.shape,
                                     tuple(range(nd - get_aval(value).ndim, nd)))
        new = value
    else:
        new = old.at[idx].set(value)
    ref._write(new)
    return prev


def set(ref, idx, value):  # noqa: A001  (JAX's name)
    """``ref[idx] = value``: write (part of) a ref's value.

    >>> import xform, xform.numpy as jnp
    >>> r = xform.new_ref(jnp.zeros(3))
    >>> xform.ref.set(r, 1, 10.0)
    >>> r
    Ref([ 0., 10.,  0.], dtype=float32)
    """
    swap(ref, idx, value)


def addupdate(ref, idx, x):
    """``ref[idx] += x`` in one step."""
    _check_ref(ref, "addupdate")
    idx = _idx(idx)
    old = ref._read()
    if idx is Ellipsis:
        swap(ref, idx, old + x)
    else:
        ref._write(old.at[idx].add(x))
