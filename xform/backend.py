"""The one door to jaxlib: PJRT client, devices, buffers, MLIR bindings, compile, execute.

A jaxlib upgrade touches this file only. Buffers are jaxlib's single-device arrays,
opaque to the rest of xform (which wraps them in :class:`xform.Array`)."""
import functools
import os

import numpy as np

from jax._src import config as _jax_config
from jax._src import core as _jcore
from jax._src import xla_bridge as _xb
from jax._src.sharding_impls import SingleDeviceSharding as _SingleDeviceSharding
from jaxlib import _hlo, _jax, xla_client as _xc
from jaxlib.mlir import ir  # noqa: F401  (re-exported for xform.interpreters.mlir)
from jaxlib.mlir.dialects import chlo, func as func_dialect, stablehlo as hlo  # noqa: F401

from xform.backend_analyses import Analyses

Device, Buffer = _jax.Device, _jax.ArrayImpl


# ---- runtime errors: jaxlib's JaxRuntimeError leaves this module as xform's own ----

class JaxRuntimeError(RuntimeError):
    """XLA's runtime failed compiling, transferring or executing a program (e.g. out of
    memory, a donated buffer). The message is XLA's, naming its status (``INTERNAL``...)."""


def xform_error(e):
    """``e`` as xform raises it (for hot paths calling jaxlib's C++ execute directly)."""
    if isinstance(e, _jax.JaxRuntimeError):
        return JaxRuntimeError(str(e)).with_traceback(e.__traceback__)
    return e


