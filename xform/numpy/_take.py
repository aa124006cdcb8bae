"""Index-array functions over gather/scatter/select_n: take, take_along_axis,
put_along_axis, put, place, choose, select, piecewise, compress/extract,
unravel_index/ravel_multi_index, and the vmap-based apply_along_axis/apply_over_axes/
vectorize."""
import math

import numpy as np

from xform import lax
from xform.core import dtypes, shape_poly
from xform.interpreters.composite import composite
from xform.lax import GatherDimensionNumbers, ScatterDimensionNumbers
from xform.numpy import _util
from xform.numpy import _ufuncs as uf
from xform.numpy._cumulative import cumsum
from xform.numpy._shape import moveaxis, ravel
from xform.numpy._util import asarray, canonicalize_axis
from xform.transforms.vmap import vmap

_MODES = {None: "fill", "fill": "fill", "clip": "clip", "wrap": "wrap",
          "promise_in_bounds": "promise_in_bounds"}


def _index_array(name, indices):
    idx = asarray(indices, name, 1)
    if not dtypes.is_integer(idx.aval.dtype):
        raise TypeError(f"jnp.{name}: indices must be an integer array, got "
                        f"{idx.aval.dtype.name}")
    return idx


def _prepare_indices(name, idx, n, mode):
    """Indices and the gather mode for ``mode`` (JAX: negatives wrap except for
    "clip"; the default "fill" gives ``fill_value`` out of bounds)."""
    if mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to jnp.{name} is not supported.")
    if mode not in _MODES:
        raise ValueError(f"Invalid mode {mode!r} for jnp.{name}: expected 'fill', 'clip', "
                         "'wrap' or 'promise_in_bounds'")
    mode = _MODES[mode]
    size = _util.scalar_operand(n, idx.aval.dtype, False)
    if mode == "wrap":
        return (uf.remainder(idx, size) if shape_poly.is_symbolic_dim(n) or n else idx,
                "promise_in_bounds")
    if mode in ("fill", "promise_in_bounds"):
        neg = lax.lt(idx, _util.scalar_array(0, idx.aval.dtype, False))
        idx = lax.select(neg, lax.add(idx, lax.broadcast_in_dim(size, idx.aval.shape, ())),
                         idx)
    return idx, mode


@composite(static=("axis", "out", "mode", "unique_indices", "indices_are_sorted", "fill_value"))
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Like numpy.take, with JAX's modes: out-of-bounds indices give ``fill_value``
    (NaN for floats) by default; "clip" and "wrap" as in NumPy.

    >>> jnp.take(jnp.array([10, 20, 30]), jnp.array([2, -1, 0]))
    Array([30, 30, 10], dtype=int32)
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a = asarray(a, "take")
    idx = asarray(indices, "take", 1)
    if idx.aval.dtype == dtypes.bool_ and mode in (None, "fill"):
        idx = lax.convert_element_type(idx, dtypes.int32)  # (JAX's where(i < 0, i + n, i))
    elif idx.aval.dtype == dtypes.bool_:
        raise ValueError(f"jnp.take: indices must have an integer type for mode={mode!r}, "
                         "got bool")
    idx = _index_array("take", idx)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    n = a.aval.shape[axis]
    idx, gmode = _prepare_indices("take", idx, n, mode)
    nb = idx.aval.ndim
    offset_dims = tuple(range(axis)) + tuple(range(axis + nb, a.aval.ndim - 1 + nb))
    dn = GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=(axis,),
                                start_index_map=(axis,))
    slice_sizes = tuple(1 if d == axis else s for d, s in enumerate(a.aval.shape))
    if n == 0 and idx.aval.size:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    return lax.gather(a, lax.expand_dims(idx, (nb,)), dn, slice_sizes,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=gmode, fill_value=fill_value)


def _along_axis_prep(name, arr, indices, axis):
    arr = asarray(arr, name)
    idx = _index_array(name, indices)
    if axis is None:
        arr, idx, axis = ravel(arr), ravel(idx), 0
    if idx.aval.ndim != arr.aval.ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{idx.aval.ndim} vs. {arr.aval.ndim}")
    axis = canonicalize_axis(axis, arr.aval.ndim)
    other = [d for d in range(arr.aval.ndim) if d != axis]
    shape = _util.broadcast_shapes(tuple(arr.aval.shape[d] for d in other),
                                   tuple(idx.aval.shape[d] for d in other), name=name)
    a_shape, i_shape = list(arr.aval.shape), list(idx.aval.shape)
    for d, s in zip(other, shape):
        a_shape[d] = i_shape[d] = s
    return (_util.broadcast_to(arr, tuple(a_shape)), _util.broadcast_to(idx, tuple(i_shape)),
            axis, tuple(other))


