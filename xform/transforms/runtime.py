"""Small top-level utilities of JAX's API: types, caches, live arrays, naming, and
compile-time evaluation (``typeof``, ``clear_caches``, ``live_arrays``,
``effects_barrier``, ``named_call``, ``named_scope``, ``ensure_compile_time_eval``)."""
import contextlib
import functools
import gc

from xform.core.array import Array
from xform.core.trace import eval_trace, get_aval, set_current_trace
from xform.interpreters import compiler, dispatch, lazy_run, pjit, pxla
from xform.transforms import jit_cache


def typeof(x):
    """The abstract value (shape, dtype, weak type; in explicit sharding mode also the
    sharding, printed as ``float32[8@x,4]``) of ``x``: an Array, tracer or scalar.

    >>> import xform, xform.numpy as jnp
    >>> xform.typeof(jnp.ones((2, 3))).shape
    (2, 3)
    """
    return get_aval(x)


def clear_caches():
    """Forget every compiled program and traced jaxpr (jit caches, eager one-op
    executables, derived call jaxprs); the on-disk compilation cache is left alone.

    >>> import xform
    >>> xform.clear_caches()
    """
    for c in list(jit_cache.all_caches):
        c.clear()
    dispatch._prim_cache.clear()
    dispatch._canonical_jaxprs.clear()
    pjit._compiled.data.clear()
    pjit._derived.data.clear()
    pxla._cache.clear()
    lazy_run.clear_cache()
    compiler.clear_caches()


def live_arrays(platform=None):
    """The Arrays alive now whose buffers are not deleted.

    NB: JAX asks the runtime for its live buffers; xform finds its Array objects with the
    garbage collector (slower: for debugging memory, as in JAX).

    >>> import xform, xform.numpy as jnp
    >>> x = jnp.ones(3)
    >>> any(a is x for a in xform.live_arrays())
    True
    """
    del platform  # one platform
    return [o for o in gc.get_objects() if isinstance(o, Array) and not o.is_deleted()]


def effects_barrier():
    """Wait until every effect (host callbacks such as ``debug.print``) issued so far has
    run. xform runs callbacks while their computation executes and blocks on it, so there
    is nothing pending: a no-op kept for JAX's API.

    >>> import xform
    >>> xform.effects_barrier()
    """


def named_call(fun, *, name=None):
    """``fun``, named ``name`` in profiles. JAX adds a name-stack entry to the staged
    operations; xform's lowered programs carry no names, so this changes nothing (not
    even ``__name__``, as in JAX).

    >>> import xform
    >>> xform.named_call(lambda x: x + 1, name="inc")(1)
    2
    """
    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    del name
    return named


@contextlib.contextmanager
def named_scope(name):
    """A context manager naming the operations staged in it (for profiles); in xform an
    annotation that changes no value.

    >>> import xform
    >>> with xform.named_scope("layer1"):
    ...     pass
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope name must be a string, got {type(name).__name__}")
    yield


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Evaluate operations on concrete values eagerly inside the block, even while tracing
    under ``jit``: the results are concrete (usable in Python control flow). Operations on
    traced values inside the block raise, as in JAX.

    >>> import xform, xform.numpy as jnp
    >>> @xform.jit
    ... def f(x):
    ...     with xform.ensure_compile_time_eval():
    ...         n = int(jnp.sum(jnp.arange(4)))
    ...     return x * n
    >>> f(1.0)
    Array(6., dtype=float32, weak_type=True)
    """
    with set_current_trace(eval_trace):
        yield
