"""Shared helpers for ``xform.scipy.stats``: argument promotion and the distribution
namespaces (``norm``, ``gamma``, ...), which are small modules as in JAX."""
import sys
import types

import numpy as np

from xform import numpy as jnp
from xform.numpy import _util


def promote(name, *args):
    """Arrays of one inexact dtype (weak when every argument is a Python scalar)."""
    return _util.promote_args(name, *args, to="inexact")


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
