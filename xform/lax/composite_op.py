"""``lax.composite``: a function kept whole in the program as ``stablehlo.composite``
(name, version, attributes and a private decomposition func), so a backend that knows
the name can emit its own kernel and any other inlines the decomposition (JAX's
``jax.lax.composite``).

Eagerly the decomposition runs as it is, as JAX's impl does. As in JAX it has no JVP,
transpose or batching rule: use ``custom_jvp``/``custom_vjp`` around it.
"""
import functools

import numpy as np

from xform.core import tree_util
from xform.core.errors import UnexpectedTracerError
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import Primitive, Tracer, get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.ffi import ir_attribute


class _HashableArray:
    """A NumPy attribute held in the equation's params (which must hash)."""
    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def __hash__(self):
        return hash((self.val.shape, self.val.dtype, self.val.tobytes()))

    def __eq__(self, other):
        return isinstance(other, _HashableArray) and self.val.shape == other.val.shape \
            and self.val.dtype == other.val.dtype and np.array_equal(self.val, other.val)

    def __repr__(self):
        return repr(self.val)


def composite(decomposition, name, version=0):
    """Wrap ``decomposition`` as the composite op ``name``: positional arguments are its
    operands, keyword arguments its attributes (static; ``None`` ones are left out).

    >>> import xform.numpy as jnp
    >>> from xform import lax
    >>> tangent = composite(lambda x: lax.sin(x) / lax.cos(x), name="my.tangent")
    >>> print(tangent(jnp.array([0.0, 0.5])))
    [0.        0.5463025]
    """
    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        if any(isinstance(v, Tracer) for v in kwargs.values()):
            raise UnexpectedTracerError(
                "Found a JAX Tracer as an attribute in the decomposition for the composite "
                f"op '{name}'. This means that the decomposition function closes over a "
                "value that is involved in a JAX transformation. Any values that aren't "
                "explicitly known at compile time must be explicitly passed as arguments "
                "to the composite.\n\nNote: If you are passing jax arrays as attributes, "
                "use numpy arrays instead.")
        flat, in_tree = tree_util.tree_flatten(args)
        out_tree = []

        def flat_fun(*xs):
            out = decomposition(*tree_util.tree_unflatten(in_tree, xs), **kwargs)
            leaves, tree = tree_util.tree_flatten(out)
            out_tree.append(tree)
            return leaves
        closed = pe.trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat])
        if any(isinstance(c, Tracer) for c in closed.consts):
            raise UnexpectedTracerError(
                "Found a JAX Tracer as a constant in the decomposition for the composite "
                f"op '{name}'. This means that the decomposition function closes over a "
                "value that is involved in a JAX transformation. Any values that aren't "
                "explicitly known at compile time must be explicitly passed as arguments "
                "to the composite.")
        jaxpr, consts = pe.convert_constvars_jaxpr(closed)
        attributes = []
        for k, v in kwargs.items():
            leaves, tree = tree_util.tree_flatten(v)
            attributes.append((k, tuple(_HashableArray(x) if isinstance(x, np.ndarray)
                                        else x for x in leaves), tree))
        outs = composite_p.bind(*consts, *flat, name=name, attributes=tuple(attributes),
                                version=version, jaxpr=jaxpr)
        return tree_util.tree_unflatten(out_tree[0], outs)
    return call


def _impl(*args, jaxpr, **_):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _jvp(*_, **__):
    raise ValueError("JVP rule for composite not implemented. You can use "
                     "`jax.custom_jvp` to add support. See "
                     "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")


def _transpose(*_, **__):
    raise ValueError("Transpose rule for composite not implemented. You can use"
                     "`jax.custom_jvp` or `jax.custom_vjp` to add support. See "
                     "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")


def _lowering(ctx, *args, name, attributes, version, jaxpr):
    mctx = ctx.module_ctx
    if mctx.dim_vars or mctx.platform_index is not None:   # (only @main reads them)
        return mlir.jaxpr_subcomp(mctx, jaxpr.jaxpr, jaxpr.consts, list(args))
    fname = mlir.private_func(mctx, jaxpr, name, exact_name=True)
    attrs = {}
    for k, leaves, tree in attributes:
        v = tree_util.tree_unflatten(tree, [x.val if isinstance(x, _HashableArray) else x
                                            for x in leaves])
        if v is not None:
            attrs[k] = ir_attribute(v)
    op = mlir.hlo.CompositeOp(
        [mlir.aval_to_ir_type(a) for a in jaxpr.out_avals], list(args),
        name=mlir.ir.StringAttr.get(name),
        decomposition=mlir.ir.FlatSymbolRefAttr.get(fname),
        composite_attributes=mlir.ir.DictAttr.get(attrs),
        version=mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_signless(32), version))
    return list(op.results)


def _batch(*_, **__):
    raise NotImplementedError("Batching rule for 'composite' not implemented")


composite_p = Primitive("composite")
composite_p.multiple_results = True
composite_p.def_impl(_impl, lazy_kind="inline")
composite_p.def_abstract_eval(lambda *avals, jaxpr, **_: jaxpr.out_avals)
ad.primitive_jvps[composite_p] = _jvp
ad.primitive_transposes[composite_p] = _transpose
batching.primitive_batchers[composite_p] = _batch   # (JAX's error, said explicitly)
mlir.register_lowering(composite_p, _lowering)
