"""The threefry2x32 counter-based block cipher as a primitive, plus
``bitcast_convert_type``: the two primitives the PRNG in ``xform.random`` needs; and
XLA's own generator, ``rng_bit_generator``.

``threefry2x32(k1, k2, x1, x2)`` encrypts the 64-bit counters ``(x1, x2)`` (two
uint32 arrays) under the key ``(k1, k2)`` with Threefry-2x32, 20 rounds (Salmon et
al., "Parallel random numbers: as easy as 1, 2, 3"). Rank-0 operands broadcast.
It lowers to StableHLO uint32 add/xor/shift arithmetic, batches elementwise, and
is not differentiable (integer outputs have float0 tangents).
"""
import enum
import operator

import numpy as np

from xform.core import dtypes
from xform.core.avals import ShapedArray
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.lax import bitwise, elementwise, shapes
from xform.lax._prim import standard_primitive
from xform.lax.control_flow.scan_loops import fori_loop

hlo = mlir.hlo
_u32 = np.dtype(np.uint32)

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 of the counters ``(x1, x2)`` under key ``(k1, k2)``.

    Args:
      k1, k2: uint32 key words (usually rank 0).
      x1, x2: uint32 counter words. Shapes broadcast as JAX's primitive: rank-0
        operands broadcast, the others share a rank and broadcast along size-1 axes.

    Returns:
      A pair of uint32 arrays of the broadcast shape.

    >>> import numpy as np
    >>> from xform.lax.prng import threefry2x32
    >>> z = np.uint32(0)
    >>> [int(v) for v in threefry2x32(z, z, z, z)]
    [1797259609, 2579123966]
    """
    return threefry2x32_p.bind(*(np.asarray(a, _u32) if isinstance(a, (int, np.integer))
                                 else a for a in (k1, k2, x1, x2)))


def _threefry_abstract_eval(k1, k2, x1, x2):
    for name, a in zip(("k1", "k2", "x1", "x2"), (k1, k2, x1, x2)):
        if a.dtype != _u32:
            raise TypeError(f"threefry2x32 requires uint32 arguments, got {name} of "
                            f"dtype {a.dtype.name}.")
    shape = _broadcast_shape(k1, k2, x1, x2)
    return [ShapedArray(shape, _u32)] * 2


def _broadcast_shape(*avals):
    # JAX's rule for this primitive (lax's broadcasting_shape_rule): size-1 axes
    # broadcast too, so a vmapped split keeps its keys at (n, 1) against counters (1, k).
    shapes = [tuple(a.shape) for a in avals if a.shape]
    if not shapes:
        return ()
    out = []
    for ds in zip(*shapes):
        big = {d for d in ds if d != 1}
        if len(big) > 1:
            break
        out.append(big.pop() if big else 1)
    if len({len(s) for s in shapes}) != 1 or len(out) != len(shapes[0]):
        shown = ", ".join(str(tuple(a.shape)) for a in avals)
        raise TypeError(f"threefry2x32 got incompatible shapes for broadcasting: {shown}.")
    return tuple(out)


threefry2x32_p = standard_primitive("threefry2x32", _threefry_abstract_eval,
                                    multiple_results=True)
ad.defnondiff(threefry2x32_p)


def _bcast(v, shape):
    vshape = tuple(get_aval(v).shape)
    if vshape == tuple(shape):
        return v
    return shapes.broadcast_in_dim(v, tuple(shape), tuple(range(len(vshape))))


def _threefry_composition(k1, k2, x1, x2, rolled=False):
    # Written with lax ops on uint32 so it lowers to plain StableHLO arithmetic: the 5
    # blocks of 4 rounds unrolled, or (``rolled``) as a 5-step loop, as JAX lowers it on
    # CPU (use_rolled_loops): a quarter of the ops for XLA to compile (jit of a Poisson
    # sampler, a copy of the cipher per draw, compiles 5x faster).
    # The key words keep their own (broadcast) shape, as JAX's: under vmap the keys are
    # (n, 1) against counters (1, k), and the loop carries three (n, 1) key words, not
    # three (n, k) (jit(gamma(k, 2.5, (10_000,))) ran 1.2x JAX's time with them).
    shape = _broadcast_shape(*(get_aval(a) for a in (k1, k2, x1, x2)))
    x1, x2 = _bcast(x1, shape), _bcast(x2, shape)
    kshape = _broadcast_shape(get_aval(k1), get_aval(k2))
    k1, k2 = _bcast(k1, kshape), _bcast(k2, kshape)
    ks = [k1, k2, bitwise.bitwise_xor(bitwise.bitwise_xor(k1, k2), _u32.type(0x1BD11BDA))]
    x = [elementwise.add(x1, _bcast(ks[0], shape)), elementwise.add(x2, _bcast(ks[1], shape))]
    if rolled:
        rotations = [np.array(r, _u32) for r in _ROTATIONS]
        x, _, _ = fori_loop(0, 5, _rolled_block, (x, ks[1:] + ks[:1], rotations))
        return x
    for i in range(5):
        x = _rounds(x, [_u32.type(r) for r in _ROTATIONS[i % 2]])
        x[0] = elementwise.add(x[0], _bcast(ks[(i + 1) % 3], shape))
        x[1] = elementwise.add(elementwise.add(x[1], _bcast(ks[(i + 2) % 3], shape)),
                               _u32.type(i + 1))
    return x


def _rounds(x, rotations):
    # Four Threefry rounds: x0 += x1; x1 = x0 ^ rotl(x1, r).
    x = list(x)
    for r in rotations:
        x[0] = elementwise.add(x[0], x[1])
        left = bitwise.shift_left(x[1], r)
        right = bitwise.shift_right_logical(x[1], elementwise.sub(_u32.type(32), r))
        x[1] = bitwise.bitwise_xor(x[0], bitwise.bitwise_or(left, right))
    return x


def _rolled_block(i, state):
    # One loop step: the block's 4 rounds, then key injection i + 1; the keys and the
    # rotation sets rotate for the next block.
    x, ks, rotations = state
    x = _rounds(x, [rotations[0][j] for j in range(4)])
    counter = elementwise.add(elementwise.convert_element_type(i, _u32), _u32.type(1))
    shape = get_aval(x[0]).shape
    x = [elementwise.add(x[0], _bcast(ks[0], shape)),
         elementwise.add(elementwise.add(x[1], _bcast(ks[1], shape)), counter)]
    return x, ks[1:] + ks[:1], rotations[1:] + rotations[:1]


_threefry_unrolled_rule = mlir.lower_fun(_threefry_composition)
_threefry_rolled_rule = mlir.lower_fun(lambda *args: _threefry_composition(*args, rolled=True))


def _threefry_lowering(ctx, k1, k2, x1, x2):
    # JAX's choice of lowering: rolled on CPU, unrolled elsewhere (where XLA fuses the
    # straight-line cipher into one kernel).
    rule = _threefry_rolled_rule if ctx.module_ctx.platform == "cpu" else \
        _threefry_unrolled_rule
    return rule(ctx, k1, k2, x1, x2)


mlir.register_lowering(threefry2x32_p, _threefry_lowering)


def _threefry_batch(vals, dims):
    # Batch axes to the front; every operand is given rank 1 + rank with size-1 axes
    # (unbatched ones a leading 1, rank-0 ones stay rank 0), not broadcast: the cipher
    # broadcasts, and the lowering keeps small key words small (JAX's broadcast_batcher).
    avals = [get_aval(v) for v in vals]
    rank = max(a.ndim - (d is not batching.not_mapped) for a, d in zip(avals, dims))
    args = []
    for v, a, d in zip(vals, avals, dims):
        if d is batching.not_mapped:
            args.append(v if a.ndim == 0 else
                        shapes.broadcast_in_dim(v, (1, *a.shape), tuple(range(1, 1 + a.ndim))))
        else:
            v = batching.moveaxis(v, d, 0)
            args.append(v if a.ndim == 1 + rank else
                        shapes.broadcast_in_dim(v, (a.shape[d],) + (1,) * rank, (0,)))
    return threefry2x32_p.bind(*args), [0, 0]


batching.primitive_batchers[threefry2x32_p] = _threefry_batch


# ---- bitcast_convert_type ----

def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of ``operand`` as ``new_dtype``.

    Between widths, as XLA: a narrower ``new_dtype`` adds a trailing dimension of
    ``old_bits // new_bits``; a wider one consumes a trailing dimension of that size.

    >>> import numpy as np
    >>> from xform import lax
    >>> int(lax.bitcast_convert_type(np.float32(1.0), np.uint32))
    1065353216
    >>> lax.bitcast_convert_type(np.uint32(1), np.uint8).shape
    (4,)
    """
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.canonicalize_dtype(new_dtype))


