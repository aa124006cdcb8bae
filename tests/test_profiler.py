"""xform.profiler (jax.profiler's API): traces TensorBoard/Perfetto read, with xform's
phases as named spans; annotations; device memory profiles; JAX's errors.

One profiler session per process: jax's and xform's are never started together."""
import doctest
import gzip
import json
import os
import shutil
import socket

import jax
import pytest

import xform
import xform.numpy as jnp
from xform.core import profiling


def _run_dirs(log_dir):
    return os.listdir(os.path.join(log_dir, "plugins", "profile"))


def test_trace_has_annotations_and_xform_phases(tmp_path):
    log_dir = str(tmp_path / "tb")

    @xform.jit
    def double_plus_one(x):
        return x * 2 + 1

    @xform.profiler.annotate_function
    def user_step(x):
        return double_plus_one(x)

    annotated = xform.profiler.annotate_function(lambda x: x, name="renamed_fn_zq")
    assert not profiling.active and not xform.backend.trace_me_enabled()
    with xform.profiler.trace(log_dir, create_perfetto_trace=True):
        assert profiling.active and xform.backend.trace_me_enabled()
        with xform.profiler.TraceAnnotation("user_label_qx", batch=3):
            user_step(jnp.ones(3)).block_until_ready()
        with xform.profiler.StepTraceAnnotation("train_qx", step_num=7):
            annotated(1)
        with xform.lazy():                  # a lazy barrier: build, lower, compile, run
            y = jnp.arange(4.0) * 3.0 + 1.0
            xform.mark_step()
    assert not profiling.active and not xform.backend.trace_me_enabled()
    assert float(y.sum()) == 22.0

    run, = _run_dirs(log_dir)
    files = os.listdir(os.path.join(log_dir, "plugins", "profile", run))
    xplane, = [f for f in files if f.endswith(".xplane.pb")]
    assert "perfetto_trace.json.gz" in files
    data = open(os.path.join(log_dir, "plugins", "profile", run, xplane), "rb").read()
    names = ["user_label_qx", "train_qx", "step_num", "renamed_fn_zq",
             "user_step", "xform.jit.trace", "xform.jit.lower", "xform.compile",
             "xform.jit.execute", "xform.lazy.build", "xform.lazy.execute"]
    assert [n for n in names if n.encode() not in data] == []
    # read back with ProfileData: xform's phases are events on the host plane
    pd = xform.profiler.ProfileData.from_file(os.path.join(log_dir, "plugins", "profile",
                                                           run, xplane))
    host = pd.find_plane_with_name("/host:CPU")
    events = {e.name for line in host.lines for e in line.events}
    assert {"xform.jit.trace", "xform.compile", "user_label_qx"} <= events

    # The Perfetto file: the trace events, without the metadata Perfetto rejects.
    with gzip.open(os.path.join(log_dir, "plugins", "profile", run,
                                "perfetto_trace.json.gz")) as f:
        events = json.load(f)
    assert "metadata" not in events
    spans = {e["name"]: e.get("args", {}) for e in events["traceEvents"] if "name" in e}
    assert spans["xform.jit.trace"]["name"] == "jit(double_plus_one)"
    assert spans["train_qx"]["step_num"] == "7"

    # The cache-hit path makes no spans: a second traced call adds no xform phases.
    log2 = str(tmp_path / "tb2")
    with xform.profiler.trace(log2):
        user_step(jnp.ones(3)).block_until_ready()
    run2, = _run_dirs(log2)
    path2 = os.path.join(log2, "plugins", "profile", run2)
    data2 = open(os.path.join(path2, next(f for f in os.listdir(path2)
                                          if f.endswith(".xplane.pb"))), "rb").read()
    assert b"user_step" in data2
    assert b"xform.jit." not in data2 and b"xform.compile" not in data2


def test_errors_match_jax(tmp_path):
    # stop without a start, a second start: jax's classes and texts
    with pytest.raises(RuntimeError) as jax_err:
        jax.profiler.stop_trace()
    with pytest.raises(RuntimeError) as err:
        xform.profiler.stop_trace()
    assert str(err.value) == str(jax_err.value)

    jax.profiler.start_trace(str(tmp_path / "jax"))
    try:
        with pytest.raises(RuntimeError) as jax_err:
            jax.profiler.start_trace(str(tmp_path / "jax"))
    finally:
        jax.profiler.stop_trace()
    xform.profiler.start_trace(str(tmp_path / "xf"))
    try:
        with pytest.raises(RuntimeError) as err:
            xform.profiler.start_trace(str(tmp_path / "xf"))
    finally:
        xform.profiler.stop_trace()
    assert str(err.value) == str(jax_err.value)

    with pytest.raises(ValueError) as jax_err:
        jax.profiler.stop_server()
    with pytest.raises(ValueError) as err:
        xform.profiler.stop_server()
    assert str(err.value) == str(jax_err.value)

    # an unwritable log_dir fails at the start, naming it, and starts nothing
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError, match="log_dir '.*a_file/tb'"):
        with xform.profiler.trace(str(blocker / "tb")):
            pass
    assert not profiling.active
    with pytest.raises(RuntimeError, match="No profile started"):
        xform.profiler.stop_trace()

    # log_dir broken while tracing: stop_trace raises, yet the profile is over (JAX's
    # stays started, every later stop_trace failing again)
    log_dir = tmp_path / "gone"
    xform.profiler.start_trace(str(log_dir))
    shutil.rmtree(log_dir)
    log_dir.write_text("")
    with pytest.raises(xform.errors.JaxRuntimeError, match="not a directory"):
        xform.profiler.stop_trace()
    assert not profiling.active
    with pytest.raises(RuntimeError, match="No profile started"):
        xform.profiler.stop_trace()


def test_server_start_stop():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    xform.profiler.start_server(port)
    try:
        assert profiling.active   # a TensorBoard capture would record xform's phases
        with pytest.raises(ValueError, match="Only one profiler server"):
            xform.profiler.start_server(port)
    finally:
        xform.profiler.stop_server()
    assert not profiling.active


def test_device_memory_profile(tmp_path):
    live = jnp.ones((16, 16))
    profile = xform.profiler.device_memory_profile()
    assert len(gzip.decompress(profile)) > 0   # gzip over a pprof protocol buffer
    assert len(gzip.decompress(jax.profiler.device_memory_profile())) > 0
    path = tmp_path / "memory.prof"
    xform.profiler.save_device_memory_profile(str(path), backend=xform.default_backend())
    assert len(gzip.decompress(path.read_bytes())) > 0
    with pytest.raises(RuntimeError) as jax_err:
        jax.profiler.device_memory_profile("no_such_backend")
    with pytest.raises(RuntimeError) as err:
        xform.profiler.device_memory_profile("no_such_backend")
    assert str(err.value).split(".")[0] == str(jax_err.value).split(".")[0]
    del live


def test_doctests_and_names():
    public = {n for n in dir(jax.profiler) if not n.startswith("_")}
    assert sorted(public - set(dir(xform.profiler))) == []
    result = doctest.testmod(xform.profiler, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0
