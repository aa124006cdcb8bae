"""User-facing errors with JAX's names; each docstring says the cause and the fix."""
import weakref

from xform.backend import JaxRuntimeError  # noqa: F401  (the runtime raises it)


class JAXTypeError(TypeError):
    """Base of errors raised when a traced value is used where a concrete one is needed."""


class ConcretizationTypeError(JAXTypeError):
    """A traced (abstract) value was used where Python needs a concrete value.

    Under ``jit`` (or ``make_jaxpr``) arrays are abstract: only their shape and
    dtype are known. Fixes: make the argument static (``static_argnums`` /
    ``static_argnames``), use ``lax.cond``/``jnp.where`` for value-dependent choices,
    or compute the value outside the transformed function.
    """

    def __init__(self, tracer, context=""):
        super().__init__(
            f"Abstract tracer value encountered where concrete value is expected: {tracer}\n"
            f"{context}"
            "The problem arose with a traced value whose value is not known at trace time "
            "(e.g. an argument of a jit-compiled function). If it should be known, mark "
            "the argument static with `static_argnums`/`static_argnames`; for a "
            "value-dependent branch use `lax.cond` or `jnp.where` instead of Python "
            "control flow.")


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool(x)`` (an ``if``/``while`` on an array) was applied to a traced value."""

    def __init__(self, tracer):
        super().__init__(
            tracer, "Attempted boolean conversion of a traced array (an `if`, `while`, "
            "`and`/`or` or `bool()` on a value computed from a transformed function's "
            "arguments).\n")


class TracerIntegerConversionError(ConcretizationTypeError):
    """``int(x)``/``operator.index(x)`` was applied to a traced value."""

    def __init__(self, tracer):
        super().__init__(tracer, "Attempted integer conversion of a traced array (e.g. "
                                 "using it as a Python int, a shape or a range bound).\n")


class TracerArrayConversionError(JAXTypeError):
    """A traced value was converted to a NumPy array (``np.asarray(tracer)``).

    NumPy functions cannot run on abstract values; use ``xform.numpy`` instead.
    """

    def __init__(self, tracer):
        super().__init__(
            f"The numpy.ndarray conversion method __array__() was called on traced array "
            f"{tracer}. Use xform.numpy functions instead of numpy functions inside "
            "transformed code.")


class UnexpectedTracerError(Exception):
    """A tracer escaped the transformation that created it ("leaked").

    Typically a traced value was stored in a global, a class attribute or a
    closure and used after the jit/grad/vmap call returned. Return values
    from the transformed function instead of stashing them.
    """

    def __init__(self, tracer, where=""):
        super().__init__(
            f"Encountered an unexpected tracer: {tracer}. A function transformed by xform "
            f"had a side effect that leaked a traced value out of its transformation{where} "
            "(e.g. it was stored in a global or a closure and used after the transformed "
            "call returned). Return such values as outputs instead.")


class JAXIndexError(IndexError):
    """Base of xform's indexing errors (``jax.errors.JAXIndexError``)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """An array was indexed with a traced boolean mask (``x[mask]`` under ``jit``).

    The result's shape would depend on how many entries of the mask are True, which is
    not known at trace time. Fixes: ``jnp.where(mask, x, 0)`` keeps the shape; or make
    the mask concrete (a static argument, or computed outside the transformation).
    """

    def __init__(self, tracer):
        super().__init__(
            f"Array boolean indices must be concrete; got {tracer}\nA traced boolean mask "
            "would make the result's shape data-dependent (it is the number of True "
            "entries). Use jnp.where(mask, x, fill) to keep the shape, or make the mask "
            "concrete (a static argument or a value computed outside jit).")


class KeyReuseError(RuntimeError):
    """A typed PRNG key was consumed twice while ``jax_debug_key_reuse`` is on.

    Sampling from a key (or splitting it) consumes it; reusing it gives correlated
    numbers. Fix: ``split`` the key and use each new key once, or ``clone`` it where
    reuse is intended.
    """


# Which typed key objects were consumed (with jax_debug_key_reuse): random's samplers
# and jit's calls mark them here, beside the error, so jit needs nothing from random.
_consumed = {}   # id(key object) -> (weakref to it, name of the consumer)


def key_consumer(key):
    """The name of what consumed the typed ``key`` object (None if it is fresh)."""
    seen = _consumed.get(id(key))
    return seen[1] if seen is not None and seen[0]() is key else None


def consume_key(name, key):
    """Mark the typed ``key`` object (an Array or a tracer) used by ``name``; raise
    KeyReuseError if it was. Callers check ``jax_debug_key_reuse`` and that it is typed."""
    used_by = key_consumer(key)
    if used_by is not None:
        raise KeyReuseError(
            f"{name}: this PRNG key was already consumed (by {used_by}). Split it "
            "(jax.random.split) and use each new key once, or clone it (jax.random.clone) "
            "where reuse is intended.")
    k = id(key)
    _consumed[k] = (weakref.ref(key, lambda _, k=k: _consumed.pop(k, None)), name)
