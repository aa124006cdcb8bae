"""jaxlib's profiler: TensorBoard/Perfetto traces, TraceMe spans, pprof heap."""
from jaxlib import _jax, _profile_data, _profiler
from jaxlib import version as _jaxlib_version

from ._client import client, platform
from ._errors import _runtime_error

TraceMe = _profiler.TraceMe                # a span; ``TraceMe(name, **metadata)``
ProfileOptions = _profiler.ProfileOptions
trace_me_enabled = _profiler.TraceMe.is_enabled  # is a profiler session recording now?
ProfileData = _profile_data.ProfileData    # a written xspace, read back (planes, events)
ProfileEvent = _profile_data.ProfileEvent
ProfilePlane = _profile_data.ProfilePlane
register_subprocess = _profiler.register_subprocess


def profiler_session(options=None):
    """Start jaxlib's profiler session (one per process); ``stop_and_export(log_dir)``
    writes ``<log_dir>/plugins/profile/<run>/<host>.xplane.pb`` and ``.trace.json.gz``."""
    client()  # backends first, so the device tracers see them (as JAX does)
    _profiler.clear_metadata()
    _profiler.set_metadata("jaxlib_version", _jaxlib_version.__version__)
    _profiler.set_metadata(f"{client().platform}_version", client().platform_version)
    return _profiler.ProfilerSession(options if options is not None else ProfileOptions())


def profiler_export(session, log_dir):
    """Stop ``session`` and write its trace under ``log_dir`` (xform's errors)."""
    try:
        session.stop_and_export(str(log_dir))
    except _jax.JaxRuntimeError as e:
        raise _runtime_error(e) from None
    finally:
        _profiler.clear_metadata()


def profiler_server(port):
    """jaxlib's profiler server on ``port`` (TensorBoard captures from it); it stops
    when the returned object is dropped."""
    client()
    return _profiler.start_server(port)


def heap_profile(platform_name=None):
    """The client's device memory profile: a ``pprof`` protocol buffer (not gzipped)."""
    c = client()
    if platform_name is not None and platform_name not in (c.platform, platform()):
        raise RuntimeError(f"Unknown backend {platform_name}. Available backends are "
                           f"[{c.platform!r}]")
    return c.heap_profile()
