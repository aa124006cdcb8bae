"""More of JAX's differentiation API: ``jacobian`` (``jacrev``), ``linear_transpose``
(``backward_pass`` on the traced jaxpr), ``custom_gradient`` (a ``custom_vjp``) and
``fwd_and_bwd`` (``vjp``)."""
import numpy as np

from xform.core import dtypes, tree_util
from xform.core.api_util import flatten_fun
from xform.core.trace import get_aval
from xform.core.traceback_util import api_boundary
from xform.interpreters import partial_eval as pe
from xform.interpreters.ad import Zero, backward_pass, instantiate_zeros
from xform.transforms.ad import _check_argnums, jacrev, vjp
from xform.transforms.custom_derivatives import custom_vjp
from xform.transforms.jit import jit
from xform.core.avals import ShapedArray

jacobian = jacrev


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun``, traced at the shapes and dtypes of
    ``primals`` (their values are not used).

    As in JAX, ``fun`` is traced to a jaxpr with every input unknown and that jaxpr is
    transposed equation by equation when the result is called: nothing is evaluated
    forward at a made-up point, so a ``fun`` that is not linear raises rather than
    giving the transpose of some derivative of it.

    Args:
      fun: a function linear in its arguments.
      *primals: example arguments (arrays or ``ShapeDtypeStruct``s) giving the avals.
      reduce_axes: deprecated in JAX; must be empty.

    Returns:
      ``transpose_fun(cotangent) -> tuple`` of cotangents, one per primal, with the
      primals' dtypes (a ``Partial``, so it may be passed to a jitted function).

    Raises:
      TypeError: mixing float and integer inputs/outputs, or (when called) a cotangent
        whose structure, shape or dtype does not match ``fun``'s output.
      NotImplementedError: (when called) ``fun`` applies a primitive with no transpose
        rule to its inputs (``sin``, ``exp``...): it is not linear.
      AssertionError: (when called) ``fun`` multiplies two values that depend on its
        inputs (``x * x``), divides by one or selects on one: it is not linear.

    >>> import xform, xform.numpy as jnp
    >>> t = xform.linear_transpose(lambda x: 2.0 * x, 1.0)
    >>> t(3.0)
    (Array(6., dtype=float32, weak_type=True),)
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to transpose is deprecated")
    in_flat, in_tree = tree_util.tree_flatten(primals)
    in_avals = [get_aval(x) if not hasattr(x, "shape") or hasattr(x, "aval")
                else _struct_aval(x) for x in in_flat]
    flat_fun, store = flatten_fun(fun, in_tree)
    closed = pe.trace_to_jaxpr(flat_fun, in_avals)
    out_avals, out_tree = closed.out_avals, store.out_tree
    in_dtypes = [a.dtype for a in in_avals]
    out_dtypes = [a.dtype for a in out_avals]
    if not (all(dtypes.is_inexact(d) for d in in_dtypes + out_dtypes)
            or all(dtypes.is_integer(d) for d in in_dtypes + out_dtypes)):
        raise TypeError("linear_transpose only supports [float or complex] -> "
                        "[float or complex], and integer -> integer functions, but got "
                        f"{in_dtypes} -> {out_dtypes}.")

    @api_boundary
    def transposed_fun(consts, out_cotangent):
        ct_flat, ct_tree = tree_util.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError("cotangent tree does not match function output, "
                            f"expected {out_tree} but got {ct_tree}")
        got = [get_aval(c) for c in ct_flat]
        if [(a.shape, a.dtype) for a in got] != [(a.shape, a.dtype) for a in out_avals]:
            raise TypeError("cotangent type does not match function output, expected "
                            f"{tuple(out_avals)} but got {ct_flat}")
        cts = backward_pass(closed.jaxpr, consts, in_avals, ct_flat)
        # an integer input the output does not use: JAX's float0 zeros (its tangent type)
        cts = [np.zeros(a.shape, dtypes.float0) if type(c) is Zero and not
               dtypes.is_inexact(a.dtype) else instantiate_zeros(c)
               for c, a in zip(cts, in_avals)]
        return tree_util.tree_unflatten(in_tree, cts)
    return tree_util.Partial(transposed_fun, list(closed.consts))


