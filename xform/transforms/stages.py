"""The ahead-of-time stages of a jitted function: ``Traced`` -> ``Lowered`` -> ``Compiled``.

``jit(f).trace(*args)`` gives a ``Traced`` (the ClosedJaxpr); ``lower()`` keeps it for
StableHLO text and cost queries; ``compile()`` builds the executable through the
dispatch module's program cache, the same path a jitted call uses.
"""
import dataclasses

from xform import backend, backend_analyses, backend_layouts
from xform.core import transfer, tree_util
from xform.core.array import Array
from xform.core.layout import Format, from_runtime, laid_out, set_laid_out
from xform.core.mesh import AxisType
from xform.core.shape_dtype_struct import ShapeDtypeStruct
from xform.core.sharding import SingleDeviceSharding
from xform.core.trace import Tracer, get_aval
from xform.interpreters import dispatch, mlir, mlir_memory, spmd
from xform.interpreters import layouts as layouts_
from xform.interpreters.lazy import concrete


def out_info(closed, out_tree, out_shardings=None, weak=True):
    """The outputs as ``ShapeDtypeStruct``s (``eval_shape``'s answer), with JAX's
    shardings: an output's ``out_shardings`` entry, else its type's where that type's
    mesh axes are all Explicit or Manual (else None: the compiler would choose).
    ``weak=False``: without weak types, as JAX's Lowered and Compiled give them."""
    outs = []
    for a, s in zip(closed.out_avals[:out_tree.num_leaves],
                    out_shardings or [None] * out_tree.num_leaves):
        t = getattr(a, "_sharding", None)
        if s is None and t is not None and AxisType.Auto not in t.mesh.axis_types:
            s = t
        outs.append(ShapeDtypeStruct(a.shape, a.dtype, sharding=s,
                                     weak_type=weak and a.weak_type))
    return tree_util.tree_unflatten(out_tree, outs)


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument of a staged computation: its abstract value and whether it is
    donated (the leaves of a stage's ``args_info``)."""
    _aval: object
    donated: bool

    @property
    def shape(self):
        if not hasattr(self._aval, "shape"):
            raise TypeError(f"No shape attribute with aval of type {type(self._aval)}")
        return self._aval.shape

    @property
    def dtype(self):
        if not hasattr(self._aval, "dtype"):
            raise TypeError(f"No dtype attribute with aval of type {type(self._aval)}")
        return self._aval.dtype


class _Signature:
    """What each stage tells of its arguments and outputs, under JAX's names: trees
    ``(args, kwargs)`` of the dynamic (non-static) arguments; flat where the structure
    is unknown (a deserialized executable). Needs ``_closed``, ``_in_tree``,
    ``_out_tree``, ``_donated``."""

    def _in_unflatten(self, flat):
        return tuple(flat) if self._in_tree is None else \
            tree_util.tree_unflatten(self._in_tree, flat)

    @property
    def in_tree(self):
        return self._in_tree

    @property
    def out_tree(self):
        return self._out_tree

    @property
    def in_avals(self):
        return self._in_unflatten(list(self._closed.in_avals))

    @property
    def args_info(self):
        avals = self._closed.in_avals
        donated = self._donated or [False] * len(avals)
        return self._in_unflatten([ArgInfo(a, bool(d)) for a, d in zip(avals, donated)])

    @property
    def out_info(self):
        return out_info(self._closed, self._out_tree, weak=False)

    @property
    def donate_argnums(self):
        """The flat indices of the donated arguments."""
        return tuple(i for i, d in enumerate(self._donated or ()) if d)


class Traced(_Signature):
    """A traced function (``jit(f).trace(*args)``): its ``jaxpr``; ``lower()`` next;
    ``out_info``: the outputs as ShapeDtypeStructs."""

    def __init__(self, closed, out_tree, name, donated=None, place=None, out_shardings=None,
                 pin=None, layouts=None, in_tree=None, names=None):
        self.jaxpr = self._closed = closed
        self._names = names  # the flat arguments' names, for errors
        self._layouts = layouts  # (per flat input, per output) a Format's layout, or None
        self._in_tree = in_tree  # the ``(args, kwargs)`` structure of the flat inputs
        self._out_tree = out_tree
        self.name = self.fun_name = name
        self._donated = donated
        self._place = place  # an ``spmd.Placement``: one program over a mesh
        self._out_shardings = out_shardings  # per output: the jit's Sharding or None
        self._pin = pin  # a one-device program's ``jit_sharding.Pin``

    @property
    def out_info(self):
        return out_info(self.jaxpr, self.out_tree, self._out_shardings)

    @property
    def out_avals(self):
        return tree_util.tree_unflatten(
            self._out_tree, list(self._closed.out_avals[:self._out_tree.num_leaves]))

    def lower(self):
        kinds = mlir_memory.out_memory_kinds(self._out_shardings, self.jaxpr.in_avals,
                                             self.jaxpr.out_avals)
        return Lowered(self.jaxpr, self.out_tree, self.name, self._donated, self._place,
                       self._pin, kinds, self._layouts, self._in_tree, self._names)


class Lowered(_Signature):
    """A program lowered to StableHLO; ``as_text()`` shows it, ``compile()`` builds it.

    >>> import xform, xform.numpy as jnp
    >>> lowered = xform.jit(lambda x: x * 2.0).lower(jnp.ones(3))
    >>> lowered.cost_analysis()["flops"]
    3.0
    """

    def __init__(self, closed, out_tree, name, donated=None, place=None, pin=None,
                 out_kinds=None, layouts=None, in_tree=None, names=None):
        self._closed, self._names = closed, names
        self._layouts = layouts
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._name = name
        self._donated = donated
        self._place = place
        self._pin = pin
        self._out_kinds = out_kinds  # (per output: the memory out_shardings pin it to)

    def as_text(self, dialect=None, *, debug_info=False):
        """The module as text: StableHLO (``dialect`` None or ``"stablehlo"``) or XLA's
        unoptimized HLO (``"hlo"``). ``debug_info`` is accepted and adds nothing: xform
        records no source locations."""
        if _dialect(dialect) == "hlo":
            return backend_analyses.hlo_text(self.compiler_ir("hlo"))
        return self._text()

    def _text(self):
        kinds = self._out_kinds if self._place is None else mlir_memory.out_memory_kinds(
            self._place.out_shardings, self._closed.in_avals, self._closed.out_avals)
        return mlir.lower_jaxpr_to_module(self._closed, donated=self._donated,
                                          hoist_consts=dispatch.EMBED_CONSTS_UP_TO,
                                          spmd=self._place and self._place.specs(),
                                          out_kinds=kinds, layout_modes=self._modes())

    def compiler_ir(self, dialect=None):
        """The module as an object, as JAX's: ``"stablehlo"`` (default) an MLIR
        ``ir.Module``; ``"hlo"`` XLA's unoptimized ``XlaComputation`` (``as_hlo_text()``,
        ``as_hlo_module()``)."""
        if _dialect(dialect) == "hlo":
            return backend.stablehlo_to_hlo(self._text())
        with backend.make_ir_context():
            return backend.ir.Module.parse(self._text())

    def _modes(self):
        if self._layouts is None:
            return None
        ins, outs = self._layouts
        return ([layouts_.layout_mode(lay, a.shape)
                 for lay, a in zip(ins, self._closed.in_avals)],
                [layouts_.layout_mode(lay, a.shape, "jit outputs")
                 for lay, a in zip(outs, self._closed.out_avals)])

    def compile(self, compiler_options=None, *, device_assignment=None):
        """Compile with XLA (through the program cache): returns ``Compiled``. XLA
        ``compiler_options`` and a ``device_assignment`` are not supported (refused)."""
        if compiler_options or device_assignment is not None:
            raise NotImplementedError(
                "Lowered.compile: xform compiles with XLA's default options; "
                f"compiler_options={compiler_options!r}, device_assignment="
                f"{device_assignment!r} are not supported")
        if self._place is not None:
            compiled = spmd.PartitionedJaxpr(self._closed, self._place,
                                             f"jit({self._name})", self._donated)
            return Compiled(compiled, self._closed, self._out_tree, in_tree=self._in_tree,
                            donated=self._donated, names=self._names)
        device = self._pin and self._pin.device or backend.default_device()
        if self._layouts is not None:
            compiled = layouts_.LaidOutJaxpr(
                self._closed, device, f"jit({self._name})", self._donated, self._out_kinds,
                *self._layouts, describe=lambda i: self._pin.names[i])
        else:
            compiled = dispatch.CompiledJaxpr(self._closed, device, name=f"jit({self._name})",
                                              donated=self._donated, out_kinds=self._out_kinds)
        return Compiled(compiled, self._closed, self._out_tree, self._pin, device,
                        self._out_kinds, self._in_tree, self._donated)

    def cost_analysis(self):
        """XLA's cost estimate (``flops``, ``bytes accessed``, ...) of the unoptimized
        HLO, as JAX's (``compile().cost_analysis()`` gives the optimized program's).
        Where the runtime has no such analysis (a GPU plugin) xform asks the compiled
        program (JAX returns None)."""
        try:
            cost = backend.hlo_cost_analysis(self.compiler_ir("hlo"))
        except backend.JaxRuntimeError:  # (not expected: a module XLA's converter refuses)
            cost = None
        return self.compile().cost_analysis() if cost is None else cost


def _dialect(dialect):
    if dialect not in (None, "stablehlo", "hlo"):
        raise ValueError(f"unknown dialect: {dialect}")
    return dialect or "stablehlo"


def _recommitted(x, committed):
    """``x`` committed or not (kept in the layout it was made in)."""
    y = Array(x._buf, x.aval, committed)
    laid = laid_out(x)
    if laid is not None:
        set_laid_out(y, laid)
    return y


class Compiled(_Signature):
    """An executable for fixed argument shapes; call it with arrays of those shapes."""

    def __init__(self, compiled, closed, out_tree, pin=None, device=None, out_kinds=None,
                 in_tree=None, donated=None, names=None):
        self._compiled, self._closed, self._donated = compiled, closed, donated
        self._names = names
        self._in_tree = in_tree
        self._in_avals = closed.in_avals
        self._out_tree = out_tree
        self._pin = pin  # a one-device program's ``jit_sharding.Pin``
        self._device = device  # (where it runs: the pin's, else the default device)
        self._out_kinds = out_kinds  # (per output: the memory out_shardings pin it to)

    def __call__(self, *args, **kwargs):
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if self._in_tree is not None and in_tree != self._in_tree:
            raise TypeError(
                "Function compiled with input pytree does not match the input pytree it was "
                f"called with: compiled for {self._in_tree}, called with {in_tree}.")
        avals = [get_aval(x) for x in leaves]
        if [(a.shape, a.dtype) for a in avals] != [(a.shape, a.dtype) for a in self._in_avals]:
            raise TypeError(
                "Argument types differ from the types for which this computation was "
                f"compiled: expected {[a.str_short() for a in self._in_avals]}, got "
                f"{[a.str_short() for a in avals]}")
        if self._pin is None:
            self._check_shardings(leaves)
            return tree_util.tree_unflatten(self._out_tree, self._compiled(leaves))
        outs = self._compiled(self._placed(leaves))
        c = self._pin.device is not None
        return tree_util.tree_unflatten(self._out_tree, [
            _recommitted(o, c) if type(o) is Array else o for o in outs])

    def _check_shardings(self, leaves):
        """JAX's error for committed arguments laid out otherwise than the partitioned
        program takes them (uncommitted ones are put there)."""
        want = getattr(self._compiled, "in_shardings", None)
        if want is None:
            return
        wrong = [(i, x, w) for i, (x, w) in enumerate(zip(leaves, want)) if isinstance(
            x, Array) and x._committed and not (getattr(x, "layout", None) == w.layout() or
                                                x.sharding.is_equivalent_to(w, x.ndim))]
        if wrong:
            names = self._names or [f"{i}" for i in range(len(leaves))]
            raise ValueError(
                "Computation was compiled for input shardings that disagree with the "
                "shardings of arguments passed to it. Here are the "
                f"{len(wrong)} mismatches:\n" + "\n".join(
                    f"Argument {names[i]} with shape {x.aval.str_short(short_dtypes=False)}"
                    f":\n  Passed sharding: {x.sharding}\n  Required sharding: {w}"
                    for i, x, w in wrong))

    def _placed(self, leaves):
        """The arguments on the program's device, as JAX's: uncommitted ones (and any,
        for ``jit(device=)``) moved there; committed ones elsewhere refused."""
        device, (_, move_all, names) = self._device, self._pin
        wrong = [] if move_all else [
            (i, x) for i, x in enumerate(leaves) if isinstance(x, Array) and x._committed
            and x.devices() != {device}]
        if wrong:
            required = SingleDeviceSharding(device)
            raise ValueError(
                "Computation was compiled for input shardings that disagree with the "
                "shardings of arguments passed to it. Here are the "
                f"{len(wrong)} mismatches:\n" + "\n".join(
                    f"Argument {names[i]} with shape {x.aval.str_short(short_dtypes=False)}"
                    f":\n  Passed sharding: {x.sharding}\n  Required sharding: {required}"
                    for i, x in wrong))
        return [x if isinstance(x, Tracer) else
                transfer.device_put_value(concrete(x, "aot_call"), device) for x in leaves]

    @property
    def input_shardings(self):
        """The arguments' shardings (a tree ``(args, kwargs)``, as JAX's)."""
        return self._in_unflatten(self._flat_in_shardings())

    def _flat_in_shardings(self):
        return list(getattr(self._compiled, "in_shardings", None) or
                    [self._one_device(a) for a in self._in_avals])

    @property
    def out_info(self):
        return out_info(self._closed, self._out_tree,
                        tree_util.tree_leaves(self.output_shardings), weak=False)

    @property
    def output_shardings(self):
        """The outputs' shardings, as XLA partitioned them."""
        avals = getattr(self._compiled, "out_avals", ())
        outs = getattr(self._compiled, "out_shardings", None) or \
            [self._one_device(a, k) for a, k in zip(avals, self._out_kinds or [None] * len(avals))]
        return tree_util.tree_unflatten(self._out_tree, outs)

    @property
    def input_formats(self):
        """The arguments' :class:`Format` (as JAX's, a tree ``(args, kwargs)``; flat where
        the structure is unknown): the layout the program takes each in (as XLA compiled
        it) and its sharding."""
        params, _ = backend_layouts.executable_layouts(self._compiled.executable)
        params = params[len(params) - len(self._in_avals):]   # (hoisted consts lead)
        flat = [Format(from_runtime(p), s)
                for p, s in zip(params, self._flat_in_shardings(), strict=True)]
        return tuple(flat) if self._in_tree is None else \
            tree_util.tree_unflatten(self._in_tree, flat)

    @property
    def output_formats(self):
        """The outputs' :class:`Format` (a tree like the outputs)."""
        _, outs = backend_layouts.executable_layouts(self._compiled.executable)
        shardings = tree_util.tree_leaves(self.output_shardings)
        return tree_util.tree_unflatten(self._out_tree, [
            Format(from_runtime(o), s) for o, s in zip(outs, shardings, strict=True)])

    def _one_device(self, aval, kind=None):
        return SingleDeviceSharding(self._device or backend.default_device(),
                                    memory_kind=kind or aval.memory_space.value)

    def as_text(self):
        """The optimized HLO that XLA compiled."""
        return self._compiled.executable.hlo_text()

    def runtime_executable(self):
        """The runtime's executable object (jaxlib's LoadedExecutable), as JAX's."""
        return self._compiled.executable.runtime_executable()

    def cost_analysis(self):
        """XLA's cost estimate of the compiled program (``flops``, ...) as a dict."""
        return self._compiled.executable.cost_analysis()

    def memory_analysis(self):
        """Bytes of arguments, outputs, aliased (donated) buffers, temporaries, code:
        ``argument_size_in_bytes``, ``output_size_in_bytes``, ``alias_size_in_bytes``,
        ``temp_size_in_bytes``, ``generated_code_size_in_bytes``."""
        return self._compiled.executable.memory_analysis()
