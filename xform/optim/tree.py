"""``optax.tree``: the tree utilities of :mod:`xform.optim.tree_utils` without their
``tree_`` prefix (``optax.tree.norm``, ``optax.tree.get`` ...).

Example:
    >>> import xform.numpy as jnp, xform.optim as optax
    >>> optax.tree.norm({'a': jnp.array([3., 4.])})
    Array(5., dtype=float32)
"""
from xform.optim import tree_utils as _tu

_NAMES = [n for n in _tu.__all__ if n.startswith("tree_") and n != "tree_l2_norm"]
globals().update({n[len("tree_"):]: getattr(_tu, n) for n in _NAMES})
__all__ = [n[len("tree_"):] for n in _NAMES]
