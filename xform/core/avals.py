"""Abstract values: what a tracer knows about an array (shape, dtype, weak type)."""
import enum
import math

import numpy as np

from xform.core import dtypes
from xform.core.mesh import get_abstract_mesh
from xform.core.sharding import NamedSharding, PartitionSpec


def short_dtype_name(dtype) -> str:
    if dtypes.is_extended(dtype):
        return str(dtype)
    # As JAX: float8_e4m3fn -> f8_e4m3fn, uint4 -> u4, bfloat16 -> bf16, complex64 -> c64.
    return (np.dtype(dtype).name.replace("float", "f").replace("uint", "u")
            .replace("int", "i").replace("complex", "c"))


_KEEP = object()  # (``update``'s default: the sharding as it is)


class MemorySpace(enum.Enum):
    """Which memory a value lives in, part of its type as in JAX (``jax.memory.Space``):
    ``Host`` is a ``pinned_host`` buffer (printed ``f32<host>[8]``); every other memory
    kind (``device``, ``unpinned_host``) types as ``Device``."""
    Device = "device"
    Host = "pinned_host"
    Any = "any"

    __hash__ = object.__hash__

    def __repr__(self):
        return f"MemorySpace.{self.name}"


def memory_space_of(kind):
    """The MemorySpace a buffer of memory kind ``kind`` types as (JAX's rule)."""
    return MemorySpace.Host if kind == "pinned_host" else MemorySpace.Device


def type_memory_spaces(prim, avals, params, out):
    """``out`` (a primitive's output aval or list of them) in the memory space its
    inputs share, JAX's default rule, applied only when some input is not in device
    memory: non-scalar inputs must agree (else JAX's ValueError); scalars follow.
    Primitives whose outputs a jaxpr types (calls, control flow) or that name the
    space (``device_put``) keep their own, and a scatter's result is in its
    operand's space (JAX's rule for scatters)."""
    if "memory_space" in params or any(hasattr(v, "eqns") or hasattr(v, "jaxpr")
                                       for v in params.values()):
        return out
    if prim.name.startswith("scatter"):
        space = avals[0].memory_space
    else:
        prev = None
        for a in avals:
            if not getattr(a, "shape", ()):
                continue
            if prev is not None and prev.memory_space is not a.memory_space:
                raise ValueError(
                    f"memory_space of all inputs passed to `{prim.name}` must be the same. "
                    f"Got one operand with type: {prev.str_short(False)} and another "
                    f"operand with type: {a.str_short(False)}")
            prev = a
        space = MemorySpace.Device if prev is None else prev.memory_space
    if space is MemorySpace.Device:
        return out
    if isinstance(out, (list, tuple)):
        return [o.update(memory_space=space) for o in out]
    return out.update(memory_space=space)


