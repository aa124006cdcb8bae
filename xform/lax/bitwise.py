"""Logical and bitwise primitives on booleans and (signed or unsigned) integers:
not/and/or/xor, shifts, population count, count-leading-zeros and multiply-high.

None is differentiable: their outputs are integers or booleans, whose tangents are
the symbolic zero of dtype float0.
"""
import numpy as np

from xform.interpreters import ad, mlir
from xform.lax._prim import integer, naryop, unop

hlo = mlir.hlo

_bool_or_int = integer | {np.dtype(np.bool_)}


def _binary(name, allowed, op):
    prim = naryop(name, allowed)
    ad.defnondiff(prim)
    mlir.register_lowering(prim, mlir.elementwise(op))
    return prim


# ---- logical / bitwise ----

def bitwise_not(x):
    """Elementwise NOT: logical for booleans, bitwise (``~x``) for integers.

    >>> import xform.lax as lax
    >>> print(lax.bitwise_not(True), lax.bitwise_not(5))
    False -6
    """
    return not_p.bind(x)


not_p = unop("not", _bool_or_int)
ad.defnondiff(not_p)
mlir.register_lowering(not_p, mlir.elementwise(hlo.not_))


def bitwise_and(x, y):
    """Elementwise AND: logical for booleans, bitwise for integers.

    Args:
      x, y: boolean or integer arrays of the same dtype
        (rank-0 operands and size-1 axes broadcast).

    >>> import xform.lax as lax
    >>> print(lax.bitwise_and(12, 10))
    8
    """
    return and_p.bind(x, y)


and_p = _binary("and", _bool_or_int, hlo.and_)


def bitwise_or(x, y):
    """Elementwise OR: logical for booleans, bitwise for integers.

    >>> import xform.lax as lax
    >>> print(lax.bitwise_or(12, 10))
    14
    """
    return or_p.bind(x, y)


or_p = _binary("or", _bool_or_int, hlo.or_)


def bitwise_xor(x, y):
    """Elementwise exclusive OR: logical for booleans, bitwise for integers.

    >>> import xform.lax as lax
    >>> print(lax.bitwise_xor(12, 10))
    6
    """
    return xor_p.bind(x, y)


xor_p = _binary("xor", _bool_or_int, hlo.xor)


# ---- shifts ----
# XLA defines shifts by amounts outside [0, bit width): shift_left and
# shift_right_logical give 0, shift_right_arithmetic fills with the sign bit.

def shift_left(x, y):
    """Elementwise left shift ``x << y`` (0 when ``y`` is out of range).

    Args:
      x, y: integer arrays of the same dtype
        (rank-0 operands and size-1 axes broadcast).

    >>> import xform.lax as lax
    >>> print(lax.shift_left(3, 2))
    12
    """
    return shift_left_p.bind(x, y)


shift_left_p = _binary("shift_left", integer, hlo.shift_left)


def shift_right_logical(x, y):
    """Elementwise logical right shift: zeros shift in (0 when ``y`` is out of range).

    >>> import xform.lax as lax
    >>> print(lax.shift_right_logical(-8, 28))
    15
    """
    return shift_right_logical_p.bind(x, y)


shift_right_logical_p = _binary("shift_right_logical", integer, hlo.shift_right_logical)


def shift_right_arithmetic(x, y):
    """Elementwise arithmetic right shift: copies of the sign bit shift in.

    >>> import xform.lax as lax
    >>> print(lax.shift_right_arithmetic(-8, 1))
    -4
    """
    return shift_right_arithmetic_p.bind(x, y)


shift_right_arithmetic_p = _binary("shift_right_arithmetic", integer,
                                   hlo.shift_right_arithmetic)


# ---- bit counting ----

def population_count(x):
    """Elementwise number of set bits (of the two's complement bits for negatives).

    >>> import xform.lax as lax
    >>> print(lax.population_count(7), lax.population_count(-1))
    3 32
    """
    return population_count_p.bind(x)


population_count_p = unop("population_count", integer)
ad.defnondiff(population_count_p)
mlir.register_lowering(population_count_p, mlir.elementwise(hlo.popcnt))


def clz(x):
    """Elementwise count of leading zero bits.

    >>> import xform.lax as lax
    >>> print(lax.clz(1), lax.clz(0))
    31 32
    """
    return clz_p.bind(x)


clz_p = unop("clz", integer)
ad.defnondiff(clz_p)
mlir.register_lowering(clz_p, mlir.elementwise(hlo.count_leading_zeros))


# ---- multiply-high ----

def mulhi(x, y):
    """Elementwise multiply-high: the upper N bits of the 2N-bit product of N-bit
    integers (signed or unsigned, as the dtype).

    >>> import numpy as np, xform.lax as lax
    >>> print(lax.mulhi(np.uint32(2**31), np.uint32(6)))
    3
    """
    return mulhi_p.bind(x, y)


mulhi_p = _binary("mulhi", integer, mlir.chlo.mulhi)
