"""Lifted transformations: ``nn.vmap``, ``nn.scan``, ``nn.remat`` over xform's own
``vmap``/``lax.scan``/``checkpoint`` (``nn.jit``: ``_lifted_jit``).

Lifting (as Flax's ``core/lift.py``): the scopes a transformed call touches (the
module's own and those of submodule fields, e.g. an RNN's cell) are *packed* into
pytrees: variables grouped by collection filters, rng streams (``LazyRng``: base key
leaf + static path suffix) grouped by rng filters. The xform transformation maps a
pure function of those pytrees that rebuilds fresh inner scopes (same paths, SHARED
rng counters), runs the module method, and returns the output plus the mutable
variables, which are then written back into the outer scopes. Rng semantics follow
Flax exactly: ``split_rngs`` splits the *base* key (suffix kept) into one key per
mapped index / scan step, and ``nn.jit`` first forks each stream with ``make_rng``.

``nn.scan``'s broadcast variables (e.g. params shared by all steps, created at init)
are computed by a first call of the body outside the loop (Flax traces it with
partial evaluation), then fed to every step, and so are broadcast outputs
(``out_axes=nn.broadcast``). NB: Flax rejects a broadcast variable or output that
depends on the carry; here it silently takes the first step's value.
"""
import dataclasses
import functools
import warnings

import numpy as np

import xform.numpy as jnp
from xform import lax, random
from xform.core.sharding import PartitionSpec
from xform.core.tree_util import (register_pytree_node, tree_flatten, tree_leaves,
                                  tree_map)
from xform.lax.sharding_constraint import reshard
from xform.nn import _meta as meta
from xform.nn._module import Module, Variable, _State, _wrap_method
from xform.nn._scope import (LazyRng, Scope, _copy_plain, broadcast,
                             group_collections, in_filter, intersect_filters,
                             union_filters)
from xform.transforms.checkpoint import checkpoint as _checkpoint
from xform.transforms.runtime import typeof
from xform.transforms.vmap import vmap as _vmap
from xform.nn import errors

__all__ = ["broadcast", "remat", "checkpoint", "scan", "vmap"]

register_pytree_node(LazyRng, lambda r: ((r.rng,), r.suffix),
                     lambda suffix, kids: LazyRng(kids[0], suffix))


# ---- packing scopes into pytrees (Flax's lift.pack) ----

class _Pack:
    """The scopes of one lifted call (a pytree of them: a list for Modules), their
    variables and rngs as pytrees. ``name`` (e.g. ``'vmap'``) marks the inner scopes'
    ``debug_path`` as Flax's does: ``/vmap(Dense_0)``."""

    def __init__(self, scope_tree, in_filters, out_filters, rng_filters, name=None):
        leaves, self.treedef = tree_flatten(scope_tree)
        self.scopes, self.paths = _dedup(leaves)
        self.out_filters, self.name = out_filters, name
        vs = [group_collections(s.variables(), in_filters) for s in self.scopes]
        self.variable_groups = tuple(zip(*vs)) or ((),) * len(in_filters)
        rs = [group_collections(s.rngs, rng_filters) for s in self.scopes]
        self.rng_groups = tuple(zip(*rs)) or ((),) * len(rng_filters)

    def _debug_path(self, s):
        if not self.name:
            return s.debug_path
        if s.debug_path:
            return s.debug_path[:-1] + (f"{self.name}({s.debug_path[-1]})",)
        return (f"{self.name}()",)

    def scope_fn(self, variable_groups, rng_groups, mutable_filter=True):
        mutable = False
        for f in self.out_filters:
            mutable = union_filters(mutable, f)
        mutable = intersect_filters(mutable, mutable_filter)
        inner = {}
        for i, s in enumerate(self.scopes):
            variables, rngs = {}, {}
            for g in variable_groups:
                variables.update(_copy_plain(g[i]))
            for g in rng_groups:
                rngs.update(g[i])
            new = Scope(variables, None, s.name, intersect_filters(s.mutable, mutable),
                        None, s.path, self._debug_path(s), s.flags)
            new.rngs = dict(rngs)
            new.rng_counters = s.rng_counters
            inner[id(s)] = new
        out = []
        for root, path in self.paths:
            scope = inner[id(root)]
            for name in path:
                scope = scope.push(name, reuse=True)
            out.append(scope)
        return self.treedef.unflatten(out)

    def repack(self, inner_tree):
        inner_scopes = self.treedef.flatten_up_to(inner_tree)
        minimal = [s for s, (_, p) in zip(inner_scopes, self.paths) if not p]
        groups = []
        for s in minimal:
            s.invalidate()
            mutable = {k: v for k, v in s._variables.items()
                       if in_filter(s.mutable, k)}
            g = group_collections(mutable, tuple(self.out_filters) + (True,))
            if g[-1]:
                raise ValueError(f"unmapped output variables: {tuple(g[-1])}")
            groups.append(g[:-1])
        return tuple(zip(*groups)) or ((),) * len(self.out_filters)

    def publish(self, out_groups):
        for g in out_groups:
            for s, cols in zip(self.scopes, g):
                for col, collection in cols.items():
                    if s.is_mutable_collection(col):
                        for name, value in collection.items():
                            s.put_variable(col, name, value)


