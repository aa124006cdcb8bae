"""Checkify's array-level pieces: building error values, ``check_p`` and its rules, the
automatic checks (nan, division by zero, out-of-bounds indexing) and the rules of the
control-flow and custom-derivative primitives. The interpreter itself is
``xform.interpreters.checkify``; these rules need lax/numpy, so they live above it."""
import functools

import numpy as np

import xform.numpy as jnp
from xform import lax
from xform.core import tree_util
from xform.core.trace import Primitive, get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters import checkify as ck
from xform.interpreters import partial_eval as pe
from xform.interpreters import pxla
from xform.interpreters.custom import LazyJaxpr, custom_jvp_call_p, custom_vjp_call_p
from xform.core.jaxpr import eval_jaxpr
from xform.lax.control_flow.conditionals import cond_p
from xform.lax.control_flow.loops import while_p
from xform.lax.control_flow.scan import scan_p
from xform.transforms.checkpoint import remat_p

rules = ck.checkify_rules


# ---- building error values ----

def assert_func(error, pred, exc):
    """``error`` plus a new check site failing where ``pred``."""
    code = ck.next_code()
    payload, static = exc._flatten()
    return update_error(error, pred, code, {code: (type(exc), static)}, payload,
                        ck.effect_of(exc, payload))


def update_error(error, pred, code, metadata, payload, effect):
    # within one kind the first failure wins: keep the old code/payload where it failed
    old = error._pred.get(effect, False)
    out_pred = jnp.logical_or(old, pred)
    out_code = jnp.where(old, error._code.get(effect, np.int32(-1)),
                         jnp.asarray(code, np.int32))
    cur = error._payload.get(effect)
    out_payload = (list(payload) if cur is None else
                   [jnp.where(old, c, p) for c, p in zip(cur, payload)])
    return error._update(effect, out_pred, out_code, metadata, out_payload)


def add_placeholder_effects(error, effects):
    """``error`` with a never-failing slot for each kind in ``effects`` it lacks, so a
    loop carry or the branches of a cond share one error structure."""
    pred, code, payload = dict(error._pred), dict(error._code), dict(error._payload)
    for effect in effects - set(pred):
        pred[effect], code[effect] = np.bool_(False), np.int32(-1)
        payload[effect] = [np.ones(shape, dtype) for shape, dtype in effect[1]]
    return ck.Error(pred, code, error._metadata, payload)


def _out_effects(tree):
    return tree.unflatten([None] * tree.num_leaves).effects()


def _reduce_any_error(error):
    # a batched check reports the last failing element (JAX: argsort(errs)[-1])
    out = ck.init_error
    for effect, errs in error._pred.items():
        if not np.shape(errs):   # a placeholder no mapped check reached
            out = out._update(effect, errs, error._code[effect], {}, error._payload[effect])
            continue
        idx = errs.shape[0] - 1 - jnp.argmax(errs[::-1])
        out = out._update(effect, errs[idx], error._code[effect][idx], {},
                          [p[idx] for p in error._payload[effect]])
    return out._replace(error._metadata)


# ---- check_p: a check not yet functionalized ----

FUNCTIONALIZATION_ERROR = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
    "probably means you tried to stage (jit/scan/pmap/...) a `check` without "
    "functionalizing it through `checkify.checkify`.")

check_p = Primitive("check")
check_p.multiple_results = True
pe.effectful_primitives.add(check_p)   # no outputs, never dead code


def check_error_value(error, *, debug=False):
    """Bind ``check_p`` on ``error`` (reducing a batched error to one element)."""
    if any(np.shape(p) for p in error._pred.values()):
        error = _reduce_any_error(error)
    leaves, tree = tree_util.tree_flatten(error)
    check_p.bind(*leaves, err_tree=tree, debug=debug)


ck.bind_check = check_error_value


@check_p.def_impl
def _check_impl(*args, err_tree, debug):
    if not debug:
        ck.raise_if_failed(err_tree.unflatten(list(args)))
    return []


