"""Flax's global flags (``flax.config``, ``flax.configurations``): same names, defaults
and ``FLAX_*`` environment variables. Those xform.nn implements take effect here:
``flax_fix_rng_separator`` (rng derivation), ``flax_return_frozendict`` (``init``/``apply``
results) and ``flax_preserve_adopted_names`` (naming of adopted submodules); the rest are
accepted and have no effect (they concern tracebacks, profiling, Orbax, NNX)."""
import contextlib
import os

__all__ = ["Config", "FlagHolder", "bool_flag", "config", "int_flag", "static_bool_env",
           "static_int_env"]


class Config:
    """The flag values; read as attributes, set with :meth:`update`.

    >>> from xform.nn import config
    >>> config.flax_fix_rng_separator
    False
    >>> with config.temp_flip_flag('fix_rng_separator', True):
    ...     config.flax_fix_rng_separator
    True
    """

    def __init__(self):
        self._values = {}

    def _add_option(self, name, default):
        if name in self._values:
            raise RuntimeError(f"Config option {name} already defined")
        self._values[name] = default

    def _read(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise LookupError(f"Unrecognized config option: {name}") from None

    def update(self, name_or_holder, value, /):
        """Sets flag ``name_or_holder`` (a name or its :class:`FlagHolder`) to ``value``.

        Raises:
            LookupError: no such flag.
        """
        name = getattr(name_or_holder, "name", name_or_holder)
        if name not in self._values:
            raise LookupError(f"Unrecognized config option: {name}")
        self._values[name] = value

    def __repr__(self):
        values_repr = ", ".join(f"\n  {k}={v!r}" for k, v in self._values.items())
        return f"Config({values_repr}\n)"

    @contextlib.contextmanager
    def temp_flip_flag(self, var_name, var_value):
        """Sets ``flax_<var_name>`` to ``var_value`` inside the ``with`` block."""
        old_value = getattr(self, f"flax_{var_name}")
        try:
            self.update(f"flax_{var_name}", var_value)
            yield
        finally:
            self.update(f"flax_{var_name}", old_value)


config = Config()


class FlagHolder:
    """A handle on one flag: ``holder.value`` is its current value."""

    def __init__(self, name, help):  # noqa: A002
        self.name = name
        self.__name__ = name[4:] if name.startswith("flax_") else name   # sic, as Flax
        self.__doc__ = f"Flag holder for `{name}`.\n\n{help}"

    def __bool__(self):
        raise TypeError(f"bool() not supported for instances of type '{type(self).__name__}' "
                        f"(did you mean to use '{type(self).__name__}.value' instead?)")

    @property
    def value(self):
        return config._read(self.name)


def _flag(name, default, help):  # noqa: A002
    name = name.lower()
    config._add_option(name, default)
    holder = FlagHolder(name, help)
    setattr(Config, name, property(lambda _: holder.value, doc=help))
    return holder


def bool_flag(name, *, default, help):  # noqa: A002
    """Defines boolean flag ``name``; env var ``NAME`` (upper case) overrides ``default``.

    Returns:
        Its :class:`FlagHolder`.
    """
    return _flag(name, static_bool_env(name.upper(), default), help)


def int_flag(name, *, default, help):  # noqa: A002
    """Defines integer flag ``name``; env var ``NAME`` (upper case) overrides ``default``.

    Returns:
        Its :class:`FlagHolder`.
    """
    return _flag(name, static_int_env(name.upper(), default), help)


def static_bool_env(varname, default):
    """Environment variable ``varname`` as a bool (y/yes/t/true/on/1, n/no/f/false/off/0).

    Raises:
        ValueError: any other value.

    >>> static_bool_env('XFORM_UNSET_EXAMPLE_VAR', True)
    True
    """
    val = os.getenv(varname, str(default)).lower()
    if val in ("y", "yes", "t", "true", "on", "1"):
        return True
    if val in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {val!r} for environment {varname!r}")


def static_int_env(varname, default):
    """Environment variable ``varname`` as an int (``default`` when unset).

    Raises:
        ValueError: not an integer.
    """
    val = os.getenv(varname)
    if val is None:
        return default
    try:
        return int(val)
    except ValueError:
        raise ValueError(f"invalid integer value {val!r} for environment {varname!r}") from None


flax_filter_frames = bool_flag(
    name="flax_filter_frames", default=True,
    help="Whether to hide flax-internal stack frames from tracebacks.")
flax_profile = bool_flag(
    name="flax_profile", default=True,
    help="Whether to run Module methods under jax.named_scope for profiles.")
flax_use_orbax_checkpointing = bool_flag(
    name="flax_use_orbax_checkpointing", default=True,
    help="Whether to use Orbax to save checkpoints.")
flax_preserve_adopted_names = bool_flag(
    name="flax_preserve_adopted_names", default=False,
    help="When adopting outside modules, don't clobber existing names.")
flax_return_frozendict = bool_flag(
    name="flax_return_frozendict", default=False,
    help="Whether to return FrozenDicts when calling init or apply.")
flax_fix_rng = bool_flag(
    name="flax_fix_rng_separator", default=False,
    help="Whether to add separator characters when folding in static data into PRNG keys.")
flax_use_flaxlib = bool_flag(
    name="flax_use_flaxlib", default=False,
    help="Whether to use flaxlib for C++ acceleration.")
flax_array_ref = bool_flag(
    name="flax_array_ref", default=False, help="Whether to use array refs.")
flax_pytree_module = bool_flag(
    name="flax_pytree_module", default=True,
    help="Whether Modules are pytrees by default or not.")
flax_max_repr_depth = int_flag(
    name="flax_max_repr_depth", default=None,
    help="Maximum depth of reprs for nested flax objects. Default is None (no limit).")
flax_always_shard_variable = bool_flag(
    name="flax_always_shard_variable", default=True,
    help="Whether a `nnx.Variable` should always automatically be sharded if it "
         "contains sharding annotations.")
flax_hijax_variable = bool_flag(
    name="flax_hijax_variable", default=False,
    help="Whether to enable HiJAX support for `nnx.Variable`.")
nnx_graph_mode = bool_flag(
    name="nnx_graph_mode", default=True,
    help="Whether NNX APIs default to graph-mode (True) or tree-mode (False).")
nnx_graph_updates = bool_flag(
    name="nnx_graph_updates", default=True,
    help="Whether graph-mode uses dynamic (True) or simple (False) graph traversal.")