def _bitcast_abstract_eval(x, *, new_dtype):
    old_bits, new_bits = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
    if x.dtype != new_dtype and {np.dtype(x.dtype).kind, new_dtype.kind} & {"b", "c"}:
        raise TypeError(f"bitcast_convert_type does not support bool or complex types "
                        f"unless the operand and destination types match, got "
                        f"{x.dtype.name} -> {new_dtype.name}.")
    if old_bits == new_bits:
        return ShapedArray(x.shape, new_dtype)
    if old_bits > new_bits:
        return ShapedArray((*x.shape, old_bits // new_bits), new_dtype)
    size = x.shape[-1] if x.shape else 1
    if size * old_bits != new_bits:
        raise ValueError(f"Attempting to convert array of shape {x.shape} from "
                         f"{x.dtype.name} of size {old_bits} bits to {new_dtype.name} of "
                         f"size {new_bits} bits, but {size} * {old_bits} != {new_bits}")
    return ShapedArray(x.shape[:-1], new_dtype)


bitcast_convert_type_p = standard_primitive("bitcast_convert_type", _bitcast_abstract_eval)
ad.defnondiff(bitcast_convert_type_p)
batching.primitive_batchers[bitcast_convert_type_p] = (   # a width change touches the last axis
    lambda vals, dims, *, new_dtype: (bitcast_convert_type_p.bind(
        batching.moveaxis(vals[0], dims[0], 0), new_dtype=new_dtype), 0))
mlir.register_lowering(
    bitcast_convert_type_p,
    lambda ctx, x, new_dtype: hlo.bitcast_convert(mlir.aval_to_ir_type(ctx.avals_out[0]), x))


# ---- rng_bit_generator: XLA's stateless RngBitGenerator ----

class RandomAlgorithm(enum.IntEnum):
    """The algorithm of ``rng_bit_generator``."""
    RNG_DEFAULT = 0    # the platform's default
    RNG_THREE_FRY = 1  # Threefry-2x32
    RNG_PHILOX = 2     # Philox-4x32

    def __str__(self):
        return self.name


_RBG_DTYPES = {np.dtype(d) for d in (np.uint8, np.uint16, np.uint32, np.uint64)}


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """Random bits of ``shape`` and unsigned ``dtype`` from XLA's RngBitGenerator,
    and the advanced key: ``(new_key, bits)``. ``key`` is uint32[4] (or uint64[2]).

    Which bits come out depends on the platform and XLA version, as in JAX.

    >>> import numpy as np, xform.lax as lax
    >>> new_key, bits = lax.rng_bit_generator(np.zeros(4, np.uint32), (2, 3))
    >>> new_key.shape, bits.shape, bits.dtype
    ((4,), (2, 3), dtype('uint32'))
    """
    shape = tuple(operator.index(d) for d in shape)
    dtype = dtypes.canonicalize_dtype(dtype)   # (uint64 is uint32 without x64, as JAX)
    if dtype not in _RBG_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dtype,
                                          algorithm=RandomAlgorithm(algorithm)))


