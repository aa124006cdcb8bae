"""``pmap`` and the multi-device helpers (``device_put_sharded``/``_replicated``).

pmap traces ``fun`` once at the per-device avals with ``axis_name`` bound, then
binds ``xla_pmap`` (interpreters/pxla.py): eagerly one replicated XLA program runs
on every device; under grad/jit/vmap-inside the primitive's rules apply.
"""
import functools

import numpy as np

from xform import backend
from xform import backend as _backend
from xform.core import transfer, tree_util
from xform.core.array import Array, ShardedArray
from xform.core.sharding import MeshLayout
from xform.core.trace import Tracer, _context, eval_trace, get_aval
from xform.interpreters import pxla, spmd
from xform.transforms.devices import _check_backend
from xform.transforms.jit import _arg_path, jit


def _flat_axes(spec, tree, what, is_leaf=lambda x: x is None):
    try:
        return tree_util.broadcast_prefix(spec, tree, is_leaf=is_leaf)
    except ValueError as e:
        raise ValueError(f"pmap {what} specification must be a tree prefix of the "
                         f"corresponding value: {e}") from None


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(),
         global_arg_shapes=None):
    """Map ``fun`` over a leading (or ``in_axes``) axis, one slice per device, compiled
    once as a replicated XLA program; collectives over ``axis_name`` span the devices.

    Args:
      fun: the per-device function (pytrees in and out).
      axis_name: name of the mapped axis for collectives (``psum(x, axis_name)``).
      in_axes: int, None or a pytree prefix of the positional arguments.
      out_axes: int, None or a pytree prefix of the outputs.
      static_broadcasted_argnums: positional arguments passed to ``fun`` as Python
        values (hashable; part of the compile key).
      devices: the devices to run on (default: the first ``size`` local devices).
      axis_size: the mapped size when no argument is mapped.
      donate_argnums: positional arguments whose device buffers the program may reuse
        for outputs of the same per-device shape and dtype (as ``jit``'s); a donated
        Array is deleted by the call and using it again raises an error. Ignored under
        other transformations.

    Returns:
      The mapped function; mapped outputs are Arrays with one buffer per device.

    Raises:
      ValueError: more devices needed than exist, mapped sizes that differ, or an
        ``in_axes`` out of range (the message names the argument).

    >>> import xform, xform.numpy as jnp
    >>> xform.pmap(lambda x: x - xform.lax.pmean(x, 'i'), 'i')(jnp.arange(2.0))
    Array([-0.5,  0.5], dtype=float32)
    """
    if isinstance(static_broadcasted_argnums, int):
        static_broadcasted_argnums = (static_broadcasted_argnums,)
    static = tuple(static_broadcasted_argnums)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    donate_argnums = tuple(donate_argnums)
    name = axis_name if axis_name is not None else object()  # unnamed: not addressable
    fun_name = getattr(fun, "__name__", "fun")

    cache = {}  # (in_tree, avals, dims, size, static args) -> traced body

    def _trace(args, static_idx, in_tree, avals, size):
        store = {}

        def flat_fun(*flat):
            a, k = tree_util.tree_unflatten(in_tree, flat)
            it = iter(a)
            full = [args[i] if i in static_idx else next(it) for i in range(len(args))]
            out_leaves, store["out_tree"] = tree_util.tree_flatten(fun(*full, **k))
            return out_leaves

        axes = ((name, size),)
        closed = pxla.trace_body(flat_fun, avals, axes)
        out_tree = store["out_tree"]
        od = _flat_axes(out_axes, tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves),
                        "out_axes")
        out_dims = []
        for d, a in zip(od, closed.out_avals):
            if d is not None:
                if not -(a.ndim + 1) <= d < a.ndim + 1:
                    raise ValueError(f"pmap out_axes specification {d} is out of bounds for "
                                     f"an output of rank {a.ndim + 1}")
                d %= a.ndim + 1
            out_dims.append((d,))
        return closed, out_tree, tuple(out_dims), axes

    @functools.wraps(fun)
    def mapped(*args, **kwargs):
        for i in static:
            if not -len(args) <= i < len(args):
                raise ValueError(f"pmap static_broadcasted_argnums {i} is out of range for "
                                 f"a call with {len(args)} positional arguments")
        static_idx = {i % len(args) for i in static}
        donate = {i % len(args) for i in donate_argnums if -len(args) <= i < len(args)}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_idx)
        if isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple of entries "
                                 f"corresponding to the positional arguments passed to the "
                                 f"function, but got len(in_axes)={len(in_axes)}, "
                                 f"len(args)={len(args)}")
            dyn_in_axes = tuple(a for i, a in enumerate(in_axes) if i not in static_idx)
        else:
            dyn_in_axes = (in_axes,) * len(dyn_args)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        dims = _flat_axes((dyn_in_axes, {k: 0 for k in kwargs}), (dyn_args, kwargs),
                          "in_axes")
        paths = None
        avals, size = [], None
        for i, (x, d) in enumerate(zip(leaves, dims)):
            aval = get_aval(x)
            if isinstance(x, Array) and aval.memory_space.value != "device":  # (as JAX's)
                spmd.check_memory_kind(x.sharding.with_memory_kind("device"), x.sharding, aval)
            if d is not None:
                if not isinstance(d, int):
                    raise TypeError(f"pmap in_axes must be ints or None, got {d!r}")
                if not -aval.ndim <= d < aval.ndim:
                    paths = paths or _paths(dyn_args, kwargs)
                    raise ValueError(f"pmap was requested to map its argument {paths[i]} "
                                     f"along axis {d}, which implies that its rank should be "
                                     f"at least {d + 1 if d >= 0 else -d}, but it has rank "
                                     f"{aval.ndim} (shape {aval.shape})")
                d %= aval.ndim
                dims[i] = d
                if size is not None and aval.shape[d] != size:
                    paths = paths or _paths(dyn_args, kwargs)
                    lines = [f"  * argument {p} has size {get_aval(v).shape[dd]} along axis "
                             f"{dd}" for p, v, dd in zip(paths, leaves, dims)
                             if dd is not None and isinstance(dd, int)
                             and dd < get_aval(v).ndim]
                    raise ValueError("pmap got inconsistent sizes for array axes to be "
                                     "mapped:\n" + "\n".join(lines))
                size = aval.shape[d]
                avals.append(pxla.mapped_aval(aval, (d,)))
            else:
                avals.append(aval)
        if size is None:
            if axis_size is None:
                raise ValueError("pmap requires at least one argument with a mapped axis "
                                 "(an in_axes entry that is not None), or axis_size")
            size = axis_size
        elif axis_size is not None and axis_size != size:
            raise ValueError(f"pmap got axis_size={axis_size} but the mapped axes have "
                             f"size {size}")
        devs = None if devices is None else tuple(devices)
        if devs is not None and len(devs) != size:
            raise ValueError(f"pmap got {len(devs)} devices for a mapped axis of size {size}")
        if devs is None and size > backend_count():
            raise ValueError(f"compiling a computation that requires {size} devices (the "
                             f"mapped axis size), but only {backend_count()} devices are "
                             f"available")
        nproc = _backend.process_count()
        if nproc > 1 and devs is None:  # collectives span every process's devices
            if size != backend_count():
                raise ValueError(f"pmap across {nproc} processes maps over this process's "
                                 f"{backend_count()} local devices, but the mapped axis has "
                                 f"size {size}")
            size *= nproc
        static_vals = tuple(args[i] for i in sorted(static_idx))
        key = (in_tree, tuple(avals), tuple(dims), size, static_vals)
        try:
            hit = cache.get(key)
        except TypeError:
            raise ValueError("pmap static_broadcasted_argnums values must be hashable, got "
                             f"{static_vals!r}") from None
        if hit is None:
            hit = _trace(args, static_idx, in_tree, avals, size)
            # a body that closed over tracers of an enclosing transformation is valid
            # for this call only: not cached
            if not any(isinstance(c, Tracer) for c in hit[0].consts):
                cache[key] = hit
                if len(cache) > 64:
                    cache.pop(next(iter(cache)))
        closed, out_tree, out_dims, axes = hit
        closed, operands, in_dims = pxla.closure_convert(
            closed, axes, leaves, tuple((d,) for d in dims))
        params = dict(jaxpr=closed, axes=axes, in_axes=in_dims, out_axes=tuple(out_dims),
                      devices=devs, name=fun_name)
        if donate and _context.trace is eval_trace:  # (under transformations: ignored)
            mask = [False] * (len(operands) - len(leaves))   # (hoisted closure tracers)
            for i, a in enumerate(args):
                if i not in static_idx:
                    mask += [i in donate] * len(tree_util.tree_leaves(a))
            mask += [False] * (len(operands) - len(mask))
            outs = pxla.xla_pmap_p.impl(*operands, donated=tuple(mask), **params)
        else:
            outs = pxla.xla_pmap_p.bind(*operands, **params)
        return tree_util.tree_unflatten(out_tree, outs)

    def call(*args, **kwargs):  # (not ``mapped``: jit's wrapper copies its ``lower``)
        return mapped(*args, **kwargs)
    call.__name__ = fun_name

    def lower(*args, **kwargs):
        # NB: as jit of pmap's AOT path, a one-device program (same values); JAX's
        # lowers the shard_map over the devices
        return jit(call, static_argnums=static).lower(*args, **kwargs)
    mapped.lower = lower
    return mapped


