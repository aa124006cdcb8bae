"""Global flags under JAX's names (``jax_enable_x64``, ``jax_debug_nans``, ...).

``config.update("jax_enable_x64", True)`` flips a flag; flags also read their
initial value from the environment variable of the same name in upper case.
"""
import os

_DEFAULTS = {
    "jax_enable_x64": False,
    "jax_debug_nans": False,
    "jax_disable_jit": False,
    "jax_log_compiles": False,
    # jit and the compilation cache (xform/interpreters/compiler.py)
    "jax_explain_cache_misses": False,
    "jax_enable_compilation_cache": True,
    "jax_compilation_cache_dir": None,
    "jax_persistent_cache_min_compile_time_secs": 1.0,
    "jax_persistent_cache_min_entry_size_bytes": 0,
    "xform_lazy": False,  # xform.lazy: record eager ops, run them at barriers
    "jax_debug_key_reuse": False,  # xform.random: raise when a typed key is reused
    "jax_threefry_partitionable": True,  # xform.random: JAX's counter layout (default)
}
_STRINGS = {"jax_compilation_cache_dir"}


def _convert(name, value):
    """``value`` as the type of flag ``name``'s default (flags are bool, int, float or
    an optional string)."""
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
        for k, v in _DEFAULTS.items():
            object.__setattr__(self, k, _from_env(k, v))
        object.__setattr__(self, "_listeners", [])

    def __setattr__(self, name, value):
        raise AttributeError("Use config.update(name, value) to change a flag.")

    def update(self, name, value):
        """Set flag ``name`` (e.g. ``"jax_enable_x64"``) to ``value``."""
        if name not in _DEFAULTS:
            raise AttributeError(
                f"Unrecognized config option: {name!r}; known: {sorted(_DEFAULTS)}")
        object.__setattr__(self, name, _convert(name, value))
        for fn in self._listeners:
            fn(name, value)

    def _add_listener(self, fn):
        """Call ``fn(name, value)`` after every update (caches keyed on flags use this)."""
        self._listeners.append(fn)

    # JAX-style read accessors.
    @property
    def x64_enabled(self):
        return self.jax_enable_x64


config = Config()