@check_p.def_abstract_eval
def _check_abstract_eval(*avals, err_tree, debug):
    return []


def _check_lowering(ctx, *args, err_tree, debug):
    if debug:   # a debug_check outside checkify is dropped
        return []
    raise ValueError(FUNCTIONALIZATION_ERROR)


def _check_batch(vals, dims, *, err_tree, debug):
    size = batching.axis_size_of(vals, dims)
    vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
    check_error_value(err_tree.unflatten(vals), debug=debug)
    return [], []


def _check_jvp(primals, tangents, *, err_tree, debug):
    check_p.bind(*primals, err_tree=err_tree, debug=debug)   # primals only
    return [], []


def _check_discharge(error, enabled, *args, err_tree, debug):
    new = err_tree.unflatten(list(args))
    for effect in new._pred:
        if effect[0] in enabled:
            error = update_error(error, new._pred[effect], new._code[effect], {},
                                 new._payload[effect], effect)
    return error._replace({**new._metadata, **error._metadata}), []


mlir.register_lowering(check_p, _check_lowering)
batching.primitive_batchers[check_p] = _check_batch
ad.primitive_jvps[check_p] = _check_jvp
rules[check_p] = _check_discharge


# ---- automatic checks ----

def check_nans(prim, error, enabled, out):
    if ck.NaNError not in enabled:
        return error
    outs = out if prim.multiple_results else [out]
    flags = [jnp.any(jnp.isnan(o)) for o in outs]
    any_nan = functools.reduce(jnp.logical_or, flags) if flags else np.bool_(False)
    return assert_func(error, any_nan, ck.NaNError(prim.name))


def _nan_rule(prim, error, enabled, *vals, **params):
    out = prim.bind(*vals, **params)
    return check_nans(prim, error, enabled, out), out


# JAX's list of the primitives that can generate a NaN (by name; xform lacks a few)
_NAN_PRIMITIVES = """acos acosh add asin asinh atan2 atan atanh bessel_i0e bessel_i1e cbrt
conv_general_dilated cos cosh cumlogsumexp cummax cummin cumprod cumsum digamma dot_general
erf_inv erf erfc exp expm1 fft igamma_grad_a igamma igammac integer_pow lgamma
custom_linear_solve log1p log logistic mul pad pow psum reduce reduce_prod reduce_sum
reduce_window reduce_window_sum regularized_incomplete_beta rem rng_uniform rsqrt sin sinh
sqrt sub tan tanh""".split()
for _prim in Primitive.registry:
    if _prim.name in _NAN_PRIMITIVES:
        rules[_prim] = functools.partial(_nan_rule, _prim)


def _div_rule(error, enabled, x, y):
    if ck.DivisionByZeroError in enabled:
        error = assert_func(error, jnp.any(jnp.equal(y, 0)), ck.DivisionByZeroError())
    return _nan_rule(lax.div_p, error, enabled, x, y)


rules[lax.div_p] = _div_rule


def oob_payload(oob_mask, indices, dims_map, operand_shape):
    """``[index, axis, axis size]`` of the first out-of-bounds index."""
    flat_idx = jnp.argmin(jnp.logical_not(oob_mask))
    multi_idx = jnp.unravel_index(flat_idx, indices.shape)
    oob_axis = jnp.array(dims_map, np.int32)[multi_idx[-1]]
    oob_axis_size = jnp.array(operand_shape, np.int32)[oob_axis]
    oob_index = jnp.ravel(indices)[flat_idx]
    return jnp.array([oob_index, oob_axis, oob_axis_size], dtype=np.int32)


def _assert_in_bounds(error, oob_mask, indices, dims_map, operand, prim_name):
    payload = oob_payload(oob_mask, indices, dims_map, operand.shape)
    return assert_func(error, jnp.any(oob_mask),
                       ck.OOBError(prim_name, operand.shape, payload))


