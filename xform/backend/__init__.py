"""The one door to jaxlib: PJRT client, devices, buffers, MLIR bindings, compile, execute.

Everything else in xform talks to XLA through this package only (``from xform import
backend``; ``backend.compile(...)``), so a jaxlib upgrade touches one folder. Buffers
are jaxlib's single-device arrays, opaque to the rest of xform, which wraps them in
:class:`xform.Array`. This face re-exports the names of its modules: _errors (jaxlib's
runtime error as xform's), _client (client start, platform, devices, processes),
_distributed, _buffers (transfer, deletion, builtin flatten), _mlir (MLIR context,
portable artifacts), _compile (executables, host callbacks, replicated programs, the
compilation cache's needs) and _profiler. It imports nothing from the rest of xform.
"""
from jaxlib import _jax

from ._buffers import (block_until_ready, buffer_device, copy_to_device, delete, device_put,
                       dlpack, dlpack_device, flatten_builtin, is_deleted, to_numpy)
from ._client import (_start_options, client, client_started, default_device, device_count,
                      devices, distributed_state, gpu_solver_target, lapack_target,
                      local_device_count, local_devices, platform, process_count,
                      process_index, set_start_option)
from ._compile import (PYTHON_CALLBACK_TARGET, Executable, ReplicatedExecutable,
                       as_execute_parts, compile, compile_cache_context, compile_replicated,
                       deserialize_executable, output_tilings, python_callback_target,
                       serialize_executable)
from ._distributed import distributed_barrier, distributed_initialize, distributed_shutdown
from ._errors import JaxRuntimeError, xform_error
from ._mlir import (chlo, deserialize_portable_artifact, func_dialect, hlo, ir,
                    make_ir_context, refine_polymorphic_shapes, serialize_portable_artifact)
from ._profiler import (ProfileData, ProfileEvent, ProfileOptions, ProfilePlane, TraceMe,
                        heap_profile, profiler_export, profiler_server, profiler_session,
                        register_subprocess, trace_me_enabled)

Device = _jax.Device
Buffer = _jax.ArrayImpl
