"""Lowering jaxprs to StableHLO modules with jaxlib's MLIR builders.

A lowering rule is ``rule(ctx, *operands, **params)`` returning one ``ir.Value``
(or a list for multiple-result primitives); ``ctx`` carries the input and output
avals. Rules are registered next to their primitive with ``register_lowering``.
"""
import contextlib
import io
import threading

import numpy as np

from xform import backend
from xform.core import dtypes, shape_poly
from xform.core.jaxpr import ClosedJaxpr, Jaxpr, Literal
from xform.core.avals import ShapedArray, physical_aval
from xform.core.mesh import AxisType
from xform.core.sharding import UNCONSTRAINED
from xform.core.tokens import TokenTy
from xform.interpreters import mlir_compute
from xform.interpreters import partial_eval as pe
from xform.interpreters.mlir_memory import (annotate_layout_modes, annotate_memory_kinds,
                                            annotate_placement, set_attrs)

ir, hlo, func_dialect = backend.ir, backend.hlo, backend.func_dialect
chlo = backend.chlo

_lowerings = {}
_extended_lowerings = {}


def register_lowering(prim, rule):
    _lowerings[prim] = rule
    return rule


def register_extended_lowering(prim, rule):
    """``rule`` lowers ``prim`` where an operand or result has an extended dtype (typed
    keys): it gets the logical avals and emits ops on the physical values. Primitives
    without one (calls, loops, conditionals) lower as usual: values have physical types."""
    _extended_lowerings[prim] = rule
    return rule


def has_lowering(prim):
    return prim in _lowerings


# ---- types and constants ----

# dtype -> its StableHLO element type (a factory: MLIR types need a live context). float0
# (the tangent dtype of int/bool values, always zero) is i1 in a program, as in JAX; at
# the program's edges dispatch passes bool zeros in and hands host float0 zeros out, so
# no buffer of it ever exists.
_IR_TYPE = {
    dtypes.float0: lambda: ir.IntegerType.get_signless(1),
    dtypes.bool_: lambda: ir.IntegerType.get_signless(1),
    **{d: lambda b=dtypes.iinfo(d).bits: ir.IntegerType.get_signless(b)
       for d in dtypes.signed_int_dtypes - {dtypes.int1}},
    **{d: lambda b=dtypes.iinfo(d).bits: ir.IntegerType.get_unsigned(b)
       for d in dtypes.unsigned_int_dtypes - {dtypes.uint1}},
    dtypes.bfloat16: ir.BF16Type.get, dtypes.float16: ir.F16Type.get,
    dtypes.float32: ir.F32Type.get, dtypes.float64: ir.F64Type.get,
    dtypes.complex64: lambda: ir.ComplexType.get(ir.F32Type.get()),
    dtypes.complex128: lambda: ir.ComplexType.get(ir.F64Type.get()),
    dtypes.float8_e3m4: ir.Float8E3M4Type.get, dtypes.float8_e4m3: ir.Float8E4M3Type.get,
    dtypes.float8_e4m3b11fnuz: ir.Float8E4M3B11FNUZType.get,
    dtypes.float8_e4m3fn: ir.Float8E4M3FNType.get,
    dtypes.float8_e4m3fnuz: ir.Float8E4M3FNUZType.get,
    dtypes.float8_e5m2: ir.Float8E5M2Type.get, dtypes.float8_e5m2fnuz: ir.Float8E5M2FNUZType.get,
    dtypes.float8_e8m0fnu: ir.Float8E8M0FNUType.get,
    dtypes.float4_e2m1fn: ir.Float4E2M1FNType.get,
}
# Dtypes this jaxlib holds in buffers (float6: not even that) but cannot compute on; JAX
# lowers them and then fails in XLA or silently miscomputes (int1 as i1 is read as bool).
_NO_XLA_TYPE = {
    dtypes.int1: "XLA reads i1 as bool, and a program taking int1 buffers fails",
    dtypes.uint1: "StableHLO has no ui1 element type",
    dtypes.float6_e2m3fn: "this jaxlib has no XLA element type for it",
    dtypes.float6_e3m2fn: "this jaxlib has no XLA element type for it",
}


def dtype_to_ir_type(dtype):
    dtype = np.dtype(dtype)
    make = _IR_TYPE.get(dtype)
    if make is None:
        if dtype in _NO_XLA_TYPE:
            raise TypeError(f"xform cannot compute with dtype {dtype.name}: "
                            f"{_NO_XLA_TYPE[dtype]}. Cast on the host with ml_dtypes, or "
                            "use a wider type (int2/int4, float8_*).")
        raise TypeError(f"No StableHLO type for dtype {dtype}")
    return make()


