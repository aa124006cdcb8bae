"""Compile StableHLO with XLA: one-device executables, host callbacks, replicated or
SPMD-partitioned programs, and what the compilation cache needs."""
import functools

import numpy as np

from jaxlib import _hlo, _jax

from ._buffers import _jax_aval, _sharding
from ._client import client, default_device
from ._errors import _runtime_error, _xform_errors
from ._mlir import ir, make_ir_context


class _Analyses:
    """What XLA tells about a compiled program (both executable kinds)."""
    __slots__ = ()

    def cost_analysis(self):
        """XLA's cost estimate of the optimized program (``flops``, ``bytes accessed``...)."""
        return dict(self._exe.cost_analysis())

    def memory_analysis(self):
        """Sizes in bytes of arguments, outputs, aliased buffers, temporaries and code."""
        return self._exe.get_compiled_memory_stats()

    def hlo_text(self):
        """The optimized HLO XLA compiled."""
        return self._exe.hlo_modules()[0].to_string()


class Executable(_Analyses):
    """A compiled XLA program; ``execute(buffers) -> buffers`` (holds its host callbacks)."""
    __slots__ = ("_exe", "execute", "devices", "module", "host_callbacks")

    def __init__(self, exe, devices, module, host_callbacks=()):
        self._exe = exe
        self.execute = _xform_errors(exe.execute)
        self.devices = devices
        self.module = module  # what was compiled: StableHLO text or MLIR bytecode
        self.host_callbacks = host_callbacks

    def make_execute(self, out_avals):
        """``execute`` for a program whose outputs have ``out_avals`` (objects with
        ``shape`` and ``dtype``), built from :meth:`execute_parts`."""
        handlers = self._handlers(out_avals)
        if handlers is None:
            return self.execute
        run = self._exe.execute_sharded

        def execute(bufs):
            try:
                return run(bufs).consume_with_handlers(handlers)
            except _jax.JaxRuntimeError as e:
                raise _runtime_error(e) from None
        return execute

    def execute_parts(self, out_avals):
        """``(run, handlers)`` such that ``run(bufs).consume_with_handlers(handlers)``
        executes the program and returns its output buffers.

        For a one-device program of plain dtypes ``run`` is jaxlib's C++
        ``execute_sharded`` and ``handlers`` are C++ result handlers built once here:
        this skips jaxlib's Python ``execute`` wrapper (which builds a sharding object
        per output in Python), about 6 -> 3.6 us per call, and lets the hot paths call
        two C++ functions with no Python frame between them (they convert jaxlib's
        runtime errors with :func:`xform_error`). Otherwise (host callbacks, several
        devices, float0 or extended dtypes) ``run`` wraps ``self.execute``."""
        handlers = self._handlers(out_avals)
        if handlers is None:
            return as_execute_parts(self.execute)
        return self._exe.execute_sharded, handlers

    def _handlers(self, out_avals):
        """jaxlib's C++ result handlers for ``out_avals``, or None where they don't apply."""
        if self.host_callbacks or len(self.devices) != 1 or not all(
                _plain_dtype(a.dtype) for a in out_avals):
            return None
        sharding = _sharding(self.devices[0])
        return [_array_result_handler(_jax_aval(tuple(a.shape), np.dtype(a.dtype)), sharding)
                for a in out_avals]


def _array_result_handler(aval, sharding):
    """jaxlib's C++ handler making an output buffer an Array of ``aval`` (jaxlib 0.10
    takes ``_skip_checks``; 0.11 dropped it)."""
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
    """``(run, handlers)`` for a plain ``execute(bufs) -> buffers`` function (a
    wrapped or checked one): the uniform calling convention of :meth:`Executable.
    execute_parts`."""
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


@_xform_errors
def compile(module, devices=None, host_callbacks=()) -> Executable:
    """Compile a StableHLO module (text, or MLIR bytecode as ``bytes``) with XLA for
    ``devices`` (default: one device).

    ``host_callbacks[i]`` is the Python function the module's i-th host-callback
    custom call runs (see ``PYTHON_CALLBACK_TARGET``).
    """
    devices, device_list = _device_list(devices)
    options = _jax.CompileOptions()
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

def compile_cache_context(devices=None) -> bytes:
    """Everything besides the module that decides what ``compile`` produces: jaxlib's
    version, the platform, the devices, the compile options and XLA_FLAGS. The
    compilation cache hashes it into every key."""
    import os
    import jaxlib
    devices, _ = _device_list(devices)
    c = client()
    parts = [jaxlib.__version__, c.platform, c.platform_version,
             ",".join(f"{d.id}:{d.device_kind}" for d in devices),
             os.environ.get("XLA_FLAGS", "")]
    return "\0".join(parts).encode() + b"\0" + _jax.CompileOptions().SerializeAsString()


