"""``nn.remat_scan`` (nested ``scan`` of ``remat``, Flax's ``lift.remat_scan``),
``fold_rngs``, ``add_metadata_axis``, ``compact_name_scope`` and the profiling-name
switches ``named_call``, ``enable_named_call``, ``disable_named_call``,
``override_named_call``."""
import contextlib
import functools

from xform.nn import _meta as meta
from xform.nn._lifted_ad import map_variables
from xform.nn._module import Module, compact
from xform.nn._scope import LazyRng
from xform.nn._transforms import _core_remat, _core_scan, _lift, _named, _pack
from xform.core.tree_util import tree_map
from xform.transforms.runtime import named_call as _named_call

__all__ = ["add_metadata_axis", "compact_name_scope", "disable_named_call",
           "enable_named_call", "fold_rngs", "named_call", "override_named_call",
           "remat_scan"]

_use_named_call = [False]


def enable_named_call():
    """Labels the ops of ``nn.named_call`` methods with the module's name (profiling)."""
    _use_named_call[0] = True


def disable_named_call():
    """Undoes ``enable_named_call``."""
    _use_named_call[0] = False


@contextlib.contextmanager
def override_named_call(enable=True):
    """Within the context, named-call labelling is ``enable``.

    >>> import xform.nn as nn
    >>> with nn.override_named_call(True):
    ...   pass
    """
    prev = _use_named_call[0]
    _use_named_call[0] = enable
    try:
        yield
    finally:
        _use_named_call[0] = prev


def named_call(class_fn, force=True):
    """A Module method whose ops carry the name ``<module name>[.<method>]`` (through
    ``xform.named_call``); values are unchanged.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     return nn.named_call(lambda self, x: nn.Dense(2)(x))(self, x)
    >>> Foo().init(xform.random.PRNGKey(0), jnp.ones((1, 3)))['params']['Dense_0'][
    ...     'kernel'].shape
    (3, 2)
    """
    @functools.wraps(class_fn)
    def wrapped(self, *args, **kwargs):
        if (not force and not _use_named_call[0]) or self._state.in_setup:
            return class_fn(self, *args, **kwargs)
        name = getattr(class_fn, "__name__", "fn")
        full = (self.name or type(self).__name__) + ("" if name == "__call__"
                                                      else f".{name}")
        return _named_call(class_fn, name=full)(self, *args, **kwargs)
    return wrapped


def _core_remat_scan(body_fn, lengths, policy, variable_broadcast, variable_carry,
                     variable_axes, split_rngs):
    def scan_fn(fn, n):
        return _core_scan(fn, variable_axes, variable_broadcast, variable_carry,
                          split_rngs, 0, 0, n, False, 1, None, {})
    if len(lengths) == 1:
        def step(scopes, c):
            return body_fn(scopes, c), ()
    else:
        def inner(scopes, c):
            return _core_remat_scan(body_fn, lengths[1:], policy, variable_broadcast,
                                    variable_carry, variable_axes, split_rngs)(scopes, c), ()
        step = _core_remat(inner, True, True, False, (), policy)
    return lambda scopes, c: scan_fn(step, lengths[0])(scopes, c)[0]


def remat_scan(target, lengths=(), policy=None, variable_broadcast=False,
               variable_carry=False, variable_axes={True: 0},  # noqa: B006
               split_rngs={True: True}):  # noqa: B006
    """Repeats a Module ``prod(lengths)`` times as nested ``nn.scan`` loops, each
    level rematerialized (memory ~ ``n ** (1 / len(lengths))``); the module maps
    ``carry -> carry`` and its variables get one leading axis per level.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> Stack = nn.remat_scan(nn.Dense, lengths=(2, 3))
    >>> v = Stack(4).init(xform.random.PRNGKey(0), jnp.ones((1, 4)))
    >>> v['params']['kernel'].shape
    (2, 3, 4, 4)
    """
    def core(fn):
        return _core_remat_scan(fn, tuple(lengths), policy, variable_broadcast,
                                variable_carry, variable_axes, split_rngs)
    return _lift(_named("Remat_scan", core), target)


