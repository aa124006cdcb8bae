"""``optimization_barrier``: controlling what XLA may do with a computation; ``copy``:
a value XLA must give a buffer of its own."""
from xform.core import tree_util
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import allow_extended, standard_primitive


def optimization_barrier(operand):
    """Identity on the pytree ``operand`` that XLA may not move computations across
    (e.g. to keep a recomputation from being merged with the original).

    >>> from xform import lax
    >>> lax.optimization_barrier((1.0, 2.0))
    (Array(1., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))
    """
    flat, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*flat))


def _barrier_jvp(primals, tangents):
    # Two barriers, not one over both: reverse mode must see primals free of tangents.
    nz = [type(t) is not ad.Zero for t in tangents]
    outs = optimization_barrier_p.bind(*primals)
    dots = iter(optimization_barrier_p.bind(*[t for t, n in zip(tangents, nz) if n]))
    return outs, [next(dots) if n else t for t, n in zip(tangents, nz)]


def _barrier_transpose(cts, *args):
    nz = [type(c) is not ad.Zero for c in cts]
    outs = iter(optimization_barrier_p.bind(*[c for c, n in zip(cts, nz) if n]))
    return [next(outs) if n else None for n in nz]


optimization_barrier_p = standard_primitive("optimization_barrier", lambda *avals: list(avals),
                                            multiple_results=True)
ad.primitive_jvps[optimization_barrier_p] = _barrier_jvp
ad.primitive_transposes[optimization_barrier_p] = _barrier_transpose
batching.primitive_batchers[optimization_barrier_p] = \
    lambda vals, dims: (optimization_barrier_p.bind(*vals), list(dims))
mlir.register_lowering(
    optimization_barrier_p,
    lambda ctx, *args: list(mlir.hlo.OptimizationBarrierOp(list(args)).results) if args else [])


def _array_copy(x):
    """A copy of ``x`` in a new buffer (JAX's ``lax._array_copy``): ``jnp.array(x)``,
    ``x.copy()``, ``copy.copy(x)``. Sharing the buffer would be wrong only when the
    original is deleted, e.g. donated to a jitted call, but then the copy must survive."""
    return copy_p.bind(x)


# Eager, compiling ``return %arg0`` makes XLA write a new output buffer (the argument is
# not donated); in a jaxpr it stays (as JAX's, not simplified away) and lowers to nothing.
copy_p = standard_primitive("copy", lambda x: x)
allow_extended(copy_p)   # (typed keys copy too)
ad.deflinear(copy_p, lambda ct, x: [copy_p.bind(ct)])
batching.defvectorized(copy_p)
mlir.register_lowering(copy_p, lambda ctx, x: x)
