"""``sparsify``: run a function written for dense arrays on BCOO (or BCSR) arguments.

JAX's interpreter design: trace ``f`` to a jaxpr with each BCOO standing in as a dense
aval of its shape, then evaluate that jaxpr with an environment holding dense arrays or
BCOOs. An equation with only dense inputs binds its primitive as is (under whatever trace
is current, so jit/grad/vmap around sparsify still work); one with a BCOO input goes to
the primitive's sparse rule (a table per format), which computes with the buffers.
Control flow (while/cond/scan) re-traces its sub-jaxprs over the flattened sparse
buffers, as JAX's interpreter does. The road not taken,
a SparseTrace with ``process_primitive``, needs the same rule table plus tracer plumbing
through every higher-order primitive; the jaxpr interpreter gets calls (jit) by
recursing into the inner jaxpr. The BCOO operator methods (``@``, ``*``, ``+``, ``sum``,
``astype``, ...) are sparsify of the jnp function, as in JAX.
"""
import functools

from xform import lax
from xform import numpy as jnp
from xform.core.avals import ShapedArray
from xform.core.jaxpr import ClosedJaxpr, Literal
from xform.core.tree_util import tree_flatten, tree_unflatten
from xform.core.trace import get_aval
from xform.experimental.sparse._bcoo import BCOO, bcoo_fromdense, bcoo_todense
from xform.experimental.sparse._bcsr import (BCSR, bcsr_broadcast_in_dim, bcsr_concatenate,
                                             bcsr_dot_general)
from xform.experimental.sparse._dot import bcoo_conv_general_dilated, bcoo_dot_general
from xform.experimental.sparse._ops import (bcoo_eliminate_zeros, bcoo_multiply_dense,
                                            bcoo_multiply_sparse, bcoo_reduce_sum,
                                            bcoo_sort_indices, bcoo_sum_duplicates,
                                            bcoo_transpose)
from xform.experimental.sparse._api import TODENSE_NAME
from xform.experimental.sparse._ops2 import (bcoo_broadcast_in_dim,
                                             bcoo_concatenate, bcoo_reshape)
from xform.experimental.sparse._slicing import (bcoo_dynamic_slice, bcoo_gather, bcoo_rev,
                                                bcoo_slice, bcoo_squeeze, bcoo_update_layout)
from xform.experimental.sparse._util import dense_aval
from xform.interpreters import partial_eval as pe
from xform.interpreters.custom import custom_jvp_call_p
from xform.interpreters.pjit import pjit_p
from xform.lax.control_flow.conditionals import _merge_consts

sparse_rules_bcoo = {}
sparse_rules_bcsr = {}
SPARSE = (BCOO, BCSR)

_zero_preserving_linear_unary = [lax.conj_p, lax.imag_p, lax.neg_p, lax.real_p]
_zero_preserving_unary = [
    lax.abs_p, lax.asin_p, lax.asinh_p, lax.atan_p, lax.atanh_p, lax.bessel_i1e_p,
    lax.expm1_p, lax.log1p_p, lax.sign_p, lax.sin_p, lax.sinh_p, lax.sqrt_p, lax.square_p,
    lax.tan_p, lax.tanh_p, lax.convert_element_type_p]
_densifying = [lax.acos_p, lax.acosh_p, lax.bessel_i0e_p, lax.cos_p, lax.cosh_p, lax.eq_p,
               lax.exp_p, lax.ge_p, lax.gt_p, lax.le_p, lax.lt_p, lax.log_p, lax.ne_p,
               lax.xor_p]


def _raise_unimplemented_primitive(prim):
    if prim in _densifying:
        raise NotImplementedError(
            f"sparse rule for {prim} is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments "
            "to dense matrices.")
    raise NotImplementedError(f"sparse rule for {prim} is not implemented.")


def _eval_sparse(jaxpr, consts, args):
    env = {}
    read = lambda a: a.val if type(a) is Literal else env[a]
    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        invals = [read(a) for a in eqn.invars]
        if any(isinstance(v, SPARSE) for v in invals):
            rules = (sparse_rules_bcsr if any(isinstance(v, BCSR) for v in invals)
                     else sparse_rules_bcoo)
            rule = rules.get(eqn.primitive)
            if rule is None:
                _raise_unimplemented_primitive(eqn.primitive)
            outs = rule(*invals, **eqn.params)
        else:
            outs = eqn.primitive.bind(*invals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(a) for a in jaxpr.outvars]


def _aval(x):
    return dense_aval(x.shape, x.dtype) if isinstance(x, SPARSE) else get_aval(x)


