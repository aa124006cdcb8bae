"""``Exported`` <-> bytes in JAX's flatbuffer schema (jax/_src/export/serialization.fbs).

Written with the ``flatbuffers`` package's Builder and read with its Table: the slot
numbers and enums below are the schema's. xform writes the layout JAX 0.10 writes
(version 3 in the header field, as JAX still does for old readers; avals and shardings
through the ``unique_*`` tables and index vectors), so each library reads the other's
bytes. Shardings are NamedShardings over abstract meshes (axis names, sizes, types and
a PartitionSpec), in the ``unique_*`` tables as JAX writes them; HloSharding protos
(JAX before 3/2026) are not read.
"""
import types

import flatbuffers
import ml_dtypes
import numpy as np
from flatbuffers import number_types as N
from flatbuffers.table import Table

from xform.core import dtypes
from xform.core.avals import MemorySpace, ShapedArray, memory_space_of
from xform.core.mesh import AbstractMesh, AxisType
from xform.core.sharding import PartitionSpec
from xform.core import tree_util
from xform.core import shape_poly as _shape_poly
from xform.export._checks import DisabledSafetyCheck
from xform.export import _export  # (a cycle of module imports: _export
# serializes, this builds Exporteds; attributes are read at call time)

HEADER_VERSION = 3        # what JAX writes in serialization_version (see its comment)
SERIALIZATION_VERSION = 11  # jax's _SERIALIZATION_VERSION whose layout this writes

# enums of the schema
_LEAF, _NONE, _TUPLE, _LIST, _DICT, _CUSTOM = range(6)
_SHAPED_ARRAY = 0
_AXIS_TYPE = {AxisType.Auto: 1, AxisType.Explicit: 2, AxisType.Manual: 3}
_AXIS_TYPE_OF = {v: k for k, v in _AXIS_TYPE.items()}
_MEMORY = {MemorySpace.Device: 1, MemorySpace.Host: 2, MemorySpace.Any: 3}
_MEMORY_OF = {v: k for k, v in _MEMORY.items()}   # (0, missing: the device's)
_CHECK_PLATFORM, _CHECK_CUSTOM_CALL = range(2)  # (the schema's 2, shape_assertions, JAX drops)
_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "float16", "float32", "float64", "complex64", "complex128",
           "bfloat16", "int4", "uint4", "float8_e4m3b11fnuz", "float8_e4m3fn",
           "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float0", "float8_e4m3",
           "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn"]


def _np_dtype(name):
    if name == "float0":
        return dtypes.float0
    return np.dtype(getattr(ml_dtypes, name, None) or name)


_KIND_OF = {}
for _k, _name in enumerate(_DTYPES):
    try:
        _KIND_OF[_np_dtype(_name)] = _k
    except TypeError:  # an ml_dtypes too old for this float8 type
        pass
_DTYPE_OF = {k: d for d, k in _KIND_OF.items()}

# (name, payload serializer, payload deserializer) by node type
serialization_registry = {}
deserialization_registry = {}


# ---- writing ----

def _vector(b, offsets):
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _table(b, n_slots, fields):
    """A table from ``fields``: (slot, kind, value), kind one of 'off', 'i8', 'u16',
    'u32', 'bool' (written in the given order; None values skipped)."""
    b.StartObject(n_slots)
    for slot, kind, value in fields:
        if value is None:
            continue
        if kind == "off":
            b.PrependUOffsetTRelativeSlot(slot, value, 0)
        elif kind == "i8":
            b.PrependInt8Slot(slot, value, 0)
        elif kind == "u16":
            b.PrependUint16Slot(slot, value, 0)
        elif kind == "u32":
            b.PrependUint32Slot(slot, value, 0)
        elif kind == "bool":
            b.PrependBoolSlot(slot, value, 0)
    return b.EndObject()


