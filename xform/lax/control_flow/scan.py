"""``scan``: the ``scan`` primitive and its rules (the loops built on it, ``fori_loop``,
``map`` and ``bounded_while_loop``, are in ``scan_loops.py``).

``scan_p`` holds the body as a ClosedJaxpr from ``(consts, carry, x)`` to
``(carry, y)``; its operands are ``consts, init, xs`` and its results ``carry, ys``.
JVP and batching find by fixpoint which carries have nonzero tangents / a batch axis.
Partial evaluation splits the loop into a known scan, which also emits the
per-iteration residuals as stacked ys, and an unknown scan consuming them as xs: so
``grad`` stores residuals instead of re-running the forward body backwards. Residuals
that are just a const or an x of the loop are forwarded, not stacked. The transpose is
a reverse scan of the body's transpose (consts' cotangents accumulate in the carry).
The lowering is one ``stablehlo.while`` with an induction variable.

NB: ``unroll`` is validated and kept as a param, but the lowering does not unroll the
body (XLA sees a plain while loop); results are the same, only speed may differ.
"""
import inspect
import operator

import numpy as np

from xform.core import dtypes, shape_poly, tree_util
from xform.core.avals import physical_aval
from xform.core.errors import ConcretizationTypeError
from xform.core.jaxpr import ClosedJaxpr, Jaxpr
from xform.core.mesh import get_abstract_mesh
from xform.core.sharding import PartitionSpec as P
from xform.core.sharding_types import is_explicit
from xform.core.trace import Tracer, get_aval, set_current_trace
from xform.core.traceback_util import api_boundary
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters import partial_eval as pe
from xform.lax._prim import allow_extended, standard_primitive
from xform.lax.control_flow.common import eager_cached, trace_jaxpr
from xform import ref as refs
from xform.lax.elementwise import add_any, convert_element_type
from xform.core.trace import _context

hlo, ir = mlir.hlo, mlir.ir


def _split(xs, *sizes):
    """Split ``xs`` into consecutive lists of ``sizes`` plus the rest."""
    out, start = [], 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


# ---- scan ----

@api_boundary
def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loop ``f`` over the leading axis of ``xs`` while carrying state, like JAX's.

    Semantically::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, np.stack(ys)

    but ``f`` is traced once and the loop is compiled as one XLA while loop, and it
    is differentiable in both modes (reverse mode stores per-iteration residuals).

    Args:
      f: ``(carry, x) -> (carry, y)``; the output carry must have the same pytree
        structure, shapes and dtypes as ``init``.
      init: the initial carry (a pytree of arrays).
      xs: a pytree of arrays with a common leading axis, or None.
      length: the number of iterations; required when ``xs`` is None.
      reverse: scan from the end of ``xs`` to the start (ys stay in xs order).
      unroll: an int >= 0 or a bool; accepted for JAX compatibility (see the
        module note: the lowering does not unroll).
      _split_transpose: JAX's experimental transpose scheme; accepted and ignored
        (it changes how the backward loop is staged, not its values).

    Returns:
      ``(final carry, stacked ys)``.

    Raises:
      ValueError: if the xs leaves disagree on their leading axis (or with
        ``length``), or neither xs nor ``length`` give a length.
      TypeError: if ``f`` changes the carry's structure, shapes or dtypes.

    >>> from xform import lax
    >>> carry, ys = lax.scan(lambda c, x: (c + x, c * x), 0., np.arange(4.))
    >>> float(carry), ys.tolist()
    (6.0, [0.0, 0.0, 2.0, 9.0])
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")

    def call(funs, values):  # refs from outside f ride along in the carry
        if not values:
            return _scan(funs[0], init, xs, length, reverse, unroll), []
        (carry, values), ys = _scan(funs[0], (init, values), xs, length, reverse, unroll)
        return (carry, ys), values

    def adapt(_, inner):
        def body(carry, x):
            (c, y), values = inner(carry[1], carry[0], x)
            return (c, values), y
        return body
    return refs.thread_refs(call, [f], adapt)


