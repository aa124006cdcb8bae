"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, iota, slice, pad,
concatenate; plus compositions over them (full, broadcast, expand_dims)."""
import math
import operator

import numpy as np

from xform.core import dtypes, shape_poly, sharding_types, trace as _trace
from xform.core.mesh import AbstractMesh
from xform.core.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters.lazy import LazyTrace, is_pending
from xform.core.transfer import committed_device, device_put_value, put_sharded, scalar_array
from xform.lax._prim import canonicalize_axis as _axis, standard_primitive
from xform.lax.sharding_constraint import reshard

hlo, ir = mlir.hlo, mlir.ir


def _ints(xs, what):
    # (symbolic dimensions pass: shapes and static bounds may be symbolic in export)
    try:
        return tuple(x if shape_poly.is_symbolic_dim(x) else operator.index(x) for x in xs)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers, got {xs!r}") from None


# ---- broadcast_in_dim ----

def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """Broadcast ``operand`` to ``shape``; its dimension i becomes ``broadcast_dimensions[i]``.
    ``out_sharding`` (explicit sharding mode): the result's sharding (its type)."""
    shape = _ints(shape, "broadcast_in_dim shape")
    dims = _ints(broadcast_dimensions, "broadcast_dimensions")
    if out_sharding is not None:  # (a param only when given)
        s = sharding_types.abstract_sharding(out_sharding, "broadcast_in_dim")
        if _trace._context.trace is _trace.eval_trace:  # (checked as the type would be)
            _broadcast_in_dim_abstract_eval(get_aval(operand), shape=shape,
                                            broadcast_dimensions=dims, sharding=s)
            return _eager_placed(broadcast_in_dim(operand, shape, dims), out_sharding)
        return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                       sharding=s)
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def _eager_placed(out, out_sharding):
    """An eager result given ``out_sharding``: computed on one device, then laid out
    (over the mesh in context if ``out_sharding`` is over an AbstractMesh)."""
    if isinstance(out_sharding, NamedSharding) and isinstance(out_sharding.mesh, AbstractMesh):
        out_sharding = out_sharding.spec
    return reshard(out, out_sharding)


def _typed_result(shape, dtype, weak_type=False, sharding=None):
    """The result aval of a primitive given ``sharding=`` (typed by it, checked as JAX's)."""
    if any(not shape_poly.is_symbolic_dim(d) and d < 0 for d in shape):
        raise TypeError(f"shape must have every element be nonnegative, got {shape}")
    out = ShapedArray(shape, dtype, weak_type)
    s = None if sharding is None else sharding_types.type_sharding(sharding, len(shape))
    return out if s is None else sharding_types.check_type(out, s).update(sharding=s)


def _batched_sharding(sharding, x, ndim):
    """A batching rule's ``sharding`` param: its batch dimension (leading) split as the
    batched operand's (as JAX's ``explicit_mesh_axis``)."""
    s = sharding_types.type_sharding(sharding, ndim)
    return None if s is None else sharding.with_spec(
        P(sharding_types.spec_of(get_aval(x))[0], *s.spec))


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding=None):
    dims = broadcast_dimensions
    ok = (len(dims) == x.ndim and len(set(dims)) == len(dims)
          and all(0 <= d < len(shape) for d in dims)
          and all(x.shape[i] in (1, shape[d]) for i, d in enumerate(dims))
          and list(dims) == sorted(dims))
    if not ok:
        raise TypeError(f"broadcast_in_dim cannot broadcast operand of shape {x.shape} to "
                        f"shape {shape} with broadcast_dimensions={dims}: operand dimension "
                        "i must be 1 or equal to shape[broadcast_dimensions[i]], with "
                        "strictly increasing broadcast_dimensions.")
    return _typed_result(shape, x.dtype, x.weak_type, sharding)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding=None):
    from xform.lax.reductions import reduce_sum  # (a cycle: reductions builds on shapes)
    unit = [i for i, s in enumerate(x.aval.shape) if s == 1 and shape[broadcast_dimensions[i]] != 1]
    kept = [d for i, d in enumerate(broadcast_dimensions) if i not in unit]
    out = reshape(reduce_sum(ct, tuple(i for i in range(len(shape)) if i not in kept)),
                  x.aval.shape)
    typ = x.aval._sharding  # (typed as x: the reduction's type may differ, given sharding)
    return [out if typ is None or get_aval(out)._sharding == typ else
            reshape(out, x.aval.shape, out_sharding=typ)]