def _ir_shape(shape):
    dyn = ir.ShapedType.get_dynamic_size()
    return [d if type(d) is int or isinstance(d, np.integer) else dyn for d in shape]


def aval_to_ir_type(aval: ShapedArray):
    """The tensor type of ``aval``; symbolic dimensions are dynamic (``?``)."""
    if not isinstance(aval.dtype, np.dtype):
        if isinstance(aval.dtype, TokenTy):
            return hlo.TokenType.get()
        aval = physical_aval(aval)
    return ir.RankedTensorType.get(_ir_shape(aval.shape), dtype_to_ir_type(aval.dtype))


# The module being lowered, for rules that emit symbolic dimensions' values (set by
# lower_jaxpr_to_module; read by dim_value).
_current = threading.local()


@contextlib.contextmanager
def dim_vars_bound(env):
    """Within the block, ``dim_value`` reads dimension variables from ``env`` (name ->
    ``tensor<i32>`` value): for code emitted outside ``lower_jaxpr_to_module``."""
    outer, _current.mctx = getattr(_current, "mctx", None), ModuleContext(None)
    _current.mctx.dim_vars = env
    try:
        yield
    finally:
        _current.mctx = outer


def dim_value(d):
    """A ``tensor<i32>`` holding dimension ``d`` (an int, or a symbolic dimension
    computed from the module's dimension variables)."""
    if not shape_poly.is_symbolic_dim(d):
        return ir_constant(np.int32(d))
    env = getattr(_current, "mctx", None)
    env = env.dim_vars if env is not None else {}
    missing = d.variables() - set(env)
    if missing:
        raise ValueError(f"symbolic dimension '{d}' has variables {sorted(missing)} that "
                         "are not dimension variables of the lowered function")
    return _dim_ir(d, env)


def _dim_ir(e, env):
    # sum of coeff * product of factors; floordiv/mod round toward -inf as Python's
    total = None
    for mon, c in e.terms():
        v = ir_constant(np.int32(c)) if c != 1 or not mon else None
        for f, p in mon:
            if isinstance(f, str):
                fv = env[f]
            else:
                a, b = (_dim_ir(x, env) if shape_poly.is_symbolic_dim(x)
                        else ir_constant(np.int32(x)) for x in f[2:])
                fv = (_floor_divmod(a, b)[f[1] == "mod"] if f[1] in ("floordiv", "mod")
                      else {"max": hlo.maximum, "min": hlo.minimum}[f[1]](a, b))
            for _ in range(p):
                v = fv if v is None else hlo.multiply(v, fv)
        total = v if total is None else hlo.add(total, v)
    return ir_constant(np.int32(0)) if total is None else total   # the operand 0


def _floor_divmod(a, b):
    """Python's ``divmod`` of i32 scalars: truncation, corrected where the remainder is
    non-zero with the sign opposite to the divisor's."""
    q, r = hlo.divide(a, b), hlo.remainder(a, b)
    zero = ir_constant(np.int32(0))

    def cmp(x, y, d):
        return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get(d),
                           compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))
    fix = hlo.and_(cmp(r, zero, "NE"), cmp(cmp(r, zero, "LT"), cmp(b, zero, "LT"), "NE"))
    return (hlo.select(fix, hlo.subtract(q, ir_constant(np.int32(1))), q),
            hlo.select(fix, hlo.add(r, b), r))


def shape_value(shape):
    """A ``tensor<rank x i32>`` holding ``shape`` (see ``dim_value``)."""
    i32x1 = ir.RankedTensorType.get([1], ir.IntegerType.get_signless(32))
    parts = [hlo.reshape(i32x1, dim_value(d)) for d in shape]
    if not parts:
        return ir_constant(np.zeros((0,), np.int32))
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, 0)


def iota(aval, dimension):
    """``stablehlo.iota`` of ``aval`` along ``dimension`` (dynamic for symbolic shapes)."""
    typ = aval_to_ir_type(aval)
    if shape_poly.is_constant_shape(aval.shape):
        return hlo.iota(typ, dimension)
    return hlo.dynamic_iota(typ, shape_value(aval.shape), dimension)


