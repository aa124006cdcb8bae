"""The ``pjit`` call primitive: what ``jit`` binds under other transformations.

Its ``jaxpr`` param is a ClosedJaxpr; each interpreter transforms that jaxpr
(JVP, partial evaluation, transposition, batching) and binds a new ``pjit``, so
``grad(jit(f))`` and ``vmap(jit(f))`` stay compiled calls. Those four rules are the
call-primitive rules remat shares (``interpreters/call.py``); derived jaxprs are
memoized per source jaxpr so repeated calls reuse compiled executables.

A jit given ``in_shardings``/``out_shardings`` binds them as params of those names
(per flat input/output: a NamedSharding or None; each param present only when it names
one, as JAX prints them), and derived calls carry them over as JAX's rules do: a
tangent or cotangent is laid out as its primal, residuals are unspecified, batching
inserts the batch dimension unsplit (or split over vmap's ``spmd_axis_name``).
"""
from xform.core.array import ShardedArray
from xform.core.config import config
from xform.core.trace import Primitive
from xform.core.sharding import PartitionSpec
from xform.interpreters import batching, call, dispatch, mlir, spmd
from xform.interpreters import partial_eval as pe

_IdCache = call.IdCache


_compiled = _IdCache()
_derived = _IdCache()

pjit_p = Primitive("jit")
pjit_p.multiple_results = True


def mesh_compile(jaxpr, name):
    """A program mapping over several devices compiles for all of them; mesh_jit.py
    (beside the pmap rules, a layer up) replaces this with its compile on import."""
    return None


def partitioned_placement(jaxpr, named, make_place):
    """``make_place()``, or None where a program holding pmap/shard_map equations keeps
    the replicated path; mesh_jit.py fills it in too (as jit's calls decide)."""
    return make_place()


def _pjit_impl(*args, jaxpr, name, in_shardings=None, out_shardings=None):
    place = None
    if (in_shardings or out_shardings or any(type(x) is ShardedArray for x in args)
            or spmd.has_sharding_constraints(jaxpr)):  # one SPMD program over their mesh
        named = bool(in_shardings or out_shardings) or any(
            spmd.named_sharding_of(x) is not None for x in args)
        place = partitioned_placement(jaxpr, named, lambda: spmd.placement(
            jaxpr, args, in_shardings, out_shardings, name=name))
    if place is not None:
        compiled = _compiled.get(jaxpr, place.key, lambda: spmd.PartitionedJaxpr(
            jaxpr, place, f"jit({name})"))
        return compiled(args)
    compiled = _compiled.get(jaxpr, None,
                             lambda: mesh_compile(jaxpr, f"jit({name})")
                             or dispatch.CompiledJaxpr(jaxpr, name=f"jit({name})"))
    return compiled(args)


def _clear_compiled(name, value):
    if name in ("jax_debug_nans", "jax_debug_infs"):  # executables bake the flag in
        _compiled.data.clear()


config._add_listener(_clear_compiled)


def _pjit_abstract_eval(*avals, jaxpr, **_):
    return jaxpr.out_avals


pjit_p.def_impl(_pjit_impl, lazy_kind="jit")
pjit_p.def_abstract_eval(_pjit_abstract_eval)


def sharding_params(params, ins, outs):
    """``params`` with ``in_shardings``/``out_shardings`` set to ``ins``/``outs``, each
    left out when it names no sharding (so unsharded calls carry nothing)."""
    params = {k: v for k, v in params.items() if k not in ("in_shardings", "out_shardings")}
    if ins is not None and any(s is not None for s in ins):
        params["in_shardings"] = tuple(ins)
    if outs is not None and any(s is not None for s in outs):
        params["out_shardings"] = tuple(outs)
    return params


def _pjit_derived_params(params, kind, how):
    name = params["name"]
    new = dict(params, name=f"{kind}({name})" if kind in ("jvp", "transpose") else name)
    ins, outs = params.get("in_shardings"), params.get("out_shardings")
    if ins is None and outs is None:
        return new
    d = how()
    source = {"in": ins, "out": outs}

    def carried(entries, dims):
        picked = [None if e is None or source[e[0]] is None else source[e[0]][e[1]]
                  for e in entries]
        if dims is None:
            return picked
        spmd_name = batching._axis_env.rule_spmd_name
        return [_batched_sharding(s, dim, spmd_name) for s, dim in zip(picked, dims)]
    return sharding_params(new, carried(d.ins, d.in_dims), carried(d.outs, d.out_dims))


def _batched_sharding(s, dim, spmd_name=None):
    """NamedSharding ``s`` of a value given a batch dimension at ``dim``: unsplit there
    (a replicated ``s`` is kept), or split over ``spmd_name`` (vmap's ``spmd_axis_name``);
    trailing unsplit dimensions dropped, as JAX names them."""
    if s is None or dim is None or (spmd_name is None and s.is_fully_replicated):
        return s
    spec = list(s.spec)
    while spec and spec[-1] is None:
        spec.pop()
    spec += [None] * (dim - len(spec))
    spec.insert(dim, spmd_name)
    while spec and spec[-1] is None:
        spec.pop()
    return s.with_spec(PartitionSpec(*spec))


def _pjit_lowering(ctx, *args, jaxpr, name, in_shardings=None, out_shardings=None):
    if ctx.module_ctx.mesh is None or not (in_shardings or out_shardings):
        return mlir.call_lowering(ctx, args, jaxpr, name)
    spec = lambda ss, n: [None if s is None else s.spec for s in ss or [None] * n]  # noqa: E731
    return mlir.call_lowering(ctx, args, jaxpr, name,
                              spec(in_shardings, len(args)),
                              spec(out_shardings, len(jaxpr.out_avals)))


call.def_call_rules(pjit_p, derived_params=_pjit_derived_params, cache=_derived)
mlir.register_lowering(pjit_p, _pjit_lowering)
pe.wrapping_call_p = pjit_p

