"""Where a one-device program runs: where its Array arguments live.

Eager ops, composites and jit compile each program once, for the default device, and
their hot paths hand the buffers straight to that executable. An Array on another device
(``device_put(x, devices()[k])``, a result computed there, or arrays made under another
``default_device``) fails that run inside PJRT; ``run_elsewhere`` is the rare path that
follows: the same module compiled for the arguments' device (once: the program cache
keeps it), other buffers (Python scalars, default-device Arrays: uncommitted, as in
JAX) copied there, and the program run again. Results stay on that device, so the
next op follows them. Arrays on two different non-default devices raise JAX's
"incompatible devices" error. See docs/architecture.md, "Placement".
"""
from xform import backend
from xform.core.array import Array
from xform.core.config import config
from xform.interpreters.compiler import compile_module


def check_deleted(args, name, describe=None):
    """Raise a clear error if one of ``args`` is an Array whose buffer was deleted
    (donated to an earlier computation); ``describe(i)`` names argument ``i``."""
    for i, x in enumerate(args):
        if type(x) is Array and backend.is_deleted(x._buf):
            what = describe(i) if describe is not None else f"argument {i}"
            raise RuntimeError(
                f"Array has been deleted with shape={x.aval.str_short()}: {what} of "
                f"{name} was donated to an earlier computation (donate_argnums) and its "
                "buffer was reused; it cannot be used again.") from None


def run_elsewhere(compiled, bufs, args, name, error, describe=None):
    """The output buffers of ``compiled`` (a CompiledJaxpr or an eager op: its
    ``executable`` and ``out_avals``) run on the device its Array ``args`` live on,
    after its run on ``bufs`` (consts first, then the arguments' buffers) failed with
    ``error``; ``error`` itself is raised when the arguments are where the program
    runs (another cause). ``describe(i)`` names argument ``i`` in errors."""
    check_deleted(args, name, describe)
    error = backend.xform_error(error)
    exe = getattr(compiled, "executable", None)
    if not isinstance(error, backend.JaxRuntimeError) or exe is None or \
            len(exe.devices) != 1 or exe.host_callbacks:
        raise error from None
    device = _target(args, name, describe)
    if exe.devices[0] == device:
        raise error from None
    moved = [b if backend.buffer_device(b) == device else backend.copy_to_device(b, device)
             for b in bufs]
    run = _elsewhere.get((exe, device))
    if run is None:
        if len(_elsewhere) >= 256:
            _elsewhere.clear()
        there = compile_module(exe.module, [device], (), name)
        run = _elsewhere[(exe, device)] = there.make_execute(compiled.out_avals)
    return run(moved)


_elsewhere = {}  # (executable, device) -> the same program's execute there


def _target(args, name, describe):
    """The device a program on ``args`` runs on: the one non-default device among the
    Array arguments' (the default device's are uncommitted), else the default device."""
    default = backend.default_device()
    found = {}
    for i, x in enumerate(args):
        if type(x) is Array:
            d = backend.buffer_device(x._buf)
            if d != default:
                found.setdefault(d, (i, x))
    if len(found) > 1:
        raise ValueError("Received incompatible devices for jitted computation. Got " +
                         " and ".join(_describe(name, describe, i, x, d)
                                      for d, (i, x) in found.items()))
    return next(iter(found), default)


def _describe(name, describe, i, x, d):
    what = describe(i) if describe is not None else f"argument {i}"
    return (f"{what} of {name} with shape {x.aval.str_short()} and with device ids "
            f"[{d.id}] on platform {d.platform.upper()}")



def _set_default_device(value):
    """``jax_default_device``'s validator (JAX's check): the Device new arrays and
    programs without committed arguments go to; a platform name means its first
    device (xform runs one platform at a time)."""
    if value is not None and not isinstance(value, backend.Device) and \
            value not in ("cpu", "gpu", "tpu"):
        raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                         "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or "
                         f"'gpu', got: {value!r}")
    if isinstance(value, str):
        first = backend.client().local_devices()[0]
        if first.platform != value and not (value == "gpu" and first.platform in (
                "cuda", "rocm", "gpu")):
            raise ValueError(f"jax_default_device={value!r}: xform runs one platform at a "
                             f"time, and this process runs {first.platform}")
        value = first
    backend.DEFAULT[0] = value


config._add_validator("jax_default_device", _set_default_device)
