"""``nn.jit``: a Module class or method compiled with ``xform.jit``, traced once per
module *fingerprint* (Flax's ``lift.jit`` caching).

The compiled function is made once per lifted method; its first (static) argument is
a fingerprint of the module (type, fields, submodules, module state, scope
mutability/flags/rng counters/reservations) and of the scopes' mutability, so an
identical module called again (e.g. in a loop of eager ``apply`` calls) reuses the
trace. The per-call closures (the packed scopes) reach the trace through a context
stack, as in Flax. On a cache hit the rng counters are advanced by the amounts the
traced call advanced them.
"""
import dataclasses
import threading

import numpy as np

from xform.core.tree_util import tree_map
from xform.nn._module import Module
from xform.nn._scope import DenyList, LazyRng
from xform.nn._transforms import _lift, _named, _pack
from xform.transforms.jit import jit as _jit

__all__ = ["jit"]


class _Context(threading.local):
    def __init__(self):
        self.stack = []        # (fn, pack) of the calls being traced
        self.counts = {}       # fingerprint -> rng counter deltas of its traced call


_context = _Context()


def _fingerprint(obj, seen):
    """A hashable picture of ``obj`` for the trace cache (Flax's
    ``_fingerprint_recursive``)."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, Module):
        if id(obj) in seen:
            return type(obj), seen[id(obj)]
        seen[id(obj)] = len(seen)
        parts = [(f.name, _fingerprint(getattr(obj, f.name), seen))
                 for f in dataclasses.fields(obj)
                 if f.name not in ("parent", "name") and hasattr(obj, f.name)]
        st = obj._state
        parts.append(("_state", (st.in_compact_method, st.in_setup, st.setup_called,
                                 st.is_initialized, _fingerprint(st.autoname_cursor,
                                                                 seen))))
        if obj.scope is not None:
            s = obj.scope
            parts.append(("scope", tuple(_fingerprint(x, seen) for x in (
                s.mutable, s.flags, s.rng_counters,
                {k: sorted(map(str, v)) for k, v in s.reservations.items()}))))
        return type(obj), tuple(parts)
    if isinstance(obj, DenyList):
        return DenyList, _fingerprint(obj.deny, seen)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return type(obj), tuple((f.name, _fingerprint(getattr(obj, f.name), seen))
                                for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return tuple(sorted(((_fingerprint(k, seen), _fingerprint(v, seen))
                             for k, v in obj.items()), key=repr))
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        return type(obj).__name__, tuple(_fingerprint(v, seen) for v in items)
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):   # arrays: by value
        a = np.asarray(obj)
        return "array", a.shape, str(a.dtype), a.tobytes()
    try:
        hash(obj)
        return obj
    except TypeError:
        return "id", id(obj)


def _copy_counts(c):
    return {k: _copy_counts(v) if isinstance(v, dict) else v for k, v in c.items()}


def _delta(new, old):
    return {k: _delta(v, old.get(k, {})) if isinstance(v, dict) else v - old.get(k, 0)
            for k, v in new.items()}


def _advance(counts, delta):
    for k, d in delta.items():
        if isinstance(d, dict):
            _advance(counts.setdefault(k, {}), d)
        else:
            counts[k] = counts.get(k, 0) + d


def _traced(fingerprint, variable_groups, rng_groups, *args, **kwargs):
    fn, p = _context.stack[-1]
    scopes = p.scope_fn(variable_groups, rng_groups)
    return fn(scopes, *args, **kwargs), p.repack(scopes)


def _core_jit(fn, variables, rngs, compiled, keyed=False):
    """``keyed`` (``nn.core.lift.jit``): the first argument after the scopes is the
    caller's hashable key of everything ``fn`` closes over (Flax's module hash key);
    ``fn`` gets it too. Otherwise the key is the fingerprint of ``fn.module``."""
    def core(p, variable_groups, rng_groups, *args, **kwargs):
        rng_groups = tree_map(LazyRng.clear_suffix, rng_groups,
                              is_leaf=lambda r: isinstance(r, LazyRng))
        mutable = tuple(_fingerprint(s.mutable, {}) for s in p.scopes)
        call = fn
        if keyed:
            hash_key, *args = args
            key = (mutable, hash_key)
            call = lambda scopes, *a, **k: fn(scopes, hash_key, *a, **k)
        else:
            key = (_fingerprint(getattr(fn, "module", None), {}), mutable)
        try:
            hash(key)
        except TypeError:   # an unhashable field: no caching for this call
            key = ("id", id(p))
        fingerprint = (id(getattr(fn, "__wrapped__", fn)), key)
        scopes = p.scopes
        old = [_copy_counts(s.rng_counters) for s in scopes]
        _context.stack.append((call, p))
        try:
            out = compiled(fingerprint, variable_groups, rng_groups, *args, **kwargs)
        finally:
            _context.stack.pop()
        if fingerprint not in _context.counts:   # traced now: remember the counts
            _context.counts[fingerprint] = [_delta(s.rng_counters, o)
                                            for s, o in zip(scopes, old)]
        else:
            for s, o, d in zip(scopes, old, _context.counts[fingerprint]):
                if s.rng_counters == o:   # not traced: replay the counter side effect
                    _advance(s.rng_counters, d)
        return out
    return _pack(core, (variables,), (variables,), (rngs,), "jit",
                 enable_kwargs=True)


def jitted_body(static_argnums, static_argnames, donate_argnums):
    """``_traced`` under ``xform.jit``, the user's argument numbers (``self`` or the
    scope is 0) shifted past the fingerprint and variable/rng groups."""
    def norm(n):
        return (n,) if isinstance(n, int) else tuple(n)
    return _jit(_traced,
                static_argnums=(0,) + tuple(i + 2 for i in norm(static_argnums) if i > 0),
                static_argnames=static_argnames,
                donate_argnums=tuple(i + 2 for i in norm(donate_argnums) if i > 0))


def jit(target, variables=True, rngs=True, static_argnums=(), static_argnames=(),
        donate_argnums=(), device=None, backend=None, methods=None):
    """Compiles a Module class or method with ``xform.jit`` (lifted over its variables
    and rng streams, which are forked first, as Flax does). The trace is reused while
    the module's fingerprint (fields, state, scope) is unchanged. ``static_argnums``
    count ``self`` as argument 0.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.jit(nn.Dense)(2).init(xform.random.PRNGKey(0), jnp.ones((1, 3)))
    >>> v['params']['kernel'].shape
    (3, 2)
    """
    del device, backend
    compiled = jitted_body(static_argnums, static_argnames, donate_argnums)

    def core(fn):
        return _core_jit(fn, variables, rngs, compiled)
    return _lift(_named("Jit", core), target, methods, fork=True)
