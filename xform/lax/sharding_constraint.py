"""``with_sharding_constraint``: pin how an intermediate value is split over a mesh.

Inside an SPMD program (a jit over a mesh) it lowers to Shardy's
``sdy.sharding_constraint``, which XLA's partitioner honours; in a one-device program
it is the identity. Eagerly it is ``device_put`` to the sharding. Linear: its
tangent and cotangent carry the same constraint. Also ``device_put_p``: ``device_put``
inside a transformation to another memory space (pinned host or device).
"""
import functools

from xform.core import sharding_types, transfer, tree_util
from xform.core.array import Array, ShardedArray
from xform.core.avals import MemorySpace, memory_space_of
from xform.core.mesh import AxisType, Mesh, current_mesh, use_mesh
from xform.core.sharding import UNCONSTRAINED, NamedSharding, PartitionSpec
from xform.core.trace import Tracer, get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive


def with_sharding_constraint(x, shardings):
    """Constrain each leaf of pytree ``x`` to a sharding (a pytree prefix of ``x``
    of ``NamedSharding``s, or ``PartitionSpec``s under a mesh context). As JAX's
    explicit mode: under a mesh whose axes are all Explicit it only asserts that each
    leaf's type is its sharding (``reshard`` changes it); otherwise a sharding may
    name only Auto axes.

    Raises:
      RuntimeError: if a PartitionSpec is given with no mesh in context.
      ValueError: a None sharding (as JAX: pass shardings).
      ValueError: if a sharding does not fit a leaf's rank or shape, or names a mesh
        axis that is not Auto (outside an all-Explicit mesh context).
      AssertionError: under an all-Explicit mesh, a leaf typed otherwise.

    >>> import xform, xform.numpy as jnp
    >>> from xform.sharding import AxisType, NamedSharding, PartitionSpec as P
    >>> mesh = xform.make_mesh((2,), ('x',), axis_types=(AxisType.Auto,))
    >>> s = NamedSharding(mesh, P('x'))
    >>> xform.lax.with_sharding_constraint(jnp.arange(4.0), s).sharding.spec
    P('x',)
    """
    return _constrain(x, shardings, typed=False, api="with_sharding_constraint")


def _constrain(x, shardings, typed, api=None):
    """``api``: whose checks of JAX's explicit mode to make (None: auto_axes and
    explicit_axes casting between meshes: none)."""
    leaves, tree = tree_util.tree_flatten(x)
    targets = tree_util.broadcast_prefix(
        shardings, x, is_leaf=lambda s: isinstance(s, (NamedSharding, PartitionSpec)))
    out = []
    for v, s in zip(leaves, targets):
        if s is None and api == "with_sharding_constraint":
            raise ValueError(f"One of with_sharding_constraint arguments got sharding {s} "
                             "which is not allowed. Please only pass "
                             "`jax.sharding.Sharding` instances.")
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
        shape = get_aval(v).shape
        s.check_shape(shape, "One of with_sharding_constraint arguments",
                      uneven_ok=isinstance(v, Tracer))  # (as JAX: XLA pads in programs)
        if api == "reshard":
            sharding_types.abstract_sharding(s, api)  # (JAX's error for Auto axes)
        elif api and _explicit_context():  # (JAX: an assert, not a constraint)
            _assert_typed(get_aval(v), s)
            out.append(v)
            continue
        elif api:
            _check_auto(s)
            if isinstance(v, Tracer) and get_aval(v)._sharding is not None:
                s = _keep_type(get_aval(v), s)  # (eagerly JAX device_puts to ``s``)
        if typed and sharding_types.is_explicit(s.mesh) and len(s.spec) < len(shape):
            s = s.with_spec(PartitionSpec(*s.spec, *[None] * (len(shape) - len(s.spec))))
        out.append(sharding_constraint_p.bind(v, sharding=s))
    return tree_util.tree_unflatten(tree, out)


def _explicit_context():
    mesh = current_mesh()
    return mesh is not None and bool(mesh.axis_types) and \
        all(t is AxisType.Explicit for t in mesh.axis_types)


