"""``xform.random``: JAX's PRNGs, bit for bit: threefry2x32 (the default), rbg and
unsafe_rbg (``key(seed, impl="rbg")``, or ``jax_default_prng_impl``).

Keys are raw ``uint32`` arrays (``PRNGKey``: ``uint32[2]``, ``uint32[4]`` for the rbg
ones) or typed scalars (``key``: ``key<fry>``, ``key<rbg>``, ``key<urbg>``). A raw key
is the default implementation's data, as in JAX. Threefry derivation follows JAX
0.10.2 with its default ``jax_threefry_partitionable=True``; ``_prng`` has the three
implementations' seed, split, fold_in and bits.
Samplers use JAX's formulas and key usage: ``_core`` (keys, uniform, normal, ...),
``_derived`` (their simple transforms), ``_continuous``, ``_gamma`` (gamma family),
``_discrete``; ``_keys`` holds typed keys and the key checks. Every public function taking a key checks it here
(naming itself in errors) and, with ``jax_debug_key_reuse`` on, marks it consumed.
"""
import functools as _functools

from xform.random import (_continuous, _core, _derived, _discrete, _gamma,  # noqa: F401
                          _keys as _keys_mod)
from xform.random._core import (PRNGKey, key, key_data, wrap_key_data,  # noqa: F401
                                key_impl, key_dtype, clone)
from xform.random._gamma import random_gamma_p  # noqa: F401  (jax.random's primitive)
from xform.random._keys import KeyReuseError  # noqa: F401


def _public(fn, allow_batched=False):
    # The user-facing entry: check the key (typed or raw) under fn's name, then mark it
    # consumed (jax_debug_key_reuse). Internal code calls the unwrapped functions.
    name = fn.__name__

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        k = args[0] if args else kwargs.get("key")
        _keys_mod.typed_key(name, k, allow_batched)
        _keys_mod.consume(name, k)
        return fn(*args, **kwargs)
    return wrapper


_SAMPLERS = {
    _core: ["split", "fold_in", "bits", "uniform", "normal", "truncated_normal",
            "bernoulli", "randint"],
    _derived: _derived.__all__,
    _continuous: _continuous.__all__, _gamma: _gamma.__all__, _discrete: _discrete.__all__,
}
for _mod, _names in _SAMPLERS.items():
    for _name in _names:
        globals()[_name] = _public(getattr(_mod, _name))

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "KeyReuseError", "random_gamma_p"] + [n for ns in _SAMPLERS.values() for n in ns]
del _mod, _names, _name
