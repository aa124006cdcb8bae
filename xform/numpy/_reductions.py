"""Reductions: sum, prod, mean, var, std, max, min, any, all, argmax, argmin.

Result dtypes follow JAX: sum and prod promote small integers and bool to the default
int (unsigned to the default uint), mean/var/std of integers give the default float,
float16/bfloat16 are accumulated in float32; results are never weakly typed.
"""
import builtins
import math

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.lax.shapes import dimension_as_value
from xform.numpy import _util
from xform.numpy._ufuncs import logical_and, logical_or
from xform.numpy._ufuncs import where as _where
from xform.numpy._util import asarray, canonicalize_axes

# Eager calls run as one compiled call per (avals, these parameters): see composite.
# (not ``ddof``: an operand, as in JAX, so a traced ddof works and each value does not
# compile its own program)
_STATIC = ("axis", "dtype", "out", "keepdims", "initial", "promote_integers")


def _promote_integer_dtype(dt):
    if dt == dtypes.bool_:
        return dtypes.default_int_dtype()
    if dtypes.is_unsigned(dt):
        default = dtypes.default_uint_dtype()
        return default if dt.itemsize < default.itemsize else dt
    if dtypes.is_integer(dt):
        default = dtypes.default_int_dtype()
        return default if dt.itemsize < default.itemsize else dt
    return dt


def _upcast_f16(dt):
    return dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt


def _const(x, value):
    return _util.scalar_array(value, x.aval.dtype, False)


def _keep(r, axes, keepdims):
    return lax.expand_dims(r, axes) if keepdims and axes else r


def _strong(r, dtype):
    """Convert to ``dtype`` and drop any weak type (reductions are strongly typed)."""
    return lax.convert_element_type(r, dtype, False)


def _masked(name, x, where, fill):
    if where is None:
        return x
    where = asarray(where, name)
    if where.aval.dtype != dtypes.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                         f"dtype={where.aval.dtype.name}.")
    where = _util.broadcast_to(where, x.aval.shape)
    return lax.select(where, x, lax.full_like(x, _const(x, fill)))


def _no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


def _bool_reduce(x, axes, op):
    """any/all over ``axes`` of bools: JAX's reduce_or/reduce_and (``op`` reduce_max /
    reduce_min names which)."""
    return (lax.reduce_or if op is lax.reduce_max else lax.reduce_and)(x, axes)


def _tree_prod(x, axes):
    """Product over ``axes`` by pairwise multiplication (xform.lax has no reduce_prod).

    The reduced axes are moved last and flattened; each round multiplies the first
    half by the second (padding odd lengths with 1): log2(n) rounds of slice + mul.
    """
    shape = x.aval.shape
    kept = [i for i in range(len(shape)) if i not in axes]
    kept_shape = tuple(shape[i] for i in kept)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        return lax.full(kept_shape, _const(x, 1))
    x = lax.reshape(lax.transpose(x, tuple(kept) + tuple(axes)), kept_shape + (n,))
    lead = [(0, 0, 0)] * len(kept_shape)
    zeros, ends = (0,) * len(kept_shape), kept_shape
    while n > 1:
        if n % 2:
            x = lax.pad(x, _const(x, 1), lead + [(0, 1, 0)])
            n += 1
        h = n // 2
        x = lax.mul(lax.slice(x, zeros + (0,), ends + (h,)),
                    lax.slice(x, zeros + (h,), ends + (n,)))
        n = h
    return lax.reshape(x, kept_shape)


