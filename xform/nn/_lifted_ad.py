"""Lifted ``nn.map_variables``, ``nn.grad``, ``nn.value_and_grad``, ``nn.vjp``,
``nn.jvp`` and ``nn.custom_vjp`` (Flax's ``core/lift.py`` semantics on the packed
scopes of ``_transforms``): the module's variables enter the xform transformation as
pytrees, so e.g. ``nn.vjp`` also returns the cotangent of the ``params``."""
import functools
import inspect

import xform.numpy as jnp
from xform.core.tree_util import Partial, tree_leaves, tree_structure
from xform.nn._module import Module, _wrap_method
from xform.nn._scope import _copy_dicts, is_filter_empty, subtract_filters
from xform.nn._transforms import _lift, _lift_method, _named, _pack
from xform.transforms.ad import jvp as _jvp, vjp as _vjp
from xform.transforms.custom_derivatives import custom_vjp as _custom_vjp

__all__ = ["custom_vjp", "grad", "jvp", "map_variables", "value_and_grad", "vjp"]


def _id(x):
    return x


# ---- map_variables ----

def _core_map_variables(fn, mapped, map_in_fn, map_out_fn, init, mutable, rngs,
                        variables):
    is_target_out = mutable or init

    def core(p, variable_groups, rng_groups, *args, **kwargs):
        target, other = variable_groups
        if init:   # run once to create the variables, then map them in
            scopes = p.scope_fn((target, other), rng_groups)
            if any(not is_filter_empty(s.mutable) for s in tree_leaves(scopes)):
                fn(scopes, *args, **kwargs)
                target = tuple(map_out_fn(x) for x in p.repack(scopes)[0])
        target = tuple(map_in_fn(_copy_dicts(x)) for x in target)
        mfilter = True if is_target_out else subtract_filters(True, mapped)
        scopes = p.scope_fn((target, other), rng_groups, mutable_filter=mfilter)
        y = fn(scopes, *args, **kwargs)
        out_target, out_vars = p.repack(scopes)
        if is_target_out:
            out_target = tuple(map_out_fn(x) for x in out_target)
        return y, (out_target, out_vars)
    in_vars = (mapped, variables)
    out_vars = in_vars if is_target_out else (False, subtract_filters(variables, mapped))
    return _pack(core, in_vars, out_vars, (rngs,), "map_variables",
                 enable_kwargs=True)


def map_variables(target, mapped_collections=True, trans_in_fn=_id, trans_out_fn=_id,
                  init=False, mutable=False, rngs=True, variables=True, methods=None):
    """Maps a module's variables on their way in (``trans_in_fn``) and, when they may
    change, on their way out (``trans_out_fn``).

    Args:
      target: a Module class or a function ``(module, *args)``.
      mapped_collections: the collections the functions see (a filter).
      trans_in_fn, trans_out_fn: ``{collection: {...}} -> {collection: {...}}``.
      init: create the variables first when they are missing (run at init).
      mutable: the mapped collections may be written (through ``trans_out_fn``).
      rngs, variables: rng streams / other collections passed through.
      methods: for a class, the methods to transform (default ``__call__``).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> Neg = nn.map_variables(nn.Dense, 'params', lambda v: xform.tree.map(
    ...     lambda x: -x, v), init=True)
    >>> v = Neg(2, use_bias=False).init(xform.random.PRNGKey(0), jnp.ones((1, 3)))
    >>> k = v['params']['kernel']
    >>> bool((Neg(2, use_bias=False).apply(v, jnp.ones((1, 3))) == -k.sum(0)).all())
    True
    """
    def core(fn):
        return _core_map_variables(fn, mapped_collections, trans_in_fn, trans_out_fn,
                                   init, mutable, rngs, variables)
    return _lift(_named("Map_variables", core), target, methods)


# ---- the core transformations on packed scopes (shared with ``nn.core.lift``) ----

def _call(fn, scopes, args, has_aux):
    out = fn(scopes, *args)
    return out if has_aux else (out, ())


def _bwd_wrapper(treedef, bwd, ct):
    vars_ct, *args_ct = bwd(ct)
    return (treedef.unflatten(vars_ct), *args_ct)


def _core_vjp(fn, has_aux, vjp_variables, variables, rngs):
    def inner(p, variable_groups, rng_groups, *args):
        vjp_vars, other = variable_groups

        def wrapper(vjp_vars, *args):
            scopes = p.scope_fn((vjp_vars, other), rng_groups)
            y, aux = _call(fn, scopes, args, has_aux)
            return y, (aux, p.repack(scopes))
        y, bwd, (aux, out_vars) = _vjp(wrapper, vjp_vars, *args, has_aux=True)
        vjp_fn = Partial(functools.partial(_bwd_wrapper, p.treedef), bwd)  # a pytree
        return ((y, vjp_fn, aux) if has_aux else (y, vjp_fn)), out_vars
    return _pack(inner, (vjp_variables, variables), (variables,), (rngs,), "vjp")


