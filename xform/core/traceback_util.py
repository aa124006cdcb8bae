"""Tracebacks that point at the user's code (JAX's ``jax_traceback_filtering``).

An error raised while tracing or running a transformed function unwinds through many
xform frames (the transformation, the trace, the rule, abstract eval). Entry points of
the public API are wrapped with ``api_boundary``: when an exception leaves the
outermost one, the xform frames are removed from its traceback (the user's frames,
including the line inside the transformed function, remain) and a note says so.

Modes (env ``JAX_TRACEBACK_FILTERING``, or a ``jax_traceback_filtering`` config option
where the config defines one): ``"auto"``/``"quiet_remove_frames"`` (the default)
filters and adds a one-line note; ``"remove_frames"`` also keeps the unfiltered
traceback, chained as the ``__cause__`` (an ``UnfilteredStackTrace``); ``"off"``
leaves tracebacks alone.
"""
import functools
import os
import threading
import types

from xform.core.source_info_util import is_internal_file
from xform.core.config import config

_NOTE = ("--------------------\nFor simplicity, xform has removed its internal frames from "
         "the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to "
         "include these.")


class UnfilteredStackTrace(Exception):
    """Carries the complete traceback of an error whose traceback was filtered."""


def _filtering_mode():
    mode = getattr(config, "jax_traceback_filtering", None) or os.environ.get(
        "JAX_TRACEBACK_FILTERING", "auto")
    mode = str(mode).lower()
    return "quiet_remove_frames" if mode == "auto" else mode


def include_frame(frame):
    """Whether a frame is the user's (not inside the xform package)."""
    return not is_internal_file(frame.f_code.co_filename)


def filter_traceback(tb):
    """The traceback ``tb`` with xform's frames removed."""
    kept = []
    while tb is not None:
        if include_frame(tb.tb_frame):
            kept.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    out = None
    for frame, lasti, lineno in reversed(kept):
        out = types.TracebackType(out, frame, lasti, lineno)
    return out


class _Depth(threading.local):
    n = 0


_depth = _Depth()


def api_boundary(fun):
    """Wrap a public entry point: errors leaving the outermost boundary lose xform's
    frames (see the module docstring). Nested boundaries do nothing."""
    @functools.wraps(fun)
    def reraise_with_filtered_traceback(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (pytest and IPython hide this frame)
        _depth.n += 1
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            if _depth.n > 1 or getattr(e, "_xform_filtered", False):
                raise
            mode = _filtering_mode()
            if mode == "off" or e.__traceback__ is None:
                raise
            if mode not in ("quiet_remove_frames", "remove_frames"):
                raise ValueError(f"JAX_TRACEBACK_FILTERING={mode} is not a valid value; "
                                 "use auto, off, quiet_remove_frames or remove_frames.")
            full = e.__traceback__
            e.with_traceback(filter_traceback(full))
            try:
                e._xform_filtered = True
            except AttributeError:
                pass
            if mode == "remove_frames":
                unfiltered = UnfilteredStackTrace(
                    "The preceding stack trace is the source of the exception below, with "
                    "xform's internal frames included.").with_traceback(full)
                unfiltered.__cause__, e.__cause__ = e.__cause__, unfiltered
                e.__suppress_context__ = True
            else:
                e.add_note(_NOTE)
            raise
        finally:
            _depth.n -= 1
    return reraise_with_filtered_traceback