def _dynamic_slice_rule(error, enabled, operand, *starts, slice_sizes):
    out = lax.dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    if ck.OOBError not in enabled or not starts:
        return error, out
    starts = jnp.array(starts)
    dims = np.array(operand.shape, starts.dtype)
    oob = (starts < 0) | (starts + np.array(slice_sizes, starts.dtype) > dims)
    return _assert_in_bounds(error, oob, starts, range(operand.ndim), operand,
                             "dynamic_slice"), out


def _dynamic_update_slice_rule(error, enabled, operand, update, *starts):
    out = lax.dynamic_update_slice_p.bind(operand, update, *starts)
    if ck.OOBError not in enabled or not starts:
        return error, out
    starts = jnp.array(starts)
    oob = (starts < 0) | (starts + np.array(update.shape) > np.array(operand.shape))
    return _assert_in_bounds(error, oob, starts, range(operand.ndim), operand,
                             "dynamic_update_slice"), out


def _gather_rule(error, enabled, operand, indices, **params):
    out = lax.gather_p.bind(operand, indices, **params)
    dn, sizes = params["dimension_numbers"], params["slice_sizes"]
    if ck.OOBError not in enabled or not dn.start_index_map or not indices.size:
        return error, out
    index_map = np.asarray(dn.start_index_map, int)
    upper = np.asarray(operand.shape)[index_map] - np.asarray(sizes)[index_map]
    upper = upper.reshape((1,) * (indices.ndim - 1) + upper.shape).astype(indices.dtype)
    oob = (indices < 0) | (indices > upper)
    return _assert_in_bounds(error, oob, indices, dn.start_index_map, operand, "gather"), out


def _scatter_rule(prim, error, enabled, operand, indices, updates, **params):
    out = prim.bind(operand, indices, updates, **params)
    dn = params["dimension_numbers"]
    if ck.OOBError not in enabled or not indices.size:
        return error, out
    sizes, window = [], iter(dn.update_window_dims)
    for i in range(operand.ndim):
        sizes.append(1 if i in dn.inserted_window_dims or i in dn.operand_batching_dims
                     else updates.shape[next(window)])
    upper = np.array([operand.shape[i] - sizes[i] for i in dn.scatter_dims_to_operand_dims],
                     np.int64)
    upper = np.minimum(upper, np.iinfo(indices.dtype).max).astype(indices.dtype)
    upper = upper.reshape((1,) * (indices.ndim - 1) + upper.shape)
    oob = (indices < 0) | (indices > upper)
    error = _assert_in_bounds(error, oob, indices, dn.scatter_dims_to_operand_dims, operand,
                              prim.name)
    return check_nans(prim, error, enabled, out), out


rules[lax.dynamic_slice_p] = _dynamic_slice_rule
rules[lax.dynamic_update_slice_p] = _dynamic_update_slice_rule
rules[lax.gather_p] = _gather_rule
for _prim in Primitive.registry:
    if _prim.name in ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"):
        rules[_prim] = functools.partial(_scatter_rule, _prim)


# ---- higher-order primitives ----

def _merged(error, enabled, make):
    """``make(error) -> (jaxpr, out_err_tree)`` traced twice: once to learn which error
    kinds the body adds, once with those kinds already in the carried error."""
    _, tree = make(error)
    error = add_placeholder_effects(error, _out_effects(tree))
    return error, make(error)


def _cond_rule(error, enabled, index, *ops, branches):
    effects = set().union(*(ck.checked_jaxpr(b, enabled, error)[2] for b in branches))
    error = add_placeholder_effects(error, effects)
    leaves, _ = tree_util.tree_flatten(error)
    checked = [ck.checked_jaxpr(b, enabled, error) for b in branches]
    outs = cond_p.bind(index, *leaves, *ops, branches=tuple(j for j, _, _ in checked))
    metadata = {}
    for _, tree, _ in checked:
        metadata.update(tree.unflatten([None] * tree.num_leaves)._metadata)
    out_tree = checked[0][1]
    n = out_tree.num_leaves
    return out_tree.unflatten(outs[:n])._replace(metadata), outs[n:]


def _avals(xs):
    return [get_aval(x) for x in xs]