def _write_treedef(b, td):
    kids = [_write_treedef(b, c) for c in td.children()]
    node = td.node_data()
    names = custom_name = auxdata = None
    if node is None:
        kind = _LEAF
    elif node[0] is types.NoneType:
        kind = _NONE
    elif node[0] is tuple:
        kind = _TUPLE
    elif node[0] is list:
        kind = _LIST
    elif node[0] is dict:
        kind = _DICT
        for k in node[1]:
            if not isinstance(k, str):
                raise TypeError("Serialization is supported only for dictionaries with "
                                f"string keys. Found key {k} of type {type(k)}.")
        names = _vector(b, [b.CreateString(k) for k in node[1]])
    elif node[0] in serialization_registry:
        kind = _CUSTOM
        name, ser = serialization_registry[node[0]]
        data = ser(node[1])
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError("The custom serialization function for `node_type` must "
                             f"return a `bytes` object. It returned a {type(data)}.")
        custom_name, auxdata = b.CreateString(name), b.CreateByteVector(bytes(data))
    else:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type "
                         f"`{node[0]}`. Use `export.register_pytree_node_serialization` "
                         "or `export.register_namedtuple_serialization`.")
    return _table(b, 5, [(0, "i8", kind), (1, "off", _vector(b, kids) if kids else None),
                         (2, "off", names), (3, "off", custom_name), (4, "off", auxdata)])


def _write_aval(b, aval):
    dims = [b.CreateString(str(d)) for d in aval.shape]
    return _table(b, 4, [(0, "i8", _SHAPED_ARRAY), (1, "off", _vector(b, dims)),
                         (2, "i8", _KIND_OF[np.dtype(aval.dtype)]),
                         (3, "i8", _MEMORY[aval.memory_space])])


def _write_check(b, check):
    target = check.is_custom_call()
    if target is not None:
        return _table(b, 2, [(0, "i8", _CHECK_CUSTOM_CALL), (1, "off", b.CreateString(target))])
    if check != DisabledSafetyCheck.platform():
        raise NotImplementedError(f"serializing DisabledSafetyCheck: {check}")
    return _table(b, 2, [(0, "i8", _CHECK_PLATFORM)])


def _u32_vector(b, xs):
    return b.CreateNumpyVector(np.asarray(xs, np.uint32))


def _strings(b, xs):
    return _vector(b, [b.CreateString(x) for x in xs])


def _write_mesh(b, m):
    sizes = _u32_vector(b, m.axis_sizes)
    names = _strings(b, m.axis_names)
    types = b.CreateNumpyVector(np.asarray([_AXIS_TYPE[t] for t in m.axis_types], np.uint8))
    return _table(b, 4, [(0, "off", sizes), (1, "off", names), (2, "off", types)])


def _write_named_sharding(b, s, mesh_idx):
    mesh, spec, kind = s
    m = _write_mesh(b, mesh)
    parts = _vector(b, [_table(b, 1, [(0, "off", _strings(b, () if p is None else (
        (p,) if isinstance(p, str) else p)))]) for p in spec])
    reduced, unreduced = _strings(b, sorted(spec.reduced)), _strings(b, sorted(spec.unreduced))
    ps = _table(b, 3, [(0, "off", parts), (1, "off", reduced), (2, "off", unreduced)])
    return _table(b, 4, [(0, "off", m), (1, "off", ps), (3, "u32", mesh_idx[mesh])] + (
        [(2, "off", b.CreateString(kind))] if kind is not None else []))


