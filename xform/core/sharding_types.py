"""Explicit sharding mode ("shardings in types"): the placement of a value split over
Explicit mesh axes is part of its aval, as JAX's.

An Array laid out over a mesh with Explicit axes has an aval whose ``_sharding`` is a
NamedSharding over the mesh's AbstractMesh, its spec one entry per dimension naming
only Explicit axes (Auto axes are the compiler's, so not part of the type). Every
primitive's abstract evaluation then types its outputs by the primitive's sharding
rule (``def_sharding_rule``; the rules live in ``xform/lax/sharding_rules.py``), which
raises ``ShardingTypeError`` where JAX's does; lowering turns the types into Shardy
sharding constraints (``mlir.jaxpr_subcomp``). NB: a primitive with no rule leaves its
outputs untyped (None: XLA places them) where JAX raises; values are the same.
"""
import contextlib
import threading

from xform.core.mesh import AxisType, current_mesh
from xform.core.sharding import UNCONSTRAINED, DuplicateSpecError, NamedSharding, PartitionSpec


class ShardingTypeError(Exception):
    """Operands' shardings (in explicit mode) do not fit the operation: e.g. operands of
    an elementwise op split differently, or a matmul whose contracting dimensions are
    split. Fix: ``reshard`` an operand, or give the operation an ``out_sharding``."""


def is_explicit(mesh) -> bool:
    return AxisType.Explicit in mesh.axis_types


def explicit_spec(spec, mesh, ndim):
    """``spec`` as a type holds it: ``ndim`` entries, non-Explicit axes dropped."""
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    out = []
    for p in tuple(spec) + (None,) * (ndim - len(spec)):
        if isinstance(p, str):
            p = p if types[p] is AxisType.Explicit else None
        elif isinstance(p, tuple):
            p = tuple(q for q in p if types[q] is AxisType.Explicit)
            p = None if not p else p[0] if len(p) == 1 else p
        else:  # None or UNCONSTRAINED
            p = None
        out.append(p)
    return PartitionSpec(*out)


def type_sharding(named, ndim):
    """The aval sharding of values laid out as NamedSharding ``named`` (None unless its
    mesh has an Explicit axis). Memoized on ``named`` per rank."""
    memo = named.__dict__.setdefault("_types", {})
    hit = memo.get(ndim, memo)
    if hit is memo:
        mesh = named.mesh
        hit = memo[ndim] = (NamedSharding(mesh.abstract_mesh,
                                          explicit_spec(named.spec, mesh, ndim))
                            if is_explicit(mesh) else None)
    return hit


def abstract_sharding(s, api_name):
    """An ``out_sharding=`` argument of ``api_name`` (a NamedSharding, or a PartitionSpec
    under a mesh in context) as a NamedSharding over the AbstractMesh: what a
    primitive's params hold. Raises JAX's ValueError if it names a non-Explicit axis."""
    if isinstance(s, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"out_sharding={s} is a PartitionSpec, which needs a mesh in "
                             "context (jax.set_mesh(mesh)); or pass a NamedSharding")
        s = NamedSharding(mesh.abstract_mesh, s)
    if not isinstance(s, NamedSharding):
        raise TypeError(f"out_sharding must be a NamedSharding or PartitionSpec, got {s!r}")
    types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
    for p in s.spec:
        for a in p if isinstance(p, tuple) else () if p is None or p is UNCONSTRAINED else (p,):
            if types[a] is not AxisType.Explicit:
                raise ValueError(
                    f"PartitionSpec passed to {api_name} cannot contain axis names that are "
                    f"of type Auto or Manual. Got PartitionSpec: {s.spec} with axis name: "
                    f"{a} of type: {types[a]}.")
    return NamedSharding(s.mesh.abstract_mesh, s.spec)


def typed(aval, named):
    """``aval`` typed with NamedSharding ``named`` (as it is, if ``named`` types nothing)."""
    s = type_sharding(named, len(aval.shape))
    return aval if s is None or s == aval._sharding else aval.update(sharding=s)