def fold_rngs(target, variables=True, rngs=True):
    """Runs a Module class or method on rng streams forked with one ``make_rng`` each
    (their path suffix folded in), as ``nn.jit`` does, without compiling.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> v = nn.fold_rngs(nn.Dense)(2).init(xform.random.PRNGKey(0), jnp.ones((1, 3)))
    >>> v['params']['kernel'].shape
    (3, 2)
    """
    core = lambda fn: _core_fold_rngs(fn, variables, rngs)
    return _lift(_named("Fold_rngs", core), target, fork=True)


def _core_fold_rngs(fn, variables, rngs):
    """``fn`` on rng streams whose path suffix is dropped (the forked keys carry it)."""
    def inner(p, variable_groups, rng_groups, *args, **kwargs):
        rng_groups = tree_map(LazyRng.clear_suffix, rng_groups,
                              is_leaf=lambda r: isinstance(r, LazyRng))
        scopes = p.scope_fn(variable_groups, rng_groups)
        return fn(scopes, *args, **kwargs), p.repack(scopes)
    return _pack(inner, (variables,), (variables,), (rngs,), "fold_rngs",
                 enable_kwargs=True)


def add_metadata_axis(target, variable_axes={}, metadata_params={}):  # noqa: B006
    """Adds the mapped axis ``variable_axes[col]`` to the axis metadata (e.g.
    ``Partitioned`` names) of collection ``col`` on the way out, and removes it on the
    way in (``map_variables``), as a ``vmap`` over them would.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> D = nn.add_metadata_axis(nn.Dense, {'params': 0})
    >>> D(2).init(xform.random.PRNGKey(0), jnp.ones((1, 3)))['params']['kernel'].shape
    (3, 2)
    """
    for col, axis in variable_axes.items():
        target = map_variables(
            target, col,
            trans_in_fn=functools.partial(meta.remove_axis, index=axis,
                                          params=metadata_params),
            trans_out_fn=functools.partial(meta.add_axis, index=axis,
                                           params=metadata_params),
            mutable=True)
    return target


class _CompactNameScope(Module):
    fn: object
    module_fn: object

    @compact
    def __call__(self, *args, **kwargs):
        return self.fn(self.module_fn(), *args, **kwargs)


def compact_name_scope(fun):
    """A Module method whose inline submodules and variables live in a scope named
    after the method (so several such methods can each be compact).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Foo(nn.Module):
    ...   @nn.compact_name_scope
    ...   def up(self, x):
    ...     return nn.Dense(3)(x)
    ...   def __call__(self, x):
    ...     return self.up(x)
    >>> sorted(Foo().init(xform.random.PRNGKey(0), jnp.ones((1, 2)))['params']['up'])
    ['Dense_0']
    """
    name = fun.__name__

    @functools.wraps(fun)
    def wrapper(self, *args, **kwargs):
        if self.scope is None:
            raise ValueError(
                f"Cannot call compact_name_scope method {name!r} on a Module that has "
                f"not been setup. This is likely because you are calling {name!r} from "
                f"outside of init or apply.")
        modules = self.__dict__.get("_compact_name_scope_modules")
        if modules is None:
            modules = {}
            object.__setattr__(self, "_compact_name_scope_modules", modules)
        if name not in modules:   # created as a setup() submodule would be
            state = self._state
            prev, state.in_setup = state.in_setup, True
            try:
                modules[name] = _CompactNameScope(fun, lambda: self, parent=self,
                                                  name=name)
            finally:
                state.in_setup = prev
        return modules[name](*args, **kwargs)
    wrapper.compact_name_scope = True
    wrapper.inner_fun = fun
    wrapper.nowrap = True
    return wrapper
