"""Where in the user's code each jaxpr equation came from (JAX's ``source_info_util``).

When a trace stages an equation it records ``current()``: the innermost frame outside
the xform package, i.e. the user's line that called the operation. Equations derived
from other equations (the JVP, transpose or batched version of a jaxpr, built by
re-evaluating it) inherit the original's source: ``eval_jaxpr`` makes each equation's
source current while binding it. An error raised while evaluating an equation (a
debug_nans NaN, a shape error in a batching rule, a missing transpose rule) gets a note
citing the equation and its source line.
"""
import os
import sys
import threading

_XFORM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_internal_files = {}


def is_internal_file(filename):
    """Whether ``filename`` is part of the xform package (cached per file name)."""
    hit = _internal_files.get(filename)
    if hit is None:
        hit = _internal_files[filename] = os.path.abspath(filename).startswith(_XFORM_DIR)
    return hit


class SourceInfo:
    """A view of an equation's recorded source, ``(code object, line)``: equations store
    the plain tuple (cheap at trace time) and this formats it when asked."""
    __slots__ = ("code", "lineno")

    def __init__(self, code, lineno):
        self.code = code
        self.lineno = lineno

    filename = property(lambda self: self.code.co_filename)
    function = property(lambda self: self.code.co_name)

    def __str__(self):
        return f"{self.filename}:{self.lineno} ({self.function})"

    __repr__ = __str__


class _Context(threading.local):
    current = None


_context = _Context()


def current():
    """The source of an equation staged now, ``(code, line)`` of the innermost user frame
    (``None`` if there is none)."""
    src = _context.current
    if src is not None:
        return src
    f = sys._getframe(1)
    internal = _internal_files
    while f is not None:
        code = f.f_code
        hit = internal.get(code.co_filename)
        if hit is None:
            hit = is_internal_file(code.co_filename)
        if not hit:
            return (code, f.f_lineno)
        f = f.f_back
    return None


class source_context:
    """Make ``source`` current: equations staged in the block inherit it."""
    __slots__ = ("source", "prev")

    def __init__(self, source):
        self.source = source

    def __enter__(self):
        self.prev = _context.current
        _context.current = self.source

    def __exit__(self, *exc):
        _context.current = self.prev


def annotate(error, eqn):
    """Add a note naming ``eqn`` and its source to ``error`` (once: the innermost)."""
    if eqn.source is None or getattr(error, "_xform_eqn_noted", False):
        return
    try:
        error._xform_eqn_noted = True
        error.add_note(f"(raised by the equation `{_short(eqn)}` traced at "
                       f"{eqn.source_info})")
    except (AttributeError, TypeError):
        pass


def _short(eqn):
    ins = ", ".join(v.aval.str_short() for v in eqn.invars)
    outs = ", ".join(v.aval.str_short() for v in eqn.outvars)
    return f"{eqn.primitive.name}({ins}) -> {outs}"