def _xform_errors(fn):
    """``fn`` raising xform's JaxRuntimeError where jaxlib raises its own."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _jax.JaxRuntimeError as e:
            raise xform_error(e) from None
    return call


@functools.cache
def client():
    """The PJRT client xform runs on, created on first use so that XLA_FLAGS and the
    start options count. As JAX: ``jax_platforms`` (``"cuda,cpu"``) lists the platforms
    to start, the first the default (unset: a GPU if jaxlib has a plugin, else the CPU);
    ``jax_num_cpu_devices`` >= 0 is the CPU device count. After ``distributed_initialize``
    it is a CPU client joined to the other processes (global devices, gloo collectives)."""
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


# What the client starts with; core/config.py's flags of these names push them here.
_start_options = {"jax_platforms": None, "jax_num_cpu_devices": -1}
DEFAULT = [None]  # the Device jax_default_device names (interpreters/placement.py sets it)


def set_start_option(name, value):
    """Record a start option; a new device count after the start is refused (JAX's)."""
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
    """The platform as lowering rules name it (``client().platform`` says ``"gpu"``)."""
    return _platform_of(client())


# ---- multi-process: jaxlib's distributed runtime (coordination service) + gloo ----

class _Distributed:
    service = None      # the coordination service (process 0 only)
    client = None       # this process's DistributedRuntimeClient
    cpu_client = None   # the CPU PJRT client joined to the other processes
    process_id, num_processes = 0, 1
    errors = []         # coordination errors reported to the callback


_dist = _Distributed()


def distributed_initialize(coordinator_address, num_processes, process_id,
                           num_local_devices=None, init_timeout_s=60,
                           heartbeat_timeout_s=30, shutdown_timeout_s=30):
    """Connect to the coordination service (process 0 starts it; ``connect`` fails after
    ``init_timeout_s``) and build a CPU client over all processes' devices (gloo TCP)."""
    port = coordinator_address.rsplit(":", 1)[1]
    if process_id == 0:
        _dist.service = _jax.get_distributed_runtime_service(
            f"[::]:{port}", num_processes, heartbeat_timeout=heartbeat_timeout_s,
            shutdown_timeout=shutdown_timeout_s)
    dclient = _jax.get_distributed_runtime_client(
        coordinator_address, process_id, init_timeout=init_timeout_s,
        heartbeat_timeout=heartbeat_timeout_s, shutdown_timeout=shutdown_timeout_s,
        use_compression=True, shutdown_on_destruction=False,
        # a callback keeps the runtime from aborting the process when the coordinator
        # cannot be reached: connect() then raises and the caller reports it
        missed_heartbeat_callback=_dist.errors.append)
    try:
        dclient.connect()
    except Exception as e:
        if _dist.service is not None:
            _dist.service.shutdown()
            _dist.service = None
        raise ConnectionError(str(e)) from None
    collectives = _jax.make_gloo_tcp_collectives(distributed_client=dclient)
    _dist.cpu_client = _jax.get_tfrt_cpu_client(
        asynchronous=True, distributed_client=dclient, node_id=process_id,
        num_nodes=num_processes, collectives=collectives, num_devices=num_local_devices,
        get_local_topology_timeout_minutes=max(1, init_timeout_s // 60),
        get_global_topology_timeout_minutes=max(1, init_timeout_s // 60))
    _dist.client = dclient
    _dist.process_id, _dist.num_processes = process_id, num_processes
    client.cache_clear()


def distributed_shutdown():
    for part in (_dist.client, _dist.service):
        if part is not None:
            part.shutdown()
    _dist.client = _dist.service = _dist.cpu_client = None
    _dist.process_id, _dist.num_processes = 0, 1
    client.cache_clear()


def distributed_barrier(name, timeout_s=60):
    """Wait until every process reaches the barrier ``name`` (no-op in one process)."""
    if _dist.client is not None:
        _dist.client.wait_at_barrier(name, timeout_s * 1000)


def live_processes(ids):
    """The processes among ``ids`` the coordination service sees alive (id -> incarnation)."""
    return _dist.client.get_live_nodes(ids)


def distributed_state():
    return _dist


def devices():  # all devices of the default backend
    return client().devices()


def default_device():  # jax_default_device's, else this process's first (all are local
    return DEFAULT[0] or client().local_devices()[0]  # when it is alone)


def device_count():
    return client().device_count()


def lapack_target(fn_base, dtype):
    """jaxlib's LAPACK FFI target for ``dtype`` (``lapack_sgetrf_ffi``), once registered."""
    from jax._src.lax import linalg as _jlinalg  # noqa: F401  (registers the targets)
    from jaxlib import lapack as _lapack
    return _lapack.prepare_lapack_call(fn_base, np.dtype(dtype))


def gpu_solver_target(name):
    """``name`` (``cusolver_getrf_ffi``), with jaxlib's GPU solvers registered and loaded."""
    from jax._src.lax import linalg as _jlinalg  # noqa: F401  (registers the targets)
    if "hybrid_" in name:   # jaxlib's host-LAPACK/MAGMA kernels (cuhybrid_geqp3...)
        from jaxlib import gpu_solver
        gpu_solver.initialize_hybrid_kernels()
    return name


register_custom_call_target = _xc.register_custom_call_target  # XLA's FFI registries, by name
register_custom_type = _xc.register_custom_type
FFI_INCLUDE_DIR = os.path.join(os.path.dirname(_xc.__file__), "include")  # xla/ffi/api/ffi.h


def register_batch_partitionable(name):  # SPMD may split its calls' leading (batch) axis
    _xc.register_custom_call_as_batch_partitionable(name)
    _xb.register_plugin_callbacks(functools.partial(
        _xc.register_custom_call_as_batch_partitionable, name))


class _IrContext(ir.Context):
    def __init__(self):
        # Skip ir.Context.__init__, which loads every dialect linked into jaxlib.
        super(ir.Context, self).__init__()


def make_ir_context():
    """An MLIR context with the dialects xform emits (func, chlo, stablehlo, mhlo, sdy);
    not JAX's, whose mhlo op classes cost a warm process's first call ~45 ms."""
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _mlirHlo, _sdy
    ctx = _IrContext()
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    ctx.enable_multithreading(False)
    _sdy.register_dialect(ctx)
    _mlirHlo.register_mhlo_dialect(ctx)
    chlo.register_dialect(ctx)
    hlo.register_dialect(ctx)
    return ctx


@functools.cache
def _sharding(device, memory_kind=None):
    return _SingleDeviceSharding(device, memory_kind=memory_kind)


@functools.lru_cache(maxsize=4096)
def _jax_aval(shape, dtype):
    return _jcore.ShapedArray(shape, dtype)


@_xform_errors
def device_put(x: np.ndarray, device=None, memory_kind=None):
    """Copy a host NumPy array of a canonical dtype to ``device`` (in its memory of
    ``memory_kind``; jaxlib is told x64 is on: xform canonicalizes, so jaxlib must not
    narrow 64-bit data)."""
    device = device or default_device()
    return _jax.batched_device_put(_jax_aval(x.shape, x.dtype), _sharding(device, memory_kind),
                                   [x], [device], True, False,
                                   _jax.HostBufferSemantics.ZERO_COPY, True)


@_xform_errors
def to_numpy(buf) -> np.ndarray:
    """Fetch a buffer to the host (blocks until it is ready). Read-only."""
    return np.asarray(buf)


def buffer_device(buf):
    return next(iter(buf.devices()))


def buffer_memory_kind(buf):
    return buf.sharding.memory_kind


@_xform_errors
def copy_to_device(buf, device):
    """Move a buffer to another device (via the host: fine for CPU devices)."""
    if buffer_device(buf) == device:
        return buf
    return device_put(np.asarray(buf), device)


@_xform_errors
def block_until_ready(buf):
    buf.block_until_ready()
    return buf


class Executable(Analyses):
    """A compiled XLA program; ``execute(buffers) -> buffers`` (holds its host callbacks)."""
    __slots__ = ("_exe", "execute", "devices", "module", "host_callbacks")

    def __init__(self, exe, devices, module, host_callbacks=()):
        self._exe = exe
        self.execute = _xform_errors(exe.execute)
        self.devices = devices
        self.module = module  # what was compiled: StableHLO text or MLIR bytecode
        self.host_callbacks = host_callbacks

    def make_execute(self, out_avals):
        """``execute`` for outputs of ``out_avals`` (with ``shape``, ``dtype``)."""
        handlers = self._handlers(out_avals)
        if handlers is None:
            return self.execute
        run = self._exe.execute_sharded

        def execute(bufs):
            try:
                return run(bufs).consume_with_handlers(handlers)
            except _jax.JaxRuntimeError as e:
                raise xform_error(e) from None
        return execute

    def execute_parts(self, out_avals):
        """``(run, handlers)``; ``run(bufs).consume_with_handlers(handlers)`` executes: for
        one device and plain dtypes jaxlib's C++ parts (6 -> 3.6 us a call; callers convert
        errors with :func:`xform_error`), else ``run`` wraps ``self.execute``."""
        handlers = self._handlers(out_avals)
        if handlers is None:
            return as_execute_parts(self.execute)
        return self._exe.execute_sharded, handlers

    def _handlers(self, out_avals):
        """jaxlib's C++ result handlers for ``out_avals``, or None where they don't apply."""
        if self.host_callbacks or len(self.devices) != 1 or not all(
                _plain_dtype(a.dtype) for a in out_avals):
            return None
        d, kinds = self.devices[0], self._exe.get_output_memory_kinds()[0]  # (XLA's memories)
        return [_array_result_handler(_jax_aval(tuple(a.shape), np.dtype(a.dtype)), _sharding(d, k))
                for a, k in zip(out_avals, kinds)]


def _array_result_handler(aval, sharding):
    """jaxlib's C++ output handler (0.10 takes ``_skip_checks``; 0.11 dropped it)."""
    try:
        return _jax.array_result_handler(aval, sharding, committed=True, _skip_checks=True)
    except TypeError:
        return _jax.array_result_handler(aval, sharding, committed=True)


class _Done:
    """Output buffers already in hand, shaped like jaxlib's ``ExecuteResults``."""
    __slots__ = ("outs",)

    def __init__(self, outs):
        self.outs = outs

    def consume_with_handlers(self, handlers):
        return self.outs


def as_execute_parts(execute):
    """``(run, handlers)`` for a plain ``execute(bufs) -> buffers`` function."""
    return (lambda bufs: _Done(execute(bufs))), ()


def _plain_dtype(dtype):
    """A dtype jaxlib's array type holds as is (not float0, not an extended dtype)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return False
    return dtype.kind in "biufc" or dtype.name in ("bfloat16", "float16")


def _device_list(devices):
    devices = list(devices) if devices is not None else [default_device()]
    return devices, _jax.DeviceList(tuple(devices))


def _one_device(device):
    return _jax.DeviceAssignment.create(np.array([[device.id]], np.int32))


@_xform_errors
def compile(module, devices=None, host_callbacks=(), skip_passes="") -> Executable:
    """Compile a StableHLO module (text or bytecode) for ``devices`` (one; default: the
    default device); ``host_callbacks[i]`` runs for the module's i-th host-callback custom
    call; ``skip_passes``: XLA passes not to run (comma-separated names)."""
    devices, device_list = _device_list(devices)
    options = _jax.CompileOptions()  # (an unset device assignment is device 0)
    options.executable_build_options.debug_options.xla_disable_hlo_passes = skip_passes
    options.executable_build_options.device_assignment = _one_device(devices[0])
    if not host_callbacks:
        if any((t if isinstance(module, str) else t.encode()) in module
               for t in _CALLBACK_TARGETS):  # XLA would crash calling index 0
            raise ValueError("This module calls host callbacks: pass them to compile "
                             "(lower_jaxpr_to_module(..., host_callbacks=list) collects them)")
        exe = client().compile_and_load(module, device_list, options)
        return Executable(exe, devices, module)
    errors = []
    wrapped = [_recording_errors(fn, errors) for fn in host_callbacks]
    with make_ir_context():  # the overload taking callbacks wants an ir.Module
        parsed = ir.Module.parse(module)
        exe = client().compile_and_load(parsed, device_list, options, wrapped)
    result = Executable(exe, devices, module, tuple(wrapped))
    result.execute = _reraising(exe, errors, wrapped)
    return result


# ---- what the compilation cache needs from the runtime ----

def compile_cache_context(devices=None, skip_passes="") -> bytes:
    """What besides the module decides ``compile``'s result (jaxlib version, platform,
    devices, options, XLA_FLAGS): the compilation cache hashes it into every key."""
    devices, _ = _device_list(devices)
    c = client()
    parts = [_jaxlib_version.__version__, c.platform, c.platform_version,
             ",".join(f"{d.id}:{d.device_kind}" for d in devices),
             os.environ.get("XLA_FLAGS", ""), skip_passes]
    return "\0".join(parts).encode() + b"\0" + _jax.CompileOptions().SerializeAsString()


def stablehlo_to_hlo(module):
    """StableHLO ``module`` (text or bytecode) as XLA's unoptimized ``XlaComputation``
    (``as_hlo_text()``, ``as_hlo_module()``): JAX's ``Lowered.compiler_ir("hlo")``."""
    return _jax.mlir.mlir_module_to_xla_computation(module, use_tuple_args=False)


def hlo_cost_analysis(computation):
    """XLA's cost estimate of an unoptimized ``XlaComputation`` (JAX's ``Lowered``'s);
    None on a PJRT plugin (a GPU), which has no such analysis."""
    c = client()
    return None if _xb.using_pjrt_c_api(c) else dict(
        _jax.hlo_module_cost_analysis(c, computation.as_hlo_module()))


def serialize_executable(exe: Executable) -> bytes:
    """The compiled program as bytes (for the persistent compilation cache)."""
    return client().serialize_executable(exe._exe)


@_xform_errors
def deserialize_executable(data: bytes, module, devices=None) -> Executable:
    """An Executable from ``serialize_executable``'s bytes. NB: like jaxlib, trusts its
    input; the compilation cache checks a digest of the bytes before calling this."""
    devices, device_list = _device_list(devices)
    options = _jax.CompileOptions()
    if len(devices) == 1:
        options.executable_build_options.device_assignment = _one_device(devices[0])
    exe = client().deserialize_executable(data, device_list, options)
    return Executable(exe, devices, module)


# ``flatten_builtin(tree) -> (leaves, treedef)``: jaxlib's C++ flatten over builtin
# containers only (other nodes are leaves), for jit's cache-hit path; no Python frame.
_builtin_pytrees = _jax.pytree.PyTreeRegistry(
    enable_none=True, enable_tuple=True, enable_namedtuple=True, enable_list=True, enable_dict=True)
flatten_builtin = _builtin_pytrees.flatten


is_deleted, delete = Buffer.is_deleted, Buffer.delete  # donated? / free now (use raises)


# ---- host callbacks ----
# A program calls Python through the typed-FFI custom call PYTHON_CALLBACK_TARGET (GPU:
# _GPU_CALLBACK_TARGET; api_version 4), ``mhlo.backend_config = {index = i : ui64}``
# indexing ``compile_and_load``'s host_callbacks: NumPy arrays in, a tuple of NumPy
# arrays of exactly the result types out. XLA never removes a ``has_side_effect`` one.
PYTHON_CALLBACK_TARGET = "xla_ffi_python_cpu_callback"
_GPU_CALLBACK_TARGET = "xla_ffi_python_gpu_callback"  # the same call on CUDA/ROCm
_CALLBACK_TARGETS = (PYTHON_CALLBACK_TARGET, _GPU_CALLBACK_TARGET)


def python_callback_target(platform):
    """The host-callback custom call's target on ``platform`` (as lowering rules name it)."""
    return _GPU_CALLBACK_TARGET if platform in ("cuda", "rocm") else PYTHON_CALLBACK_TARGET


def _recording_errors(fn, errors):
    """``fn`` remembering what it raises: XLA reports only a generic INTERNAL error."""
    def call(*args):
        try:
            return fn(*args)
        except BaseException as e:
            errors.append(e)
            raise
    return call


def _reraising(exe, errors, callbacks):
    """``exe.execute`` raising a failed host callback's own exception, after waiting
    for the program (GPU runs it asynchronously); it holds ``callbacks`` alive."""
    def run(bufs):
        errors.clear()
        try:
            outs, token = exe.execute_with_token(bufs)
            token.block_until_ready()
            return outs
        except _jax.JaxRuntimeError as e:
            if errors:
                raise errors[-1] from e
            raise xform_error(e) from None
    run.host_callbacks = callbacks
    return run


# ---- multi-device programs: replicated (pmap / shard_map) or SPMD-partitioned (jit) ----
# ``execute_sharded`` takes one global array per parameter, assembled from the per-device
# buffers under a 1-D sharding; ``disassemble_into_single_device_arrays`` gives them back.

@functools.lru_cache(maxsize=256)
def _replica_sharding(devices, memory_kind):  # (the buffers' memory: jaxlib checks it)
    from jax._src.mesh import Mesh
    from jax._src.partition_spec import PartitionSpec
    from jax._src.sharding_impls import NamedSharding
    return NamedSharding(Mesh(np.array(devices, dtype=object), ("_replicas",)),
                         PartitionSpec("_replicas"), memory_kind=memory_kind)


class ReplicatedExecutable(Analyses):
    """A program for ``len(devices)`` replicas or partitions; ``execute`` maps lists of
    one buffer per local device (``devices`` order) per argument to the same per output."""
    __slots__ = ("_exe", "devices", "text", "host_callbacks")

    def __init__(self, exe, devices, text, host_callbacks=()):
        self._exe, self.devices, self.text = exe, devices, text
        self.host_callbacks = host_callbacks

    @_xform_errors
    def execute(self, per_arg_buffers):
        n = len(self.devices)
        args = [_jax.ArrayImpl(_jax_aval((n,) + tuple(bufs[0].shape), bufs[0].dtype),
                               _replica_sharding(self.devices, bufs[0].sharding.memory_kind),
                               list(bufs), True, True)
                for bufs in per_arg_buffers]
        return self._exe.execute_sharded(args).disassemble_into_single_device_arrays()


@_xform_errors
def compile_replicated(module, devices, host_callbacks=(), partitioned=False,
                       propagate_to_outputs=()):
    """Compile for ``len(devices)`` replicas or, ``partitioned``, as one SPMD program
    XLA's Shardy partitioner splits as its ``sdy`` shardings say (JAX's options;
    partition p on devices[p]); ``propagate_to_outputs[i]``: XLA picks output i's."""
    devices, n, options = tuple(devices), len(devices), _jax.CompileOptions()
    build = options.executable_build_options
    build.num_replicas, build.num_partitions = (1, n) if partitioned else (n, 1)
    build.device_assignment = _jax.DeviceAssignment.create(np.array(
        [d.id for d in devices], np.int32).reshape(build.num_replicas, -1))
    if partitioned:
        build.use_spmd_partitioning = build.use_shardy_partitioner = True
        build.allow_spmd_sharding_propagation_to_output = list(propagate_to_outputs)
    if host_callbacks or not isinstance(module, (str, bytes)):
        with make_ir_context():
            exe = client().compile_and_load(ir.Module.parse(module), _jax.DeviceList(
                devices), options, list(host_callbacks))
    else:
        exe = client().compile_and_load(module, _jax.DeviceList(devices), options)
    return ReplicatedExecutable(exe, devices, module, tuple(host_callbacks))


def output_tilings(exe: ReplicatedExecutable):
    """Per output of a partitioned program: None (replicated) or ``(tile_dims,
    partitions, replicated_last)``, ``partitions`` row-major over ``tile_dims``."""
    return [_tiling(_hlo.HloSharding.from_proto(o)) for o in exe._exe.get_output_shardings() or ()]


def _tiling(s):
    t, kinds, dims = _hlo.OpSharding_Type, s.subgroup_types(), s.tile_assignment_dimensions()
    if s.tuple_elements() or not set(kinds) <= {t.REPLICATED, t.MANUAL}:
        raise NotImplementedError(f"sharding {s} (subgroup kinds {kinds})")
    n = len(dims) - len(kinds)  # (manual subgroups, in a partially manual body: as replicas)
    return None if s.is_replicated() or s.is_maximal() else (
        tuple(dims[:n]) + ((int(np.prod(dims[n:])),) if kinds else ()),
        tuple(s.tile_assignment_devices()), bool(kinds) or s.replicate_on_last_tile_dim())


def inspect_sharding_target(fn):
    """An ``InspectSharding`` call's (config, keepalive); XLA calls ``fn(its tiling)``."""
    keep = lambda s: fn("manual" if s.is_manual() else _tiling(s))  # noqa: E731
    return _jax.encode_inspect_sharding_callback(keep), keep


def local_devices():
    """The devices of this process (all devices unless running distributed)."""
    return client().local_devices()


def local_device_count():
    return client().local_device_count()


def process_index():
    return client().process_index()


def process_count():
    return _dist.num_processes


# ---- the profiler: jaxlib's TensorBoard/Perfetto traces, TraceMe spans, pprof heap ----

from jaxlib import _profile_data, _profiler, version as _jaxlib_version  # noqa: E402
TraceMe, ProfileOptions = _profiler.TraceMe, _profiler.ProfileOptions  # a span: TraceMe(name)
trace_me_enabled = _profiler.TraceMe.is_enabled  # is a profiler session recording now?
ProfileData = _profile_data.ProfileData    # a written xspace, read back (planes, events)
ProfileEvent, ProfilePlane = _profile_data.ProfileEvent, _profile_data.ProfilePlane
register_subprocess = _profiler.register_subprocess


def profiler_session(options=None):
    """jaxlib's profiler session (one per process; see :func:`profiler_export`)."""
    client()  # backends first, so the device tracers see them (as JAX does)
    _profiler.clear_metadata()
    _profiler.set_metadata("jaxlib_version", _jaxlib_version.__version__)
    _profiler.set_metadata(f"{client().platform}_version", client().platform_version)
    return _profiler.ProfilerSession(options if options is not None else ProfileOptions())


def profiler_export(session, log_dir):
    """Stop ``session``; write ``log_dir/plugins/profile/<run>/<host>.xplane.pb`` (+ json)."""
    try:
        session.stop_and_export(str(log_dir))
    except _jax.JaxRuntimeError as e:
        raise xform_error(e) from None
    finally:
        _profiler.clear_metadata()


def profiler_server(port):
    """jaxlib's profiler server on ``port`` for TensorBoard (stops when the result is dropped)."""
    client()
    return _profiler.start_server(port)


def heap_profile(platform_name=None):
    """The client's device memory profile: a ``pprof`` protocol buffer (not gzipped)."""
    c = client()
    if platform_name is not None and platform_name not in (c.platform, platform()):
        raise RuntimeError(f"Unknown backend {platform_name}. Available backends are "
                           f"[{c.platform!r}]")
    return c.heap_profile()


# ---- export: StableHLO portable artifacts (jax.export's serialized modules) ----

def serialize_portable_artifact(module) -> bytes:
    """``module`` as a StableHLO portable artifact 4 weeks old (JAX's: old consumers load it)."""
    target = hlo.get_version_from_compatibility_requirement(
        hlo.StablehloCompatibilityRequirement.WEEK_4)
    return _jax.mlir.serialize_portable_artifact(module, target, client().serialize_with_sdy)


def deserialize_portable_artifact(data: bytes, context):
    """The ir.Module of a portable artifact, in MLIR ``context``."""
    return _jax.mlir.deserialize_portable_artifact(bytes(data), context)


def refine_polymorphic_shapes(module_bytecode: bytes) -> bytes:
    """Static shapes from a module whose ``@main`` has static argument types (assertions fail)."""
    return _jax.mlir.refine_polymorphic_shapes(module_bytecode, True, True)
