"""Where a one-device program runs: JAX's committed/uncommitted rule.

An Array is *committed* (``Array._committed``) when placed explicitly: ``device_put``
to a device or sharding, or computed from committed Arrays. A program runs on the one
device its committed Array arguments live on (two such devices raise JAX's
"incompatible devices" error); with none, on the default device, where uncommitted
arguments (Python scalars, NumPy values, uncommitted Arrays) are copied; its results
are committed iff one argument was. Eager ops, composites and jit compile each program
for the default device and their hot paths hand the buffers straight to it, only
passing the committed flag on. That flag is the device itself where it is not the
default one (``transfer.committed_to``): the hot paths then call ``run_there``; an
argument elsewhere that they did not see (a flag set to True before the default device
changed) fails the run inside PJRT, and ``run_elsewhere`` is the rare path that follows.
See docs/architecture.md, "Placement".
"""
from xform import backend
from xform.core.array import Array, ShardedArray
from xform.core.sharding import MeshLayout
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
    ``executable``, ``execute`` and ``out_avals``) run where its Array ``args`` say
    (module docstring), after its run on ``bufs`` (consts first, then the arguments'
    buffers) failed with ``error``; ``error`` itself is raised when the arguments were
    already there (another cause). ``describe(i)`` names argument ``i`` in errors."""
    check_deleted(args, name, describe)
    error = backend.xform_error(error)
    exe = getattr(compiled, "executable", None)
    if not isinstance(error, backend.JaxRuntimeError) or exe is None or \
            len(exe.devices) != 1 or exe.host_callbacks:
        raise error from None
    device = _target(args, name, describe)
    moved = _moved(bufs, device)
    if exe.devices[0] == device and all(m is b for m, b in zip(moved, bufs)):
        raise error from None
    return _run_on(compiled, exe, moved, device, name)


def run_there(compiled, bufs, args, name, describe=None):
    """The output buffers of ``compiled`` run where its committed Array ``args`` are (two
    devices raise JAX's error): what the hot paths call, instead of a run on the default
    device that would fail, when a committed flag names another device."""
    exe = getattr(compiled, "executable", None)
    if exe is None or len(exe.devices) != 1 or exe.host_callbacks:
        try:
            return compiled.execute(bufs)
        except Exception as e:
            return run_elsewhere(compiled, bufs, args, name, e, describe)
    check_deleted(args, name, describe)
    device = _target(args, name, describe)
    return _run_on(compiled, exe, _moved(bufs, device), device, name)


def _moved(bufs, device):
    return [b if backend.buffer_device(b) == device else backend.copy_to_device(b, device)
            for b in bufs]


def _run_on(compiled, exe, bufs, device, name):
    if exe.devices[0] == device:
        return compiled.execute(bufs)
    run = _elsewhere.get((exe, device))
    if run is None:
        if len(_elsewhere) >= 256:
            _elsewhere.clear()
        there = compile_module(exe.module, [device], (), name)
        run = _elsewhere[(exe, device)] = there.make_execute(compiled.out_avals)
    return run(bufs)


_elsewhere = {}  # (executable, device) -> the same program's execute there


def _target(args, name, describe):
    """The device a program on ``args`` runs on: its committed Array arguments' one
    device, else the default device."""
    return committed_device(args, name, describe) or backend.default_device()


def committed_device(args, name, describe=None):
    """The one device ``args``' committed Arrays are on, or None; two raise JAX's
    error (``describe(i)``: argument ``i``'s name in it, else ``i``)."""
    found = {}
    for i, x in enumerate(args):
        if (type(x) is Array or type(x) is ShardedArray and type(x.layout) is MeshLayout) \
                and x._committed:  # (pmap's arrays: where their one-device copy is)
            found.setdefault(backend.buffer_device(x._buf), (i, x))
    if len(found) > 1:
        raise incompatible([(f"argument {describe(i) if describe is not None else i}",
                             name, x.aval, d) for d, (i, x) in found.items()])
    return next(iter(found), None)


def committed(args):
    """The committed flag of a program's results on ``args``: the first committed Array's
    (its device where that is not the default one), else False."""
    return next((x._committed for x in args if isinstance(x, Array) and x._committed), False)


def incompatible(parts):
    """JAX's error for committed arguments on several devices; ``parts``: per device,
    ``(what, name, aval, device)``: ``what`` ("argument 0") of ``name`` is there."""
    return ValueError("Received incompatible devices for jitted computation. Got " + " and ".join(
        f"{what} of {name} with shape {aval.str_short(short_dtypes=False)} and "
        f"with device ids [{d.id}] on platform {d.platform.upper()}"
        for what, name, aval, d in parts))


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