def _dedup(scopes):
    """The minimal scopes (no ancestor in the list) and, for each scope, its minimal
    ancestor and the path down from it."""
    ids = {id(s) for s in scopes}
    minimal, paths = [], []
    for leaf in scopes:
        best, best_path, path, s = leaf, (), [leaf.name], leaf.parent
        while s is not None:
            if id(s) in ids:
                best, best_path = s, tuple(reversed(path))
            path.append(s.name)
            s = s.parent
        if best is leaf and all(m is not leaf for m in minimal):
            minimal.append(leaf)
        paths.append((best, best_path))
    return minimal, paths


def _pack(core, in_filters, out_filters, rng_filters, name=None, enable_kwargs=False):
    """``core(pack, variable_groups, rng_groups, *args, **kwargs) -> (y, out_groups)``
    as a function of ``(scope_tree, *args, **kwargs)`` that writes ``out_groups`` back.

    Without ``enable_kwargs`` (Flax's vmap, scan, cond, while_loop, vjp, ...) keyword
    arguments are dropped with Flax's RuntimeWarning, as Flax does."""
    def wrapper(scope_tree, *args, **kwargs):
        if kwargs and not enable_kwargs:
            warnings.warn(f"kwargs are not supported in {name}, so "
                          f"\"{', '.join(kwargs)}\" is(are) ignored", RuntimeWarning)
            kwargs = {}
        p = _Pack(scope_tree, in_filters, out_filters, rng_filters, name)
        y, out_groups = core(p, p.variable_groups, p.rng_groups, *args, **kwargs)
        p.publish(out_groups)
        return y
    return wrapper


def _split_rng_groups(rng_groups, splits, n, spec=None):
    """Splits the streams marked in ``splits`` into ``n`` keys each; ``spec`` (a
    PartitionSpec) reshards the split keys (vmap's ``spmd_axis_name``, as Flax)."""
    def split(k):
        keys = random.split(k, n)
        return keys if spec is None else reshard(keys, spec)
    return tuple(tree_map(split, g) if s else g for g, s in zip(rng_groups, splits))


def _mapped_leaves(axes, tree):
    """``(leaf, axis)`` for each leaf of ``tree`` mapped by the prefix tree ``axes``."""
    if axes is None or axes is broadcast:
        return
    if isinstance(axes, int):
        yield from ((x, axes) for x in tree_leaves(tree))
    elif isinstance(axes, (tuple, list)):
        for a, t in zip(axes, tree):
            yield from _mapped_leaves(a, t)
    elif isinstance(axes, dict):
        for k, a in axes.items():
            yield from _mapped_leaves(a, tree[k])


def _axis_sizes(axes, tree, out):
    out.update(np.shape(x)[a] for x, a in _mapped_leaves(axes, tree))


