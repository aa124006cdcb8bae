"""``shard_map``: map a function over the blocks of arrays split across a device mesh.

Built on pmap's replicated execution: each operand dimension that a PartitionSpec
splits over mesh axes ``(a, b, ...)`` is reshaped into ``(size_a, size_b, ..., block)``
and those new dimensions become mesh-mapped dimensions of ``xla_pmap``; the body
sees one block per device, collectives name mesh axes, and outputs are reassembled
by the inverse reshape. Mesh axes an output spec leaves out are taken from the
first device along them: with ``check_vma`` (the default) the body's values are typed
with the axes they vary over (``xform.lax.vma``), which proves that replication;
without it the user promises it.
Those reshapes only relabel per-device buffers: results are Arrays tiled over the
mesh as ``out_specs`` says (``sharding.TiledLayout``). Called on arrays sharded over a
mesh, or manual over only some axes (``axis_names=``), it runs inside a program
partitioned over the mesh (docs/architecture.md, "Sharding").
"""
import functools
import math

from xform.core import sharding_types, tree_util
from xform.core.array import ShardedArray
from xform.core.trace import Tracer, get_aval
from xform.core.mesh import AxisType, Mesh, current_mesh
from xform.core.sharding import (UNCONSTRAINED, MeshLayout, NamedSharding, PartitionSpec,
                                 TiledLayout)
from xform.interpreters import pxla
from xform.lax import shapes
from xform.lax.vma import pvary_p
from xform.transforms.jit import jit


def _entry_names(entry):
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def _check_spec(spec, shape, mesh, what):
    if not isinstance(spec, PartitionSpec):
        if spec is None:
            spec = PartitionSpec()
        elif isinstance(spec, tuple):
            spec = PartitionSpec(*spec)
        else:
            raise TypeError(f"shard_map {what}: expected a PartitionSpec, got {spec!r}")
    if len(spec) > len(shape):
        raise ValueError(f"shard_map {what} has spec {spec} of length {len(spec)}, but the "
                         f"value has rank {len(shape)} (shape {tuple(shape)})")
    sizes = mesh.shape
    used = spec.axis_names()
    for n in used:
        if n not in sizes:
            raise ValueError(f"shard_map {what}: spec {spec} names mesh axis {n!r}, but the "
                             f"mesh has axes {mesh.axis_names}")
    if len(set(used)) != len(used):
        raise ValueError(f"shard_map {what}: spec {spec} uses a mesh axis more than once")
    return spec