def _scan(f, init, xs, length, reverse, unroll):
    init_flat, init_tree = tree_util.tree_flatten(init)
    xs_flat, xs_tree = tree_util.tree_flatten(xs)
    length = _infer_length(xs_flat, length)
    xs_types = [get_aval(x) for x in xs_flat]
    if any(getattr(a, "_sharding", None) is not None and a._sharding.spec[0] is not None
           for a in xs_types):  # (explicit mode: every step reads its whole slice)
        raise ValueError("0th dimension of all xs should be replicated. Got "
                         + ", ".join(str(a.sharding.spec) for a in xs_types))
    unroll = _check_unroll(unroll, length)
    x_avals = [_unstacked(get_aval(x)) for x in xs_flat]
    in_tree = tree_util.tree_structure((init, xs))
    num_carry = len(init_flat)

    def trace(init_avals):
        trees = {}

        def body(carry, x):
            out = f(carry, x)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError(f"scan body output must be a pair (carry, y), got {out!r}.")
            trees["carry"] = tree_util.tree_structure(out[0])
            trees["y"] = tree_util.tree_structure(out[1])
            return tuple(out)

        closed, consts, _ = trace_jaxpr(body, in_tree, init_avals + x_avals)
        carry_avals = closed.out_avals[:trees["carry"].num_leaves]
        if not (trees["carry"] == init_tree and any(_to_promote(init_avals, carry_avals))):
            _check_carry(f, init, init_tree, trees["carry"], init_avals, carry_avals)
        return closed, consts, trees["y"]

    def cached_trace(init_avals):
        return eager_cached((f,), ("scan", in_tree, tuple(init_avals), tuple(x_avals)),
                            lambda: trace(init_avals))

    init_avals = [get_aval(x) for x in init_flat]
    closed, consts, y_tree = cached_trace(init_avals)
    # A weakly typed init (e.g. a Python 0 summing floats) takes the dtype the body
    # gives it, as in JAX (the carry types are checked on that second trace).
    promote = _to_promote(init_avals, closed.out_avals[:num_carry])
    if any(promote):
        init_flat = [convert_element_type(x, dtypes.result_type(x, out)) if p else x
                     for x, p, out in zip(init_flat, promote, closed.out_avals)]
        closed, consts, y_tree = cached_trace([get_aval(x) for x in init_flat])
    n_in = len(consts) + num_carry + len(xs_flat)
    out = _bind(*consts, *init_flat, *xs_flat, reverse=bool(reverse), length=length,
                jaxpr=closed, num_consts=len(consts), num_carry=num_carry,
                linear=(False,) * n_in, unroll=unroll)
    return (tree_util.tree_unflatten(init_tree, out[:num_carry]),
            tree_util.tree_unflatten(y_tree, out[num_carry:]))


def _to_promote(init_avals, carry_avals):
    """Which carries start weakly typed but come out of the body as another dtype."""
    return [a.weak_type and a.dtype != o.dtype for a, o in zip(init_avals, carry_avals)]


def _bind(*args, jaxpr, length, linear, num_carry, num_consts, reverse, unroll):
    """Bind ``scan_p`` with its params in alphabetical order (how JAX prints them)."""
    return scan_p.bind(*args, jaxpr=jaxpr, length=length, linear=tuple(linear),
                       num_carry=num_carry, num_consts=num_consts, reverse=reverse,
                       unroll=unroll)


def _infer_length(xs_flat, length):
    shapes = []
    for x in xs_flat:
        shape = get_aval(x).shape
        if not shape:
            raise ValueError(f"scan got value with no leading axis to scan over: {x!r} "
                             f"of shape {shape}.")
        shapes.append(shape)
    if length is not None and not shape_poly.is_symbolic_dim(length):
        try:
            length = operator.index(length)
        except (TypeError, ConcretizationTypeError):
            raise ConcretizationTypeError(
                length, "The `length` argument to `scan` expects a concrete `int` value. "
                "For scan-like iteration with a dynamic length, use `while_loop` or "
                "`fori_loop`.") from None
        if any(s[0] != length for s in shapes):
            raise ValueError(f"scan got `length` argument of {length} which disagrees "
                             f"with leading axis sizes {[s[0] for s in shapes]} "
                             f"(xs shapes {shapes}).")
    if length is not None:
        return length
    if not shapes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    if len({s[0] for s in shapes}) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         + ", ".join(str(s[0]) for s in shapes)
                         + f" (xs shapes {shapes}).")
    return shapes[0][0]


def _check_unroll(unroll, length):
    if isinstance(unroll, Tracer):
        raise ConcretizationTypeError(unroll, "The `unroll` argument to `scan` expects a "
                                      "concrete `int` or `bool` value.")
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    unroll = operator.index(unroll)
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return unroll


