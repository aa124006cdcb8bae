"""The PJRT client: its start options, platform, devices and process; the solver
targets registered with it."""
import functools

import numpy as np

from jax._src import config as _jax_config
from jax._src import xla_bridge as _xb


@functools.cache
def client():
    """The PJRT client xform runs on (created on first use, so XLA_FLAGS and the
    ``jax_platforms`` option set before it count). As JAX: ``jax_platforms`` (read from
    ``JAX_PLATFORMS``, e.g. ``"cuda,cpu"``) lists the platforms to start and the first
    is the default; unset, a GPU when jaxlib has a GPU plugin, else the CPU.

    ``jax_num_cpu_devices`` (>= 0) is the CPU client's device count, as JAX passes it
    to the CPU client's creation (else ``--xla_force_host_platform_device_count``).

    After ``distributed_initialize`` it is a CPU client joined to the other processes
    (global devices, gloo collectives)."""
    if _dist.cpu_client is not None:
        return _dist.cpu_client
    if _start_options["jax_num_cpu_devices"] >= 0:  # (jax refuses it once started)
        _jax_config.update("jax_num_cpu_devices", _start_options["jax_num_cpu_devices"])
    wanted = _start_options["jax_platforms"]
    if not wanted:
        return _xb.get_backend()
    if not _xb.backends_are_initialized():
        _jax_config.update("jax_platforms", wanted)  # start only these (no idle GPU client)
    try:
        return _xb.get_backend(wanted.split(",")[0].strip())
    except (RuntimeError, AssertionError) as e:  # jaxlib asserts when no GPU is visible
        raise RuntimeError(f"jax_platforms={wanted!r}: could not start that platform "
                           f"on this machine ({str(e) or 'no such device'})") from None


def client_started():
    return client.cache_info().currsize > 0


# What the client starts with. The config flags of these names push their values here
# (core/config.py), so this module needs nothing from xform.
_start_options = {"jax_platforms": None, "jax_num_cpu_devices": -1}


def set_start_option(name, value):
    """Record ``jax_platforms``/``jax_num_cpu_devices`` for the client's start; a new
    device count after the start is refused (JAX's validator and message)."""
    if (name == "jax_num_cpu_devices" and client_started()
            and _start_options[name] != value):
        raise RuntimeError(f"{name} config should be updated before backends are "
                           "initialized i.e. before any JAX operation is executed. You "
                           "should initialize this config immediately after `import jax`.")
    _start_options[name] = value


@functools.cache
def _platform_of(c):
    plat = c.platform
    if plat == "gpu":  # jaxlib names CUDA and ROCm clients "gpu"
        plat = "rocm" if "rocm" in c.platform_version.lower() else "cuda"
    return plat


def platform():
    """The running client's platform as lowering rules name it: ``"cpu"``, ``"cuda"``,
    ``"rocm"`` or ``"tpu"`` (``client().platform`` says ``"gpu"`` for both GPU kinds)."""
    return _platform_of(client())


class _Distributed:
    service = None      # the coordination service (process 0 only)
    client = None       # this process's DistributedRuntimeClient
    cpu_client = None   # the CPU PJRT client joined to the other processes
    process_id = 0
    num_processes = 1
    errors = []         # coordination errors reported to the callback


_dist = _Distributed()

def distributed_state():
    return _dist


def devices():
    """All devices of the default backend."""
    return client().devices()


def default_device():
    return client().local_devices()[0]  # this process's first (all are local if alone)


def device_count():
    return client().device_count()


def lapack_target(fn_base, dtype):
    """jaxlib's LAPACK FFI target for ``dtype`` (``lapack_sgetrf_ffi``), once registered."""
    from jax._src.lax import linalg as _jlinalg  # noqa: F401  (registers the targets)
    from jaxlib import lapack as _lapack
    return _lapack.prepare_lapack_call(fn_base, np.dtype(dtype))


def gpu_solver_target(name):
    """``name`` (e.g. ``cusolver_getrf_ffi``), once jaxlib's GPU solvers are registered."""
    from jax._src.lax import linalg as _jlinalg  # noqa: F401  (registers the targets)
    return name

def local_devices():
    """The devices of this process (all devices unless running distributed)."""
    return client().local_devices()


def local_device_count():
    return client().local_device_count()


def process_index():
    return client().process_index()


def process_count():
    return _dist.num_processes
