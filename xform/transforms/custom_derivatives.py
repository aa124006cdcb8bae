"""``custom_jvp``, ``custom_vjp`` and ``closure_convert``: user-defined derivative rules.

Wrappers only (argument resolution, pytrees, ``nondiff_argnums``, checking the rules'
outputs with JAX's messages); the primitives and their rules are in
``xform.interpreters.custom``. Outside any transformation the function simply runs.
"""
import functools
import inspect

from xform.core import dtypes, tree_util
from xform.core.errors import UnexpectedTracerError
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import (Tracer, current_trace, eval_trace, get_aval, set_current_trace,
                              to_concrete_value)
from xform.interpreters import ad
from xform.interpreters import partial_eval as pe
from xform.lax import elementwise as ew, shapes
from xform.interpreters.custom import (LazyJaxpr, _tangent_or_zero, custom_jvp_call_p,
                                      custom_vjp_call_p, CustomVJPPrimal, SymbolicZero,
                                      to_rule_zero)
from xform.interpreters.custom import (CustomJVPClosureError, CustomVJPException,
                                      custom_lin_p)


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def forward_attr(self, name):
    """``__getattr__`` of the custom-rule decorators: ``def*`` methods of a wrapped one
    (``custom_vjp(custom_vmap(f)).def_vmap``), as JAX's."""
    if name.startswith("def") and "fun" in vars(self):
        return getattr(self.fun, name)
    raise AttributeError(name)


def _resolve_kwargs(fun, args, kwargs, kind):
    if not kwargs and not getattr(fun, "__defaults__", None):  # (else: fill in defaults)
        return tuple(args)
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"The input arguments to the {kind}-decorated function {_name(fun)} "
                        f"could not be resolved to positional-only arguments. Binding failed "
                        f"with the error:\n{e}") from e
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"The input arguments to the {kind}-decorated function {_name(fun)} "
                        "could not be resolved to positional-only arguments: keyword-only "
                        f"arguments {', '.join(bound.kwargs)} were passed.")
    return bound.args


def _nondiff_nums(fun, nums, names):
    """``nondiff_argnums`` with the positions of ``nondiff_argnames`` added, sorted
    (as JAX's: the rules get the nondiff arguments in positional order)."""
    out = set(nums)
    if names:
        names = (names,) if isinstance(names, str) else tuple(names)
        params = inspect.signature(fun).parameters.values()
        out.update(i for i, p in enumerate(params)
                   if p.kind is p.POSITIONAL_OR_KEYWORD and p.name in names)
    return tuple(sorted(out))


def _split_nondiff(args, nondiff_argnums):
    """``(tracers, rebuild, dyn)``: the tracer leaves of the nondiff arguments (they become
    operands, so lazily traced rules never close over them), ``rebuild(tracers, dyn)``
    giving the full positional arguments back, and the differentiable arguments."""
    nums = {i % len(args) for i in nondiff_argnums if -len(args) <= i < len(args)}
    leaves, tree = tree_util.tree_flatten([args[i] for i in sorted(nums)])
    is_tracer = [isinstance(x, Tracer) for x in leaves]
    dyn = tuple(a for i, a in enumerate(args) if i not in nums)

    def rebuild(tracers, dyn_args):
        it = iter(tracers)
        nd = iter(tree_util.tree_unflatten(
            tree, [next(it) if t else x for x, t in zip(leaves, is_tracer)]))
        it_d = iter(dyn_args)
        return [next(nd) if i in nums else next(it_d) for i in range(len(args))]
    return [x for x, t in zip(leaves, is_tracer) if t], rebuild, dyn, sorted(nums)


_trace = pe.trace_to_subjaxpr


def _types(tree, avals):
    return str(tree_util.tree_unflatten(tree, [a.str_short() for a in avals])).replace("'", "")


def _same_types(avals1, avals2):
    return [(a.shape, a.dtype) for a in avals1] == [(a.shape, a.dtype) for a in avals2]


# ---- custom_jvp ----