def sparsify(f, use_tracer=False):
    """Make ``f``, written for dense arrays, accept :class:`BCOO` arguments.

    Args:
      f: a function of arrays (pytrees allowed); BCOO arguments are used sparsely.
      use_tracer: JAX's tracer variant; xform has only the interpreter, so this must be
        False.

    Returns:
      The sparsified function: outputs are BCOO where the computation stayed sparse.

    Raises:
      NotImplementedError: for a primitive with no sparse rule (JAX's message), e.g.
        ``cos`` of a BCOO, which would be dense.

    >>> import xform.numpy as jnp
    >>> from xform.experimental import sparse
    >>> M = sparse.BCOO.fromdense(jnp.arange(12).reshape(3, 4))
    >>> sparse.sparsify(lambda M, v: 2 * M.T @ v)(M, jnp.array([3, 4, 2])).tolist()
    [64, 82, 100, 118]
    """
    if use_tracer:
        raise NotImplementedError("sparsify(use_tracer=True): xform implements sparsify "
                                  "with the jaxpr interpreter only")

    @functools.wraps(f)
    def wrapped(*args, **params):
        leaves, in_tree = tree_flatten(args, is_leaf=lambda x: isinstance(x, SPARSE))
        # a fresh object per sparse argument: its own indices ref (see _ref)
        leaves = [type(x)(x._bufs, **x._info) if isinstance(x, SPARSE) else jnp.asarray(x)
                  for x in leaves]
        closed, consts, out_tree = pe.trace_to_subjaxpr(
            lambda *a: f(*a, **params), in_tree, [_aval(x) for x in leaves])
        outs = _eval_sparse(closed.jaxpr, closed.consts, [*consts, *leaves])
        return tree_unflatten(out_tree, outs)
    return wrapped


# ---- rules ----

def _ensure_unique(x):
    return x if x.unique_indices else x.sum_duplicates(nse=x.nse, remove_zeros=False)


def _ref(x):
    """The identity of ``x``'s indices for the same-indices fast paths of add/mul: shared
    by the values `_like` derives from one another, new for every other sparse value, so
    each sparsify argument has its own even when one BCOO is passed twice (JAX: one
    spvalue per argument; ``X - X`` concatenates)."""
    return x.__dict__.setdefault("_indices_ref", object())


def _like(x, data):
    """A sparse array with ``x``'s indices (the same arrays and ref) and new data."""
    out = type(x)((data, *x._bufs[1:]), **x._info)
    out._indices_ref = _ref(x)
    return out


def _unary_rule(prim, linear):
    def rule(x, **params):
        if not linear:   # f(a) + f(b) != f(a + b): merge duplicates first
            x = _ensure_unique(x)
        return _like(x, prim.bind(x.data, **params))
    return rule


for _p in _zero_preserving_unary:
    sparse_rules_bcoo[_p] = sparse_rules_bcsr[_p] = _unary_rule(_p, linear=False)
for _p in _zero_preserving_linear_unary:
    sparse_rules_bcoo[_p] = sparse_rules_bcsr[_p] = _unary_rule(_p, linear=True)


def _integer_pow_rule(x, *, y):
    if y <= 0:
        raise NotImplementedError(
            f"sparse rule for {lax.integer_pow_p} with non-positive exponent {y} is not "
            "implemented because it would result in dense output. If this is your intent, "
            "use sparse.todense() to convert your argument to a dense array.")
    return _unary_rule(lax.integer_pow_p, False)(x, y=y)


sparse_rules_bcoo[lax.integer_pow_p] = sparse_rules_bcsr[lax.integer_pow_p] = _integer_pow_rule


_DENSIFYING_ADD = (
    "Addition between a sparse array X and a dense array Y is not implemented when the "
    "output shape is larger than Y.shape. This is to prevent silent densification of a "
    "large sparse array. If this is your intent, you can explicitly cast the sparse array "
    "to a dense matrix.")


def _add_rule(x, y):
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        if x.shape != y.shape:
            raise NotImplementedError("Addition between sparse matrices of different shapes.")
        if _ref(x) is _ref(y):
            return _like(x, lax.add(x.data, y.data))
        if x.indices.ndim != y.indices.ndim or x.data.ndim != y.data.ndim:
            raise NotImplementedError("Addition between sparse matrices with different "
                                      "batch/dense dimensions.")
        axis = x.indices.ndim - 2
        return BCOO((lax.concatenate([x.data, y.data], axis),
                     lax.concatenate([x.indices, y.indices], axis)), shape=x.shape)
    if isinstance(y, BCOO):
        x, y = y, x
    out_shape = jnp.broadcast_shapes(x.shape, y.shape)
    if y.shape != out_shape:
        raise NotImplementedError(_DENSIFYING_ADD)
    return bcoo_todense(x) + y


