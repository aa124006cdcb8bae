"""Compiling StableHLO with XLA through one program cache, in memory and on disk.

Every compile in xform (eager one-op programs, ``jit``, ``pjit`` under other
transformations, the AOT ``Lowered.compile``) goes through :func:`compile_module`.
The key is a SHA-256 of the module's MLIR bytecode and of everything else that decides
what XLA produces (jaxlib version, platform, devices, compile options, XLA_FLAGS;
``backend.compile_cache_context``). A lookup tries, in order:

1. the in-memory LRU of executables (so a re-trace that yields the same program, e.g.
   ``jit(f)`` of a freshly created ``f``, costs a trace and a lowering, never a compile);
2. the persistent cache, a directory named by ``jax_compilation_cache_dir``: one file
   per key holding a magic header, a SHA-256 of the payload and the serialized
   executable. An entry that is truncated, corrupt or unreadable is ignored with a
   warning and recompiled (and rewritten); the digest is checked *before* the bytes
   reach jaxlib's deserializer. Writers write a temporary file in the same directory
   and ``os.replace`` it, so concurrent processes sharing the directory only ever see
   whole entries;
3. XLA. The result is remembered in memory, and written to disk when compiling took at
   least ``jax_persistent_cache_min_compile_time_secs`` and the entry has at least
   ``jax_persistent_cache_min_entry_size_bytes`` (JAX's flags and defaults).

Programs with host callbacks are compiled every time and never cached: the callbacks
are Python objects of one trace, not part of the program text (JAX does the same).

NB: like JAX's, the persistent cache trusts its directory: a deserialized executable
is machine code. Point ``jax_compilation_cache_dir`` only at a directory you own.
"""
import collections
import hashlib
import logging
import os
import tempfile
import time
import warnings

from xform import backend
from xform.core import monitoring
from xform.core.config import config
from xform.core.profiling import span

logger = logging.getLogger("xform")

# What happened, for tests and benchmarks: "trace" (jit traced a function), "compile"
# (XLA ran), "memory_hit", "disk_hit", "disk_write", "disk_error".
stats = collections.Counter()


class LRUCache(collections.OrderedDict):
    """A dict that forgets its least recently used entry beyond ``maxsize`` entries."""

    def __init__(self, maxsize):
        super().__init__()
        self.maxsize = maxsize

    def lookup(self, key):
        """The value for ``key`` (marked most recently used), or None."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def insert(self, key, value):
        self[key] = value
        if len(self) > self.maxsize:
            self.popitem(last=False)


_programs = LRUCache(1024)  # cache key -> backend.Executable
_MAGIC = b"xform-executable-v1\n"


def cache_key(module: bytes, devices=None, skip_passes="") -> str:
    """The hex key of ``module`` compiled for ``devices`` in this runtime."""
    h = hashlib.sha256(backend.compile_cache_context(devices, skip_passes))
    h.update(module)
    return h.hexdigest()


def compile_module(module: bytes, devices=None, host_callbacks=(), name="jit",
                   in_avals=None, skip_passes="") -> backend.Executable:
    """The executable of a StableHLO module (MLIR bytecode), from the program cache or XLA.

    ``name`` and ``in_avals`` only label the ``jax_log_compiles`` messages;
    ``skip_passes`` is ``backend.compile``'s."""
    if not _adoption_recorded:
        _record_adoption()
    if host_callbacks:
        with monitoring.log_elapsed_time(monitoring.BACKEND_COMPILE_EVENT, name):
            return _compile(module, devices, host_callbacks, name, in_avals, skip_passes)[0]
    key = cache_key(module, devices, skip_passes)
    exe = _programs.lookup(key)
    if exe is not None:
        stats["memory_hit"] += 1
        return exe
    # JAX's backend-compile event spans its persistent-cache lookup as well
    with monitoring.log_elapsed_time(monitoring.BACKEND_COMPILE_EVENT, name):
        exe = _read_entry(key, module, devices, name)
        if exe is None:
            exe, seconds = _compile(module, devices, (), name, in_avals, skip_passes)
            _write_entry(key, exe, seconds, name)
    _programs.insert(key, exe)
    return exe


