"""``nn.intercept_methods``: interceptors around every Module method call (Flax's),
run by ``_module``'s method wrapper when any is registered."""
import contextlib
import dataclasses
import functools
import threading
import typing


class _Stack(threading.local):
    def __init__(self):
        self.interceptors = []   # oldest first


_stack = _Stack()


def active():
    return bool(_stack.interceptors)


@dataclasses.dataclass(frozen=True)
class InterceptorContext:
    """What a method interceptor is told: the module, the method's name, and the
    method bound to the module (calling it skips the other interceptors)."""
    module: typing.Any  # the Module
    method_name: str
    orig_method: typing.Callable


@contextlib.contextmanager
def intercept_methods(interceptor):
    """Within the context, every Module method call runs as ``interceptor(next_fun,
    args, kwargs, context)`` (the last registered interceptor innermost).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> def double(next_fun, args, kwargs, context):
    ...   return next_fun(*args, **kwargs) * 2
    >>> v = nn.Dense(1).init(xform.random.PRNGKey(0), jnp.ones((1, 1)))
    >>> with nn.intercept_methods(double):
    ...   y = nn.Dense(1).apply(v, jnp.ones((1, 1)))
    >>> bool(y == 2 * nn.Dense(1).apply(v, jnp.ones((1, 1))))
    True
    """
    _stack.interceptors.append(interceptor)
    try:
        yield
    finally:
        assert _stack.interceptors.pop() is interceptor


def run(fun, module, args, kwargs):
    bound = functools.partial(fun, module)
    context = InterceptorContext(module, fun.__name__, bound)

    def wrap(interceptor, next_fun):
        @functools.wraps(next_fun)
        def wrapped(*args, **kwargs):
            return interceptor(next_fun, args, kwargs, context)
        return wrapped
    run = bound
    for interceptor in reversed(_stack.interceptors):
        run = wrap(interceptor, run)
    return run(*args, **kwargs)
