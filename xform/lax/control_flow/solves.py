"""``custom_linear_solve`` and ``custom_root``: solvers differentiated implicitly.

``custom_linear_solve(matvec, b, solve)`` binds ``linear_solve``, a primitive linear in
``b`` whose params hold the traced ``matvec``, ``vecmat`` (matvec's transpose),
``solve`` and ``transpose_solve`` (each taking its closed-over values as leading
operands). Its JVP differentiates ``A(θ) x = b``: ``x' = solve(b' - A'(θ) x)``, another
``linear_solve``; its transpose is the ``linear_solve`` of the transposed system
(``transpose_solve`` with ``vecmat``). So the solver's own iterations are never
differentiated, as in JAX. ``custom_root`` is a ``custom_jvp`` applying the implicit
function theorem to ``f(θ, x*(θ)) = 0``: ``x*' = -(∂ₓf)⁻¹ ∂_θf θ'``, where the
inverse is the user's ``tangent_solve`` of ``f`` linearized at the root.
"""
from xform.core import tree_util
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import get_aval
from xform.core.traceback_util import api_boundary
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import standard_primitive
from xform.lax.control_flow.common import trace_jaxpr
from xform.core import dtypes
from xform.lax.elementwise import neg
from xform.transforms.ad import linearize
from xform.transforms.ad_extras import linear_transpose
from xform.transforms.custom_derivatives import custom_jvp


def _check_tree(func_name, expected_name, actual_tree, expected_tree, has_aux=False):
    if has_aux:
        children = tree_util.treedef_children(actual_tree)
        if len(children) != 2:
            raise TypeError(f"{func_name}() produced a pytree with structure {actual_tree},"
                            " but a pair of (output, auxiliary_data) was expected "
                            "because has_aux was True.")
        actual_tree = children[0]
    if actual_tree != expected_tree:
        raise TypeError(f"{func_name}() output pytree structure must match "
                        f"{expected_name}, got {actual_tree} and {expected_tree}.")


def _check_shapes(func_name, expected_name, actual, expected):
    got = [tuple(a.shape) for a in actual]
    want = [tuple(a.shape) for a in expected]
    if got != want:
        raise ValueError(f"{func_name}() output shapes must match {expected_name}, "
                         f"got {got} and {want}")


# ---- custom_linear_solve ----

@api_boundary
def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """Solve ``matvec(x) == b`` with ``solve``, differentiated implicitly.

    Args:
      matvec: the linear function ``x -> A x`` (it may close over arrays: derivatives
        with respect to them flow through the implicit rule).
      b: right-hand side, a pytree of arrays.
      solve: ``solve(matvec, b) -> x`` (``(x, aux)`` with ``has_aux``).
      transpose_solve: ``transpose_solve(vecmat, b) -> x`` solving the transposed
        system (``(x, aux)`` with ``has_aux``, as JAX); needed for reverse mode unless
        ``symmetric``.
      symmetric: ``A`` is symmetric: ``solve`` serves as ``transpose_solve``.
      has_aux: ``solve`` also returns auxiliary data (not differentiated).

    Returns:
      ``x`` with the structure of ``b`` (and ``aux`` with ``has_aux``).

    >>> import xform, xform.numpy as jnp
    >>> from xform import lax
    >>> a = jnp.array([[2., 0.], [0., 4.]])
    >>> solve = lambda mv, b: jnp.linalg.solve(a, b)
    >>> lax.custom_linear_solve(lambda x: a @ x, jnp.array([2., 4.]), solve, symmetric=True)
    Array([1., 1.], dtype=float32)
    """
    b_flat, tree = tree_util.tree_flatten(b)
    avals = [get_aval(x) for x in b_flat]
    in_tree = tree_util.tree_structure((b,))

    def traced(fun, what, aux=False):
        closed, consts, out_tree = trace_jaxpr(fun, in_tree, avals)
        _check_tree(what, "b", out_tree, tree, aux)
        _check_shapes(what, "b", closed.out_avals[:len(avals)], avals)
        return closed, consts

    mv_jaxpr, mv_consts = traced(matvec, "matvec")
    s_jaxpr, s_consts = traced(lambda x: solve(matvec, x), "solve", has_aux)
    aux_tree = None
    if has_aux:
        _, _, out_tree = trace_jaxpr(lambda x: solve(matvec, x), in_tree, avals)
        aux_tree = tree_util.treedef_children(out_tree)[1]
    if symmetric:
        vm_jaxpr, vm_consts = mv_jaxpr, mv_consts
        ts_jaxpr, ts_consts = s_jaxpr, s_consts
    elif transpose_solve is None:
        vm_jaxpr = ts_jaxpr = None
        vm_consts = ts_consts = []
    else:

        def vecmat(x):
            (y,) = linear_transpose(matvec, b)(x)
            return y
        vm_jaxpr, vm_consts = traced(vecmat, "vecmat")
        ts_jaxpr, ts_consts = traced(lambda x: transpose_solve(vecmat, x),
                                     "transpose_solve", has_aux)
    const_lengths = (len(mv_consts), len(vm_consts), len(s_consts), len(ts_consts))
    outs = linear_solve_p.bind(*mv_consts, *vm_consts, *s_consts, *ts_consts, *b_flat,
                               const_lengths=const_lengths,
                               jaxprs=(mv_jaxpr, vm_jaxpr, s_jaxpr, ts_jaxpr))
    x = tree_util.tree_unflatten(tree, outs[:len(b_flat)])
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, outs[len(b_flat):])
    return x


