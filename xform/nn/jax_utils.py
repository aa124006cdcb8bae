"""``xform.nn.jax_utils``: Flax's ``flax.jax_utils`` (``replicate``/``unreplicate`` for
pmap, ``prefetch_to_device``, ``pad_shard_unpad``, ``scan_in_dim``,
``partial_eval_by_shape``, the deprecated ``pmean``) on xform's pmap layout."""
import collections
import itertools
import warnings
from collections.abc import Iterable

import numpy as np

from xform import lax
from xform.core.api_util import flatten_fun
from xform.core.avals import ShapedArray
from xform.core.trace import current_trace, set_current_trace
from xform.core.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten
from xform.interpreters import partial_eval as pe
from xform.transforms.devices import device_put, local_devices
from xform.transforms.jit import ShapeDtypeStruct
from xform.transforms.pmap import device_put_replicated, device_put_sharded


def replicate(tree, devices=None, axis_name='_device_put_sharded'):
    """Copy every leaf of ``tree`` to each device, stacked along a new leading axis laid
    out one slice per device (what ``pmap`` takes without a transfer).

    Args:
      tree: a pytree of arrays (or NumPy arrays / scalars).
      devices: the devices to replicate to (default: ``local_devices()``, pmap's order).
      axis_name: accepted for Flax compatibility. NB: the result's mesh axis carries
        xform's pmap name for it, not ``axis_name`` (pmap ignores the name either way).

    Returns:
      The pytree of replicated arrays, each of shape ``(len(devices),) + leaf.shape``.

    >>> import numpy as np, xform
    >>> from xform.nn import jax_utils
    >>> jax_utils.replicate({'w': np.ones(3, np.float32)}, xform.devices()[:2])['w'].shape
    (2, 3)
    """
    devices = devices or local_devices()
    return device_put_replicated(tree, devices)


def unreplicate(tree):
    """The first replica of every leaf of ``tree`` (undoes :func:`replicate`).

    A scalar leaf is returned as it is, and so is (device 0's copy of) a leaf
    replicated whole on several devices (``pmap(..., out_axes=None)``,
    ``shard_map(..., out_specs=P())``), as Flax does.

    >>> import numpy as np, xform
    >>> from xform.nn import jax_utils
    >>> jax_utils.unreplicate(jax_utils.replicate(np.arange(3.0, dtype=np.float32)))
    Array([0., 1., 2.], dtype=float32)
    """
    def one(x):
        if getattr(x, 'ndim', None) == 0:
            return x
        s = getattr(x, 'sharding', None)
        if s is not None and len(s.device_set) > 1 and s.is_fully_replicated:
            return x.addressable_shards[0].data
        return x[0]
    return tree_map(one, tree)


def pmean(xs, axis_name):
    """Deprecated alias of :func:`xform.lax.pmean` (warns, as Flax's does)."""
    warnings.warn('use jax.lax.pmean instead', DeprecationWarning)
    return lax.pmean(xs, axis_name)


def _parse_spec(spec):
    spec = tuple(spec)
    if len(spec) == 2 and isinstance(spec[0], Iterable):
        return ShapeDtypeStruct(tuple(spec[0]), spec[1])
    return ShapeDtypeStruct(spec, np.float32)


