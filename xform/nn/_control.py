"""Lifted control flow: ``nn.cond``, ``nn.switch``, ``nn.while_loop`` over xform's
``lax.cond``/``lax.switch``/``lax.while_loop`` (Flax's ``lift.cond``/``switch``/
``while_loop``): each branch (or the loop body) runs a clone of the module on inner
scopes built from the packed variables and rngs (see ``_transforms``)."""
from xform import lax, random
from xform.core.tree_util import tree_map
from xform.nn._transforms import (_export, _module_scopes, _pack, _reimport,
                                  _set_module_scopes)
from xform.nn._module import _wrap_method

__all__ = ["cond", "switch", "while_loop"]


def _direct(make_core, fns, mdl, *args):
    """Runs ``make_core(core_fns)(scopes, *args)`` where each core fn calls one of
    ``fns`` on a clone of ``mdl`` bound to the inner scopes."""
    state = _export(mdl._state)

    def make(fn):
        fn = _wrap_method(fn)

        def core_fn(scopes, *a):
            cloned, a, _ = _set_module_scopes(mdl, a, {}, scopes)
            object.__setattr__(cloned, "_state", _export(state))
            res = fn(cloned, *a)
            _reimport(mdl._state, cloned._state)
            return res
        return core_fn
    scopes, args, _ = _module_scopes(mdl, args)
    return make_core([make(f) for f in fns])(scopes, *args)


def _core_branches(select, fns, variables, rngs, name):
    """``select(branch_fns, *operands)`` (a ``lax.cond``/``switch``) over pure
    branches that each run one of ``fns(scopes, *operands)`` on fresh inner scopes."""
    def core(p, variable_groups, rng_groups, *operands):
        def wrap(fn):
            def branch(*operands):
                scopes = p.scope_fn(variable_groups, rng_groups)
                return fn(scopes, *operands), p.repack(scopes)
            return branch
        return select([wrap(f) for f in fns], *operands)
    return _pack(core, (variables,), (variables,), (rngs,), name)


def _core_switch(index, fns, variables, rngs):
    return _core_branches(lambda bs, *ops: lax.switch(index, bs, *ops), fns, variables,
                          rngs, "switch")


def _core_cond(pred, fns, variables, rngs):
    return _core_branches(lambda bs, *ops: lax.cond(pred, *bs, *ops), fns, variables,
                          rngs, "cond")


def _core_while_loop(cond_fn, body_fn, carry_variables, broadcast_variables, split_rngs):
    """``(scope_tree, init) -> carry``: ``lax.while_loop`` over the scope functions."""
    splits = tuple(split_rngs.values())

    def core(p, variable_groups, rng_groups, init):
        carry_vars, bcast_vars = variable_groups

        def loop_rngs(i):
            return tuple(tree_map(lambda k: random.fold_in(k, i), g) if s else g
                         for g, s in zip(rng_groups, splits))

        def cond_wrapper(c):
            i, cv, carry = c
            scopes = p.scope_fn((cv, bcast_vars), loop_rngs(-i), mutable_filter=False)
            return cond_fn(scopes, carry)

        def body_wrapper(c):
            i, cv, carry = c
            scopes = p.scope_fn((cv, bcast_vars), loop_rngs(i))
            carry = body_fn(scopes, carry)
            (cv,) = p.repack(scopes)
            return i + 1, cv, carry
        _, carry_vars, carry = lax.while_loop(cond_wrapper, body_wrapper,
                                              (0, carry_vars, init))
        return carry, (carry_vars,)
    return _pack(core, (carry_variables, broadcast_variables), (carry_variables,),
                 tuple(split_rngs), "while_loop")


def switch(index, branches, mdl, *operands, variables=True, rngs=True):
    """``branches[index](mdl, *operands)`` as one ``lax.switch``; every branch must
    create/update the same variables (all branches are traced).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class M(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x, i):   # submodules are created inside the branches
    ...     branches = [lambda m, x: nn.Dense(2, name='d')(x),
    ...                 lambda m, x: -nn.Dense(2, name='d')(x)]
    ...     return nn.switch(i, branches, self, x)
    >>> v = M().init(xform.random.PRNGKey(0), jnp.ones((1, 3)), 0)
    >>> M().apply(v, jnp.ones((1, 3)), 1).shape
    (1, 2)
    """
    make_core = lambda fns: _core_switch(index, fns, variables, rngs)
    return _direct(make_core, tuple(branches), mdl, *operands)


def cond(pred, true_fun, false_fun, mdl, *operands, variables=True, rngs=True):
    """``true_fun(mdl, *operands) if pred else false_fun(mdl, *operands)`` as one
    ``lax.cond`` (both branches traced; they must create the same variables)."""
    make_core = lambda fns: _core_cond(pred, fns, variables, rngs)
    return _direct(make_core, (true_fun, false_fun), mdl, *operands)


def while_loop(cond_fn, body_fn, mdl, init, carry_variables=False,
               broadcast_variables=True, split_rngs={}):  # noqa: B006
    """``lax.while_loop`` over ``body_fn(mdl, carry)`` while ``cond_fn(mdl, carry)``.

    Variables in ``carry_variables`` are threaded through the iterations; the
    others are read-only. ``split_rngs`` streams get ``fold_in(key, i)`` at step
    ``i`` (``-i`` in ``cond_fn``), as Flax.
    """
    make_core = lambda fns: _core_while_loop(*fns, carry_variables, broadcast_variables,
                                             split_rngs)
    return _direct(make_core, (cond_fn, body_fn), mdl, init)