def _assert_typed(aval, s):
    """JAX's with_sharding_constraint under an all-Explicit mesh: the type must be ``s``."""
    have = sharding_types.spec_of(aval)
    want = PartitionSpec(*s.spec, *[None] * (aval.ndim - len(s.spec)))
    if any(w is not UNCONSTRAINED and h != w for h, w in zip(have, want)):
        raise AssertionError(
            "`with_sharding_constraint` acts as an assert when all axes of mesh are of type "
            f"`Explicit`. The array sharding: {have} did not match the sharding provided: "
            f"{want}. Please use `jax.sharding.reshard` to shard your input to the sharding "
            "you want.")


def _keep_type(aval, s):
    """``s`` with ``aval``'s Explicit axes (its type) added: inside a program a
    constraint of the Auto axes leaves the type as it is, as JAX's."""
    spec = []
    for t, u in zip(sharding_types.spec_of(aval), tuple(s.spec) + (None,) * aval.ndim):
        names = lambda p: () if p is None or p is UNCONSTRAINED else \
            p if isinstance(p, tuple) else (p,)  # noqa: E731
        both = names(t) + names(u)
        spec.append(u if not names(t) else both[0] if len(both) == 1 else both)
    return s.with_spec(PartitionSpec(*spec))


def _check_auto(s):
    types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
    if any(types[a] is not AxisType.Auto for a in s.spec.axis_names()):
        raise ValueError(
            "The spec of NamedSharding passed to with_sharding_constraint can only refer to "
            f"Auto axes of the mesh. Got spec={s.spec} and mesh={s.mesh.abstract_mesh}. You "
            "probably meant to use `reshard` API?")


def reshard(x, out_shardings):
    """``x`` laid out as ``out_shardings`` (NamedShardings or PartitionSpecs under a mesh
    context, a pytree prefix of ``x``): a copy between layouts eagerly, a constraint
    inside jit; in explicit mode the result's type (and ``.sharding``, its spec one
    entry per dimension, as JAX's) says the new sharding."""
    return _constrain(x, out_shardings, typed=True, api="reshard")


def _switched_mesh(name, axes, to):
    mesh = current_mesh()
    if mesh is None:
        raise ValueError(f"Context mesh cannot be empty. Please use `jax.set_mesh` API to "
                         f"enter into a mesh context when using `{name}` API.")
    axes = mesh.axis_names if axes is None else (axes,) if isinstance(axes, str) else axes
    types = tuple(to if n in axes else t for n, t in zip(mesh.axis_names, mesh.axis_types))
    return mesh, Mesh(mesh.devices, mesh.axis_names, types)


def _mesh_cast(x, mesh):
    """``x`` retyped for ``mesh``'s axis types: its spec's Explicit axes kept, every other
    dimension left open to the compiler where it has Auto axes (no data moves for what
    the type drops)."""
    spec = sharding_types.explicit_spec(get_aval(x).sharding.spec, mesh, get_aval(x).ndim)
    if AxisType.Auto in mesh.axis_types:  # (else P.UNCONSTRAINED is refused, as JAX's)
        spec = PartitionSpec(*[UNCONSTRAINED if p is None else p for p in spec])
    return sharding_constraint_p.bind(x, sharding=NamedSharding(mesh, spec))


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """``f`` run with the mesh's ``axes`` (default: all) made Auto (left to the
    compiler; no longer in the types), its result resharded to ``out_sharding`` (a
    pytree prefix of NamedShardings / PartitionSpecs; else the ``out_sharding=``
    keyword of the call), as JAX's.

    Raises:
      TypeError: if no ``out_sharding`` is given.
      ValueError: if no mesh is in context.
    """
    if f is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        out_s = kwargs.pop("out_sharding") if out_sharding is None and \
            "out_sharding" in kwargs else out_sharding
        if out_s is None:
            raise TypeError("Missing required keyword argument: 'out_sharding'")
        mesh, new = _switched_mesh("auto_axes", axes, AxisType.Auto)
        if new.axis_types == mesh.axis_types:
            return f(*args, **kwargs)
        with use_mesh(new):
            args = tree_util.tree_map(lambda a: _mesh_cast(a, new), args)
            out = f(*args, **kwargs)
        return _constrain(out, out_s, typed=False)
    return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """``f`` run with the mesh's ``axes`` (default: all) made Explicit, its positional
    arguments first resharded to ``in_sharding`` (a pytree prefix of them; else the
    ``in_sharding=`` keyword of the call); its results' types then drop those axes
    again, as JAX's.

    Raises:
      TypeError: if no ``in_sharding`` is given.
      ValueError: if no mesh is in context.
    """
    if f is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        in_s = kwargs.pop("in_sharding") if in_sharding is None and \
            "in_sharding" in kwargs else in_sharding
        if in_s is None:
            raise TypeError("Missing required keyword argument: 'in_sharding'")
        mesh, new = _switched_mesh("explicit_axes", axes, AxisType.Explicit)
        with use_mesh(new):
            args = _constrain(args, tuple(in_s) if isinstance(in_s, list) else in_s,
                              typed=False)
            out = f(*args, **kwargs)
        return tree_util.tree_map(lambda o: _mesh_cast(o, mesh), out)
    return wrapped