def _sub_rule(x, y):
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        return _add_rule(x, _like(y, lax.neg(y.data)))
    raise NotImplementedError("Subtraction between sparse and dense array.")


def _mul_rule(x, y, **params):
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        if _ref(x) is _ref(y) and x.unique_indices:
            return _like(x, lax.mul(x.data, y.data))
        return bcoo_multiply_sparse(x, y)
    if isinstance(y, BCOO):
        x, y = y, x
    return _like(x, bcoo_multiply_dense(x, y))


def _div_rule(x, y):
    if isinstance(y, BCOO):
        raise NotImplementedError(
            "Division by a sparse array is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments "
            "to a dense array.")
    return _like(x, bcoo_multiply_dense(x, 1. / jnp.asarray(y)))


def _reduce_sum_rule(x, *, axes, **_):
    mat = bcoo_reduce_sum(x, axes=axes)
    return mat.data.sum() if mat.shape == () else mat


def _transpose_rule(x, *, permutation, **_):
    return bcoo_transpose(x, permutation=permutation)


def _dot_params(params):
    return dict(dimension_numbers=params["dimension_numbers"],
                preferred_element_type=params.get("preferred_element_type"))


def _dot_general_rule(lhs, rhs, **params):
    return bcoo_dot_general(lhs, rhs, **_dot_params(params))


def _broadcast_in_dim_rule(x, *dyn, shape, broadcast_dimensions, **_):
    return bcoo_broadcast_in_dim(x, shape=shape, broadcast_dimensions=broadcast_dimensions)


def _reshape_rule(x, *dyn, new_sizes, dimensions=None, **_):
    return bcoo_reshape(x, new_sizes=new_sizes, dimensions=dimensions)


def _concatenate_rule(*xs, dimension, **_):
    if not all(isinstance(x, BCOO) for x in xs):
        raise NotImplementedError("sparse concatenate of sparse and dense arrays; convert "
                                  "with sparse.todense() or BCOO.fromdense()")
    return bcoo_concatenate(xs, dimension=dimension)


def _gather_rule(operand, indices, **params):
    if isinstance(indices, SPARSE):
        raise NotImplementedError("sparse rule for gather with sparse indices")
    return bcoo_gather(operand, indices, **params)


def _call_rule(param):
    """Calls (jit, custom_jvp functions) are inlined: their jaxpr is evaluated sparsely;
    the identity call ``sparse.todense`` stages for a traced argument densifies."""
    def rule(*args, **params):
        if params.get("name") == TODENSE_NAME:
            return [x.todense() if isinstance(x, SPARSE) else x for x in args]
        closed = params[param]
        if not isinstance(closed, ClosedJaxpr):
            raise NotImplementedError(f"sparse rule for a call with {param}={type(closed)}")
        return _eval_sparse(closed.jaxpr, closed.consts, list(args))
    return rule


sparse_rules_bcoo.update({
    lax.add_p: _add_rule, lax.sub_p: _sub_rule, lax.mul_p: _mul_rule, lax.div_p: _div_rule,
    lax.reduce_sum_p: _reduce_sum_rule, lax.transpose_p: _transpose_rule,
    lax.dot_general_p: _dot_general_rule, lax.broadcast_in_dim_p: _broadcast_in_dim_rule,
    lax.concatenate_p: _concatenate_rule, lax.reshape_p: _reshape_rule, pjit_p: _call_rule("jaxpr"),
    custom_jvp_call_p: _call_rule("call_jaxpr"),
    lax.slice_p: lambda x, **k: bcoo_slice(x, **k),
    lax.dynamic_slice_p: lambda x, *i, slice_sizes: bcoo_dynamic_slice(x, i, slice_sizes),
    lax.squeeze_p: lambda x, *, dimensions: bcoo_squeeze(x, dimensions=dimensions),
    lax.rev_p: lambda x, *, dimensions: bcoo_rev(x, dimensions),
    lax.gather_p: _gather_rule,
    lax.conv_general_dilated_p: lambda l, r, **k: bcoo_conv_general_dilated(l, r, **k),
})
# ---- control flow: each sub-jaxpr is re-traced over the flattened sparse buffers ----

