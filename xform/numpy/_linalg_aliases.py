"""``jnp.linalg``'s thin faces over ``xform.numpy``: multi_dot and the array-API
aliases of NumPy-namespace functions (matmul, outer, trace, cross, ...), with JAX's
signatures and their linalg-specific checks."""
from xform.numpy import _util
from xform.numpy._einsum import einsum as _einsum
from xform.numpy import _matrix, _products, _shape


def multi_dot(arrays, *, precision=None):
    """Chained matrix product as one einsum (its contraction order), as JAX's: 2-D
    arrays, except the first and last may be 1-D (no batch broadcasting)."""
    arrs = [_util.asarray(a, "multi_dot", i) for i, a in enumerate(arrays)]
    if len(arrs) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
    shapes = [a.shape for a in arrs]
    if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2)
            and all(a.ndim == 2 for a in arrs[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for "
                         "the first and last array which may be 1 or 2 dimensional. Got "
                         f"array shapes {shapes}")
    if any(a.shape[-1] != b.shape[0] for a, b in zip(arrs[:-1], arrs[1:])):
        raise ValueError("multi_dot: last dimension of each array must match first "
                         f"dimension of following array. Got array shapes {shapes}")
    axes = [(i, i + 1) for i in range(len(arrs))]
    if arrs[0].ndim == 1:
        axes[0] = axes[0][1:]
    if arrs[-1].ndim == 1:
        axes[-1] = axes[-1][:1]
    operands = [v for pair in zip(arrs, axes) for v in pair]
    return _einsum(*operands, optimize="auto", precision=precision)


# NumPy-namespace aliases that numpy.linalg also exposes.
def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    return _products.matmul(x1, x2, precision=precision,
                      preferred_element_type=preferred_element_type)


def outer(x1, x2, /):
    """Outer product of two vectors (unlike jnp.outer, which flattens, 1-D only)."""
    x1, x2 = _util.asarray(x1, "outer"), _util.asarray(x2, "outer", 1)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError("Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return _products.outer(x1, x2)


def matrix_transpose(x, /):
    return _shape.matrix_transpose(x)


def trace(x, /, *, offset=0, dtype=None):
    return _matrix.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0):
    return _matrix.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    return _matrix.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-vectors only (the array API's; ``jnp.cross`` takes 2-vectors)."""
    x1, x2 = _util.asarray(x1, "cross"), _util.asarray(x2, "cross", 1)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={x1.shape[axis]} and "
                         f"x2.shape[axis]={x2.shape[axis]}")
    return _matrix.cross(x1, x2, axis=axis)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None,
              out_sharding=None):
    if out_sharding is not None:   # (jnp.tensordot has no out_sharding; einsum does)
        raise NotImplementedError("jnp.linalg.tensordot: out_sharding is not supported")
    return _products.tensordot(x1, x2, axes=axes, precision=precision,
                         preferred_element_type=preferred_element_type)
