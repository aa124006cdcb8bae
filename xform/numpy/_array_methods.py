"""Implementations of the operators and NumPy-style methods that ``Array`` and ``Tracer``
declare on their shared base ``xform.core.array_ops.ArrayOps`` (``x + 1``, ``x[0]``,
``x.sum()``).

Binary operators defer (return NotImplemented) for operand types they don't know,
so Python's reflected-operator protocol and identity ``==`` fallback apply.
"""
import numpy as np

from xform import lax
from xform.core import array_ops, dtypes, shape_poly
from xform.core.array import Array
from xform.core.trace import Tracer, _context, eval_trace
from xform.lax.shapes import dimension_as_value
from xform.numpy import _indexing, _products, _reductions, _shape, _ufuncs, _util
from xform.numpy import (_cumulative, _elementwise, _manip, _math, _matrix, _misc, _sorting,
                         _statistics, _take)
from xform.numpy._take import compress

_KNOWN = (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex,
          shape_poly._DimExpr)


def _operand(other):
    """A symbolic dimension as its int32 value (JAX's ``__jax_array__`` of a dim)."""
    return dimension_as_value(other) if type(other) is shape_poly._DimExpr else other


# JAX refuses a list, tuple, set or dict operand of ==, !=, + and * (``x == (1, 2)``
# would else be False by identity, ``[1] * x`` a repeated list): TypeError, where
# other unknown types defer (NotImplemented). (JAX names ``!=`` as ``==``.)
_REJECTED = (list, tuple, set, dict)
_REJECTING = {"eq": "==", "ne": "==", "add": "+", "mul": "*"}


def _deferred(self, other, name, reflected):
    """NotImplemented for an operand type the operator does not know, but JAX's
    TypeError where it refuses one."""
    if name in _REJECTING and type(other) in _REJECTED:
        a, b = (other, self) if reflected else (self, other)
        raise TypeError(f"unsupported operand type(s) for {_REJECTING[name]}: "
                        f"{type(a).__name__!r} and {type(b).__name__!r}")
    return NotImplemented


def _binop(fn, reflected=False, name=None):
    # (the exact-type tests first: cheaper than isinstance over _KNOWN for the common
    # operands, an Array or a Python float). For a two-operand composite: with the eval
    # trace current its ``eager`` entry, else its ``traced`` one (lazy mode's recipe, or
    # under a transformation the function it wraps).
    eager, raw = (fn.eager, fn.traced) if hasattr(fn, "eager") else (fn, fn)
    if reflected:
        def op(self, other):
            t = type(other)
            if t is Array or t is float or t is int:
                return eager(other, self) if _context.trace is eval_trace else raw(other, self)
            if isinstance(other, _KNOWN):
                return fn(_operand(other), self)
            return _deferred(self, other, name, True)
    else:
        def op(self, other):
            t = type(other)
            if t is Array or t is float or t is int:
                return eager(self, other) if _context.trace is eval_trace else raw(self, other)
            if isinstance(other, _KNOWN):
                return fn(self, _operand(other))
            return _deferred(self, other, name, False)
    return op


def _add(self, other):  # the hottest operator: _binop's op, unrolled
    t = type(other)
    if t is Array or t is float or t is int:
        return _add_eager(self, other) if _context.trace is eval_trace else \
            _add_raw(self, other)
    if isinstance(other, _KNOWN):
        return _ufuncs.add(self, _operand(other))
    return _deferred(self, other, "add", False)


_add_eager, _add_raw = _ufuncs.add.eager, _ufuncs.add.traced

_OPERATORS = {
    "sub": _ufuncs.subtract, "mul": _ufuncs.multiply, "truediv": _ufuncs.true_divide,
    "floordiv": _ufuncs.floor_divide, "mod": _ufuncs.remainder, "pow": _ufuncs.power,
    "matmul": _products.matmul, "and": _ufuncs.bitwise_and, "or": _ufuncs.bitwise_or,
    "xor": _ufuncs.bitwise_xor,
}
_COMPARISONS = {
    "eq": _ufuncs.equal, "ne": _ufuncs.not_equal, "lt": _ufuncs.less,
    "le": _ufuncs.less_equal, "gt": _ufuncs.greater, "ge": _ufuncs.greater_equal,
}


def _axes_arg(args):
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike."""
    return args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _reshape(self, *shape, order="C"):
    """Like numpy.ndarray.reshape: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
    return _shape.reshape(self, _axes_arg(shape), order)


