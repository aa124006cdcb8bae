"""Differentiation API: ``jvp``, ``vjp``, ``linearize``, ``grad``, ``value_and_grad``,
``jacfwd``, ``jacrev``, ``hessian``. Wrappers only: pytrees, argnums, has_aux and
argument checks; the mechanism is in ``xform.interpreters.ad``."""
import functools

import numpy as np

from xform.core import dtypes, tree_util
from xform.core.api_util import flatten_fun
from xform.core.array import Array
from xform.core.jaxpr import eval_jaxpr
from xform.core.trace import Tracer, _context, get_aval
from xform.core.traceback_util import api_boundary
from xform.interpreters import ad
from xform.core.transfer import device_put_value
from xform.lax import complex as lax_complex, elementwise as ew, shapes
from xform.interpreters.partial_eval import JaxprTracer
from xform.transforms.vmap import vmap


def _as_array(x):
    if isinstance(x, (Array, Tracer)):
        return x
    try:
        return device_put_value(x)
    except TypeError:
        raise TypeError(f"Argument {x!r} of type {type(x).__name__} is not a valid array "
                        "type for differentiation.") from None


def _strip_aux_tracers(aux):
    """Aux outputs leave the transformation with their primal values.

    Only the finished (inner) traces' tracers are stripped; tracers of enclosing
    transformations (``jvp(grad(f, has_aux=True))``) stay, so those see through aux.
    """

    def strip(x):
        while isinstance(x, Tracer) and not x._trace._valid:
            if isinstance(x, ad.JVPTracer):
                x = x.primal
            elif isinstance(x, JaxprTracer) and x.jvar is None:
                x = x.value
            else:
                break
        return x
    return tree_util.tree_map(strip, aux)


def _check_tangent(p, t):
    pa, ta = get_aval(p), get_aval(t)
    expected = pa.to_tangent_aval()
    if ta.shape != pa.shape:
        raise ValueError(f"jvp called with different primal and tangent shapes: got primal "
                         f"shape {pa.shape} and tangent shape {ta.shape}")
    if ta.dtype != expected.dtype:
        raise TypeError(f"primal and tangent arguments to jvp do not match; dtypes must be "
                        f"equal, or in case of int/bool primal dtype the tangent dtype must "
                        f"be float0. Got primal dtype {pa.dtype.name} and so expected "
                        f"tangent dtype {expected.dtype.name}, but got tangent dtype "
                        f"{ta.dtype.name} instead.")


