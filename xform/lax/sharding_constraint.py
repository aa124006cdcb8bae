"""``with_sharding_constraint``: pin how an intermediate value is split over a mesh.

Inside an SPMD program (a jit over a mesh) it lowers to Shardy's
``sdy.sharding_constraint``, which XLA's partitioner honours; in a one-device program
it is the identity. Eagerly it is ``device_put`` to the sharding. Linear: its
tangent and cotangent carry the same constraint.
"""
import functools

from xform.core import transfer, tree_util
from xform.core.array import ShardedArray
from xform.core.mesh import current_mesh
from xform.core.sharding import NamedSharding, PartitionSpec
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive


def with_sharding_constraint(x, shardings):
    """Constrain each leaf of pytree ``x`` to a sharding (a pytree prefix of ``x``
    of ``NamedSharding``s, or ``PartitionSpec``s under a mesh context).

    Raises:
      RuntimeError: if a PartitionSpec is given with no mesh in context.
      ValueError: if a sharding does not fit a leaf's rank or shape.

    >>> import xform, xform.numpy as jnp
    >>> from xform.sharding import NamedSharding, PartitionSpec as P
    >>> s = NamedSharding(xform.make_mesh((2,), ('x',)), P('x'))
    >>> xform.lax.with_sharding_constraint(jnp.arange(4.0), s).sharding.spec
    P('x',)
    """
    leaves, tree = tree_util.tree_flatten(x)
    targets = tree_util.broadcast_prefix(
        shardings, x, is_leaf=lambda s: isinstance(s, (NamedSharding, PartitionSpec)))
    out = []
    for v, s in zip(leaves, targets):
        if s is None:
            out.append(v)
            continue
        if isinstance(s, PartitionSpec):
            mesh = current_mesh()
            if mesh is None:
                raise RuntimeError(
                    "with_sharding_constraint requires a non-empty mesh in context if you "
                    "are passing `PartitionSpec`s to shardings. You can define a context "
                    "mesh via `jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to "
                    "shardings and then the mesh context manager is not required.")
            s = NamedSharding(mesh, s)
        if not isinstance(s, NamedSharding):
            raise TypeError(f"with_sharding_constraint: expected a NamedSharding or "
                            f"PartitionSpec, got {s!r}")
        s.check_shape(get_aval(v).shape, "with_sharding_constraint's argument")
        out.append(sharding_constraint_p.bind(v, sharding=s))
    return tree_util.tree_unflatten(tree, out)


def reshard(x, out_shardings):
    """``x`` laid out as ``out_shardings`` (NamedShardings or PartitionSpecs under a mesh
    context, a pytree prefix of ``x``): a copy between layouts eagerly, a constraint
    inside jit.

    NB: JAX's ``reshard`` types the result with explicit-axis shardings; xform has no
    shardings in types (explicit axes compile as Auto), so this is the constraint."""
    return with_sharding_constraint(x, out_shardings)


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """``f`` with the mesh's ``axes`` left to the compiler, its result laid out as
    ``out_sharding`` (a pytree prefix of NamedShardings / PartitionSpecs under a mesh).

    NB: xform compiles explicit axes as Auto (no shardings in types), so this is ``f``
    followed by that layout's constraint, which gives JAX's values and layout."""
    if f is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        out = f(*args, **kwargs)
        return out if out_sharding is None else with_sharding_constraint(out, out_sharding)
    return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """``f`` with the mesh's ``axes`` explicit, its positional arguments first laid out
    as ``in_sharding`` (a pytree prefix of them); see :func:`auto_axes` for the NB."""
    if f is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        if in_sharding is not None:
            args = with_sharding_constraint(args, tuple(in_sharding) if isinstance(
                in_sharding, list) else in_sharding)
        return f(*args, **kwargs)
    return wrapped


def _impl(x, *, sharding):
    if type(x) is ShardedArray and x.layout == sharding.layout():
        return x
    return transfer.put_sharded(x, sharding)


def _batch(vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    spec = list(sharding.spec)
    if d is not batching.not_mapped:
        spec += [None] * max(0, d - len(spec))
        spec.insert(d, batching._axis_env.rule_spmd_name)  # (vmap's spmd_axis_name)
    return sharding_constraint_p.bind(x, sharding=sharding.with_spec(PartitionSpec(*spec))), d


def _lowering(ctx, x, *, sharding):
    mesh = ctx.module_ctx.mesh
    if mesh is None:  # a one-device program
        return x
    if (sharding.mesh._flat_devices, sharding.mesh.axis_names, sharding.mesh.axis_sizes) \
            != (mesh._flat_devices, mesh.axis_names, mesh.axis_sizes):
        raise ValueError(f"with_sharding_constraint: its mesh {sharding.mesh} is not the "
                         f"mesh {mesh} the computation is partitioned over")
    return mlir.sharding_constraint(x, sharding.spec, len(ctx.avals_in[0].shape))


sharding_constraint_p = standard_primitive("sharding_constraint", lambda x, **_: x)
sharding_constraint_p.def_impl(_impl)
ad.deflinear(sharding_constraint_p,
             lambda ct, x, *, sharding: [sharding_constraint_p.bind(ct, sharding=sharding)])
batching.primitive_batchers[sharding_constraint_p] = _batch
mlir.register_lowering(sharding_constraint_p, _lowering)