def _spmd_rng_spec(spmd_axis_name, in_axes, args):
    """``P(spmd_axis_name)`` when an argument's mapped axis is sharded over it in
    explicit sharding mode (Flax then reshards the split keys the same way)."""
    if spmd_axis_name is None:
        return None
    for x, a in _mapped_leaves(in_axes, args):
        spec = typeof(x).sharding.spec
        if len(spec) > a and spec[a] == spmd_axis_name:
            return PartitionSpec(spmd_axis_name)
    return None


@dataclasses.dataclass(frozen=True)
class In:
    """``variable_axes`` value: the collection is mapped on the way in only."""
    axis: object


@dataclasses.dataclass(frozen=True)
class Out:
    """``variable_axes`` value: the collection is mapped on the way out only."""
    axis: object


def _split_in_out(variable_axes):
    """``{filter: axis | In(axis) | Out(axis)}`` -> ``(in_axes, out_axes)`` dicts."""
    unpack = lambda v: v.axis if isinstance(v, (In, Out)) else v
    ins = {k: unpack(v) for k, v in variable_axes.items() if not isinstance(v, Out)}
    outs = {k: unpack(v) for k, v in variable_axes.items() if not isinstance(v, In)}
    return ins, outs


# ---- core transforms on packed scopes ----

def _core_vmap(fn, variable_axes, split_rngs, in_axes, out_axes, axis_size, axis_name,
               metadata_params, spmd_axis_name=None):
    v_in, v_out = _split_in_out(dict(variable_axes))
    v_groups, v_in_axes = tuple(v_in), tuple(v_in.values())
    v_out_axes = tuple(v_out.values())
    r_groups, r_splits = tuple(split_rngs), tuple(split_rngs.values())
    r_axes = tuple(0 if s else None for s in r_splits)

    def core(p, variable_groups, rng_groups, *args):
        variable_groups = tuple(g if ax is None else meta.remove_axis(g, ax, metadata_params)
                                for g, ax in zip(variable_groups, v_in_axes))
        sizes = set()
        _axis_sizes((v_in_axes, in_axes), (variable_groups, args), sizes)
        n = _mapped_size(sizes, axis_size, "batch axis sizes", "axis_size")
        rng_groups = _split_rng_groups(rng_groups, r_splits, n,
                                       _spmd_rng_spec(spmd_axis_name, in_axes, args))

        def mapped(variable_groups, rng_groups, args):
            scopes = p.scope_fn(variable_groups, rng_groups)
            return fn(scopes, *args), p.repack(scopes)
        y, out = _vmap(mapped, in_axes=(v_in_axes, r_axes, in_axes),
                       out_axes=(out_axes, v_out_axes), axis_name=axis_name,
                       axis_size=axis_size, spmd_axis_name=spmd_axis_name)(
                           variable_groups, rng_groups, args)
        return y, tuple(g if ax is None else meta.add_axis(g, ax, metadata_params)
                        for g, ax in zip(out, v_out_axes))
    return _pack(core, v_groups, tuple(v_out), r_groups, "vmap")


def _mapped_size(sizes, given, what, arg):
    """The one size of the mapped axes (``given`` when the user set it), as Flax's
    errors say it."""
    if len(sizes) > 1:
        raise ValueError(f"Inconsistent {what}: {sizes}")
    if given is not None:
        return given
    if not sizes:
        raise ValueError(f"{arg} should be specified manually.")
    return next(iter(sizes))


def _move_axes(axes, tree, to_front):
    """Moves each leaf's scan axis (``axes``: a prefix tree of ints) to/from the front."""
    if axes is broadcast:
        return tree
    if isinstance(axes, int):
        if axes == 0:
            return tree
        src, dst = (axes, 0) if to_front else (0, axes)
        return tree_map(lambda x: jnp.moveaxis(x, src, dst), tree)
    if isinstance(axes, (tuple, list)):
        return type(tree)(_move_axes(a, t, to_front) for a, t in zip(axes, tree))
    if isinstance(axes, dict):
        return {k: _move_axes(axes[k], tree[k], to_front) for k in tree}
    raise TypeError(f"scan axes must be ints, nn.broadcast or a prefix tree of them, "
                    f"got {axes!r}")


