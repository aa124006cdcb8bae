"""NumPy's index-trick objects: ``mgrid``/``ogrid`` (grids from slice syntax), ``r_``/``c_``
(concatenation from slice syntax) and the plain ``s_``/``index_exp``, as in JAX."""
import numpy as np

from xform.numpy import _util
from xform.numpy._creation import arange, array, linspace
from xform.numpy._matrix import meshgrid
from xform.numpy._shape import concatenate, expand_dims, stack, transpose


def _static(v, what, op_name, default):
    return default if v is None else _util.concrete_or_error(v, what, op_name)[()].item()


def _grid_1d(s, op_name):
    """A slice as a 1-D array: ``start:stop:step`` is arange, an imaginary step ``Nj`` is
    ``linspace(start, stop, N)`` (endpoint included)."""
    start = _static(s.start, "slice start", op_name, 0)
    stop = _static(s.stop, "slice stop", op_name, None)
    step = _static(s.step, "slice step", op_name, 1)
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


def _grids(key, op_name):
    return _util.promote_dtypes(op_name, *(_grid_1d(k, op_name) for k in key))


class _Mgrid:
    """Dense multi-dimensional grid from slice syntax, as ``numpy.mgrid``.

    >>> jnp.mgrid[0:2, 0:3].shape
    (2, 2, 3)
    """

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_1d(key, "mgrid")
        grids = meshgrid(*_grids(key, "mgrid"), indexing="ij", sparse=False)
        return stack(grids, 0) if grids else arange(0)


class _Ogrid:
    """Open (sparse, broadcastable) multi-dimensional grid, as ``numpy.ogrid``.

    >>> [g.shape for g in jnp.ogrid[0:2, 0:3]]
    [(2, 1), (1, 3)]
    """

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_1d(key, "ogrid")
        return meshgrid(*_grids(key, "ogrid"), indexing="ij", sparse=True)


class _AxisConcat:
    """Concatenation of slices, scalars and arrays along ``axis``; a leading string is a
    directive: "r"/"c" (a row/column matrix result) or "axis,ndmin,trans1d[,matrix]"."""
    axis, ndmin, trans1d, op_name = 0, 1, -1, ""

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                params[-1] = 0 if directive == "r" else 1
            else:
                vec = directive.split(",")
                vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
                try:
                    params = [int(v) for v in vec]
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        axis, ndmin, trans1d, matrix = params
        parts = []
        for item in items:
            if isinstance(item, slice):
                obj, item_ndim = _grid_1d(item, self.op_name), 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                obj = array(item, copy=False)
                item_ndim = obj.ndim
            obj = array(obj, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = tuple(range(ndmin))
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                obj = transpose(obj, order[shift:] + order[:shift])
            parts.append(obj)
        res = concatenate(tuple(parts), axis=axis)
        if matrix != -1 and res.ndim == 1:
            res = expand_dims(res, matrix)
        return res

    def __len__(self):
        return 0


class RClass(_AxisConcat):
    """Concatenate slices, scalars and arrays along the first axis, as ``numpy.r_``.

    >>> jnp.r_[0:3, 5, jnp.array([7, 8])]
    Array([0, 1, 2, 5, 7, 8], dtype=int32)
    """
    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcat):
    """Concatenate along the last axis (1-D items become columns), as ``numpy.c_``.

    >>> jnp.c_[jnp.array([1, 2]), jnp.array([3, 4])]
    Array([[1, 3],
           [2, 4]], dtype=int32)
    """
    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


mgrid = _Mgrid()
ogrid = _Ogrid()
r_ = RClass()
c_ = CClass()
s_ = np.s_
index_exp = np.index_exp