class custom_jvp:
    """A function with a user-defined JVP rule, used by every autodiff transformation.

    Reverse mode (grad, vjp) transposes the rule's tangent computation, so the rule
    must be linear in the tangents.

    Args:
      fun: the primal function.
      nondiff_argnums: positions of arguments not differentiated (e.g. callables or
        Python values); the rule receives them first: ``jvp(*nondiff, primals, tangents)``.
      nondiff_argnames: the same, named (added to ``nondiff_argnums``).

    >>> import xform, xform.numpy as jnp
    >>> @xform.custom_jvp
    ... def f(x):
    ...   return jnp.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):  # a deliberately "wrong" rule: d sin(x) = 2 dx
    ...   return f(*primals), 2.0 * tangents[0]
    >>> xform.grad(f)(0.0)
    Array(2., dtype=float32, weak_type=True)
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_nums(fun, nondiff_argnums, nondiff_argnames)
        self.jvp = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule ``jvp(primals, tangents) -> (primal_out, tangent_out)`` (tuples of
        the positional arguments). Tangents not perturbed are arrays of zeros, or with
        ``symbolic_zeros=True`` ``SymbolicZero`` objects (which the rule may also return).
        Usable as a decorator; returns ``jvp``."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps):
        """One rule per positional argument: ``rule(t, primal_out, *primals)`` gives that
        argument's tangent contribution (``None``: the output doesn't depend on it)."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            parts = [rule(t, out, *primals) for t, rule in zip(tangents, jvps) if rule]
            if not parts:
                return out, tree_util.tree_map(_zeros_like, out)
            return out, tree_util.tree_map(lambda *ts: functools.reduce(_add, ts), *parts)
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {_name(self.fun)} "
                                 "using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_jvp")
        if self.nondiff_argnums:
            args = tuple(_stop_gradient(a) if i in self.nondiff_argnums else a
                         for i, a in enumerate(args))
        trace = current_trace()
        if trace is eval_trace:
            return self.fun(*args)
        if type(trace) in _CONCRETE_TRACES and _concrete(args):
            # not under jit or vmap: the rule runs on values, as in JAX
            if type(trace) is ad.JVPTrace:
                return _custom_jvp_concrete(self, trace, args)
            return _at_parent(self, trace, args)  # known partial-eval inputs
        tracers, rebuild, dyn, nums = _split_nondiff(args, self.nondiff_argnums)

        def jvp(trs, primals, tangents):
            full = rebuild(trs, primals)
            return self.jvp(*[full[i] for i in nums], primals, tangents)
        flat, in_tree = tree_util.tree_flatten((tracers, dyn))
        closed, consts, out_tree = _trace(lambda trs, d: self.fun(*rebuild(trs, d)), in_tree,
                                          [get_aval(x) for x in flat])
        out_avals = closed.out_avals
        names = (_name(self.fun), _name(self.jvp))
        n_skip, sz = len(consts), self.symbolic_zeros
        thunk = LazyJaxpr(lambda zeros: _trace_jvp(
            jvp, closed.in_avals, (n_skip, len(tracers)), in_tree, out_tree, out_avals, names,
            zeros, sz), names[1])
        outs = custom_jvp_call_p.bind(*consts, *flat, call_jaxpr=closed, jvp_jaxpr_fun=thunk,
                                      num_consts=len(consts) + len(tracers),
                                      symbolic_zeros=sz)
        return tree_util.tree_unflatten(out_tree, outs)