def spec_of(aval):
    """The spec of ``aval``'s type: all None for an untyped aval."""
    s = aval._sharding
    return s.spec if s is not None else PartitionSpec(*[None] * len(aval.shape))


class _State(threading.local):
    result_resharded = False
    untyped = False


_state = _State()


@contextlib.contextmanager
def result_resharded():
    """Within the block, a matmul whose split contracting dimensions leave its output's
    sharding ambiguous is untyped rather than an error: the caller (``jnp.dot`` & co.
    given ``out_sharding=``) reshards the final result."""
    prev, _state.result_resharded = _state.result_resharded, True
    try:
        yield
    finally:
        _state.result_resharded = prev


@contextlib.contextmanager
def untyped():
    """Within the block, results are untyped: for xform's own machinery (shard_map's
    block reshapes) whose intermediate values JAX's programs do not have."""
    prev, _state.untyped = _state.untyped, True
    try:
        yield
    finally:
        _state.untyped = prev


_rules = {}


def def_sharding_rule(prim, rule):
    """Register ``rule(*avals, **params)`` giving ``prim``'s output spec(s) over the
    operands' mesh: a PartitionSpec, a NamedSharding (``out_sharding=``), or None
    (untyped); a list of them for multiple results."""
    _rules[prim] = rule
    return rule


def type_outputs(prim, avals, params, out):
    """``out`` (an aval or list) typed by ``prim``'s rule; called by abstract evaluation
    only when some operand is typed (the untyped world pays one attribute read)."""
    rule = _rules.get(prim)
    if rule is None or _state.untyped:
        return out
    mesh = None
    for a in avals:
        s = getattr(a, "_sharding", None)
        if s is not None:
            if mesh is not None and s.mesh != mesh:
                raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one "
                                        f"mesh: {mesh} and another mesh: {s.mesh}")
            mesh = s.mesh
    specs = rule(*avals, **params)
    if not prim.multiple_results:
        return _typed_out(prim, avals, out, specs, mesh)
    return [_typed_out(prim, avals, o, s, mesh) for o, s in zip(out, specs)]


def _typed_out(prim, avals, out, spec, mesh):
    if spec is None:
        return out
    if isinstance(spec, NamedSharding):  # an ``out_sharding=``
        s = type_sharding(spec, len(out.shape))
        return out if s is None else check_type(out, s).update(sharding=s)
    try:
        s = NamedSharding(mesh, spec)
    except DuplicateSpecError as e:
        shown = ", ".join(a.str_short() for a in avals)
        raise ShardingTypeError(
            f"{prim} operation with inputs: {shown} produces an illegally sharded "
            f"result: {out.update(sharding=_Unchecked(spec)).str_short()}") from e
    return out if out._sharding == s else check_type(out, s).update(sharding=s)


class _Unchecked:
    """A spec to print in an error (NamedSharding refuses it)."""
    def __init__(self, spec):
        self.spec = spec


def check_type(aval, s):
    """Raise JAX's error if ``s`` cannot type ``aval`` (rank, divisibility)."""
    if len(s.spec) != len(aval.shape):
        raise ValueError(f"Length of sharding.spec must be equal to aval's ndim. Got "
                         f"sharding.spec {s.spec}, aval.ndim {len(aval.shape)} and "
                         f"sharding {s}")
    sizes = s.mesh.shape
    for dim, (p, n) in enumerate(zip(s.spec, aval.shape)):
        if p is None:
            continue
        p = p if isinstance(p, tuple) else (p,)
        k = 1
        for a in p:
            k *= sizes[a]
        if isinstance(n, int) and n % k:
            raise ValueError(
                f"Sharding spec {p} implies that array axis {dim} is partitioned {k} "
                f"times, but does not evenly divide the dimension size {n}. Got shape: "
                f"{aval.shape} and sharding {s}")
    return aval
