"""``scatter_apply``: apply a unary function at scattered positions, once per
occurrence of an index.

NB: JAX binds ``scatter_p`` with ``func`` as XLA's update computation (and notes that it
lacks autodiff rules of its own). Here it is a composition, so it differentiates: count
each position's occurrences with a scatter-add, then apply ``func`` (vmapped over the
elements) as many times as counted, in a loop. That needs ``vmap`` and a ``while_loop``,
so this sits at L5, beside the control flow.
"""
import numpy as np

from xform.core.trace import get_aval
from xform.lax import elementwise, reductions, shapes
from xform.lax.control_flow.scan_loops import fori_loop
from xform.lax.scatter import scatter_add
from xform.transforms.vmap import vmap


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with ``func`` applied at the positions a scatter with these indices,
    ``dimension_numbers`` and update windows of ``update_shape`` would touch (repeated
    positions get ``func`` repeatedly).

    >>> import numpy as np, xform.lax as lax
    >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> lax.scatter_apply(np.arange(4.0, dtype=np.float32), np.array([[1], [1], [3]]),
    ...                   lambda v: v * 10, dn, update_shape=(3,))
    Array([  0., 100.,   2.,  30.], dtype=float32)
    """
    aval = get_aval(operand)
    counts = scatter_add(shapes.full(aval.shape, 0, np.int32), scatter_indices,
                         shapes.full(tuple(update_shape), 1, np.int32), dimension_numbers,
                         indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices, mode=mode)

    def once_more(i, y):
        fy = vmap(func)(shapes.reshape(y, (aval.size,)))
        fy = elementwise.convert_element_type(shapes.reshape(fy, aval.shape), aval.dtype,
                                              aval.weak_type)
        return elementwise.select(elementwise.gt(counts, i), fy, y)
    most = reductions.reduce_max(counts, tuple(range(aval.ndim)))
    return fori_loop(0, most, once_more, operand)
