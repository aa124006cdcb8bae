"""Programs on buffers of a chosen layout: what a jit given ``Format``s in its
``in_shardings``/``out_shardings`` (and ``device_put`` to a ``Format``) run.

Lowering puts each format's layout on ``@main`` as ``mhlo.layout_mode`` (JAX's
convention: ``"auto"`` lets XLA choose, ``"{1,0}"`` is XLA's minor-to-major order) and
PJRT compiles the program for those layouts; the executable then reports the layouts it
takes and gives. PJRT does not convert a buffer of another layout (it reads the bytes as
they are), so arguments are relaid to what the program takes, and a result in a
non-default layout becomes an Array holding a row-major copy, for every other program,
beside its laid-out buffer (``core/layout.py``), which ``Array.format`` reports and a
program taking that layout is given as is.
"""
import functools

import numpy as np

from xform import backend, backend_layouts
from xform.core.array import Array
from xform.core.avals import ShapedArray, aval_of_value
from xform.core.layout import (AUTO, Layout, default_triple, from_runtime, laid_out,
                               set_laid_out)
from xform.core.transfer import to_buffer
from xform.core.trace import Primitive
from xform.interpreters import ad, batching, compiler, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.dispatch import CompiledJaxpr
from xform.interpreters.placement import committed

ir, hlo = backend.ir, backend.hlo


def layout_mode(layout, shape, what="jit arguments", where=""):
    """The ``mhlo.layout_mode`` of a format's layout for a value of ``shape`` (None: the
    default layout)."""
    if layout is None:
        return None
    if layout is AUTO:
        return "auto"
    try:
        layout.check_compatible_aval(shape)
    except ValueError as e:
        raise ValueError(f"One of {what}{where} is incompatible with its layout "
                         f"annotation {layout}: {e}") from None
    if layout.tiling or layout.sub_byte_element_size_in_bits:
        raise NotImplementedError(
            f"xform lays arrays out by major_to_minor only; {layout} has a tiling or a "
            "sub-byte element size (XLA's tiled layouts are not lowered).")
    return _mode(layout.major_to_minor)


def given(layout, aval):
    """A format's layout for a value of ``aval``: None for the default layout (it needs
    no annotation, as JAX lowers it)."""
    return None if layout == Layout(tuple(range(len(aval.shape)))) else layout


def _mode(major_to_minor):
    return "{" + ",".join(map(str, reversed(major_to_minor))) + "}"


def _triple_mode(triple, ndim):
    return None if triple == default_triple(ndim) else _mode(triple[0])


@functools.lru_cache(maxsize=256)
def _relayout_exe(shape, dtype, src, dst, device):
    aval = ShapedArray(shape, dtype)
    module = mlir.lower_jaxpr_to_module(pe.trace_to_jaxpr(lambda a: [a], [aval]),
                                        as_bytecode=True, layout_modes=([src], [dst]))
    return compiler.compile_module(module, [device], (), "relayout", [aval])


def relayout(buf, aval, src, dst):
    """``buf`` (of ``aval``, in layout mode ``src``; None: the default) copied into
    layout mode ``dst``."""
    exe = _relayout_exe(tuple(aval.shape), np.dtype(aval.dtype), src, dst,
                        backend.buffer_device(buf))
    return exe.execute([buf])[0]


def wrap(buf, aval, committed_, triple):
    """An Array of a program's result ``buf`` whose layout is ``triple``."""
    mode = _triple_mode(triple, len(aval.shape))
    if mode is None:
        return Array(buf, aval, committed_)
    x = Array(relayout(buf, aval, mode, None), aval, committed_)
    set_laid_out(x, buf)
    return x