def _write_exported(b, exp, vjp_order):
    fun_name = b.CreateString(exp.fun_name)
    in_tree, out_tree = _write_treedef(b, exp.in_tree), _write_treedef(b, exp.out_tree)
    in_avals = _vector(b, [_write_aval(b, a) for a in exp.in_avals])
    out_avals = _vector(b, [_write_aval(b, a) for a in exp.out_avals])
    named = exp._in_named_shardings + exp._out_named_shardings
    meshes = list(dict.fromkeys(s[0] for s in named if s is not None))
    shardings = list(dict.fromkeys(s for s in named if s is not None))
    mesh_idx = {m: i for i, m in enumerate(meshes)}
    sh_idx = {s: i for i, s in enumerate(shardings)}

    def sharding_vector(named):  # JAX still writes each in full (for older readers)
        return _vector(b, [_table(b, 3, [] if s is None else [
            (2, "off", _write_named_sharding(b, s, mesh_idx))]) for s in named])
    in_sh = sharding_vector(exp._in_named_shardings)
    out_sh = sharding_vector(exp._out_named_shardings)
    unique_meshes = _vector(b, [_write_mesh(b, m) for m in meshes])
    unique_shardings = _vector(b, [_write_named_sharding(b, s, mesh_idx)
                                   for s in shardings])
    if exp.ordered_effects or exp.unordered_effects:
        raise NotImplementedError("xform exports no effects")
    no_effects = _vector(b, [])
    checks = _vector(b, [_write_check(b, c) for c in exp.disabled_safety_checks])
    platforms = _vector(b, [b.CreateString(p) for p in exp.platforms])
    module = b.CreateByteVector(exp.mlir_module_serialized)
    kept = b.CreateNumpyVector(np.asarray(exp.module_kept_var_idx, np.uint16))
    vjp = None
    if vjp_order > 0:
        if not exp.has_vjp():
            raise ValueError("serialization of an Exported that does not have vjps of "
                             "high-enough order")
        vjp = _write_exported(b, exp.vjp(), vjp_order - 1)
    uniques = list(dict.fromkeys(exp.in_avals + exp.out_avals))
    unique_avals = _vector(b, [_write_aval(b, a) for a in uniques])
    index = {a: i for i, a in enumerate(uniques)}
    in_idx = _u32_vector(b, [index[a] for a in exp.in_avals])
    out_idx = _u32_vector(b, [index[a] for a in exp.out_avals])
    in_sh_idx = _u32_vector(b, [0 if s is None else 1 + sh_idx[s]
                                for s in exp._in_named_shardings])
    out_sh_idx = _u32_vector(b, [0 if s is None else 1 + sh_idx[s]
                                 for s in exp._out_named_shardings])
    return _table(b, 26, [
        (0, "u16", HEADER_VERSION), (1, "off", fun_name), (2, "off", in_tree),
        (3, "off", in_avals), (4, "off", out_tree), (5, "off", out_avals),
        (7, "off", in_sh), (8, "off", out_sh), (9, "off", platforms),
        (10, "off", no_effects), (11, "off", no_effects), (12, "off", checks),
        (13, "off", module), (14, "u16", exp.calling_convention_version),
        (15, "off", kept), (16, "bool", exp.uses_global_constants), (17, "off", vjp),
        (18, "u32", exp.nr_devices), (19, "off", unique_avals),
        (20, "off", unique_meshes), (21, "off", unique_shardings), (22, "off", in_idx), (23, "off", out_idx),
        (24, "off", in_sh_idx), (25, "off", out_sh_idx)])


def serialize(exp, vjp_order=0) -> bytearray:
    b = flatbuffers.Builder(65536)
    b.Finish(_write_exported(b, exp, vjp_order))
    return b.Output()


# ---- reading ----