def partial_eval_by_shape(fn, input_spec, *args, **kwargs):
    """Evaluate ``fn`` on inputs known only by shape: outputs that do not depend on the
    inputs come back as values, the others as ``ShapeDtypeStruct``.

    Args:
      fn: called as ``fn(*inputs, *args, **kwargs)``.
      input_spec: one shape or ``(shape, dtype)`` pair per input (dtype: float32 if
        omitted).
      *args: further positional arguments, passed as they are.
      **kwargs: keyword arguments, passed as they are.

    Returns:
      ``fn``'s output pytree, each leaf a value or a ``ShapeDtypeStruct``.

    >>> import xform.numpy as jnp
    >>> from xform.nn import jax_utils
    >>> y, c = jax_utils.partial_eval_by_shape(lambda x: (x * 2, jnp.ones(2)), [(3,)])
    >>> y.shape, c
    ((3,), Array([1., 1.], dtype=float32))
    """
    f = lambda *inputs: fn(*inputs, *args, **kwargs)  # noqa: E731
    structs = [_parse_spec(spec) for spec in input_spec]
    structs_flat, in_tree = tree_flatten(structs)
    flat_fun, store = flatten_fun(f, in_tree)
    trace = pe.JaxprTrace(parent=current_trace())
    try:
        ins = [trace.new_unknown(ShapedArray(s.shape, s.dtype)) for s in structs_flat]
        with set_current_trace(trace):
            outs = [trace.lift(o) for o in flat_fun(*ins)]
        out_flat = [o.value if o.jvar is None else ShapeDtypeStruct(o.aval.shape, o.aval.dtype)
                    for o in outs]
    finally:
        trace.invalidate()
    return tree_unflatten(store.out_tree, out_flat)


def prefetch_to_device(iterator, size, devices=None, axis_name='_device_put_sharded'):
    """Yield ``iterator``'s batches put on the devices ahead of use, ``size`` at a time.

    Each batch is a pytree of arrays whose leading dimension is split over ``devices``
    (default: ``local_devices()``, pmap's order): with one slice per device it is laid
    out as :func:`xform.device_put_sharded` does, ready for ``pmap``.

    Args:
      iterator: yields pytrees of arrays with a leading device dimension.
      size: how many batches to keep in flight (2 overlaps a step with a transfer).
      devices: the devices to put the batches on.
      axis_name: accepted for Flax compatibility (see :func:`replicate`).

    Yields:
      The batches, as Arrays on the devices.

    Raises:
      ValueError: a leaf's leading dimension is not a multiple of the device count.

    >>> import numpy as np, xform
    >>> from xform.nn import jax_utils
    >>> batches = iter([np.zeros((2, 3)), np.ones((2, 3))])
    >>> [b.shape for b in jax_utils.prefetch_to_device(batches, 2, xform.devices()[:2])]
    [(2, 3), (2, 3)]
    """
    queue = collections.deque()
    devices = local_devices() if devices is None else devices

    def put(xs):
        n, d = len(xs), len(devices)
        if n == d:
            return device_put_sharded(list(xs), devices)
        if n % d:
            raise ValueError(f'prefetch_to_device: a leaf of shape {np.shape(xs)} cannot '
                             f'be split over {d} devices: its leading dimension must be a '
                             f'multiple of {d}')
        # NB: several slices per device: one device holds the value (as xform's
        # device_put does for a NamedSharding); pmap splits it when called.
        return device_put(xs)

    def enqueue(n):  # up to n more batches
        for data in itertools.islice(iterator, n):
            queue.append(tree_map(put, data))

    enqueue(size)
    while queue:
        yield queue.popleft()
        enqueue(1)


def _scan_nd(body_fn, init, xs, n, unroll):
    """An n-dimensional scan: n nested 1-d scans, unroll[i] for the i-th."""
    if n == 1:
        return lax.scan(body_fn, init, xs, unroll=unroll[0])
    return lax.scan(lambda c, x: _scan_nd(body_fn, c, x, n - 1, unroll[1:]),
                    init, xs, unroll=unroll[0])


