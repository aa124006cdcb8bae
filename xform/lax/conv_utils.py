"""Convolution helpers composed from ``conv_general_dilated`` and ``dot_general``:
image patches, unshared ("local") convolution, and the output-shape calculators.

``conv_general_dilated_patches`` is JAX's construction: a depthwise convolution with an
identity kernel moves each spatial offset of the filter window into its own channel.
"""
import math

import numpy as np

from xform.core.trace import get_aval
from xform.lax.conv import (_conv_transpose_padding, conv_dimension_numbers,
                            conv_general_dilated, conv_general_permutations)
from xform.lax.dot import Precision, canonicalize_precision, dot_general
from xform.lax.shapes import broadcast_in_dim, reshape, transpose
from xform.lax.windowed import padtype_to_pads, window_out_shape


def _moveaxis(x, src, dst):
    ndim = get_aval(x).ndim
    src, dst = [s % ndim for s in src], [d % ndim for d in dst]
    order = [i for i in range(ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """The patches a ``conv_general_dilated`` with a ``filter_shape`` window reads: the
    output has ``C * prod(filter_shape)`` features, channel-major (each input channel's
    window flattened row-major), laid out by ``dimension_numbers``' ``out_spec``.

    >>> import numpy as np, xform.lax as lax
    >>> x = np.arange(9.0, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID")[0, :, 0, 0]
    Array([0., 1., 3., 4.], dtype=float32)
    """
    aval = get_aval(lhs)
    filter_shape = tuple(int(d) for d in filter_shape)
    dnums = conv_dimension_numbers(aval.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dnums
    spatial = math.prod(filter_shape)
    channels = aval.shape[lhs_spec[1]]
    eye = np.eye(spatial, dtype=aval.dtype)
    rhs = broadcast_in_dim(eye, (channels, spatial, spatial), (1, 2))
    rhs = reshape(rhs, (channels * spatial, 1, *filter_shape))
    rhs = _moveaxis(rhs, (0, 1), (rhs_spec[0], rhs_spec[1]))
    return conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dnums,
        feature_group_count=channels,
        precision=None if precision is None else (precision, Precision.DEFAULT),
        preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution whose filter is not shared across positions ("locally
    connected"): ``rhs`` holds one ``(C * prod(filter_shape), O)`` filter per output
    position, laid out by ``dimension_numbers``' ``rhs_spec``."""
    c_precision = canonicalize_precision(precision)
    if c_precision is None:
        lhs_precision = None
    elif isinstance(c_precision, tuple) and len(c_precision) == 2:
        lhs_precision = c_precision[0]
    else:
        raise ValueError(f"Unsupported precision for conv_general_dilated_local: {precision}")
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           lhs_precision)
    _, rhs_spec, out_spec = conv_dimension_numbers(
        get_aval(lhs).shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    lhs_b, rhs_b = out_spec[2:], rhs_spec[2:]
    rhs_b = [rhs_b[i] for i in sorted(range(len(rhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = dot_general(patches, rhs, dn, precision=precision)
    return _moveaxis(out, (-2, -1), (out_spec[0], out_spec[1]))


# ---- output shapes ----

def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of a convolution of operands in (N, C, spatial...) order."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = np.add(lhs_shape[2:], np.sum(np.array(pads).reshape(-1, 2), axis=1))
    if np.any(padded < 0):
        raise ValueError("Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    space = window_out_shape(tuple(int(p) for p in padded), rhs_shape[2:], strides,
                             [(0, 0)] * len(strides), [1] * len(strides),
                             [1] * len(strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + tuple(space)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers):
    """The output shape of ``conv_general_dilated`` for layout-string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(tuple(np.take(lhs_shape, lhs_perm)),
                           tuple(np.take(rhs_shape, rhs_perm)), window_strides, padding)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of ``conv_transpose`` for layout-string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), int(s), padding)
                   for k, s in zip(rhs_t[2:], window_strides)]
    space = [(i - 1) * s - k + 2 + int(np.sum(p))
             for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, padding)]
    out = (lhs_t[0], rhs_t[0], *space)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))