class _Reader:
    """A flatbuffer table: fields by slot number."""

    def __init__(self, buf, pos):
        self.t = Table(buf, pos)

    def _off(self, slot):
        return self.t.Offset(4 + 2 * slot)

    def scalar(self, slot, flags, default=0):
        o = self._off(slot)
        return self.t.Get(flags, o + self.t.Pos) if o else default

    def string(self, slot):
        o = self._off(slot)
        return self.t.String(o + self.t.Pos).decode("utf-8") if o else None

    def table(self, slot):
        o = self._off(slot)
        return _Reader(self.t.Bytes, self.t.Indirect(o + self.t.Pos)) if o else None

    def length(self, slot):
        o = self._off(slot)
        return self.t.VectorLen(o) if o else 0

    def tables(self, slot):
        o = self._off(slot)
        if not o:
            return []
        start = self.t.Vector(o)
        return [_Reader(self.t.Bytes, self.t.Indirect(start + 4 * i))
                for i in range(self.t.VectorLen(o))]

    def strings(self, slot):
        o = self._off(slot)
        if not o:
            return []
        start = self.t.Vector(o)
        return [self.t.String(start + 4 * i).decode("utf-8")
                for i in range(self.t.VectorLen(o))]

    def numbers(self, slot, flags):
        o = self._off(slot)
        return (self.t.GetVectorAsNumpy(flags, o).tolist() if o else [])

    def raw(self, slot):
        o = self._off(slot)
        return self.t.GetVectorAsNumpy(N.Uint8Flags, o).tobytes() if o else b""


def _read_tree(r, leaves):
    kind = r.scalar(0, N.Int8Flags)
    kids = [_read_tree(c, leaves) for c in r.tables(1)]
    if kind == _LEAF:
        return next(leaves)
    if kind == _NONE:
        return None
    if kind == _TUPLE:
        return tuple(kids)
    if kind == _LIST:
        return kids
    if kind == _DICT:
        return dict(zip(r.strings(2), kids))
    if kind == _CUSTOM:
        name = r.string(3)
        if name not in deserialization_registry:
            raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered "
                             f"type `{name}`. Use `export.register_pytree_node_serialization`"
                             " or `export.register_namedtuple_serialization`.")
        node_type, deser, from_children = deserialization_registry[name]
        return from_children(deser(r.raw(4)), kids)
    raise ValueError(f"unknown PyTreeDef kind {kind}")


def _read_treedef(r, n_leaves):
    tree = _read_tree(r, iter(range(n_leaves)))
    return tree_util.tree_structure(tree)


def _read_aval(r, scope):
    kind = r.scalar(2, N.Int8Flags)
    if r.scalar(0, N.Int8Flags) != _SHAPED_ARRAY or kind not in _DTYPE_OF:
        raise ValueError(f"unsupported abstract value (kind {r.scalar(0, N.Int8Flags)}, "
                         f"dtype {kind})")
    shape = _shape_poly.symbolic_shape(",".join(r.strings(1)), scope=scope)
    space = _MEMORY_OF.get(r.scalar(3, N.Int8Flags), MemorySpace.Device)
    return ShapedArray(shape, _DTYPE_OF[kind], memory_space=space)


def _read_check(r):
    kind = r.scalar(0, N.Int8Flags)
    if kind == _CHECK_CUSTOM_CALL:
        return DisabledSafetyCheck.custom_call(r.string(1))
    if kind == _CHECK_PLATFORM:
        return DisabledSafetyCheck.platform()
    raise ValueError(f"Cannot deserialize DisabledSafetyCheck with unknown kind: {kind}")


def _read_mesh(r):
    types = [_AXIS_TYPE_OF[t] for t in r.numbers(2, N.Uint8Flags)]
    return AbstractMesh(r.numbers(0, N.Uint32Flags), r.strings(1), types)


def _read_named_sharding(r, meshes):
    mesh = meshes[r.scalar(3, N.Uint32Flags)] if meshes else _read_mesh(r.table(0))
    ps = r.table(1)
    parts = []
    for a in ps.tables(0):
        axes = tuple(a.strings(0))
        parts.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return mesh, PartitionSpec(*parts, reduced=ps.strings(1), unreduced=ps.strings(2)), \
        r.string(2)


