"""``xform.scipy.fft``: the type-2 discrete cosine transform and its inverse (``dct``,
``dctn``, ``idct``, ``idctn``) through one complex FFT per axis, as ``jax.scipy.fft``.

The DCT-II of ``x`` (length N) is ``2 Re(W4^k FFT(v))`` with ``v`` the even-indexed
entries followed by the odd-indexed ones reversed and ``W4^k = exp(-i pi k / 2N)``.
NB: ``dctn`` transforms one axis at a time (the DCT is separable) where JAX pairs axes
into 2-D FFTs; the results agree to rounding."""
import math
import operator

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.numpy import _util


def _check(name, x, type, norm):
    x = _util.asarray(x, name)
    if type != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm is not None and norm not in ("backward", "ortho"):
        raise ValueError(f"jax.scipy.fft.{name}: norm={norm!r} is not implemented")
    return x


def _w4(n, k):
    return jnp.exp((-0.5j * np.pi / n) * k)   # (k real: a weak complex scalar keeps its width)


def _along(v, axis, ndim):
    return lax.expand_dims(v, [a for a in range(ndim) if a != axis])


def _resize(x, n, axis):
    """``x`` zero-padded or truncated to length ``n`` along ``axis``."""
    if n is None:
        return x
    return lax.pad(x, lax.full((), 0, x.dtype),
                   [(0, n - x.shape[axis] if a == axis else 0, 0) for a in range(x.ndim)])


def _ortho_norm(out, axis):
    n = out.shape[axis]
    factor = lax.concatenate([lax.full((1,), 4, out.dtype), lax.full((n - 1,), 2, out.dtype)],
                             0)
    return out / lax.sqrt(_along(factor, axis, out.ndim) * n)


def _complex_parts(fn, x, **kw):
    return lax.complex(fn(jnp.real(x), **kw), fn(jnp.imag(x), **kw))


def dct(x, type=2, n=None, axis=-1, norm=None):
    """Discrete cosine transform (type 2) along ``axis``, as ``scipy.fft.dct``; ``n``
    pads or truncates first; ``norm="ortho"`` makes it orthonormal.

    >>> xform.scipy.fft.dct(jnp.array([1., 1.]))
    Array([4., 0.], dtype=float32)
    """
    x = _check("dct", x, type, norm)
    if jnp.iscomplexobj(x):
        return _complex_parts(dct, x, n=n, axis=axis, norm=norm)
    x, = _util.promote_dtypes("dct", x, to="inexact")
    axis = _util.canonicalize_axis(axis, x.ndim)
    x = _resize(x, n, axis)
    size = x.shape[axis]
    v = lax.concatenate([lax.slice_in_dim(x, 0, None, 2, axis),
                         lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))], axis)
    k = _along(jnp.arange(size, dtype=x.dtype), axis, x.ndim)
    out = 2 * jnp.real(jnp.fft.fft(v, axis=axis) * _w4(size, k))
    return _ortho_norm(out, axis) if norm == "ortho" else out


def idct(x, type=2, n=None, axis=-1, norm=None):
    """Inverse of :func:`dct` (the type-3 DCT, scaled), as ``scipy.fft.idct``."""
    x = _check("idct", x, type, norm)
    if jnp.iscomplexobj(x):
        return _complex_parts(idct, x, n=n, axis=axis, norm=norm)
    x, = _util.promote_dtypes("idct", x, to="inexact")
    axis = _util.canonicalize_axis(axis, x.ndim)
    x = _resize(x, n, axis)
    size = x.shape[axis]
    if norm is None or norm == "backward":
        x = _ortho_norm(x, axis)
    x = _ortho_norm(x, axis)
    k = _along(jnp.arange(size, dtype=x.dtype), axis, x.ndim)
    v = jnp.real(jnp.fft.ifft(x / _w4(size, k) * (2 * size), axis=axis))
    # undo the interleave: the first ceil(N/2) entries are the even positions
    half = math.ceil(size / 2)
    out = jnp.zeros(v.shape, v.dtype)
    evens = tuple(slice(None, None, 2) if a == axis else slice(None) for a in range(v.ndim))
    odds = tuple(slice(1, None, 2) if a == axis else slice(None) for a in range(v.ndim))
    out = out.at[evens].set(lax.slice_in_dim(v, 0, half, 1, axis))
    return out.at[odds].set(lax.rev(lax.slice_in_dim(v, half, None, 1, axis), (axis,)))


def _nd(name, one_d, x, type, s, axes, norm):
    x = _check(name, x, type, norm)
    if s is not None:
        s = [operator.index(s)] if np.ndim(s) == 0 else list(s)
        if len(s) > x.ndim:
            raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s) if s is not None else 0, x.ndim))
    else:
        axes = tuple(_util.canonicalize_axis(a, x.ndim) for a in axes)
        if len(set(axes)) != len(axes):   # (each axis would be transformed twice)
            raise ValueError(f"repeated axis: {axes}")
    ns = dict(zip(axes, s)) if s is not None else {}
    for axis in axes:
        x = one_d(x, n=ns.get(axis), axis=axis, norm=norm)
    return x


def dctn(x, type=2, s=None, axes=None, norm=None):
    """Multidimensional :func:`dct` over ``axes`` (default: all, or the last ``len(s)``),
    as ``scipy.fft.dctn``.

    >>> xform.scipy.fft.dctn(jnp.ones((2, 2)))
    Array([[16.,  0.],
           [ 0.,  0.]], dtype=float32)
    """
    return _nd("dctn", dct, x, type, s, axes, norm)


def idctn(x, type=2, s=None, axes=None, norm=None):
    """Multidimensional :func:`idct`, as ``scipy.fft.idctn``."""
    return _nd("idctn", idct, x, type, s, axes, norm)