def _transpose(self, *axes):
    """Like numpy.ndarray.transpose: ``x.transpose()``, ``x.transpose(1, 0)`` or
    ``x.transpose((1, 0))``."""
    return _shape.transpose(self, _axes_arg(axes) if axes else None)


def _astype(self, dtype, copy=False):
    """Cast to ``dtype`` (the result is strongly typed; complex -> bool is x != 0)."""
    dtype = dtypes.canonicalize_dtype(dtype)
    if dtypes.is_complex(self.dtype) and dtype == dtypes.bool_:
        self = lax.ne(self, lax.full_like(self, 0))
    out = lax.convert_element_type(self, dtype, False)
    return lax._array_copy(out) if copy and out is self else out   # (as JAX's copy_p)


def _flatten(self, order="C"):
    return _shape.ravel(self, order)


def _squeeze(self, axis=None):
    return _shape.squeeze(self, axis)


def _swapaxes(self, axis1, axis2):
    return _shape.swapaxes(self, axis1, axis2)


def _clip(self, min=None, max=None):
    return _ufuncs.clip(self, min, max)


def _dot(self, b, *, precision=None, preferred_element_type=None):
    if precision is None and preferred_element_type is None:
        return _products.dot(self, b)  # (no keywords: the composite's fast path)
    return _products.dot(self, b, precision=precision,
                         preferred_element_type=preferred_element_type)


_METHODS = {
    "__getitem__": _indexing.getitem, "at": property(_indexing.at),
    "__setitem__": _indexing.setitem,
    "__neg__": _ufuncs.negative, "__pos__": _ufuncs.positive, "__abs__": _ufuncs.absolute,
    "__invert__": _ufuncs.invert,
    "__add__": _add, "__radd__": _binop(_ufuncs.add, True, "add"),
    "T": property(lambda self: _shape.transpose(self)),
    "mT": property(_shape.matrix_transpose),
    "astype": _astype, "reshape": _reshape, "transpose": _transpose,
    "ravel": _shape.ravel, "flatten": _flatten, "squeeze": _squeeze,
    "swapaxes": _swapaxes, "clip": _clip, "dot": _dot,
    "sum": _reductions.sum, "prod": _reductions.prod, "mean": _reductions.mean,
    "var": _reductions.var, "std": _reductions.std,
    "max": _reductions.max, "min": _reductions.min,
    "any": _reductions.any, "all": _reductions.all,
    "argmax": _reductions.argmax, "argmin": _reductions.argmin,
}
for _name, _fn in _OPERATORS.items():
    _METHODS[f"__{_name}__"] = _binop(_fn, False, _name)
    _METHODS[f"__r{_name}__"] = _binop(_fn, True, _name)
for _name, _fn in _COMPARISONS.items():
    _METHODS[f"__{_name}__"] = _binop(_fn, False, _name)


def _round_op(self, ndigits=None):
    """``round(x)``: ties to even; with no ``ndigits`` an int array (as JAX: the default
    int dtype, strongly typed), with ``ndigits`` the input's dtype."""
    out = _elementwise.round(self, ndigits or 0)
    return out if ndigits is not None else _astype(out, int)


def _contains(self, other):
    """``v in x``: whether the 1-D ``x`` holds the scalar ``v`` (NB: like JAX, not
    NumPy's elementwise-on-any-rank semantics)."""
    if other is None or isinstance(other, str):
        raise TypeError(f"Array.__contains__: unsupported operand type {type(other)}.")
    query = _util.asarray(other, "Array.__contains__")
    if self.ndim != 1:
        raise ValueError("Array.__contains__: search array must be one-dimensional, "
                         f"got arr.shape={self.shape}.")
    if query.ndim != 0:
        raise ValueError("Array.__contains__: query value must be a scalar, got "
                         f"query.shape={query.shape}")
    return _reductions.any(_ufuncs.equal(self, query))


def _array_namespace(self, *, api_version=None):
    """The Python array API namespace of xform arrays: ``xform.numpy``."""
    import xform.numpy  # (a cycle: the numpy face installs these methods)
    if api_version is not None and api_version != xform.numpy.__array_api_version__:
        raise ValueError(f"api_version={api_version!r} is not available; available "
                         f"versions are: {[xform.numpy.__array_api_version__]}")
    return xform.numpy


def _array_module(self, types):
    """NEP 37 dispatch: ``xform.numpy`` when every type is an xform or NumPy array."""
    import xform.numpy  # (a cycle: the numpy face installs these methods)
    if all(issubclass(t, (Array, Tracer, np.ndarray)) for t in types):
        return xform.numpy
    return NotImplemented


