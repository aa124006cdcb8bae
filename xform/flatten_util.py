"""``jax.flatten_util``: ``ravel_pytree`` flattens a pytree of arrays into one vector and
returns the function that undoes it."""
import numpy as np

from xform import lax
from xform.core import dtypes
from xform.core.array import Array
from xform.core.trace import Tracer
from xform.core.tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


class _HashablePartial:
    """``partial(f, *args)`` that compares and hashes by ``f`` and ``args``, so an
    unravel function can be a static argument (as JAX's is)."""

    def __init__(self, f, *args):
        self.f, self.args = f, args

    def __eq__(self, other):
        return (type(other) is _HashablePartial and self.f is other.f
                and self.args == other.args)

    def __hash__(self):
        return hash((self.f, self.args))

    def __call__(self, *args):
        return self.f(*self.args, *args)


def ravel_pytree(pytree):
    """Ravel (flatten) a pytree of arrays down to one 1-D array.

    Args:
      pytree: a pytree of arrays and scalars.

    Returns:
      ``(flat, unravel)``: ``flat`` concatenates the raveled leaves in the dtype that
      promoting all leaf dtypes gives (an empty float32 vector when there are no
      leaves); ``unravel(flat)`` rebuilds the pytree, each leaf in its shape and
      dtype. When the leaves have mixed dtypes, ``unravel`` requires a vector of
      ``flat``'s dtype (TypeError otherwise); with a single dtype it accepts any.

    >>> import xform.numpy as jnp
    >>> from xform.flatten_util import ravel_pytree
    >>> flat, unravel = ravel_pytree({'a': jnp.ones(2), 'b': jnp.arange(2)})
    >>> flat
    Array([1., 1., 0., 1.], dtype=float32)
    >>> unravel(flat)['b']
    Array([0, 1], dtype=int32)
    """
    leaves, treedef = tree_flatten(pytree)
    flat, unravel_list = _ravel_list(leaves)
    return flat, _HashablePartial(_unravel_pytree, treedef, unravel_list)


def _unravel_pytree(treedef, unravel_list, flat):
    return tree_unflatten(treedef, unravel_list(flat))


def _ravel_list(leaves):
    if not leaves:
        return lax.full((0,), 0, np.float32), _HashablePartial(_unravel_empty)
    from_dtypes = tuple(dtypes.dtype(x) for x in leaves)
    to_dtype = dtypes.result_type(*from_dtypes)
    sizes = tuple(int(np.size(x)) for x in leaves)
    shapes = tuple(tuple(np.shape(x)) for x in leaves)
    if all(dt == to_dtype for dt in from_dtypes):
        # one dtype: no conversions, so unravel is dtype-polymorphic (JAX issue 7809)
        from_dtypes = to_dtype = None
    else:
        leaves = [lax.convert_element_type(x, to_dtype) for x in leaves]
    flat = lax.concatenate([lax.reshape(x, (n,)) for x, n in zip(leaves, sizes)], 0)
    if not isinstance(flat, (Array, Tracer)):
        # a lone 1-D NumPy leaf comes back from reshape and concatenate as is: make it an
        # Array of the canonical dtype, as JAX's (float64 -> float32 without x64)
        flat = lax.convert_element_type(flat, dtypes.dtype(flat))
    return flat, _HashablePartial(_unravel_list, sizes, shapes, from_dtypes, to_dtype)


def _unravel_empty(flat):
    return []


def _check_length(arr, sizes):
    shape = np.shape(arr)
    if len(shape) != 1 or shape[0] != sum(sizes):
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension 0 of the "
                         f"operand shape {list(shape)} (unravel expects a 1-D array as "
                         f"long as the raveled pytree)")


def _unravel_list(sizes, shapes, from_dtypes, to_dtype, arr):
    _check_length(arr, sizes)
    if to_dtype is not None and dtypes.dtype(arr) != to_dtype:
        raise TypeError(f"unravel function given array of dtype {dtypes.dtype(arr)}, "
                        f"but expected dtype {to_dtype}")
    chunks = [lax.reshape(c, shape) for c, shape in zip(lax.split(arr, sizes), shapes)]
    if from_dtypes is None:
        return chunks
    return [lax.convert_element_type(c, dt) for c, dt in zip(chunks, from_dtypes)]
