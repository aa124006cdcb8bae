"""``xform.experimental.checkify``: functionalized checks (JAX's ``jax.experimental.checkify``).

``checkify(f)`` returns ``(err, out)``: the checks ``f`` makes (``check`` calls and, with
``errors=``, automatic nan / division / index checks) become an ``Error`` value instead
of a Python exception, so they work under ``jit``, ``vmap``, ``grad`` and control flow.
The mechanism is ``xform.interpreters.checkify``.
"""
import numpy as np

from xform.core import tree_util
from xform.core.array_ops import ArrayOps
from xform.experimental import _checkify_rules as _rules
from xform.interpreters import checkify as _ck
from xform.interpreters.checkify import (BatchedError, DivisionByZeroError,  # noqa: F401
                                         Error, FailedCheckError, JaxException,
                                         JaxRuntimeError, NaNError, OOBError)

__all__ = ["BatchedError", "DivisionByZeroError", "Error", "ErrorCategory",
           "FailedCheckError", "JaxException", "JaxRuntimeError", "NaNError", "OOBError",
           "all_checks", "automatic_checks", "check", "check_error", "checkify", "debug_check",
           "div_checks", "float_checks", "index_checks", "init_error", "nan_checks",
           "user_checks"]

ErrorCategory = type["JaxException"]  # what the ``errors`` sets hold (JAX spells it so)
init_error = _ck.init_error  # the empty Error: no check has failed

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


def checkify(f, errors=user_checks):
    """Functionalize the checks in ``f``, optionally adding automatic checks.

    Args:
      f: a function that may call ``check`` (or ``check_error``).
      errors: the set of error classes to check: ``user_checks`` (default),
        ``nan_checks``, ``div_checks``, ``index_checks``, or a union such as
        ``float_checks | user_checks``; ``all_checks`` enables everything.

    Returns:
      A function taking ``f``'s arguments and returning ``(err, out)``: ``err.get()`` is
      None or the message of the first failed check; ``out`` is ``f``'s output.

    >>> import xform, xform.numpy as jnp
    >>> from xform.experimental import checkify
    >>> def f(x):
    ...   checkify.check(x > 0, "{x} needs to be positive!", x=x)
    ...   return jnp.log(x)
    >>> err, out = xform.jit(checkify.checkify(f))(jnp.float32(-3.))
    >>> err.get()
    '-3.0 needs to be positive! (`check` failed)'
    """
    errors = frozenset(errors)

    def checked_fun(*args, **kwargs):
        # NB: as JAX, the arguments are closed over (values stay concrete Python scalars
        # or arrays), while every value computed inside is traced.
        store = {}

        def flat():
            leaves, store["tree"] = tree_util.tree_flatten(f(*args, **kwargs))
            return leaves

        error, outs = _ck.checkify_call(flat, errors, _ck.init_error, ())
        return error, store["tree"].unflatten(outs)

    return checked_fun


def _is_scalar_pred(pred):
    return isinstance(pred, bool) or (isinstance(pred, ArrayOps) and pred.shape == ()
                                      and pred.dtype == np.dtype(bool))


def _check(pred, msg, debug, fmt_args, fmt_kwargs):
    if not _is_scalar_pred(pred):
        name = "debug_check" if debug else "check"
        raise TypeError(f"{name} takes a scalar pred as argument, got {pred}")
    for arg in tree_util.tree_leaves((fmt_args, fmt_kwargs)):
        if not isinstance(arg, (ArrayOps, np.ndarray)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {arg!r} of type {type(arg)}.")
    exc = FailedCheckError(msg, *fmt_args, **fmt_kwargs)
    error = _rules.assert_func(_ck.init_error, _rules.jnp.logical_not(pred), exc)
    _rules.check_error_value(error, debug=debug)


def check(pred, msg, *fmt_args, debug=False, **fmt_kwargs):
    """Check ``pred``; if False, fail with ``msg`` formatted with the format arguments.

    Outside ``checkify`` a False ``pred`` raises ``JaxRuntimeError`` at once; staged
    (``jit``, ``scan``...) without ``checkify`` it is an error: functionalize it first.

    Args:
      pred: a scalar boolean (Python bool or a bool array of shape ``()``).
      msg: the message, a format string.
      debug: if True, the check is dropped unless functionalized (``debug_check``).
      *fmt_args: arrays (pytrees of arrays) formatted into ``msg`` with their runtime values.
      **fmt_kwargs: named ones.

    Raises:
      TypeError: ``pred`` is not a scalar bool, or a format argument is not an array.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import checkify
    >>> err, _ = checkify.checkify(lambda x: checkify.check(x < 2, "{} too big", x))(
    ...     jnp.int32(3))
    >>> print(err.get())
    3 too big (`check` failed)
    """
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred, msg, *fmt_args, **fmt_kwargs):
    """A ``check`` that only runs under ``checkify``: elsewhere it is a no-op."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def check_error(error):
    """Raise ``error``'s failure (as ``err.throw()``), in a way ``checkify`` can
    functionalize again (the inverse of ``checkify``).

    Raises:
      TypeError: ``error`` is not an ``Error``.
    """
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} "
                        "instead.")
    _rules.check_error_value(error)
