"""Typed PRNG keys: the PRNG implementations (threefry2x32, rbg, unsafe_rbg) and their
extended dtypes (``key<fry>``, ``key<rbg>``, ``key<urbg>``), the two primitives that
convert between key arrays and their ``uint32[..., *key_shape]`` data, the default
implementation (``jax_default_prng_impl``) and the key checks every sampler runs
(including ``jax_debug_key_reuse``).

As in JAX, a typed key array is an ordinary ``Array`` (or tracer) whose dtype is
extended: its shape is the logical one, XLA holds the data (``physical_aval``), and
every transformation carries it as it carries any array (a pytree leaf; float0
tangents). Indexing, reshaping, stacking and ``jnp.where`` work through the
structural primitives' extended rules (``lax/extended.py``); arithmetic is refused.
"""

import numpy as np

from xform.core.array import Array
from xform.core.avals import ShapedArray, canonical_aval
from xform.core.config import config
from xform.core.dtypes import prng_key
from xform.core.errors import KeyReuseError, consume_key  # noqa: F401  (KeyReuseError: re-exported)
from xform.core.trace import _context, eval_trace, get_aval
from xform.interpreters import ad, batching, dispatch, mlir
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.shapes import full
import xform.numpy as jnp

class PRNGImpl:
    """A PRNG implementation as keys know it: its name (``key_impl``), the tag in its
    dtype's name (``key<fry>``) and the shape of one key's uint32 data. Its seed, split,
    fold_in and random_bits live in ``_prng``."""
    __slots__ = ("name", "tag", "key_shape")

    def __init__(self, name, tag, key_shape):
        self.name, self.tag, self.key_shape = name, tag, key_shape

    def __repr__(self):
        return self.name

    def __reduce__(self):   # copies and pickles are the one instance
        return _impl_named, (self.name,)


def _impl_named(name):
    return IMPLS[name]


# JAX 0.10.2's implementations that xform has (JAX also has threefry4x32 and philox).
IMPLS = {i.name: i for i in (PRNGImpl("threefry2x32", "fry", (2,)),
                             PRNGImpl("rbg", "rbg", (4,)),
                             PRNGImpl("unsafe_rbg", "urbg", (4,)))}
_JAX_ONLY = ("threefry4x32", "philox2x32", "philox4x32")


class _KeyRules:
    """What core needs to know of a key dtype: the physical element; filling and
    equality (used by ``lax.full`` and ``jnp.equal``)."""

    def __init__(self, impl):
        self.impl = impl
        self.physical_element_aval = ShapedArray(impl.key_shape, np.uint32)

    def full(self, shape, fill_value):
        """Keys whose data words are all ``fill_value`` (``jnp.zeros_like(keys)``)."""
        return random_wrap(full(tuple(shape) + self.impl.key_shape, fill_value, np.uint32),
                           self.impl)

    @staticmethod
    def equal(a, b):
        return jnp.all(jnp.equal(random_unwrap(a), random_unwrap(b)), axis=-1)


class KeyTy:
    """The dtype of typed keys of one implementation, printed ``key<fry>``,
    ``key<rbg>``, ``key<urbg>`` (JAX's ``KeyTy``)."""
    type = prng_key
    kind = "V"

    def __init__(self, impl):
        self._impl = impl
        self.name = f"key<{impl.tag}>"
        self.itemsize = 4 * int(np.prod(impl.key_shape))
        self._rules = _KeyRules(impl)

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self.name
        return isinstance(other, KeyTy) and other._impl is self._impl

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):   # copies and pickles are the one instance
        return _key_dtype_named, (self._impl.name,)


def _key_dtype_named(name):
    return KEY_DTYPES[name]


KEY_DTYPES = {name: KeyTy(impl) for name, impl in IMPLS.items()}


class PRNGSpec:
    """Names a PRNG implementation (``'threefry2x32'``) where an ``impl=`` is taken, as
    JAX's (``key_impl`` returns the plain name for the built-in ones, as JAX does)."""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"PRNGSpec({self._name!r})"

    def __str__(self):
        return self._name

    def __eq__(self, other):
        return (isinstance(other, PRNGSpec) and other._name == self._name) or other == self._name

    def __hash__(self):
        return hash(self._name)


def _check_impl_name(name):
    if name in _JAX_ONLY:
        raise NotImplementedError(f'PRNG implementation "{name}" is not implemented in '
                                  f'xform; it has {", ".join(map(repr, IMPLS))}.')


def _validate_default(value):
    # config.update("jax_default_prng_impl", ...): JAX's enum check
    _check_impl_name(value)
    if value not in IMPLS:
        raise ValueError(f"new enum value must be in {list(IMPLS)}, got {value} of type "
                         f"{type(value)}.")


config._add_validator("jax_default_prng_impl", _validate_default)


def default_impl():
    """The implementation ``jax_default_prng_impl`` names (read at each call, as JAX)."""
    name = config.jax_default_prng_impl
    _validate_default(name)   # (it may come from the environment, unchecked)
    return IMPLS[name]


def resolve_impl(spec):
    """The ``PRNGImpl`` a user's ``impl=``/``dtype=`` names: None (the default), a name,
    a ``PRNGSpec`` or a key dtype; JAX's errors otherwise."""
    if spec is None:
        return default_impl()
    if isinstance(spec, PRNGSpec):
        spec = spec._name
    if isinstance(spec, KeyTy):
        return spec._impl
    if isinstance(spec, str):
        _check_impl_name(spec)
        if spec in IMPLS:
            return IMPLS[spec]
        names = ", ".join(f'"{n}"' for n in IMPLS)
        raise ValueError(f'unrecognized PRNG implementation "{spec}". Did you mean one '
                         f'of: {names}?')
    raise TypeError(f"unrecognized type {type(spec)} for specifying PRNG implementation.")