def _broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions, sharding=None):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    return broadcast_in_dim(x, (size,) + shape,
                            (0,) + tuple(b + 1 for b in broadcast_dimensions),
                            out_sharding=None if sharding is None else
                            _batched_sharding(sharding, x, len(shape))), 0


def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions, sharding=None):
    return mlir.broadcast_in_dim(ctx.avals_out[0], x, broadcast_dimensions)


broadcast_in_dim_p = standard_primitive("broadcast_in_dim", _broadcast_in_dim_abstract_eval)
ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch
mlir.register_lowering(broadcast_in_dim_p, _broadcast_in_dim_lowering)


def broadcast(operand, sizes, *, out_sharding=None):
    """Add leading dimensions of ``sizes`` to ``operand`` (``out_sharding``: as
    ``broadcast_in_dim``'s)."""
    sizes = _ints(sizes, "sizes")
    if not sizes and out_sharding is None:
        return operand
    aval = get_aval(operand)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)),
                            out_sharding=out_sharding)


def full(shape, fill_value, dtype=None, *, sharding=None, _weak_type=False):
    """An array of ``shape`` filled with ``fill_value`` (of ``dtype``, or its own).
    ``sharding``, as JAX's: a type's (over an AbstractMesh) is the result's type; a
    concrete one places an eager result and is ignored under a transformation."""
    shape = _ints(shape, "full shape")
    if dtype is not None and dtypes.is_extended(dtype):   # typed keys: fill their data
        return dtype._rules.full(shape, fill_value)
    abstract = isinstance(getattr(sharding, "mesh", None), AbstractMesh)
    trace = _trace._context.trace
    lazy = type(trace) is LazyTrace and isinstance(sharding, SingleDeviceSharding)
    placed = sharding is not None and not abstract and (
        lazy or trace is _trace.eval_trace)  # (placed values are not weakly typed)
    if lazy and isinstance(fill_value, (bool, int, float, complex)):
        fill_value = np.asarray(fill_value, dtypes.canonicalize_dtype(
            dtype or dtypes.dtype(fill_value)))
    if lazy and not is_pending(fill_value):
        # a value at hand is put there first: the lazy broadcast is computed there too
        fill_value = device_put_value(fill_value, sharding._device_assignment[0])
    if dtype is None:
        fill = fill_value if not isinstance(fill_value, (bool, int, float, complex)) \
            else scalar_array(fill_value, dtypes.dtype(fill_value),
                              type(fill_value) is not bool and not placed)
    else:
        from xform.lax.elementwise import convert_element_type  # (cycle: elementwise -> shapes)
        fill = convert_element_type(fill_value, dtype, weak_type=_weak_type and not placed)
    if get_aval(fill).shape:
        raise TypeError(f"full must be called with a scalar fill_value, got shape "
                        f"{get_aval(fill).shape}")
    if abstract:
        return broadcast(fill, shape, out_sharding=sharding)
    out = broadcast_in_dim(fill, shape, ())
    if not placed:  # (a concrete sharding under a transformation is ignored, as JAX's)
        return out
    if isinstance(sharding, NamedSharding):
        return put_sharded(out, sharding)
    return device_put_value(out, sharding._device_assignment[0], memory_kind=sharding.memory_kind)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``;
    weakly typed when ``x`` is and no ``dtype`` is given, as JAX's. ``sharding``: as
    ``full``'s; by default a traced ``x``'s type, or a committed one-device Array's
    sharding (memory kind too), as JAX's. NB: JAX also places an eager result as a sharded
    ``x`` (``jnp.full_like`` does, see ``like_sharding``); here that would commit AD's
    cotangent seeds, which a jit's derived call then refuses where JAX's takes them."""
    aval = get_aval(x)
    weak = dtype is None and aval.weak_type
    if sharding is None and shape is None and isinstance(x, _trace.Tracer):
        sharding = aval._sharding
    elif sharding is None and not weak and eager_placement():
        sharding = x.sharding if committed_device(x) else None
    out = full(aval.shape if shape is None else shape, fill_value,
               aval.dtype if dtype is None else dtype, _weak_type=weak, sharding=sharding)
    vma = _trace._context.vma  # inside shard_map(check_vma=True): varying like ``x``
    return out if vma is None else vma.like(out, x)


def eager_placement():
    """Whether ops run (or are recorded lazily, to run as if eagerly): placement counts."""
    trace = _trace._context.trace
    return trace is _trace.eval_trace or type(trace) is LazyTrace


def zeros_like_array(x):
    return full_like(x, 0)


# ---- reshape ----

def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """Reshape ``operand`` to ``new_sizes`` (row-major); ``dimensions`` transposes first.
    ``out_sharding`` (explicit sharding mode): the result's sharding, for reshapes whose
    sharding no rule infers."""
    new_sizes = _ints(new_sizes, "reshape new_sizes")
    if dimensions is not None and tuple(dimensions) != tuple(range(get_aval(operand).ndim)):
        operand = transpose(operand, dimensions)
    if out_sharding is not None:  # (a param only when given)
        return reshape_p.bind(operand, new_sizes=new_sizes,
                              sharding=sharding_types.abstract_sharding(out_sharding, "reshape"))
    if get_aval(operand).shape == new_sizes and hasattr(operand, "aval"):  # (JAX's: an
        return operand                # Array or tracer as is; NumPy made an Array)
    return reshape_p.bind(operand, new_sizes=new_sizes)


def _reshape_abstract_eval(x, *, new_sizes, sharding=None):
    if any(s < 0 for s in new_sizes) or math.prod(new_sizes) != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"for shape {x.shape}.")
    return ShapedArray(new_sizes, x.dtype, x.weak_type, sharding=None if sharding is None
                       else sharding_types.type_sharding(sharding, len(new_sizes)))


def _reshape_batch(vals, dims, *, new_sizes, sharding=None):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    s = None if sharding is None else _batched_sharding(sharding, x, len(new_sizes))
    return reshape(x, (get_aval(x).shape[0],) + new_sizes, out_sharding=s), 0


def _reshape_transpose(ct, x, *, new_sizes, sharding=None):
    return [reshape(ct, x.aval.shape, out_sharding=x.aval._sharding)]  # (typed as x)


reshape_p = standard_primitive("reshape", _reshape_abstract_eval)
ad.deflinear(reshape_p, _reshape_transpose)
batching.primitive_batchers[reshape_p] = _reshape_batch
def _reshape_lowering(ctx, x, *, new_sizes, sharding=None):  # (types lower generically)
    out = ctx.avals_out[0]
    if shape_poly.is_constant_shape(out.shape):
        return hlo.reshape(mlir.aval_to_ir_type(out), x)
    return hlo.dynamic_reshape(mlir.aval_to_ir_type(out), x, mlir.shape_value(out.shape))


mlir.register_lowering(reshape_p, _reshape_lowering)


# ---- transpose ----

def transpose(operand, permutation):
    """Permute the dimensions of ``operand``."""
    permutation = _ints(permutation, "permutation")
    if permutation == tuple(range(len(permutation))) and len(permutation) == get_aval(
            operand).ndim:
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation {permutation} is not a permutation of the "
                        f"dimensions of an array of shape {x.shape}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_batch(vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


transpose_p = standard_primitive("transpose", _transpose_abstract_eval)
ad.deflinear(transpose_p, lambda ct, x, *, permutation: [
    transpose(ct, tuple(np.argsort(permutation)))])
batching.primitive_batchers[transpose_p] = _transpose_batch
mlir.register_lowering(transpose_p, lambda ctx, x, *, permutation: hlo.transpose(
    x, mlir.dense_i64(permutation)))


# ---- squeeze / expand_dims ----

def squeeze(array, dimensions):
    """Remove the size-1 ``dimensions`` (negative indices allowed)."""
    ndim = get_aval(array).ndim
    dimensions = tuple(sorted(_axis(d, ndim) for d in _ints(dimensions, "dimensions")))
    if not dimensions:
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


def _squeeze_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"dimensions are not unique: {dimensions}")
    if any(not 0 <= d < x.ndim or x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                         f"to one, got shape={x.shape} and dimensions={dimensions}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


def _squeeze_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return squeeze(x, tuple(i + 1 for i in dimensions)), 0


squeeze_p = standard_primitive("squeeze", _squeeze_abstract_eval)
ad.deflinear(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])
batching.primitive_batchers[squeeze_p] = _squeeze_batch
mlir.register_lowering(squeeze_p, lambda ctx, x, *, dimensions: _reshape_lowering(
    ctx, x, new_sizes=None))


def expand_dims(array, dimensions):
    """Insert size-1 dimensions at ``dimensions`` (a composition with broadcast_in_dim,
    as in JAX, so it needs no rules of its own)."""
    aval = get_aval(array)
    ndim_out = aval.ndim + len(dimensions)
    dims = sorted(_axis(d, ndim_out) for d in _ints(dimensions, "dimensions"))
    if len(set(dims)) != len(dims):
        raise ValueError(f"repeated axis in expand_dims: {dimensions}")
    shape = list(aval.shape)
    for d in dims:
        shape.insert(d, 1)
    kept = [i for i in range(ndim_out) if i not in dims]
    return broadcast_in_dim(array, shape, kept)


# ---- iota ----

def iota(dtype, size):
    """``[0, 1, ..., size-1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
    """An array of ``shape`` counting along ``dimension``; ``out_sharding`` as in broadcasts."""
    shape, dtype, dimension = _ints(shape, "iota shape"), dtypes.canonicalize_dtype(dtype), \
        int(dimension)
    if out_sharding is None:
        return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension)
    s = sharding_types.abstract_sharding(out_sharding, "broadcasted_iota")
    if _trace._context.trace is _trace.eval_trace:  # (checked as the type would be)
        _iota_abstract_eval(dtype=dtype, shape=shape, dimension=dimension, sharding=s)
        return _eager_placed(broadcasted_iota(dtype, shape, dimension), out_sharding)
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension, sharding=s)