def _unstacked(aval):
    s = getattr(aval, "_sharding", None)  # (typed: its spec less the scanned dimension)
    return aval.update(shape=aval.shape[1:],
                       sharding=None if s is None else s.with_spec(P(*s.spec[1:])))


def _carry_name(f):
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return "carry"
    return params[0] if params else "carry"


def check_carry_types(what, names, in_avals, out_avals):
    """JAX's errors for a carry whose output type differs from its input's beyond shape
    and dtype: its sharding (explicit mode) or, inside shard_map(check_vma=True), the
    mesh axes it varies over (``pcast`` the initial value). An untyped side (a value
    made from untyped operands, e.g. ``jnp.ones``, or by a primitive without a sharding
    rule) is replicated in JAX's types under an explicit mesh in context, so differs from
    a split one there; without that context JAX's empty-mesh type matches any."""
    explicit = is_explicit(get_abstract_mesh())
    for name, a, b in zip(names, in_avals, out_avals):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            continue
        what_in = f"carry component {name}" if "[" in name else f"carry {name}"
        sa, sb = getattr(a, "_sharding", None), getattr(b, "_sharding", None)
        if explicit and (sa is None) != (sb is None):
            differ = any((sa or sb).spec)   # the untyped side is replicated
        else:
            differ = sa is not None and sb is not None and sa != sb
        if differ:
            raise TypeError(
                f"{what} function carry input and carry output must have equal types, but "
                f"they differ:\n\nThe input {what_in} has type {a.str_short(False)} but the "
                f"corresponding output carry component has type {b.str_short(False)}.\n\n"
                "Revise the function so that all output types match the corresponding "
                "input types.")
        if _context.vma is not None and a.vma != b.vma:  # (a body's lowering keeps vma)
            axes = tuple(sorted(b.vma - a.vma))
            raise TypeError(
                f"{what} function carry input and carry output must have equal types, but "
                f"they differ:\n\nThe input {what_in} has type {a.str_short()} but the "
                f"corresponding output carry component has type {b.str_short()}, so the "
                f"manual axis types do not match.\n\nThis might be fixed by applying "
                f"`jax.lax.pcast(..., {axes}, to='varying')`, to the initial carry value "
                f"corresponding to the input {what_in}.\n\nRevise the function so that all "
                "output types match the corresponding input types.")


def _check_carry(f, init, init_tree, out_tree, in_avals, out_avals, what="scan body"):
    name = _carry_name(f)
    if init_tree != out_tree:
        raise TypeError(f"{what} function carry input and carry output must have the "
                        f"same pytree structure, but they differ: the input carry {name} "
                        f"is {init_tree} but the carry output is {out_tree}. Revise the "
                        "function so that the carry output has the same pytree structure "
                        "as the carry input.")
    paths = [p for p, _ in tree_util.tree_flatten_with_path(init)[0]]
    diffs = [f"the input carry component {name}{tree_util.keystr(p)} has type "
             f"{a.str_short()} but the corresponding output carry component has type "
             f"{b.str_short()}"
             for p, a, b in zip(paths, in_avals, out_avals)
             if (a.shape, a.dtype) != (b.shape, b.dtype)]
    check_carry_types(what, [f"{name}{tree_util.keystr(p)}" for p in paths], in_avals,
                      out_avals)
    if diffs:
        raise TypeError(f"{what} function carry input and carry output must have equal "
                        "types (shapes and dtypes), but they differ:\n"
                        + "".join(f"  * {d};\n" for d in diffs)
                        + "Revise the function so that all output types match the "
                        "corresponding input types.")


def _scan_abstract_eval(*avals, reverse, length, jaxpr, num_consts, num_carry, linear,
                        unroll):
    consts, init, xs = _split(avals, num_consts, num_carry)
    want = jaxpr.in_avals
    got = consts + init + [_unstacked(a) if a.shape and a.shape[0] == length else a
                           for a in xs]
    if len(got) != len(want) or any((a.shape, a.dtype) != (b.shape, b.dtype)
                                    for a, b in zip(got, want)):
        raise TypeError(f"scan operands {[a.str_short() for a in avals]} do not match its "
                        f"body's inputs {[a.str_short() for a in want]} "
                        f"(length={length}, num_consts={num_consts}, num_carry={num_carry})")
    carry, ys = _split(jaxpr.out_avals, num_carry)
    return carry + [_stacked(a, length) for a in ys]