def _sparsify_jaxpr(closed, args):
    """``closed`` evaluated sparsely on ``args`` (arrays, sparse arrays, or ShapedArray
    placeholders), traced to a jaxpr over their flattened buffers. Returns the jaxpr,
    the values it closed over (its leading inputs), the flat buffers and the output
    tree. NB: unlike JAX, sharing of indices between values is not tracked across it."""
    flat, in_tree = tree_flatten(tuple(args))
    avals = [a if isinstance(a, ShapedArray) else get_aval(a) for a in flat]
    sp, consts, out_tree = pe.trace_to_subjaxpr(
        lambda *a: _eval_sparse(closed.jaxpr, closed.consts, list(a)), in_tree, avals)
    return sp, consts, flat, out_tree


def _sig(avals):
    return [(a.shape, a.dtype) for a in avals]


def _check_carry(name, init, out_avals):
    """Sparse carries must keep their buffers' shapes (nse, layout): the loop's type."""
    want = [get_aval(x) for x in tree_flatten(list(init))[0]]
    if _sig(out_avals) != _sig(want):
        raise TypeError(f"sparsify of {name}: the body must return its carry with the same "
                        "structure, nse and layout as the initial carry; got buffers "
                        f"{[a.str_short() for a in out_avals]} for a carry of "
                        f"{[a.str_short() for a in want]}.")