_DROP = object()


def _broadcast_parts(axes, tree, first=_DROP):
    """``tree`` with its ``nn.broadcast`` parts (``axes``: a prefix tree) replaced by
    ``first``'s (by ``()`` when no ``first`` is given)."""
    if axes is broadcast:
        return () if first is _DROP else first
    if isinstance(axes, (tuple, list)):
        firsts = [_DROP] * len(axes) if first is _DROP else first
        return type(tree)(_broadcast_parts(a, t, f) for a, t, f in zip(axes, tree, firsts))
    if isinstance(axes, dict):
        return {k: _broadcast_parts(axes[k], tree[k], _DROP if first is _DROP else first[k])
                for k in tree}
    return tree


def _core_scan(fn, variable_axes, variable_broadcast, variable_carry, split_rngs,
               in_axes, out_axes, length, reverse, unroll, data_transform,
               metadata_params):
    v_in, v_out = _split_in_out(dict(variable_axes))
    v_groups, v_in_axes, v_out_axes = tuple(v_in), tuple(v_in.values()), \
        tuple(v_out.values())
    r_groups, r_splits = tuple(split_rngs), tuple(split_rngs.values())
    arg_axes = in_axes

    def core(p, variable_groups, rng_groups, init, *args):
        axes = arg_axes if isinstance(arg_axes, (tuple, list)) else (arg_axes,) * len(args)
        sizes = set()
        _axis_sizes(tuple(axes), args, sizes)
        n = _mapped_size(sizes, length, "scan lengths", "length")
        rngs_split = _split_rng_groups(rng_groups, r_splits, n)
        bcast_vars, carry_vars = variable_groups[0], variable_groups[1]
        scan_vars = tuple(_move_axes(ax, meta.remove_axis(g, ax, metadata_params), True)
                          for g, ax in zip(variable_groups[2:], v_in_axes))
        xs = _move_axes(tuple(axes), _broadcast_parts(tuple(axes), args), True)
        step_rngs = tuple(g if s else () for g, s in zip(rngs_split, r_splits))

        def body(bcast_in, carry, scan_vars_t, rngs_t, xs_t):
            cvars, c = carry
            rgs = tuple(rt if s else g for rt, g, s in zip(rngs_t, rng_groups, r_splits))
            a = _broadcast_parts(tuple(axes), xs_t, args)   # (nested) nn.broadcast: as given
            groups = (bcast_in, cvars) + tuple(scan_vars_t)
            if data_transform is not None:
                groups, rgs = data_transform(groups, rgs)
            scopes = p.scope_fn(groups, rgs)
            c, y = fn(scopes, c, *a)
            out = p.repack(scopes)
            bout = out[0]
            for gi, go in zip(bcast_in, bout):
                for col in gi:
                    go.setdefault(col, gi[col])
            return bout, (out[1], c), (y, out[2:])

        if n:
            pick = (lambda x: x[-1]) if reverse else (lambda x: x[0])
            first_rngs = tree_map(pick, step_rngs)
        else:   # no step to run (Flax traces one abstractly): zeros of a step's shapes
            pick = lambda x: jnp.zeros(np.shape(x)[1:], jnp.result_type(x))
            first_rngs = tuple(g if s else () for g, s in zip(rng_groups, r_splits))
        bcast_out, _, (y_first, _) = body(
            bcast_vars, (carry_vars, init), tree_map(pick, scan_vars), first_rngs,
            tree_map(pick, xs))

        def loop(carry, per):
            _, carry, (y, scan_out) = body(bcast_out, carry, *per)
            return carry, (_broadcast_parts(out_axes, y), scan_out)
        (carry_vars, c), (ys, scan_out) = lax.scan(
            loop, (carry_vars, init), (scan_vars, step_rngs, xs), length=n,
            reverse=reverse, unroll=unroll)
        ys = _broadcast_parts(out_axes, _move_axes(out_axes, ys, False), y_first)
        scan_out = tuple(meta.add_axis(_move_axes(ax, g, False), ax, metadata_params)
                         for g, ax in zip(scan_out, v_out_axes))
        return (c, ys), (bcast_out, carry_vars) + scan_out
    filters = (variable_broadcast, variable_carry)
    return _pack(core, filters + v_groups, filters + tuple(v_out), r_groups, "scan")