def broadcast_in_dim(result_aval, x, dims):
    """``stablehlo.broadcast_in_dim`` to ``result_aval``, dynamic for symbolic shapes."""
    typ = aval_to_ir_type(result_aval)
    if shape_poly.is_constant_shape(result_aval.shape):
        return hlo.broadcast_in_dim(typ, x, dense_i64(dims))
    return hlo.dynamic_broadcast_in_dim(typ, x, shape_value(result_aval.shape),
                                        dense_i64(dims))


def _has_extended(avals):
    return any(not isinstance(a.dtype, np.dtype) for a in avals)


def _const_value(c, aval):
    # A constant's host value; an extended-dtype Array gives its physical data.
    if not isinstance(aval.dtype, np.dtype):
        return c.physical_value(), None
    return np.asarray(c), aval.dtype


def ir_constant(x, dtype=None):
    """A stablehlo.constant holding NumPy value ``x`` (cast to ``dtype`` if given)."""
    x = np.asarray(x, dtype=dtype)
    if x.dtype == dtypes.float0:
        x = np.zeros(x.shape, np.bool_)
    elt = dtype_to_ir_type(x.dtype)
    # (bools go in as one byte each: jaxlib's MLIR reads a packed buffer of one byte as
    # a splat, so packed bits gave wrong constants for arrays of 2 to 8 bools)
    if x.dtype == dtypes.bfloat16:
        data = x.view(np.uint16)
    else:
        data = x
    attr = ir.DenseElementsAttr.get(np.ascontiguousarray(data), type=elt, shape=x.shape)
    return hlo.constant(attr)


def full_like_aval(value, aval):
    """A constant of ``aval``'s shape and dtype filled with ``value`` (splat + broadcast)."""
    scalar = ir_constant(np.array(value, aval.dtype))
    if not aval.shape:
        return scalar
    return broadcast_in_dim(aval, scalar, [])


def broadcast_to(x, aval_in, aval_out):
    """Broadcast an elementwise operand to ``aval_out``'s shape (lax's broadcasting: a
    rank-0 operand, or size-1 dimensions of an equal-rank one)."""
    if aval_in.shape == aval_out.shape:
        return x
    dims = range(len(aval_in.shape))  # () for rank 0
    return broadcast_in_dim(aval_out.update(dtype=aval_in.dtype), x, dims)


def dense_i64(xs):
    return ir.DenseI64ArrayAttr.get(list(xs))


# ---- rule helpers ----

class LoweringRuleContext:
    __slots__ = ("module_ctx", "avals_in", "avals_out", "primitive")

    def __init__(self, module_ctx, primitive, avals_in, avals_out):
        self.module_ctx = module_ctx
        self.primitive = primitive
        self.avals_in = avals_in
        self.avals_out = avals_out


def elementwise(op):
    """Rule for an n-ary elementwise op whose StableHLO result type is inferred;
    rank-0 operands are broadcast to the output shape first."""
    def rule(ctx, *args):
        out = ctx.avals_out[0]
        args = [broadcast_to(a, av, out) for a, av in zip(args, ctx.avals_in)]
        return op(*args)
    return rule


# ---- module construction ----

class ModuleContext:
    """State while lowering one module: the module, its lowered sub-functions and the
    Python functions its host-callback custom calls run (passed on to compile)."""

    def __init__(self, module, host_callbacks=None, platform=None, platforms=None, mesh=None):
        self.module = module
        self.mesh = mesh  # the SPMD program's mesh (``sdy.mesh @mesh``), or None
        self._platform = platform
        # Lowering for several platforms at once (export): ``platform_index`` is
        # ``@main``'s leading i32 argument, the running platform's index in them.
        self.platforms = tuple(platforms) if platforms else None
        self.platform_index = None
        # Exporting with symbolic shapes: dimension variable name -> @main's i32 arg.
        self.dim_vars = {}
        self.funcs = {}  # id(jaxpr) -> (jaxpr, func name) to reuse lowered calls
        self._count = 0
        self._exact_names = set()
        self.host_callbacks = [] if host_callbacks is None else host_callbacks

    def add_host_callback(self, fn):
        """Register ``fn``; returns its index (the custom call's ``index`` attribute)."""
        self.host_callbacks.append(fn)
        return len(self.host_callbacks) - 1

    @property
    def platform(self):
        """The platform lowered for (rules may differ by platform, as JAX's): the one
        given, else the running backend's (``"cpu"``, ``"cuda"``...)."""
        if self.platform_index is not None:
            raise NotImplementedError(
                "this operation lowers differently per platform, and xform lowers such "
                f"operations for one platform at a time: export for one of {self.platforms}")
        return self._platform or (self.platforms or (backend.platform(),))[0]

    def partitioned(self, op, global_ids=True):
        """Mark collective ``op`` as one between partitions of this SPMD module (inside
        a shard_map's manual computation): a channel and, where the op takes it,
        ``use_global_device_ids`` (its groups then name partition ids), as JAX's.
        Replicated programs (pmap) leave their collectives as they are."""
        if self.mesh is not None:
            self._count += 1
            op.attributes["channel_handle"] = ir.Attribute.parse(
                f"#stablehlo.channel_handle<handle = {self._count}, type = 1>")
            if global_ids:
                op.attributes["use_global_device_ids"] = ir.UnitAttr.get()
        return op

    def unique_name(self, base, exact=False):
        """``base`` suffixed with a counter; ``exact``: ``base`` itself while unused
        (a composite's decomposition is named as JAX names it)."""
        if exact and base not in self._exact_names and base != "main":
            self._exact_names.add(base)
            return base
        self._count += 1
        return f"{base}_{self._count}"


