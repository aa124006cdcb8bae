"""``vmap``: in_axes/out_axes as pytree prefixes, argument checks, then the BatchTrace."""
import functools

from xform.core import dtypes, sharding_types, tree_util
from xform.core.api_util import flatten_fun
from xform.core.traceback_util import api_boundary
from xform.core.trace import current_trace, get_aval
from xform.interpreters import batching
from xform.lax import elementwise as ew
from xform.lax.collectives import psum
from xform import ref as refs
from xform.transforms.jit import _arg_path


def _describe_sizes(leaves, dims, paths):
    lines = []
    for x, d, p in zip(leaves, dims, paths):
        if d is not None:
            aval = get_aval(x)
            lines.append(f"  * one axis had size {aval.shape[d]}: axis {d} of argument "
                         f"{p} of type {aval.str_short()};")
    return "\n".join(lines)


def _normalize_axis(d, ndim, what, aval=None):
    if d is None:
        return None
    if not isinstance(d, int):
        raise TypeError(f"vmap {what} must be an int or None, got {d!r}")
    if not -ndim <= d < ndim:
        if aval is not None:
            raise ValueError(
                f"vmap was requested to map its argument along axis {d}, which implies that "
                f"its rank should be at least {d + 1 if d >= 0 else -d}, but is only "
                f"{aval.ndim} (its shape is {aval.shape})")
        raise ValueError(f"vmap out_axes specification {d} is out of bounds for an output "
                         f"of rank {ndim}")
    return d % ndim


def _mapped_mesh_axis(avals, dims, paths):
    """The Explicit mesh axes the mapped dimensions are split over (a tuple, or None),
    as JAX's ``_mapped_axis_spec``: every mapped input must agree, and no unmapped input
    may be split over them (JAX's ValueErrors, naming the arguments)."""
    spec, first = None, None
    for a, d, p in zip(avals, dims, paths):
        if d is not None:
            s = sharding_types.spec_of(a)[d]
            if first is not None and s != spec:
                raise ValueError(
                    f"Mapped away dimension of inputs passed to vmap should be sharded the "
                    f"same. Got inconsistent axis specs: {spec} vs {s} (axis {first[1]} of "
                    f"argument {first[0]} of type {first[2].str_short()} and axis {d} of "
                    f"argument {p} of type {a.str_short()})")
            spec, first = s, (p, d, a)
    if spec is None:
        return None
    ema = spec if isinstance(spec, tuple) else (spec,)
    for a, d, p in zip(avals, dims, paths):
        if d is None:
            names = {n for e in sharding_types.spec_of(a) if e is not None
                     for n in (e if isinstance(e, tuple) else (e,))}
            if names & set(ema):
                raise ValueError(
                    f"Unmapped values passed to vmap cannot be sharded along the mesh axis "
                    f"you are vmapping over. Got type: {a.str_short()}, in_axes: None and "
                    f"vmapped mesh axis: {ema} (argument {p})")
    return ema


class _SumMatchAxis:
    """The axis name ``sum_match`` binds when the vmap has none (its psums' name)."""


def _sum(x, name):
    # in jnp.sum's dtype: bool and narrow integers widen to the default (u)int
    dt = get_aval(x).dtype
    wide = (dtypes.default_uint_dtype() if dtypes.is_unsigned(dt) else
            dtypes.default_int_dtype() if dtypes.is_integer(dt) or dtypes.is_bool(dt) else dt)
    if wide.itemsize > dt.itemsize or dtypes.is_bool(dt):
        x = ew.convert_element_type(x, wide)
    return psum(x, name)