def _core_remat(fn, variables, rngs, prevent_cse, static_argnums, policy):
    def core(p, variable_groups, rng_groups, *args, **kwargs):
        def rematted(variable_groups, rng_groups, *args, **kwargs):
            scopes = p.scope_fn(variable_groups, rng_groups)
            return fn(scopes, *args, **kwargs), p.repack(scopes)
        return _checkpoint(rematted, prevent_cse=prevent_cse, policy=policy,
                           static_argnums=tuple(i + 2 for i in static_argnums))(
            variable_groups, rng_groups, *args, **kwargs)
    return _pack(core, (variables,), (variables,), (rngs,), "remat", enable_kwargs=True)


# ---- module-level lifting (Flax's linen/transforms.py) ----

class _InstancePlaceholder:
    """A bound Module found in a lifted call's arguments (also inside a pytree such as a
    ``struct.PyTreeNode``), as Flax's: no leaves, so transformations pass it through in
    the treedef; inside, ``_set_module_scopes`` turns it back into the module bound to
    its lifted scope. Equal by the module's identity (a hashable treedef for jit)."""
    __slots__ = ("module", "attrs")

    def __init__(self, module, attrs):
        self.module, self.attrs = module, attrs

    def __eq__(self, other):
        return type(other) is _InstancePlaceholder and other.module._id == self.module._id

    def __hash__(self):
        return hash(self.module._id)


register_pytree_node(_InstancePlaceholder, lambda p: ((), p), lambda p, _: p)


def _is_module(x):
    return isinstance(x, Module)


def _attrs(m):
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)
            if f.name != "parent" and f.init}


def _module_scopes(module, args=(), kwargs=None):
    """Flax's ``get_module_scopes``: the scopes of the bound Modules in ``args`` and
    ``kwargs`` (replaced by placeholders), then of ``module``'s bound submodule fields
    (depth first, inside any pytree), then its own. Returns ``(scopes, args, kwargs)``;
    a module met twice contributes one scope."""
    scopes, seen = [], {}

    def arg(x):
        if not (isinstance(x, Module) and isinstance(x.scope, Scope)):
            return x
        if x._id not in seen:
            x._try_setup(shallow=True)
            scopes.append(x.scope)
            seen[x._id] = _InstancePlaceholder(x, tree_map(arg, _attrs(x), is_leaf=_is_module))
        return seen[x._id]
    args, kwargs = tree_map(arg, (tuple(args), dict(kwargs or {})), is_leaf=_is_module)

    def visit(m):
        if m._id in seen:
            return
        seen[m._id] = None
        m._try_setup(shallow=True)
        for leaf in tree_leaves(_attrs(m), is_leaf=_is_module):
            if isinstance(leaf, Module) and isinstance(leaf.scope, Scope):
                visit(leaf)
        scopes.append(m.scope)
    visit(module)
    return scopes, args, kwargs


def _set_module_scopes(module, args, kwargs, scopes):
    """Flax's ``set_module_scopes``: clones the argument placeholders' modules, then
    ``module`` and its bound submodule fields, onto ``scopes`` in ``_module_scopes``'
    order. Returns ``(module, args, kwargs)``."""
    idx, done = 0, {}

    def arg(x):
        nonlocal idx
        if type(x) is not _InstancePlaceholder:
            return x
        m = x.module
        if m._id not in done:
            scope = scopes[idx]
            idx += 1
            attrs = tree_map(arg, x.attrs, is_leaf=lambda v: type(v) is _InstancePlaceholder)
            done[m._id] = m.clone(parent=scope, **attrs)
        return done[m._id]
    args, kwargs = tree_map(arg, (tuple(args), dict(kwargs)),
                            is_leaf=lambda v: type(v) is _InstancePlaceholder)

    def bound(x):
        return rebuild(x) if isinstance(x, Module) and isinstance(x.scope, Scope) else x

    def rebuild(m):
        nonlocal idx
        if m._id not in done:
            attrs = tree_map(bound, _attrs(m), is_leaf=_is_module)
            done[m._id] = None   # (a module is never its own field)
            done[m._id] = m.clone(parent=scopes[idx], **attrs)
            idx += 1
        return done[m._id]
    new = rebuild(module)
    if idx != len(scopes):
        raise AssertionError(f"internal error: {len(scopes)} lifted scopes, {idx} modules")
    return new, args, kwargs


