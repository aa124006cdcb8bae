"""Sparsity-aware ``grad``/``value_and_grad``/``jacfwd``/``jacrev``: a sparse argument
is differentiated through its ``data`` only (its indices are closed over), and its
derivative comes back as a sparse array with the same indices: the derivative in the
subspace of the sparsity pattern, as JAX's. A Jacobian's extra leading (output) axes
become batch dimensions of that array."""
import functools

from xform.core.tree_util import tree_flatten, tree_leaves, tree_unflatten
from xform.experimental.sparse._util import JAXSparse
from xform.transforms import ad as _ad
from xform.transforms.vmap import vmap

_is_sparse = lambda x: isinstance(x, JAXSparse)


def _with_data(like, data):
    """``like`` with ``data`` replacing its data; ``data`` may have extra leading
    (Jacobian) axes, which become batch dimensions (the indices broadcast along)."""
    if not _is_sparse(like):
        return data
    rebuild = lambda d: type(like)((d, *like._bufs[1:]), **like._info)
    for _ in range(data.ndim - like.data.ndim):
        rebuild = vmap(rebuild)
    return rebuild(data)


def _sparse_ad(transform, fun, argnums, has_aux, kwargs):
    """``transform`` (xform's grad, jacfwd, ...) of ``fun`` over the data of sparse
    arguments; the derivatives of sparse arguments are rebuilt as sparse arrays."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def wrapped(*args, **kw):
        if any(not -len(args) <= i < len(args) for i in nums):
            raise TypeError(f"argnums {argnums} out of range for {len(args)} positional "
                            "arguments")
        flat = [tree_flatten(args[i], is_leaf=_is_sparse) for i in nums]
        primals = [[x.data if _is_sparse(x) else x for x in leaves] for leaves, _ in flat]

        def f(*diff):
            new_args = list(args)
            for i, (leaves, tree), vals in zip(nums, flat, diff):
                new_args[i] = tree_unflatten(tree, list(map(_with_data, leaves, vals)))
            return fun(*new_args, **kw)
        out = transform(f, argnums=tuple(range(len(nums))), has_aux=has_aux,
                        **kwargs)(*primals)

        def post(grads):
            grads = tuple(tree_unflatten(tree, list(map(_with_data, leaves, g)))
                          for (leaves, tree), g in zip(flat, grads))
            grads = tuple(g for g in grads if tree_leaves(g))   # as JAX: drop empty ones
            return grads[0] if len(grads) == 1 else grads
        return out, post
    return wrapped


def value_and_grad(fun, argnums=0, has_aux=False, **kwargs):
    """Sparse-aware :func:`xform.value_and_grad`: gradients with respect to a sparse
    array are sparse arrays with its indices.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> X = sparse.BCOO.fromdense(jnp.arange(6.))
    >>> sparse.value_and_grad(lambda X, y: X @ y)(X, jnp.ones(6))
    (Array(15., dtype=float32), BCOO(float32[6], nse=5))
    """
    raw = _sparse_ad(_ad.value_and_grad, fun, argnums, has_aux, kwargs)

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kw):
        (val, grads), post = raw(*args, **kw)
        return val, post(grads)
    return value_and_grad_fun


def _derivative(transform, name):
    def make(fun, argnums=0, has_aux=False, **kwargs):
        raw = _sparse_ad(transform, fun, argnums, has_aux, kwargs)

        @functools.wraps(fun)
        def derivative_fun(*args, **kw):
            out, post = raw(*args, **kw)
            return (post(out[0]), out[1]) if has_aux else post(out)
        return derivative_fun
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"Sparse-aware :func:`xform.{name}`: derivatives with respect to a "
                    "sparse array are sparse arrays with its indices (see "
                    ":func:`value_and_grad`).")
    return make


grad = _derivative(_ad.grad, "grad")
jacfwd = _derivative(_ad.jacfwd, "jacfwd")
jacrev = _derivative(_ad.jacrev, "jacrev")
jacobian = jacrev
