"""Sparsity-aware ``grad``/``value_and_grad``: a BCOO argument is differentiated through
its ``data`` only (its indices are closed over), and its gradient comes back as a BCOO
with the same indices: the gradient in the subspace of the sparsity pattern, as JAX's."""
import functools

from xform.core.tree_util import tree_flatten, tree_leaves, tree_unflatten
from xform.experimental.sparse._bcoo import BCOO
from xform.transforms import ad as _ad

_is_bcoo = lambda x: isinstance(x, BCOO)


def _with_data(like, data):
    return BCOO((data, like.indices), **like._info) if _is_bcoo(like) else data


def value_and_grad(fun, argnums=0, has_aux=False, **kwargs):
    """Sparse-aware :func:`xform.value_and_grad`: gradients with respect to a BCOO are
    BCOOs with its indices.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> X = sparse.BCOO.fromdense(jnp.arange(6.))
    >>> sparse.value_and_grad(lambda X, y: X @ y)(X, jnp.ones(6))
    (Array(15., dtype=float32), BCOO(float32[6], nse=5))
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kw):
        if any(not -len(args) <= i < len(args) for i in nums):
            raise TypeError(f"value_and_grad argnums {argnums} out of range for "
                            f"{len(args)} positional arguments")
        flat = [tree_flatten(args[i], is_leaf=_is_bcoo) for i in nums]
        primals = [[x.data if _is_bcoo(x) else x for x in leaves] for leaves, _ in flat]

        def f(*diff):
            new_args = list(args)
            for i, (leaves, tree), vals in zip(nums, flat, diff):
                new_args[i] = tree_unflatten(tree, list(map(_with_data, leaves, vals)))
            return fun(*new_args, **kw)
        val, grads = _ad.value_and_grad(f, argnums=tuple(range(len(nums))), has_aux=has_aux,
                                        **kwargs)(*primals)
        grads = tuple(tree_unflatten(tree, list(map(_with_data, leaves, g)))
                      for (leaves, tree), g in zip(flat, grads))
        grads = tuple(g for g in grads if tree_leaves(g))   # as JAX: drop empty ones
        return val, grads[0] if len(grads) == 1 else grads
    return value_and_grad_fun


def grad(fun, argnums=0, has_aux=False, **kwargs):
    """Sparse-aware :func:`xform.grad` (see :func:`value_and_grad`).

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> X = sparse.BCOO.fromdense(jnp.arange(6.))
    >>> sparse.grad(lambda X, y: X @ y)(X, jnp.ones(6))
    BCOO(float32[6], nse=5)
    """
    vg = value_and_grad(fun, argnums, has_aux, **kwargs)

    @functools.wraps(fun)
    def grad_fun(*args, **kw):
        (_, aux), g = vg(*args, **kw) if has_aux else ((None, None), vg(*args, **kw)[1])
        return (g, aux) if has_aux else g
    return grad_fun
