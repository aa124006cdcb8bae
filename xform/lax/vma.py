"""Varying manual axes inside ``shard_map(check_vma=True)``: the typing rules that
``Primitive.bind``/``abstract_eval`` apply there, ``pvary`` (transpose psum),
``psum_invariant`` (transpose pvary), ``all_gather_invariant`` and ``pcast``."""
from xform.core import trace as _trace
from xform.core import tree_util
from xform.core.avals import ShapedArray
from xform.core.jaxpr import ClosedJaxpr, Jaxpr
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters import callback as _callback
from xform.interpreters import pxla as _pxla
from xform.lax import collectives as _coll
from xform.lax import collectives_permute as _perm
from xform.lax import dynamic_slicing as _slicing
from xform.lax import shapes as _shapes
from xform.lax._prim import standard_primitive

hlo = mlir.hlo


def _vma(x):
    try:
        return getattr(get_aval(x), "vma", frozenset())
    except TypeError:  # not an array (an opaque operand): no manual axes
        return frozenset()


def _has_jaxpr(params):
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, (ClosedJaxpr, Jaxpr)):
                return True
    return False


class _Rules:
    """Implicit ``pvary`` before a bind and the vma of its results."""

    def __init__(self, order):
        self.order = tuple(order)  # the mesh's axis names, to order pvary's axes

    def ordered(self, names):
        return (tuple(n for n in self.order if n in names)
                + tuple(n for n in names if n not in self.order))

    def match(self, prim, args, params):
        if prim in _COLLECTIVES:  # a collective over axes the operand is invariant on
            need = frozenset(params["axis_name"])
            return [pvary_p.bind(x, axes=self.ordered(need - v))
                    if need - (v := _vma(x)) else x for x in args]
        if prim in _OWN_RULES or len(args) < 2 or _has_jaxpr(params):
            return args
        vmas = [_vma(x) for x in args]
        union = frozenset().union(*vmas)
        if all(v == union for v in vmas):
            return args
        return [x if v == union else pvary_p.bind(x, axes=self.ordered(union - v))
                for x, v in zip(args, vmas)]

    def like(self, val, x):
        """``val`` (e.g. ``full_like(x, ...)``) varying over the axes ``x`` varies over."""
        missing = _vma(x) - _vma(val)
        return pvary_p.bind(val, axes=self.ordered(missing)) if missing else val

    def type_outputs(self, prim, avals, params, out):
        rule = _OWN_RULES.get(prim) or _COLLECTIVES.get(prim)
        if rule is not None:
            vma = rule(avals, params)
        elif _has_jaxpr(params):  # a call/loop: its jaxpr typed the results already
            return out
        else:
            vma = frozenset().union(*[getattr(a, "vma", frozenset()) for a in avals])

        def typed(a):
            return a.update(vma=vma) if type(a) is ShapedArray and a.vma != vma else a
        return [typed(a) for a in out] if prim.multiple_results else typed(out)


_trace.vma_mode.vma_rules = _Rules


def active():
    return _trace._context.vma is not None


# ---- pvary: invariant -> varying (identity; transpose psum) ----

pvary_p = standard_primitive("pvary", lambda x, *, axes: x)
pvary_p.def_impl(lambda x, *, axes: x)  # (only reached by evaluating a body's jaxpr)
mlir.register_lowering(pvary_p, lambda ctx, x, *, axes: x)
ad.deflinear(pvary_p, lambda ct, x, *, axes: [
    psum_invariant_p.bind(ct, axis_name=axes, axis_index_groups=None)])
batching.primitive_batchers[pvary_p] = lambda vals, dims, *, axes: (
    pvary_p.bind(vals[0], axes=axes), dims[0])


def _state(leaf, axes, name):
    """'varying' or 'invarying': the one state of ``leaf`` over ``axes`` (JAX's check)."""
    vma = _vma(leaf)
    state = {"varying" if a in vma else "invarying" for a in axes}
    if len(state) > 1:
        raise ValueError(f"{name} can only accept axis_name which corresponds to one of "
                         f"varying, unreduced, reduced or invarying state of the input. Got "
                         f"input type: {get_aval(leaf).str_short()}, axes: {axes} and "
                         f"input state: {state}")
    return state.pop()


def pcast(x, axis_name, *, to):
    """Change the varying-manual-axes type of ``x`` (a pytree) inside ``shard_map``:
    ``to='varying'`` marks an invariant value as varying over ``axis_name`` (a no-op
    on values whose transpose is a ``psum``). Outside ``check_vma`` it is a no-op.

    >>> import xform, xform.numpy as jnp
    >>> from xform.sharding import PartitionSpec as P
    >>> mesh = xform.make_mesh((2,), ('i',), axis_types=(xform.sharding.AxisType.Auto,))
    >>> f = xform.shard_map(lambda w: xform.lax.pcast(w, 'i', to='varying'), mesh=mesh,
    ...                     in_specs=P(), out_specs=P('i'))
    >>> f(jnp.ones(2))
    Array([1., 1., 1., 1.], dtype=float32)
    """
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name} must be a tuple or a str. Got {axis_name}")
    axes = _coll._names(axis_name)
    if not axis_name:
        return x
    if to not in ("varying", "reduced", "unreduced"):
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: "
                         "{'unreduced', 'reduced', 'varying'}")
    _coll._bound_size(axes)
    if not active():
        return x

    def one(leaf):
        from_ = _state(leaf, axes, "jax.lax.pcast")
        if (from_, to) != ("invarying", "varying"):
            raise ValueError(f"Unsupported pcast from={from_}, to={to!r}")
        return pvary_p.bind(leaf, axes=_trace._context.vma.ordered(axes))
    return tree_util.tree_map(one, x)