def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
    if dtypes.is_bool(dtype):   # (XLA has no bool iota)
        raise TypeError("iota does not accept dtype bool; use an integer dtype")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return _typed_result(shape, dtype, sharding=sharding)


iota_p = standard_primitive("iota", _iota_abstract_eval)
ad.defnondiff(iota_p)
batching.primitive_batchers[iota_p] = None  # no operands: never batched
mlir.register_lowering(iota_p, lambda ctx, *, dtype, shape, dimension, sharding=None:
                       mlir.iota(ctx.avals_out[0], dimension))


# ---- dimension_as_value ----

def dimension_as_value(d):
    """Dimension ``d`` as an int32 scalar: ``d`` itself if constant; for a symbolic
    dimension, a value computed from the dimension variables (as JAX's)."""
    if not shape_poly.is_symbolic_dim(d):
        return d
    return dim_as_value_p.bind(dim=d)


dim_as_value_p = standard_primitive("dim_as_value", lambda *, dim: ShapedArray((), np.int32))
ad.defnondiff(dim_as_value_p)
batching.primitive_batchers[dim_as_value_p] = None  # no operands: never batched
mlir.register_lowering(dim_as_value_p, lambda ctx, *, dim: mlir.dim_value(dim))


# ---- slice ----

def slice(operand, start_indices, limit_indices, strides=None):
    """``operand[start:limit:stride]`` along every dimension (static bounds). As JAX's,
    eagerly one without ``strides`` runs as a dynamic_slice (which clamps the bounds)."""
    start = _ints(start_indices, "start_indices")
    limit = _ints(limit_indices, "limit_indices")
    strides = None if strides is None else _ints(strides, "strides")
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=strides)