def _make_func(module_ctx, name, in_avals, out_avals, public):
    in_types = [aval_to_ir_type(a) for a in in_avals]
    out_types = [aval_to_ir_type(a) for a in out_avals]
    with ir.InsertionPoint(module_ctx.module.body):
        fn = func_dialect.FuncOp(name, ir.FunctionType.get(in_types, out_types))
    fn.attributes["sym_visibility"] = ir.StringAttr.get("public" if public else "private")
    return fn


def jaxpr_subcomp(module_ctx, jaxpr: Jaxpr, consts, args):
    """Emit ``jaxpr``'s equations at the current insertion point; return output values.

    ``consts`` are ir.Values (or NumPy/Array values, emitted as constants)."""
    env = {}

    def read(a):
        if type(a) is Literal:
            return ir_constant(*_const_value(a.val, a.aval))
        return env[a]

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = c if isinstance(c, ir.Value) else ir_constant(*_const_value(c, v.aval))
    for v, x in zip(jaxpr.invars, args, strict=True):
        env[v] = x
    for eqn in jaxpr.eqns:
        avals_in = [a.aval for a in eqn.invars]
        avals_out = [v.aval for v in eqn.outvars]
        rule = _lowerings.get(eqn.primitive)
        if eqn.primitive in _extended_lowerings and (_has_extended(avals_in)
                                                    or _has_extended(avals_out)):
            rule = _extended_lowerings[eqn.primitive]
        if rule is None:
            raise NotImplementedError(f"No StableHLO lowering for primitive "
                                      f"'{eqn.primitive.name}'")
        ctx = LoweringRuleContext(module_ctx, eqn.primitive, avals_in, avals_out)
        ins = [read(a) for a in eqn.invars]
        first_op = eqn.compute_type and mlir_compute.ops_count()
        outs = rule(ctx, *ins, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        if eqn.compute_type is not None:
            mlir_compute.tag(outs, eqn.compute_type, first_op)
        for v, x in zip(eqn.outvars, outs, strict=True):
            if module_ctx.mesh is not None and getattr(v.aval, "_sharding", None) is not \
                    None and eqn.primitive.name != "sharding_constraint":
                x = _typed_constraint(module_ctx, x, v.aval)
            env[v] = x
    return [read(a) for a in jaxpr.outvars]


def _typed_constraint(module_ctx, x, aval):
    """Explicit sharding mode: pin a value to its type's sharding, as JAX's
    ``lower_with_sharding_in_types`` (unsplit dimensions stay open where the mesh has
    Auto axes, which are the compiler's)."""
    mesh = aval._sharding.mesh
    if mesh.axis_names != module_ctx.mesh.axis_names or AxisType.Manual in mesh.axis_types:
        return x
    aval = physical_aval(aval)
    spec = aval._sharding.spec
    if AxisType.Auto in mesh.axis_types:
        spec = [UNCONSTRAINED if p is None else p for p in spec]
    return ir.Operation.create("sdy.sharding_constraint", results=[x.type], operands=[x],
                               attributes={"sharding": sdy_sharding(spec, len(aval.shape))}
                               ).result


_contexts = threading.local()


def _ir_context():
    """One MLIR context per thread: creating one (registering dialects) costs ~2 ms,
    a noticeable part of every eager op's first compile."""
    ctx = getattr(_contexts, "ctx", None)
    if ctx is None:
        ctx = _contexts.ctx = backend.make_ir_context()
    return ctx


def lower_jaxpr_to_module(closed: ClosedJaxpr, hoist_consts=True, name="main",
                          host_callbacks=None, as_bytecode=False, donated=None,
                          platform=None, platforms=None, dim_vars=(), spmd=None,
                          out_kinds=None, layout_modes=None):
    """StableHLO of a module whose public ``@main`` runs ``closed``: text, or with
    ``as_bytecode`` MLIR bytecode (what compiling and the compilation cache use; no
    printing and re-parsing).

    ``hoist_consts`` says which consts become leading parameters of ``@main`` (the
    caller passes their buffers) instead of constants in the program: all (True), none
    (False), or (an int n) those of more than n elements (see ``hoist_mask``).
    Host callbacks the module calls are appended to the list ``host_callbacks``;
    pass them to ``backend.compile``. ``donated[i]`` (over ``closed.in_avals``) marks
    an input whose buffer the program may reuse for an output of the same type
    (``tf.aliasing_output``): XLA writes that output in place and the input is deleted.
    ``platform`` overrides the platform lowering rules see (default: the backend's).
    ``spmd`` (``(mesh, in_specs, out_specs)``, specs None where unspecified) makes it
    one SPMD program over ``mesh`` with Shardy annotations (see ``annotate_spmd``).
    Several ``platforms`` (export) give ``@main`` a leading platform index argument
    (JAX's calling convention); then donation is not supported. ``dim_vars`` (names
    of symbolic dimensions) add i32 arguments after it carrying their values.
    ``out_kinds`` (per output: a memory kind or None) are a jit's out_shardings' kinds;
    ``layout_modes`` (``(per input, per output)``: a ``mhlo.layout_mode`` or None) its
    formats' layouts.
    """
    jaxpr = closed.jaxpr
    with _ir_context(), ir.Location.unknown():
        module = ir.Module.create()
        module_ctx = ModuleContext(module, host_callbacks, platform, platforms,
                                   spmd[0] if spmd else None)
        mask = hoist_mask(closed, hoist_consts)
        const_avals = [v.aval for v, h in zip(jaxpr.constvars, mask) if h]
        multi = platforms is not None and len(platforms) > 1
        globals_ = (["_platform_index"] if multi else []) + list(dim_vars)
        fn = _make_func(module_ctx, name, [ShapedArray((), np.int32)] * len(globals_)
                        + const_avals + jaxpr.in_avals, jaxpr.out_avals, public=True)
        if globals_:
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [ir.DictAttr.get({"jax.global_constant": ir.StringAttr.get(g)})
                 for g in globals_]
                + [ir.DictAttr.get({})] * (len(const_avals) + len(jaxpr.in_avals)))
        elif donated is not None and any(donated):
            _set_aliases(fn, len(const_avals), jaxpr.in_avals, jaxpr.out_avals, donated,
                         out_kinds, spmd)
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            params = list(block.arguments)
            if multi:
                module_ctx.platform_index = params.pop(0)
            module_ctx.dim_vars = {v: params.pop(0) for v in dim_vars}
            outer, _current.mctx = getattr(_current, "mctx", None), module_ctx
            it = iter(params[:len(const_avals)])
            consts = [next(it) if h else c for c, h in zip(closed.consts, mask)]
            try:
                outs = jaxpr_subcomp(module_ctx, jaxpr, consts, params[len(const_avals):])
            finally:
                _current.mctx = outer
            out_kinds = out_kinds or [None] * len(outs)
            func_dialect.ReturnOp([o if k is None else annotate_placement(o, k)
                                   for o, k in zip(outs, out_kinds, strict=True)])
        if spmd is not None:
            annotate_spmd(module, fn, len(globals_) + len(const_avals), *spmd)
        annotate_memory_kinds(fn, len(globals_) + len(const_avals), jaxpr.in_avals,
                              jaxpr.out_avals, out_kinds)
        if layout_modes is not None:
            annotate_layout_modes(fn, len(globals_) + len(const_avals), *layout_modes)
        if as_bytecode:
            out = io.BytesIO()
            module.operation.write_bytecode(file=out)
            return out.getvalue()
        return str(module)


