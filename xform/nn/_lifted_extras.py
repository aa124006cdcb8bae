"""``nn.remat_scan`` (nested ``scan`` of ``remat``, Flax's ``lift.remat_scan``) and the
profiling-name switches ``named_call``, ``enable_named_call``, ``disable_named_call``,
``override_named_call``."""
import contextlib
import functools

from xform.nn._transforms import _core_remat, _core_scan, _lift, _named
from xform.transforms.runtime import named_call as _named_call

__all__ = ["disable_named_call", "enable_named_call", "named_call",
           "override_named_call", "remat_scan"]

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