def _trace_jvp(jvp, in_avals, skip, in_tree, out_tree, out_avals, names, zeros, symbolic):
    """The rule as ``(ClosedJaxpr, out_zeros)``: from the operands and the tangents of the
    differentiable ones not in ``zeros`` to the primals out and their tangents not in
    ``out_zeros`` (the rule's ``SymbolicZero`` outputs). Of the operands, the first
    ``skip[0]`` (the function's closure) are unused and the next ``skip[1]`` are the
    nondiff arguments' tracers."""
    fname, jname = names
    n_skip, n_trs = skip
    n = len(in_avals)
    d_avals = [a.to_tangent_aval() for a in in_avals[n_skip + n_trs:]]
    out_zeros = []

    def flat_jvp(*xs):
        trs, primals = tree_util.tree_unflatten(in_tree, xs[n_skip:n])
        nz = iter(xs[n:])
        ts = [SymbolicZero(a) if z else next(nz) for a, z in zip(d_avals, zeros)]
        _, tangents = tree_util.tree_unflatten(in_tree, [None] * n_trs + ts)
        p_out, p_tree, t_out = _split_jvp_pair(jvp(trs, primals, tangents), names)
        p_avals = [get_aval(p) for p in p_out]
        what = (f"Custom JVP rule {jname} for function {fname} must produce a pair (list or "
                "tuple of length two) where the first element represents the primal output "
                "(equal in value to the output of the custom_jvp-decorated function "
                f"{fname}, and in particular ")
        if p_tree != out_tree:
            raise TypeError(what + "of the same container/pytree structure), but instead the "
                            "JVP rule output's first element had container/pytree structure:\n"
                            f"    {_types(p_tree, p_avals)}\nwhile the custom_jvp-decorated "
                            f"function {fname} had output container/pytree structure:\n"
                            f"    {_types(out_tree, out_avals)}.")
        if not _same_types(p_avals, out_avals):
            raise TypeError(what + "with leaves of the same shape/dtype), but instead the JVP "
                            "rule output's first element had shapes/dtypes of:\n"
                            f"    {_types(p_tree, p_avals)}\nwhile the custom_jvp-decorated "
                            f"function {fname} had output shapes/dtypes of:\n"
                            f"    {_types(out_tree, out_avals)}")
        out_zeros[:] = [type(t) is SymbolicZero for t in t_out]
        return p_out + [t for t in t_out if type(t) is not SymbolicZero]

    t_avals = [a for a, z in zip(d_avals, zeros) if not z]
    return pe.trace_to_jaxpr(flat_jvp, list(in_avals) + t_avals), tuple(out_zeros)


def _split_jvp_pair(pair, names):
    """The rule's ``(primal_out, tangent_out)`` flattened and checked against each other."""
    fname, jname = names
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise TypeError(f"Custom JVP rule {jname} for function {fname} must produce a pair "
                        "(list or tuple of length two) representing primal and tangent "
                        f"outputs, but got {pair}.")
    p_out, p_tree = tree_util.tree_flatten(pair[0])
    t_out, t_tree = tree_util.tree_flatten(pair[1])
    if p_tree != t_tree:
        raise TypeError(f"Custom JVP rule {jname} for function {fname} must produce primal "
                        "and tangent outputs with equal container (pytree) structures, but "
                        f"got {p_tree} and {t_tree} respectively.")
    _check_tangents([get_aval(p) for p in p_out],
                    [t.aval if type(t) is SymbolicZero else get_aval(t) for t in t_out])
    return p_out, p_tree, t_out


def _check_tangents(p_avals, t_avals):
    expected = [a.to_tangent_aval() for a in p_avals]
    got = [a.strip_weak_type() for a in t_avals]
    bad = [(p, e, t) for p, e, t in zip(p_avals, expected, got) if (e.shape, e.dtype) !=
           (t.shape, t.dtype)]
    if not bad:
        return
    if len(expected) == 1:
        (p, e, t), = bad
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {e.str_short()} (tangent "
                        f"type of {p.strip_weak_type().str_short()}) but got {t.str_short()}.")
    lines = "\n".join(f"  primal {p.str_short()} with tangent {t.str_short()}, expecting "
                      f"tangent {e.str_short()}" for p, e, t in bad)
    raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                    f"corresponding shapes and dtypes, but got:\n{lines}")


def _stop_gradient(x):
    return tree_util.tree_map(lambda v: ew.stop_gradient(v) if isinstance(v, Tracer) else v, x)


def _zeros_like(x):
    a = get_aval(x).to_tangent_aval()
    return ad.zeros_like_aval(a) if a.dtype == dtypes.float0 else shapes.full(a.shape, 0, a.dtype)