def _stacked(aval, length):
    """A ``ys`` output: ``aval`` stacked ``length`` times (typed: that dimension unsplit)."""
    s = getattr(aval, "_sharding", None)
    return aval.update(shape=(length,) + aval.shape,
                       sharding=None if s is None else s.with_spec(P(None, *s.spec)))


# ---- JVP: the body's JVP, with tangents of consts, carries and xs alongside ----

def _permute(closed, in_order, out_order):
    """``closed`` with its inputs and outputs reordered (no retracing)."""
    j = closed.jaxpr
    jaxpr = Jaxpr(j.constvars, [j.invars[i] for i in in_order],
                  [j.outvars[i] for i in out_order], j.eqns)
    return ClosedJaxpr(jaxpr, closed.consts)


def _groups_order(sizes_a, sizes_b):
    """Interleave two concatenated groupings: [a0, b0, a1, b1, ...] as indices into
    a0 + a1 + ... + b0 + b1 + ...."""
    n_a = sum(sizes_a)
    order, ia, ib = [], 0, n_a
    for na, nb in zip(sizes_a, sizes_b):
        order += list(range(ia, ia + na)) + list(range(ib, ib + nb))
        ia, ib = ia + na, ib + nb
    return order


def _scan_jvp(primals, tangents, *, reverse, length, jaxpr, num_consts, num_carry, linear,
              unroll):
    num_ys = len(jaxpr.out_avals) - num_carry
    nz = [type(t) is not ad.Zero for t in tangents]
    const_nz, init_nz, xs_nz = _split(nz, num_consts, num_carry)
    carry_nz = init_nz
    for _ in range(num_carry + 1):
        jvp, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                   instantiate=carry_nz + [False] * num_ys)
        carry_out_nz, ys_nz = _split(out_nz, num_carry)
        if carry_out_nz == carry_nz:
            break
        carry_nz = [a or b for a, b in zip(carry_nz, carry_out_nz)]
    n_nz = [sum(const_nz), sum(carry_nz), sum(xs_nz)]
    jvp = _permute(jvp, _groups_order([num_consts, num_carry, len(xs_nz)], n_nz),
                   _groups_order([num_carry, num_ys], [n_nz[1], sum(ys_nz)]))
    consts, init, xs = _split(primals, num_consts, num_carry)
    c_dot, i_dot, x_dot = _split(tangents, num_consts, num_carry)
    i_dot = [ad.instantiate_zeros(t) for t, n in zip(i_dot, carry_nz) if n]
    c_dot = [t for t in c_dot if type(t) is not ad.Zero]
    x_dot = [t for t in x_dot if type(t) is not ad.Zero]
    lin_c, lin_i, lin_x = _split(linear, num_consts, num_carry)
    new_linear = (*lin_c, *[True] * n_nz[0], *lin_i, *[True] * n_nz[1], *lin_x,
                  *[True] * n_nz[2])
    out = _bind(*consts, *c_dot, *init, *i_dot, *xs, *x_dot, reverse=reverse,
                      length=length, jaxpr=jvp, num_consts=num_consts + n_nz[0],
                      num_carry=num_carry + n_nz[1], linear=new_linear, unroll=unroll)
    carry, carry_dot, ys, ys_dot = _split(out, num_carry, n_nz[1], num_ys)
    carry_dot, ys_dot = iter(carry_dot), iter(ys_dot)
    out_avals = _scan_abstract_eval(*[get_aval(p) for p in primals], reverse=reverse,
                                    length=length, jaxpr=jaxpr, num_consts=num_consts,
                                    num_carry=num_carry, linear=linear, unroll=unroll)
    tangents_out = [next(carry_dot) if n else ad.Zero(a.to_tangent_aval())
                    for n, a in zip(carry_nz, out_avals[:num_carry])]
    tangents_out += [next(ys_dot) if n else ad.Zero(a.to_tangent_aval())
                     for n, a in zip(ys_nz, out_avals[num_carry:])]
    return carry + ys, tangents_out


# ---- partial evaluation: a known scan (plus residuals) and an unknown scan ----

