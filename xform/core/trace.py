"""Primitives, traces and tracers: the stackless interpreter core.

Every operation is ``prim.bind(*args, **params)``, which hands the primitive to
the *current trace*. A transformation (jvp, vmap, jaxpr tracing) installs its
trace as current while the user function runs; its rules run with the trace's
parent as current, so nested transformations compose. Values that are not the
trace's own tracers (constants, tracers of outer traces) are lifted as
constants. This is the "stackless" design of autodidax part 2 and current JAX;
the rejected alternative, a global stack of trace levels, needs
level bookkeeping in every rule.
"""
import threading

import numpy as np

from xform.core import sharding_types
from xform.core.array_ops import ArrayOps
from xform.core.avals import MemorySpace, ShapedArray, aval_of_value, type_memory_spaces
from xform.core.errors import (TracerArrayConversionError, TracerBoolConversionError,
                               TracerIntegerConversionError, ConcretizationTypeError,
                               UnexpectedTracerError)


class Primitive:
    """A named operation. Rules for each interpreter live in that interpreter's registry.

    ``impl`` runs it on concrete values (the eval trace); ``abstract_eval`` maps
    input avals to output aval(s). ``multiple_results`` primitives return lists.
    """
    multiple_results = False
    # How lazy mode (interpreters/lazy.py) runs it, declared with the impl it describes
    # (``def_impl`` resets it): "record" (the impl compiles the lowering: record the
    # equation), "structural" (the same, jaxpr params canonicalized), "inline" (the
    # impl evaluates a jaxpr: record the equations inside); "jit", "host_callback",
    # "pmap" and "eager" (the default) need values: a barrier, then the impl eagerly.
    lazy_kind = "eager"
    registry = []   # every primitive ever declared (the rule-completeness test walks it)

    def __init__(self, name):
        self.name = name
        self.impl = None
        self._abstract_eval = None
        Primitive.registry.append(self)

    def bind(self, *args, **params):
        trace = _context.trace
        if trace is eval_trace:  # eager: straight to impl (one frame less per op)
            return self.impl(*args, **params)
        if _context.vma is not None:  # inside shard_map(check_vma=True): implicit pvary
            args = _context.vma.match(self, args, params)
        return trace.process_primitive(self, args, params)

    def def_impl(self, impl, lazy_kind="eager"):
        self.impl = impl
        self.lazy_kind = lazy_kind
        return impl

    def def_abstract_eval(self, rule):
        self._abstract_eval = rule
        return rule

    def abstract_eval(self, *avals, **params):
        out = self._abstract_eval(*avals, **params)
        if _context.vma is not None:  # the outputs' varying manual axes
            out = _context.vma.type_outputs(self, avals, params, out)
        for a in avals:
            if getattr(a, "memory_space", MemorySpace.Device) is not MemorySpace.Device:
                out = type_memory_spaces(self, avals, params, out)
                break
        for a in avals:
            if getattr(a, "_sharding", None) is not None:  # explicit sharding mode
                return sharding_types.type_outputs(self, avals, params, out)
        return out

    def __repr__(self):
        return self.name


class Trace:
    """An interpreter of primitives. Subclasses implement ``process_primitive``."""
    __slots__ = ("parent", "_valid", "__weakref__")

    def __init__(self, parent=None):
        self.parent = parent
        self._valid = True

    def process_primitive(self, prim, args, params):
        raise NotImplementedError

    def invalidate(self):
        """Mark this trace finished: later use of its tracers is a leak."""
        self._valid = False

    def __repr__(self):
        return f"{type(self).__name__}"


class EvalTrace(Trace):
    """The bottom trace: runs primitives on concrete values.

    A tracer reaching it has leaked; impls detect that where they convert non-Array
    arguments (``check_not_tracer``), which keeps the all-Array hot path free of checks.
    """
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        return prim.impl(*args, **params)


def check_not_tracer(x, where=""):
    if isinstance(x, Tracer):
        raise UnexpectedTracerError(x, where)


def check_no_tracers(prim, args):
    """For eager impls that run Python rather than a compiled op (identity, jaxpr calls):
    a tracer among ``args`` leaked out of its transformation."""
    for x in args:
        if isinstance(x, Tracer):
            raise UnexpectedTracerError(
                x, f" (it reached primitive '{prim.name}' outside any transformation)")


class _Context(threading.local):
    def __init__(self):
        self.trace = eval_trace
        self.vma = None  # the vma rules (``xform.lax.vma``) while they apply