def backend_count():
    return backend.local_device_count()


def _paths(args, kwargs):
    return [_arg_path(p) for p, _ in tree_util.tree_flatten_with_path((args, kwargs))[0]]


def local_device_count(backend=None):
    """Number of devices of this process."""
    _check_backend(backend)
    return _backend.local_device_count()


def device_put_sharded(shards, devices):
    """Stack ``shards`` (a list of pytrees of equal structure, one per device) into
    Arrays laid out one slice per device, ready for pmap without a transfer.

    >>> import xform, numpy as np
    >>> x = xform.device_put_sharded([np.zeros(2), np.ones(2)], xform.devices()[:2])
    >>> x.shape
    (2, 2)
    """
    devices = tuple(devices)
    if len(shards) != len(devices):
        raise ValueError(f"device_put_sharded: {len(shards)} shards for {len(devices)} "
                         f"devices; the numbers must match")

    def stack(*xs):
        vals = [transfer.canonical_numpy(np.asarray(x)) for x in xs]
        shapes = {v.shape for v in vals}
        if len(shapes) > 1:
            raise ValueError(f"device_put_sharded: shards have different shapes {shapes}")
        bufs = [backend.device_put(v, d) for v, d in zip(vals, devices)]
        aval = get_aval(xs[0]) if isinstance(xs[0], Array) else \
            transfer.device_put_value(vals[0]).aval
        # weak only if every shard is a weak Array (as jnp.stack would type them)
        weak = all(isinstance(x, Array) and x.aval.weak_type for x in xs)
        aval = aval.update(shape=(len(xs),) + vals[0].shape, weak_type=weak)
        return ShardedArray(bufs, aval, MeshLayout(devices, (len(devices),), (0,), (None,)))
    return tree_util.tree_map(stack, shards[0], *shards[1:])


def device_put_replicated(x, devices):
    """Put a copy of every leaf of ``x`` on each device, stacked along a new axis 0.

    >>> import xform, numpy as np
    >>> xform.device_put_replicated(np.ones(2), xform.devices()[:3]).shape
    (3, 2)
    """
    devices = tuple(devices)
    return device_put_sharded([x] * len(devices), devices)