def _export(state):
    return _State(in_compact_method=state.in_compact_method, in_setup=state.in_setup,
                  setup_called=False, transformed=state.setup_called or state.transformed,
                  is_initialized=state.is_initialized,
                  autoname_cursor=dict(state.autoname_cursor))


def _reimport(state, other):
    state.in_compact_method, state.in_setup = other.in_compact_method, other.in_setup
    state.is_initialized = other.is_initialized
    state.autoname_cursor = dict(other.autoname_cursor)


class _fork_rngs:
    """``nn.jit``: each stream of the module is replaced by one ``make_rng`` of it."""

    def __init__(self, module, enabled):
        self.module, self.enabled = module, enabled

    def __enter__(self):
        if self.enabled and self.module.scope is not None:
            scope = self.module.scope
            self.saved = scope.rngs
            scope.rngs = {k: LazyRng(scope.make_rng(k), ()) for k in list(scope.rngs)}

    def __exit__(self, *exc):
        if self.enabled and self.module.scope is not None:
            self.module.scope.rngs = self.saved


def _lift(core_transform, target, methods=None, fork=False):
    """Applies ``core_transform(fn_of_scopes) -> fn_of_scopes`` to a Module class
    (its ``__call__`` or ``methods``) or to a function whose first argument is a
    module."""
    is_class = isinstance(target, type) and issubclass(target, Module)
    if not is_class:
        if not callable(target) or isinstance(target, Module):
            raise errors.TransformTargetError(target)
        return _lift_method(core_transform, _wrap_method(target), None, fork)
    names = ("__call__",) if methods is None else tuple(methods)
    fns = {n: _lift_method(core_transform, getattr(target, n), target, fork)
           for n in names}
    prefix = getattr(core_transform, "lift_name", "Lifted")
    return type(prefix + target.__name__, (target,), fns)


def _lift_method(core_transform, fn, module_class, fork, multi_scope=True):
    @functools.wraps(fn)
    def wrapped(self, *args, **kwargs):
        if self.scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__)
        state = _export(self._state)

        @functools.wraps(fn)   # nn.jit caches its trace per wrapped method
        def core_fn(scopes, *args, **kwargs):
            base = self
            if module_class is not None:   # a fresh instance of the untransformed class
                base = module_class(parent=None, **_attrs(self))
            if multi_scope:
                cloned, args, kwargs = _set_module_scopes(base, args, kwargs, scopes)
            else:   # lifted over the module's own scope only (Flax's multi_scope=False)
                cloned = base.clone(parent=scopes)
            object.__setattr__(cloned, "_state", _export(state))
            res = fn(cloned, *args, **kwargs)
            if any(isinstance(x, (Module, Variable)) for x in tree_leaves(res)):
                raise errors.TransformedMethodReturnValueError(fn.__name__)
            _reimport(self._state, cloned._state)
            return res
        core_fn.module = self   # nn.jit's cache key: the module's fingerprint
        with _fork_rngs(self, fork):
            trafo = core_transform(core_fn)
            if multi_scope:
                scopes, args, kwargs = _module_scopes(self, args, kwargs)
            else:
                scopes = self.scope
            return trafo(scopes, *args, **kwargs)
    return wrapped


def _named(name, fn):
    fn.lift_name = name
    return fn