def _split(args, const_lengths):
    out, i = [], 0
    for n in const_lengths:
        out.append(list(args[i:i + n]))
        i += n
    return out, list(args[i:])


def _linear_solve_abstract_eval(*avals, const_lengths, jaxprs):
    return jaxprs[2].out_avals


def _linear_solve_impl(*args, const_lengths, jaxprs):
    (_, _, s_consts, _), b = _split(args, const_lengths)
    return eval_jaxpr(jaxprs[2].jaxpr, jaxprs[2].consts, *s_consts, *b)


def _linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    # A x = b  =>  A x' = b' - A' x  (A' the derivative of matvec in its closed-over values)
    outs = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    (mv_consts, _, _, _), b = _split(primals, const_lengths)
    (mv_dots, _, _, _), b_dots = _split(tangents, const_lengths)
    n = len(b)
    x = outs[:n]
    zeros = [ad.Zero(a.to_tangent_aval()) for a in jaxprs[2].out_avals]
    rhs = list(b_dots)
    if any(type(t) is not ad.Zero for t in mv_dots):
        _, mv_out = ad.jvp_flat(jaxprs[0], mv_consts + x,
                                mv_dots + [ad.Zero(get_aval(v).to_tangent_aval()) for v in x])
        rhs = [ad.add_tangents(r, _neg(m)) for r, m in zip(rhs, mv_out)]
    if all(type(r) is ad.Zero for r in rhs):
        return outs, zeros
    rhs = [ad.instantiate_zeros(r) for r in rhs]
    x_dot = linear_solve_p.bind(*primals[:len(primals) - n], *rhs,
                                const_lengths=const_lengths, jaxprs=jaxprs)[:n]
    return outs, list(x_dot) + zeros[n:]


def _neg(t):
    if type(t) is ad.Zero:
        return t
    return neg(t)


def _linear_solve_transpose(cts, *args, const_lengths, jaxprs):
    if jaxprs[3] is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    (mv, vm, s, ts), b = _split(args, const_lengths)
    if any(ad.is_undefined_primal(c) for c in mv + vm + s + ts):
        raise NotImplementedError("custom_linear_solve: transpose with respect to the "
                                  "matvec/solve's closed-over values (internal error)")
    n = len(b)
    if all(type(c) is ad.Zero for c in cts[:n]):
        return [None] * len(args)
    cts = [ad.instantiate_zeros(c) for c in cts[:n]]
    lengths = (const_lengths[1], const_lengths[0], const_lengths[3], const_lengths[2])
    ct_b = linear_solve_p.bind(*vm, *mv, *ts, *s, *cts, const_lengths=lengths,
                               jaxprs=(jaxprs[1], jaxprs[0], jaxprs[3], jaxprs[2]))
    return [None] * (len(args) - n) + list(ct_b[:n])


def _linear_solve_batch(vals, dims, *, const_lengths, jaxprs):
    size = batching.axis_size_of(vals, dims)
    n_consts = sum(const_lengths)
    # Every vector (b, and so x) is batched at 0, so all four jaxprs agree on batching.
    vals = [batching.bdim_at_front(v, d, size) if d is not batching.not_mapped or i >= n_consts
            else v for i, (v, d) in enumerate(zip(vals, dims))]
    dims = [0 if d is not batching.not_mapped or i >= n_consts else d
            for i, d in enumerate(dims)]
    (mv_d, vm_d, s_d, ts_d), b_d = _split(dims, const_lengths)
    new = tuple(None if j is None else batching.batch_jaxpr(j, size, cd + b_d, True)[0]
                for j, cd in zip(jaxprs, (mv_d, vm_d, s_d, ts_d)))
    outs = linear_solve_p.bind(*vals, const_lengths=const_lengths, jaxprs=new)
    return outs, [0] * len(outs)