@composite(static=("axis", "mode", "fill_value", "wrap_negative_indices"))
def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """Like numpy.take_along_axis (one gather whose other axes are batching dims).
    Negative indices wrap first in every mode but "promise_in_bounds", as JAX's.

    >>> x = jnp.array([[3, 1, 2]])
    >>> jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
    Array([[1, 2, 3]], dtype=int32)
    """
    arr, idx, axis, other = _along_axis_prep("take_along_axis", arr, indices, axis)
    n = arr.aval.shape[axis]
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if wrap_negative_indices and mode == "clip" and n:
        size = lax.full_like(idx, n)
        idx = lax.select(lax.lt(idx, lax.full_like(idx, 0)), lax.add(idx, size), idx)
    idx, gmode = _prepare_indices("take_along_axis", idx, n, mode)
    if not idx.aval.size or n == 0:  # (JAX: zeros; a unit gather slice cannot span 0)
        return lax.full(idx.aval.shape, 0, arr.aval.dtype)
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                start_index_map=(axis,), operand_batching_dims=other,
                                start_indices_batching_dims=other)
    return lax.gather(arr, lax.expand_dims(idx, (idx.aval.ndim,)), dn,
                      (1,) * arr.aval.ndim, mode=gmode, fill_value=fill_value)


def _no_inplace(name, inplace):
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX "
                         "arrays are immutable. Pass inplace=False to instead return an "
                         "updated array.")


@composite(static=("axis", "inplace", "mode"))
def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """Like numpy.put_along_axis, returning the result (pass ``inplace=False``); as
    JAX's ``arr.at[...].set(values, mode=mode)``: negative indices wrap, then
    out-of-bounds ones are dropped (default, "drop", "fill") or clipped ("clip")."""
    _no_inplace("put_along_axis", inplace)
    if mode not in (None, "drop", "fill", "clip", "promise_in_bounds"):
        raise ValueError(f"Invalid mode {mode!r} for jnp.put_along_axis: expected 'drop', "
                         "'fill', 'clip' or 'promise_in_bounds'")
    a = asarray(arr, "put_along_axis")
    flat = ravel(a) if axis is None else a
    arr_b, idx, axis, other = _along_axis_prep("put_along_axis", flat, indices,
                                               0 if axis is None else axis)
    if arr_b.aval.shape != flat.aval.shape:
        raise ValueError(f"put_along_axis: indices of shape {idx.aval.shape} do not fit "
                         f"arr of shape {flat.aval.shape}")
    idx, _ = _prepare_indices("put_along_axis", idx, flat.aval.shape[axis], "fill")
    vals = lax.convert_element_type(_util.broadcast_to(asarray(values, "put_along_axis"),
                                                       idx.aval.shape), a.aval.dtype)
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(axis,),
                                 scatter_dims_to_operand_dims=(axis,),
                                 operand_batching_dims=other,
                                 scatter_indices_batching_dims=other)
    out = lax.scatter(flat, lax.expand_dims(idx, (idx.aval.ndim,)), vals, dn,
                      mode="clip" if mode == "clip" else "drop")
    return lax.reshape(out, a.aval.shape)


