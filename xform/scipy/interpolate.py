"""``xform.scipy.interpolate``: ``RegularGridInterpolator`` (linear or nearest
interpolation on a rectilinear grid), as ``jax.scipy.interpolate``. The interpolator is a
pytree (grid, values and fill value its leaves), so it passes through jit and vmap."""
from itertools import product

import numpy as np

import xform.numpy as jnp
from xform.core import dtypes
from xform.core.pytree_registry import register_pytree_node
from xform.numpy import _util


def _points(xi, ndim):
    """Sample points as one (..., ndim) array (a tuple of arrays is broadcast and stacked)."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = jnp.broadcast_arrays(*xi)
        return jnp.stack([p.astype(dtypes.default_float_dtype()) for p in parts], -1)
    xi = _util.asarray(xi, "RegularGridInterpolator")
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


class RegularGridInterpolator:
    """Interpolate ``values`` given on the grid ``points`` (one increasing 1-D array per
    leading axis of ``values``), as ``scipy.interpolate.RegularGridInterpolator``.

    NB: as in JAX, ``bounds_error=True`` is not supported (no error can be raised under
    jit); points outside the grid get ``fill_value`` (None: extrapolate).

    >>> f = xform.scipy.interpolate.RegularGridInterpolator(
    ...     (jnp.array([0., 1.]),), jnp.array([0., 10.]))
    >>> f(jnp.array([[0.25], [2.]]))
    Array([2.5, nan], dtype=float32)
    """

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        self.method, self.bounds_error = method, bounds_error
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        _util.check_arraylike("RegularGridInterpolator", values)
        if len(points) > np.ndim(values):
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{np.ndim(values)} dimensions")
        values, = _util.promote_dtypes("RegularGridInterpolator", values, to="inexact")
        if fill_value is not None:
            _util.check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not np.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        self.fill_value = fill_value
        _util.check_arraylike("RegularGridInterpolator", *points)
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method=None):
        """The interpolated values at ``xi`` (..., ndim): shape ``xi.shape[:-1] +
        values.shape[ndim:]``."""
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]},"
                             f" but this RegularGridInterpolator has dimension {ndim}")
        xi_shape = xi.shape
        xi = xi.reshape(-1, xi_shape[-1])
        indices, distances, outside = self._find_indices(xi.T)
        if method == "linear":
            result = self._evaluate_linear(indices, distances)
        else:
            result = self.values[tuple(jnp.where(d <= .5, i, i + 1)
                                       for i, d in zip(indices, distances))]
        if self.fill_value is not None:
            mask = outside.reshape(result.shape[:1] + (1,) * (result.ndim - 1))
            result = jnp.where(mask, self.fill_value, result)
        return result.reshape(xi_shape[:-1] + self.values.shape[ndim:])

    def _evaluate_linear(self, indices, distances):
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        out = jnp.asarray(0.)
        for corner in product(*[[i, i + 1] for i in indices]):   # the cell's 2^ndim corners
            weight = jnp.asarray(1.)
            for ci, i, d in zip(corner, indices, distances):
                weight = weight * jnp.where(ci == i, 1 - d, d)
            out = out + self.values[corner] * weight[trailing]
        return out

    def _find_indices(self, xi):
        """Each point's cell (lower index per axis, clamped to the grid), its normalized
        position in the cell, and whether it lies outside the grid."""
        indices, distances = [], []
        outside = jnp.zeros((xi.shape[1],), dtype=bool)
        for x, g in zip(xi, self.grid):
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            indices.append(i)
            distances.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, distances, outside


register_pytree_node(
    RegularGridInterpolator,
    lambda f: ((f.grid, f.values, f.fill_value), (f.method, f.bounds_error)),
    lambda aux, children: RegularGridInterpolator(*children[:2], *aux, *children[2:]))