def _summed(outs, dests, name):
    """``sum_match``: an output mapped where its out_axes is None is summed over the
    mapped axis (JAX's ``x.sum(src)``); an unmapped one is kept as it is."""
    trace = current_trace()
    return [_sum(o, name) if d is None and isinstance(o, batching.BatchTracer)
            and o._trace is trace and o.batch_dim is not batching.not_mapped else o
            for o, d in zip(outs, dests)]


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None,
         sum_match=False):
    """Vectorize ``fun`` over a mapped axis of its inputs.

    Args:
      fun: function to vectorize.
      in_axes: int, None, or a pytree prefix of the positional arguments giving the
        mapped axis of each (None: broadcast). Keyword arguments are mapped over axis 0.
      out_axes: int, None or a pytree prefix of the outputs: where the mapped axis goes.
      axis_name: name for collectives over the mapped axis.
      axis_size: the mapped size, needed only when no input is mapped.
      spmd_axis_name: mesh axis name(s) splitting the mapped axis in the shardings of
        jits (``in_shardings``/``out_shardings``), sharding constraints and shard_maps
        inside (a shard_map's body then sees the batch divided by their sizes).
      sum_match: an output that is mapped where ``out_axes`` says None is summed over
        the mapped axis instead of raising.

    Returns:
      The batched function.

    Raises:
      ValueError: if mapped axes disagree in size (the message lists each argument).

    >>> import xform, xform.numpy as jnp
    >>> xform.vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.arange(3.0), 2.0)
    Array([0., 2., 4.], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or isinstance(in_axes, (int, tuple))):
        raise TypeError(f"vmap in_axes must be an int, None, or a tuple of entries "
                        f"corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes}.")

    spmd_name = tuple(spmd_axis_name) if isinstance(spmd_axis_name, list) else spmd_axis_name

    @api_boundary
    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(
                f"vmap in_axes must be an int, None, or a tuple of entries corresponding to "
                f"the positional arguments passed to the function, but got "
                f"len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        ref_leaves = leaves
        leaves = [x._read() if isinstance(x, refs.Ref) else x for x in leaves]
        prefix = (in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args),
                  {k: 0 for k in kwargs})
        try:
            dims = tree_util.broadcast_prefix(prefix, (args, kwargs),
                                              is_leaf=lambda x: x is None)
        except ValueError as e:
            raise ValueError(f"vmap in_axes specification must be a tree prefix of the "
                             f"corresponding value: {e}") from None
        avals = [get_aval(x) for x in leaves]
        dims = [_normalize_axis(d, a.ndim, "in_axes", a) for d, a in zip(dims, avals)]
        sizes = {a.shape[d] for a, d in zip(avals, dims) if d is not None}
        paths = lambda: [_arg_path(p) for p, _ in  # noqa: E731  (only for errors)
                         tree_util.tree_flatten_with_path((args, kwargs))[0]]
        if len(sizes) > 1:
            raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                             + _describe_sizes(leaves, dims, paths()))
        if not sizes:
            if axis_size is None:
                raise ValueError("vmap must have at least one non-None value in in_axes "
                                 "(or axis_size must be given)")
            size = axis_size
        else:
            size = sizes.pop()
            if axis_size is not None and axis_size != size:
                raise ValueError(f"vmap got axis_size={axis_size} but the mapped axes have "
                                 f"size {size}")
        ema, spmd = None, spmd_name
        if any(a._sharding is not None for a in avals):  # (explicit sharding mode)
            ema = _mapped_mesh_axis(avals, dims, paths())
            if ema is not None and spmd is not None:
                if (spmd if isinstance(spmd, tuple) else (spmd,)) != ema:
                    raise ValueError(
                        f"Only one of spmd_axis_name or arrays sharded on `Explicit` mesh "
                        f"axis type is allowed. Got spmd_axis_name="
                        f"{spmd if isinstance(spmd, tuple) else (spmd,)} and arrays sharded "
                        f"on explicit_mesh_axis={ema}")
                spmd = None
        flat_fun, store = flatten_fun(fun, in_tree, kwargs=True)

        def out_dests():
            out_tree = store.out_tree
            try:
                return tree_util.broadcast_prefix(out_axes, tree_util.tree_unflatten(
                    out_tree, [0] * out_tree.num_leaves), is_leaf=lambda x: x is None)
            except ValueError as e:
                raise ValueError(f"vmap out_axes specification must be a tree prefix of the "
                                 f"corresponding value: {e}") from None

        def out_dims_fn(out_avals):
            return [_normalize_axis(d, a.ndim + 1, "out_axes")
                    for d, a in zip(out_dests(), out_avals)]

        name = axis_name
        if sum_match:
            name = _SumMatchAxis() if axis_name is None else axis_name
            flat_fun = (lambda f: lambda *a: _summed(f(*a), out_dests(), name))(flat_fun)

        finish = None
        if any(isinstance(x, refs.Ref) for x in ref_leaves):  # mutable refs: xform/ref.py
            flat_fun, leaves, out_dims_fn, finish = refs.batch_refs(
                flat_fun, ref_leaves, dims, out_dims_fn)
        try:
            outs = batching.batch_flat(flat_fun, size, leaves, dims, out_dims_fn, name,
                                       spmd, ema)
        except batching.SpecMatchError as e:
            path = tree_util.tree_flatten_with_path(tree_util.tree_unflatten(
                store.out_tree, [0] * store.out_tree.num_leaves))[0][e.leaf_idx][0]
            raise ValueError(f"at vmap out_axes{tree_util.keystr(path)}, got axis spec None "
                             f"but output was batched on axis {e.src}") from None
        if finish is not None:
            outs = finish(outs)
        return tree_util.tree_unflatten(store.out_tree, outs)
    return vmapped
