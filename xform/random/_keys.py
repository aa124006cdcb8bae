"""Typed PRNG keys: ``PRNGKeyArray``, an array of dtype ``key<fry>`` over ``uint32[..., 2]``
key data, and the key checks every sampler runs (including ``jax_debug_key_reuse``).

NB: JAX makes key arrays an *extended dtype* that every primitive and interpreter knows.
xform makes ``PRNGKeyArray`` a pytree node whose one leaf is the raw key data, so jit,
vmap, grad (float0 tangents), scan and while_loop carry typed keys with no change to
the core; the dtype (``KeyTy``, under ``dtypes.prng_key``) is known to ``issubdtype``.
What differs: ``tree_leaves(key)`` is the uint32 data (JAX: the key), and jnp
functions (``jnp.stack``, ``jnp.where``) do not accept key arrays: indexing, reshape,
ravel, squeeze and ``T`` are methods; stack ``key_data`` and ``wrap_key_data`` it.
"""
import numpy as np

from xform.core.config import config
from xform.core.dtypes import prng_key
from xform.core.errors import KeyReuseError  # noqa: F401  (raised here)
from xform.core.trace import get_aval
from xform.core.tree_util import register_pytree_node
from xform.numpy import _shape as _shape_mod

_KEY_SHAPE = (2,)


class KeyTy:
    """The dtype of threefry typed keys, printed ``key<fry>`` (JAX's ``KeyTy``)."""
    name = "key<fry>"
    type = prng_key
    itemsize = 8
    kind = "V"
    _impl_name = "threefry2x32"

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


class PRNGKeyArray:
    """An array of typed PRNG keys: shape ``data.shape[:-1]``, dtype ``key<fry>``.

    >>> import xform.random as random
    >>> random.key(0)
    Array((), dtype=key<fry>) overlaying:
    [0 0]
    """
    __slots__ = ("_base_array", "_consumed")
    __array_priority__ = 200

    def __init__(self, data):
        # No checks: pytree unflattening builds these from tracers and placeholders.
        self._base_array = data
        self._consumed = False

    shape = property(lambda self: tuple(get_aval(self._base_array).shape[:-1]))
    dtype = property(lambda self: key_dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    itemsize = property(lambda self: key_dtype.itemsize)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        # Index key dimensions only: the trailing data axis stays whole.
        idx = (*idx, slice(None)) if any(i is Ellipsis for i in idx) else (*idx, Ellipsis)
        return PRNGKeyArray(self._base_array[idx])

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        return PRNGKeyArray(self._base_array.reshape(*shape, *_KEY_SHAPE))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None):
        import xform.numpy as jnp
        if axis is None:
            axis = tuple(i for i, s in enumerate(self.shape) if s == 1)
        return PRNGKeyArray(jnp.squeeze(self._base_array, axis))

    @property
    def T(self):
        import xform.numpy as jnp
        perm = tuple(reversed(range(self.ndim))) + (self.ndim,)
        return PRNGKeyArray(jnp.transpose(self._base_array, perm))

    def block_until_ready(self):
        self._base_array.block_until_ready()
        return self

    def __eq__(self, other):
        import xform.numpy as jnp
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.all(self._base_array == other._base_array, axis=-1)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else ~eq

    __hash__ = None

    def __repr__(self):
        data = self._base_array
        try:
            body = str(np.asarray(data))
        except Exception:  # a tracer
            body = repr(data)
        return f"Array({self.shape}, dtype={key_dtype}) overlaying:\n{body}"

    __str__ = __repr__


def _unflatten(consumed, children):
    k = PRNGKeyArray(children[0])
    k._consumed = consumed
    return k


# The consumed mark rides in the treedef, so a consumed key passed through jit, vmap
# or a loop is still consumed inside (always False while jax_debug_key_reuse is off).
register_pytree_node(PRNGKeyArray, lambda k: ((k._base_array,), k._consumed), _unflatten)
# jnp.stack / jnp.concatenate of key arrays act on the key dimensions, as JAX's do.
_shape_mod.extended_types[PRNGKeyArray] = (lambda k: k._base_array, PRNGKeyArray)


def is_typed_key(x):
    return isinstance(x, PRNGKeyArray)


def check_key_data(data):
    """``data`` validated as raw threefry key data (``uint32[..., 2]``), JAX's messages."""
    try:
        aval = get_aval(data)
    except TypeError:
        raise TypeError(f"unexpected PRNG key type {type(data)}") from None
    if aval.dtype != np.uint32:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={aval.dtype.name}")
    if tuple(aval.shape[-1:]) != _KEY_SHAPE:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with (2,); got shape={tuple(aval.shape)} for "
                        "impl=threefry2x32")
    return data


def unwrap(name, key, allow_batched=False):
    """The raw ``uint32[..., 2]`` data of ``key`` (typed or raw), checked, and whether it
    was typed. Raises JAX's errors for non-keys and (unless allowed) key batches."""
    typed = isinstance(key, PRNGKeyArray)
    data = key._base_array if typed else check_key_data(key)
    if not allow_batched:
        shape = get_aval(data).shape[:-1]
        if shape:
            raise ValueError(f"{name} accepts a single key, but was given a key array of "
                             f"shape {tuple(shape)} != (). Use jax.vmap for batching.")
    return data, typed


def consume(name, key):
    """With ``jax_debug_key_reuse`` on, mark the typed ``key`` used (raise if it was)."""
    if not config.jax_debug_key_reuse or not isinstance(key, PRNGKeyArray):
        return
    if key._consumed:
        raise KeyReuseError(
            f"{name}: this PRNG key was already consumed (by {key._consumed}). Split it "
            "(jax.random.split) and use each new key once, or clone it (jax.random.clone) "
            "where reuse is intended.")
    key._consumed = name