def _add(x, y):
    return x + y


# ---- custom_vjp ----

class custom_vjp:
    """A function with a user-defined VJP, used by reverse-mode autodiff.

    Forward mode (``jvp``, ``jacfwd``) of a custom_vjp function is an error, as in JAX.

    Args:
      fun: the primal function.
      nondiff_argnums: positions of non-array arguments (e.g. callables); ``fwd`` gets
        them in place and ``bwd`` gets them first: ``bwd(*nondiff, res, ct)``.
      nondiff_argnames: the same, named (added to ``nondiff_argnums``).

    >>> import xform, xform.numpy as jnp
    >>> @xform.custom_vjp
    ... def clip_grad(x):
    ...   return x
    >>> clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))
    >>> xform.grad(lambda x: 5.0 * clip_grad(x))(2.0)
    Array(1., dtype=float32, weak_type=True)
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_nums(fun, nondiff_argnums, nondiff_argnames)
        self.fwd = self.bwd = None
        self.symbolic_zeros = False

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        """Set ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, ct) -> tuple`` of one
        cotangent per positional argument (``None`` for zero). ``residuals`` may be any
        pytree of arrays. With ``symbolic_zeros=True``, fwd gets each array leaf as a
        ``CustomVJPPrimal`` (``.value``, ``.perturbed``) and bwd gets ``SymbolicZero``s for
        zero output cotangents. ``optimize_remat`` is accepted and has no effect."""
        if symbolic_zeros and optimize_remat:
            raise NotImplementedError(
                "remat optimization for custom_vjp does not support symbolic zeros")
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros

    def __call__(self, *args, **kwargs):
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {_name(self.fun)} "
                                 "using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
        trace = current_trace()
        if trace is eval_trace:
            return self.fun(*args)
        bwd = self.bwd
        for i in self.nondiff_argnums:
            _check_for_tracers(args[i])
        _, rebuild, dyn, nums = _split_nondiff(args, self.nondiff_argnums)
        if nums:
            bwd = functools.partial(self.bwd, *[args[i] for i in nums])
        if type(trace) in _CONCRETE_TRACES and _concrete(args):
            if type(trace) is ad.JVPTrace:  # not under jit or vmap: fwd runs on values
                return _custom_vjp_concrete(self, trace, dyn, rebuild, bwd)
            return _at_parent(self, trace, args)
        flat, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in flat]
        closed, consts, out_tree = _trace(lambda *d: self.fun(*rebuild([], d)), in_tree,
                                          in_avals)
        names = (_name(self.fun), _name(self.fwd))
        res_tree = []
        n_skip, sz = len(consts), self.symbolic_zeros
        thunk = LazyJaxpr(lambda zeros: _trace_fwd(
            lambda *d: self.fwd(*rebuild([], d)), closed.in_avals, n_skip, in_tree, out_tree,
            closed.out_avals, names, res_tree, zeros, sz), names[1])
        flat_bwd = _FlatBwd(bwd, in_tree, in_avals, out_tree, res_tree, _name(self.bwd), sz)
        outs = custom_vjp_call_p.bind(*consts, *flat, call_jaxpr=closed, fwd_jaxpr_fun=thunk,
                                      bwd=flat_bwd, num_consts=len(consts), symbolic_zeros=sz)
        return tree_util.tree_unflatten(out_tree, outs)


class _NondiffTracerError(UnexpectedTracerError):
    def __init__(self):
        Exception.__init__(
            self, "Found a JAX Tracer object passed as an argument to a custom_vjp function "
            "in a position indicated by nondiff_argnums as non-differentiable. Tracers cannot "
            "be passed as non-differentiable arguments to custom_vjp functions; instead, "
            "nondiff_argnums should only be used for arguments that can't be or contain JAX "
            "tracers, e.g. function-valued arguments. In particular, array-valued arguments "
            "should typically not be indicated as nondiff_argnums.")


def _check_for_tracers(x):
    if any(isinstance(v, Tracer) for v in tree_util.tree_leaves(x)):
        raise _NondiffTracerError()


def _trace_fwd(fwd, in_avals, n_skip, in_tree, out_tree, out_avals, names, res_tree, zeros,
               symbolic):
    """fwd as ``(ClosedJaxpr: operands -> residuals + primals_out, number of residuals)``;
    the first ``n_skip`` operands (the function's closure) are unused. With ``symbolic``,
    fwd gets ``CustomVJPPrimal``s, perturbed where not in ``zeros``."""
    fname, wname = names
    what = (f"Custom VJP fwd rule {wname} for function {fname} must produce a pair (list or "
            "tuple of length two) where the first element represents the primal output "
            f"(equal to the output of the custom_vjp-decorated function {fname}) and the "
            "second element represents residuals (i.e. values stored from the forward pass "
            "for use on the backward pass), but ")

    def flat_fwd(*xs):
        xs = xs[n_skip:]
        if symbolic:
            xs = [CustomVJPPrimal(x, not z) for x, z in zip(xs, zeros)]
        pair = fwd(*tree_util.tree_unflatten(in_tree, xs))
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(what + f"instead of a pair the fwd rule {wname} produced {pair}.")
        p_out, p_tree = tree_util.tree_flatten(pair[0])
        p_avals = [get_aval(p) for p in p_out]
        if p_tree != out_tree:
            raise TypeError(what + "instead the fwd rule output's first element had "
                            f"container/pytree structure:\n    {_types(p_tree, p_avals)}\n"
                            f"while the custom_vjp-decorated function {fname} had output "
                            f"container/pytree structure:\n    {_types(out_tree, out_avals)}.")
        if not _same_types(p_avals, out_avals):
            raise TypeError(what + "instead the fwd rule output's first element had "
                            f"shapes/dtypes of:\n    {_types(p_tree, p_avals)}\nwhile the "
                            f"custom_vjp-decorated function {fname} had output shapes/dtypes "
                            f"of:\n    {_types(out_tree, out_avals)}")
        res, tree = tree_util.tree_flatten(pair[1])
        res_tree[:] = [tree]
        return res + p_out

    closed = pe.trace_to_jaxpr(flat_fwd, list(in_avals))
    return closed, res_tree[0].num_leaves


class _FlatBwd:
    """The user's bwd on flat residuals and cotangents, returning one cotangent (or
    ``ad.Zero``) per flat primal input, checked against the inputs' structure and shapes."""

    def __init__(self, bwd, in_tree, in_avals, out_tree, res_tree, name, symbolic):
        self.bwd, self.in_tree, self.in_avals = bwd, in_tree, in_avals
        self.out_tree, self.res_tree, self.name = out_tree, res_tree, name
        self.symbolic = symbolic

    def __repr__(self):
        return self.name

    def __call__(self, res, cts):
        cts = [to_rule_zero(c, self.symbolic) for c in cts]
        py_cts_in = self.bwd(tree_util.tree_unflatten(self.res_tree[0], res),
                             tree_util.tree_unflatten(self.out_tree, cts))
        n_args = len(tree_util.treedef_children(self.in_tree))
        if isinstance(py_cts_in, list) and len(py_cts_in) == n_args:
            py_cts_in = tuple(py_cts_in)
        dummy = tree_util.tree_unflatten(self.in_tree, [0] * len(self.in_avals))
        try:
            if not isinstance(py_cts_in, tuple):
                raise ValueError
            flat = tree_util.broadcast_prefix(py_cts_in, dummy)
        except ValueError:
            got = tree_util.tree_structure(py_cts_in)
            raise TypeError("Custom VJP bwd rule must produce an output with the same "
                            "container (pytree) structure as the args tuple of the primal "
                            "function, and in particular must produce a tuple of length equal "
                            "to the number of arguments to the primal function, but got bwd "
                            f"output structure {got} for primal input structure "
                            f"{self.in_tree}.") from None
        paths = [p for p, _ in tree_util.tree_flatten_with_path(dummy)[0]]
        return [_check_ct(c, a, p) for c, a, p in zip(flat, self.in_avals, paths)]