def _sum_or_prod(name, a, axis, dtype, out, keepdims, initial, where, promote_integers):
    _no_out(name, out)
    a = asarray(a, name)
    axes = canonicalize_axes(axis, a.aval.ndim)
    if dtype is None:
        result_dtype = a.aval.dtype
        if promote_integers or result_dtype == dtypes.bool_:  # JAX casts bools to numeric
            result_dtype = _promote_integer_dtype(result_dtype)
        comp_dtype = _upcast_f16(result_dtype)
    else:
        result_dtype = comp_dtype = dtypes.canonicalize_dtype(dtype)
    is_sum = name == "sum"
    x = _util.convert(a, comp_dtype)
    if comp_dtype == dtypes.bool_:  # sum of bools is "any", product "all"
        x = _masked(name, x, where, not is_sum)
        r = _bool_reduce(x, axes, lax.reduce_max if is_sum else lax.reduce_min)
        combine = logical_or if is_sum else logical_and
    else:
        x = _masked(name, x, where, 0 if is_sum else 1)
        r = lax.reduce_sum(x, axes) if is_sum else _tree_prod(x, axes)
        combine = lax.add if is_sum else lax.mul
    if initial is not None:
        init = _util.convert(initial, comp_dtype)
        if init.aval.shape:
            raise ValueError(f"initial value must be a scalar. Got array of shape "
                             f"{init.aval.shape}")
        r = combine(r, init)
    return _strong(_keep(r, axes, keepdims), result_dtype)


@composite(static=_STATIC)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    """Like numpy.sum, with JAX's dtypes: bool and small ints sum in the default int.

    float16/bfloat16 inputs are accumulated in float32 (when ``dtype`` is None).

    >>> jnp.sum(jnp.array([True, True, False]))
    Array(2, dtype=int32)
    """
    return _sum_or_prod("sum", a, axis, dtype, out, keepdims, initial, where,
                        promote_integers)


@composite(static=_STATIC)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """Like numpy.prod, with JAX's dtypes (as :func:`sum`).

    NB: computed by pairwise multiplication (xform.lax has no product reduction), so
    floating results may differ from JAX's in the last bits.

    >>> jnp.prod(jnp.array([1, 2, 3, 4]))
    Array(24, dtype=int32)
    """
    return _sum_or_prod("prod", a, axis, dtype, out, keepdims, initial, where,
                        promote_integers)


def _identity_of(dt, is_max):
    if dt == dtypes.bool_:
        return not is_max
    if dtypes.is_integer(dt):
        info = dtypes.iinfo(dt)
        return int(info.min if is_max else info.max)
    if not dtypes.supports_inf(dt):  # (float8_e4m3fn etc.: -inf would be nan)
        return float(dtypes.finfo(dt).min if is_max else dtypes.finfo(dt).max)
    return -np.inf if is_max else np.inf


def _max_or_min(name, a, axis, out, keepdims, initial, where):
    _no_out(name, out)
    a = asarray(a, name)
    is_max = name == "max"
    shape = a.aval.shape
    axes = canonicalize_axes(axis, len(shape))
    if initial is None:
        if where is not None:
            raise ValueError(f"reduction operation {name} does not have an identity, so "
                             "to use a where mask one has to specify 'initial'")
        if builtins.any(shape[d] == 0 for d in axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has "
                             "no identity")
    dt = a.aval.dtype
    x = _masked(name, a, where, _identity_of(dt, is_max))
    if dt == dtypes.bool_:
        r = _bool_reduce(x, axes, lax.reduce_max if is_max else lax.reduce_min)
    else:
        r = (lax.reduce_max if is_max else lax.reduce_min)(x, axes)
    if initial is not None:
        if isinstance(initial, (float, np.floating)) and dtypes.issubdtype(dt, np.integer):
            info = dtypes.iinfo(dt)     # saturate like XLA's convert (e.g. initial=-inf)
            initial = 0 if np.isnan(initial) else int(np.clip(initial, info.min, info.max))
        init = _util.convert(initial, dt)
        r = (logical_or if is_max else logical_and)(r, init) if dt == dtypes.bool_ \
            else (lax.max if is_max else lax.min)(r, init)
    return _strong(_keep(r, axes, keepdims), dt)