def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim) or any(
            not 0 <= s <= l <= d or st < 1
            for s, l, d, st in zip(start_indices, limit_indices, x.shape, strides)):
        raise TypeError(f"slice of shape {x.shape} with start_indices={start_indices}, "
                        f"limit_indices={limit_indices}, strides={strides} is out of bounds "
                        "or has the wrong rank")
    shape = tuple((l - s + st - 1) // st for s, l, st in zip(start_indices, limit_indices,
                                                             strides))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    shape = x.aval.shape
    strides = strides or (1,) * len(shape)
    out_shape = get_aval(ct).shape
    real_limits = [s + (n - 1) * st + 1 if n else s
                   for s, n, st in zip(start_indices, out_shape, strides)]
    config = [(s, d - l, st - 1) for s, l, d, st in zip(start_indices, real_limits, shape,
                                                         strides)]
    from xform.lax.elementwise import _const  # (a cycle: elementwise builds on shapes)
    return [pad(ct, _const(ct, 0), config)]


def _slice_batch(vals, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = vals, dims
    size = get_aval(x).shape[d]
    start = start_indices[:d] + (0,) + start_indices[d:]
    limit = limit_indices[:d] + (size,) + limit_indices[d:]
    st = None if strides is None else strides[:d] + (1,) + strides[d:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=st), d


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides, out=0):
    lo, hi = tuple(start_indices), tuple(limit_indices)
    strides = tuple(strides or (1,) * len(lo))
    if shape_poly.is_constant_shape(lo + hi):
        return hlo.slice(x, *map(mlir.dense_i64, (lo, hi, strides)))
    return hlo.real_dynamic_slice(mlir.aval_to_ir_type(ctx.avals_out[out]), x,
                                  *map(mlir.shape_value, (lo, hi, strides)))


