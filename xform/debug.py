"""``xform.debug``: print values and call Python from inside transformed functions.

Both stage a host callback (``debug_callback_p``) that runs with the concrete values:
eagerly, under ``jit`` (XLA calls back into Python), under ``vmap`` (once per batch
element, as JAX does) and under ``grad`` (with the primal values of the forward pass;
the callback is not differentiated). The callback is an effect: it is never removed
as dead code.

NB: ``ordered=True`` is accepted, but xform does not thread effect tokens: callbacks
run in program order on the CPU backend without a guarantee, as ``ordered=False`` in
JAX. ``partitioned`` is accepted and ignored (programs are single-device here).
"""
import logging
import string
import sys

import numpy as np

from xform.interpreters.callback import debug_callback
from xform.debugger import breakpoint  # noqa: A004
from xform.debug_sharding import (  # noqa: F401
    inspect_array_sharding, visualize_array_sharding, visualize_sharding)

__all__ = ["breakpoint", "callback", "log", "print", "inspect_array_sharding",
           "visualize_array_sharding", "visualize_sharding"]


def callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
    """Call ``callback(*args, **kwargs)`` with concrete values, for its side effect.

    Array arguments (anywhere in the ``args``/``kwargs`` pytrees) arrive as Arrays;
    other leaves are passed as they are. Also usable in JAX's two-call form:
    ``debug.callback(ordered=True)(fn, *args)``.

    Args:
      callback: a Python function; its return value is ignored.
      *args: positional arguments for ``callback``.
      ordered: accepted for JAX compatibility (see the module note).
      partitioned: accepted for JAX compatibility.
      **kwargs: keyword arguments for ``callback``.

    Raises:
      TypeError: if ``callback`` is not callable.

    >>> import builtins, xform, xform.numpy as jnp
    >>> xform.jit(lambda x: xform.debug.callback(builtins.print, x * 2))(jnp.arange(3))
    [0 2 4]
    """
    def call(callback, *args, **kwargs):
        if not callable(callback):
            raise TypeError("first argument to jax.debug.callback must be callable, but got "
                            f"an object of type {type(callback)}")
        debug_callback(callback, *args, **kwargs)

    if callback is not None:
        return call(callback, *args, **kwargs)
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call "
                        f"form: {args=} {kwargs=}")
    return call


class _FormatChecker(string.Formatter):
    """Formats nothing; raises for arguments that the format string leaves unused."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
        unused = [k for k in kwargs if k not in used_args]
        if unused:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused}. You may be "
                "passing an f-string (i.e, `f\"{x}\"`) into `jax.debug.print` and "
                "instead should pass in a regular string.")


def print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
          _log=False, **kwargs):
    """Print ``fmt.format(*args, **kwargs)`` with the concrete values of the arguments.

    Works under ``jit``, ``vmap`` and ``grad`` (see the module docstring). Use
    ``debug.print("x={x}", x=x)``, not an f-string: formatting happens when the values
    exist. NumPy print options in force at the call apply to the output.

    Args:
      fmt: a ``str.format`` format string.
      *args: positional values to format.
      ordered: accepted for JAX compatibility (see the module note).
      partitioned: accepted for JAX compatibility.
      skip_format_check: don't check that every argument is used by ``fmt``.
      **kwargs: keyword values to format.

    Raises:
      ValueError: if an argument is not used by ``fmt``.

    >>> import xform, xform.numpy as jnp
    >>> xform.jit(lambda x: xform.debug.print("x={x}", x=x))(jnp.arange(3.0))
    x=[0. 1. 2.]
    """
    def call(fmt, *args, **kwargs):
        if not skip_format_check:
            _FormatChecker().format(fmt, *args, **kwargs)
        where = None
        if _log:  # (the user's line: past call, print and log, or the user calls call)
            frame = sys._getframe(3 if fmt_given else 1)
            where = (frame.f_code.co_filename, frame.f_lineno)
        debug_callback(_Printer(fmt, np.get_printoptions(), where), *args, **kwargs)

    fmt_given = fmt is not None

    if fmt is not None:
        return call(fmt, *args, **kwargs)
    if args or kwargs:
        raise TypeError("debug_print received unexpected arguments in the two-call "
                        f"form: {args=} {kwargs=}")
    return call


def log(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
        **kwargs):
    """:func:`print`, but the message goes to the ``xform.debug`` logger at INFO level,
    with the caller's file and line (``jax.debug.log``)."""
    return print(fmt, *args, ordered=ordered, partitioned=partitioned,
                 skip_format_check=skip_format_check, _log=True, **kwargs)


_logger = logging.getLogger(__name__)


class _Printer:
    """The host side of ``print``: formats with the NumPy print options of the call.
    Equal for equal format and options, so repeated prints share compiled programs."""
    __slots__ = ("fmt", "printoptions", "placeholders", "where")

    def __init__(self, fmt, printoptions, where=None):
        self.fmt, self.printoptions, self.where = fmt, printoptions, where
        self.placeholders = any(field is not None
                                for _, field, _, _ in string.Formatter().parse(fmt))

    def __call__(self, *args, **kwargs):
        with np.printoptions(**self.printoptions):
            msg = (self.fmt.format(*args, **kwargs) if self.placeholders
                   else " ".join([self.fmt, *map(str, args)]))
        if self.where is None:
            sys.stdout.write(msg + "\n")
            return
        record = _logger.makeRecord(_logger.name, logging.INFO, *self.where, msg, (), None)
        _logger.handle(record)

    def __eq__(self, other):
        return (type(other) is _Printer and self.fmt == other.fmt
                and self.printoptions == other.printoptions and self.where == other.where)

    def __hash__(self):
        return hash(self.fmt)

    def __repr__(self):
        return f"print({self.fmt!r})"