def _core_value_and_grad(fn, has_aux, variables, rngs):
    def inner(p, variable_groups, rng_groups, *args):
        def wrapper(*args):
            scopes = p.scope_fn(variable_groups, rng_groups)
            y, aux = _call(fn, scopes, args, has_aux)
            return y, (aux, p.repack(scopes))
        y, bwd, (aux, out_vars) = _vjp(wrapper, *args, has_aux=True)
        grads = bwd(jnp.ones_like(y))
        return ((y, aux, grads) if has_aux else (y, grads)), out_vars
    return _pack(inner, (variables,), (variables,), (rngs,), "value_and_grad")


def _core_jvp(fn, tangents, variable_tangents, variables, rngs):
    """``variable_tangents``: shaped as the scope tree the result is called on (one
    ``{collection: tangents}`` per scope; a single dict for a single scope)."""
    def wrapper(scope_tree, *primals):
        per_scope = tree_structure(scope_tree).flatten_up_to(variable_tangents)
        var_t = tuple({k: v for k, v in vt.items() if v} for vt in per_scope)

        def inner(p, variable_groups, rng_groups, *args):
            jvp_vars, other = variable_groups

            def f(vars_primals, args):
                scopes = p.scope_fn((vars_primals, other), rng_groups)
                return fn(scopes, *args), p.repack(scopes)
            (y, out_vars), (y_t, _) = _jvp(f, (jvp_vars, args), (var_t, tuple(tangents)))
            return (y, y_t), out_vars
        return _pack(inner, (tuple(var_t[0]), variables), (variables,), (rngs,), "jvp")(
            scope_tree, *primals)
    return wrapper


def _core_custom_vjp(primal_fn, forward_fn, backward_fn, grad_vars, nondiff_argnums):
    """``primal_fn``/``forward_fn``: ``(scopes, *args)`` -> ``y`` / ``(y, residuals)``;
    ``backward_fn(*nondiff_args, residuals, y_ct) -> (variables_ct, *args_ct)`` with
    ``variables_ct`` shaped as the scope tree."""

    def inner(p, variable_groups, rng_groups, *args):
        grad_variables, other = variable_groups

        def primal(grad_variables, *args):
            scopes = p.scope_fn((grad_variables, other), rng_groups)
            return primal_fn(scopes, *args), p.repack(scopes)

        def fwd(grad_variables, *args):
            scopes = p.scope_fn((grad_variables, other), rng_groups)
            y, res = forward_fn(scopes, *args)
            return (y, p.repack(scopes)), res

        def bwd(*args):
            res, (y_t, _) = args[-2:]
            var_t, *inputs_t = backward_fn(*args[:-2], res, y_t)
            return (tuple(p.treedef.flatten_up_to(var_t)), *inputs_t)
        wrapped = _custom_vjp(primal, nondiff_argnums=nondiff_argnums)
        wrapped.defvjp(fwd, bwd)
        return wrapped(grad_variables, *args)
    return _pack(inner, (grad_vars, True), (grad_vars, True), (True,), "custom_vjp")


# ---- differentiation of a module method ----

def _direct(core_transform, fn, mdl, *args, multi_scope=True, name="transform"):
    """Runs the lifted ``fn(mdl, *args)`` now (Flax's ``lift_direct_transform``)."""
    if isinstance(fn, type) and issubclass(fn, Module):
        raise ValueError(f"The {name} transform can only be applied on a Module method. "
                         f"That is function that takes a Module instance as its first "
                         f"arg.")
    if not callable(fn):
        raise ValueError("transform target must be callable")
    if inspect.ismethod(fn) and isinstance(fn.__self__, Module):
        fn = fn.__func__
    if not isinstance(mdl, Module):
        raise TypeError(f"nn.{name} expects a Module as its second argument, got "
                        f"{type(mdl).__name__}.")
    return _lift_method(core_transform, _wrap_method(fn), None, False,
                        multi_scope)(mdl, *args)


def vjp(fn, mdl, *primals, has_aux=False, reduce_axes=(), vjp_variables="params",
        variables=True, rngs=True, multi_scope=False):
    """``xform.vjp`` of ``fn(mdl, *primals)`` with respect to the primals and the
    ``vjp_variables`` of ``mdl``.

    Returns:
      ``(out, vjp_fn)`` (``(out, vjp_fn, aux)`` with ``has_aux``); ``vjp_fn(ct)`` gives
      ``(variables_ct, *primals_ct)``, ``variables_ct`` as ``{'params': {...}}``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     y, bwd = nn.vjp(lambda m, x: m(x), nn.Dense(1, use_bias=False), x)
    ...     return bwd(jnp.ones_like(y))
    >>> x = jnp.ones((1, 2))
    >>> v = Foo().init(xform.random.PRNGKey(0), x)
    >>> g_vars, g_x = Foo().apply(v, x)
    >>> g_vars['params']['kernel'].tolist()
    [[1.0], [1.0]]
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    core = lambda f: _core_vjp(f, has_aux, vjp_variables, variables, rngs)
    return _direct(core, fn, mdl, *primals, multi_scope=multi_scope, name="vjp")


def value_and_grad(fn, mdl, *primals, has_aux=False, reduce_axes=(), variables=True,
                   rngs=True):
    """Value and gradient of the scalar ``fn(mdl, *primals)`` with respect to the
    primals (not the variables; use ``nn.vjp`` for those).

    Returns:
      ``(out, grads)`` or ``((out, aux), grads)``, ``grads`` a tuple over primals.

    Raises:
      ValueError: when ``fn`` does not return a scalar.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     f = lambda m, x: jnp.sum(m(x) ** 2)
    ...     return nn.value_and_grad(f, nn.Dense(1), x)
    >>> x = jnp.ones((1, 2))
    >>> (val, (g,)), _ = Foo().init_with_output(xform.random.PRNGKey(0), x)
    >>> g.shape
    (1, 2)
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to value_and_grad is deprecated")
    core = lambda f: _core_value_and_grad(f, has_aux, variables, rngs)
    out = _direct(core, fn, mdl, *primals, name="value_and_grad")
    y = out[0]
    if jnp.shape(y) != ():
        raise ValueError(f"grad can only work on functions with scalar-valued outputs. "
                         f"out shape={jnp.shape(y)}")
    return ((y, out[1]), out[2]) if has_aux else out