slice_p = standard_primitive("slice", _slice_abstract_eval)
# (eagerly a unit-stride slice runs as dynamic_slice: dynamic_slicing.py registers that
# shortcut beside the primitive it binds, which builds on this module)
ad.deflinear(slice_p, _slice_transpose)
batching.primitive_batchers[slice_p] = _slice_batch
mlir.register_lowering(slice_p, _slice_lowering)


# ---- pad ----

def pad(operand, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` per dimension; negative low/high crop."""
    config = tuple(_ints((lo, hi, i), "pad config") for lo, hi, i in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape or padding_value.dtype != x.dtype:
        raise TypeError(f"pad padding_value must be a scalar of the operand's dtype "
                        f"{x.dtype.name}, got {padding_value.str_short()}")
    if len(padding_config) != x.ndim or any(i < 0 for _, _, i in padding_config):
        raise ValueError(f"pad config {padding_config} does not match operand shape "
                         f"{x.shape} (one (low, high, interior>=0) per dimension)")
    shape = tuple(lo + hi + d + shape_poly.max_dim(d - 1, 0) * i
                  for d, (lo, hi, i) in zip(x.shape, padding_config))
    if any(s < 0 for s in shape):
        raise ValueError(f"pad of shape {x.shape} with {padding_config} gives negative "
                         f"dimension sizes {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    # deflinear hands this rule both operands as linear (see ad.deflinear): the padding
    # value's cotangent is everything the operand's slots did not take.
    from xform.lax.elementwise import _const, sub  # (a cycle: elementwise builds on shapes)
    from xform.lax.reductions import reduce_sum  # (a cycle: reductions builds on shapes)
    unpad = [(-lo, -hi, 0) for lo, hi, _ in padding_config]
    unpadded = pad(ct, _const(ct, 0), unpad)
    ct_x = slice(unpadded, (0,) * len(padding_config), get_aval(unpadded).shape,
                 tuple(i + 1 for _, _, i in padding_config))
    total = lambda v: reduce_sum(v, tuple(range(get_aval(v).ndim)))  # noqa: E731
    return [ct_x, sub(total(ct), total(ct_x))]


def _pad_batch(vals, dims, *, padding_config):
    (x, pv), (d, pd) = vals, dims
    if pd is None:
        config = list(padding_config)
        config.insert(d, (0, 0, 0))
        return pad_p.bind(x, pv, padding_config=tuple(config)), d
    # A batched padding value: pad with zeros, then select it in by a mask.
    from xform.lax.elementwise import _const, select_n  # (a cycle: elementwise builds on shapes)
    size = get_aval(pv).shape[pd]
    x = batching.bdim_at_front(x, d, size)
    config = ((0, 0, 0),) + padding_config
    padded = pad_p.bind(x, _const(x, 0), padding_config=config)
    ones = full(get_aval(x).shape, True, np.bool_)
    mask = pad_p.bind(ones, scalar_array(False, np.dtype(np.bool_), False),
                      padding_config=config)
    pv = broadcast_in_dim(batching.moveaxis(pv, pd, 0), get_aval(padded).shape, (0,))
    return select_n(mask, pv, padded), 0


def _pad_lowering(ctx, x, pv, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    if shape_poly.is_constant_shape(lo + hi + interior):
        return hlo.pad(x, pv, *map(mlir.dense_i64, (lo, hi, interior)))
    return hlo.dynamic_pad(mlir.aval_to_ir_type(ctx.avals_out[0]), x, pv,   # (as JAX)
                           *map(mlir.shape_value, (lo, hi, interior)))


pad_p = standard_primitive("pad", _pad_abstract_eval)
ad.deflinear(pad_p, _pad_transpose)
batching.primitive_batchers[pad_p] = _pad_batch
mlir.register_lowering(pad_p, _pad_lowering)


# ---- concatenate ----

def concatenate(operands, dimension):
    """Join ``operands`` along ``dimension``."""
    if len(operands := list(operands)) == 1 and hasattr(operands[0], "aval"):
        return operands[0]   # (an Array or tracer as is, as JAX's; NumPy made an Array)
    return concatenate_p.bind(*operands, dimension=int(dimension))


def _concatenate_abstract_eval(*xs, dimension):
    shapes = lambda: ", ".join(str(x.shape) for x in xs)  # noqa: E731  (JAX's words)
    if not xs:
        raise ValueError("concatenate requires a non-empty sequence of arrays, got 0.")
    if len({x.ndim for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {shapes()}.")
    if not 0 <= dimension < xs[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {shapes()}.")
    if len({x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {dimension} for shapes {shapes()}.")
    if len({x.dtype for x in xs}) != 1:
        raise TypeError(f"lax.concatenate requires arguments to have the same dtypes, got "
                        f"{', '.join(x.dtype.name for x in xs)}. (Tip: jnp.concatenate is "
                        f"a similar function that does automatic type promotion on inputs).")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_transpose(ct, *xs, dimension):
    out, start = [], 0
    ct_shape = get_aval(ct).shape
    for x in xs:
        size = (x.aval if ad.is_undefined_primal(x) else get_aval(x)).shape[dimension]
        if ad.is_undefined_primal(x):
            lo = [0] * len(ct_shape)
            hi = list(ct_shape)
            lo[dimension], hi[dimension] = start, start + size
            out.append(slice(ct, lo, hi))
        else:
            out.append(None)
        start += size
    return out


def _concatenate_batch(vals, dims, *, dimension):
    size = batching.axis_size_of(vals, dims)
    xs = [batching.bdim_at_front(x, d, size) for x, d in zip(vals, dims)]
    return concatenate(xs, dimension + 1), 0


concatenate_p = standard_primitive("concatenate", _concatenate_abstract_eval)
ad.deflinear(concatenate_p, _concatenate_transpose)
batching.primitive_batchers[concatenate_p] = _concatenate_batch
mlir.register_lowering(concatenate_p, lambda ctx, *xs, dimension: hlo.concatenate(
    list(xs), dimension))


# ---- rev ----

def rev(operand, dimensions):
    """Reverse ``operand`` along each of ``dimensions``.

    >>> import numpy as np
    >>> rev(np.arange(6).reshape(2, 3), (1,))
    Array([[2, 1, 0],
           [5, 4, 3]], dtype=int32)
    """
    return rev_p.bind(operand, dimensions=_ints(dimensions, "rev dimensions"))


def _rev_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(
            not 0 <= d < x.ndim for d in dimensions):
        raise TypeError(f"rev dimensions must be unique and in [0, {x.ndim}) for operand "
                        f"shape {x.shape}, got {dimensions}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _rev_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return rev(x, tuple(a + (a >= d) for a in dimensions)), d


rev_p = standard_primitive("rev", _rev_abstract_eval)
ad.deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])  # self-transpose
batching.primitive_batchers[rev_p] = _rev_batch
mlir.register_lowering(rev_p, lambda ctx, x, *, dimensions: hlo.reverse(
    x, mlir.dense_i64(dimensions)))


# ---- split ----

def split(operand, sizes, axis=0):
    """Split ``operand`` along ``axis`` into pieces of ``sizes`` (summing to its size).

    >>> import numpy as np
    >>> [p.shape for p in split(np.zeros((5, 2)), (2, 3))]
    [(2, 2), (3, 2)]
    """
    axis = _axis(operator.index(axis), get_aval(operand).ndim)
    return split_p.bind(operand, sizes=_ints(sizes, "split sizes"), axis=axis)


def _split_abstract_eval(x, *, sizes, axis):
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ValueError(f"split sizes must be nonnegative and sum to the size of axis "
                         f"{axis} of the operand (shape {x.shape}), got sizes={sizes}")
    return [x.update(shape=x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]


def _split_transpose(cts, x, *, sizes, axis):
    return [concatenate([ad.instantiate_zeros(c) for c in cts], axis)]


def _split_batch(vals, dims, *, sizes, axis):
    (x,), (d,) = vals, dims
    new_axis = axis + (axis >= d)
    return split_p.bind(x, sizes=sizes, axis=new_axis), [d] * len(sizes)


def _split_lowering(ctx, x, *, sizes, axis):
    shape, outs, start = ctx.avals_in[0].shape, [], 0
    for i, s in enumerate(sizes):   # (symbolic sizes: real_dynamic_slice)
        lo, hi = [0] * len(shape), list(shape)
        lo[axis], hi[axis], start = start, start + s, start + s
        outs.append(_slice_lowering(ctx, x, start_indices=lo, limit_indices=hi, strides=0,
                                    out=i))
    return outs


split_p = standard_primitive("split", _split_abstract_eval, multiple_results=True)
ad.deflinear(split_p, _split_transpose)
batching.primitive_batchers[split_p] = _split_batch
mlir.register_lowering(split_p, _split_lowering)