class LaidOutJaxpr(CompiledJaxpr):
    """A ``CompiledJaxpr`` whose inputs and outputs have the layouts of ``in_layouts``
    and ``out_layouts`` (per flat input/output: a Layout, ``AUTO`` or None)."""
    __slots__ = ("in_triples", "out_triples", "auto_in")

    def __init__(self, closed, device=None, name="jit", donated=None, out_kinds=None,
                 in_layouts=None, out_layouts=None, describe=str):
        ins = in_layouts or [None] * len(closed.in_avals)
        outs = out_layouts or [None] * len(closed.out_avals)
        modes = ([layout_mode(lay, a.shape, where=f" with pytree key path {describe(i)}")
                  for i, (lay, a) in enumerate(zip(ins, closed.in_avals, strict=True))],
                 [layout_mode(lay, a.shape, "jit outputs")
                  for lay, a in zip(outs, closed.out_avals, strict=True)])
        super().__init__(closed, device, name, donated, out_kinds=out_kinds,
                         layout_modes=modes)
        params, self.out_triples = backend_layouts.executable_layouts(self.executable)
        self.in_triples = params[len(params) - len(closed.in_avals):]
        self.auto_in = [lay is AUTO for lay in ins]

    def __call__(self, args, describe=None):
        bufs = self.const_bufs + [self._arg(x, t, auto) for x, t, auto in
                                  zip(args, self.in_triples, self.auto_in, strict=True)]
        c = committed(args)
        return [wrap(b, a, c, t) for b, a, t in
                zip(self.execute(bufs), self.out_avals, self.out_triples, strict=True)]

    @staticmethod
    def _arg(x, want, auto):
        laid = laid_out(x) if isinstance(x, Array) else None
        have = default_triple(np.ndim(x)) if laid is None else \
            backend_layouts.buffer_layout(laid)
        if have == want:
            return to_buffer(x) if laid is None else laid
        if auto and isinstance(x, Array):
            raise ValueError(
                "Layout passed to jit does not match the layout on the respective arg. Got "
                f"jit layout: AUTO,\narg layout: {from_runtime(have)} for arg type: "
                f"{x.aval.str_short(short_dtypes=False)}. The layout given to `jax.jit` "
                "is `Layout.AUTO` but the corresponding argument passed is a `jax.Array` "
                "with a concrete layout. Consider passing a `jax.ShapeDtypeStruct` instead "
                "of `jax.Array` as an argument to the jitted function  when using "
                "`Layout.AUTO`.")
        aval = x.aval if isinstance(x, Array) else aval_of_value(x)
        return relayout(to_buffer(x), aval, None, _triple_mode(want, len(aval.shape)))


def put(x, layout, sharding):
    """``device_put(x, Format(layout, sharding))``: Array ``x`` (on ``sharding``'s one
    device) in ``layout``, by a program giving its input in that layout (as JAX's)."""
    exe = LaidOutJaxpr(pe.trace_to_jaxpr(lambda a: [a], [x.aval]),
                       sharding._device_assignment[0], "device_put", out_layouts=[layout])
    return exe([x])[0]


# ---- with_layout_constraint's primitive ----

def _constraint_impl(x, *, layout):
    if not isinstance(x, Array):
        raise ValueError("with_layout_constraint in eager mode can only be applied to "
                         f"jax.Arrays. Got {type(x)}")
    return x if x.format.layout == layout else put(x, layout, x.sharding)


def _constraint_lowering(ctx, x, *, layout):
    (aval,) = ctx.avals_in
    index = ir.IndexType.get()
    attr = lambda dims: ir.DenseElementsAttr.get(  # noqa: E731
        np.asarray(dims, np.int64), type=ir.RankedTensorType.get([len(dims)], index))
    op = hlo.CustomCallOp(
        [x.type], [x], "LayoutConstraint", backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        operand_layouts=ir.ArrayAttr.get([attr(list(range(len(aval.shape))))]),
        result_layouts=ir.ArrayAttr.get([attr(layout.major_to_minor[::-1])]))
    return op.result


def _constraint_batch(vals, dims, *, layout):
    (x,), (d,) = vals, dims
    if d is batching.not_mapped:
        return layout_constraint_p.bind(x, layout=layout), d
    m2m = tuple(m + 1 for m in layout.major_to_minor)   # the batch dimension major-most
    return layout_constraint_p.bind(x, layout=layout.update(
        major_to_minor=m2m[:d] + (0,) + m2m[d:])), d


layout_constraint_p = Primitive("layout_constraint")
layout_constraint_p.def_impl(_constraint_impl)
layout_constraint_p.def_abstract_eval(lambda x, *, layout: x)
ad.deflinear(layout_constraint_p,
             lambda ct, x, *, layout: [layout_constraint_p.bind(ct, layout=layout)])
batching.primitive_batchers[layout_constraint_p] = _constraint_batch
mlir.register_lowering(layout_constraint_p, _constraint_lowering)


def constrained_outputs(closed):
    """Per output of ``closed``, whether a layout constraint gives it (then, as JAX's
    layout propagation, the program lets XLA lay it out: ``AUTO``)."""
    made = {e.outvars[0] for e in closed.jaxpr.eqns if e.primitive is layout_constraint_p}
    return [v in made for v in closed.jaxpr.outvars]
