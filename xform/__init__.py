"""xform: composable function transformations (jit, grad, vmap) compiled with XLA.

``import xform as jax; import xform.numpy as jnp`` runs JAX-style code.
"""
from xform import dtypes, errors, lax, tree, tree_util
from xform.core.array_type import Array
from xform.core.config import config
from xform.interpreters import pjit as _pjit  # noqa: F401  (registers the call primitive)
from xform.transforms.jit import (jit, make_jaxpr, eval_shape, ShapeDtypeStruct)
from xform.transforms.ad import (grad, value_and_grad, jvp, vjp, linearize, jacfwd,
                                 jacrev, hessian)
from xform.transforms.vmap import vmap
from xform.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert
from xform.transforms.checkpoint import checkpoint, remat, checkpoint_policies
from xform import ad_checkpoint  # noqa: E402
from xform.transforms.devices import (device_put, device_get, devices, device_count,
                                      local_devices, default_backend, block_until_ready,
                                      disable_jit, make_array_from_callback,
                                      make_array_from_single_device_arrays,
                                      make_array_from_process_local_data)
from xform import debug  # noqa: E402  (xform.debug.print / callback)
from xform.interpreters.callback import pure_callback
from xform.core.config import (enable_x64, debug_nans, debug_infs,  # noqa: E402,F401
                               states as _states, checking_leaks, transfer_guard,
                               make_user_context)
from xform.transforms.runtime import (  # noqa: E402
    typeof, clear_caches, live_arrays, effects_barrier, named_call, named_scope,
    ensure_compile_time_eval)
from xform.transforms.ad_extras import (  # noqa: E402
    jacobian, linear_transpose, custom_gradient, fwd_and_bwd)

from xform import numpy  # noqa: E402,F401  (also installs the Array/Tracer operators)
from xform import image, nn, scipy  # noqa: E402,F401
from xform import ops, flatten_util  # noqa: E402,F401  (jax.ops segment sums, ravel_pytree)
from xform.interpreters import pxla as _pxla  # noqa: E402,F401
from xform.transforms.pmap import (  # noqa: E402
    pmap, device_put_sharded, device_put_replicated, local_device_count)
from xform import sharding, distributed  # noqa: E402,F401
from xform.distributed import process_index, process_count  # noqa: E402,F401
from xform.transforms.shard_map import shard_map, smap  # noqa: E402
from xform.sharding import (  # noqa: E402,F401
    make_mesh, NamedSharding, PartitionSpec, P, reshard, set_mesh)
from xform import random  # noqa: E402,F401
from xform import lazy  # noqa: E402  (xform.lazy(): the context manager and its module)
from xform.lazy import mark_step, dispatch_report  # noqa: E402

from xform import version  # noqa: E402  (jax.version: the module)
from xform.version import __version__, __version_info__  # noqa: E402,F401
from xform.dtypes import float0  # noqa: E402,F401
from xform.backend import Device  # noqa: E402,F401
from xform.core.sharding import Shard  # noqa: E402,F401  (what Array.addressable_shards holds)
from types import SimpleNamespace as _NS  # noqa: E402
from xform.core.avals import MemorySpace as _MemorySpace  # noqa: E402
memory = _NS(Space=_MemorySpace)  # jax.memory.Space: device_put(x, memory.Space.Host)
from xform.distributed import (  # noqa: E402,F401
    host_count, host_id, host_ids, process_indices)
from xform.transforms.devices import copy_to_host_async  # noqa: E402,F401
from xform.environment_info import print_environment_info  # noqa: E402,F401
from xform.numpy._dslice import ds  # noqa: E402,F401  (jax.ds: a dynamic-start slice)

# Optimizers, TrainState and checkpoints. ``xform.checkpoint`` is a callable module: calling
# it is ``jax.checkpoint`` (remat, imported above), its attributes are save/restore/...
from xform import optim, training  # noqa: E402,F401
import importlib as _importlib  # noqa: E402
checkpoint = _importlib.import_module("xform.checkpoint")
from xform import ref  # noqa: E402  (mutable array references: xform.ref)
from xform.ref import new_ref, empty_ref, freeze, Ref  # noqa: E402,F401
for _name, _state in _states.items():  # JAX's other top-level config states
    globals().setdefault(_name, _state)
from xform import experimental  # noqa: E402,F401  (io_callback, enable_x64, shard_map)
from xform import stages, typing  # noqa: E402,F401  (attributes after `import jax`)
from xform import profiler  # noqa: E402,F401  (jax.profiler: traces, annotations)
from xform import monitoring  # noqa: E402,F401  (jax.monitoring: event listeners)
from xform import export  # noqa: E402,F401  (jax.export: an attribute after `import jax`)
from xform import ffi  # noqa: E402,F401  (jax.ffi: foreign function calls)
from xform import custom_batching, custom_derivatives  # noqa: E402,F401  (jax.custom_*)
