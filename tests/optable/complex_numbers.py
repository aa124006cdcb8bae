"""Op-table rows of complex numbers: complex/real/imag/conj (xform/lax/complex.py) and
the elementwise primitives that accept complex64 operands.

Values and vmap only (check_grads works on real arrays): tests/test_complex.py
checks jvp, vjp and grad of complex functions against jax.
"""
from optable import C64, F32, binary, domains, rec

SHAPES1 = [((3, 4),)]                       # one shape each: real-valued rows cover
SHAPES2 = [((2, 3), ())]                     # the other shapes; this one broadcasts


def _unary(name, dtypes=(C64,), domain="real", **kw):
    return rec(name, 1, dtypes, SHAPES1, domains(domain), None, **kw)


def _binary(name, make=domains("real", "real"), dtypes=(C64,), **kw):
    return binary(name, dtypes, make, grad_order=None, shapes=SHAPES2, **kw)


RECORDS = [
    _binary("complex", dtypes=(F32,)),
    _unary("real"),
    _unary("imag"),
    _unary("conj", (C64, F32)),
    _unary("complex_abs", op="abs"),
    _unary("complex_sign", domain="nonzero", op="sign"),
    _unary("complex_neg", op="neg"),
    _unary("complex_exp", op="exp"),
    _unary("complex_log", domain="positive", op="log"),
    _unary("complex_sqrt", domain="positive", op="sqrt"),
    _unary("complex_sin", op="sin"),
    _unary("complex_cos", op="cos"),
    _unary("complex_tanh", op="tanh"),
    _unary("complex_integer_pow_3", op="integer_pow", y=3),
    _unary("complex_integer_pow_neg2", domain="nonzero", op="integer_pow", y=-2),
    _unary("complex_to_f32", op="convert_element_type", new_dtype=F32),
    _unary("f32_to_complex", (F32,), op="convert_element_type", new_dtype=C64),
    _binary("complex_add", op="add"),
    _binary("complex_sub", op="sub"),
    _binary("complex_mul", op="mul"),
    _binary("complex_div", domains("real", "nonzero"), op="div"),
    _binary("complex_pow", domains("positive", "real"), op="pow"),
    _binary("complex_eq", domains("ties", "ties"), op="eq"),
    _binary("complex_ne", domains("ties", "ties"), op="ne"),
]