def scan_in_dim(body_fn, init, xs, axis=(0,), unroll=(1,), keepdims=False):
    """``lax.scan`` along the dimensions ``axis`` of every leaf of ``xs`` (nested
    scans, the first axis outermost).

    Args:
      body_fn: ``(carry, x) -> (carry, y)``.
      init: the initial carry.
      xs: a pytree of arrays to scan over.
      axis: an int or tuple of ints, the dimensions scanned over.
      unroll: an int or tuple of ints, left-padded with ones to ``len(axis)`` (so
        unrolling starts from the innermost scan).
      keepdims: ``body_fn`` sees (and returns) slices that keep the scanned
        dimensions with size 1.

    Returns:
      ``(carry, ys)``, ``ys`` with the scanned dimensions back in place.

    >>> import xform.numpy as jnp
    >>> from xform.nn import jax_utils
    >>> body = lambda c, x: (c + x, c)
    >>> c, ys = jax_utils.scan_in_dim(body, jnp.zeros(2), jnp.ones((2, 3)), axis=1)
    >>> c.shape, ys.shape
    ((2,), (2, 3))
    """
    axis = tuple(axis) if isinstance(axis, Iterable) else (axis,)
    unroll = tuple(unroll) if isinstance(unroll, Iterable) else (unroll,)
    unroll = (1,) * (len(axis) - len(unroll)) + unroll

    def perm(x):
        return axis + tuple(np.delete(np.arange(x.ndim), axis))

    def transpose_in(x):
        return x.transpose(perm(x))

    def transpose_out(x):
        return x.transpose(tuple(np.argsort(perm(x))))

    def body(c, xs):
        if keepdims:
            xs = tree_map(lambda x: transpose_out(x.reshape((1,) * len(axis) + x.shape)), xs)
        c, ys = body_fn(c, xs)
        if keepdims:
            ys = tree_map(transpose_in, ys)
            ys = tree_map(lambda y: y.reshape(y.shape[len(axis):]), ys)
        return c, ys

    c, ys = _scan_nd(body, init, tree_map(transpose_in, xs), len(axis), unroll)
    return c, tree_map(transpose_out, ys)


def pad_shard_unpad(wrapped, static_argnums=(0,), static_argnames=(), static_return=False):
    """Wrap a pmapped ``wrapped`` so it takes batches of any size: arguments are padded
    with zeros to a multiple of the device count and reshaped to ``(devices, batch, ...)``;
    outputs are brought to the host, flattened back and cut to the batch size.

    Args:
      wrapped: the function, typically ``pmap(f)``; signature ``params, *args, **kw``.
      static_argnums: positional arguments passed as they are (default: ``params``).
      static_argnames: keyword arguments passed as they are.
      static_return: return ``wrapped``'s output as it is (no un-sharding).

    Returns:
      The wrapper; it takes one more keyword argument, ``min_device_batch``, the
      smallest per-device batch to pad to (avoids recompiling for a short last batch).

    Raises:
      AssertionError: the padded arguments' leaves have different batch sizes (as Flax).

    >>> import numpy as np, xform
    >>> from xform.nn import jax_utils
    >>> f = jax_utils.pad_shard_unpad(xform.pmap(lambda w, x: x * w, in_axes=(None, 0)))
    >>> f(2.0, np.arange(5.0)).tolist()
    [0.0, 2.0, 4.0, 6.0, 8.0]
    """
    def pad_shard_unpad_wrapper(*args, min_device_batch=None, **kw):
        d = len(local_devices())
        batch_sizes = set()
        for i, a in enumerate(args):
            if i not in static_argnums:
                batch_sizes |= {t.shape[0] for t in tree_leaves(a)}
        for k, v in kw.items():
            if k not in static_argnames:
                batch_sizes |= {t.shape[0] for t in tree_leaves(v)}
        if len(batch_sizes) != 1:
            raise AssertionError(f'Inconsistent batch-sizes: {batch_sizes}')
        b = batch_sizes.pop()

        def pad(x):
            x = np.asarray(x)
            _, *shape = x.shape
            db, rest = divmod(b, d)
            if rest:
                x = np.concatenate([x, np.zeros((d - rest, *shape), x.dtype)], axis=0)
                db += 1
            if min_device_batch and db < min_device_batch:
                x = np.concatenate([x, np.zeros((d * (min_device_batch - db), *shape),
                                                x.dtype)])
                db = min_device_batch
            return x.reshape(d, db, *shape)

        args = [a if i in static_argnums else tree_map(pad, a) for i, a in enumerate(args)]
        kw = {k: v if k in static_argnames else tree_map(pad, v) for k, v in kw.items()}
        out = wrapped(*args, **kw)

        def unpad(x):  # to the host first, then cut (fewer shapes on the device)
            x = np.asarray(x)
            return x.reshape([np.prod(x.shape[:2]), *x.shape[2:]])[:b]

        return out if static_return else tree_map(unpad, out)

    return pad_shard_unpad_wrapper