def _check_ct(ct, aval, path):
    t_aval = aval.to_tangent_aval()
    if ct is None or t_aval.dtype == dtypes.float0:
        return ad.Zero(t_aval)
    if type(ct) is SymbolicZero:
        if (ct.aval.shape, ct.aval.dtype) != (t_aval.shape, t_aval.dtype):
            raise ValueError(
                "Custom VJP bwd rule produced a SymbolicZero with a shape/dtype that does not "
                "match the corresponding input tangent shape/dtype: at output"
                f"{tree_util.keystr(path)} the SymbolicZero had shape/dtype "
                f"{ct.aval.str_short(False)} while the corresponding input had shape/dtype "
                f"{aval.str_short(False)}. Consider just returning a None here instead of a "
                "SymbolicZero object.")
        return ad.Zero(t_aval)
    c_aval = get_aval(ct)
    if c_aval.shape != t_aval.shape:
        raise ValueError("Custom VJP bwd rule must produce an output with the same type as "
                         f"the args tuple of the primal function, but at output"
                         f"{tree_util.keystr(path)} the bwd rule produced an output of type "
                         f"{c_aval.str_short(False)} corresponding to an input of type "
                         f"{aval.str_short(False)}, so the shapes do not match")
    if c_aval.dtype != t_aval.dtype:
        ct = ew.convert_element_type(ct, t_aval.dtype)
    return ct