def sdy_sharding(spec, rank, mesh_name="mesh"):
    """A PartitionSpec as a Shardy tensor sharding over ``rank`` dimensions (None:
    closed and unsplit ``{}``; ``P.UNCONSTRAINED``: open ``{?}``)."""
    return ir.Attribute.parse(f"#sdy.sharding<{sdy_sharding_text(spec, rank, mesh_name)}>")


def sdy_sharding_text(spec, rank, mesh_name="mesh"):
    """The body of :func:`sdy_sharding`'s attribute: ``@mesh, [{"x"}, {}]``."""
    dims = []
    for i in range(rank):
        p = spec[i] if i < len(spec) else None
        if p is None:
            dims.append("{}")
        elif isinstance(p, str):
            dims.append(f'{{"{p}"}}')
        elif isinstance(p, tuple):
            dims.append("{" + ", ".join(f'"{q}"' for q in p) + "}")
        else:  # UNCONSTRAINED
            dims.append("{?}")
    return f"@{mesh_name}, [{', '.join(dims)}]"


def annotate_spmd(module, fn, n_consts, mesh, in_specs, out_specs):
    """Make ``module`` an SPMD program as JAX lowers one: ``mhlo.num_partitions``, the
    mesh as ``sdy.mesh @mesh``, and an ``sdy.sharding`` on each argument and result
    whose spec is given (hoisted consts are replicated)."""
    i32 = ir.IntegerType.get_signless(32)
    module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, mesh.size)
    module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(mesh.axis_names, mesh.axis_sizes))
    mesh_op = ir.Operation.create("sdy.mesh", attributes={
        "sym_name": ir.StringAttr.get("mesh"),
        "mesh": ir.Attribute.parse(f"#sdy.mesh<[{axes}]>")})
    ir.InsertionPoint.at_block_begin(module.body).insert(mesh_op)

    for key, types, specs in (("arg_attrs", fn.type.inputs, [()] * n_consts + list(in_specs)),
                              ("res_attrs", fn.type.results, list(out_specs))):
        set_attrs(fn, key, [None if s is None else {"sdy.sharding": sdy_sharding(
            s, ir.RankedTensorType(t).rank)} for t, s in zip(types, specs, strict=True)])