# ---- psum_invariant: psum of a varying value (transpose pvary) ----

psum_invariant_p = standard_primitive("psum_invariant", lambda x, **_: x)
mlir.register_lowering(psum_invariant_p, _coll._all_reduce_lowering(hlo.add))
ad.deflinear(psum_invariant_p, lambda ct, x, *, axis_name, axis_index_groups: [
    pvary_p.bind(ct, axes=axis_name)])
batching.primitive_batchers[psum_invariant_p] = lambda vals, dims, **p: (
    psum_invariant_p.bind(vals[0], **p), dims[0])
batching.collective_batchers[psum_invariant_p] = (  # values as psum's
    lambda *a, **p: batching.collective_batchers[_coll.psum_p](*a, **p))


def psum_varying(x, axis_name, axis_index_groups):
    """``lax.psum`` inside ``check_vma``: ``psum_invariant`` per leaf (an invariant one
    is made varying first, so its sum multiplies it by the axis size, as in JAX)."""
    names = _coll._names(axis_name)
    _coll._bound_size(names, _coll._groups(axis_index_groups))
    if axis_index_groups is not None:
        raise NotImplementedError("psum with axis_index_groups inside shard_map with "
                                  "check_vma=True; pass check_vma=False to shard_map")

    def one(leaf):
        _state(leaf, names, "jax.lax.psum")
        return psum_invariant_p.bind(leaf, axis_name=names, axis_index_groups=None)
    return tree_util.tree_map(one, x)


# ---- all_gather_invariant: all_gather(..., to='invarying') (transpose: own slice) ----

def _all_gather_invariant_transpose(ct, x, *, axis_name, axis_index_groups, axis_size,
                                    axis, tiled):
    size = get_aval(ct).shape[axis] // axis_size
    idx = _coll.axis_index_p.bind(axis_name=axis_name)
    out = _slicing.dynamic_slice_in_dim(ct, idx * size, size, axis=axis)
    return [out if tiled else _shapes.squeeze(out, (axis,))]


all_gather_invariant_p = standard_primitive(  # (all_gather's params, groups None)
    "all_gather_invariant", _coll._all_gather_abstract_eval)
mlir.register_lowering(all_gather_invariant_p, _coll._all_gather_lowering)
ad.deflinear(all_gather_invariant_p, _all_gather_invariant_transpose)
batching.collective_batchers[all_gather_invariant_p] = (  # values as all_gather's
    lambda *a, **p: batching.collective_batchers[_coll.all_gather_p](*a, **p))
batching.primitive_batchers[all_gather_invariant_p] = lambda vals, dims, *, axis, **p: (
    all_gather_invariant_p.bind(batching.moveaxis(vals[0], dims[0], 0), axis=axis + 1,
                                **p), 0)


def all_gather_prim(to, axis_index_groups):
    """``all_gather``'s primitive for ``to`` other than ``'varying'``."""
    if to not in ("varying", "reduced", "invarying"):
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         "values are: {'varying', 'reduced', 'invarying'}")
    if to == "reduced" or axis_index_groups is not None:
        raise NotImplementedError(f"all_gather with to={to!r}"
                                  + (" and axis_index_groups" if axis_index_groups else ""))
    return all_gather_invariant_p


# ---- the rule tables ----

def _minus_axes(avals, params):
    return avals[0].vma - frozenset(params["axis_name"])


_OWN_RULES = {
    pvary_p: lambda avals, p: avals[0].vma | frozenset(p["axes"]),
    _coll.axis_index_p: lambda avals, p: frozenset(p["axis_name"]),
    _callback.pure_callback_p: lambda avals, p: frozenset(),  # its result_shape_dtypes
    _pxla.xla_pmap_p: lambda avals, p: frozenset().union(*(a.vma for a in avals)),  # nested
}
_COLLECTIVES = {  # pvary'd first over the axes they name (a psum then multiplies)
    psum_invariant_p: _minus_axes,
    _coll.psum_p: _minus_axes,
    all_gather_invariant_p: _minus_axes,
    _coll.pmax_p: _minus_axes,
    _coll.pmin_p: _minus_axes,
    _coll.all_gather_p: lambda avals, p: avals[0].vma,
    _coll.reduce_scatter_p: lambda avals, p: avals[0].vma,
    _perm.all_to_all_p: lambda avals, p: avals[0].vma,
    _perm.ppermute_p: lambda avals, p: avals[0].vma,
}


def def_collective(prim, rule):
    """Type ``prim``, a collective over ``params['axis_name']``, as those above: its
    operands are made varying over those axes first, its results' vma is ``rule(avals,
    params)``."""
    _COLLECTIVES[prim] = rule


def def_rule(prim, rule):
    """The vma of ``prim``'s results is ``rule(avals, params)`` (no implicit pvary)."""
    _OWN_RULES[prim] = rule