@api_boundary
def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode derivative: ``(fun(*primals), J(primals) @ tangents)``.

    >>> import xform, xform.numpy as jnp
    >>> xform.jvp(jnp.sin, (0.0,), (2.0,))
    (Array(0., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    p_flat, p_tree = tree_util.tree_flatten(tuple(primals))
    t_flat, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents "
                        f"have tree structure {t_tree}.")
    p_flat = [_as_array(p) for p in p_flat]
    tangents_in = []
    for p, t in zip(p_flat, t_flat):
        if (isinstance(t, np.ndarray) and t.dtype == dtypes.float0
                and get_aval(p).to_tangent_aval().dtype == dtypes.float0):
            tangents_in.append(ad.Zero(get_aval(p).to_tangent_aval()))
            continue   # (a float0 tangent for a float primal fails _check_tangent)
        t = _as_array(t)
        _check_tangent(p, t)
        tangents_in.append(t)
    flat_fun, store = flatten_fun(fun, p_tree, has_aux)
    outs, touts = ad.jvp_flat(flat_fun, p_flat, tangents_in)
    touts = [ad.instantiate_zeros(t) for t in touts]
    out_tree = store.out_tree
    result = (tree_util.tree_unflatten(out_tree, outs), tree_util.tree_unflatten(out_tree, touts))
    if has_aux:
        return result + (_strip_aux_tracers(store.aux),)
    return result


@api_boundary
def linearize(fun, *primals, has_aux=False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the JVP linearly
    from saved residuals (no re-run of ``fun``)."""
    p_flat, p_tree = tree_util.tree_flatten(primals)
    p_flat = [_as_array(p) for p in p_flat]
    flat_fun, store = flatten_fun(fun, p_tree, has_aux)
    outs, linear, residuals = ad.linearize_flat(flat_fun, p_flat)
    out_tree = store.out_tree

    def f_jvp(*tangents):
        t_flat, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != p_tree:
            raise TypeError(f"linearized function called on tangents with tree structure "
                            f"{t_tree}, expected {p_tree}")
        for p, t in zip(p_flat, t_flat):
            pa, ta = get_aval(p), get_aval(_as_array(t))
            want = pa.to_tangent_aval()
            if (ta.shape, ta.dtype) != (want.shape, want.dtype):
                raise ValueError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values: Got tangent aval {ta.str_short(False)} for "
                    f"primal aval {pa.str_short(False)} but expected "
                    f"{want.str_short(False)}.")
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(linear, residuals, *t_flat))

    result = (tree_util.tree_unflatten(out_tree, outs), f_jvp)
    return result + (_strip_aux_tracers(store.aux),) if has_aux else result


@api_boundary
def vjp(fun, *primals, has_aux=False, reduce_axes=()):
    """Reverse-mode: ``(fun(*primals), vjp_fun)``; ``vjp_fun(ct)`` returns a tuple of
    cotangents, one per primal.

    >>> import xform, xform.numpy as jnp
    >>> y, f_vjp = xform.vjp(jnp.sin, 0.0)
    >>> f_vjp(1.0)
    (Array(1., dtype=float32, weak_type=True),)
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    p_flat, p_tree = tree_util.tree_flatten(primals)
    p_flat = [_as_array(p) for p in p_flat]
    flat_fun, store = flatten_fun(fun, p_tree, has_aux)
    outs, linear, residuals = ad.linearize_flat(flat_fun, p_flat)
    out_tree = store.out_tree
    pullback = _VjpPullback(linear, [get_aval(p).to_tangent_aval() for p in p_flat], p_tree,
                            out_tree, [get_aval(o) for o in outs])
    # A Partial: the residuals are its leaves, so the pullback can cross jit boundaries
    result = (tree_util.tree_unflatten(out_tree, outs),
              tree_util.Partial(pullback, list(residuals)))
    return result + (_strip_aux_tracers(store.aux),) if has_aux else result


class _VjpPullback:
    """The static half of vjp's pullback: the linear jaxpr and the trees around it."""
    __slots__ = ("linear", "in_avals", "in_tree", "out_tree", "out_avals")

    def __init__(self, linear, in_avals, in_tree, out_tree, out_avals):
        self.linear, self.in_avals, self.in_tree = linear, in_avals, in_tree
        self.out_tree, self.out_avals = out_tree, out_avals

    def __call__(self, residuals, ct):
        ct_flat, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != self.out_tree:
            raise ValueError(f"unexpected tree structure of the argument to a VJP function "
                             f"(returned by vjp): got {ct_tree}, but the differentiated "
                             f"function's output has structure {self.out_tree}.")
        cts = []
        for c, a in zip(ct_flat, self.out_avals):
            if isinstance(c, np.ndarray) and c.dtype == dtypes.float0:
                cts.append(ad.Zero(a.to_tangent_aval()))
                continue
            c = _as_array(c)
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"Shape of cotangent input to vjp pullback function "
                                 f"{ca.shape} must be the same as the shape of corresponding "
                                 f"primal input {a.shape}.")
            if ca.vma != a.vma and a.dtype == ca.dtype:  # inside shard_map(check_vma)
                raise _ct_type_error(ca, a, True)
            want = a.to_tangent_aval().dtype   # any dtype stands for a float0 cotangent, as JAX's
            if ca.dtype != want and want != dtypes.float0:
                raise _ct_type_error(ca, a, False)
            if ca.memory_space is not a.memory_space:  # (a cotangent lives where its primal)
                raise _ct_type_error(ca, a, False)
            cts.append(c)
        cts_in = ad.backward_pass(self.linear, residuals, self.in_avals, cts)
        return tree_util.tree_unflatten(
            self.in_tree, [_as_input_ct(c, a) for c, a in zip(cts_in, self.in_avals)])


def _ct_type_error(ca, a, short):
    return ValueError(
        "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
        f"{ca.str_short(short)}, but expected {a.to_tangent_aval().str_short(short)} because "
        f"the corresponding output of the differentiated function had JAX type "
        f"{a.str_short(short)}")


def _as_input_ct(c, aval):
    """A pullback's cotangent for an input of tangent type ``aval``: a symbolic zero
    as zeros. (A weak input's cotangent is weak where JAX's is: xform.numpy records
    JAX's weak-to-strong casts, whose transposes make it so.)"""
    if type(c) is ad.Zero:
        return ad.zeros_like_aval(aval)
    return c


def _check_callable(fun):
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")


def _argnums(argnums):
    """``argnums`` with NumPy integers as Python ints (JAX takes ``np.int64(1)``)."""
    if isinstance(argnums, np.integer):
        return int(argnums)
    if isinstance(argnums, (tuple, list)):
        return type(argnums)(int(i) if isinstance(i, np.integer) else i for i in argnums)
    return argnums


def _check_argnums(argnums, nargs, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError(f"{name} requires at least one argnum, got argnums={argnums!r}")
    for i in nums:
        if name in ("jacfwd", "jacrev") and isinstance(i, int) and not -nargs <= i < nargs:
            raise ValueError("Positional argument indices, e.g. for `static_argnums`, must "
                             "have value greater than or equal to -len(args) and less than "
                             f"len(args), but got value {i} for len(args) == {nargs}.")
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1 if isinstance(i, int) else '?'} positional "
                            f"arguments to be passed by the caller, but got only {nargs} "
                            "positional arguments.")
    out = tuple(i % nargs for i in nums)
    if len(set(out)) != len(out):   # (JAX fails too, with a TypeError from deep inside)
        raise TypeError(f"{name}: argnums={argnums} names an argument more than once.")
    return out


