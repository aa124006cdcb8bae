"""The ``pjit`` call primitive: what ``jit`` binds under other transformations.

Its ``jaxpr`` param is a ClosedJaxpr; each interpreter transforms that jaxpr
(JVP, partial evaluation, transposition, batching) and binds a new ``pjit``, so
``grad(jit(f))`` and ``vmap(jit(f))`` stay compiled calls. Those four rules are the
call-primitive rules remat shares (``interpreters/call.py``); derived jaxprs are
memoized per source jaxpr so repeated calls reuse compiled executables.
"""
from xform.core.array import ShardedArray
from xform.core.config import config
from xform.core.trace import Primitive
from xform.interpreters import call, dispatch, mlir, spmd

_IdCache = call.IdCache


_compiled = _IdCache()
_derived = _IdCache()

pjit_p = Primitive("jit")
pjit_p.multiple_results = True


def mesh_compile(jaxpr, name):
    """A program mapping over several devices compiles for all of them; mesh_jit.py
    (beside the pmap rules, a layer up) replaces this with its compile on import."""
    return None


def maps_over_devices(jaxpr):
    """Whether ``jaxpr`` holds pmap/shard_map equations; mesh_jit.py fills it in too."""
    return False


def _pjit_impl(*args, jaxpr, name):
    place = None
    if (any(type(x) is ShardedArray for x in args) or spmd.has_sharding_constraints(jaxpr)) \
            and not maps_over_devices(jaxpr):  # one SPMD program over their mesh
        place = spmd.placement(jaxpr, args)
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


def _pjit_abstract_eval(*avals, jaxpr, name):
    return jaxpr.out_avals


pjit_p.def_impl(_pjit_impl, lazy_kind="jit")
pjit_p.def_abstract_eval(_pjit_abstract_eval)


def _pjit_derived_params(params, kind):
    name = params["name"]
    return dict(params, name=f"{kind}({name})" if kind in ("jvp", "transpose") else name)


def _pjit_lowering(ctx, *args, jaxpr, name):
    return mlir.call_lowering(ctx, args, jaxpr, name)


call.def_call_rules(pjit_p, derived_params=_pjit_derived_params, cache=_derived)
mlir.register_lowering(pjit_p, _pjit_lowering)