def _linear_solve_lowering(ctx, *args, const_lengths, jaxprs):
    (_, _, s_consts, _), b = _split(args, const_lengths)
    s = jaxprs[2]
    return mlir.jaxpr_subcomp(ctx.module_ctx, s.jaxpr, s.consts, s_consts + b)


linear_solve_p = standard_primitive("custom_linear_solve", _linear_solve_abstract_eval,
                                    multiple_results=True)
linear_solve_p.def_impl(_linear_solve_impl)
ad.primitive_jvps[linear_solve_p] = _linear_solve_jvp
ad.primitive_transposes[linear_solve_p] = _linear_solve_transpose
batching.primitive_batchers[linear_solve_p] = _linear_solve_batch
mlir.register_lowering(linear_solve_p, _linear_solve_lowering)


# ---- custom_root ----

@api_boundary
def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """Find a root of ``f`` with ``solve``, differentiated implicitly: derivatives with
    respect to the values ``f`` closes over follow from ``f(x*) = 0`` (the implicit
    function theorem), not from ``solve``'s iterations.

    Args:
      f: ``x -> residual`` with the structure of ``x``.
      initial_guess: starting point, a pytree of arrays.
      solve: ``solve(f, initial_guess) -> x`` with ``f(x) == 0`` (``(x, aux)`` with
        ``has_aux``).
      tangent_solve: ``tangent_solve(g, y) -> x`` with ``g(x) == y`` for the linear ``g``
        (``f`` linearized at the root); for scalars ``lambda g, y: y / g(1.0)``.
      has_aux: ``solve`` also returns auxiliary data.

    Returns:
      ``solve(f, initial_guess)``.

    >>> import xform
    >>> from xform import lax
    >>> def sqrt(a):
    ...     newton = lambda f, x: lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x)
    ...     return lax.custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
    >>> print(xform.grad(sqrt)(4.0))
    0.25
    """
    g_flat, g_tree = tree_util.tree_flatten(initial_guess)
    avals = [get_aval(x) for x in g_flat]
    in_tree = tree_util.tree_structure((initial_guess,))
    f_jaxpr, f_consts, f_tree = trace_jaxpr(f, in_tree, avals)
    _check_tree("f", "initial_guess", f_tree, g_tree)
    s_jaxpr, s_consts, s_tree = trace_jaxpr(lambda x: solve(f, x), in_tree, avals)
    _check_tree("solve", "initial_guess", s_tree, g_tree, has_aux)

    def linearize_and_solve(x, b):
        _, f_jvp = linearize(f, x)
        return tangent_solve(f_jvp, b)
    ls_tree = tree_util.tree_structure((initial_guess, initial_guess))
    l_jaxpr, l_consts, l_tree = trace_jaxpr(linearize_and_solve, ls_tree, avals + avals)
    _check_tree("tangent_solve", "x", l_tree, g_tree)
    nf, ns, nl, n = len(f_consts), len(s_consts), len(l_consts), len(g_flat)

    @custom_jvp
    def root(*args):
        return tuple(s_jaxpr(*args[nf:nf + ns], *args[nf + ns + nl:]))

    def root_jvp(primals, tangents):
        sol = root(*primals)
        solution, aux = list(sol[:n]), list(sol[n:])
        params, dots = list(primals[:nf]), list(tangents[:nf])
        if nf:
            _, rhs = ad.jvp_flat(lambda *p: f_jaxpr(*p, *solution), params,
                                 [ad.Zero(get_aval(p).to_tangent_aval()) if _is_zero(d)
                                  else d for p, d in zip(params, dots)])
            rhs = [ad.instantiate_zeros(r) for r in rhs]
        else:
            rhs = [ad.zeros_like_aval(a.to_tangent_aval()) for a in avals]
        x_dot = l_jaxpr(*primals[nf + ns:nf + ns + nl], *solution, *rhs)
        x_dot = [_neg(t) for t in x_dot]
        return sol, tuple(x_dot) + tuple(ad.zeros_like_aval(get_aval(a).to_tangent_aval())
                                         for a in aux)
    root.defjvp(root_jvp)
    out = root(*f_consts, *s_consts, *l_consts, *g_flat)
    return tree_util.tree_unflatten(s_tree, list(out))


def _is_zero(t):
    import numpy as np
    return type(t) is ad.Zero or (isinstance(t, np.ndarray) and t.dtype == dtypes.float0)
