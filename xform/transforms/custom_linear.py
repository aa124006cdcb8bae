"""``linear_call``: call a linear function with a user-defined transpose.

The wrapper (pytrees, the transpose's structure check with JAX's message); the primitive
``linear_call`` and its rules are in ``xform.interpreters.custom``.
"""
from xform.core import tree_util
from xform.core.trace import get_aval
from xform.interpreters import partial_eval as pe
from xform.interpreters.custom import LazyJaxpr, linear_call_p


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """Call ``fun(residual_args, linear_args)``, linear in ``linear_args``, whose
    transpose (used by reverse mode and ``linear_transpose``) is
    ``fun_transpose(residual_args, out_cotangent)`` rather than ``fun``'s own.

    Args:
      fun: ``(r, a) -> b``, linear in ``a``.
      fun_transpose: ``(r, b) -> a``, linear in ``b``: the transpose of ``fun``.
      residual_args: ``r``, a pytree ``fun`` need not be linear in (not differentiated).
      linear_args: ``a``, a pytree.

    Returns:
      ``fun(residual_args, linear_args)``.

    Raises:
      TypeError: ``fun_transpose``'s output structure differs from ``linear_args``'.

    >>> import xform
    >>> f = lambda x: xform.custom_derivatives.linear_call(
    ...     lambda _, x: x, lambda _, t: 7. * t, (), x)
    >>> xform.grad(f)(1.)
    Array(7., dtype=float32, weak_type=True)
    """
    res, res_tree = tree_util.tree_flatten(residual_args)
    lin, lin_tree = tree_util.tree_flatten(linear_args)
    in_tree = tree_util.tree_structure((residual_args, linear_args))
    avals = [get_aval(x) for x in res + lin]
    callee, consts, out_tree = pe.trace_to_subjaxpr(fun, in_tree, avals)
    res_avals = avals[:len(res)]

    def transpose_thunk():
        t_tree = tree_util.tree_structure(
            (tree_util.tree_unflatten(res_tree, res_avals),
             tree_util.tree_unflatten(out_tree, callee.out_avals)))
        t, t_consts, t_out_tree = pe.trace_to_subjaxpr(
            fun_transpose, t_tree, res_avals + list(callee.out_avals))
        if t_out_tree != lin_tree:
            raise TypeError("transpose output pytree structure must match that of linear "
                            f"inputs, got output structure {t_out_tree} and input structure "
                            f"{lin_tree}.")
        return t, t_consts

    name = getattr(fun_transpose, "__name__", "fun_transpose")
    outs = linear_call_p.bind(*consts, *res, *lin, callee=callee,
                              transpose_thunk=LazyJaxpr(transpose_thunk, name),
                              num_callee_consts=len(consts), num_res=len(res))
    return tree_util.tree_unflatten(out_tree, outs)