def _struct_aval(x):
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype),
                       weak_type=bool(getattr(x, "weak_type", False)))


class _Residuals:
    """What ``custom_gradient``'s forward pass saves: the user's gradient rule traced to a
    jaxpr (static) and the values it closes over (the pytree's leaves)."""

    def __init__(self, jaxpr, consts, in_tree, out_tree):
        self.jaxpr, self.consts, self.in_tree, self.out_tree = jaxpr, consts, in_tree, out_tree


tree_util.register_pytree_node(
    _Residuals, lambda r: (r.consts, (r.jaxpr, r.in_tree, r.out_tree)),
    lambda aux, consts: _Residuals(aux[0], list(consts), aux[1], aux[2]))


def custom_gradient(fun):
    """Define a function's gradient together with it: ``fun(*args)`` returns
    ``(out, vjp_fn)`` where ``vjp_fn(ct)`` returns the cotangents of the arguments (a
    tuple, or one value for a single argument).

    Args:
      fun: ``(*args) -> (out, vjp_fn)``.

    Returns:
      A function computing ``out`` whose reverse-mode derivative is ``vjp_fn``.

    >>> import xform, xform.numpy as jnp
    >>> @xform.custom_gradient
    ... def f(x):
    ...     return x ** 2, lambda g: (g * 10.0,)
    >>> xform.grad(f)(3.0)
    Array(10., dtype=float32, weak_type=True)
    """
    @custom_vjp
    def wrapped(*args):
        ans, _ = fun(*args)
        return ans

    def fwd(*args):
        ans, rule = fun(*args)
        ans_flat, out_tree = tree_util.tree_flatten((ans,))
        avals = [get_aval(x).to_tangent_aval() for x in ans_flat]
        rule_tree = tree_util.tree_structure((tuple(ans_flat),))
        in_tree = {}

        def flat_rule(cts):
            out = rule(*tree_util.tree_unflatten(out_tree, list(cts)))
            out_flat, in_tree["tree"] = tree_util.tree_flatten(out)
            return out_flat
        closed, consts, _ = pe.trace_to_subjaxpr(
            lambda cts: flat_rule(cts), rule_tree, avals)
        return ans, _Residuals(closed, consts, in_tree["tree"], out_tree)

    def bwd(res, cts):
        cts_flat, cts_tree = tree_util.tree_flatten((cts,))
        if cts_tree != res.out_tree:
            raise TypeError(f"custom_gradient: cotangent structure {cts_tree} does not match "
                            f"the output structure {res.out_tree}")
        out = res.jaxpr(*res.consts, *cts_flat)
        out = tree_util.tree_unflatten(res.in_tree, out)
        return out if isinstance(out, tuple) else (out,)

    wrapped.defvjp(fwd, bwd)
    return wrapped


def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """The forward and backward passes of ``fun`` as two functions: ``fwd(*args)`` gives
    ``(out, residuals)`` (``(out, residuals, aux)`` with ``has_aux``) like ``vjp``, and
    ``bwd(residuals, ct)`` the cotangents of the arguments in ``argnums`` (one value for
    an int). With ``jitted`` both are compiled once and reused.

    >>> import xform, xform.numpy as jnp
    >>> fwd, bwd = xform.fwd_and_bwd(lambda x, w: x * w, argnums=(0, 1), jitted=False)
    >>> y, res = fwd(2.0, 3.0)
    >>> bwd(res, 1.0)
    (Array(3., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))
    """
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")

    def fwd(*args):
        nums = _check_argnums(argnums, len(args), "fwd_and_bwd")

        def f_dyn(*dyn):
            full = list(args)
            for i, d in zip(nums, dyn):
                full[i] = d
            return fun(*full)
        return vjp(f_dyn, *[args[i] for i in nums], has_aux=has_aux)

    def bwd(f_vjp, outgrad):
        g = f_vjp(outgrad)
        return g[0] if isinstance(argnums, int) else g

    if jitted:
        fwd, bwd = jit(fwd), jit(bwd)
    return fwd, bwd