def serialize_executable(exe: Executable) -> bytes:
    """The compiled program as bytes (for the persistent compilation cache)."""
    return client().serialize_executable(exe._exe)


@_xform_errors
def deserialize_executable(data: bytes, module, devices=None) -> Executable:
    """An Executable from ``serialize_executable``'s bytes. NB: like jaxlib, trusts its
    input; the compilation cache checks a digest of the bytes before calling this."""
    devices, device_list = _device_list(devices)
    exe = client().deserialize_executable(data, device_list, _jax.CompileOptions())
    return Executable(exe, devices, module)


# ---- host callbacks ----
# jaxlib 0.10.2: a program calls back into Python through the typed-FFI custom call
# PYTHON_CALLBACK_TARGET (CPU; _GPU_CALLBACK_TARGET on GPU; api_version 4) whose
# ``mhlo.backend_config`` is ``{index = i : ui64}``; ``i`` indexes the
# ``host_callbacks`` passed to ``compile_and_load``. XLA calls that function with one NumPy array per operand
# and expects a tuple of NumPy arrays, one per result, of exactly the result types.
# A ``has_side_effect`` call is never removed by XLA.
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
    """``exe.execute`` raising a failed host callback's own exception (not XLA's wrapper).

    It waits for the program to finish: XLA on GPU runs it asynchronously, and a
    callback's error would otherwise surface later (or, with no outputs, never). It
    holds ``callbacks`` alive: callers may keep only this function."""
    def run(bufs):
        errors.clear()
        try:
            outs, token = exe.execute_with_token(bufs)
            token.block_until_ready()
            return outs
        except _jax.JaxRuntimeError as e:
            if errors:
                raise errors[-1] from e
            raise _runtime_error(e) from None
    run.host_callbacks = callbacks
    return run


# ---- multi-device programs: replicated (pmap / shard_map) or SPMD-partitioned (jit) ----
# ``execute_sharded`` takes one global array per parameter, assembled from the per-device
# buffers under a 1-D sharding; ``disassemble_into_single_device_arrays`` gives them back.

@functools.lru_cache(maxsize=256)
def _replica_sharding(devices):
    from jax._src.mesh import Mesh
    from jax._src.partition_spec import PartitionSpec
    from jax._src.sharding_impls import NamedSharding
    return NamedSharding(Mesh(np.array(devices, dtype=object), ("_replicas",)),
                         PartitionSpec("_replicas"))


class ReplicatedExecutable(_Analyses):
    """A program compiled once for ``len(devices)`` replicas or partitions.
    ``execute(per_arg_buffers) -> per_output_buffers``: lists of one buffer per device."""
    __slots__ = ("_exe", "devices", "text", "_sharding", "host_callbacks")

    def __init__(self, exe, devices, text, host_callbacks=()):
        self._exe = exe
        self.devices = devices
        self.text = text
        self._sharding = _replica_sharding(devices)
        self.host_callbacks = host_callbacks

    def execute(self, per_arg_buffers):
        n = len(self.devices)
        args = [_jax.ArrayImpl(_jax_aval((n,) + tuple(bufs[0].shape), bufs[0].dtype),
                               self._sharding, list(bufs), True, True)
                for bufs in per_arg_buffers]
        try:
            return self._exe.execute_sharded(args).disassemble_into_single_device_arrays()
        except _jax.JaxRuntimeError as e:
            raise _runtime_error(e) from None


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
    device_list = _jax.DeviceList(devices)
    if host_callbacks or not isinstance(module, (str, bytes)):
        with make_ir_context():
            parsed = ir.Module.parse(module)
            exe = client().compile_and_load(parsed, device_list, options,
                                            list(host_callbacks))
    else:
        exe = client().compile_and_load(module, device_list, options)
    return ReplicatedExecutable(exe, devices, module, tuple(host_callbacks))


def output_tilings(exe: ReplicatedExecutable):
    """Per output of a partitioned program: None (replicated) or ``(tile_dims,
    partitions, replicated_last)``: ``partitions`` (row-major over ``tile_dims``, whose
    last dim counts replicas if ``replicated_last``) says which holds each block."""
    out = []
    for op in exe._exe.get_output_shardings() or ():
        s = _hlo.HloSharding.from_proto(op)
        if s.is_replicated() or s.is_maximal():
            out.append(None)
            continue
        if len(s.subgroup_types()) > 1 or s.tuple_elements():
            raise NotImplementedError(f"output sharding {s} (several subgroup kinds)")
        out.append((tuple(s.tile_assignment_dimensions()),
                    tuple(s.tile_assignment_devices()), s.replicate_on_last_tile_dim()))
    return out