def _compress(self, condition, axis=None, *, size=None, fill_value=0):
    return compress(condition, self, axis, size=size, fill_value=fill_value)


def _to_device(self, device, *, stream=None):
    """A copy on ``device`` (a Device or Sharding), committed there (``device_put``)."""
    if stream is not None:
        raise NotImplementedError("stream argument of array.to_device()")
    return _misc.device_put(self, device)


def _view(self, dtype=None, type=None):
    """The array's bits as ``dtype`` (``lax.bitcast_convert_type``, as JAX's): the last
    axis scales with the itemsize ratio; bool is 8 bits, complex a (real, imag) pair."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    dtype = dtypes.canonicalize_dtype(dtype)
    bits_in, bits_out = dtypes.itemsize_bits(self.dtype), dtypes.itemsize_bits(dtype)
    if self.ndim == 0:
        if bits_in != bits_out:
            raise ValueError("view() of a 0d array is only supported if the itemsize is "
                             "unchanged.")
        return _view(lax.expand_dims(self, (0,)), dtype).squeeze()
    if (self.shape[-1] * bits_in) % bits_out != 0:
        raise ValueError("When changing to a larger dtype, its size must be a divisor "
                         "of the total size in bytes of the last axis of the array.")
    if self.dtype == dtype:
        return self
    if self.dtype == dtypes.bool_:
        return _view(_astype(self, np.uint8), dtype)
    if dtypes.is_complex(self.dtype):
        parts = lax.concatenate([lax.expand_dims(_math.real(self), (-1,)),
                                 lax.expand_dims(_math.imag(self), (-1,))], self.ndim)
        return _view(_shape.reshape(parts, (*self.shape[:-1], 2 * self.shape[-1])), dtype)
    if dtype == dtypes.bool_:
        return _astype(_view(self, np.uint8), dtype)
    if dtypes.is_complex(dtype):
        out = _astype(_view(self, dtypes.finfo(dtype).dtype), dtype)
        return out[..., 0::2] + 1j * out[..., 1::2]
    if bits_in < bits_out:
        k = bits_out // bits_in
        return lax.bitcast_convert_type(
            _shape.reshape(self, (*self.shape[:-1], self.shape[-1] // k, k)), dtype)
    out = lax.bitcast_convert_type(self, dtype)
    if bits_in > bits_out:
        out = _shape.reshape(out, (*out.shape[:-2], out.shape[-2] * out.shape[-1]))
    return out


def _flat(self):
    raise NotImplementedError("JAX Arrays do not implement the arr.flat property: "
                              "consider arr.flatten() instead.")


def _more_methods():
    """Methods over the later numpy modules (imported here: they import this one's
    siblings)."""
    return {
        "cumsum": _cumulative.cumsum, "cumprod": _cumulative.cumprod,
        "sort": _sorting.sort, "argsort": _sorting.argsort,
        "argpartition": _sorting.argpartition, "searchsorted": _sorting.searchsorted,
        "nonzero": _sorting.nonzero, "round": _elementwise.round, "take": _take.take,
        "choose": _take.choose, "compress": _compress, "repeat": _manip.repeat,
        "diagonal": _matrix.diagonal, "trace": _matrix.trace, "ptp": _statistics.ptp,
        "conj": _math.conjugate, "conjugate": _math.conjugate, "copy": _misc.copy,
        "to_device": _to_device, "view": _view, "flat": property(_flat),
        "real": property(_math.real), "imag": property(_math.imag),
        "__round__": _round_op, "__contains__": _contains,
        "__array_namespace__": _array_namespace, "__array_module__": _array_module,
        "__divmod__": _binop(_math.divmod, False, "divmod"),
        "__rdivmod__": _binop(_math.divmod, True, "divmod"),
        "__lshift__": _binop(_elementwise.left_shift, False, "lshift"),
        "__rlshift__": _binop(_elementwise.left_shift, True, "lshift"),
        "__rshift__": _binop(_elementwise.right_shift, False, "rshift"),
        "__rrshift__": _binop(_elementwise.right_shift, True, "rshift"),
    }


def install():
    """Put the operators and methods on ``ArrayOps``, the base of ``Array`` and ``Tracer``
    where they are declared (``xform.core.array_ops``)."""
    array_ops.install({**_METHODS, **_more_methods()})
