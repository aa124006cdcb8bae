"""Sharding rules of explicit sharding mode (``core/sharding_types.py``), one per
primitive, as JAX 0.10.2's ``*_sharding_rule``s with their errors.

A rule takes the operand avals (typed or not: an untyped operand reads as unsplit)
and the params, and returns the output's PartitionSpec over the operands' mesh (or a
NamedSharding given as ``out_sharding=``). Primitives without a rule leave their
outputs untyped (see the NB in ``core/sharding_types.py``).
"""
import math

from xform.core import sharding_types
from xform.core.sharding import PartitionSpec as P
from xform.core.sharding_types import ShardingTypeError, def_sharding_rule, spec_of
from xform.lax import cumulative, elementwise, reductions, rounding, shapes, sorting
from xform.lax.dot import dot_general_p
from xform.lax.dynamic_slicing import dynamic_slice_p, dynamic_update_slice_p
from xform.lax.complex import complex_p, conj_p
from xform.lax._prim import elementwise as _families


def _unary(x, **_):
    return spec_of(x)


def broadcasting(name, *avals):
    """Elementwise operands' specs merged per dimension: equal entries, or None and one
    entry (also over a size-1 dimension); anything else is JAX's error."""
    avals = [a for a in avals if a.shape]
    if not avals:
        return P()
    specs = [tuple(spec_of(a)) for a in avals]
    out = []
    for ss, ds in zip(zip(*specs), zip(*[a.shape for a in avals])):
        if all(s == ss[0] for s in ss[1:]):
            out.append(ss[0])
            continue
        real = [s for s, d in zip(ss, ds) if not (d == 1 and s is None)]
        if real and all(s == real[0] for s in real[1:]):
            out.append(real[0])
            continue
        r = None
        for s in ss:
            if r is None:
                r = s
            elif s is not None and s != r:
                raise ShardingTypeError(f"{name} got incompatible shardings for "
                                        f"broadcasting: {', '.join(map(str, specs))}.")
        out.append(r)
    return P(*out)


def _nary(name):
    return lambda *avals, **_: broadcasting(name, *avals)


def _select_n(which, *cases):
    typed = [c._sharding for c in cases if c._sharding is not None]
    if not typed:  # only ``which`` is typed
        return spec_of(which) if which.shape else None
    first = typed[0]
    if any(s != first for s in typed[1:]):
        raise ShardingTypeError("select cases must have the same shardings, got [{}]."
                                .format(", ".join(str(c.sharding) for c in cases)))
    if which.shape and which._sharding is not None and \
            tuple(which._sharding.spec) != tuple(first.spec):
        raise ShardingTypeError(
            "select `which` must be scalar or have the same sharding as cases, got "
            f"`which` sharding {which.sharding} but case sharding {cases[0].sharding}.")
    return first.spec


def _clamp(lo, x, hi):
    return broadcasting("clamp", x, *[a for a in (lo, hi) if a.shape])


def _check_match(lhs, rhs, msg):
    for a, b in zip(lhs, rhs):
        if a is not None and b is not None and a != b:
            raise ShardingTypeError(msg)


def _dot_general(lhs, rhs, *, dimension_numbers, out_sharding=None, **_):
    if out_sharding is not None:
        return out_sharding
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = spec_of(lhs), spec_of(rhs)
    lc_spec, rc_spec = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    lb_spec, rb_spec = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    _check_match(lb_spec, rb_spec,
                 "dot_general requires lhs batch dimensions and rhs batch dimensions to "
                 f"have the consistent sharding, got {lb_spec} and {rb_spec}.")
    _check_match(lc_spec, rc_spec,
                 "dot_general requires contracting dimensions to have consistent "
                 f"sharding, got {lc_spec} and {rc_spec}.")
    for a, b in zip(lc_spec, rc_spec):
        if a is not None and b is not None:
            if sharding_types._state.result_resharded:
                return None
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output "
                "should be sharded. Please specify the output sharding via the "
                f"`out_sharding` parameter. Got lhs_contracting_spec={lc_spec} and "
                f"rhs_contracting_spec={rc_spec}")
    lhs_free = tuple(s for i, s in enumerate(ls) if i not in set(lc) | set(lb))
    rhs_free = tuple(s for i, s in enumerate(rs) if i not in set(rc) | set(rb))
    return P(*(lb_spec + lhs_free + rhs_free))


