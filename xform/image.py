"""``xform.image``: ``jax.image``'s resampling (``resize``, ``scale_and_translate``).

Every method except nearest is separable: along each resized dimension the output is a
weighted sum of input samples, the weights a kernel of the distance between an output
pixel's centre mapped back to the input and each input pixel's centre (stretched by the
inverse scale when downsampling with ``antialias``), normalized per output pixel. The
per-dimension weight matrices are contracted with the image in one einsum, as JAX does,
so values agree to rounding. ``resize`` dispatches eagerly as one compiled call (JAX
jits it); the shape, method, antialias and precision are static.
"""
import enum
import math

import numpy as np

from xform import lax
from xform import numpy as jnp
from xform.core import dtypes
from xform.interpreters.composite import composite
from xform.numpy import _util

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Resampling method: NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys, a = -0.5),
    CUBIC_PYTORCH (a = -0.75 with repeated edges when not antialiased, as PyTorch and
    OpenCV; CUBIC when antialiased), AREA (the overlap of pixel intervals)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str):
        method = _NAMES.get(s)
        if method is None:
            raise ValueError(f'Unknown resize method "{s}"')
        return method


_NAMES = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
          "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
          "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
          "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
          "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
          "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
          "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}


# ---- kernels of the (non-negative) distance x, in input pixels ----

def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


def _lanczos(radius):
    def kernel(x):
        y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)
        out = jnp.where(x > 1e-3, jnp.divide(y, safe), 1)   # (the limit 1 at 0)
        return jnp.where(x > radius, 0., out)
    return kernel


def _cubic(a):
    """Keys' cubic convolution kernel with parameter ``a``."""
    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


def _keys_cubic(x):  # a = -0.5, written as JAX evaluates it (same roundings)
    near = ((1.5 * x - 2.5) * x) * x + 1.
    far = ((-0.5 * x + 2.5) * x - 4.) * x + 2.
    return jnp.where(x >= 2., 0., jnp.where(x >= 1., far, near))


_AREA = object()   # (weights from interval overlaps, not a kernel of the distance)
_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.)), ResizeMethod.CUBIC: (2, _keys_cubic),
            ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)), ResizeMethod.AREA: (1, _AREA)}


def _normalized(weights, total):
    """``weights / total`` per output pixel, 0 where the total is about 0."""
    tiny = 1000. * float(np.finfo(np.float32).eps)
    return jnp.where(jnp.abs(total) > tiny, jnp.divide(weights, jnp.where(total != 0, total, 1)),
                     0)


def _weights(m, n, scale, translation, kernel, antialias, edge_padding, radius):
    """The (m, n) matrix taking an input dimension of size m to an output one of n."""
    dtype = dtypes.result_type(scale, translation)
    inv_scale = 1. / scale
    out_pos = jnp.arange(n, dtype=dtype)
    # centre of each output pixel in input coordinates (pixel i's centre is i + 0.5)
    sample = (out_pos + 0.5) * inv_scale - translation * inv_scale - 0.5
    k = 0
    if edge_padding:   # k pixels past each edge, their weight moved onto the edge pixel
        k = math.ceil(radius * max(1.0 / float(scale), 1.0)) if antialias else radius
    if kernel is _AREA:   # overlap of [out_i / s - t / s, + 1 / s] with [in_j, in_j + 1]
        lo = out_pos * inv_scale - translation * inv_scale
        in_lo = jnp.arange(m, dtype=dtype)
        w = jnp.maximum(0.0, jnp.minimum((lo + inv_scale)[None, :], (in_lo + 1.0)[:, None])
                        - jnp.maximum(lo[None, :], in_lo[:, None]))
    else:
        taps = jnp.arange(-k, m + k, dtype=dtype)
        stretch = jnp.maximum(inv_scale, 1.) if antialias else 1.
        w = kernel(jnp.abs(sample[None, :] - taps[:, None]) / stretch)
    if edge_padding:
        rows = jnp.clip(taps.astype(jnp.int32), 0, m - 1)
        cols = lax.broadcast_in_dim(jnp.arange(n), (taps.shape[0], n), (1,))
        w = jnp.zeros((m, n), dtype).at[rows[:, None], cols].add(w)
        return _normalized(w, jnp.sum(w, axis=0, keepdims=True))
    w = _normalized(w, jnp.sum(w, axis=0, keepdims=True))
    # zero the outputs whose sample lies outside the input
    return jnp.where(jnp.logical_and(sample >= -0.5, sample <= m - 0.5)[None, :], w, 0)


