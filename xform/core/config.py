"""Global flags under JAX's names (``jax_enable_x64``, ``jax_debug_nans``, ...).

``config.update("jax_enable_x64", True)`` flips a flag; ``with xform.enable_x64(True):``
flips it for a block. Every option name JAX 0.10.2 has is recognized (the list is data in
``_jax_config_options.py``); those in ``_DEFAULTS`` do something in xform and read their
initial value from the environment variable of the same name in upper case, the others
are accepted and inert (docs/architecture.md lists them). A name JAX does not have raises
``AttributeError`` as JAX does.
"""
import os

from xform import backend
from xform.core._jax_config_options import JAX_OPTIONS

_DEFAULTS = {
    "jax_enable_x64": False,
    "jax_debug_nans": False,
    "jax_debug_infs": False,
    "jax_disable_jit": False,
    "jax_log_compiles": False,
    # jit and the compilation cache (xform/interpreters/compiler.py)
    "jax_explain_cache_misses": False,
    "jax_enable_compilation_cache": True,
    "jax_compilation_cache_dir": None,
    "jax_persistent_cache_min_compile_time_secs": 1.0,
    "jax_persistent_cache_min_entry_size_bytes": 0,
    "xform_lazy": False,  # xform.lazy: record eager ops, run them at barriers
    # None: the JAX_TRACEBACK_FILTERING environment variable decides, read at each error
    # (core/traceback_util.py); JAX reads it once and defaults to "auto".
    "jax_traceback_filtering": None,
    "jax_debug_key_reuse": False,  # xform.random: raise when a typed key is reused
    "jax_threefry_partitionable": True,  # xform.random: JAX's counter layout (default)
    # xform.random: the PRNG of key/PRNGKey without impl= and of raw keys (validated there)
    "jax_default_prng_impl": "threefry2x32",
    # the platforms to start, first the default ("cuda,cpu"); read when the backend starts
    "jax_platforms": None,
    # CPU devices the CPU client gets (-1: XLA_FLAGS decides); read when it starts
    "jax_num_cpu_devices": -1,
}
_STRINGS = {"jax_compilation_cache_dir", "jax_traceback_filtering", "jax_platforms",
            "jax_default_prng_impl"}
INERT_OPTIONS = tuple(sorted(set(JAX_OPTIONS) - set(_DEFAULTS)))

