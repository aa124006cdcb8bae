"""``xform.nn.core.scope`` (``flax.core.scope``): the functional ``Scope`` API.

A scope function ``fn(scope, *args)`` declares its variables with ``scope.param`` /
``scope.variable`` and its sub-layers with ``scope.child(fn)``; ``init(fn)`` and
``apply(fn)`` turn it into pure functions of ``(rngs | variables, *args)``. The
``Scope`` class is the one linen's ``Module`` is bound to (``xform.nn._scope``):
params and rng streams are bit-identical with ``flax.core`` for the same keys.

>>> import xform, xform.numpy as jnp
>>> from xform.nn import core, initializers
>>> def dense(scope, x, features):
...   k = scope.param('kernel', initializers.lecun_normal(), (x.shape[-1], features))
...   return x @ k
>>> y, v = core.init(dense)(xform.random.PRNGKey(0), jnp.ones((1, 3)), 2)
>>> v['params']['kernel'].shape
(3, 2)
>>> bool((core.apply(dense)(v, jnp.ones((1, 3)), 2) == y).all())
True
"""
import functools
from collections.abc import Mapping

from xform.nn import errors
from xform.nn._scope import (  # noqa: F401
    CollectionFilter, DenyList, Filter, LazyRng, PRNGSequenceFilter, Scope, Variable,
    bind, filter_to_set, group_collections, in_filter, intersect_filters,
    is_filter_empty, is_valid_rng, is_valid_rngs, lazy_eval, subtract_filters,
    union_filters)
from xform.nn.configurations import config
from xform.nn.core.frozen_dict import FrozenDict, freeze, unfreeze  # noqa: F401

FrozenVariableDict = FrozenDict

__all__ = ["CollectionFilter", "DenyList", "Filter", "FrozenVariableDict", "LazyRng",
           "PRNGSequenceFilter", "Scope", "Variable", "apply", "bind", "filter_to_set",
           "group_collections", "in_filter", "init", "intersect_filters",
           "is_filter_empty", "lazy_init", "subtract_filters", "union_filters"]


def apply(fn, mutable=False, flags=None):
    """``fn(scope, *args)`` as ``(variables, *args, rngs=None) -> y`` (``(y,
    mutated_collections)`` when ``mutable`` is not False). The scope is valid only
    during the call."""
    @functools.wraps(fn)
    def wrapper(variables, *args, rngs=None, **kwargs):
        if rngs is not None:
            if not is_valid_rng(rngs) and not is_valid_rngs(rngs):
                raise ValueError(
                    "The ``rngs`` argument passed to an apply function should be a "
                    "``jax.PRNGKey`` or a dictionary mapping strings to ``jax.PRNGKey``.")
            if not isinstance(rngs, Mapping):
                rngs = {"params": rngs}
        if (isinstance(variables, Mapping) and isinstance(variables.get("params"), Mapping)
                and "params" in variables["params"]):
            raise errors.ApplyScopeInvalidVariablesStructureError(variables)
        with bind(variables, rngs=dict(rngs) if rngs is not None else None,
                  mutable=mutable, flags=flags).temporary() as root:
            y = fn(root, *args, **kwargs)
        if mutable is not False:
            out = root.mutable_variables()
            return y, (freeze(out) if config.flax_return_frozendict else out)
        return y
    return wrapper


def init(fn, mutable=True, flags=None):
    """``fn(scope, *args)`` as ``(rngs, *args) -> (y, variables)``; ``rngs`` is a key
    (the ``params`` stream) or a dict of streams. ``scope.get_flag('initializing')``
    is True inside."""
    @functools.wraps(fn)
    def wrapper(rngs, *args, **kwargs):
        if not is_valid_rng(rngs) and not is_valid_rngs(rngs):
            raise ValueError(
                "First argument passed to an init function should be a ``jax.PRNGKey`` "
                "or a dictionary mapping strings to ``jax.PRNGKey``.")
        if not isinstance(rngs, Mapping):
            rngs = {"params": rngs}
        init_flags = {**(flags if flags is not None else {}), "initializing": True}
        return apply(fn, mutable=mutable, flags=init_flags)({}, *args, rngs=rngs,
                                                             **kwargs)
    return wrapper


def lazy_init(fn, mutable=True, flags=None):
    """``init`` that returns only the variables, and takes ``ShapeDtypeStruct`` for
    inputs the variables do not depend on (see ``lazy_eval``)."""
    return lazy_eval(lambda *args, **kwargs: init(fn, mutable, flags)(*args, **kwargs)[1])
