"""``xform.nn.core.lift`` (``flax.core.lift``): xform's transformations lifted over
scope functions ``fn(scope, *args)``.

These are the same core transformations linen's ``nn.vmap``/``nn.scan``/... run on
(``xform.nn._transforms``, ``_lifted_*``, ``_control``): each packs the variables and
rng streams of a scope, or of any pytree of scopes, into pytrees, applies the xform
transformation to a pure function that rebuilds inner scopes, and writes the mutated
collections back. Rng splitting, variable axes and the inner ``debug_path``
(``/vmap(dense)``) follow Flax's.

>>> import xform, xform.numpy as jnp
>>> from xform.nn import core, initializers
>>> def dense(scope, x):
...   return x @ scope.param('kernel', initializers.lecun_normal(), (x.shape[-1], 2))
>>> ens = core.lift.vmap(dense, variable_axes={'params': 0},
...                      split_rngs={'params': True}, in_axes=None, axis_size=3)
>>> _, v = core.init(ens)(xform.random.PRNGKey(0), jnp.ones((1, 4)))
>>> v['params']['kernel'].shape
(3, 4, 2)
"""
import functools
import warnings

from xform.core.tree_util import tree_map
from xform.nn._control import _core_cond, _core_switch, _core_while_loop
from xform.nn._lifted_ad import (_core_custom_vjp, _core_jvp, _core_map_variables,
                                 _core_value_and_grad, _core_vjp)
from xform.nn._lifted_extras import _core_fold_rngs, _core_remat_scan
from xform.nn._lifted_jit import _core_jit, jitted_body
from xform.nn._scope import (  # noqa: F401
    CollectionFilter, DenyList, Filter, LazyRng, PRNGSequenceFilter, Scope,
    group_collections, in_filter, intersect_filters, is_filter_empty, subtract_filters,
    union_filters)
from xform.nn._transforms import In, Out, _core_remat, _core_scan, _core_vmap, _pack
from xform.nn.core.frozen_dict import freeze, unfreeze  # noqa: F401

__all__ = ["In", "Out", "checkpoint", "cond", "custom_vjp", "fold_rngs", "id_fn", "jit",
           "jvp", "map_variables", "pack", "remat", "remat_scan", "scan",
           "swap_collection", "switch", "tree_map_rngs", "value_and_grad", "vjp",
           "vmap", "while_loop"]


def tree_map_rngs(fn, tree):
    """``tree_map`` that also treats typed key arrays as leaves."""
    return tree_map(fn, tree, is_leaf=lambda x: "key" in str(getattr(x, "dtype", "")))


def id_fn(x):
    return x


def pack(fn, in_variable_filters, out_variable_filters, rng_filters, name=None,
         enable_kwargs=False):
    """The building block of the lifted transformations: ``fn(scope_fn, repack_fn,
    variable_groups, rng_groups, *args) -> (y, out_variable_groups)`` as a function of
    ``(scope_tree, *args)``. ``variable_groups`` holds one tuple per filter (one dict
    per scope); ``scope_fn(variable_groups, rng_groups, mutable_filter=True)`` builds
    the inner scope tree and ``repack_fn(scope_tree)`` returns its mutated groups."""
    def core(p, variable_groups, rng_groups, *args, **kwargs):
        if kwargs and not enable_kwargs:
            warnings.warn(f'kwargs are not supported in {name}, so '
                          f'"{", ".join(kwargs)}" is(are) ignored', RuntimeWarning)
            kwargs = {}
        return fn(p.scope_fn, p.repack, variable_groups, rng_groups, *args, **kwargs)
    return functools.wraps(fn)(_pack(core, in_variable_filters, out_variable_filters,
                                     rng_filters, name))


def map_variables(fn, mapped_collections, map_in_fn=id_fn, map_out_fn=id_fn, init=False,
                  mutable=False, rngs=True, variables=True):
    """``fn`` seeing the ``mapped_collections`` through ``map_in_fn`` (and writing them
    back through ``map_out_fn`` when ``mutable``); ``init``: create them first."""
    return _core_map_variables(fn, mapped_collections, map_in_fn, map_out_fn, init,
                               mutable, rngs, variables)


def swap_collection(fn, col_a, col_b):
    """``fn`` with collections ``col_a`` and ``col_b`` swapped."""
    def swap(target):
        a, b = target.get(col_a, {}), target.get(col_b, {})
        target[col_b], target[col_a] = a, b
        return target
    return map_variables(fn, (col_a, col_b), swap, swap, mutable=True)


def vjp(fn, scope, *primals, has_aux=False, reduce_axes=(), vjp_variables="params",
        variables=True, rngs=True):
    """``xform.vjp`` of ``fn(scope, *primals)``: ``(y, vjp_fn)`` (``(y, vjp_fn, aux)``
    with ``has_aux``); ``vjp_fn(ct)`` is ``(vjp_variables_ct, *primals_ct)``."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    return _core_vjp(fn, has_aux, vjp_variables, variables, rngs)(scope, *primals)


def value_and_grad(fn, scope, *primals, has_aux=False, reduce_axes=(), variables=True,
                   rngs=True):
    """``(y, primals_grads)`` (``(y, aux, grads)``) of the scalar ``fn(scope,
    *primals)``; no gradient for the variables (use ``vjp``)."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to value_and_grad is deprecated")
    return _core_value_and_grad(fn, has_aux, variables, rngs)(scope, *primals)