# JAX's string-enum options and their values (the first flag: None allowed too); update
# refuses any other value with JAX's ValueError, before it can reach a reader
_GUARD = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
_LEVELS = ("UNKNOWN", "O0", "O1", "O2", "O3")
_ENUMS = {
    "jax_numpy_rank_promotion": (False, ("allow", "warn", "raise")),
    "jax_error_checking_behavior_nan": (False, ("ignore", "raise")),
    "jax_error_checking_behavior_divide": (False, ("ignore", "raise")),
    "jax_error_checking_behavior_oob": (False, ("ignore", "raise")),
    "jax_use_magma": (False, ("off", "on", "auto")),
    "jax_optimization_level": (False, _LEVELS),
    "jax_memory_fitting_level": (False, _LEVELS),
    # (xform's None: JAX_TRACEBACK_FILTERING decides; see _DEFAULTS)
    "jax_traceback_filtering": (True, ("off", "tracebackhide", "remove_frames",
                                       "quiet_remove_frames", "auto")),
    "jax_transfer_guard": (True, _GUARD), "jax_transfer_guard_host_to_device": (True, _GUARD),
    "jax_transfer_guard_device_to_device": (True, _GUARD),
    "jax_transfer_guard_device_to_host": (True, _GUARD),
    "jax_array_garbage_collection_guard": (True, ("allow", "log", "fatal")),
    "jax_logging_level": (True, ("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    "jax_cpu_collectives_implementation": (True, ("gloo", "mpi", "megascale")),
}


def _check_enum(name, value):
    optional, values = _ENUMS[name]
    if optional and value is None:
        return
    if type(value) is not str or value not in values:
        raise ValueError(f"new enum value must be {'None or ' if optional else ''}in "
                         f"{list(values)}, got {value} of type {type(value)}.")


def _convert(name, value):
    """``value`` as the type of flag ``name``'s default (flags are bool, int, float or
    an optional string); inert options keep what they are given."""
    if name not in _DEFAULTS:
        return value
    default = _DEFAULTS[name]
    if name in _STRINGS:
        return None if value is None else str(value)
    if isinstance(value, str) and not isinstance(default, str):
        if isinstance(default, bool):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return type(default)(value)
    return type(default)(value)


def _from_env(name, default):
    raw = os.environ.get(name.upper())
    if raw is None:
        return default
    return _convert(name, raw)


class Config:
    """Holds the flags; read them as attributes (``config.jax_enable_x64``)."""

    def __init__(self):
        # Flags are plain instance attributes: reading one is on hot paths.
        for k, v in JAX_OPTIONS.items():
            object.__setattr__(self, k, v)
        for k, v in _DEFAULTS.items():
            object.__setattr__(self, k, _from_env(k, v))
        object.__setattr__(self, "_listeners", [])
        object.__setattr__(self, "_validators", {})

    def __setattr__(self, name, value):
        raise AttributeError("Use config.update(name, value) to change a flag.")

    def update(self, name, value):
        """Set flag ``name`` (e.g. ``"jax_enable_x64"``) to ``value``.

        Raises:
          AttributeError: ``name`` is not one of JAX's (or xform's) option names.
        """
        if name not in _DEFAULTS and name not in JAX_OPTIONS:
            raise AttributeError(f"Unrecognized config option: {name}")
        if name in _ENUMS:
            _check_enum(name, value)
        converted = _convert(name, value)
        if name in self._validators:
            self._validators[name](converted)
        object.__setattr__(self, name, converted)
        for fn in self._listeners:
            fn(name, value)

    def read(self, name):
        """The value of flag ``name``."""
        if name not in _DEFAULTS and name not in JAX_OPTIONS:
            raise AttributeError(f"Unrecognized config option: {name}")
        return getattr(self, name)

    @property
    def values(self):
        """All flags as a dict."""
        return {k: getattr(self, k) for k in sorted(set(JAX_OPTIONS) | set(_DEFAULTS))}

    def _add_listener(self, fn):
        """Call ``fn(name, value)`` after every update (caches keyed on flags use this)."""
        self._listeners.append(fn)

    def _add_validator(self, name, fn):
        """Call ``fn(value)`` before flag ``name`` is set; it raises to refuse the value."""
        self._validators[name] = fn

    # JAX-style read accessors.
    @property
    def x64_enabled(self):
        return self.jax_enable_x64


config = Config()
for _name in backend._start_options:   # the backend reads these when its client starts
    backend.set_start_option(_name, getattr(config, _name))
    config._add_validator(_name, lambda value, name=_name: backend.set_start_option(name, value))


class State:
    """A flag as JAX's top-level ``jax.enable_x64``/``jax.debug_nans``/...: ``.value`` reads
    it and calling it gives a context manager setting it for a block.

    >>> import xform
    >>> with xform.debug_nans(True):
    ...     xform.config.jax_debug_nans
    True
    """
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    @property
    def value(self):
        return getattr(config, self.name)

    def __call__(self, new_value=True):
        return _Setting(self.name, new_value)

    def __bool__(self):
        raise TypeError(f"bool() not supported for {self.name}'s state; read `.value`")

    def __repr__(self):
        return f"State({self.name}={self.value!r})"


class _Setting:
    __slots__ = ("name", "value", "prev")

    def __init__(self, name, value):
        self.name, self.value = name, value

    def __enter__(self):
        self.prev = getattr(config, self.name)
        config.update(self.name, self.value)

    def __exit__(self, *exc):
        config.update(self.name, self.prev)


# JAX's top-level State objects (``jax.enable_x64`` etc.), by their option names.
_STATES = [
    "jax_allow_f16_reductions", "jax_array_garbage_collection_guard", "jax_auto_pcast",
    "jax_check_tracer_leaks", "jax_debug_infs", "jax_debug_key_reuse", "jax_debug_nans",
    "jax_default_device", "jax_default_matmul_precision", "jax_default_prng_impl",
    "jax_enable_checks", "jax_enable_custom_prng", "jax_enable_x64",
    "jax_explain_cache_misses", "jax2tf_associative_scan_reductions", "jax_legacy_prng_key",
    "jax_log_compiles", "jax_no_execution", "jax_no_tracing", "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion", "jax_remove_size_one_mesh_axis_from_type",
    "jax_softmax_custom_jvp", "jax_thread_guard", "jax_threefry_partitionable",
    "jax_transfer_guard_device_to_device", "jax_transfer_guard_device_to_host",
    "jax_transfer_guard_host_to_device"]
states = {n[4:] if n.startswith("jax_") else n: State(n) for n in _STATES}
enable_x64 = states["enable_x64"]
debug_nans = states["debug_nans"]
debug_infs = states["debug_infs"]


def checking_leaks():
    """``jax.checking_leaks()``: ``check_tracer_leaks(True)`` for a block (inert in xform:
    leaked tracers are always detected when used)."""
    return _Setting("jax_check_tracer_leaks", True)


class transfer_guard:  # noqa: N801  (JAX's name)
    """``jax.transfer_guard(level)``: sets the three transfer-guard options for a block
    (inert in xform: transfers are never guarded)."""

    def __init__(self, new_val):
        self.settings = [_Setting(f"jax_transfer_guard_{k}", new_val)
                         for k in ("host_to_device", "device_to_device", "device_to_host")]

    def __enter__(self):
        for st in self.settings:
            st.__enter__()

    def __exit__(self, *exc):
        for st in reversed(self.settings):
            st.__exit__(*exc)


# ---- user contexts (jax.make_user_context) ----

_user_key = ()  # the value of every user context, in creation order: part of jit's trace key


class UserConfig:
    """A context of the user's that jit keys on (``jax.make_user_context``): while its
    value differs, a jitted function is traced and compiled again, as for a changed
    ``jax_default_matmul_precision``. Values must be hashable.

    >>> import xform
    >>> mode = xform.make_user_context("train")
    >>> with mode("eval"):
    ...     mode.value
    'eval'
    """
    __slots__ = ("_index",)

    def __init__(self, default_value):
        global _user_key
        self._index = len(_user_key)
        _user_key = _user_key + (_hashable(default_value),)

    @property
    def value(self):
        return _user_key[self._index]

    def get_global(self):
        return self.value

    def set_global(self, new_value):
        global _user_key
        i = self._index
        _user_key = _user_key[:i] + (_hashable(new_value),) + _user_key[i + 1:]
        for fn in config._listeners:
            fn("user_context", new_value)

    def __call__(self, new_value):
        return _UserSetting(self, new_value)


class _UserSetting:
    __slots__ = ("ctx", "value", "prev")

    def __init__(self, ctx, value):
        self.ctx, self.value = ctx, value

    def __enter__(self):
        self.prev = self.ctx.value
        self.ctx.set_global(self.value)

    def __exit__(self, *exc):
        self.ctx.set_global(self.prev)


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"a user context's value must be hashable (jit keys on it), got "
                        f"{type(value).__name__} {value!r}") from None
    return value


def make_user_context(default_value=None):
    """A new :class:`UserConfig` with ``default_value`` (``jax.make_user_context``)."""
    return UserConfig(default_value)


def user_key():
    return _user_key