@composite(static=_STATIC)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.max (NaN-propagating)."""
    return _max_or_min("max", a, axis, out, keepdims, initial, where)


@composite(static=_STATIC)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.min (NaN-propagating)."""
    return _max_or_min("min", a, axis, out, keepdims, initial, where)


amax, amin = max, min


def _any_or_all(name, a, axis, out, keepdims, where):
    _no_out(name, out)
    a = asarray(a, name)
    axes = canonicalize_axes(axis, a.aval.ndim)
    if dtypes.is_complex(a.aval.dtype):
        a = lax.real(a)  # JAX's _cast_to_bool: any/all of complex read the real part
    x = a if a.aval.dtype == dtypes.bool_ else lax.ne(a, _const(a, 0))
    x = _masked(name, x, where, name == "all")
    r = _bool_reduce(x, axes, lax.reduce_max if name == "any" else lax.reduce_min)
    return _strong(_keep(r, axes, keepdims), dtypes.bool_)


@composite(static=_STATIC)
def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """Like numpy.any."""
    return _any_or_all("any", a, axis, out, keepdims, where)


@composite(static=_STATIC)
def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """Like numpy.all."""
    return _any_or_all("all", a, axis, out, keepdims, where)


def _count(a, axes, keepdims, where, dtype):
    if where is None:
        n = math.prod(a.aval.shape[d] for d in axes)
        if shape_poly.is_symbolic_dim(n):  # a value computed from dimension variables
            return lax.convert_element_type(dimension_as_value(n), dtype)
        return _util.scalar_array(n, dtype, False)
    return sum(_util.broadcast_to(asarray(where, "mean"), a.aval.shape), axes, dtype=dtype,
               keepdims=keepdims)


@composite(static=_STATIC)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.mean; integer and bool inputs give the default float dtype.

    float16/bfloat16 inputs are accumulated in float32.

    >>> jnp.mean(jnp.array([1, 2]))
    Array(1.5, dtype=float32)
    """
    _no_out("mean", out)
    a = asarray(a, "mean")
    axes = canonicalize_axes(axis, a.aval.ndim)
    result_dtype = (dtypes.to_inexact_dtype(a.aval.dtype) if dtype is None
                    else dtypes.canonicalize_dtype(dtype))
    comp_dtype = _upcast_f16(result_dtype)
    total = sum(a, axes, dtype=comp_dtype, keepdims=keepdims, where=where)
    return _strong(lax.div(total, _count(a, axes, keepdims, where, comp_dtype)),
                   result_dtype)


_mean = mean  # (var's ``mean`` argument shadows it)


@composite(static=_STATIC)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """Like numpy.var; integer inputs give the default float dtype. ``correction`` is
    ``ddof``'s other name; ``mean`` a precomputed (keepdims) mean.

    >>> jnp.var(jnp.array([1.0, 3.0]))
    Array(1., dtype=float32)
    """
    _no_out("var", out)
    ddof = _correction(ddof, correction)
    a = asarray(a, "var")
    comp_dtype, result_dtype = _var_promote_types(a.aval.dtype, dtype)
    axes = canonicalize_axes(axis, a.aval.ndim)
    x = _util.convert(a, comp_dtype)
    m = (_mean(x, axes, dtype=comp_dtype, keepdims=True, where=where) if mean is None
         else _util.convert(asarray(mean, "var"), comp_dtype))
    centered = lax.sub(*_util.broadcast_arrays("var", x, m))
    centered, comp_dtype = _abs2(centered)
    count = _count(x, axes, keepdims, where, comp_dtype)
    normalizer = lax.sub(count, _util.scalar_array(ddof, comp_dtype, False)
                         if type(ddof) in (int, float) else
                         lax.convert_element_type(asarray(ddof, "var"), comp_dtype))
    total = sum(centered, axes, dtype=comp_dtype, keepdims=keepdims, where=where)
    result = _strong(lax.div(total, normalizer), result_dtype)
    # NaN where no values remain (an integer ``dtype`` thereby gives floats, as JAX's)
    return _where(lax.gt(normalizer, _util.scalar_array(0, comp_dtype, False)), result,
                  np.nan)


def _var_promote_types(a_dtype, dtype):
    """(computation, result) dtypes of var/nanvar: complex inputs give a real variance;
    float16/bfloat16 accumulate in float32."""
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtype)
        if dtypes.is_complex(a_dtype) and not dtypes.is_complex(dtype):
            raise ValueError(
                "jax.numpy.var does not yet support real dtype parameters when computing "
                "the variance of an array of complex values. The semantics of numpy.var "
                "seem unclear in this case.")
        return _upcast_f16(dtype), dtype
    if not dtypes.is_inexact(a_dtype):
        dtype = dtypes.to_inexact_dtype(a_dtype)
        return _upcast_f16(dtype), dtype
    return _upcast_f16(a_dtype), np.dtype(np.array(0, a_dtype).real.dtype)


def _abs2(centered):
    """|x|^2 of var's centered values, and its dtype (real for complex inputs)."""
    if dtypes.is_complex(centered.aval.dtype):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        centered = lax.integer_pow(centered, 2)
    return centered, centered.aval.dtype