def _cumulative(x, *, axis, reverse):
    if spec_of(x)[axis] is not None:
        raise ShardingTypeError("Input should be unsharded over the axis being reduced. "
                                f"Got input type={x} and axis={axis}")
    return spec_of(x)


def _reduce(x, *, axes, **_):
    return P(*[s for i, s in enumerate(spec_of(x)) if i not in set(axes)])


def _transpose(x, *, permutation):
    s = spec_of(x)
    return P(*[s[i] for i in permutation])


def _broadcast_in_dim(x, *, shape, broadcast_dimensions, sharding=None):
    if sharding is not None:
        return sharding
    s = iter(spec_of(x))
    dims = set(broadcast_dimensions)
    return P(*[next(s) if i in dims else None for i in range(len(shape))])


def _squeeze(x, *, dimensions):
    return P(*[s for i, s in enumerate(spec_of(x)) if i not in set(dimensions)])


def _reshape(x, *, new_sizes, sharding=None):
    if sharding is not None:
        return sharding
    spec = spec_of(x)
    if all(s is None for s in spec):
        return P(*[None] * len(new_sizes))
    old = [d for d in x.shape if d != 1]
    if old == [d for d in new_sizes if d != 1]:   # only size-1 dimensions come or go
        kept = iter(s for d, s in zip(x.shape, spec) if d != 1)
        return P(*[None if d == 1 else next(kept) for d in new_sizes])
    out = _split_or_merge(x, spec, tuple(new_sizes))
    if out is None:
        raise ShardingTypeError(
            "This reshape is not supported. Please specify the sharding of the output via "
            "the `out_sharding` argument of jax.lax.reshape. Got operand type: "
            f"{x}, new sizes: {tuple(new_sizes)}")
    return out


def _split_or_merge(x, spec, new_sizes):
    """The simple reshapes JAX types: one dimension split in several (its mesh axes
    handed out to them in order, each dividing), or several merged into one (their
    axes joined; a split dimension after an unsplit one is refused); None otherwise."""
    old, mesh = tuple(x.shape), x.sharding.mesh.shape
    for i in range(len(old) + 1):  # the common prefix and suffix around one change
        for j in range(len(old), i - 1, -1):
            tail = old[j:]
            if new_sizes[:i] != old[:i] or new_sizes[len(new_sizes) - len(tail):] != tail:
                continue
            mid_new, mid_old = new_sizes[i:len(new_sizes) - len(tail)], old[i:j]
            if not mid_new or math.prod(mid_new) != math.prod(mid_old):
                continue
            if len(mid_old) == 1 and len(mid_new) > 1:
                axes = _flat(spec[i:j])
            elif len(mid_new) == 1 and len(mid_old) > 1:
                axes = _flat(spec[i:j])
                while axes and axes[-1] is None:
                    axes.pop()
                if None in axes:
                    return None
            else:
                continue
            parts = _hand_out(mesh, axes, mid_new)
            return None if parts is None else P(*spec[:i], *parts, *spec[j:])
    return None


def _flat(spec):
    out = []
    for s in spec:
        out.extend(s if isinstance(s, tuple) else (s,))
    return out


def _hand_out(mesh, axes, sizes):
    """Mesh ``axes`` (in order) given to dimensions of ``sizes``: each takes axes while
    it has more than one element per device; None if one does not divide."""
    axes, out = iter([a for a in axes if a is not None]), []
    for o in sizes:
        mine = []
        while o > 1:
            a = next(axes, None)
            if a is None:
                break
            o, r = divmod(o, mesh[a])
            if r:
                return None
            mine.append(a)
        out.append(None if not mine else mine[0] if len(mine) == 1 else tuple(mine))
    return None if next(axes, None) is not None else out


def _varying(x, out_shape, name):
    """An operand's spec for a result whose dimensions may shrink or grow (slices,
    pads, splits): a split dimension must stay divisible by its mesh axes."""
    spec, mesh = spec_of(x), x.sharding.mesh.shape
    for d, o, s in zip(x.shape, out_shape, spec):
        k = math.prod(mesh[a] for a in (s if isinstance(s, tuple) else (s,))) if s else 1
        if d != o and s is not None and o % k:
            raise ShardingTypeError(
                f"{name} on sharded dims where out dim ({o}) is not divisible by mesh axes "
                f"({k}) with spec ({s}) is not implemented. Got input type={x.str_short()} "
                f"and output shape={tuple(out_shape)}")
    return spec