def _cycled(v, n):
    """The flat ``v`` repeated cyclically to length ``n``."""
    m = v.aval.shape[0]
    reps = -(-n // m)
    return lax.slice(lax.reshape(lax.broadcast_in_dim(v, (reps, m), (1,)), (reps * m,)),
                     (0,), (n,))


def put(a, ind, v, mode=None, *, inplace=True):
    """Like numpy.put, returning the result (pass ``inplace=False``): the flat
    positions ``ind`` of ``a`` get ``v`` (cycled)."""
    _no_inplace("put", inplace)
    a = asarray(a, "put")
    flat = ravel(a)
    idx = ravel(_index_array("put", ind))
    vals = ravel(lax.convert_element_type(asarray(v, "put", 2), a.aval.dtype))
    if not idx.aval.size or not vals.aval.size:
        return a
    idx, gmode = _prepare_indices("put", idx, flat.aval.shape[0], mode)
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
    out = lax.scatter(flat, lax.expand_dims(idx, (1,)), _cycled(vals, idx.aval.shape[0]),
                      dn, mode="clip" if gmode == "clip" else "drop")
    return lax.reshape(out, a.aval.shape)


def place(arr, mask, vals, *, inplace=True):
    """Like numpy.place, returning the result (pass ``inplace=False``): the positions
    where ``mask`` is true get ``vals`` in order (cycled)."""
    _no_inplace("place", inplace)
    a = asarray(arr, "place")
    data = ravel(a)
    m = ravel(uf.not_equal(asarray(mask, "place", 1), False))
    vals = ravel(lax.convert_element_type(asarray(vals, "place", 2), a.aval.dtype,
                                          a.aval.weak_type))  # (as .at[].set: a's type)
    if not vals.aval.size:
        return a
    k = uf.remainder(uf.subtract(cumsum(m), 1), vals.aval.shape[0])
    return lax.reshape(uf.where(m, take(vals, k, mode="clip"), data), a.aval.shape)


# ---- choosing ----

def choose(a, choices, out=None, mode="raise"):
    """Like numpy.choose: ``choices[a[i]][i]`` (``select_n``); mode "raise" needs a
    concrete ``a``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a = asarray(a, "choose")
    if not dtypes.is_integer(a.aval.dtype) or a.aval.dtype == dtypes.bool_:
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        value = _util.concrete_or_error(a, "a", "choose")
        if ((value < 0) | (value >= n)).any():
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = uf.remainder(a, n)
    elif mode == "clip":
        a = uf.clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    choices = _util.promote_dtypes("choose", *choices)
    args = _util.broadcast_arrays("choose", a, *choices, scalars_ok=False, explicit=True)
    out = lax.select_n(lax.convert_element_type(args[0], dtypes.int32), *args[1:])
    return lax.convert_element_type(out, out.aval.dtype, weak_type=False)  # JAX stacks: strong


def select(condlist, choicelist, default=0):
    """Like numpy.select: from the first true condition's choice, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} "
                         f"vs {len(choicelist)})")
    if len(condlist) == 0:   # (an array condlist too: no truth value)
        raise ValueError("condlist must be non-empty")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        cond = asarray(cond, "select")
        if cond.aval.dtype != dtypes.bool_:  # (non-zero is true, as JAX's astype(bool))
            cond = lax.ne(cond, _util.scalar_array(0, cond.aval.dtype, False))
        out = uf.where(cond, choice, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """Like numpy.piecewise for elementwise functions: ``funclist[i](x)`` where
    ``condlist[i]`` (later conditions win), an extra last entry where none holds, else
    0. Every function is evaluated on all of ``x``; the result has ``x``'s dtype."""
    x = asarray(x, "piecewise")
    if isinstance(condlist, (list, tuple)):
        conds = list(condlist)
    else:  # an array: one condition per leading row, as in JAX
        c = asarray(condlist, "piecewise")
        conds = [c] if c.aval.ndim == 0 else [c[k] for k in range(c.aval.shape[0])]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are "
                         f"expected, got {len(funclist)}")

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return _util.broadcast_to(lax.convert_element_type(asarray(v, "piecewise"),
                                                           x.aval.dtype), x.aval.shape)

    out = value(funclist[n]) if len(funclist) == n + 1 else _util.filled_like(x, 0)
    if len(funclist) == n + 1:
        out = lax.convert_element_type(out, x.aval.dtype, False)
    for cond, f in zip(conds, funclist):
        cond = _util.broadcast_to(uf.not_equal(asarray(cond, "piecewise"), False),
                                  x.aval.shape)
        out = lax.select(cond, value(f), out)
    return lax.convert_element_type(out, x.aval.dtype, False)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """Like numpy.compress: the slices of ``a`` along ``axis`` where the 1-D
    ``condition`` holds (concrete, unless ``size`` fixes the output length). As JAX's,
    ``a`` is cut to the condition's length, and a longer condition's extra entries
    must be False (checked without ``size``)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    from xform.numpy._sorting import masked_indices  # (a cycle: _sorting takes with take)
    cond = asarray(condition, "compress")
    if cond.aval.ndim != 1:
        raise ValueError("condition must be a 1D array")
    a = asarray(a, "compress", 1)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.aval.ndim)
    n, m = a.aval.shape[axis], cond.aval.shape[0]
    cond = uf.not_equal(cond, False)
    if m > n:
        extra = _util.concrete_or_error(lax.slice(cond, (n,), (m,)), "condition",
                                        "compress") if size is None else None
        if extra is not None and np.asarray(extra).any():
            raise ValueError(f"condition contains entries that are out of bounds: a "
                             f"condition of length {m} for {n} elements along axis {axis}")
        cond = lax.slice(cond, (0,), (n,))
    a = lax.slice_in_dim(a, 0, min(m, n), axis=axis)
    n = a.aval.shape[axis]
    if size is not None and not 0 <= size <= n:
        raise ValueError(f"size must be positive and not greater than the size of the "
                         f"array axis; got size={size} for a.shape[axis]={n}")
    idx, valid = masked_indices("compress", cond, size)
    if not idx.aval.shape[0]:
        return lax.slice_in_dim(a, 0, 0, axis=axis)
    result = take(a, idx, axis=axis, mode="clip")
    if valid is None:
        return result
    shape = [1] * result.aval.ndim
    shape[axis] = valid.aval.shape[0]
    return uf.where(lax.reshape(valid, tuple(shape)), result,
                    lax.convert_element_type(asarray(fill_value, "compress"),
                                             result.aval.dtype))


def extract(condition, arr, *, size=None, fill_value=0):
    """Like numpy.extract: ``compress(ravel(condition), ravel(arr))``."""
    return compress(ravel(asarray(condition, "extract")), ravel(asarray(arr, "extract", 1)),
                    size=size, fill_value=fill_value)


# ---- flat <-> multi indices ----

def unravel_index(indices, shape):
    """Like numpy.unravel_index, but out-of-bounds indices are clipped (as in JAX)."""
    idx = _index_array("unravel_index", indices)
    weak = idx.aval.weak_type
    shape = _util.canonical_shape(shape)
    size = int(np.prod(shape, dtype=np.int64))
    dt = idx.aval.dtype
    neg = lax.lt(idx, _util.scalar_array(0, dt, False))
    idx = lax.select(neg, lax.add(idx, lax.full_like(idx, size)), idx)
    idx = uf.clip(idx, 0, max(size - 1, 0))
    out = []
    for d in reversed(shape):
        dd = _util.scalar_array(d, dt, False)
        out.append(lax.rem(idx, dd) if d else idx)
        idx = lax.div(idx, dd) if d else idx
    return tuple(lax.convert_element_type(c, dt, weak) for c in reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Like numpy.ravel_multi_index, as JAX's: the flat index in ``dtype`` (default: the
    indices' dtype promoted with a weak int; one too small for ``prod(dims) - 1`` is an
    error, not an overflow). Mode "raise" needs concrete indices; "ignore" trusts them."""
    dims = _util.canonical_shape(dims, "dims")
    if len(multi_index) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    idxs = [asarray(i, "ravel_multi_index", 1) for i in multi_index]
    dt = (dtypes.result_type(int, *idxs) if dtype is None
          else dtypes.canonicalize_dtype(dtype))
    if not dtypes.is_integer(dt):
        raise ValueError(f"dtype={np.dtype(dt)!r} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dt).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={np.dtype(dt)!r} not large enough "
                         f"to hold flattened index for dims={dims}. Use the dtype argument "
                         "to pass a suitable dtype (e.g. dtype=np.min_scalar_type(prod(dims))).")
    for i in idxs:
        if not dtypes.is_integer(i.aval.dtype):
            raise TypeError("only int indices permitted")
    if mode == "raise":
        for i, d in zip(idxs, dims):
            value = _util.concrete_or_error(i, "multi_index", "ravel_multi_index")
            if ((value < 0) | (value >= d)).any():
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        idxs = [uf.clip(i, 0, d - 1) for i, d in zip(idxs, dims)]
    elif mode == "wrap":
        idxs = [uf.remainder(i, d) for i, d in zip(idxs, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                         "'ignore'.")
    if order == "F":
        idxs, dims = idxs[::-1], dims[::-1]
    elif order != "C":
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    out, stride = lax.full((), 0, dt), 1   # strong, as JAX's array(0, dtype)
    for i, d in zip(reversed(idxs), reversed(dims)):
        out = uf.add(out, uf.multiply(_util.convert(i, dt), stride))
        stride *= d
    return out


# ---- vmap-based ----

def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """Like numpy.apply_along_axis: ``func1d`` on every 1-D slice along ``axis``
    (vmapped over the other axes); its output axes take ``axis``'s place."""
    arr = asarray(arr, "apply_along_axis", 2)
    nd = arr.aval.ndim
    axis = canonicalize_axis(axis, nd)
    fn = lambda x: func1d(x, *args, **kwargs)  # noqa: E731
    for _ in range(nd - 1):
        fn = vmap(fn)
    out = asarray(fn(moveaxis(arr, axis, -1)), "apply_along_axis")
    k = out.aval.ndim - (nd - 1)
    return moveaxis(out, tuple(range(nd - 1, nd - 1 + k)), tuple(range(axis, axis + k)))


def apply_over_axes(func, a, axes):
    """Like numpy.apply_over_axes: ``a = func(a, axis)`` for each axis, keeping ranks."""
    a = asarray(a, "apply_over_axes", 1)
    for axis in (axes if isinstance(axes, (list, tuple)) else [axes]):
        b = asarray(func(a, axis), "apply_over_axes")
        if b.aval.ndim == a.aval.ndim - 1:
            b = lax.expand_dims(b, (canonicalize_axis(axis, a.aval.ndim),))
        elif b.aval.ndim != a.aval.ndim:
            raise ValueError("function is not returning an array of the correct shape")
        a = b
    return a