def _split_layout(shape, spec, mesh, what):
    """(reshaped shape, per mesh axis: the reshaped dim it maps or None)."""
    spec = _check_spec(spec, shape, mesh, what)
    sizes = mesh.shape
    new_shape, where = [], {}
    for i, s in enumerate(shape):
        names = _entry_names(spec[i]) if i < len(spec) else ()
        n = math.prod(sizes[a] for a in names)
        if s % n:
            raise ValueError(f"shard_map {what}: dimension {i} of size {s} (shape "
                             f"{tuple(shape)}) is not divisible by the total size {n} of "
                             f"mesh axes {names} in its spec {spec}")
        for a in names:
            where[a] = len(new_shape)
            new_shape.append(sizes[a])
        new_shape.append(s // n)
    return tuple(new_shape), tuple(where.get(a) for a in mesh.axis_names)


def _manual_axes(mesh, axis_names, auto):
    """The mesh axes (in mesh order) a shard_map is manual over."""
    names = set(mesh.axis_names) - set(auto) if axis_names is None else set(axis_names)
    unknown = names - set(mesh.axis_names)
    if unknown:
        raise ValueError(f"shard_map axis_names {sorted(unknown)} are not axes of the mesh "
                         f"{mesh.axis_names}")
    return tuple(n for n in mesh.axis_names if n in names)


def _partial_manual(reshaped, params):
    """A shard_map manual over some mesh axes (its ``devices`` param is the Mesh: the
    axes it leaves to XLA, and the mesh a jit around it is placed on). It runs only
    inside a program partitioned over that mesh (``sdy.manual_computation`` over the
    manual axes), so an eager call compiles one."""
    def run(*xs):
        return pxla.xla_pmap_p.bind(*xs, **params)
    if any(isinstance(x, Tracer) for x in reshaped):
        return run(*reshaped)
    return jit(run)(*reshaped)


def _on_mesh(x):
    """Whether ``x`` is an Array tiled over a mesh, or (under grad/vmap outside jit) a
    tracer whose value is one."""
    while isinstance(x, Tracer):  # (JVP: primal; batching, checkify: val; partial eval)
        x = getattr(x, "primal", getattr(x, "val", getattr(x, "value", None)))
    return type(x) is ShardedArray and type(x.layout) is TiledLayout


def _reshape(x, shape, out_sharding=None):
    if tuple(get_aval(x).shape) == tuple(shape) and out_sharding is None:
        return x
    with sharding_types.untyped():  # (explicit mode: blocks are not values JAX types)
        return shapes.reshape(x, tuple(shape), out_sharding=out_sharding)


def _manual_spec(manual, x):
    """JAX's in_specs inferred from argument ``x``'s type: its manual axes."""
    keep = lambda p: p if p in manual else None  # noqa: E731
    out = []
    for p in sharding_types.spec_of(get_aval(x)):
        if isinstance(p, tuple):
            p = [keep(q) for q in p]
            while p and p[-1] is None:
                p.pop()
            if None in p:
                raise ValueError(f"Invalid spec: {sharding_types.spec_of(get_aval(x))}")
            p = tuple(p) or None
        out.append(keep(p) if isinstance(p, str) else p)
    return PartitionSpec(*out)


def _check_typed_arg(aval, spec):
    """JAX's error for an in_spec that is not the argument's type (all-Explicit mesh)."""
    spec = PartitionSpec(*[None if p is UNCONSTRAINED else p for p in spec],
                         *[None] * (aval.ndim - len(spec)))
    have = sharding_types.spec_of(aval)
    if have != spec:
        raise ValueError(
            f"in_specs passed to shard_map: {spec} does not match the specs of the input: "
            f"{have} for arg: {aval}. `in_specs` is an optional argument so you "
            "can omit specifying it and shard_map will infer the in_specs from the "
            "arguments. If you want to reshard your inputs, you can use `jax.reshard` on "
            "the arguments and then pass those args to shard_map.")


def _merge(o, shape, mesh, spec, explicit=False):
    """The inverse: a per-device result becomes an Array tiled as ``out_specs`` says
    (its buffers as they are; its sharding the user's ``mesh`` and ``spec``, as JAX
    names it), else a reshape (typed by ``spec`` on an Explicit mesh, as JAX's)."""
    if type(o) is ShardedArray and type(o.layout) is MeshLayout:
        lay = o.layout
        tiles = pxla.tiled_spec(o.aval.shape, lay.dims, shape)
        if tiles is not None:
            tiled = TiledLayout(lay.devices, lay.sizes, lay.names, tiles)
            tiled.named = NamedSharding(mesh, spec)
            return ShardedArray(o._shards, o.aval.update(shape=tuple(shape)), tiled)
    typed = explicit and isinstance(o, Tracer)
    return _reshape(o, shape, NamedSharding(mesh, spec) if typed else None)


def _out_vma_error(f, mesh, fails):
    """JAX's error for outputs varying over mesh axes their out_specs leave out."""
    msgs = []
    for path, spec, vma in fails:
        unmentioned = [n for n in mesh.axis_names if n not in spec.axis_names()]
        order = lambda names: ",".join(str(n) for n in mesh.axis_names if n in names)
        if len(unmentioned) > 1:
            msgs.append(
                f"* out_specs{path} is {spec} which implies that the corresponding output "
                f"value is only varying across mesh axes {{{order(spec.axis_names())}}} "
                f"and not {{{order([n for n in unmentioned if n in vma])}}}, but it was "
                f"inferred to be possibly varying over {{{order(vma)}}}")
        else:
            msgs.append(
                f"* out_specs{path} is {spec} which implies that the corresponding output "
                f"value is replicated across mesh axis '{unmentioned[0]}', but could not "
                f"infer replication over any axes")
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    return (f"shard_map applied to the function '{getattr(f, '__name__', f)}' was given "
            "out_specs which require replication which can't be statically inferred given "
            f"the mesh:\n\nThe mesh given has shape {tuple(mesh.shape.values())} with "
            f"corresponding axis names {mesh.axis_names}.\n\n" + "\n\n".join(msgs)
            + "\n\nCheck if these output values are meant to be replicated over those mesh "
            "axes. If not, consider revising the corresponding out_specs entries. If so, "
            "consider disabling the check by passing the check_vma=False argument to "
            "`jax.shard_map`.")


def _flat_out_specs(out_specs, out_tree):
    """Per output leaf: (key path of its spec in ``out_specs``, spec)."""
    is_spec = lambda x: x is None or isinstance(x, PartitionSpec)
    paths, spec_tree = tree_util.tree_flatten_with_path(out_specs, is_leaf=is_spec)
    keyed = tree_util.tree_unflatten(spec_tree, [(tree_util.keystr(k), s) for k, s in paths])
    try:
        return tree_util.broadcast_prefix(
            keyed, tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves),
            is_leaf=lambda x: isinstance(x, tuple) and len(x) == 2 and is_spec(x[1])
            and isinstance(x[0], str))
    except ValueError as e:
        raise ValueError(f"shard_map out_specs must be a tree prefix of the outputs: "
                         f"{e}") from None