def _scan_partial_eval(trace, tracers, params):
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    length = params["length"]
    num_ys = len(jaxpr.out_avals) - num_carry
    unknowns = [t.jvar is not None for t in tracers]
    const_uk, init_uk, xs_uk = _split(unknowns, num_consts, num_carry)
    carry_uk = init_uk
    for _ in range(num_carry + 1):
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(
            jaxpr, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * num_ys)
        if out_uk[:num_carry] == carry_uk:
            break
        carry_uk = [a or b for a, b in zip(carry_uk, out_uk[:num_carry])]
    in_uk = const_uk + carry_uk + xs_uk
    known_tracers = [t for t, u in zip(tracers, in_uk) if not u]
    n_kc, n_kcarry = num_consts - sum(const_uk), num_carry - sum(carry_uk)
    # Hoist loop-invariant work: split the known body again, with only its consts
    # known. Residuals computable from the consts alone (``theta[0]``, ``w.T``, or a
    # const itself) are computed once, outside the loop, and become consts of the
    # unknown scan; the rest of the known body (k_loop) is the known scan's body.
    n_known_out = len(known.out_avals) - num_res
    k_inv, k_loop, loop_out, n_res2 = pe.partial_eval_jaxpr(
        known, [False] * n_kc + [True] * (len(known.in_avals) - n_kc),
        instantiate=[True] * n_known_out + [False] * num_res)
    with set_current_trace(trace.parent):
        inv_vals = k_inv(*[t.value for t in known_tracers[:n_kc]])
    inv_vals, res2_vals = _split(inv_vals, len(inv_vals) - n_res2)
    # Classify the residuals: loop-invariant, a known x itself (forwarded), or computed
    # per iteration (stacked: extra ys of the known scan).
    lj = k_loop.jaxpr
    where = {v: i for i, v in enumerate(lj.invars)}
    n_x0 = n_res2 + n_kcarry   # where the known xs start among k_loop's inputs
    loop_res = iter(lj.outvars[n_known_out:])
    inv_it = iter(inv_vals)
    const_res, xs_res, stacked = [], [], []
    for r, is_loop in enumerate(loop_out[n_known_out:]):
        if not is_loop:
            const_res.append((r, next(inv_it)))
            continue
        v = next(loop_res)
        i = where.get(v, -1)
        if i >= n_x0:
            xs_res.append((r, known_tracers[n_kc + n_kcarry + i - n_x0]))
        else:
            stacked.append((r, v))
    known_j = Jaxpr(lj.constvars, lj.invars,
                    lj.outvars[:n_known_out] + [v for _, v in stacked], lj.eqns)
    known_j, _ = pe.dce_jaxpr(known_j)
    k_linear = (False,) * n_res2 + tuple(
        lin for lin, u in zip(params["linear"][num_consts:], in_uk[num_consts:]) if not u)
    with set_current_trace(trace.parent):
        known_outs = _bind(
            *res2_vals, *[t.value for t in known_tracers[n_kc:]], reverse=params["reverse"],
            length=length, jaxpr=ClosedJaxpr(known_j, k_loop.consts), num_consts=n_res2,
            num_carry=n_kcarry, linear=k_linear, unroll=params["unroll"])
    known_outs, stacked_vals = _split(known_outs, n_known_out)
    # The unknown scan: consts = const residuals + unknown consts; xs = unknown xs +
    # forwarded xs + stacked residuals.
    uj = unknown.jaxpr
    res_vars, uk_vars = _split(uj.invars, num_res)
    uk_consts, uk_carry, uk_xs = _split(uk_vars, sum(const_uk), sum(carry_uk))
    invars = ([res_vars[r] for r, _ in const_res] + uk_consts + uk_carry + uk_xs
              + [res_vars[r] for r, _ in xs_res] + [res_vars[r] for r, _ in stacked])
    unknown_j = ClosedJaxpr(Jaxpr([], invars, uj.outvars, uj.eqns), [])
    lift = lambda x: x if isinstance(x, pe.JaxprTracer) else pe.JaxprTracer(  # noqa: E731
        trace, value=x)
    uk_c, uk_i, uk_x = _split([t for t, u in zip(tracers, in_uk) if u],
                              sum(const_uk), sum(carry_uk))
    operands = ([lift(v) for _, v in const_res] + uk_c + uk_i + uk_x
                + [lift(v) for _, v in xs_res] + [lift(v) for v in stacked_vals])
    n_uc = len(const_res) + sum(const_uk)
    u_linear = (False,) * len(const_res) + tuple(
        lin for lin, u in zip(params["linear"], in_uk) if u) + (False,) * (
        len(xs_res) + len(stacked))
    unknown_outs = trace.stage(scan_p, operands, dict(
        params, jaxpr=unknown_j, num_consts=n_uc, num_carry=sum(carry_uk),
        linear=u_linear)) if uj.outvars else []
    known_it, unknown_it = iter(known_outs), iter(unknown_outs)
    return [next(unknown_it) if u else pe.JaxprTracer(trace, value=next(known_it))
            for u in out_uk]


