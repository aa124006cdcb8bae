"""Complex parameters as pairs of real ones (``split_real_and_imaginary``), so real-valued
optimizers treat the real and imaginary parts as two independent parameters."""
from typing import Any, NamedTuple

import xform.numpy as jnp
from xform.core import tree_util as tu
from xform.optim._base import GradientTransformation


class SplitRealAndImaginaryArrays(NamedTuple):
    """The real and imaginary parts of a complex array."""
    real: Any
    imaginary: Any


def _complex_to_real_pair(x):
    return SplitRealAndImaginaryArrays(x.real, x.imag) if jnp.iscomplexobj(x) else x


def _real_pair_to_complex(x):
    if isinstance(x, SplitRealAndImaginaryArrays):
        return x.real + x.imaginary * 1j
    return x


class SplitRealAndImaginaryState(NamedTuple):
    """State of :func:`split_real_and_imaginary`: the inner transformation's state."""
    inner_state: Any


def split_real_and_imaginary(inner):
    """Run ``inner`` on the real and imaginary parts of complex params/updates as two
    real arrays and merge its outputs back; real leaves pass through as they are.

    Note JAX's gradients of real losses in complex params are conjugated relative to
    PyTorch's convention: conjugate them before ``update`` for the usual descent step.

    Args:
        inner: the transformation to run on real arrays.

    Returns:
        A :class:`~xform.optim.GradientTransformation`.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> tx = optax.contrib.split_real_and_imaginary(optax.sign_sgd(1.0))
        >>> p = jnp.array([1 + 1j])
        >>> tx.update(jnp.array([2 - 3j]), tx.init(p), p)[0]
        Array([-1.+1.j], dtype=complex64)
    """
    def init_fn(params):
        return SplitRealAndImaginaryState(inner.init(tu.tree_map(_complex_to_real_pair, params)))

    def update_fn(updates, state, params=None):
        updates = tu.tree_map(_complex_to_real_pair, updates)
        params = tu.tree_map(_complex_to_real_pair, params)
        updates, inner_state = inner.update(updates, state.inner_state, params)
        updates = tu.tree_map(_real_pair_to_complex, updates,
                              is_leaf=lambda x: isinstance(x, SplitRealAndImaginaryArrays))
        return updates, SplitRealAndImaginaryState(inner_state)
    return GradientTransformation(init_fn, update_fn)


__all__ = ["SplitRealAndImaginaryState", "split_real_and_imaginary"]