def grad(fn, mdl, *primals, has_aux=False, reduce_axes=(), variables=True, rngs=True):
    """Gradient of the scalar ``fn(mdl, *primals)`` with respect to the primals:
    ``grads`` (``(grads, aux)`` with ``has_aux``); see :func:`value_and_grad`.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     return nn.grad(lambda m, x: jnp.sum(m(x)), nn.Dense(3), x)
    >>> g, = Foo().init_with_output(xform.random.PRNGKey(0), jnp.ones((1, 2)))[0]
    >>> g.shape
    (1, 2)
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to grad is deprecated")
    (_, aux), grads = value_and_grad(fn, mdl, *primals, has_aux=True, variables=variables,
                                     rngs=rngs) if has_aux else (
        (None, None), value_and_grad(fn, mdl, *primals, variables=variables,
                                     rngs=rngs)[1])
    return (grads, aux) if has_aux else grads


def jvp(fn, mdl, primals, tangents, variable_tangents, variables=True, rngs=True):
    """``xform.jvp`` of ``fn(mdl, *primals)`` with tangents for the primals and for
    the variables named in ``variable_tangents`` (e.g. ``{'params': {...}}``).

    Returns:
      ``(out, out_tangent)``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     d = nn.Dense(1, use_bias=False, kernel_init=nn.initializers.ones)
    ...     if self.is_initializing():
    ...       return d(x)
    ...     return nn.jvp(lambda m, x: m(x), d, (x,), (jnp.zeros_like(x),),
    ...                   {'params': {'kernel': jnp.ones((2, 1))}})
    >>> x = jnp.ones((1, 2))
    >>> v = Foo().init(xform.random.PRNGKey(0), x)
    >>> [t.tolist() for t in Foo().apply(v, x)]
    [[[2.0]], [[2.0]]]
    """
    core = lambda f: _core_jvp(f, tangents, variable_tangents, variables, rngs)
    return _direct(core, fn, mdl, *primals, multi_scope=False, name="jvp")


def custom_vjp(fn, forward_fn, backward_fn, grad_vars="params", nondiff_argnums=()):
    """A module function ``fn(mdl, *args)`` with a custom VJP (``xform.custom_vjp``
    lifted over ``mdl``'s ``grad_vars``).

    Args:
      fn: ``(mdl, *args) -> out``, run when no VJP is taken.
      forward_fn: ``(mdl, *args) -> (out, residuals)``.
      backward_fn: ``(*nondiff_args, residuals, out_ct) -> (variables_ct, *args_ct)``,
        ``variables_ct`` as ``{'params': {...}}`` (the scope is not available here).
      grad_vars: the collections differentiated.
      nondiff_argnums: as ``xform.custom_vjp`` (0 is the variables).

    Returns:
      The function ``(mdl, *args) -> out``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     def fwd(m, x):
    ...       y, bwd = nn.vjp(lambda m, x: m(x), m, x)
    ...       return y, bwd
    ...     def bwd(vjp_fn, y_t):   # zero the parameter gradients
    ...       params_t, *x_t = vjp_fn(y_t)
    ...       return (xform.tree.map(jnp.zeros_like, params_t), *x_t)
    ...     f = nn.custom_vjp(lambda m, x: m(x), fwd, bwd)
    ...     return f(nn.Dense(1), x)
    >>> x = jnp.ones((1, 2))
    >>> v = Foo().init(xform.random.PRNGKey(0), x)
    >>> g = xform.grad(lambda v: Foo().apply(v, x).sum())(v)
    >>> g['params']['Dense_0']['kernel'].tolist()
    [[0.0], [0.0]]
    """
    def shared(mdl, *args, needs_residual):
        return forward_fn(mdl, *args) if needs_residual else fn(mdl, *args)

    core = lambda f: _core_custom_vjp(
        functools.partial(f, needs_residual=False),
        functools.partial(f, needs_residual=True), backward_fn, grad_vars,
        nondiff_argnums)

    def lifted(mdl, *args):
        return _direct(core, shared, mdl, *args, multi_scope=False, name="custom_vjp")
    return lifted
