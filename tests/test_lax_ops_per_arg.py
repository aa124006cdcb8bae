"""Per-argument derivatives over the op table.

``test_lax_ops`` differentiates all of an op's operands together, so a transpose rule
that is right only when *every* operand is linear (e.g. ``pad``'s cotangent of the
padding value alone) is never exercised there. Here every row with several
differentiable operands is differentiated with respect to each one alone, the others
closed over as constants: ``check_grads`` (order 1, reverse mode: the vjp against
finite differences and against the autodiff jvp, i.e. the dot-product identity) on each
shape of the row, in float64.
"""
import pytest

from xform import test_util
from optable import RandGen, _rng, all_records

RECORDS = [r for r in all_records() if r.grad_order]


def _cases():
    for r in RECORDS:
        nums = r.diff_argnums if r.diff_argnums is not None else tuple(range(r.nargs))
        if len(nums) < 2:   # one differentiable operand: test_lax_ops covers it alone
            continue
        for i in nums:
            yield pytest.param(r, i, id=f"{r.name}-arg{i}")


@pytest.mark.parametrize("r,argnum", list(_cases()))
def test_grad_wrt_each_argument_alone(x64, r, argnum):
    rng = _rng(r.name, "per-arg", argnum)
    for shapes in r.shapes:
        args = list(r.args_maker(RandGen(rng), shapes, r.grad_dtype))

        def f(x, args=args):
            full = list(args)
            full[argnum] = x
            return r.fn_xform(*full)
        try:
            test_util.check_grads(f, (args[argnum],), order=1, modes=("rev",),
                                  **r.grad_kw)
        except AssertionError as e:
            raise AssertionError(f"{r.name} d/d(arg {argnum}) shapes {shapes}: {e}") from None