def hoist_mask(closed: ClosedJaxpr, hoist_consts):
    """Per const of ``closed``: is it a parameter of the module (True) or a constant in
    it? An int ``n`` hoists consts of more than n elements: small closed-over arrays
    are constants XLA can fold, as JAX (which embeds every const) lowers them, so
    programs fold, and round, as JAX's do; large ones are not baked into the program."""
    if hoist_consts is True or hoist_consts is False:
        return [hoist_consts] * len(closed.consts)
    return [v.aval.size > hoist_consts or not isinstance(v.aval.dtype, np.dtype)
            for v in closed.jaxpr.constvars]


def input_output_aliases(in_avals, out_avals, donated, out_kinds=None):
    """For each input, the output it aliases (the first unclaimed output of the same
    shape, dtype and memory kind, ``out_kinds`` saying where one is pinned, if
    donated) or None."""
    kind = lambda a: a.memory_space.value  # noqa: E731
    free = {}
    for j, (a, k) in enumerate(zip(out_avals, out_kinds or [None] * len(out_avals))):
        free.setdefault((a.shape, a.dtype, k or kind(a)), []).append(j)
    aliases = []
    for a, d in zip(in_avals, donated, strict=True):
        slots = free.get((a.shape, a.dtype, kind(a))) if d else None
        aliases.append(slots.pop(0) if slots else None)
    return aliases