eval_trace = EvalTrace()
_context = _Context()


class vma_mode:
    """Context manager: type values with the mesh axes ``axis_names`` they vary over
    (inside ``shard_map(check_vma=True)``), or with None stop. ``vma_rules`` (set by
    ``xform.lax.vma``) makes the rules object from the axis names."""
    __slots__ = ("rules", "prev")
    vma_rules = None

    def __init__(self, axis_names):
        self.rules = None if axis_names is None else vma_mode.vma_rules(axis_names)

    def __enter__(self):
        self.prev = _context.vma
        _context.vma = self.rules

    def __exit__(self, *exc):
        _context.vma = self.prev


def current_trace() -> Trace:
    return _context.trace


class set_current_trace:
    """Context manager: make ``trace`` current for the duration of the block."""
    __slots__ = ("trace", "prev")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _context.trace
        _context.trace = self.trace

    def __exit__(self, *exc):
        _context.trace = self.prev


class Tracer(ArrayOps):
    """A value inside a transformation. Operators and array methods: ``ArrayOps``."""
    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def to_concrete_value(self):
        """The concrete value if this trace knows it (e.g. a JVP primal), else None."""
        return None

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    itemsize = property(lambda self: self.aval.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.aval.shape[0]))

    def __reversed__(self):
        return iter(self[::-1])

    def __copy__(self):   # as JAX's tracers: jnp.copy (``copy.deepcopy`` of a pytree
        return self.copy()   # holding tracers, e.g. inside a Flax module, must work)

    def __deepcopy__(self, memo):
        return self.copy()

    def _concrete_or(self, error):
        value = self.to_concrete_value()
        if value is None:
            raise error(self)
        return value

    def __bool__(self):
        return bool(self._concrete_or(TracerBoolConversionError))

    def __int__(self):
        return int(self._concrete_or(TracerIntegerConversionError))

    def __index__(self):
        return self._concrete_or(TracerIntegerConversionError).__index__()

    # NB: like JAX, only bool/int/index conversions concretize (a JVP primal is known, so
    # `if x > 0` works under grad). float/complex/np.asarray always raise: concretizing
    # them would silently drop the derivative (`x * float(x)` would differentiate as 3x).
    def __float__(self):
        raise ConcretizationTypeError(self, _conversion_context("float"))

    def __complex__(self):
        raise ConcretizationTypeError(self, _conversion_context("complex"))

    def __array__(self, dtype=None, copy=None):
        raise TracerArrayConversionError(self)

    def item(self, *args):
        """The element as a Python scalar: only where the value is known (a JVP primal),
        as JAX; under jit a ConcretizationTypeError."""
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(self, "The problem arose with the item() method.\n")
        return np.asarray(value).item(*args)

    def tolist(self):
        raise ConcretizationTypeError(self, "The problem arose with the tolist() method.\n")

    def tobytes(self, order="C"):
        raise ConcretizationTypeError(self, "The problem arose with the tobytes() method.\n")

    def __dlpack__(self, **kwargs):
        raise ConcretizationTypeError(self, "The problem arose with the __dlpack__() method.\n")

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__} (traced arrays are mutable "
                        "from Python's view; use a static argument or `id()`)")

    def __repr__(self):
        return f"Traced<{self.aval}>with<{type(self._trace).__name__}>"


def _conversion_context(fn):
    return (f"The problem arose with the `{fn}` function: converting a traced value to a "
            f"Python {fn} drops it from the transformation (and would silently drop its "
            "derivative). Keep it an array (e.g. `x * x` instead of `x * float(x)`), or use "
            "`lax.stop_gradient` if no derivative should flow.\n")


def get_aval(x) -> ShapedArray:
    """The aval of any array-like value: an Array, a tracer, NumPy or Python scalar."""
    try:
        return x.aval
    except AttributeError:
        return aval_of_value(x)


def to_concrete_value(x):
    """Concrete value of ``x`` if known (Arrays, NumPy, scalars, JVP primals), else None."""
    if isinstance(x, Tracer):
        return x.to_concrete_value()
    return x


def concrete_or_raise(x, context):
    """The concrete value of ``x`` (itself unless a tracer); ConcretizationTypeError with
    ``context`` (what needed the value and what to do instead) where it is traced."""
    if isinstance(x, Tracer):
        value = x.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(x, context)
        return value
    return x