def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm):
    if (key.shape, key.dtype) not in (((4,), np.dtype(np.uint32)),
                                      ((2,), np.dtype(np.uint64))):
        raise TypeError(f"rng_bit_generator: key must be uint32[4] or uint64[2], got "
                        f"{key.dtype.name}{list(key.shape)}")
    return [ShapedArray(key.shape, key.dtype, key.weak_type), ShapedArray(shape, dtype)]


def _rng_bit_generator_lowering(ctx, key, *, shape, dtype, algorithm):
    # The op takes a u64[2] key: a u32[4] one is bitcast to it and back, as in JAX.
    u32, u64 = mlir.ir.IntegerType.get_unsigned(32), mlir.ir.IntegerType.get_unsigned(64)
    as_u32 = ctx.avals_in[0].dtype == np.uint32
    if as_u32:
        key = hlo.bitcast_convert(mlir.ir.RankedTensorType.get([2], u64),
                                  hlo.reshape(mlir.ir.RankedTensorType.get([2, 2], u32), key))
    attr = hlo.RngAlgorithmAttr.get({0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}[algorithm])
    out_key, bits = hlo.RngBitGeneratorOp(key.type, mlir.aval_to_ir_type(ctx.avals_out[1]),
                                          attr, key).results
    if as_u32:
        out_key = hlo.reshape(mlir.ir.RankedTensorType.get([4], u32), hlo.bitcast_convert(
            mlir.ir.RankedTensorType.get([2, 2], u32), out_key))
    return [out_key, bits]


