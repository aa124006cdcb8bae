"""``xform.scipy.ndimage``: ``map_coordinates`` (order 0 or 1 interpolation of an array at
arbitrary coordinates), as ``jax.scipy.ndimage``.

Each coordinate axis contributes one (nearest) or two (linear) neighbours with weights;
the result sums the weighted gathers over their product."""
import functools
import itertools
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import dtypes
from xform.interpreters.composite import composite


def _mirror(index, size):
    s = size - 1   # half-wavelength of the triangular wave
    return jnp.abs((index + s) % (2 * s) - s)


def _reflect(index, size):
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_INDEX_FIXERS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(a):
    return a if dtypes.issubdtype(a.dtype, np.integer) else lax.round(a)


def _nearest(coordinate):
    return [(_round_half_away(coordinate).astype(np.int32), 1)]


def _linear(coordinate):
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


@composite(static=("order", "mode", "cval"))   # (one compiled call eagerly, as JAX's jit)
def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """Interpolate ``input`` at ``coordinates`` (one array per axis of ``input``), as
    ``scipy.ndimage.map_coordinates``: ``order`` 0 (nearest) or 1 (linear); ``mode``
    says how out-of-range coordinates are handled (``"constant"`` gives ``cval``).

    >>> x = jnp.arange(4.)
    >>> xform.scipy.ndimage.map_coordinates(x, [jnp.array([0.5, 2.25])], order=1)
    Array([0.5 , 2.25], dtype=float32)
    """
    x = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, x.dtype)
    if len(coords) != x.ndim:
        raise ValueError("coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {x.ndim}")
    fix = _INDEX_FIXERS.get(mode)
    if fix is None:
        raise NotImplementedError(
            f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
            f"Currently supported modes are {set(_INDEX_FIXERS)}.")
    if order not in (0, 1):
        raise NotImplementedError(
            "jax.scipy.ndimage.map_coordinates currently requires order<=1")
    nodes = _nearest if order == 0 else _linear
    per_axis = []
    for coordinate, size in zip(coords, x.shape):
        per_axis.append([(fix(index, size),
                          ((0 <= index) & (index < size)) if mode == "constant" else True,
                          weight) for index, weight in nodes(coordinate)])
    outputs = []
    for items in itertools.product(*per_axis):
        indices, valid, weights = zip(*items)
        part = x[indices]
        if not all(v is True for v in valid):
            part = jnp.where(functools.reduce(operator.and_, valid), part, cval)
        outputs.append(functools.reduce(operator.mul, weights) * part)
    result = functools.reduce(operator.add, outputs)
    if dtypes.issubdtype(x.dtype, np.integer):
        result = _round_half_away(result)
    return result.astype(x.dtype)