def _read_shardings(r, n):
    """The (in, out) named shardings: by index into the unique table (JAX from 4/2026)
    or each in full."""
    meshes = [_read_mesh(m) for m in r.tables(20)]
    uniques = [_read_named_sharding(s, meshes) for s in r.tables(21)]
    if r.length(24) or r.length(25):
        return [tuple(None if i == 0 else uniques[i - 1] for i in r.numbers(slot, N.Uint32Flags))
                for slot in (24, 25)]
    out = []
    for slot, k in zip((7, 8), n):
        sh = [s.table(2) for s in r.tables(slot)]
        if any(s is None and t.length(1) for s, t in zip(sh, r.tables(slot))):
            raise NotImplementedError("cannot deserialize an HloSharding (an export "
                                      "from JAX before 3/2026)")
        out.append(tuple(None if s is None else _read_named_sharding(s, meshes)
                         for s in sh) or (None,) * k)
    return out


def _read_exported(r):
    scope = _shape_poly.SymbolicScope()
    uniques = [_read_aval(a, scope) for a in r.tables(19)]
    if r.length(22) or not r.length(3):
        in_avals = tuple(uniques[i] for i in r.numbers(22, N.Uint32Flags))
        out_avals = tuple(uniques[i] for i in r.numbers(23, N.Uint32Flags))
    else:  # written before the unique tables (JAX before 4/2026)
        in_avals = tuple(_read_aval(a, scope) for a in r.tables(3))
        out_avals = tuple(_read_aval(a, scope) for a in r.tables(5))
    for slot in (10, 11):
        for e in r.tables(slot):
            raise NotImplementedError(f"cannot deserialize effect type {e.string(0)}: "
                                      "xform calls exported functions without effects")
    vjp = r.table(17)
    in_named, out_named = _read_shardings(r, (len(in_avals), len(out_avals)))
    # a sharding's memory kind types its value (JAX's update_aval_with_sharding)
    in_avals, out_avals = (
        tuple(a if s is None or s[2] is None else
              a.update(memory_space=memory_space_of(s[2])) for a, s in zip(avals, named))
        for avals, named in ((in_avals, in_named), (out_avals, out_named)))
    exp = _export.Exported(
        fun_name=r.string(1),
        in_tree=_read_treedef(r.table(2), len(in_avals)),
        in_avals=in_avals,
        out_tree=_read_treedef(r.table(4), len(out_avals)),
        out_avals=out_avals,
        in_shardings_hlo=(None,) * len(in_avals),
        out_shardings_hlo=(None,) * len(out_avals),
        nr_devices=r.scalar(18, N.Uint32Flags) or r.scalar(6, N.Int16Flags),
        platforms=tuple(r.strings(9)),
        ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=tuple(_read_check(c) for c in r.tables(12)),
        mlir_module_serialized=r.raw(13),
        calling_convention_version=r.scalar(14, N.Uint16Flags),
        module_kept_var_idx=tuple(r.numbers(15, N.Uint16Flags)),
        uses_global_constants=bool(r.scalar(16, N.BoolFlags)),
        _get_vjp=(lambda _: _read_exported(vjp)) if vjp is not None else None,
        _in_named_shardings=in_named, _out_named_shardings=out_named)
    return exp


def deserialize(blob):
    """An ``Exported`` from ``serialize``'s (or JAX's) bytes; ValueError for bytes
    that are not one (nothing is compiled or run here)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize expects bytes, got {type(blob).__name__}")
    buf = bytearray(blob)
    try:
        if len(buf) < 8:
            raise ValueError(f"{len(buf)} bytes is too short")
        root = flatbuffers.encode.Get(N.UOffsetTFlags.packer_type, buf, 0)
        exp = _read_exported(_Reader(buf, root))
        if not exp.fun_name or not exp.mlir_module_serialized:
            raise ValueError("no function name or module")
        _export.check_module_bytes(exp)
    except NotImplementedError:
        raise
    except Exception as e:
        raise ValueError("The bytes are not a serialized jax.export.Exported (truncated, "
                         f"or from another format): {type(e).__name__}: {e}") from None
    return exp