def _impl(x, *, sharding):
    if type(x) is ShardedArray and x.layout == sharding.layout():  # no copy; named (and
        if x.layout.named == sharding:                             # typed) as asked
            return x
        return ShardedArray(x._shards, x.aval.update(sharding=None), sharding.layout())
    return transfer.put_sharded(x, sharding)


def _batch(vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    spec = list(sharding.spec)
    if d is not batching.not_mapped:
        spec += [None] * max(0, d - len(spec))
        env = batching._axis_env  # (vmap's spmd_axis_name, or its inputs' Explicit axes)
        ema = env.rule_ema
        spec.insert(d, env.rule_spmd_name or (ema and (ema[0] if len(ema) == 1 else ema)))
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


def _abstract_eval(x, *, sharding):
    # explicit mode: the value's type becomes the new sharding's (``reshard``)
    s = sharding_types.type_sharding(sharding, len(x.shape))
    return x if s is None and x._sharding is None else x.update(sharding=s)


sharding_constraint_p = standard_primitive("sharding_constraint", _abstract_eval)
sharding_constraint_p.def_impl(_impl)
ad.deflinear(sharding_constraint_p,
             lambda ct, x, *, sharding: [sharding_constraint_p.bind(ct, sharding=sharding)])
batching.primitive_batchers[sharding_constraint_p] = _batch
mlir.register_lowering(sharding_constraint_p, _lowering)


def traced_put(x, target):
    """``device_put`` of traced ``x`` to ``target``, as JAX's inside a program: a
    NamedSharding constrains and types it (as ``reshard``, Explicit axes too); any
    Sharding or ``MemorySpace`` moves it to that memory (``device_put_p``: the type
    changes; XLA places the buffers, see ``mlir_memory.annotate_memory_kinds``)."""
    if isinstance(target, NamedSharding):
        x = _constrain(x, target, typed=True)
    space = target if isinstance(target, MemorySpace) else memory_space_of(
        target.memory_kind)
    src = get_aval(x).memory_space
    return x if src is space else device_put_p.bind(x, memory_space=space, src=src)


def _put_impl(x, *, memory_space, src):
    if isinstance(x, ShardedArray):
        return transfer.put_sharded(x, x.sharding.with_memory_kind(memory_space.value))
    device = x.device if isinstance(x, Array) else None
    return transfer.device_put_value(x, device, memory_kind=memory_space.value)


device_put_p = standard_primitive(
    "device_put", lambda x, *, memory_space, src: x.update(memory_space=memory_space))
device_put_p.def_impl(_put_impl)
ad.deflinear(device_put_p, lambda ct, x, *, memory_space, src: [
    device_put_p.bind(ct, memory_space=src, src=memory_space)])
batching.primitive_batchers[device_put_p] = lambda vals, dims, **params: (
    device_put_p.bind(*vals, **params), dims[0])
mlir.register_lowering(device_put_p, lambda ctx, x, **_: x)  # (the result's type places it)
