"""Shared helpers of the sparse package: layout validation and the (broadcasting) n-fold
vmap that turns an unbatched kernel into one over a BCOO's leading batch dimensions."""
from typing import NamedTuple

import numpy as np

from xform import lax
from xform.core.avals import ShapedArray
from xform.core.dtypes import issubdtype
from xform.core.trace import Tracer, concrete_or_raise
from xform.transforms.vmap import vmap


class JAXSparse:
    """Base of the sparse formats (BCOO, BCSR, COO, CSR, CSC), as JAX's: what they share
    (``len``, ``repr``, ``block_until_ready``...) and ``isinstance(x, sparse.JAXSparse)``.
    Subclasses define ``shape``, ``data``, ``nse``, ``_bufs`` (data first), ``_info``,
    ``todense`` and ``transpose``."""
    __hash__ = None
    __array_priority__ = 100   # `ndarray @ M` defers to M.__rmatmul__
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    T = property(lambda self: self.transpose())

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        name = type(self).__name__
        try:
            extra = "".join(f", {k}={getattr(self, k)}" for k in ("n_batch", "n_dense")
                            if getattr(self, k, 0))
            r = f"{name}({self.dtype}{list(self.shape)}, nse={self.nse}{extra})"
        except Exception:   # a repr must not fail, whatever the leaves are
            r = f"{name}(<invalid>)"
        if isinstance(self.data, Tracer):
            r = f"{type(self.data).__name__}[{r}]"
        return r

    def block_until_ready(self):
        for b in self._bufs:
            b.block_until_ready()
        return self


def _not_implemented(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{self.__class__}.{name}")
    method.__name__ = name
    return method


# As JAX's base class: a format without its own operator raises NotImplementedError
# (not Python's TypeError), naming the class and the method.
for _name in ("sum", "__neg__", "__pos__", "__matmul__", "__rmatmul__", "__mul__",
              "__rmul__", "__add__", "__radd__", "__sub__", "__rsub__", "__getitem__"):
    setattr(JAXSparse, _name, _not_implemented(_name))


class SparseEfficiencyError(ValueError):
    """A sparse operation would store many zeros explicitly (e.g. ``bcoo_update_layout``
    turning a long sparse axis into a batch axis); pass ``on_inefficient=None`` or
    'warn' to allow it."""


class SparseEfficiencyWarning(UserWarning):
    """The warning form of :class:`SparseEfficiencyError`."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """JAX's cuSPARSE-specific warning; xform has no cuSPARSE lowering, so never raised."""


class BCOOProperties(NamedTuple):
    n_batch: int
    n_sparse: int
    n_dense: int
    nse: int


def validate_indices(indices, shape) -> BCOOProperties:
    """Layout of ``indices`` (``[*batch, nse, n_sparse]``) against ``shape``."""
    if not issubdtype(indices.dtype, np.integer):
        raise TypeError(f"BCOO indices must be integers, got dtype {indices.dtype}")
    shape = tuple(shape)
    if indices.ndim < 2:
        raise ValueError(f"BCOO indices must have at least 2 dimensions [..., nse, n_sparse]; "
                         f"got indices.shape={indices.shape}")
    nse, n_sparse = indices.shape[-2:]
    n_batch = indices.ndim - 2
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"Invalid indices.shape={indices.shape} for shape={shape}: "
                         f"n_batch + n_sparse = {n_batch + n_sparse} > {len(shape)} dimensions")
    if any(s1 not in (1, s2) for s1, s2 in zip(indices.shape[:n_batch], shape[:n_batch])):
        raise ValueError("indices batch dimensions not compatible for "
                         f"indices.shape={indices.shape}, shape={shape}")
    return BCOOProperties(n_batch, n_sparse, n_dense, nse)


def validate_bcoo(data, indices, shape) -> BCOOProperties:
    """Layout of a (data, indices, shape) triple; ValueError naming the shapes if invalid."""
    props = validate_indices(indices, shape)
    n_batch, n_sparse, n_dense, nse = props
    shape = tuple(shape)
    if data.ndim < n_batch + 1 or any(
            s1 not in (1, s2) for s1, s2 in zip(data.shape[:n_batch], shape[:n_batch])):
        raise ValueError("data batch dimensions not compatible for "
                         f"data.shape={data.shape}, shape={shape}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + n_sparse:]:
        raise ValueError(f"Invalid data.shape={data.shape} for nse={nse}, n_batch={n_batch}, "
                         f"n_dense={n_dense}")
    return props


def concrete_int(x, what):
    """``x`` as a Python int, or ConcretizationTypeError naming ``what`` if traced."""
    return int(np.asarray(concrete_or_raise(
        x, f"The {what} must be concrete here: it decides the size of the sparse "
        "representation. Pass nse= explicitly to use it under jit/vmap/grad.\n")))


def remaining(original, *removed_lists):
    removed = set().union(*removed_lists)
    return [i for i in original if i not in removed]


def _broadcasting_vmap(fun):
    """vmap over axis 0 of every argument, where size-1 axes broadcast (are unmapped)."""
    def batched(*args):
        size = max(a.shape[0] for a in args)
        if any(a.shape[0] not in (1, size) for a in args):
            raise ValueError("broadcasting_vmap: mismatched batch sizes "
                             f"{[a.shape[0] for a in args]}")
        if size > 1:
            axes = tuple(None if a.shape[0] == 1 else 0 for a in args)
            args = [lax.squeeze(a, (0,)) if d is None else a for a, d in zip(args, axes)]
            return vmap(fun, in_axes=axes)(*args)
        return vmap(fun)(*args)
    return batched


def nfold_vmap(fun, n, *, broadcasted=True):
    """``fun`` vmapped over ``n`` leading axes (size-1 axes broadcast if ``broadcasted``)."""
    for _ in range(n):
        fun = _broadcasting_vmap(fun) if broadcasted else vmap(fun)
    return fun


def dense_aval(shape, dtype):
    return ShapedArray(tuple(shape), np.dtype(dtype))