def vmap(target, variable_axes={}, split_rngs={}, in_axes=0, out_axes=0,  # noqa: B006
         axis_size=None, axis_name=None, spmd_axis_name=None, metadata_params={},
         methods=None):
    """Vectorizes a Module class or method (``jax.vmap`` lifted over variables/rngs).

    Args:
      target: a Module class or a function ``(module, *args)``.
      variable_axes: ``{collection_filter: axis or None}``; e.g. ``{'params': 0}``
        gives every mapped index its own params (stacked on axis 0).
      split_rngs: ``{stream_filter: bool}``: split the stream per mapped index.
      in_axes, out_axes, axis_size, axis_name, spmd_axis_name: as ``xform.vmap``
        (``spmd_axis_name`` splits the mapped axis of sharding constraints inside).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> Ens = nn.vmap(nn.Dense, variable_axes={'params': 0},
    ...               split_rngs={'params': True}, in_axes=None, axis_size=3)
    >>> v = Ens(2).init(xform.random.PRNGKey(0), jnp.ones((1, 4)))
    >>> v['params']['kernel'].shape
    (3, 4, 2)
    """
    def core(fn):
        return _core_vmap(fn, variable_axes, split_rngs, in_axes, out_axes, axis_size,
                          axis_name, metadata_params, spmd_axis_name)
    return _lift(_named("Vmap", core), target, methods)


def scan(target, variable_axes={}, variable_broadcast=False,  # noqa: B006
         variable_carry=False, split_rngs={}, in_axes=0, out_axes=0,  # noqa: B006
         length=None, reverse=False, unroll=1, data_transform=None,
         metadata_params={}, methods=None, _split_transpose=False,  # noqa: B006
         check_constancy_invariants=True):
    """Loops a Module class or method over a sequence (``lax.scan`` lifted).

    The scanned function is ``(module, carry, *xs) -> (carry, ys)``.

    Args:
      target: a Module class or a function ``(module, carry, *xs)``.
      variable_axes: collections stacked per step (``{'params': 0}``: one set of
        params per step, e.g. a stack of layers).
      variable_broadcast: collections shared by every step (e.g. ``'params'`` for an
        RNN cell).
      variable_carry: collections threaded through the steps.
      split_rngs: ``{stream_filter: bool}``: a different key per step.
      in_axes, out_axes: scanned axis of xs / ys (``nn.broadcast``: not scanned; a
        broadcast output is the first step's, so it must not depend on the loop).
      data_transform: ``(variable_groups, rng_groups) -> (variable_groups,
        rng_groups)`` applied to each step's raw groups before the scopes are built.
      length, reverse, unroll: as ``lax.scan``.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Cell(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, c, x):
    ...     c = nn.tanh(nn.Dense(3)(x) + c)
    ...     return c, c
    >>> RNN = nn.scan(Cell, variable_broadcast='params', split_rngs={'params': False})
    >>> v = RNN().init(xform.random.PRNGKey(0), jnp.zeros(3), jnp.ones((5, 2)))
    >>> v['params']['Dense_0']['kernel'].shape
    (2, 3)
    """
    del _split_transpose, check_constancy_invariants

    def core(fn):
        return _core_scan(fn, variable_axes, variable_broadcast, variable_carry,
                          split_rngs, in_axes, out_axes, length, reverse, unroll,
                          data_transform, metadata_params)
    return _lift(_named("Scan", core), target, methods)


def checkpoint(target, variables=True, rngs=True, concrete=False, prevent_cse=True,
               static_argnums=(), policy=None, methods=None):
    """Rematerializes a Module class or method in the backward pass (``jax.checkpoint``
    lifted). ``static_argnums`` count ``self`` as argument 0, as in Flax.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.remat(nn.Dense)(2).init(xform.random.PRNGKey(0), jnp.ones((1, 3)))
    >>> v['params']['kernel'].shape
    (3, 2)
    """
    if concrete:
        raise NotImplementedError("concrete=True is deprecated; use static_argnums.")
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    nums = tuple(i - 1 for i in nums)

    def core(fn):
        return _core_remat(fn, variables, rngs, prevent_cse, nums, policy)
    return _lift(_named("Checkpoint", core), target, methods)


remat = checkpoint