_adoption_recorded = False


def _record_adoption():
    # JAX's once-per-process adoption metric, at the first compile request: whether the
    # persistent cache is enabled (a directory need not be set)
    global _adoption_recorded
    _adoption_recorded = True
    monitoring.record_event("/jax/compilation_cache/tasks_using_cache"
                            if config.jax_enable_compilation_cache
                            else "/jax/compilation_cache/task_disabled_cache")


def _compile(module, devices, host_callbacks, name, in_avals, skip_passes=""):
    if config.jax_log_compiles:
        shapes = "" if in_avals is None else " with global shapes and types " + str(
            [a.str_short() for a in in_avals])
        logger.warning("Compiling %s%s.", name, shapes)
    t0 = time.perf_counter()
    with span("xform.compile", name=name):
        exe = backend.compile(module, devices, host_callbacks, skip_passes)
    seconds = time.perf_counter() - t0
    stats["compile"] += 1
    if config.jax_log_compiles:
        logger.warning("Finished XLA compilation of %s in %.6f sec", name, seconds)
    return exe, seconds


# ---- the persistent cache ----

def _entry_path(key):
    directory = config.jax_compilation_cache_dir
    if not directory or not config.jax_enable_compilation_cache:
        return None
    return os.path.join(os.path.expanduser(str(directory)), f"{key}-cache")


def _warn(what, name, path, err):
    stats["disk_error"] += 1
    warnings.warn(f"Error {what} persistent compilation cache entry for '{name}' "
                  f"({path}): {err}; compiling it again.", RuntimeWarning, stacklevel=4)


def _read_entry(key, module, devices, name):
    path = _entry_path(key)
    if path is None:
        return None
    monitoring.record_event("/jax/compilation_cache/compile_requests_use_cache")
    t0 = time.monotonic()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn("reading", name, path, f"{type(e).__name__}: {e}")
        return None
    head = len(_MAGIC) + 32
    if (len(data) <= head or not data.startswith(_MAGIC)
            or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC):head]):
        _warn("reading", name, path, "the entry is corrupt (bad header or checksum)")
        return None
    try:
        exe = backend.deserialize_executable(data[head:], module, devices)
    except Exception as e:  # noqa: BLE001  (any failure: recompile, never crash)
        _warn("loading", name, path, f"{type(e).__name__}: {e}")
        return None
    stats["disk_hit"] += 1
    # JAX also records compile_time_saved_sec: xform's entries hold no compile time
    monitoring.record_event("/jax/compilation_cache/cache_hits")
    monitoring.record_event_duration_secs("/jax/compilation_cache/cache_retrieval_time_sec",
                                          time.monotonic() - t0)
    if config.jax_log_compiles:
        logger.warning("Persistent compilation cache hit for '%s'", name)
    return exe


def _write_entry(key, exe, seconds, name):
    path = _entry_path(key)
    if path is None or seconds < config.jax_persistent_cache_min_compile_time_secs:
        return
    try:
        payload = backend.serialize_executable(exe)
    except Exception as e:  # noqa: BLE001  (some programs cannot be serialized)
        _warn("serializing", name, path, f"{type(e).__name__}: {e}")
        return
    data = _MAGIC + hashlib.sha256(payload).digest() + payload
    if len(data) < config.jax_persistent_cache_min_entry_size_bytes:
        return
    monitoring.record_event("/jax/compilation_cache/cache_misses")  # JAX: on writing
    directory = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix="-cache")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: readers see the old entry or the new one
        tmp = None
        stats["disk_write"] += 1
    except OSError as e:
        _warn("writing", name, path, f"{type(e).__name__}: {e}")
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def clear_caches():
    """Forget the in-memory programs (the directory on disk is left alone)."""
    _programs.clear()
