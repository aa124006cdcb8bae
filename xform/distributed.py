"""Running one program across processes (``jax.distributed``'s API).

``initialize`` connects this process to jaxlib's coordination service (process 0
starts it) and replaces the CPU client by one that sees every process's devices,
with gloo TCP collectives between processes. pmap then maps over this process's
devices (``local_device_count()``) while its collectives span all processes, as in
JAX. Nothing here is a home-made transport: the service, the client and the
collectives are jaxlib's (reached through ``xform.backend``).
"""
import os
import warnings

from xform import backend
from xform.transforms.devices import _check_backend

_backend = backend   # (the module, where a parameter is named ``backend``)
from xform.core.config import config


def _env_int(name):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else None


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, *, initialization_timeout=60,
               heartbeat_timeout_seconds=30, shutdown_timeout_seconds=30,
               num_local_devices=None):
    """Join the distributed computation; call before anything touches a device.

    Arguments left out come from JAX's environment variables
    ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID`` (and
    ``JAX_LOCAL_DEVICE_IDS``; ``XFORM_NUM_LOCAL_DEVICES`` sets how many CPU devices this
    process has, as ``--xla_force_host_platform_device_count`` would).

    Args:
      coordinator_address: ``host:port`` of process 0's coordination service.
      num_processes: how many processes take part.
      process_id: this process's index in ``range(num_processes)``.
      local_device_ids: accepted for compatibility (CPU devices are all local).
      initialization_timeout: seconds to wait for the coordinator and the other
        processes before failing (never hangs).
      heartbeat_timeout_seconds, shutdown_timeout_seconds: coordination service limits.
      num_local_devices: CPU devices of this process (default: ``XFORM_NUM_LOCAL_DEVICES``,
        else the ``jax_num_cpu_devices`` option, else XLA's flag, else 1).

    Raises:
      RuntimeError: called twice, or after devices were used.
      ValueError: missing or inconsistent arguments.
      TimeoutError: the coordinator or another process was not reachable in time.

    >>> import xform
    >>> xform.distributed.process_count()
    1
    """
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    num_processes = num_processes if num_processes is not None else _env_int(
        "JAX_NUM_PROCESSES")
    process_id = process_id if process_id is not None else _env_int("JAX_PROCESS_ID")
    if num_local_devices is None:
        num_local_devices = _env_int("XFORM_NUM_LOCAL_DEVICES")
    if num_local_devices is None and config.jax_num_cpu_devices >= 0:   # (as JAX)
        num_local_devices = config.jax_num_cpu_devices
    if coordinator_address is None:
        raise ValueError("coordinator_address should be defined (argument or "
                         "JAX_COORDINATOR_ADDRESS), as 'host:port'")
    if ":" not in coordinator_address:
        raise ValueError(f"coordinator_address must be 'host:port', got "
                         f"{coordinator_address!r}")
    if num_processes is None:
        raise ValueError("Number of processes must be defined (num_processes or "
                         "JAX_NUM_PROCESSES)")
    if process_id is None:
        raise ValueError("The process id of the current process must be defined "
                         "(process_id or JAX_PROCESS_ID)")
    if not isinstance(num_processes, int) or num_processes < 1:
        raise TypeError(f"num_processes must be a positive int, got {num_processes!r}")
    if not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be an int in [0, num_processes), got "
                         f"process_id={process_id!r}, num_processes={num_processes}")
    if is_initialized():
        raise RuntimeError("xform.distributed.initialize should only be called once "
                           "(call shutdown() first to start again)")
    if backend.client_started():
        raise RuntimeError("xform.distributed.initialize must be called before any "
                           "device is used (devices(), arrays or computations), so that "
                           "the client can be created across processes")
    try:
        backend.distributed_initialize(
            coordinator_address, num_processes, process_id, num_local_devices,
            init_timeout_s=int(initialization_timeout),
            heartbeat_timeout_s=int(heartbeat_timeout_seconds),
            shutdown_timeout_s=int(shutdown_timeout_seconds))
    except ConnectionError as e:
        first = (str(e).splitlines() or [""])[0]
        raise TimeoutError(
            f"xform.distributed.initialize: could not reach the coordinator at "
            f"{coordinator_address} (or not all {num_processes} processes joined) within "
            f"{initialization_timeout} s (process {process_id}); check the address, that "
            f"process 0 is running, and the firewall. Runtime said: {first}") from None


def shutdown():
    """Leave the distributed computation (a no-op if not initialized)."""
    if is_initialized():
        backend.distributed_shutdown()


def is_initialized():
    return backend.distributed_state().client is not None


def process_index(backend=None):
    """This process's index (0 when not distributed); ``backend`` must be running."""
    _check_backend(backend)
    return _backend.distributed_state().process_id


def process_count(backend=None):
    """How many processes take part (1 when not distributed)."""
    _check_backend(backend)
    return _backend.distributed_state().num_processes


def process_indices(backend=None):
    """The indices of all processes: ``list(range(process_count()))``."""
    return list(range(process_count(backend)))


def _renamed(old, new, fn):
    def alias(backend=None):
        warnings.warn(f"jax.{old} has been renamed to jax.{new}. This alias will "
                      "eventually be removed; please update your code.")
        return fn()
    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{new}` (warns, as in JAX)."
    return alias


host_id = _renamed("host_id", "process_index", process_index)
host_count = _renamed("host_count", "process_count", process_count)
host_ids = _renamed("host_ids", "process_indices", process_indices)