# ---- transpose: a scan in the other direction over the body's transpose ----

def _scan_transpose(cts, *args, reverse, length, jaxpr, num_consts, num_carry, linear,
                    unroll):
    consts, init, xs = _split(args, num_consts, num_carry)
    const_lin = [ad.is_undefined_primal(c) for c in consts]
    xs_lin = [ad.is_undefined_primal(x) for x in xs]
    res_consts = [c for c, lin in zip(consts, const_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    ct_carry, ct_ys = _split([ad.instantiate_zeros(c) for c in cts], num_carry)
    const_avals, carry_avals, x_avals = _split(jaxpr.in_avals, num_consts, num_carry)
    lin_const_avals = [a.to_tangent_aval() for a, lin in zip(const_avals, const_lin) if lin]
    n_rc, n_lc = len(res_consts), len(lin_const_avals)
    # The cotangents are typed as they come, weak types included, as JAX's: a carry whose
    # body makes its cotangent strong is weak in and strong out (the carry types of
    # ``scan_p`` match up to weak types, and its outputs take the body's).
    ct_c_avals = [a.to_tangent_aval().update(weak_type=get_aval(c).weak_type)
                  for a, c in zip(carry_avals, ct_carry)]
    ct_y_avals = [a.to_tangent_aval().update(weak_type=get_aval(c).weak_type)
                  for a, c in zip(jaxpr.out_avals[num_carry:], ct_ys)]
    # Carries are linear (an init that is a known value, e.g. instantiated zeros, gets
    # no cotangent).
    body_t = ad.transpose_jaxpr(jaxpr, const_lin + [True] * num_carry + xs_lin,
                                ct_c_avals + ct_y_avals)

    def body(*args):
        rc, acc, ct_c, rx, ct_y = _split(args, n_rc, n_lc, num_carry, len(res_xs))
        outs = body_t(*rc, *rx, *ct_c, *ct_y)
        ct_consts, ct_carry_in, ct_x = _split(outs, n_lc, num_carry)
        return [add_any(a, b) for a, b in zip(acc, ct_consts)] + ct_carry_in + ct_x
    body_jaxpr = pe.trace_to_jaxpr(body, [a for a, lin in zip(const_avals, const_lin)
                                          if not lin] + lin_const_avals + ct_c_avals
                                   + [a for a, lin in zip(x_avals, xs_lin) if not lin]
                                   + ct_y_avals)
    acc_init = [ad.zeros_like_aval(a) for a in lin_const_avals]
    n_lx = sum(xs_lin)
    outs = _bind(*res_consts, *acc_init, *ct_carry, *res_xs, *ct_ys,
                 reverse=not reverse, length=length, jaxpr=body_jaxpr,
                 num_consts=n_rc, num_carry=n_lc + num_carry,
                 linear=(False,) * n_rc + (True,) * (n_lc + num_carry) + (False,) * len(
                     res_xs) + (True,) * len(ct_ys), unroll=unroll)
    ct_consts, ct_init, ct_xs = _split(outs, n_lc, num_carry)
    assert len(ct_xs) == n_lx
    ct_consts, ct_xs = iter(ct_consts), iter(ct_xs)
    return ([next(ct_consts) if lin else None for lin in const_lin]
            + [ct if ad.is_undefined_primal(x) else None for ct, x in zip(ct_init, init)]
            + [next(ct_xs) if lin else None for lin in xs_lin])


# ---- batching: batched xs move their batch axis to 1 (axis 0 is scanned) ----

def _scan_batch(vals, dims, *, reverse, length, jaxpr, num_consts, num_carry, linear,
                unroll):
    size = batching.axis_size_of(vals, dims)
    num_ys = len(jaxpr.out_avals) - num_carry
    batched = [d is not batching.not_mapped for d in dims]
    const_b, init_b, xs_b = _split(batched, num_consts, num_carry)
    carry_b = init_b
    for _ in range(num_carry + 1):
        in_dims = [0 if b else batching.not_mapped for b in const_b + carry_b + xs_b]
        b_jaxpr, out_b = batching.batch_jaxpr(jaxpr, size, in_dims, carry_b + [False] * num_ys)
        if out_b[:num_carry] == carry_b:
            break
        carry_b = [a or b for a, b in zip(carry_b, out_b[:num_carry])]
    consts, init, xs = _split(vals, num_consts, num_carry)
    c_dims, i_dims, x_dims = _split(dims, num_consts, num_carry)
    consts = [batching.moveaxis(c, d, 0) if b else c for c, d, b in zip(consts, c_dims, const_b)]
    init = [batching.matchaxis(size, d, 0, x) if b else x
            for x, d, b in zip(init, i_dims, carry_b)]
    xs = [batching.moveaxis(x, d, 1) if b else x for x, d, b in zip(xs, x_dims, xs_b)]
    outs = _bind(*consts, *init, *xs, reverse=reverse, length=length, jaxpr=b_jaxpr,
                       num_consts=num_consts, num_carry=num_carry, linear=linear,
                       unroll=unroll)
    nm = batching.not_mapped
    return outs, ([0 if b else nm for b in carry_b]
                  + [1 if b else nm for b in out_b[num_carry:]])


# ---- lowering: stablehlo.while over (i, consts, carry, xs, ys) ----

def _i32(x):
    return mlir.dim_value(x)   # a constant, or a symbolic length from the dimension vars


def _scan_lowering(ctx, *args, reverse, length, jaxpr, num_consts, num_carry, linear,
                   unroll):
    consts, init, xs = _split(args, num_consts, num_carry)
    x_avals = [physical_aval(a) for a in jaxpr.in_avals[num_consts + num_carry:]]
    ys_avals = [physical_aval(a) for a in ctx.avals_out[num_carry:]]
    ys_init = [mlir.full_like_aval(0, a) for a in ys_avals]
    if isinstance(length, int) and length == 0:   # a zero-length xs slice fails to verify
        return init + ys_init
    operands = [_i32(0)] + consts + init + xs + ys_init
    types = [v.type for v in operands]
    loop = hlo.WhileOp(types, operands)
    cond = loop.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond):
        pred = hlo.compare(cond.arguments[0], _i32(length),
                           hlo.ComparisonDirectionAttr.get("LT"),
                           compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))
        hlo.return_([pred])
    body = loop.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body):
        (i,), b_consts, carry, b_xs, ys = _split(list(body.arguments), 1, num_consts,
                                                 num_carry, len(xs))
        pos = hlo.subtract(_i32(length - 1), i) if reverse else i
        zero = _i32(0)
        x_slices = [hlo.reshape(mlir.aval_to_ir_type(a), hlo.DynamicSliceOp(
            x, [pos] + [zero] * a.ndim, mlir.dense_i64((1,) + a.shape)).result)
            for x, a in zip(b_xs, x_avals)]
        outs = mlir.jaxpr_subcomp(ctx.module_ctx, jaxpr.jaxpr, jaxpr.consts,
                                  b_consts + carry + x_slices)
        new_carry, y = _split(outs, num_carry)
        new_ys = [hlo.DynamicUpdateSliceOp(
            acc, hlo.reshape(mlir.aval_to_ir_type(a.update(shape=(1,) + a.shape[1:])), v),
            [pos] + [zero] * (a.ndim - 1)).result for acc, v, a in zip(ys, y, ys_avals)]
        hlo.return_([hlo.add(i, _i32(1))] + b_consts + new_carry + b_xs + new_ys)
    results = list(loop.results)
    _, _, carry_out, _, ys_out = _split(results, 1, num_consts, num_carry, len(xs))
    return carry_out + ys_out


scan_p = standard_primitive("scan", _scan_abstract_eval, multiple_results=True)
allow_extended(scan_p)  # typed keys: the body's values have physical types
dispatch.def_structural_impl(scan_p)
ad.primitive_jvps[scan_p] = _scan_jvp
ad.primitive_transposes[scan_p] = _scan_transpose
pe.partial_eval_rules[scan_p] = _scan_partial_eval
batching.primitive_batchers[scan_p] = _scan_batch
mlir.register_lowering(scan_p, _scan_lowering)