def _rng_bit_generator_batch(vals, dims, *, shape, dtype, algorithm):
    # As JAX: the first key draws the whole batch's bits, and only it advances.
    (keys,), (d,) = vals, dims
    keys = batching.moveaxis(keys, d, 0)
    size = get_aval(keys).shape[0]
    key = shapes.squeeze(shapes.slice(keys, (0, 0), (1, get_aval(keys).shape[1])), (0,))
    new_key, bits = rng_bit_generator_p.bind(key, shape=(size, *shape), dtype=dtype,
                                             algorithm=algorithm)
    new_keys = shapes.concatenate(
        [shapes.broadcast_in_dim(new_key, (1, *get_aval(new_key).shape), (1,)),
         shapes.slice(keys, (1, 0), get_aval(keys).shape)], 0)
    return [new_keys, bits], [0, 0]


rng_bit_generator_p = standard_primitive("rng_bit_generator", _rng_bit_generator_abstract_eval,
                                         multiple_results=True)
ad.defnondiff(rng_bit_generator_p)
batching.primitive_batchers[rng_bit_generator_p] = _rng_bit_generator_batch
mlir.register_lowering(rng_bit_generator_p, _rng_bit_generator_lowering)


# ---- rng_uniform: XLA's stateful RNG ----

def rng_uniform(a, b, shape):
    """Uniform numbers in ``[a, b)`` of ``shape`` from XLA's stateful RNG (experimental,
    as in JAX: prefer ``xform.random``; ``b <= a`` is undefined)."""
    return rng_uniform_p.bind(a, b,
                              shape=tuple(operator.index(d) for d in shape))


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got "
                         f"{a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} "
                         f"and {b.shape}.")
    return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


def _rng_uniform_batch(vals, dims, *, shape):
    raise NotImplementedError("rng_uniform has no batching rule (as in JAX): use "
                              "xform.random.uniform under vmap.")


rng_uniform_p = standard_primitive("rng_uniform", _rng_uniform_abstract_eval)
batching.primitive_batchers[rng_uniform_p] = _rng_uniform_batch
mlir.register_lowering(rng_uniform_p, lambda ctx, a, b, *, shape: hlo.rng(
    a, b, mlir.ir_constant(np.array(shape, np.int64)), hlo.RngDistributionAttr.get("UNIFORM")))