def _check_input_dtype(x, allow_int, holomorphic, name):
    dt = get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{name} with holomorphic=True requires inputs with complex "
                            f"dtype, but got {dt.name}.")
    if dtypes.is_inexact(dt):   # (complex inputs: as JAX, allowed)
        return
    if not (dtypes.is_extended(dt) or dtypes.issubdtype(dt, np.integer)
            or dtypes.issubdtype(dt, np.bool_)):   # float0: not a number
        raise TypeError(f"{name} requires numerical-valued inputs (input dtype that is a "
                        f"sub-dtype of np.bool_ or np.number), but got {dt.name}.")
    if not allow_int:
        raise TypeError(
            f"{name} requires real- or complex-valued inputs (input dtype that is a "
            f"sub-dtype of np.inexact), but got {dt.name}. If you want to use Boolean- or "
            "integer-valued inputs, use vjp or set allow_int to True.")


def _partial_args(fun, args, kwargs, nums):
    def f(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fun(*full, **kwargs)
    return f


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """``fun``'s value and its gradient with respect to positional ``argnums``.

    Args:
      fun: function returning a scalar (or ``(scalar, aux)`` with ``has_aux``).
      argnums: int or tuple of ints: which positional arguments to differentiate.
      has_aux: ``fun`` returns ``(value, aux)``; aux is returned undifferentiated.
      holomorphic: complex inputs and outputs, holomorphic ``fun``.
      allow_int: allow integer inputs (their gradient is float0 zeros).

    Returns:
      A function returning ``(value, grad)`` (``((value, aux), grad)`` with has_aux).

    Raises:
      TypeError: for non-scalar or non-float outputs, or integer inputs.

    >>> import xform, xform.numpy as jnp
    >>> xform.value_and_grad(lambda x: jnp.sum(x ** 2))(jnp.arange(3.0))
    (Array(5., dtype=float32), Array([0., 2., 4.], dtype=float32))
    """
    name = "grad"
    _check_callable(fun)
    argnums = _argnums(argnums)
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to grad is deprecated")

    @api_boundary
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), name)
        dyn = tuple(args[i] for i in nums)
        for leaf in tree_util.tree_leaves(dyn):
            _check_input_dtype(_as_array(leaf), allow_int, holomorphic, name)
        f = _partial_args(fun, args, kwargs, nums)
        if has_aux:
            out, f_vjp, aux = vjp(f, *dyn, has_aux=True)
        else:
            out, f_vjp = vjp(f, *dyn)
        try:   # a Python or NumPy scalar is a scalar output too (its gradient is 0)
            out_aval = get_aval(out)
        except TypeError:
            raise TypeError(f"Gradient only defined for scalar-output functions. Output "
                            f"was {out}.") from None
        if out_aval.shape != ():
            raise TypeError(f"Gradient only defined for scalar-output functions. Output "
                            f"had shape: {out_aval.shape}.")
        _check_output_dtype_revderiv(name, out_aval.dtype, holomorphic)
        g = f_vjp(_one_vjp(_as_array(out)))
        g = g[0] if isinstance(argnums, int) else g
        return ((out, aux), g) if has_aux else (out, g)
    return value_and_grad_f