def _while_rule(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, init = (args[:cond_nconsts], args[cond_nconsts:cond_nconsts + body_nconsts],
                    args[cond_nconsts + body_nconsts:])
    cond, cconsts, cflat, _ = _sparsify_jaxpr(cond_jaxpr, (*cc, *init))
    body, bconsts, bflat, out_tree = _sparsify_jaxpr(body_jaxpr, (*bc, *init))
    n_init = len(tree_flatten(list(init))[0])
    _check_carry("while_loop", init, body.out_avals)
    cflat, bflat = cflat[:len(cflat) - n_init], bflat[:len(bflat) - n_init]
    outs = lax.while_p.bind(*cconsts, *cflat, *bconsts, *bflat, *tree_flatten(list(init))[0],
                            cond_jaxpr=cond, body_jaxpr=body,
                            cond_nconsts=len(cconsts) + len(cflat),
                            body_nconsts=len(bconsts) + len(bflat))
    return tree_unflatten(out_tree, outs)


def _cond_rule(index, *ops, branches):
    if isinstance(index, SPARSE):
        raise NotImplementedError("sparse rule for cond with a sparse predicate")
    traced = [_sparsify_jaxpr(b, ops) for b in branches]
    if any(_sig(t[0].out_avals) != _sig(traced[0][0].out_avals) for t in traced):
        raise TypeError("sparsify of cond: the branches must return sparse outputs of the "
                        "same structure, nse and layout; got buffers "
                        f"{[[a.str_short() for a in t[0].out_avals] for t in traced]}.")
    jaxprs, consts = _merge_consts([(t[0], t[1]) for t in traced])
    outs = lax.cond_p.bind(index, *consts, *traced[0][2], branches=tuple(jaxprs))
    return tree_unflatten(traced[0][3], outs)


def _scan_rule(*args, jaxpr, num_consts, num_carry, length, linear, **params):
    consts, init, xs = args[:num_consts], args[num_consts:num_consts + num_carry], \
        args[num_consts + num_carry:]
    if any(isinstance(x, SPARSE) for x in xs):   # JAX: none of `xs` at all
        raise NotImplementedError("sparse rule for scan with sparse x values.")
    x_avals = jaxpr.in_avals[num_consts + num_carry:]
    body, bconsts, flat, out_tree = _sparsify_jaxpr(jaxpr, (*consts, *init, *x_avals))
    n_consts, n_carry = len(tree_flatten(list(consts))[0]), len(tree_flatten(list(init))[0])
    _check_carry("scan", init, body.out_avals[:n_carry])
    operands = [*bconsts, *flat[:n_consts + n_carry], *xs]
    outs = lax.scan_p.bind(*operands, jaxpr=body, length=length,
                           linear=(False,) * len(operands),
                           num_carry=n_carry, num_consts=len(bconsts) + n_consts, **params)
    return tree_unflatten(out_tree, outs)


sparse_rules_bcoo.update({lax.while_p: _while_rule, lax.cond_p: _cond_rule,
                          lax.scan_p: _scan_rule})

# JAX's BCSR table; its jit rule is added as xform's todense is a jit call (JAX: todense_p).
sparse_rules_bcsr.update({
    lax.dot_general_p: lambda *a, **k: bcsr_dot_general(*a, **_dot_params(k)),
    lax.broadcast_in_dim_p: lambda x, *_, shape, broadcast_dimensions, **__:
        bcsr_broadcast_in_dim(x, shape=shape, broadcast_dimensions=broadcast_dimensions),
    lax.concatenate_p: lambda *xs, dimension, **_: bcsr_concatenate(xs, dimension=dimension),
    pjit_p: _call_rule("jaxpr"), custom_jvp_call_p: _call_rule("call_jaxpr"),
})


# ---- BCOO methods derived from sparsify (here, as in JAX, to avoid an import cycle) ----

def _swap(f):
    return lambda a, b: f(b, a)


def _transpose_method(self, axes=None):
    """The array with axes permuted (reversed if ``axes`` is None)."""
    perm = tuple(range(self.ndim))[::-1] if axes is None else axes
    return bcoo_transpose(self, permutation=perm)


def _sum_duplicates_method(self, nse=None, remove_zeros=True):
    """Duplicates summed and indices sorted; explicit zeros dropped if ``remove_zeros``
    (not differentiable then). ``nse`` fixes the output size (needed under jit)."""
    if remove_zeros:
        return bcoo_eliminate_zeros(self, nse=nse)
    return bcoo_sum_duplicates(self, nse=nse)


def _add_method(swap):
    """``+`` is sparsify of jnp.add, where xform's jnp has already broadcast a smaller
    dense operand to the output shape; JAX's add rule sees it rank-promoted only and
    refuses the densifying sum, so the method checks the operand's shape first."""
    add = sparsify(_swap(jnp.add) if swap else jnp.add)

    def method(self, other):
        if not isinstance(other, SPARSE):
            shape = jnp.shape(other)
            out = jnp.broadcast_shapes(self.shape, shape)
            if (1,) * (len(out) - len(shape)) + tuple(shape) != out:
                raise NotImplementedError(_DENSIFYING_ADD)
        return add(self, other)
    return method


def _getitem(self, idx):
    """NumPy indexing (ints, slices, None, integer arrays) of the sparse array: sparsify
    of dense indexing, so the result is sparse."""
    out = sparsify(lambda x: x[idx])(self)
    if not isinstance(out, SPARSE) and out.size == 0:   # JAX's corner case: empty result
        out = bcoo_fromdense(out)
    return out


_bcoo_methods = {
    "transpose": _transpose_method,
    "sum_duplicates": _sum_duplicates_method,
    "sort_indices": bcoo_sort_indices,
    "update_layout": bcoo_update_layout,
    "astype": lambda self, *a, **k: sparsify(lambda x: x.astype(*a, **k))(self),
    "reshape": lambda self, *a, **k: sparsify(lambda x: x.reshape(*a, **k))(self),
    "sum": lambda self, *a, **k: sparsify(lambda x: x.sum(*a, **k))(self),
    "__abs__": sparsify(jnp.abs),
    "__neg__": sparsify(jnp.negative),
    "__pos__": sparsify(jnp.positive),
    "__matmul__": sparsify(jnp.matmul),
    "__rmatmul__": sparsify(_swap(jnp.matmul)),
    "__mul__": sparsify(jnp.multiply),
    "__rmul__": sparsify(_swap(jnp.multiply)),
    "__truediv__": sparsify(jnp.divide),
    "__rtruediv__": sparsify(_swap(jnp.divide)),
    "__rpow__": sparsify(_swap(jnp.power)),
    "__add__": _add_method(False),
    "__radd__": _add_method(True),
    "__sub__": sparsify(jnp.subtract),
    "__rsub__": sparsify(_swap(jnp.subtract)),
    "__pow__": lambda x, y: sparsify(lambda x: jnp.power(x, y))(x),
    "__getitem__": _getitem,
    "__iter__": lambda self: (self[i] for i in range(self.shape[0])),
    # comparisons are dense (cmp(0, y) need not be False): sparsify raises JAX's error
    "__gt__": sparsify(jnp.greater),
    "__ge__": sparsify(jnp.greater_equal),
    "__lt__": sparsify(jnp.less),
    "__le__": sparsify(jnp.less_equal),
    "__eq__": sparsify(jnp.equal),
    "__ne__": sparsify(jnp.not_equal),
}
for _name, _impl in _bcoo_methods.items():
    setattr(BCOO, _name, _impl)
for _name in ("__matmul__", "__rmatmul__", "__getitem__"):   # JAX's BCSR operators
    setattr(BCSR, _name, _bcoo_methods[_name])
