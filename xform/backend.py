"""The one door to jaxlib: PJRT client, devices, buffers, MLIR bindings, compile, execute.

Everything else in xform talks to XLA through this module only, so a jaxlib
upgrade touches one file. Buffers are jaxlib's single-device arrays, opaque to
the rest of xform, which wraps them in :class:`xform.Array`.
"""
import functools

import numpy as np

from jax._src import core as _jcore
from jax._src import xla_bridge as _xb
from jax._src.interpreters import mlir as _jmlir
from jax._src.sharding_impls import SingleDeviceSharding as _SingleDeviceSharding
from jaxlib import _jax
from jaxlib.mlir import ir  # noqa: F401  (re-exported for xform.interpreters.mlir)
from jaxlib.mlir.dialects import func as func_dialect  # noqa: F401
from jaxlib.mlir.dialects import stablehlo as hlo  # noqa: F401

Device = _jax.Device
Buffer = _jax.ArrayImpl


@functools.cache
def client():
    """The PJRT CPU client (created on first use, so XLA_FLAGS set before it count)."""
    return _xb.get_backend("cpu")


def devices():
    """All devices of the default backend."""
    return client().devices()


def default_device():
    return client().devices()[0]


def device_count():
    return client().device_count()


def make_ir_context():
    """An MLIR context with the StableHLO, func and other dialects jaxlib registers."""
    return _jmlir.make_ir_context()


@functools.cache
def _sharding(device):
    return _SingleDeviceSharding(device)


@functools.lru_cache(maxsize=4096)
def _jax_aval(shape, dtype):
    return _jcore.ShapedArray(shape, dtype)


def device_put(x: np.ndarray, device=None):
    """Copy a host NumPy array (already of a canonical dtype) to ``device``.

    ``enable_x64=True``: xform canonicalizes dtypes itself, so jaxlib must not narrow
    64-bit data according to jax's own x64 flag.
    """
    device = device or default_device()
    return _jax.batched_device_put(_jax_aval(x.shape, x.dtype), _sharding(device),
                                   [x], [device], True, False,
                                   _jax.HostBufferSemantics.ZERO_COPY, True)


def to_numpy(buf) -> np.ndarray:
    """Fetch a buffer to the host (blocks until it is ready). Read-only."""
    return np.asarray(buf)


def buffer_device(buf):
    return next(iter(buf.devices()))


def copy_to_device(buf, device):
    """Move a buffer to another device (via the host: fine for CPU devices)."""
    if buffer_device(buf) == device:
        return buf
    return device_put(np.asarray(buf), device)


def block_until_ready(buf):
    buf.block_until_ready()
    return buf


def dlpack(buf, **kwargs):
    return buf.__dlpack__(**kwargs)


def dlpack_device(buf):
    return buf.__dlpack_device__()


class Executable:
    """A compiled XLA program; ``execute(buffers) -> buffers``."""
    __slots__ = ("_exe", "execute", "devices", "text")

    def __init__(self, exe, devices, text):
        self._exe = exe
        self.execute = exe.execute  # bound method: the dispatch hot path calls it directly
        self.devices = devices
        self.text = text

    def cost_analysis(self):
        return self._exe.cost_analysis()

    def hlo_text(self):
        return self._exe.hlo_modules()[0].to_string()


def compile(module_text: str, devices=None) -> Executable:
    """Compile a StableHLO module (text) with XLA for ``devices`` (default: one device)."""
    devices = list(devices) if devices is not None else [default_device()]
    options = _jax.CompileOptions()
    exe = client().compile_and_load(module_text, _jax.DeviceList(tuple(devices)), options)
    return Executable(exe, devices, module_text)