def _one_vjp(out):
    """grad's seed: 1, weakly typed and varying like ``out``, in device memory whatever
    ``out``'s (JAX's ``_one_vjp`` takes the type's sharding, which has no memory kind:
    a host-memory output then meets JAX's cotangent type error)."""
    kind = out.sharding.memory_kind if type(out) is Array and out._committed else None
    if kind in (None, "device"):
        return shapes.full_like(out, 1)
    return shapes.full_like(out, 1, sharding=out.sharding.with_memory_kind("device"))


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """Gradient of scalar-valued ``fun`` with respect to positional ``argnums``.

    Same arguments as :func:`value_and_grad`; returns only the gradient (and aux).

    >>> import xform, xform.numpy as jnp
    >>> xform.grad(jnp.tanh)(0.0)
    Array(1., dtype=float32, weak_type=True)
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @api_boundary
    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]
    return grad_f


# ---- Jacobians ----

def _std_basis(flat_avals, dtype):
    """Rows of the identity, split per input leaf: leaf i gets shape (N,) + shape_i and
    its own dtype (JAX's ``_possible_downcast``), so mixed-precision leaves can be seeded."""
    sizes = [a.size for a in flat_avals]
    n = sum(sizes)
    eye = ew.convert_element_type(
        ew.eq(shapes.broadcasted_iota(np.int32, (n, n), 0),
              shapes.broadcasted_iota(np.int32, (n, n), 1)), dtype)
    out, start = [], 0
    for a, s in zip(flat_avals, sizes):
        block = shapes.slice(eye, (0, start), (n, start + s))   # (in the leaf's dtype)
        out.append(ew.convert_element_type(shapes.reshape(block, (n,) + a.shape), a.dtype))
        start += s
    return out


def _split(x, axis, avals, shape_of, example=None):
    """Split ``x`` along ``axis`` into pieces of each aval's size, piece i reshaped to
    ``shape_of(avals[i])`` and cast to the dtype and weak type of ``example`` (or of
    ``avals[i]``), as JAX's ``_possible_downcast``: a Jacobian block has its output's
    dtype (jacfwd) or its input's (jacrev); a float0 block (an int output) becomes
    integer zeros, a complex block of a real example its real part."""
    out, start = [], 0
    xa = get_aval(x)
    for a in avals:
        lo, hi = [0] * xa.ndim, list(xa.shape)
        lo[axis], hi[axis] = start, start + a.size
        piece = shapes.reshape(shapes.slice(x, lo, hi), shape_of(a))
        ex = a if example is None else example
        if dtypes.is_complex(xa.dtype) and not dtypes.is_complex(ex.dtype):
            piece = lax_complex.real(piece)
        out.append(ew.convert_element_type(piece, ex.dtype, ex.weak_type))
        start += a.size
    return out


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by forward mode (vmap of jvp over the input basis).

    Args:
      fun: the function to differentiate.
      argnums: int or tuple of ints: which positional arguments (floating point).
      has_aux: ``fun`` returns ``(out, aux)``; aux is returned undifferentiated.
      holomorphic: complex inputs and outputs, holomorphic ``fun``.

    Returns:
      A function returning the Jacobian: per output leaf, per input leaf, an array of
      shape ``out.shape + in.shape`` with the *output's* dtype. An integer or bool
      output's block is zeros of that dtype (its float0 tangent, cast), as in JAX.

    Raises:
      TypeError: for non-floating inputs (complex ones need ``holomorphic``).

    >>> import xform, xform.numpy as jnp
    >>> xform.jacfwd(lambda x: (x * 2.0, jnp.round(x).astype(jnp.int32)))(jnp.ones(2))[1]
    Array([[0, 0],
           [0, 0]], dtype=int32)
    """
    _check_callable(fun)
    argnums = _argnums(argnums)

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), "jacfwd")
        dyn = tuple(_as_tree(args[i]) for i in nums)
        x_flat, x_tree = tree_util.tree_flatten(dyn)
        for x in x_flat:
            _check_input_dtype(x, False, holomorphic, "jacfwd")
            dt = get_aval(x).dtype
            if not holomorphic and not dtypes.is_floating(dt):
                raise TypeError(
                    "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                    f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
                    "holomorphic=True. For differentiation of non-holomorphic functions "
                    "involving complex inputs or integer inputs, use xform.jvp directly.")
        f = _partial_args(fun, args, kwargs, nums)
        x_avals = [get_aval(x) for x in x_flat]
        dtype = dtypes.result_type(*[a.dtype for a in x_avals])
        basis = _std_basis(x_avals, dtype)

        def pushfwd(*basis_flat):
            tangents = tree_util.tree_unflatten(x_tree, list(basis_flat))
            if has_aux:
                y, ty, aux = jvp(f, dyn, tangents, has_aux=True)
                return y, ty, aux
            y, ty = jvp(f, dyn, tangents)
            return y, ty

        outs = vmap(pushfwd, out_axes=(None, -1, None) if has_aux else (None, -1))(*basis)
        y, jac = outs[0], outs[1]
        y_flat, y_tree = tree_util.tree_flatten(y)
        for yl in y_flat:
            if holomorphic and not dtypes.is_complex(get_aval(yl).dtype):
                raise TypeError("jacfwd with holomorphic=True requires outputs with complex "
                                f"dtype, but got {get_aval(yl).dtype.name}.")
        jac_flat = tree_util.tree_leaves(jac)
        rows = []
        for yl, jl in zip(y_flat, jac_flat, strict=True):
            ya = get_aval(yl)
            parts = _split(jl, -1, x_avals, lambda a: ya.shape + a.shape, example=ya)
            per_arg = tree_util.tree_unflatten(x_tree, parts)
            rows.append(per_arg[0] if isinstance(argnums, int) else per_arg)
        result = tree_util.tree_unflatten(y_tree, rows)
        return (result, outs[2]) if has_aux else result
    return jacfun


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """Jacobian by reverse mode (vmap of the vjp over the output basis)."""
    _check_callable(fun)
    argnums = _argnums(argnums)

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), "jacrev")
        dyn = tuple(_as_tree(args[i]) for i in nums)
        for x in tree_util.tree_leaves(dyn):
            _check_input_dtype(x, allow_int, holomorphic, "jacrev")
        f = _partial_args(fun, args, kwargs, nums)
        if has_aux:
            y, pullback, aux = vjp(f, *dyn, has_aux=True)
        else:
            y, pullback = vjp(f, *dyn)
        y_flat, y_tree = tree_util.tree_flatten(y)
        y_avals = [get_aval(v) for v in y_flat]
        for a in y_avals:
            _check_output_dtype_revderiv("jacrev", a.dtype, holomorphic)
        dtype = dtypes.result_type(*[a.dtype for a in y_avals])
        basis = _std_basis(y_avals, dtype)

        def pull(*b):
            vma = _context.vma  # (in shard_map: each basis row varying like its output)
            b = b if vma is None else [vma.like(r, y) for r, y in zip(b, y_flat)]
            return pullback(tree_util.tree_unflatten(y_tree, list(b)))
        jac = vmap(pull)(*basis)   # tuple over args; leaves (M,) + x.shape
        x_leaves, x_tree = tree_util.tree_flatten(jac)
        x_avals = [get_aval(x) for x in tree_util.tree_leaves(dyn)]
        per_x = [_split(j, 0, y_avals, lambda a, tail=get_aval(j).shape[1:]: a.shape + tail,
                        example=xa)
                 for j, xa in zip(x_leaves, x_avals, strict=True)]
        rows = []
        for i in range(len(y_flat)):
            per_arg = tree_util.tree_unflatten(x_tree, [p[i] for p in per_x])
            rows.append(per_arg[0] if isinstance(argnums, int) else per_arg)
        result = tree_util.tree_unflatten(y_tree, rows)
        return (result, aux) if has_aux else result
    return jacfun


def _check_output_dtype_revderiv(name, dt, holomorphic):
    """JAX's checks (and texts) on the output of grad/jacrev."""
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex "
                            f"dtype, but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError(
            f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex outputs, use jax.vjp directly.")
    elif not dtypes.is_floating(dt):
        raise TypeError(
            f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dt.name}. For differentiation of functions with "
            "integer outputs, use jax.vjp directly.")


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """Hessian as ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


def _as_tree(x):
    return tree_util.tree_map(_as_array, x)
