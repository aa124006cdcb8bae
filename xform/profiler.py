"""``xform.profiler``: JAX's ``jax.profiler`` API on jaxlib's profiler.

``trace``/``start_trace`` record a profile that TensorBoard's profile plugin and
Perfetto read (``<log_dir>/plugins/profile/<run>/<host>.xplane.pb``). While one runs,
xform's own phases show up as named spans beside the user's annotations:
``xform.jit.trace``, ``xform.jit.lower``, ``xform.compile``, ``xform.jit.execute`` (a
jitted function's first call) and ``xform.lazy.build`` / ``xform.lazy.execute`` (lazy
mode's barriers). ``device_memory_profile`` snapshots device memory in pprof format.
"""
import contextlib
import functools
import gzip
import http.server
import json
import os
import pathlib
import socketserver
import threading

from xform import backend as _backend  # (``backend`` is an argument's name below)
from xform.core import profiling


class ProfileOptions(_backend.ProfileOptions):
    """Profiler options to configure the collectors for the profiler.

    >>> import xform
    >>> options = xform.profiler.ProfileOptions()
    >>> options.host_tracer_level = 3   # more detail on the host's TraceMe events
    """


ProfileData = _backend.ProfileData    # ``ProfileData.from_file(xplane_path).planes``
ProfileEvent = _backend.ProfileEvent
ProfilePlane = _backend.ProfilePlane


def register_subprocess(pid, port):
    """Profile the subprocess ``pid`` (its profiler server listens on ``port``) along
    with this process: captures are forwarded to it and its trace merged (CPU only).
    Returns a function that unregisters it (also on garbage collection)."""
    return _backend.register_subprocess(pid, port)


class _State:
    def __init__(self):
        self.session = None
        self.log_dir = None
        self.perfetto_link = self.perfetto_trace = False
        self.server = None
        self.lock = threading.Lock()


_state = _State()


def _set_spans():
    profiling.active = _state.session is not None or _state.server is not None


# ---- the profiler server (TensorBoard captures from it) ----

def start_server(port, requires_backend=True):
    """Start the profiler server on ``port``: TensorBoard's profile plugin ("capture
    profile") samples traces of this process from it.

    Args:
      port: The port to start the profiler server on.
      requires_backend: accepted for JAX's signature; xform always starts its client
        first, so the device tracers see it.
    """
    if _state.server is not None:
        raise ValueError("Only one profiler server can be active at a time.")
    _state.server = _backend.profiler_server(port)
    _set_spans()
    return _state.server


def stop_server():
    """Stop the running profiler server."""
    if _state.server is None:
        raise ValueError("No active profiler server.")
    _state.server = None   # dropping jaxlib's server object stops it
    _set_spans()


# ---- traces ----

def _check_log_dir(log_dir):
    """Create ``<log_dir>/plugins/profile`` now, so a bad ``log_dir`` fails before the
    session starts (jaxlib would report it only when the trace is written)."""
    path = os.path.join(os.path.expanduser(os.fspath(log_dir)), "plugins", "profile")
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise PermissionError(13, "Permission denied", path)
    except OSError as e:
        raise OSError(e.errno, f"cannot write the profiler trace to log_dir "
                               f"{os.fspath(log_dir)!r}: {e.strerror} ({e.filename})"
                      ) from None


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
    """Start a profiler trace; :func:`stop_trace` ends it and writes it to ``log_dir``.

    The trace holds host activity (TraceMe spans: xform's phases, :class:`TraceAnnotation`)
    and the device's operations; TensorBoard's profile plugin shows it (TensorBoard need
    not run while collecting). Only one trace may run at a time: starting another raises
    ``RuntimeError``.

    Args:
      log_dir: The directory to save the trace to (usually TensorBoard's log directory).
      create_perfetto_link: if True, also write ``perfetto_trace.json.gz`` and print a
        link to the Perfetto UI (https://ui.perfetto.dev); :func:`stop_trace` then blocks
        until the link is opened and Perfetto has loaded the trace.
      create_perfetto_trace: if True, also write ``perfetto_trace.json.gz`` (for upload
        to the Perfetto UI) next to the trace, without blocking.
      profiler_options: a :class:`ProfileOptions` configuring the collectors.
    """
    with _state.lock:
        if _state.session is not None:
            raise RuntimeError("Profile has already been started. "
                               "Only one profile may be run at a time.")
        _check_log_dir(log_dir)
        _state.session = _backend.profiler_session(profiler_options)
        _state.log_dir = os.path.expanduser(os.fspath(log_dir))
        _state.perfetto_link = bool(create_perfetto_link)
        _state.perfetto_trace = bool(create_perfetto_trace or create_perfetto_link)
        _set_spans()