def _scan_rule(error, enabled, *args, reverse, length, jaxpr, num_consts, num_carry, linear,
               unroll):
    consts, rest = args[:num_consts], args[num_consts:]

    def make(err):
        leaves, tree = tree_util.tree_flatten(err)
        ne = len(leaves)

        def body(*xs):   # consts, error, carry, xs
            e = tree.unflatten(list(xs[num_consts:num_consts + ne]))
            return ck.run_checked(jaxpr, enabled, e,
                                  list(xs[:num_consts]) + list(xs[num_consts + ne:]))

        return ck.stage_checked(body, _avals(consts) + _avals(leaves)
                                + list(jaxpr.in_avals[num_consts:]))

    error, (body, out_tree) = _merged(error, enabled, make)
    leaves, _ = tree_util.tree_flatten(error)
    ne = len(leaves)
    outs = scan_p.bind(*consts, *leaves, *rest, jaxpr=body, length=length,
                       linear=(False,) * (len(args) + ne), num_carry=num_carry + ne,
                       num_consts=num_consts, reverse=reverse, unroll=unroll)
    return out_tree.unflatten(outs[:ne]), outs[ne:]


def _while_rule(error, enabled, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # NB: JAX rejects checkify-of-vmap-of-while; xform's while batching leaves a scalar
    # predicate (any element still running), so that case just works here.
    nc, nb = cond_nconsts, body_nconsts
    c_consts, b_consts, carry = args[:nc], args[nc:nc + nb], args[nc + nb:]
    error, _ = ck.run_checked(cond_jaxpr, enabled, error, list(c_consts) + list(carry))

    def make(err):
        leaves, tree = tree_util.tree_flatten(err)
        ne = len(leaves)

        def body(*xs):   # cond consts, body consts, error, carry
            e = tree.unflatten(list(xs[nc + nb:nc + nb + ne]))
            vals = list(xs[nc + nb + ne:])
            e, out = ck.run_checked(body_jaxpr, enabled, e, list(xs[nc:nc + nb]) + vals)
            e, _ = ck.run_checked(cond_jaxpr, enabled, e, list(xs[:nc]) + out)
            return e, out   # the checks of the next cond evaluation ride in the body

        return ck.stage_checked(body, _avals(c_consts) + _avals(b_consts)
                                + _avals(leaves) + _avals(carry))

    error, (body, out_tree) = _merged(error, enabled, make)
    leaves, _ = tree_util.tree_flatten(error)
    ne = len(leaves)
    tree = tree_util.tree_structure(error)

    def cond(*xs):   # its checks ran in the body already: drop its error
        e = tree.unflatten(list(xs[nc:nc + ne]))
        return ck.run_checked(cond_jaxpr, enabled, e, list(xs[:nc]) + list(xs[nc + ne:]))[1]

    cond = pe.trace_to_jaxpr(cond, _avals(c_consts) + _avals(leaves) + _avals(carry))
    outs = while_p.bind(*c_consts, *c_consts, *b_consts, *leaves, *carry, cond_jaxpr=cond,
                        body_jaxpr=body, cond_nconsts=nc, body_nconsts=nc + nb)
    return out_tree.unflatten(outs[:ne]), outs[ne:]


rules[cond_p] = _cond_rule
rules[scan_p] = _scan_rule
rules[while_p] = _while_rule
rules[remat_p] = lambda error, enabled, *vals, **params: ck.bind_call_with_error(
    remat_p, error, enabled, vals, params)


def _custom_jvp_rule(error, enabled, *vals, call_jaxpr, jvp_jaxpr_fun, num_consts,
                     symbolic_zeros):
    # Checks apply to the function, not to its JVP rule (as JAX): the rule forwards the
    # error unchanged, so the error enters with every kind the function may add.
    error = add_placeholder_effects(error, ck.checked_jaxpr(call_jaxpr, enabled, error)[2])
    leaves, _ = tree_util.tree_flatten(error)
    ne = len(leaves)
    checked, out_tree, _ = ck.checked_jaxpr(call_jaxpr, enabled, error)

    def jvp(zeros):   # the error leaves lead the operands: no tangents in or out
        rule, out_zeros = jvp_jaxpr_fun(zeros)

        def fun(*xs):   # error, primals and tangents -> error, primals and tangents
            outs = eval_jaxpr(rule.jaxpr, rule.consts, *xs[ne:])
            m = len(out_zeros)
            return list(xs[:ne]) + outs[:m] + outs[m:]

        jaxpr = pe.trace_to_jaxpr(fun, _avals(leaves) + list(rule.in_avals))
        return jaxpr, (True,) * ne + tuple(out_zeros)

    outs = custom_jvp_call_p.bind(*leaves, *vals, call_jaxpr=checked,
                                  jvp_jaxpr_fun=LazyJaxpr(jvp, jvp_jaxpr_fun.name),
                                  num_consts=num_consts + ne, symbolic_zeros=symbolic_zeros)
    return out_tree.unflatten(outs[:ne]), outs[ne:]


def _custom_vjp_rule(error, enabled, *vals, call_jaxpr, fwd_jaxpr_fun, bwd, num_consts,
                     symbolic_zeros):
    error = add_placeholder_effects(error, ck.checked_jaxpr(call_jaxpr, enabled, error)[2])
    leaves, _ = tree_util.tree_flatten(error)
    ne = len(leaves)
    checked, out_tree, _ = ck.checked_jaxpr(call_jaxpr, enabled, error)

    def fwd(zeros):
        rule, num_res = fwd_jaxpr_fun(zeros)

        def fun(*xs):   # error, primals -> residuals, error, outputs
            outs = eval_jaxpr(rule.jaxpr, rule.consts, *xs[ne:])
            return outs[:num_res] + list(xs[:ne]) + outs[num_res:]

        return pe.trace_to_jaxpr(fun, _avals(leaves) + list(rule.in_avals)), num_res

    def bwd_(res, cts):   # the error outputs have no cotangent to pass on
        return bwd(res, cts[ne:])

    outs = custom_vjp_call_p.bind(*leaves, *vals, call_jaxpr=checked,
                                  fwd_jaxpr_fun=LazyJaxpr(fwd, fwd_jaxpr_fun.name),
                                  bwd=bwd_, num_consts=num_consts + ne,
                                  symbolic_zeros=symbolic_zeros)
    return out_tree.unflatten(outs[:ne]), outs[ne:]


rules[custom_jvp_call_p] = _custom_jvp_rule
rules[custom_vjp_call_p] = _custom_vjp_rule


def _pmap_rule(error, enabled, *vals, jaxpr, axes, in_axes, out_axes, **params):
    # The error enters replicated; each device's error leaves come out stacked over the
    # mesh, flattened to one leading dim: a batched error, "at mapped index i" (as JAX).
    leaves, tree = tree_util.tree_flatten(error)
    ne, rep = len(leaves), (None,) * len(axes)
    body, out_tree = ck.stage_checked(
        lambda *xs: ck.run_checked(jaxpr, enabled, tree.unflatten(list(xs[:ne])), xs[ne:]),
        _avals(leaves) + list(jaxpr.in_avals),
        lambda f, avals: pxla.trace_body(f, avals, axes, params.get("check_vma", False)))
    body, args, in_axes = pxla.closure_convert(body, axes, (*leaves, *vals),
                                               (rep,) * ne + tuple(in_axes))
    n = out_tree.num_leaves
    outs = pxla.xla_pmap_p.bind(*args, jaxpr=body, axes=axes, in_axes=in_axes,
                                out_axes=(tuple(range(len(axes))),) * n + tuple(out_axes),
                                **params)
    lead = int(np.prod([size for _, size in axes]))
    errs = [jnp.reshape(x, (lead,) + x.shape[len(axes):]) for x in outs[:n]]
    return out_tree.unflatten(errs), outs[n:]


rules[pxla.xla_pmap_p] = _pmap_rule