def shard_map(f=None, mesh=None, in_specs=None, out_specs=None, *, check_rep=True,
              check_vma=None, axis_names=None, auto=frozenset()):
    """Map ``f`` over blocks of its arguments split across ``mesh`` per ``in_specs``;
    assemble its per-device results per ``out_specs``.

    Args:
      f: the per-block function (may also be given later: ``shard_map(mesh=...)(f)``).
      mesh: a :class:`xform.sharding.Mesh` (default: the one entered with ``with mesh:``).
      in_specs: a PartitionSpec per positional argument (a pytree prefix). Where the
        manual axes are all Explicit (``make_mesh``'s default) it must be each
        argument's type (``reshard`` first) and may be omitted: inferred from the types.
      out_specs: a PartitionSpec per output (a pytree prefix). All three may also be
        given positionally (``jax.experimental.shard_map``'s form).
      check_vma: type every value in ``f`` with the mesh axes it varies over (inputs:
        those their in_spec names). An op mixing invariant and varying operands makes
        the invariant ones varying (``pvary``, whose transpose is a ``psum``), so the
        gradient of a replicated input sums over the devices; ``psum`` makes values
        invariant; an output must not vary over an axis its out_spec leaves out.
        ``False``: no typing; left-out axes take the first device's value, and
        gradients follow JAX's ``check_vma=False`` rules. ``check_rep`` is its
        legacy name (used when ``check_vma`` is not given).
      axis_names: the mesh axes the body is manual over (default: all); the others
        stay with XLA's partitioner (the body sees whole dimensions along them), as
        an ``sdy.manual_computation`` over only those axes. ``auto``: the legacy
        complement (the axes left out).

    Returns:
      The mapped function.

    Raises:
      ValueError: a spec naming an unknown mesh axis, longer than the value's rank, or
        splitting a dimension not divisible by the mesh axes' sizes; with
        ``check_vma``, an output varying over a mesh axis its out_spec leaves out;
        on an all-Explicit mesh, an in_spec that is not its argument's type.
      TypeError: in_specs omitted while a manual axis is not Explicit.

    >>> import xform, xform.numpy as jnp
    >>> from xform.sharding import PartitionSpec as P
    >>> mesh = xform.make_mesh((2,), ('x',), axis_types=(xform.sharding.AxisType.Auto,))
    >>> f = xform.shard_map(lambda b: b - xform.lax.pmean(b.mean(), 'x'), mesh=mesh,
    ...                     in_specs=P('x'), out_specs=P('x'))
    >>> f(jnp.arange(4.0))
    Array([-1.5, -0.5,  0.5,  1.5], dtype=float32)
    """
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs,
                                 out_specs=out_specs, check_rep=check_rep,
                                 check_vma=check_vma, axis_names=axis_names, auto=auto)
    if mesh is None:
        mesh = current_mesh()
        if mesh is None:
            raise ValueError("shard_map requires a mesh: pass mesh= or call it inside "
                             "`with mesh:`")
    if out_specs is None:
        raise TypeError("shard_map requires out_specs (PartitionSpecs)")
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map requires mesh to be a xform.sharding.Mesh, got "
                        f"{type(mesh).__name__}")
    manual = _manual_axes(mesh, axis_names, auto)
    partial = len(manual) < len(mesh.axis_names)
    axes = tuple((n, s) for n, s in mesh.shape.items() if n in manual)
    devices = tuple(mesh.devices.flat)
    check = bool(check_rep if check_vma is None else check_vma)
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    explicit = all(types[n] is AxisType.Explicit for n in manual)

    def manual_dims(dims, spec, what):
        """Per manual axis, the reshaped dim it maps (the spec may name no other)."""
        bad = [n for n in spec.axis_names() if n not in manual]
        if bad:
            raise ValueError(
                f"shard_map {what} argument must refer to an axis marked as manual "
                f"({frozenset(manual)}), but:\n\n  {what} refers to {bad[0]!r}\n\nCheck the "
                f"{what} values passed to shard_map.")
        return tuple(d for n, d in zip(mesh.axis_names, dims) if n in manual)

    @functools.wraps(f)
    def mapped(*args):
        if any(map(_on_mesh, tree_util.tree_leaves(args))):
            return partitioned()(*args)  # (its trace calls ``mapped`` with tracers)
        specs = in_specs
        if specs is None or specs is Infer:  # (from the arguments' types)
            if not explicit:
                raise TypeError(
                    "shard_map in_specs argument must be a pytree of "
                    "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                    f"axis_names={frozenset(manual)} are of type "
                    f"{', '.join(str(types[n]) for n in manual)}")
            specs = tree_util.tree_map(lambda x: _manual_spec(manual, x), args)
        if isinstance(specs, PartitionSpec):
            specs = (specs,) * len(args)
        if isinstance(specs, list):
            specs = tuple(specs)
        if isinstance(specs, tuple) and len(specs) != len(args):
            raise ValueError(f"shard_map in_specs has {len(specs)} entries for "
                             f"{len(args)} positional arguments")
        leaves, in_tree = tree_util.tree_flatten(args)
        try:
            flat_specs = tree_util.broadcast_prefix(
                specs, args, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
        except ValueError as e:
            raise ValueError(f"shard_map in_specs must be a tree prefix of the arguments: "
                             f"{e}") from None
        reshaped, in_axes, block_avals = [], [], []
        for i, (x, spec) in enumerate(zip(leaves, flat_specs)):
            aval = get_aval(x)
            if explicit and not partial:
                _check_typed_arg(aval, _check_spec(spec, aval.shape, mesh, f"argument {i}"))
            shape, dims = _split_layout(aval.shape, spec, mesh, f"argument {i}")
            reshaped.append(_reshape(x, shape))
            dims = manual_dims(dims, _check_spec(spec, aval.shape, mesh, ""), "in_specs")
            in_axes.append(dims)
            vma = {n for (n, _), d in zip(axes, dims) if d is not None} if check else ()
            block_avals.append(pxla.mapped_aval(aval.update(shape=shape, vma=vma), dims))
        store = {}

        def flat_fun(*flat):
            out = f(*tree_util.tree_unflatten(in_tree, flat))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            store["specs"] = _flat_out_specs(out_specs, out_tree)
            store["out_tree"] = out_tree
            if check:  # an output its spec splits over an axis it is invariant on
                for i, (o, (_, spec)) in enumerate(zip(out_leaves, store["specs"])):
                    spec = _check_spec(spec, get_aval(o).shape, mesh, f"output {i}")
                    need = [n for n in manual if n in spec.axis_names()
                            and n not in get_aval(o).vma]
                    if need:
                        out_leaves[i] = pvary_p.bind(o, axes=tuple(need))
            return out_leaves

        closed = pxla.trace_body(flat_fun, block_avals, axes, check)
        out_tree = store["out_tree"]
        out_axes, full_shapes, fails, flat_out_specs = [], [], [], []
        for i, (aval, (path, spec)) in enumerate(zip(closed.out_avals, store["specs"])):
            # the reshaped output is the block shape with a mesh dim before each split dim
            spec = _check_spec(spec, aval.shape, mesh, f"output {i}")
            flat_out_specs.append(spec)
            if not aval.vma <= set(spec.axis_names()):
                fails.append((path, spec, aval.vma))
            shape, where = [], {}
            full = []
            for d, s in enumerate(aval.shape):
                names = _entry_names(spec[d]) if d < len(spec) else ()
                for a in names:
                    where[a] = len(shape)
                    shape.append(mesh.shape[a])
                shape.append(s)
                full.append(s * math.prod(mesh.shape[a] for a in names))
            manual_dims((), spec, "out_specs")
            out_axes.append(tuple(where.get(a) for a in manual))
            full_shapes.append(tuple(full))
        if fails:
            raise ValueError(_out_vma_error(f, mesh, fails))
        closed, reshaped, in_axes = pxla.closure_convert(closed, axes, reshaped, in_axes)
        params = dict(jaxpr=closed, axes=axes, in_axes=tuple(in_axes),
                      out_axes=tuple(out_axes), devices=mesh if partial else devices,
                      name=getattr(f, "__name__", "fun"), check_vma=check)
        if partial:
            outs = _partial_manual(reshaped, params)
        else:
            outs = pxla.xla_pmap_p.bind(*reshaped, **params)
        outs = [_merge(o, s, mesh, spec, explicit)
                for o, s, spec in zip(outs, full_shapes, flat_out_specs)]
        return tree_util.tree_unflatten(out_tree, outs)

    # Called on arrays sharded over a mesh (also under grad/vmap), it is jitted, as JAX
    # runs every eager shard_map: one program over the mesh (the body an
    # ``sdy.manual_computation``), so XLA moves blocks between layouts as needed and
    # nothing is gathered on one device.
    @functools.cache  # (made on first use: bad out_specs raise shard_map's errors)
    def partitioned():
        if partial:  # (out_specs say nothing of the axes left to XLA)
            return jit(mapped)
        return jit(mapped, out_shardings=tree_util.tree_map(
            lambda s: NamedSharding(mesh, PartitionSpec() if s is None else s), out_specs,
            is_leaf=lambda s: s is None or isinstance(s, PartitionSpec)))
    return mapped


class InferFromArgs:
    """``jax.sharding.Infer``: shard_map's in_specs (smap's in_axes) taken from the
    arguments' types."""

    def __repr__(self):
        return "jax.sharding.Infer"

    def __reduce__(self):
        return (_infer, ())


Infer = InferFromArgs()


def _infer():
    return Infer


def smap(f=None, /, *, in_axes=Infer, out_axes, axis_name):
    """``shard_map`` over one mesh axis, given as axis numbers (``jax.smap``): each
    argument is split along its ``in_axes`` dimension over mesh axis ``axis_name`` (of
    the mesh in context; ``None``: not split; omitted: inferred from the arguments'
    types on an Explicit axis), results are assembled along ``out_axes``; the body is
    manual over ``axis_name`` only, with ``check_vma``.

    >>> import xform, xform.numpy as jnp
    >>> mesh = xform.make_mesh((2,), ('x',), axis_types=(xform.sharding.AxisType.Auto,))
    >>> with xform.set_mesh(mesh):
    ...     print(xform.smap(lambda b: b * 2, in_axes=0, out_axes=0, axis_name='x')(
    ...         jnp.arange(4.0)))
    [0. 2. 4. 6.]
    """
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes,
                                 axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got "
                        f"{axis_name}")
    leaf = lambda x: x is None  # noqa: E731
    if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple "
                        "of entries corresponding to the positional arguments passed to "
                        f"the function, but got {in_axes}.")
    if in_axes is not Infer and not all(isinstance(a, int)
                                        for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or "
                        f"(nested) container with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with "
                        f"those types as leaves, but got {out_axes}.")
    spec = lambda a: PartitionSpec() if a is None else PartitionSpec(  # noqa: E731
        *[None] * a, axis_name)
    return shard_map(
        f, in_specs=Infer if in_axes is Infer else tree_util.tree_map(spec, in_axes,
                                                                      is_leaf=leaf),
        out_specs=tree_util.tree_map(spec, out_axes, is_leaf=leaf),
        axis_names={axis_name}, check_vma=True)