def jvp(fn, scope, primals, tangents, variable_tangents, variables=True, rngs=True):
    """``(y, y_tangent)`` of ``fn(scope, *primals)``; ``variable_tangents``:
    ``{collection: tangents}`` per scope (collections left out have zero tangent)."""
    return _core_jvp(fn, tangents, variable_tangents, variables, rngs)(scope, *primals)


def vmap(fn, variable_axes, split_rngs, in_axes=0, out_axes=0, axis_size=None,
         axis_name=None, spmd_axis_name=None, metadata_params={}):  # noqa: B006
    """``xform.vmap`` of ``fn(scope, *args)``: ``variable_axes`` maps collections
    (``{'params': 0}``: one set per index; ``None``: shared), ``split_rngs`` gives the
    streams one key per index; ``spmd_axis_name`` splits the mapped axis of sharding
    constraints inside over that mesh axis, as ``xform.vmap``'s."""
    return _core_vmap(fn, variable_axes, split_rngs, in_axes, out_axes, axis_size,
                      axis_name, metadata_params, spmd_axis_name)


def scan(fn, variable_axes={}, variable_broadcast=False,  # noqa: B006
         variable_carry=False, split_rngs={}, in_axes=0, out_axes=0,  # noqa: B006
         length=None, reverse=False, unroll=1, _split_transpose=False,
         data_transform=None, metadata_params={},  # noqa: B006
         check_constancy_invariants=True):
    """``lax.scan`` of ``fn(scope, carry, *xs) -> (carry, ys)`` with variables scanned
    (``variable_axes``), shared (``variable_broadcast``) or carried
    (``variable_carry``); returns ``(scope, carry, *xs) -> (carry, ys)``."""
    del _split_transpose, check_constancy_invariants
    return _core_scan(fn, variable_axes, variable_broadcast, variable_carry, split_rngs,
                      in_axes, out_axes, length, reverse, unroll, data_transform,
                      metadata_params)


def while_loop(cond_fn, body_fn, scope, init, carry_variables=False,
               broadcast_variables=True, split_rngs={}):  # noqa: B006
    """``lax.while_loop`` of ``body_fn(scope, c)`` while ``cond_fn(scope, c)``; only
    ``carry_variables`` may change (they cannot be created in the loop)."""
    return _core_while_loop(cond_fn, body_fn, carry_variables, broadcast_variables,
                            split_rngs)(scope, init)


def cond(pred, true_fun, false_fun, scope, *operands, variables=True, rngs=True):
    """``lax.cond`` over ``true_fun``/``false_fun(scope, *operands)`` (both traced:
    they must create the same variables)."""
    return _core_cond(pred, (true_fun, false_fun), variables, rngs)(scope, *operands)


def switch(index, branches, scope, *operands, variables=True, rngs=True):
    """``lax.switch`` over ``branches[i](scope, *operands)``."""
    return _core_switch(index, tuple(branches), variables, rngs)(scope, *operands)


def custom_vjp(fn, forward_fn, backward_fn, grad_vars="params", nondiff_argnums=()):
    """``fn(scope, *args)`` with a custom VJP: ``forward_fn`` returns ``(y, residuals)``,
    ``backward_fn(*nondiff_args, residuals, y_ct)`` returns ``(grad_vars_ct,
    *args_ct)``."""
    return _core_custom_vjp(fn, forward_fn, backward_fn, grad_vars, nondiff_argnums)


def checkpoint(fn, variables=True, rngs=True, concrete=False, prevent_cse=True,
               static_argnums=(), policy=None):
    """``xform.checkpoint`` of ``fn(scope, *args)``: recomputed in the backward pass.
    ``static_argnums`` count ``args`` from 0 (the scope is not counted)."""
    if concrete:
        raise NotImplementedError("The concrete argument is deprecated. Use "
                                  "static_argnums instead.")
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    return _core_remat(fn, variables, rngs, prevent_cse, nums, policy)


remat = checkpoint


def jit(fn, variables=True, rngs=True, static_argnums=(), static_argnames=(),
        donate_argnums=(), device=None, backend=None):
    """``xform.jit`` of ``fn(scope, hash_key, *args)``: the caller passes a hashable
    ``hash_key`` standing for everything ``fn`` closes over; one trace per
    ``(scope mutability, hash_key)``. ``static_argnums`` count the scope as 0 and the
    ``args`` after ``hash_key`` from 1 (as Flax's)."""
    del device, backend
    compiled = jitted_body(static_argnums, static_argnames, donate_argnums)
    return _core_jit(fn, variables, rngs, compiled, keyed=True)


def fold_rngs(fn, variables=True, rngs=True):
    """``fn(scope, hash_key, *args)`` on rng streams with their path suffix dropped."""
    def wrapper(scope, hash_key, *args, **kwargs):
        return _core_fold_rngs(lambda s, *a, **k: fn(s, hash_key, *a, **k), variables,
                               rngs)(scope, *args, **kwargs)
    return wrapper


def remat_scan(body_fn, lengths, policy=None, variable_broadcast=False,
               variable_carry=False, variable_axes={True: 0},  # noqa: B006
               split_rngs={True: True}):  # noqa: B006
    """``body_fn(scope, c) -> c`` repeated ``prod(lengths)`` times as nested scans of
    remats (memory ~ ``n ** (1 / len(lengths))``)."""
    return _core_remat_scan(body_fn, tuple(lengths), policy, variable_broadcast,
                            variable_carry, variable_axes, split_rngs)