@composite(static=_STATIC)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """Like numpy.std (the square root of :func:`var`)."""
    ddof = _correction(ddof, correction)
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"dtype argument to jnp.std must be inexact; got "
                         f"{dtypes.canonicalize_dtype(dtype)}")
    return lax.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean))


def _correction(ddof, correction):
    """JAX's ``correction``: ``ddof``'s other name; giving both is a ValueError."""
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _arg_prep(name, a, axis, out):
    _no_out(name, out)
    a = asarray(a, name)
    if axis is None:
        dims = tuple(range(a.aval.ndim))
        a = lax.reshape(a, (a.aval.size,))
        axis = 0
    else:
        axis = _util.canonicalize_axis(axis, a.aval.ndim)
        dims = (axis,)
    if a.aval.shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    if dtypes.is_complex(a.aval.dtype):  # (JAX's comparison error)
        op = "gt" if name.endswith("max") else "lt"
        raise TypeError(f"{op} does not accept dtype {a.aval.dtype.name} at position 0. "
                        "Accepted dtypes at position 0 are subtypes of integer, floating, "
                        "bool.")
    return a, axis, dims


@composite(static=_STATIC)
def argmax(a, axis=None, out=None, keepdims=None):
    """Like numpy.argmax: first maximal index (NaN counts as maximal); default int dtype."""
    a, axis, dims = _arg_prep("argmax", a, axis, out)
    if a.aval.dtype == dtypes.bool_:
        a = lax.convert_element_type(a, np.uint8)
    r = lax.argmax(a, axis, dtypes.default_int_dtype())
    return _keep(r, dims, keepdims)


@composite(static=_STATIC)
def argmin(a, axis=None, out=None, keepdims=None):
    """Like numpy.argmin: first minimal index (NaN counts as minimal).

    Computed as argmax of an order-reversing map: ``-x`` for floats, ``~x`` (exact,
    no overflow) for integers.
    """
    a, axis, dims = _arg_prep("argmin", a, axis, out)
    dt = a.aval.dtype
    if dt == dtypes.bool_:
        a = lax.eq(a, _util.scalar_array(False, dtypes.bool_, False))
    elif dtypes.is_unsigned(dt):
        a = lax.sub(_const(a, dtypes.iinfo(dt).max), a)
    elif dtypes.is_integer(dt):
        a = lax.sub(lax.neg(a), _const(a, 1))
    else:
        a = lax.neg(a)
    if a.aval.dtype == dtypes.bool_:
        a = lax.convert_element_type(a, np.uint8)
    return _keep(lax.argmax(a, axis, dtypes.default_int_dtype()), dims, keepdims)