def stop_trace():
    """Stop the running profiler trace and save it to the ``log_dir`` given to
    :func:`start_trace`. Raises ``RuntimeError`` if no trace was started."""
    with _state.lock:
        session = _state.session
        if session is None:
            raise RuntimeError("No profile started")
        log_dir, link, perfetto = _state.log_dir, _state.perfetto_link, _state.perfetto_trace
        _state.session = _state.log_dir = None   # stopped even if writing fails
        _set_spans()
        _backend.profiler_export(session, log_dir)
        if perfetto:
            path = _write_perfetto_trace(log_dir)
            if link:
                _serve_perfetto_trace(path)


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
    """Context manager taking a profiler trace of its block (see :func:`start_trace`).

    ``with xform.profiler.trace("/tmp/tb"): train_step(state, batch)`` writes
    ``/tmp/tb/plugins/profile/<run>/<host>.xplane.pb``; point TensorBoard at
    ``/tmp/tb`` (profile tab) or open ``perfetto_trace.json.gz`` (with
    ``create_perfetto_trace=True``) in https://ui.perfetto.dev.

    Args:
      log_dir: The directory to save the trace to (usually TensorBoard's log directory).
      create_perfetto_link: print a Perfetto UI link and block until it is opened.
      create_perfetto_trace: also write ``perfetto_trace.json.gz``.
      profiler_options: a :class:`ProfileOptions` configuring the collectors.
    """
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


def _write_perfetto_trace(log_dir):
    """``perfetto_trace.json.gz`` beside the newest run's ``*.trace.json.gz``, without
    its ``metadata`` field (which Perfetto rejects)."""
    runs = (pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir()
    run = max(runs, key=os.path.getmtime)
    found = list(run.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise ValueError(f"Invalid trace folder: {run}")
    with gzip.open(found[0], "rb") as f:
        events = json.load(f)
    events.pop("metadata", None)
    out = run / "perfetto_trace.json.gz"
    with gzip.open(out, "wb") as f:
        f.write(json.dumps(events).encode("utf-8"))
    return out


class _PerfettoHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the trace file to ui.perfetto.dev (which fetches from 127.0.0.1:9001)."""

    def end_headers(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def do_GET(self):
        self.server.last_request = self.path
        super().do_GET()

    def do_POST(self):
        self.send_error(404, "File not found")


def _serve_perfetto_trace(path, port=9001):
    handler = functools.partial(_PerfettoHandler, directory=str(path.parent))
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), handler) as httpd:
        print("Open URL in browser: https://ui.perfetto.dev/#!/?url="
              f"http://127.0.0.1:{port}/{path.name}")
        while getattr(httpd, "last_request", None) != "/" + path.name:
            httpd.handle_request()


# ---- annotations ----

class TraceAnnotation(_backend.TraceMe):
    """Context manager making a trace event, named ``name``, that spans its block.

    Keyword arguments become the event's arguments in the trace viewer. Outside a
    trace it does nothing (and costs next to nothing).

    >>> import xform, xform.numpy as jnp
    >>> with xform.profiler.TraceAnnotation("my_label", batch=3):
    ...     y = (jnp.ones(3) * 2).block_until_ready()
    """


class StepTraceAnnotation(TraceAnnotation):
    """Context manager marking a step (e.g. a training step) in the trace: the profiler
    analyses performance per step. Pass the step number as ``step_num``.

    >>> import xform
    >>> for step in range(2):
    ...     with xform.profiler.StepTraceAnnotation("train", step_num=step):
    ...         pass
    """

    def __init__(self, name, **kwargs):
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func, name=None, **decorator_kwargs):
    """Decorator: each call of ``func`` is a trace event named ``name`` (default: the
    function's qualified name). Pass arguments with :func:`functools.partial`.

    >>> import functools, xform, xform.numpy as jnp
    >>> @functools.partial(xform.profiler.annotate_function, name="double")
    ... def f(x):
    ...     return x * 2
    >>> f(jnp.ones(2))
    Array([2., 2.], dtype=float32)
    """
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


# ---- device memory ----

def device_memory_profile(backend=None):
    """The device memory profile: a gzipped ``pprof`` protocol buffer describing the
    arrays and executables in device memory and where they were allocated (view it with
    ``pprof``).

    Args:
      backend: optional; the name of the backend (platform) to profile.

    >>> import gzip, xform
    >>> profile = xform.profiler.device_memory_profile()
    >>> len(gzip.decompress(profile)) > 0
    True
    """
    return gzip.compress(_backend.heap_profile(backend))


def save_device_memory_profile(filename, backend=None):
    """Write :func:`device_memory_profile`'s output to ``filename``.

    Args:
      filename: the file to write the profile to.
      backend: optional; the name of the backend (platform) to profile.
    """
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)