def _resample(x, shape, dims, scales, translations, method, antialias, precision):
    if not dims:
        return x
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    operands, out_idx = [], list(range(x.ndim))
    for i, d in enumerate(dims):
        w = _weights(x.shape[d], shape[d], scales[i], translations[i], kernel, antialias,
                     edge_padding, radius).astype(x.dtype)
        operands += [w, [d, x.ndim + i]]
        out_idx[d] = x.ndim + i
    return jnp.einsum(x, list(range(x.ndim)), *operands, out_idx, precision=precision)


def _method(method):
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a string or a ResizeMethod, got {method!r}")
    return method


def _check_rank(shape, image):
    if len(shape) != np.ndim(image):
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {np.shape(image)}")


def _resize_nearest(x, shape):
    for d in range(x.ndim):
        m, n = x.shape[d], shape[d]
        if m == n:
            continue
        # (float32 offsets, as JAX's: its float64 ones round wrong on CPU and GPU)
        pos = (jnp.arange(n, dtype=np.float32) + 0.5) * m / n
        index = [slice(None)] * x.ndim
        index[d] = jnp.floor(pos.astype(np.float32)).astype(np.int32)
        x = x[tuple(index)]
    return x


@composite(static=("shape", "method", "antialias", "precision"))
def _resize(image, shape, method, antialias, precision):
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(jnp.asarray(image), shape)
    image, = _util.promote_dtypes("resize", image, to="inexact")
    dims = tuple(d for d in range(len(shape)) if image.shape[d] != shape[d])
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scales, [0.] * len(dims), method, antialias,
                     precision)


def resize(image, shape, method, antialias=True, precision=lax.Precision.HIGHEST):
    """Resize ``image`` to ``shape`` (every dimension; leave batch and channel sizes as
    they are) with ``method``: ``"nearest"``, ``"linear"``/``"bilinear"``/
    ``"trilinear"``/``"triangle"``, ``"cubic"``/``"bicubic"``/``"tricubic"``,
    ``"cubic-pytorch"``, ``"lanczos3"``, ``"lanczos5"``, ``"area"``, or a
    :class:`ResizeMethod`. ``antialias`` low-pass filters when downsampling. Nearest
    keeps the input's dtype; the others return a floating dtype.

    >>> import xform.numpy as jnp
    >>> resize(jnp.array([[0., 2.], [4., 6.]]), (1, 1), "linear")
    Array([[3.]], dtype=float32)
    """
    shape = _util.canonical_shape(shape)
    _check_rank(shape, image)
    return _resize(image, shape, _method(method), bool(antialias), precision)


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=lax.Precision.HIGHEST):
    """Resample ``image`` to ``shape`` so that input location ``x`` along
    ``spatial_dims[i]`` lands at ``x * scale[i] + translation[i]`` (pixel centres at
    ``i + 0.5``); outputs mapping outside the input are 0. Methods as :func:`resize`,
    except nearest. ``scale = (n - 1) / (m - 1)``, ``translation = 0.5 * (1 - scale)``
    imitates ``align_corners=True``."""
    shape = _util.canonical_shape(shape)
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    dims = tuple(_util.canonicalize_axis(d, len(shape), "spatial_dims")
                 for d in spatial_dims)
    if len(dims) != len(scale) or len(dims) != len(translation):
        raise ValueError(f"scale_and_translate: spatial_dims {dims}, scale of length "
                         f"{len(scale)} and translation of length {len(translation)} "
                         "must have the same length")
    return _scale_and_translate(image, shape, dims, scale, translation, method,
                                bool(antialias), precision)


@composite(static=("shape", "dims", "method", "antialias", "precision"))
def _scale_and_translate(image, shape, dims, scale, translation, method, antialias,
                         precision):
    image, = _util.promote_dtypes("scale_and_translate", image, to="inexact")
    scale, translation = _util.promote_dtypes("scale_and_translate", scale, translation,
                                              to="inexact")
    return _resample(image, shape, dims, [scale[i] for i in range(len(dims))],
                     [translation[i] for i in range(len(dims))], method, antialias,
                     precision)
