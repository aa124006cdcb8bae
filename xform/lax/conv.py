"""conv_general_dilated (N-d convolution with strides, padding, lhs/rhs dilation,
feature and batch groups, any layout) and its public wrappers.

Bilinear: the transposes are convolutions again (JAX's formulation): the lhs
cotangent convolves the output cotangent with the spatially reversed kernel (strides
become lhs dilation), the rhs cotangent convolves the input with the output cotangent
(strides become rhs dilation); groups are moved between feature and batch dimensions.
"""
from typing import NamedTuple, Union

import numpy as np

from xform.core import dtypes, shape_poly
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, ffi, mlir
from xform.lax._prim import check_dtype, numeric_or_bool, standard_primitive
from xform.lax import shapes
from xform.lax.dot import (accumulate_lowering, canonicalize_precision, precision_attr,
                           preferred_dtype)
from xform.lax.complex import complex as make_complex, imag, real
from xform.lax.elementwise import add, convert_element_type, sub
from xform.lax.windowed import conv_vjp_lhs_padding, dilate_shape, padtype_to_pads

hlo, ir = mlir.hlo, mlir.ir


class ConvDimensionNumbers(NamedTuple):
    """Dimension indices of each operand: ``lhs_spec = (batch, feature, spatial...)``,
    ``rhs_spec = (out feature, in feature, spatial...)``, ``out_spec = (batch, feature,
    spatial...)``; spatial dimensions in the same order in all three."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


# The ``dimension_numbers`` a convolution accepts (a type alias, as JAX's).
ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


def conv_general_permutations(dimension_numbers):
    """Specs from layout strings such as ``('NHWC', 'HWIO', 'NHWC')``."""
    lhs_s, rhs_s, out_s = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (spec, (a, b)) in enumerate(zip(dimension_numbers, pairs)):
        if spec.count(a) != 1 or spec.count(b) != 1 or len(set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the "
                            f"characters '{a}' and '{b}' exactly once and no repeats, got "
                            f"{spec!r}")
    spatial = [set(s) - set(p) for s, p in zip(dimension_numbers, pairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError(f"convolution dimension_numbers must have the same spatial "
                        f"dimensions in all three specs, got {dimension_numbers}")

    def perm(spec, pair):
        sp = sorted((i for i, c in enumerate(spec) if c not in pair),
                    key=lambda i: rhs_s.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(sp)
    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """A ``ConvDimensionNumbers`` from None (NCHW, OIHW, NCHW), specs, or strings.

    >>> conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs of equal rank, got shapes "
                        f"{tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        spec = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(spec, spec, spec)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(map(int, s)) for s in dimension_numbers))
    if len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers must be None, a "
                        f"ConvDimensionNumbers or three layout strings, got "
                        f"{dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        if any(len(s) != len(lhs_shape) for s in dimension_numbers):
            raise TypeError(f"convolution dimension_numbers {dimension_numbers} do not "
                            f"match operand rank {len(lhs_shape)}")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*(tuple(map(int, s)) for s in dimension_numbers))


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General N-d convolution (cross-correlation, as in XLA and JAX).

    Args:
      lhs: input, ``(N, C, spatial...)`` in the layout of ``dimension_numbers``.
      rhs: kernel, ``(O, I, spatial...)`` with ``I = C / feature_group_count``.
      window_strides: stride per spatial dimension.
      padding: 'SAME', 'SAME_LOWER', 'VALID', or one ``(low, high)`` pair per spatial
        dimension.
      lhs_dilation: input dilation per spatial dimension (transposed convolution).
      rhs_dilation: kernel dilation per spatial dimension (atrous convolution).
      dimension_numbers: None (NCHW, OIHW, NCHW), a ``ConvDimensionNumbers``, or layout
        strings such as ``('NHWC', 'HWIO', 'NHWC')``.
      feature_group_count: split input features into groups (depthwise: = C).
      batch_group_count: split the batch into groups (used by the kernel gradient).
      precision: ``None``, a ``lax.Precision`` or a pair of them.
      preferred_element_type: accumulation / result dtype.

    Returns:
      The output, ``(N / batch_group_count, O, spatial...)`` in ``out_spec`` layout.

    Raises:
      TypeError, ValueError: for inconsistent shapes, groups or parameters (the message
        names them).

    >>> x = jnp.ones((1, 4, 4, 1)); k = jnp.ones((3, 3, 1, 1))
    >>> conv_general_dilated(x, k, (1, 1), "SAME",
    ...                      dimension_numbers=("NHWC", "HWIO", "NHWC"))[0, :, :, 0]
    Array([[4., 6., 6., 4.],
           [6., 9., 9., 6.],
           [6., 9., 9., 6.],
           [4., 6., 6., 4.]], dtype=float32)
    """
    lhs_aval, rhs_aval = get_aval(lhs), get_aval(rhs)
    dnums = conv_dimension_numbers(lhs_aval.shape, rhs_aval.shape, dimension_numbers)
    nsp = lhs_aval.ndim - 2
    ones = (1,) * nsp
    window_strides = tuple(map(int, window_strides))
    lhs_dilation = ones if lhs_dilation is None else tuple(map(int, lhs_dilation))
    rhs_dilation = ones if rhs_dilation is None else tuple(map(int, rhs_dilation))
    if isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise ValueError("String padding is not implemented for transposed convolution "
                         "using this op. Please either exactly specify the required "
                         "padding or use conv_transpose.")
    if isinstance(padding, str):
        window = dilate_shape([rhs_aval.shape[d] for d in dnums.rhs_spec[2:]], rhs_dilation)
        padding = padtype_to_pads([lhs_aval.shape[d] for d in dnums.lhs_spec[2:]], window,
                                  window_strides, padding)
    padding = tuple(shapes._ints(p, "padding") for p in padding)
    if any(shape_poly.is_symbolic_dim(d) for p in padding for d in p) and lhs_dilation == ones:
        # symbolic pads (a strided 'SAME' of a symbolic dimension): pad with zeros first
        # (lax.pad computes the amounts), then a convolution without padding
        config = [(0, 0, 0)] * lhs_aval.ndim
        for d, (lo, hi) in zip(dnums.lhs_spec[2:], padding):
            config[d] = (lo, hi, 0)
        lhs, padding = shapes.pad(lhs, convert_element_type(0, lhs_aval.dtype), config), \
            ((0, 0),) * nsp
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=int(feature_group_count),
        batch_group_count=int(batch_group_count),
        precision=canonicalize_precision(precision),
        preferred_element_type=preferred_dtype(preferred_element_type))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in NCHW/OIHW layout with 'SAME'/'VALID' or explicit padding.

    >>> conv(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 2)), (1,), "VALID")
    Array([[[2., 2.]]], dtype=float32)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation,
                              rhs_dilation, precision=None, preferred_element_type=None):
    """Convolution in NCHW/OIHW layout with dilations.

    >>> conv_with_general_padding(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 2)), (1,),
    ...                           ((0, 0),), (2,), None)
    Array([[[1., 1., 1., 1.]]], dtype=float32)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation,
                                rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def _conv_transpose_padding(k, s, padding):
    """``(low, high)`` padding of the stride-dilated input along one axis, for a
    kernel of (dilated) size ``k``, stride ``s`` and the forward conv's ``padding``."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """N-d transposed convolution: a fractionally strided ``conv_general_dilated`` (the
    input dilated by ``strides``), with Keras ``Conv2DTranspose`` output sizes.

    Args:
      lhs: input of rank ``n + 2``.
      rhs: kernel of rank ``n + 2``.
      strides: ``n`` ints, the fractional stride (input dilation).
      padding: 'SAME' or 'VALID' (the forward conv's padding), or ``n`` ``(low, high)``
        pairs padding the dilated input (with ``use_consistent_padding``: the forward
        conv's padding, as PyTorch reads it).
      rhs_dilation: kernel dilation per spatial axis.
      dimension_numbers: as ``conv_general_dilated``; default channels-last
        (``('NHWC', 'HWIO', 'NHWC')`` and its 1-d/3-d analogues).
      transpose_kernel: flip the kernel's spatial axes and swap its I/O axes (the
        gradient of a forward conv with the same kernel).
      precision, preferred_element_type: as ``conv_general_dilated``.
      use_consistent_padding: read explicit pairs as the forward conv's padding.

    Returns:
      The transposed convolution.

    >>> conv_transpose(jnp.ones((1, 2, 1)), jnp.ones((3, 1, 1)), (2,), "SAME")[0, :, 0]
    Array([1., 1., 2., 1.], dtype=float32)
    """
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    ndim = len(lhs_shape)
    if ndim != len(rhs_shape) or ndim < 2:
        raise TypeError(f"conv_transpose requires lhs and rhs of equal rank >= 2, got "
                        f"shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        if ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[ndim]
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    k_sdims = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    rhs_dilation = (1,) * (ndim - 2) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or padding in ("SAME", "VALID"):
        per_axis = [padding] * len(strides) if isinstance(padding, str) else padding
        pads = tuple(_conv_transpose_padding((k - 1) * r + 1, s, p)
                     for k, r, s, p in zip(k_sdims, rhs_dilation, strides, per_axis))
    else:
        pads = padding
    if transpose_kernel:
        rhs = shapes.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = shapes.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), pads, strides, rhs_dilation,
                                dn, precision=precision,
                                preferred_element_type=preferred_element_type)


# ---- abstract eval ----

def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count,
                        precision, preferred_element_type):
    name = "conv_general_dilated"
    check_dtype(name, lhs.dtype, numeric_or_bool)
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{name} requires lhs and rhs of the same dtype, got "
                        f"{lhs.dtype.name} and {rhs.dtype.name}")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise TypeError(f"{name} requires lhs and rhs of the same rank >= 2, got shapes "
                        f"{lhs.shape} and {rhs.shape}")
    for spec, what in ((lhs_spec, "lhs_spec"), (rhs_spec, "rhs_spec"),
                       (out_spec, "out_spec")):
        if sorted(spec) != list(range(lhs.ndim)):
            raise TypeError(f"{name} dimension_numbers {what} {spec} is not a permutation "
                            f"of the {lhs.ndim} operand dimensions")
    nsp = lhs.ndim - 2
    for v, what in ((window_strides, "window_strides"), (lhs_dilation, "lhs_dilation"),
                    (rhs_dilation, "rhs_dilation"), (padding, "padding")):
        if len(v) != nsp:
            raise TypeError(f"{name} {what} {v} must have one entry per spatial "
                            f"dimension ({nsp})")
    for v, what in ((window_strides, "window_strides"), (lhs_dilation, "lhs_dilation"),
                    (rhs_dilation, "rhs_dilation"), ((feature_group_count,),
                    "feature_group_count"), ((batch_group_count,), "batch_group_count")):
        if any(i < 1 for i in v):
            raise ValueError(f"{name} {what} must be positive, got {v}")
    n, c = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
    o, i = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(f"{name}: at most one of feature_group_count and "
                         f"batch_group_count may be > 1, got {feature_group_count} and "
                         f"{batch_group_count}")
    if c % feature_group_count or c // feature_group_count != i:
        raise ValueError(f"{name}: lhs feature dimension {c} divided by "
                         f"feature_group_count={feature_group_count} must equal the rhs "
                         f"input feature dimension {i} (shapes {lhs.shape}, {rhs.shape})")
    for g, what in ((feature_group_count, "feature_group_count"),
                    (batch_group_count, "batch_group_count")):
        if o % g:
            raise ValueError(f"{name}: rhs output feature dimension {o} must be a multiple "
                             f"of {what}={g}")
    if n % batch_group_count:
        raise ValueError(f"{name}: batch_group_count={batch_group_count} must divide the "
                         f"lhs batch dimension {n}")
    lhs_sp = dilate_shape([lhs.shape[d] for d in lhs_spec[2:]], lhs_dilation)
    rhs_sp = dilate_shape([rhs.shape[d] for d in rhs_spec[2:]], rhs_dilation)
    if any(x + lo + hi < 0 for x, (lo, hi) in zip(lhs_sp, padding)):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={padding} for lhs spatial shape "
                         f"{tuple(lhs_sp)} (after lhs_dilation)")
    out_sp = [max((x + lo + hi - k) // s + 1, 0) if x + lo + hi >= k else 0
              for x, k, s, (lo, hi) in zip(lhs_sp, rhs_sp, window_strides, padding)]
    out = [0] * lhs.ndim
    out[out_spec[0]], out[out_spec[1]] = n // batch_group_count, o
    for d, size in zip(out_spec[2:], out_sp):
        out[d] = size
    if preferred_element_type is not None:
        _check_preferred(lhs.dtype, preferred_element_type)
    dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(out, dtype, lhs.weak_type and rhs.weak_type)


def _check_preferred(in_dtype, pref):
    # JAX's convolution rule (stricter than dot_general's): same kind (int -> float
    # allowed), signed stays signed, never narrower.
    kinds = (np.integer, np.floating, np.complexfloating)
    if not (dtypes.issubdtype(in_dtype, np.integer) and dtypes.issubdtype(pref, np.floating)):
        if any(dtypes.issubdtype(in_dtype, k) and not dtypes.issubdtype(pref, k)
               for k in kinds):
            raise TypeError(f"conv_general_dilated: preferred_element_type {pref.name} is "
                            f"incompatible with input type {in_dtype.name}; the compatible "
                            "combinations are (integral, integral), (integral, floating), "
                            "(floating, floating), (complex, complex)")
        if (dtypes.issubdtype(in_dtype, np.signedinteger)
                and not dtypes.issubdtype(pref, np.signedinteger)):
            raise TypeError("`preferred_element_type` must have the same signedness as the "
                            f"original type, got {pref.name} for {in_dtype.name}")
    if np.dtype(pref).itemsize < np.dtype(in_dtype).itemsize:
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        f"type, got {pref.name} for {in_dtype.name}")


# ---- transposes ----

def _axis_into(src, dst, x):
    """Merge axis ``src`` into ``dst`` (numbered without ``src``) as its major part."""
    shape = get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [s for i, s in enumerate(shape) if i != src]
    new[dst] *= shape[src]
    return shapes.reshape(x, new, perm)


def _axis_out_of(src, size, x):
    """Split axis ``src`` into (``size``, rest)."""
    shape = list(get_aval(x).shape)
    shape[src:src + 1] = [size, shape[src] // size]
    return shapes.reshape(x, shape)


def _swap01(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _conv_transpose_lhs(ct, x, y, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count,
                        precision, preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape, rhs_shape = x.aval.shape, get_aval(y).shape
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:   # the groups move from the kernel's O into its I dimension
        y = _axis_into(rhs_spec[0], rhs_spec[1], _axis_out_of(rhs_spec[0], groups, y))
    pads = conv_vjp_lhs_padding(
        [lhs_shape[d] for d in lhs_spec[2:]], [rhs_shape[d] for d in rhs_spec[2:]],
        window_strides, [get_aval(ct).shape[d] for d in out_spec[2:]], padding,
        lhs_dilation, rhs_dilation)
    y = shapes.rev(y, rhs_spec[2:])
    if get_aval(y).dtype != get_aval(ct).dtype:
        y = convert_element_type(y, get_aval(ct).dtype)
    out = conv_general_dilated(
        ct, y, lhs_dilation, pads, window_strides, rhs_dilation,
        ConvDimensionNumbers(out_spec, _swap01(rhs_spec), lhs_spec), groups, 1, precision)
    if batch_group_count > 1:
        out = _axis_into(lhs_spec[1], lhs_spec[0],
                         _axis_out_of(lhs_spec[1], batch_group_count, out))
    if get_aval(out).dtype != x.aval.dtype:
        out = convert_element_type(out, x.aval.dtype)
    return out


def _conv_transpose_rhs(ct, x, y, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count,
                        precision, preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape, rhs_shape = get_aval(x).shape, y.aval.shape
    if get_aval(ct).size == 0:
        return shapes.full(rhs_shape, 0, y.aval.dtype)
    lhs_sp = dilate_shape([lhs_shape[d] for d in lhs_spec[2:]], lhs_dilation)
    rhs_sp = dilate_shape([rhs_shape[d] for d in rhs_spec[2:]], rhs_dilation)
    out_sp = dilate_shape([get_aval(ct).shape[d] for d in out_spec[2:]], window_strides)
    pads = [(lo, (o - li) + (r - lo - 1))
            for (lo, _), li, r, o in zip(padding, lhs_sp, rhs_sp, out_sp)]
    if get_aval(x).dtype != get_aval(ct).dtype:
        x = convert_element_type(x, get_aval(ct).dtype)
    # feature groups of the forward conv become batch groups here, and vice versa.
    out = conv_general_dilated(
        x, ct, rhs_dilation, pads, lhs_dilation, window_strides,
        ConvDimensionNumbers(_swap01(lhs_spec), _swap01(out_spec), _swap01(rhs_spec)),
        batch_group_count, feature_group_count, precision)
    if get_aval(out).dtype != y.aval.dtype:
        out = convert_element_type(out, y.aval.dtype)
    return out


# ---- batching ----

def _conv_batch(vals, dims, **params):
    # Fold the vmapped axis into the batch dimension (lhs only), the output features
    # (rhs only), or, when both are batched or groups are in play, into groups.
    (x, y), (dx, dy) = vals, dims
    if any(d is not None and get_aval(v).shape[d] == 0 for v, d in zip(vals, dims)):
        # A size-0 batch can't be folded into features or groups (a 0-sized group
        # count): the result is empty, shaped by the per-example rule, as JAX's.
        avals = [ShapedArray(tuple(n for i, n in enumerate(get_aval(v).shape) if i != d),
                             get_aval(v).dtype) for v, d in zip(vals, dims)]
        out = _conv_abstract_eval(*avals, **params)
        return shapes.full((0, *out.shape), 0, out.dtype), 0
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    if dy is None and bgc == 1:
        size = get_aval(x).shape[dx]
        out = conv_general_dilated_p.bind(_axis_into(dx, lhs_spec[0], x), y, **params)
        return _axis_out_of(out_spec[0], size, out), out_spec[0]
    if dx is None and fgc == 1 and bgc == 1:
        size = get_aval(y).shape[dy]
        out = conv_general_dilated_p.bind(x, _axis_into(dy, rhs_spec[0], y), **params)
        return _axis_out_of(out_spec[1], size, out), out_spec[1]
    size = batching.axis_size_of(vals, dims)
    x = batching.bdim_at_front(x, dx, size)
    y = batching.bdim_at_front(y, dy, size)
    if bgc > 1:
        x = _axis_into(0, lhs_spec[0], x)
        params = dict(params, batch_group_count=bgc * size)
    else:
        x = _axis_into(0, lhs_spec[1], x)
        params = dict(params, feature_group_count=fgc * size)
    out = conv_general_dilated_p.bind(x, _axis_into(0, rhs_spec[0], y), **params)
    return _axis_out_of(out_spec[1], size, out), out_spec[1]


# ---- lowering ----

def _gauss_complex_conv(x, y, **params):
    """A complex convolution as three real ones (Gauss's product), as JAX lowers it on
    CPU and GPU (XLA's complex convolution is slow there); its NaN and inf pattern
    differs from the direct complex product's, so xform computes the same."""
    pet = params["preferred_element_type"]
    real_pet = None if pet is None else dtypes.finfo(pet).dtype
    params = dict(params, preferred_element_type=real_pet)
    conv = lambda a, b: conv_general_dilated_p.bind(a, b, **params)   # noqa: E731
    xr, xi, yr, yi = real(x), imag(x), real(y), imag(y)
    k1 = conv(add(xr, xi), yr)
    k2 = conv(xr, sub(yi, yr))
    k3 = conv(xi, add(yr, yi))
    return make_complex(sub(k1, k3), add(k1, k2))


def _conv_lowering(ctx, x, y, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    if (dtypes.is_complex(ctx.avals_in[0].dtype)
            and ctx.module_ctx.platform in ("cpu", *ffi.GPU_PLATFORMS)):
        return mlir.lower_fun(_gauss_complex_conv, multiple_results=False)(
            ctx, x, y, window_strides=window_strides, padding=padding,
            lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
            dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
            batch_group_count=batch_group_count, precision=precision,
            preferred_element_type=preferred_element_type)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    dn = hlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
        input_spatial_dimensions=list(lhs_spec[2:]),
        kernel_output_feature_dimension=rhs_spec[0],
        kernel_input_feature_dimension=rhs_spec[1],
        kernel_spatial_dimensions=list(rhs_spec[2:]),
        output_batch_dimension=out_spec[0], output_feature_dimension=out_spec[1],
        output_spatial_dimensions=list(out_spec[2:]))
    nsp = len(window_strides)
    pads = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(nsp, 2))
    return accumulate_lowering(ctx, lambda ty: hlo.convolution(
        ty, x, y, dn, feature_group_count, batch_group_count,
        window_strides=mlir.dense_i64(window_strides), padding=pads,
        lhs_dilation=mlir.dense_i64(lhs_dilation), rhs_dilation=mlir.dense_i64(rhs_dilation),
        precision_config=precision_attr(precision)))


conv_general_dilated_p = standard_primitive("conv_general_dilated", _conv_abstract_eval)
ad.defbilinear(conv_general_dilated_p, _conv_transpose_lhs, _conv_transpose_rhs)
batching.primitive_batchers[conv_general_dilated_p] = _conv_batch
mlir.register_lowering(conv_general_dilated_p, _conv_lowering)
