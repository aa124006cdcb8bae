"""``xform.experimental.multihost_utils``: moving values between processes (JAX's).

Each is built as JAX builds it, on global arrays and jit over a mesh: the devices as a
``("processes", "local_devices")`` mesh, a value with one block per process, and a
jitted sum or identity whose output is replicated, so every process reads it. In one
process they are host-side identities (JAX's shortcuts). Import it explicitly, as in
JAX: ``from xform.experimental import multihost_utils``.
"""
import contextlib
import zlib

import numpy as np

from xform import backend
from xform.core import dtypes, tree_util
from xform.core.array import Array, ShardedArray
from xform.core.mesh import Mesh, set_mesh
from xform.core.sharding import NamedSharding, PartitionSpec as P
from xform.core.trace import Tracer
from xform.transforms.devices import (device_get, make_array_from_callback,
                                      make_array_from_process_local_data)
from xform.transforms.jit import jit

__all__ = ["ProcessFailureError", "assert_equal", "broadcast_one_to_all",
           "global_array_to_host_local_array", "host_local_array_to_global_array",
           "live_devices", "process_allgather", "reached_preemption_sync_point",
           "sync_global_devices"]


def _processes_mesh():
    devices = np.array(backend.devices(), dtype=object).reshape(
        backend.process_count(), backend.local_device_count())
    return Mesh(devices, ("processes", "local_devices"))


def _psum(xs):
    return tree_util.tree_map(lambda x: x.sum(axis=0, dtype=x.dtype), xs)


def _identity(x):
    return x


def _addressable(x):
    return not isinstance(x, ShardedArray) or x.is_fully_addressable


def broadcast_one_to_all(in_tree, is_source=None):
    """Every process gets the source process's (default: process 0's) pytree of arrays
    (same shapes everywhere), as NumPy arrays."""
    if backend.process_count() == 1:
        return tree_util.tree_map(np.asarray, in_tree)
    if is_source is None:
        is_source = backend.process_index() == 0
    mesh = _processes_mesh()

    def pre(x):
        x = np.asarray(x) if is_source else np.zeros_like(x)
        return host_local_array_to_global_array(x[None], mesh, P("processes"))
    with set_mesh(mesh):
        out = jit(_psum, out_shardings=P())(tree_util.tree_map(pre, in_tree))
    return tree_util.tree_map(lambda x: device_get(x.addressable_data(0)), out)


def _allgather_leaf(x, tiled):
    if not _addressable(x):
        if not tiled:
            raise ValueError("Gathering global non-fully-addressable arrays only supports "
                             "tiled=True")
        out = jit(_identity, out_shardings=x.sharding.with_spec(P()))(x)
        return np.asarray(out.addressable_data(0))
    if backend.process_count() == 1:
        out = np.asarray(x)
        return out if tiled else out[None]
    host = np.asarray(x)
    if host.ndim == 0 or not tiled:
        host = host[None]
    mesh = _processes_mesh()
    x = make_array_from_process_local_data(NamedSharding(mesh, P("processes")), host)
    out = jit(_identity, out_shardings=NamedSharding(mesh, P()))(x)
    return np.asarray(out.addressable_data(0))


def process_allgather(in_tree, tiled=False):
    """Every process's pytree of arrays (same shapes everywhere), gathered as NumPy
    arrays: stacked on a new leading axis, or concatenated along axis 0 if ``tiled``
    (scalars are stacked). A global (not fully addressable) Array comes back whole.

    Raises:
      ValueError: for a global Array with ``tiled=False``.
    """
    return tree_util.tree_map(lambda x: _allgather_leaf(x, tiled), in_tree)


def sync_global_devices(name):
    """A barrier across all processes; raises if they passed different ``name``s."""
    assert_equal(np.uint32(zlib.crc32(name.encode())),
                 f"sync_global_devices name mismatch ('{name}')")


def reached_preemption_sync_point(step_id):
    """Whether every process has reached the step after a preemption notice at which
    to checkpoint: False in one process (JAX's). NB: across processes it raises JAX's
    error for a missing preemption sync manager: xform's ``distributed.initialize``
    starts none (JAX's does, under ``jax_enable_preemption_service``)."""
    if backend.distributed_state().client is None:
        return False
    raise RuntimeError("Preemption sync manager has not been initialized: "
                       "xform.distributed.initialize starts none (JAX starts one when "
                       "the 'jax_enable_preemption_service' config is enabled).")


class ProcessFailureError(Exception):
    """Raised by ``live_devices`` when processes failed during its block;
    ``failed_devices`` holds their devices."""

    def __init__(self, failed_devices):
        self.failed_devices = failed_devices
        super().__init__(f"Devices failed: {failed_devices}")


def _live(devices):
    """``{device: its process's incarnation}`` for the ``devices`` whose process lives
    (the coordination service's view, the same on every process)."""
    processes = {d.process_index for d in devices}
    if backend.process_index() not in processes:
        raise ValueError("Provided devices do not have any local devices.")
    alive = backend.live_processes(list(processes))
    return {d: alive[d.process_index] for d in devices if d.process_index in alive}


