"""Typed PRNG keys: the extended dtype ``key<fry>``, the two primitives that convert
between key arrays and their ``uint32[..., 2]`` data, and the key checks every sampler
runs (including ``jax_debug_key_reuse``).

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
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, dispatch, mlir
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.shapes import full
import xform.numpy as jnp

_KEY_SHAPE = (2,)


class _KeyRules:
    """What core needs to know of ``key<fry>``: the physical element; filling and
    equality (used by ``lax.full`` and ``jnp.equal``)."""
    physical_element_aval = ShapedArray(_KEY_SHAPE, np.uint32)

    @staticmethod
    def full(shape, fill_value):
        """Keys whose data words are all ``fill_value`` (``jnp.zeros_like(keys)``)."""
        return random_wrap(full(tuple(shape) + _KEY_SHAPE, fill_value, np.uint32))

    @staticmethod
    def equal(a, b):
        return jnp.all(jnp.equal(random_unwrap(a), random_unwrap(b)), axis=-1)


class KeyTy:
    """The dtype of threefry typed keys, printed ``key<fry>`` (JAX's ``KeyTy``)."""
    name = "key<fry>"
    type = prng_key
    itemsize = 8
    kind = "V"
    _impl_name = "threefry2x32"
    _rules = _KeyRules

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return other == self.name if isinstance(other, str) else isinstance(other, KeyTy)

    def __hash__(self):
        return hash(self.name)


key_dtype = KeyTy()


class PRNGSpec:
    """What ``key_impl`` returns: names the PRNG implementation (``'threefry2x32'``)."""
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


# ---- random_wrap / random_unwrap: key arrays <-> their uint32[..., 2] data ----

def _wrap_abstract_eval(data):
    return ShapedArray(data.shape[:-1], key_dtype)


def _unwrap_abstract_eval(keys):
    return ShapedArray(keys.shape + _KEY_SHAPE, np.uint32)


def _same_buffer(prim):
    # Eagerly the buffer already holds the other form: rewrap it, no program runs.
    def impl(x):
        if type(x) is Array:
            return Array(x._buf, canonical_aval(prim.abstract_eval(x.aval)))
        return dispatch.apply_primitive(prim, x)
    return impl


def _wrap_batch(vals, dims):
    (x,), (d,) = vals, dims
    if d == get_aval(x).ndim - 1:   # the batch axis must not be the key-data axis
        x, d = batching.moveaxis(x, d, 0), 0
    return random_wrap_p.bind(x), d


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
    mlir.register_lowering(_p, lambda ctx, x: x)   # the same physical value
    mlir.register_extended_lowering(_p, lambda ctx, x: x)


def random_wrap(data):
    """Typed keys over checked ``uint32[..., 2]`` key data.

    >>> import numpy as np
    >>> random_wrap(np.array([[0, 1], [2, 3]], np.uint32)).shape
    (2,)
    """
    return random_wrap_p.bind(check_key_data(data))


def random_unwrap(keys):
    """The ``uint32[..., 2]`` data of typed ``keys``.

    >>> import xform.random as random
    >>> random_unwrap(random.key(3))
    Array([0, 3], dtype=uint32)
    """
    return random_unwrap_p.bind(keys)


def is_typed_key(x):
    dt = getattr(x, "dtype", None)
    return isinstance(dt, KeyTy)


def check_has_array_attrs(data):
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {data!r}")


def check_key_data(data):
    """``data`` validated as raw threefry key data (``uint32[..., 2]``), JAX's messages."""
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
    if tuple(aval.shape[-1:]) != _KEY_SHAPE:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with (2,); got shape={tuple(aval.shape)} for "
                        "impl=threefry2x32")
    return data


def unwrap(name, key, allow_batched=False):
    """The raw ``uint32[..., 2]`` data of ``key`` (typed or raw), checked, and whether it
    was typed. Raises JAX's errors for non-keys and (unless allowed) key batches."""
    typed = is_typed_key(key)
    data = random_unwrap(key) if typed else check_key_data(key)
    if not allow_batched:
        shape = get_aval(data).shape[:-1]
        if shape:
            raise ValueError(f"{name} accepts a single key, but was given a key array of "
                             f"shape {tuple(shape)} != (). Use jax.vmap for batching.")
    return data, typed


def consume(name, key):
    """With ``jax_debug_key_reuse`` on, mark the typed ``key`` object (an Array or a
    tracer) used, and raise if it was."""
    if config.jax_debug_key_reuse and is_typed_key(key):
        consume_key(name, key)
