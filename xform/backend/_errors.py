"""jaxlib's JaxRuntimeError leaves the backend as xform's own."""
import functools

from jaxlib import _jax


class JaxRuntimeError(RuntimeError):
    """XLA's runtime failed: compiling, transferring or executing a program.

    Raised from ``xform.backend`` for any error jaxlib's runtime reports (e.g. running
    out of memory, or a buffer deleted by donation). The message is XLA's; it usually
    names the status (``INTERNAL``, ``RESOURCE_EXHAUSTED``, ``INVALID_ARGUMENT``).
    """


def _runtime_error(e):
    return JaxRuntimeError(str(e)).with_traceback(e.__traceback__)


def xform_error(e):
    """``e`` as xform raises it: jaxlib's JaxRuntimeError becomes xform's own (the hot
    paths call jaxlib's C++ execute directly and convert in their ``except``)."""
    return _runtime_error(e) if isinstance(e, _jax.JaxRuntimeError) else e


def _xform_errors(fn):
    """``fn`` raising xform's JaxRuntimeError where jaxlib raises its own."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _jax.JaxRuntimeError as e:
            raise _runtime_error(e) from None
    return call