# ---- outside jit and vmap: the rules run on concrete primals ("final style") ----
# Under a JVP whose primals are concrete (grad/jvp/vjp, not under jit or vmap), JAX runs
# the custom_jvp rule (the custom_vjp fwd) on them, so rules may branch on values. The
# function itself is not traced; tangents stay with the JVP trace applying the rule.

_CONCRETE_TRACES = (ad.JVPTrace, pe.JaxprTrace)


def _concrete(args):
    return all(to_concrete_value(x) is not None for x in tree_util.tree_leaves(args))


def _at_parent(f, trace, args):
    """``f`` on known partial-eval values: computed by the parent (which may differentiate
    them with the custom rule)."""
    args = tree_util.tree_map(
        lambda x: x.value if type(x) is pe.JaxprTracer and x._trace is trace else x, args)
    with set_current_trace(trace.parent):
        return f(*args)


def _primals_tangents(trace, leaves):
    tracers = [trace.lift(x) for x in leaves]
    return [t.primal for t in tracers], [t.tangent for t in tracers]


def _closure_check(fun, trace, error):
    """A rule must not close over a value this JVP perturbs (its tangent would be lost)."""
    cells = [c.cell_contents for c in (getattr(fun, "__closure__", None) or ())
             if c.cell_contents is not fun]
    if any(type(x) is ad.JVPTracer and x._trace is trace and type(x.tangent) is not ad.Zero
           for x in tree_util.tree_leaves(cells)):
        raise error()


def _custom_jvp_concrete(f, trace, args):
    for fn in (f.fun, f.jvp):
        _closure_check(fn, trace, CustomJVPClosureError)
    nums = sorted({i % len(args) for i in f.nondiff_argnums if -len(args) <= i < len(args)})
    dyn = tuple(a for i, a in enumerate(args) if i not in nums)
    leaves, tree = tree_util.tree_flatten(dyn)
    primals, tangents = _primals_tangents(trace, leaves)
    nondiff = [tree_util.tree_map(
        lambda x: x.primal if type(x) is ad.JVPTracer and x._trace is trace else x, args[i])
        for i in nums]
    with set_current_trace(trace.parent):
        if all(type(t) is ad.Zero for t in tangents):
            full = iter(tree_util.tree_unflatten(tree, primals))
            nd = iter(nondiff)
            return f(*[next(nd) if i in nums else next(full) for i in range(len(args))])
        tangents = [to_rule_zero(t, f.symbolic_zeros) for t in tangents]
        pair = f.jvp(*nondiff, tree_util.tree_unflatten(tree, primals),
                     tree_util.tree_unflatten(tree, tangents))
        p_out, p_tree, t_out = _split_jvp_pair(pair, (_name(f.fun), _name(f.jvp)))
    return tree_util.tree_unflatten(p_tree, [
        ad.JVPTracer(trace, p, _tangent_or_zero(p, ad.Zero(t.aval) if type(t) is SymbolicZero
                                                   else t)) for p, t in zip(p_out, t_out)])