def _slice(x, *, start_indices, limit_indices, strides):
    return _varying(x, [len(range(a, b, s or 1)) for a, b, s in zip(
        start_indices, limit_indices, strides or [None] * len(start_indices))], "slicing")


def _pad(x, padding_value, *, padding_config):
    return _varying(x, [lo + hi + d + max(d - 1, 0) * inner for d, (lo, hi, inner)
                        in zip(x.shape, padding_config)], "padding")


def _split(x, *, sizes, axis):
    return [_varying(x, x.shape[:axis] + (n,) + x.shape[axis + 1:], "split")
            for n in sizes]


def _dynamic_slice(x, *starts, slice_sizes):
    return _varying(x, slice_sizes, "dynamic_slice")


def _dynamic_update_slice(x, update, *starts):
    if x._sharding != update._sharding:
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {_with_axis_types(x)} and update sharding "
            f"{_with_axis_types(update)}.")
    return spec_of(x)


def _with_axis_types(x):
    """``float32[8@x,4]({Explicit: ('x', 'y')})``: JAX's type with its mesh's axis types."""
    mesh, by_type = x.sharding.mesh, {}
    for n, t in zip(mesh.axis_names, mesh.axis_types):
        by_type.setdefault(t, []).append(n)
    return f"{x.str_short(False)}({ {t: tuple(n) for t, n in by_type.items()} })"


def _concatenate(*xs, dimension):
    typed = [x._sharding for x in xs if x._sharding is not None]
    if any(s != typed[0] for s in typed[1:]):
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                + ", ".join(str(x.sharding) for x in xs))
    return typed[0].spec


def _sort(*avals, dimension, **_):
    typed = [a._sharding for a in avals if a._sharding is not None]
    for s in typed:
        if s.spec[dimension] is not None:
            raise ShardingTypeError(
                "Arguments to sort must be unsharded over the sorting dimension. Got arg "
                f"sharding={s} and sorting dimension={dimension}")
        if s != typed[0]:
            raise ShardingTypeError("Arguments to sort must have equal shardings, got: "
                                    + " ".join(map(str, typed)))
    return [typed[0].spec] * len(avals)


for _p, _kind in _families.items():
    def_sharding_rule(_p, _unary if _kind == "unary" else _nary(_p.name))
for _p in (elementwise.integer_pow_p, elementwise.convert_element_type_p,
           elementwise.stop_gradient_p, rounding.round_p, conj_p,
           reductions.reduce_precision_p, shapes.rev_p):
    def_sharding_rule(_p, _unary)
for _p in (cumulative.cumsum_p, cumulative.cumprod_p, cumulative.cummax_p,
           cumulative.cummin_p):
    def_sharding_rule(_p, _cumulative)
for _p in (elementwise.add_any_p, complex_p):
    def_sharding_rule(_p, _nary(_p.name))
def_sharding_rule(elementwise.select_n_p, _select_n)
def_sharding_rule(rounding.clamp_p, _clamp)
def_sharding_rule(dot_general_p, _dot_general)
for _p in (reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
           reductions.reduce_min_p, reductions.reduce_and_p, reductions.reduce_or_p,
           reductions.reduce_xor_p, reductions.argmax_p, reductions.argmin_p):
    def_sharding_rule(_p, _reduce)
def_sharding_rule(shapes.transpose_p, _transpose)
def_sharding_rule(shapes.broadcast_in_dim_p, _broadcast_in_dim)
def_sharding_rule(shapes.squeeze_p, _squeeze)
def_sharding_rule(shapes.reshape_p, _reshape)
def_sharding_rule(shapes.slice_p, _slice)
def_sharding_rule(shapes.pad_p, _pad)
def_sharding_rule(shapes.split_p, _split)
def_sharding_rule(shapes.concatenate_p, _concatenate)
def_sharding_rule(dynamic_slice_p, _dynamic_slice)
def_sharding_rule(dynamic_update_slice_p, _dynamic_update_slice)
def_sharding_rule(sorting.sort_p, _sort)
