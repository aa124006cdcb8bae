"""Shared helpers for ``xform.scipy.stats``: argument promotion and the distribution
namespaces (``norm``, ``gamma``, ...), which are small modules as in JAX."""
import functools
import sys
import types

import numpy as np

from xform import numpy as jnp
from xform.numpy import _util


def promote(name, *args):
    """Arrays of one inexact dtype (weak when every argument is a Python scalar)."""
    return _util.promote_args(name, *args, to="inexact")


def exp_of(logf):
    """``pdf`` (or ``cdf``/``sf``) as ``exp`` of its log; keeps ``logf``'s signature, so
    keywords (``loc=``, ``scale=``) and ``inspect.signature`` work as on JAX's."""
    return functools.wraps(logf)(lambda *args, **kw: jnp.exp(logf(*args, **kw)))


def log_of(f):
    """``logcdf`` (or ``logsf``) as ``log`` of ``f``, with ``f``'s signature."""
    return functools.wraps(f)(lambda *args, **kw: jnp.log(f(*args, **kw)))


def neg_inf(x):
    return jnp.full_like(x, -np.inf)


def nan(x):
    return jnp.full_like(x, np.nan)


def distribution(name, doc, **fns):
    """A module ``xform.scipy.stats.<name>`` holding ``fns`` (importable by name)."""
    mod = types.ModuleType(f"xform.scipy.stats.{name}", doc)
    for fname, fn in fns.items():
        fn.__name__ = fn.__qualname__ = fname
        fn.__module__ = mod.__name__
        setattr(mod, fname, fn)
    mod.__all__ = sorted(fns)
    sys.modules[mod.__name__] = mod
    return mod