class _LiveDevices:
    """``with live_devices(devices) as alive:``: run the block on the live subset of
    ``devices`` (sorted by id), as JAX's. Entering is a barrier among their processes,
    which all get the same subset; leaving raises ``ProcessFailureError`` on every one
    of them if a process died or restarted during the block, so either all of them
    finish the block or all raise. Needs the distributed runtime (RuntimeError before
    ``xform.distributed.initialize``, even in one process, as JAX's)."""

    def __init__(self):
        self.devices = None

    @contextlib.contextmanager
    def __call__(self, devices):
        client = backend.distributed_state().client
        if client is None:
            raise RuntimeError("Distributed JAX not initialized.")
        if not devices:
            raise ValueError("No devices provided.")
        if self.devices is None:
            self.devices = _live(devices)
        exception = None
        try:
            yield sorted(self.devices, key=lambda d: d.id)
        except Exception as e:  # noqa: BLE001  (re-raised below, after the check)
            exception = e
        finally:
            old, self.devices = self.devices, _live(devices)
            failed = {d for d in old if self.devices.get(d, object()) != old[d]}
            if failed:
                raise ProcessFailureError(failed) from exception
            if exception:
                raise exception


live_devices = _LiveDevices()


def assert_equal(in_tree, fail_message=""):
    """Raise AssertionError unless every process holds the same pytree of values."""
    def expected(x):
        if not _addressable(x):
            return np.asarray(x.addressable_data(0))
        x = np.asarray(x)
        return np.concatenate([x.reshape(1) if x.ndim == 0 else x]
                              * backend.process_count())
    out = process_allgather(in_tree, tiled=True)
    same = tree_util.tree_map(lambda a, b: bool(np.all(np.equal(a, b))),
                              tree_util.tree_map(expected, in_tree), out)
    if not all(tree_util.tree_leaves(same)):
        raise AssertionError(f"{fail_message}. Expected: {out}; got: {in_tree}.")


def _flat_specs(tree, pspecs, what):
    leaves, treedef = tree_util.tree_flatten(tree)
    specs = tree_util.broadcast_prefix(pspecs, tree,
                                       is_leaf=lambda s: s is None or isinstance(s, P))
    for s in specs:
        if s is None:
            raise ValueError("`None` is not a valid input to the pspecs argument. Please "
                             "use jax.sharding.PartitionSpec() if you wanted to replicate "
                             f"your input ({what}).")
    return leaves, specs, treedef


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """Global Arrays over ``global_mesh`` laid out per ``pspecs`` (a pytree prefix of
    PartitionSpecs) from each process's local values: the block its devices hold (the
    mesh must be contiguous: each process's devices a sub-block of it). Inside jit,
    in one process, the identity."""
    leaves, specs, treedef = _flat_specs(local_inputs, pspecs, "input pspecs")
    out = []
    for x, spec in zip(leaves, specs):
        if isinstance(x, Tracer):
            out.append(_traced(x, "host_local_array_to_global_array"))
        elif not _addressable(x):
            out.append(x)
        else:
            x = np.zeros(np.shape(x), bool) if np.dtype(x.dtype) == dtypes.float0 else x
            out.append(make_array_from_process_local_data(NamedSharding(global_mesh, spec),
                                                          x))
    return tree_util.tree_unflatten(treedef, out)


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """The inverse: each process's block of global Arrays laid out per ``pspecs``, as an
    Array over its own devices (a fully addressable Array is returned as it is)."""
    leaves, specs, treedef = _flat_specs(global_inputs, pspecs, "output pspecs")
    out = []
    for x, spec in zip(leaves, specs):
        if isinstance(x, Tracer):
            out.append(_traced(x, "global_array_to_host_local_array"))
        elif isinstance(x, Array) and _addressable(x):
            out.append(x)
        else:
            out.append(_local_part(x, global_mesh, spec))
    return tree_util.tree_unflatten(treedef, out)


def _local_part(x, mesh, spec):
    sharding = NamedSharding(mesh, spec)
    local = NamedSharding(_local_mesh(mesh), spec)
    if not isinstance(x, ShardedArray):  # host data: the global value
        x = np.asarray(x)
        x = make_array_from_callback(x.shape, sharding, lambda index: x[index])
    elif x.sharding != sharding:
        x = jit(_identity, out_shardings=sharding)(x)
    shape = tuple(b * k for b, k in zip(sharding.shard_shape(x.shape),
                                        _splits(local.mesh, spec, x.ndim)))
    return ShardedArray(x._shards, x.aval.update(shape=shape), local.layout())


def _splits(mesh, spec, ndim):
    sizes = mesh.shape
    out = []
    for d in range(ndim):
        entry = spec[d] if d < len(spec) else None
        names = () if entry is None else (entry,) if isinstance(entry, str) else entry
        out.append(int(np.prod([sizes[n] for n in names])))
    return out


def _local_mesh(mesh):
    """The sub-block of ``mesh`` holding this process's devices (JAX's ``local_mesh``)."""
    me = backend.process_index()
    mine = np.vectorize(lambda d: d.process_index == me, otypes=[bool])(mesh.devices)
    box = tuple(slice(int(i.min()), int(i.max()) + 1) for i in np.nonzero(mine))
    return Mesh(mesh.devices[box], mesh.axis_names)


def _traced(x, name):
    if backend.process_count() == 1:
        return x
    raise NotImplementedError(f"xform: {name} of a traced value across processes (use it "
                              "outside jit)")