# ---- random_wrap / random_unwrap: key arrays <-> their uint32[..., *key_shape] data ----

def _wrap_abstract_eval(data, *, impl):
    return ShapedArray(data.shape[:data.ndim - len(IMPLS[impl].key_shape)], KEY_DTYPES[impl])


def _unwrap_abstract_eval(keys):
    return ShapedArray(keys.shape + keys.dtype._impl.key_shape, np.uint32)


def _same_buffer(prim):
    # Eagerly the buffer already holds the other form: rewrap it, no program runs.
    def impl(x, **params):
        if type(x) is Array:
            return _rewrap_eagerly(x, prim, **params)
        return dispatch.apply_primitive(prim, x, **params)
    return impl


def _wrap_batch(vals, dims, *, impl):
    (x,), (d,) = vals, dims
    if d >= get_aval(x).ndim - len(IMPLS[impl].key_shape):   # not a key-data axis
        x, d = batching.moveaxis(x, d, 0), 0
    return random_wrap_p.bind(x, impl=impl), d


def _unwrap_batch(vals, dims):
    (x,), (d,) = vals, dims
    return random_unwrap_p.bind(x), d


random_wrap_p = standard_primitive("random_wrap", _wrap_abstract_eval)
random_unwrap_p = standard_primitive("random_unwrap", _unwrap_abstract_eval)
allow_extended(random_unwrap_p)
for _p, _batch in ((random_wrap_p, _wrap_batch), (random_unwrap_p, _unwrap_batch)):
    _p.def_impl(_same_buffer(_p))
    ad.defnondiff(_p)
    batching.primitive_batchers[_p] = _batch
    mlir.register_lowering(_p, lambda ctx, x, **_: x)   # the same physical value
    mlir.register_extended_lowering(_p, lambda ctx, x, **_: x)


# Eager wraps and unwraps of Arrays: the other form's aval over the same buffer, from
# a memo of checked avals (every eager sampler call with a raw key wraps and unwraps).
_rewrapped = {}


def _rewrap_eagerly(x, prim, **params):
    key = (x.aval, prim) + tuple(params.values())
    aval = _rewrapped.get(key)
    if aval is None:
        aval = _rewrapped[key] = canonical_aval(prim.abstract_eval(x.aval, **params))
    return Array(x._buf, aval, x._committed)


def random_wrap(data, impl=IMPLS["threefry2x32"]):
    """Typed keys of ``impl`` over checked ``uint32[..., *key_shape]`` key data.

    >>> import numpy as np
    >>> random_wrap(np.array([[0, 1], [2, 3]], np.uint32)).shape
    (2,)
    """
    if type(data) is Array and _context.trace is eval_trace and \
            (data.aval, random_wrap_p, impl.name) in _rewrapped:
        return _rewrap_eagerly(data, random_wrap_p, impl=impl.name)
    return random_wrap_p.bind(check_key_data(data, impl), impl=impl.name)


def random_unwrap(keys):
    """The ``uint32[..., *key_shape]`` data of typed ``keys``.

    >>> import xform.random as random
    >>> random_unwrap(random.key(3))
    Array([0, 3], dtype=uint32)
    """
    if type(keys) is Array and _context.trace is eval_trace:
        return _rewrap_eagerly(keys, random_unwrap_p)
    return random_unwrap_p.bind(keys)


def is_typed_key(x):
    dt = getattr(x, "dtype", None)
    return isinstance(dt, KeyTy)


def impl_of(keys):
    """The ``PRNGImpl`` of typed ``keys``."""
    return keys.dtype._impl


def check_has_array_attrs(data):
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {data!r}")


def check_key_data(data, impl):
    """``data`` validated as raw key data of ``impl`` (``uint32[..., *key_shape]``),
    JAX's messages."""
    try:
        aval = get_aval(data)
    except TypeError:
        raise TypeError(f"unexpected PRNG key type {type(data)}") from None
    check_has_array_attrs(data)
    # the value's own dtype, before canonicalization (uint64 data must not be narrowed)
    dt = np.dtype(getattr(data, "dtype", aval.dtype))
    if dt != np.uint32:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={dt.name}")
    n = len(impl.key_shape)
    if tuple(aval.shape[-n:]) != impl.key_shape:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with {impl.key_shape}; got shape={tuple(aval.shape)} for "
                        f"impl={impl.name}")
    return data


def typed_key(name, key, allow_batched=False):
    """``key`` as typed keys, checked, and whether it was raw. A raw ``uint32`` key is
    data of the default implementation (``jax_default_prng_impl``), as in JAX. Raises
    JAX's errors for non-keys and (unless allowed) key batches."""
    raw = not is_typed_key(key)
    keys = random_wrap(key, default_impl()) if raw else key
    if not allow_batched and keys.shape:
        raise ValueError(f"{name} accepts a single key, but was given a key array of "
                         f"shape {tuple(keys.shape)} != (). Use jax.vmap for batching.")
    return keys, raw


def consume(name, key):
    """With ``jax_debug_key_reuse`` on, mark the typed ``key`` object (an Array or a
    tracer) used, and raise if it was."""
    if config.jax_debug_key_reuse and is_typed_key(key):
        consume_key(name, key)
