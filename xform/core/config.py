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
    "xform_lazy": False,  # xform.lazy: record eager ops, run them at barriers
}


def _from_env(name, default):
    raw = os.environ.get(name.upper())
    if raw is None:
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


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
        object.__setattr__(self, name, bool(value))
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