def _set_aliases(fn, n_consts, in_avals, out_avals, donated, out_kinds, spmd=None):
    aliases = input_output_aliases(in_avals, out_avals, donated, out_kinds)
    donors = [False] * len(aliases)
    if spmd is not None:  # JAX's rule over partitions: pair per-device blocks; a pair
        # whose result XLA places, and any other donation where XLA places some result
        # or a result of the same size is free, is a ``jax.buffer_donor`` for XLA
        mesh, in_specs, out_specs = spmd
        ins = [_block_aval(a, s, mesh) for a, s in zip(in_avals, in_specs, strict=True)]
        outs = [_block_aval(a, s, mesh) for a, s in zip(out_avals, out_specs, strict=True)]
        aliases = input_output_aliases(ins, outs, donated, out_kinds)
        free = [s is None or any(p is UNCONSTRAINED for p in s) for s in out_specs]
        sizes = [a.size for j, a in enumerate(outs) if j not in aliases]
        for i, j in enumerate(aliases):
            if j is not None and free[j]:
                aliases[i], donors[i] = None, True
            elif j is None and donated[i] and (any(free) or ins[i].size in sizes):
                donors[i] = True
                if ins[i].size in sizes:
                    sizes.remove(ins[i].size)
    i32 = ir.IntegerType.get_signless(32)
    attrs = [ir.DictAttr.get({})] * n_consts + [ir.DictAttr.get(
        {"jax.buffer_donor": ir.BoolAttr.get(True)} if d else {} if j is None
        else {"tf.aliasing_output": ir.IntegerAttr.get(i32, j)})
        for j, d in zip(aliases, donors)]
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _block_aval(aval, spec, mesh):
    """``aval``'s per-device block under ``spec`` (None: as it is)."""
    if spec is None:
        return aval
    n = [1 if p is None or p is UNCONSTRAINED else int(np.prod(
        [mesh.shape[a] for a in ((p,) if isinstance(p, str) else p)])) for p in spec]
    n += [1] * (len(aval.shape) - len(n))
    return aval.update(shape=tuple(d // k for d, k in zip(aval.shape, n)))


def sharding_constraint(x, spec, rank):
    """``sdy.sharding_constraint`` of ``x`` (in an SPMD module) to ``spec``."""
    return ir.Operation.create(
        "sdy.sharding_constraint", results=[x.type], operands=[x],
        attributes={"sharding": sdy_sharding(spec, rank)}).result


def _constrained(values, avals, specs):
    if specs is None:
        return list(values)
    return [v if s is None else sharding_constraint(v, s, len(a.shape))
            for v, a, s in zip(values, avals, specs, strict=True)]


def call_lowering(ctx, args, closed: ClosedJaxpr, name, in_specs=None, out_specs=None):
    """Lower a call of ``closed`` as a private func plus ``func.call`` (reused per jaxpr).
    Inline where ``@main`` has a platform index or dimension variables (only ``@main``
    can read them). ``in_specs``/``out_specs`` (in an SPMD module: per argument/result
    a PartitionSpec or None) constrain the body's arguments and results, as JAX lowers
    a nested jit's ``in_shardings``/``out_shardings``."""
    mctx = ctx.module_ctx
    if mctx.dim_vars or mctx.platform_index is not None:
        args = _constrained(args, closed.in_avals, in_specs)
        outs = jaxpr_subcomp(mctx, closed.jaxpr, closed.consts, args)
        return _constrained(outs, closed.out_avals, out_specs)
    out_types = [aval_to_ir_type(a) for a in closed.out_avals]
    fname = private_func(mctx, closed, name, in_specs, out_specs)
    call = func_dialect.CallOp(out_types, ir.FlatSymbolRefAttr.get(fname), list(args))
    return list(call.results)


def private_func(mctx, closed: ClosedJaxpr, name, in_specs=None, out_specs=None,
                 exact_name=False):
    """The symbol of a private func computing ``closed`` (one per jaxpr and specs)."""
    key = id(closed.jaxpr) if in_specs is None and out_specs is None else (
        id(closed.jaxpr), tuple(in_specs or ()), tuple(out_specs or ()))
    entry = mctx.funcs.get(key)
    if entry is None:
        fname = mctx.unique_name(name, exact_name)
        fn = _make_func(mctx, fname, closed.in_avals, closed.out_avals, public=False)
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            outs = jaxpr_subcomp(mctx, closed.jaxpr, closed.consts,
                                 _constrained(block.arguments, closed.in_avals, in_specs))
            func_dialect.ReturnOp(_constrained(outs, closed.out_avals, out_specs))
        entry = mctx.funcs[key] = (closed, fname)  # keep `closed` alive so id() stays unique
    return entry[1]


def lower_fun(fun, multiple_results=True):
    """A lowering rule that traces ``fun`` (written with lax ops) at the rule's input
    avals and emits it inline: for primitives whose lowering is a composition."""
    def rule(ctx, *args, **params):
        def flat(*xs):
            out = fun(*xs, **params)
            return list(out) if multiple_results else [out]
        closed = pe.trace_to_jaxpr(flat, ctx.avals_in)
        outs = jaxpr_subcomp(ctx.module_ctx, closed.jaxpr, closed.consts, list(args))
        return outs if multiple_results else outs[0]
    return rule
