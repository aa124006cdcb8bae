"""Profiler spans for xform's own phases (``xform.jit.trace``, ``xform.compile``, ...).

A span is a jaxlib TraceMe, made only while xform's profiler is on (a trace or a
profiler server, see :mod:`xform.profiler`); otherwise :func:`span` costs one flag check.
"""
import contextlib

from xform import backend

active = False   # set by xform.profiler while a trace or a profiler server runs
_off = contextlib.nullcontext()


def span(name, /, **metadata):
    """A TraceMe named ``name`` (``metadata`` shown as its arguments) while a profile is
    being recorded, else a no-op context manager."""
    if active and backend.trace_me_enabled():
        return backend.TraceMe(name, **metadata)
    return _off