def _custom_vjp_concrete(f, trace, dyn, rebuild, bwd):
    for fn in (f.fun, f.fwd):
        _closure_check(fn, trace, CustomVJPException)
    leaves, in_tree = tree_util.tree_flatten(dyn)
    primals, tangents = _primals_tangents(trace, leaves)
    with set_current_trace(trace.parent):
        if all(type(t) is ad.Zero for t in tangents):
            return f(*rebuild([], tree_util.tree_unflatten(in_tree, primals)))
        fwd_in = primals
        if f.symbolic_zeros:
            fwd_in = [CustomVJPPrimal(p, type(t) is not ad.Zero)
                      for p, t in zip(primals, tangents)]
        pair = f.fwd(*rebuild([], tree_util.tree_unflatten(in_tree, fwd_in)))
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(f"Custom VJP fwd rule {_name(f.fwd)} for function {_name(f.fun)} "
                            "must produce a pair (list or tuple of length two) where the first "
                            "element represents the primal output and the second element "
                            f"represents residuals, but got {pair}.")
        p_out, out_tree = tree_util.tree_flatten(pair[0])
        res, res_tree = tree_util.tree_flatten(pair[1])
        flat_bwd = _FlatBwd(bwd, in_tree, [get_aval(p) for p in primals], out_tree,
                            [res_tree], _name(f.bwd), f.symbolic_zeros)
        in_zeros = tuple(type(t) is ad.Zero for t in tangents)
        out_avals = tuple(get_aval(p).to_tangent_aval() for p in p_out)
        t_out = custom_lin_p.bind(*res, *[t for t in tangents if type(t) is not ad.Zero],
                                  num_res=len(res), bwd=flat_bwd, out_avals=out_avals,
                                  in_zeros=in_zeros)
    return tree_util.tree_unflatten(out_tree, [
        ad.JVPTracer(trace, p, _tangent_or_zero(p, t)) for p, t in zip(p_out, t_out)])


def custom_vjp_primal_tree_values(tree):
    """``tree`` with each ``CustomVJPPrimal`` leaf (a symbolic-zeros fwd rule's argument)
    replaced by its ``value``.

    Raises:
      TypeError: a leaf is not a ``CustomVJPPrimal``.
    """
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_util.tree_map(value, tree)


# ---- closure_convert ----

def closure_convert(fun, *example_args):
    """Hoist the differentiable values ``fun`` closes over into explicit arguments.

    Traces ``fun`` at ``example_args``' types; closed-over tracers of inexact dtype
    (values that may be differentiated) become trailing arguments, so they can cross a
    custom_vjp boundary.

    Returns:
      ``(converted, hoisted)``: ``converted(*args, *hoisted)`` equals ``fun(*args)``.

    >>> import xform, xform.numpy as jnp
    >>> f, consts = xform.closure_convert(lambda x: jnp.sin(x), 1.0)
    >>> f(0.0, *consts)
    Array(0., dtype=float32, weak_type=True)
    """
    flat, in_tree = tree_util.tree_flatten(example_args)
    closed, consts, out_tree = _trace(fun, in_tree, [get_aval(x) for x in flat])
    hoist = [isinstance(c, Tracer) and dtypes.is_inexact(get_aval(c).dtype) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]

    def converted(*args_and_consts):
        n = len(args_and_consts) - len(hoisted)
        args, k, e = args_and_consts[:n], iter(kept), iter(args_and_consts[n:])
        all_consts = [next(e) if h else next(k) for h in hoist]
        outs = eval_jaxpr(closed.jaxpr, [], *all_consts, *tree_util.tree_leaves(args))
        return tree_util.tree_unflatten(out_tree, outs)
    return converted, hoisted