class ShapedArray:
    """An array of known shape and dtype; ``weak_type`` marks Python-scalar origin.

    Immutable and hashable (the hash is computed once: avals are jit cache keys).
    NB: xform has no ConcreteArray; tracers that know their value say so through
    ``Tracer.to_concrete_value`` (the stackless design JAX uses now).

    ``dtype`` may be an extended dtype (typed PRNG keys, ``key<fry>``): the shape is
    then the logical one and ``physical_aval`` gives what XLA holds. ``vma``: inside a
    ``shard_map(check_vma=True)`` body, the mesh axes the value may vary over
    (``typeof(x).mat.varying``; see ``xform.lax.vma``).

    ``_sharding``: in explicit sharding mode, a NamedSharding over an AbstractMesh whose
    spec (one entry per dimension) names only Explicit axes: the type's placement
    (``core/sharding_types.py``). None for every other value, so the avals of the
    non-explicit world hash and compare as before; ``.sharding`` then reads as JAX's
    (replicated over the abstract mesh in context).

    ``memory_space``: a :class:`MemorySpace`; only ``Host`` enters the hash, so the
    avals of ordinary device values hash and compare as before.
    """
    __slots__ = ("shape", "dtype", "weak_type", "vma", "_sharding", "memory_space", "_hash")

    def __init__(self, shape, dtype, weak_type=False, vma=frozenset(), sharding=None,
                 memory_space=MemorySpace.Device):
        self.shape = tuple(shape)
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            if not dtypes.is_extended(dtype):
                raise
            self.dtype = dtype
        self.weak_type = bool(weak_type)
        self.vma = vma if type(vma) is frozenset else frozenset(vma)
        self._sharding = sharding
        self.memory_space = memory_space
        key = (self.shape, self.dtype, self.weak_type, self.vma)
        key = key if sharding is None else key + (sharding,)
        self._hash = hash(key if memory_space is MemorySpace.Device else key + (memory_space,))

    ndim = property(lambda self: len(self.shape))
    # (math.prod: a symbolic dimension when the shape has one)
    size = property(lambda self: math.prod(self.shape))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return (type(other) is ShapedArray and self._hash == other._hash
                and self.shape == other.shape and self.dtype == other.dtype
                and self.weak_type == other.weak_type and self.vma == other.vma
                and self._sharding == other._sharding
                and self.memory_space is other.memory_space)

    def update(self, shape=None, dtype=None, weak_type=None, vma=None, sharding=_KEEP,
               memory_space=None):
        """A copy with the given fields replaced. A new ``shape`` drops the sharding
        unless one is given (a reshaped value's placement is its rule's to say)."""
        if sharding is _KEEP:
            sharding = self._sharding if shape is None else None
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type,
                           self.vma if vma is None else frozenset(vma), sharding,
                           self.memory_space if memory_space is None else memory_space)

    @property
    def sharding(self):
        """The NamedSharding of the type (over an AbstractMesh), as JAX's."""
        if self._sharding is not None:
            return self._sharding
        return NamedSharding(get_abstract_mesh(), PartitionSpec(*[None] * len(self.shape)))

    @property
    def mat(self):
        """The manual axis type: ``.varying`` (the ``vma``), ``.unreduced``, ``.reduced``."""
        return ManualAxisType(self.vma)

    def strip_weak_type(self):
        return self.update(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self):
        """The aval of this value's tangents: float0 for integer/bool values. The weak
        type is kept, as JAX's: a Python float's tangent (or cotangent) is weak, so it
        promotes as its primal does (a weak tangent times a bf16 array stays bf16)."""
        if dtypes.is_inexact(self.dtype):
            return self
        return ShapedArray(self.shape, dtypes.float0, self.weak_type, self.vma,
                           self._sharding, self.memory_space)

    def str_short(self, short_dtypes=True):
        """``f32[8@x,4]``: dtype, then each dimension with the mesh axes splitting it."""
        vma = ",".join(sorted(map(str, self.vma)))  # (sorted; JAX's are in mesh order)
        vma = "" if not self.vma else "{V:%s}" % (vma if len(self.vma) == 1 else f"({vma})")
        dt = short_dtype_name(self.dtype) if short_dtypes else str(self.dtype)
        dims = map(str, self.shape)
        if self._sharding is not None:
            dims = [d if p is None else f"{d}@{p}" if isinstance(p, str) else
                    f"{d}@({','.join(p)})" for d, p in zip(dims, self._sharding.spec)]
        space = "" if self.memory_space is MemorySpace.Device else \
            f"<{self.memory_space.name.lower()}>"
        return f"{dt}{space}[{','.join(dims)}]{vma}"

    def __str__(self):
        return ("~" if self.weak_type else "") + self.str_short(short_dtypes=False)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(short_dtypes=False)}{weak})"


class ManualAxisType:
    """The mesh axes a value varies over (xform tracks no unreduced/reduced state)."""
    __slots__ = ("varying",)
    unreduced = reduced = frozenset()

    def __init__(self, varying=frozenset()):
        self.varying = frozenset(varying)

    def __repr__(self):
        return f"ManualAxisType(varying={set(self.varying) or '{}'})"


def physical_aval(aval: ShapedArray) -> ShapedArray:
    """What XLA holds for ``aval``: itself, or for an extended dtype its physical
    element (e.g. ``uint32[2]`` per threefry key) appended to the shape."""
    dt = aval.dtype
    if isinstance(dt, np.dtype):
        return aval
    elt = dt._rules.physical_element_aval
    s = aval._sharding   # (the key data's trailing dimensions are never split)
    s = s if s is None else s.with_spec(PartitionSpec(*s.spec, *[None] * len(elt.shape)))
    return ShapedArray(aval.shape + elt.shape, elt.dtype, vma=aval.vma, sharding=s,
                       memory_space=aval.memory_space)


_canonical = {}


def canonical_aval(aval: ShapedArray) -> ShapedArray:
    """One shared object per distinct aval, for the avals of Arrays that dispatch makes.

    Cache keys holding avals then compare by identity on a hit (a tuple comparison
    skips ``__eq__`` for identical elements): ~0.15 us per argument of an eager op or
    a jitted call. Equality stays structural, so an aval that is not canonical (or a
    table cleared when full) is only slower, never wrong."""
    if len(_canonical) > 65536:
        _canonical.clear()
    try:
        return _canonical.setdefault(aval, aval)
    except TypeError:  # an unhashable aval of another kind: as it is
        return aval


_PY_SCALARS = frozenset((bool, int, float, complex))


def aval_of_value(x) -> ShapedArray:
    """The aval of a concrete value: a NumPy array or scalar, or a Python scalar."""
    # NumPy values before the Python-scalar test (np.float64 subclasses float, but it is
    # strongly typed); Python scalars skip the NumPy test.
    if type(x) not in _PY_SCALARS and isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize_dtype(x.dtype))
    if isinstance(x, (bool, int, float, complex)):
        dt = dtypes.dtype(x)
        if isinstance(x, int) and not isinstance(x, bool):
            _check_int_range(x, dt)
        return ShapedArray((), dt, weak_type=not isinstance(x, bool))
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid array type "
                    "(expected an xform Array, a NumPy array or a Python scalar).")


def _check_int_range(x, dt):
    info = np.iinfo(dt)
    if not info.min <= x <= info.max:
        raise OverflowError(f"Python int {x} too large to convert to {dt.name}")
