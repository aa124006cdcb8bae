"""``jnp.ufunc`` and ``jnp.frompyfunc``: NumPy's ufunc protocol (``reduce``, ``accumulate``,
``at``, ``outer``, ``reduceat``) over xform functions, and the public binary ufuncs
(``jnp.add``, ``jnp.multiply``, ...) as ufunc objects with their fast specialisations.

A method without a specialisation falls back to a loop (``fori_loop``/``scan``) over the
scalar function, as in JAX, so any ``frompyfunc`` ufunc has all methods."""
import operator

import numpy as np

from xform import lax
from xform.core import dtypes
from xform.numpy import _cumulative, _math, _reductions, _ufuncs, _util
from xform.numpy._misc import vectorize
from xform.numpy._shape import moveaxis, ravel
from xform.numpy._take import take
from xform.transforms.jit import eval_shape
from xform.transforms.vmap import vmap

_AT_INPLACE = ("Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace "
               "like np.ufunc.at(). Instead, you can pass inplace=False and capture the "
               "result; e.g.\n>>> arr = jnp.add.at(arr, ind, val, inplace=False)")


def _one(x):
    return lax.full((), 1, x.aval.dtype)


def _select(pred, on_true, on_false):
    shape = on_false.aval.shape
    return lax.select(_util.broadcast_to(pred, shape), _util.broadcast_to(on_true, shape),
                      on_false)


