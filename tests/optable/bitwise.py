"""Op-table rows of the logical/bitwise primitives (xform/lax/bitwise.py) on bool,
int32 and uint32 (negative draws wrap around: high bits set).

Values and vmap only: integer and boolean outputs have float0 tangents, which
tests/test_lax_special.py checks against jax.
"""
import numpy as np

from optable import BOOL, I32, U32, binary, domains, rec

LOGICAL, INTS = (BOOL, I32, U32), (I32, U32)


def _shift_args(g, shapes, dtype):
    """Shift amounts in [0, 40): some at or past the bit width (XLA defines those)."""
    return [g.real(shapes[0], dtype), np.asarray(g.which(shapes[1], 40)).astype(dtype)]


def _unary(name, dtypes, **kw):
    return rec(name, 1, dtypes, [((3, 4),), ((),)], domains("real"), None, **kw)


def _binary(name, dtypes, make=domains("real", "real"), **kw):
    return binary(name, dtypes, make, grad_order=None,
                  shapes=[((3, 4), (3, 4)), ((), (3, 4))], **kw)


RECORDS = [
    _unary("bitwise_not", LOGICAL),
    _binary("bitwise_and", LOGICAL),
    _binary("bitwise_or", LOGICAL),
    _binary("bitwise_xor", LOGICAL),
    _binary("shift_left", INTS, _shift_args),
    _binary("shift_right_logical", INTS, _shift_args),
    _binary("shift_right_arithmetic", INTS, _shift_args),
    _unary("population_count", INTS),
    _unary("clz", INTS),
]