class ufunc:
    """A universal function: elementwise over broadcast arrays, with NumPy's methods.

    Args:
      func: the scalar function (``nin`` inputs, ``nout`` outputs).
      nin, nout: its numbers of inputs and outputs.
      name: its name (default ``func.__name__``).
      identity: the identity of a binary ufunc's operation (for empty or masked reduces).
      call, reduce, accumulate, at, reduceat: optional faster implementations.

    >>> jnp.add.reduce(jnp.arange(5)), jnp.multiply.outer(jnp.arange(2), jnp.arange(3)).shape
    (Array(10, dtype=int32), (2, 3))
    """

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None, call=None,
                 reduce=None, accumulate=None, at=None, reduceat=None):
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self._func = func
        self._props = (operator.index(nin), operator.index(nout),
                       operator.index(nargs or nin), identity)
        self._call = call
        self._impl = dict(reduce=reduce, accumulate=accumulate, at=at, reduceat=reduceat)

    nin = property(lambda self: self._props[0], doc="The number of inputs.")
    nout = property(lambda self: self._props[1], doc="The number of outputs.")
    nargs = property(lambda self: self._props[2], doc="The number of arguments.")
    identity = property(lambda self: self._props[3], doc="The operation's identity.")

    def _key(self):
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        call = self._call
        if call is not None and out is None and where is None:   # jnp.add(x, y): one hop
            return call(*args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        _util.check_arraylike(self.__name__, *args)
        return vectorize(self._func)(*args)

    def _binary_only(self, method):
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *xs):
        return eval_shape(self._func, *(_one(x) for x in xs)).dtype

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """Reduce ``a`` along ``axis`` (default 0) with the binary operation, as
        ``numpy.ufunc.reduce``; ``where`` needs an identity or ``initial``."""
        _util.check_arraylike(f"{self.__name__}.reduce", a)
        self._binary_only("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            _util.check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            _util.check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            if np.result_type(getattr(where, "dtype", type(where))) != np.bool_:
                raise ValueError(f"where argument must have dtype=bool; got "
                                 f"dtype={np.result_type(getattr(where, 'dtype', type(where)))}")
        reduce = self._impl["reduce"] or self._reduce_via_loop
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                      where=where)

    def _reduce_via_loop(self, arr, axis=0, dtype=None, keepdims=False, initial=None,
                         where=None):
        arr = _util.asarray(arr, f"{self.__name__}.reduce")
        initial = self.identity if initial is None else initial
        dtype = self._result_dtype(arr, arr) if dtype is None else dtypes.canonicalize_dtype(
            dtype)
        if where is not None:
            where = _util.broadcast_to(_util.asarray(where), arr.aval.shape)
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        if axis is None:
            final_shape = (1,) * arr.ndim if keepdims else ()
            arr, axis = ravel(arr), 0
            where = None if where is None else ravel(where)
        else:
            axis = _util.canonicalize_axis(axis, arr.ndim)
            shape = arr.aval.shape
            final_shape = shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:]
        arr = moveaxis(arr, axis, 0)
        where = None if where is None else moveaxis(where, axis, 0)
        if arr.aval.shape[0] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity")
            return lax.full(final_shape, initial, dtype)

        def body(i, val):
            new = self(val, arr[i].astype(dtype))
            return new if where is None else _select(where[i], new, val)
        start, val = (1, arr[0]) if initial is None else (0, initial)
        val = _util.broadcast_to(_util.asarray(val).astype(dtype), arr.aval.shape[1:])
        return lax.fori_loop(start, arr.aval.shape[0], body, val).reshape(final_shape)

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """Cumulative reduction along ``axis``, as ``numpy.ufunc.accumulate``."""
        self._binary_only("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self._impl["accumulate"] or self._accumulate_via_scan
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_via_scan(self, arr, axis=0, dtype=None):
        arr = _util.asarray(arr, f"{self.__name__}.accumulate")
        dtype = self._result_dtype(arr, arr) if dtype is None else dtypes.canonicalize_dtype(
            dtype)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = _util.canonicalize_axis(axis, arr.ndim)
        if arr.size == 0:
            return lax.full(arr.aval.shape, 0, dtype)
        arr = moveaxis(arr, axis, 0).astype(dtype)

        def step(carry, x):
            y = self(carry, x)
            return y, y
        _, rest = lax.scan(step, arr[0], arr[1:])
        return moveaxis(lax.concatenate([arr[:1], rest.astype(dtype)], 0), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """``a`` with the operation applied at ``indices`` (repeated indices accumulate),
        as ``numpy.ufunc.at``; ``inplace=False`` is required (arrays are immutable)."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE)
        at = self._impl["at"] or self._at_via_scan
        return at(a, indices) if b is None else at(a, indices, b)

    def _at_via_scan(self, a, indices, *args):
        _util.check_arraylike(f"{self.__name__}.at", a, *args)
        a = _util.asarray(a)
        dtype = self._result_dtype(a, *(_util.asarray(x) for x in args))
        a = a.astype(dtype)
        args = tuple(_util.asarray(x).astype(dtype) for x in args)
        indices = indices if isinstance(indices, tuple) else (indices,)
        shapes = [np.shape(i) for i in indices if not isinstance(i, slice)]
        shape = _util.broadcast_shapes(*shapes) if shapes else ()
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *args))
        n = int(np.prod(shape))
        if args:
            tail = args[0].shape[len(shape):]
            args = (_util.broadcast_to(args[0], shape + tail).reshape((n,) + tail),)
        indices = [i if isinstance(i, slice) else ravel(_util.broadcast_to(
            _util.asarray(i), shape)) for i in indices]

        def step(a, i):
            idx = tuple(ind if isinstance(ind, slice) else ind[i] for ind in indices)
            return a.at[idx].set(self(a.at[idx].get(), *(arg[i] for arg in args))), None
        return lax.scan(step, a, lax.iota(dtypes.int32, n))[0]

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """Reductions over the segments ``indices[i]:indices[i+1]`` along ``axis``, as
        ``numpy.ufunc.reduceat``."""
        self._binary_only("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self._impl["reduceat"] or self._reduceat_via_loop
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _reduceat_via_loop(self, a, indices, axis=0, dtype=None):
        _util.check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = _util.asarray(a), _util.asarray(indices)
        if a.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape={a.shape}")
        if indices.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got "
                             f"indices.shape={indices.shape}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = _util.canonicalize_axis(axis, a.ndim)
        out = take(a, indices, axis=axis)
        if dtype is not None:
            out = out.astype(dtype)
        bounds = lax.concatenate([indices, lax.full((1,), a.shape[axis], indices.dtype)], 0)
        bshape = [1] * out.ndim
        bshape[axis] = indices.shape[0]
        start, end = bounds[:-1].reshape(bshape), bounds[1:].reshape(bshape)

        def body(i, out):
            new = self(out, take(a, lax.expand_dims(i, (0,)), axis=axis))
            return _select((i > start) & (i < end), new, out)
        return lax.fori_loop(0, a.shape[axis], body, out)

    def outer(self, A, B, /):
        """The operation on every pair of elements: shape ``A.shape + B.shape``."""
        self._binary_only("outer")
        _util.check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = _util.asarray(A), _util.asarray(B)
        out = vmap(vmap(self, (None, 0)), (0, None))(ravel(A), ravel(B))
        return out.reshape(A.shape + B.shape)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A :class:`ufunc` from a scalar function of ``nin`` inputs and ``nout`` outputs.

    >>> f = jnp.frompyfunc(lambda x, y: x * y + 1, nin=2, nout=1, identity=None)
    >>> f.accumulate(jnp.array([1, 2, 3]))
    Array([ 1,  3, 10], dtype=int32)
    """
    return ufunc(func, nin, nout, identity=identity)


def _dtype_first(reduction, combine=None):
    """A reduction without a ``dtype`` argument (max, min; any, all without ``initial``:
    ``combine`` folds it in), given one."""
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        a = _util.asarray(a)
        if dtype is not None:
            a = a.astype(dtype)
        if combine is None:
            kw = {} if initial is None else {"initial": initial}
            return reduction(a, axis=axis, keepdims=keepdims, where=where, **kw)
        r = reduction(a, axis=axis, keepdims=keepdims, where=where)
        return r if initial is None else combine(r, initial)
    return reduce


def _at(method, bool_as_int=False):
    def at(a, indices, b):
        a = _util.asarray(a)
        if bool_as_int and a.dtype == np.bool_:
            b = _util.asarray(b).astype(np.bool_).astype(np.int32)
            return getattr(a.astype(np.int32).at[indices], method)(b).astype(np.bool_)
        return getattr(a.at[indices], method)(b)
    return at


def _binary(func, identity, **methods):
    return ufunc(func, 2, 1, name=func.__name__, call=func, identity=identity, **methods)


add = _binary(_ufuncs.add, 0, reduce=_reductions.sum, accumulate=_cumulative.cumsum,
              at=_at("add", bool_as_int=True))
multiply = _binary(_ufuncs.multiply, 1, reduce=_reductions.prod,
                   accumulate=_cumulative.cumprod, at=_at("multiply"))
subtract = _binary(_ufuncs.subtract, None, at=_at("subtract"))
maximum = _binary(_ufuncs.maximum, None, reduce=_dtype_first(_reductions.max))
minimum = _binary(_ufuncs.minimum, None, reduce=_dtype_first(_reductions.min))
logical_and = _binary(_ufuncs.logical_and, True, reduce=_dtype_first(
    _reductions.all, _ufuncs.logical_and))
logical_or = _binary(_ufuncs.logical_or, False, reduce=_dtype_first(
    _reductions.any, _ufuncs.logical_or))
logical_xor = _binary(_ufuncs.logical_xor, False)
bitwise_and = _binary(_ufuncs.bitwise_and, -1)
bitwise_or = _binary(_ufuncs.bitwise_or, 0)
bitwise_xor = _binary(_ufuncs.bitwise_xor, 0)
logaddexp = _binary(_math.logaddexp, -np.inf)
logaddexp2 = _binary(_math.logaddexp2, -np.inf)
negative = ufunc(_ufuncs.negative, 1, 1, name="negative", call=_ufuncs.negative)
