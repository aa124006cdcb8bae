"""The op-table harness: input domains, ``OpRecord`` rows and their helpers.

Each module in this package (other than this one) defines ``RECORDS``, a list of
``OpRecord`` rows for one family of primitives; ``all_records()`` gathers them for
``tests/test_lax_ops.py``. Add a family by adding a module: no shared edits.
"""
import dataclasses
import functools
import zlib
from typing import Callable, Optional

import jax
import numpy as np
from hypothesis import strategies as st
from jax import lax as jlax

from xform import lax as xlax
from xform import test_util

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)
U32, C64, C128 = np.dtype(np.uint32), np.dtype(np.complex64), np.dtype(np.complex128)
FLOAT0 = np.dtype([("float0", np.void, 0)])

# Tolerances of values vs jax: both lower to the same XLA ops, so nearly exact.
VALUE_TOL = {F16: 1e-3, F32: 1e-6, F64: 1e-13, C64: 1e-6, C128: 1e-13}
# jvp/vjp vs jax: the same math, possibly in a different order.
AD_TOL = {F32: 2e-5, F64: 1e-12, C64: 2e-5, C128: 1e-12}


# ---- input domains: one description, two sources (numpy rng or hypothesis) ----

class RandGen:
    """Inputs from a seeded NumPy generator (value, vmap and jvp/vjp tests)."""

    def __init__(self, rng):
        self.rng = rng

    def _out(self, x, dtype):
        return np.asarray(x).astype(dtype)

    def real(self, shape, dtype):
        if dtype == BOOL:
            return self._out(self.rng.rand(*shape) < 0.5, dtype)
        if np.issubdtype(dtype, np.complexfloating):   # both parts in [-3, 3]
            parts = self.rng.uniform(-3, 3, (2,) + tuple(shape))
            return self._out(parts[0] + 1j * parts[1], dtype)
        if np.issubdtype(dtype, np.integer):
            return self._out(self.rng.randint(-5, 6, size=shape), dtype)
        return self._out(self.rng.uniform(-3, 3, size=shape), dtype)

    def positive(self, shape, dtype):
        if np.issubdtype(dtype, np.integer):
            return self._out(self.rng.randint(1, 6, size=shape), dtype)
        if np.issubdtype(dtype, np.complexfloating):   # Re in [0.5, 3]: off the branch cuts
            re, im = self.rng.uniform(0.5, 3, shape), self.rng.uniform(-1, 1, shape)
            return self._out(re + 1j * im, dtype)
        return self._out(self.rng.uniform(0.5, 3, size=shape), dtype)

    def nonzero(self, shape, dtype):
        sign = np.where(self.rng.rand(*shape) < 0.5, -1, 1)
        return self._out(sign * self.positive(shape, dtype), dtype)

    def distinct(self, shape, dtype):
        """Pairwise distinct values, at least 0.1 apart (no ties for max/min/sort)."""
        size = int(np.prod(shape))
        perm = self.rng.permutation(size).reshape(shape) - size // 2
        if np.issubdtype(dtype, np.integer):
            return self._out(perm, dtype)
        return self._out(perm * 0.37 + 0.1, dtype)

    def ties(self, shape, dtype):
        """Few distinct values (ties and zeros are common): for comparisons, argmax."""
        if dtype == BOOL:
            return self.real(shape, dtype)
        return self._out(self.rng.randint(-2, 3, size=shape), dtype)

    def ties_nan(self, shape, dtype):
        x = self.ties(shape, dtype)
        if np.issubdtype(dtype, np.floating):
            x[self.rng.rand(*shape) < 0.2] = np.nan
        return x

    def which(self, shape, n):
        return self._out(self.rng.randint(0, n, size=shape), I32)

    def bool(self, shape):
        return self._out(self.rng.rand(*shape) < 0.5, BOOL)


class HypGen:
    """The same domains drawn with hypothesis (gradient tests; floating dtypes)."""

    def __init__(self, draw):
        self.draw = draw

    def _arr(self, shape, dtype, elements, unique=False):
        return self.draw(test_util.arrays(shape, dtype, elements, unique))

    def _floats(self, lo, hi, dtype):
        return test_util.float_elements(lo, hi, width=8 * np.dtype(dtype).itemsize)

    def real(self, shape, dtype):
        return self._arr(shape, dtype, self._floats(-3, 3, dtype))

    def positive(self, shape, dtype):
        return self._arr(shape, dtype, self._floats(0.5, 3, dtype))

    def nonzero(self, shape, dtype):
        return self._arr(shape, dtype, st.one_of(self._floats(-3, -0.5, dtype),
                                                 self._floats(0.5, 3, dtype)))

    def distinct(self, shape, dtype):
        ints = self._arr(shape, np.int64, st.integers(-300, 300), unique=True)
        return (ints / 100).astype(dtype)   # at least 0.01 apart, >> the FD step

    def ties(self, shape, dtype):
        return self._arr(shape, np.int64, st.integers(-2, 2)).astype(dtype)

    def which(self, shape, n):
        return self._arr(shape, I32, st.integers(0, n - 1))

    def bool(self, shape):
        return self._arr(shape, BOOL, st.booleans())


def domains(*names):
    """Operand i drawn from domain ``names[i]`` of the operand dtype."""
    def make(g, shapes, dtype):
        return [getattr(g, n)(s, dtype) for n, s in zip(names, shapes)]
    return make


def separated(g, shapes, dtype):
    """Two operands (one may be rank 0) that differ by at least 0.5 everywhere."""
    small, big = sorted(range(2), key=lambda i: len(shapes[i]))
    base = g.real(shapes[small], dtype)
    other = np.asarray(base + g.nonzero(shapes[big], dtype)).astype(dtype)
    out = [None, None]
    out[small], out[big] = base, other
    return out


def select_args(n_cases, which_bool):
    def make(g, shapes, dtype):
        which = g.bool(shapes[0]) if which_bool else g.which(shapes[0], n_cases)
        return [which] + [g.real(s, dtype) for s in shapes[1:]]
    return make


# ---- the op table ----

@dataclasses.dataclass(frozen=True)
class OpRecord:
    name: str                         # test id
    fn_xform: Callable                # operands -> result, with xform.lax
    fn_jax: Callable                  # the same with jax.lax
    nargs: int
    dtypes: tuple                     # dtypes of the value and vmap tests
    shapes: tuple                     # alternatives: one shape per operand
    args_maker: Callable              # (gen, shapes, dtype) -> operands
    grad_order: Optional[int]         # 0: not differentiable (zero tangents checked);
                                      # None: values and vmap only
    tol: dict                         # dtype -> tolerance of values vs jax
    params: dict                      # static parameters (for reading the table)
    diff_argnums: Optional[tuple]     # operands differentiated (None: all)
    grad_dtype: np.dtype              # dtype of the gradient tests
    grad_kw: dict                     # extra check_grads arguments (eps, tolerances)

    def __repr__(self):
        return self.name


def _default_call(op, params):
    return lambda L, *xs: getattr(L, op)(*xs, **params)


def rec(name, nargs, dtypes, shapes, args_maker, grad_order=2, *, op=None, call=None,
        call_jax=None, tol=None, diff_argnums=None, grad_dtype=F64, grad_kw=None,
        **params):
    call = call or _default_call(op or name, params)
    call_jax = call_jax or call
    return OpRecord(name, functools.partial(call, xlax), functools.partial(call_jax, jlax),
                    nargs, tuple(np.dtype(d) for d in dtypes), tuple(shapes), args_maker,
                    grad_order, {**VALUE_TOL, **(tol or {})}, params, diff_argnums,
                    np.dtype(grad_dtype), grad_kw or {})


FLOAT, NUM, ALL = (F32,), (F32, I32), (F32, I32, BOOL)
UNARY_SHAPES = [((3, 4),), ((),), ((2, 1, 3),)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), ()), ((), (2, 3)), ((), ())]


def unary(name, dtypes, domain="real", grad_order=2, **kw):
    return rec(name, 1, dtypes, UNARY_SHAPES, domains(domain), grad_order, **kw)


def binary(name, dtypes, make=domains("real", "real"), grad_order=2, shapes=BINARY_SHAPES,
           **kw):
    return rec(name, 2, dtypes, shapes, make, grad_order, **kw)


def _canon(axes, ndim):
    return tuple(a % ndim for a in axes)


def _reduction(op, axes, shape, domain="real", grad_order=2):
    name = f"{op}_{'_'.join(str(a) for a in axes) or 'none'}"
    return rec(name, 1, NUM, [(shape,)], domains(domain), grad_order,
               call=lambda L, x: getattr(L, op)(x, axes),
               # NB: xform accepts negative axes (like numpy); jax.lax does not.
               call_jax=lambda L, x: getattr(L, op)(x, _canon(axes, len(shape))), axes=axes)


def _dot(name, lhs, rhs, dn):
    return rec(name, 2, NUM, [(lhs, rhs)], domains("real", "real"),
               call=lambda L, x, y: L.dot_general(x, y, dn), dimension_numbers=dn)


def _concat(name, shapes, dim):
    return rec(name, len(shapes), ALL, [shapes], domains(*["real"] * len(shapes)),
               call=lambda L, *xs: L.concatenate(xs, dim), dimension=dim)


# ---- helpers ----

def _rng(*keys):
    return np.random.RandomState(zlib.crc32(repr(keys).encode()))


def assert_same(actual, expected, tol, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (
        f"{what}: dtype {actual.dtype} but jax gives {expected.dtype}")
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape} but jax gives {expected.shape}")
    if actual.dtype == FLOAT0:
        return
    if np.issubdtype(actual.dtype, np.inexact):
        t = tol[actual.dtype] if isinstance(tol, dict) else tol
        wide = np.complex128 if np.iscomplexobj(actual) else np.float64
        np.testing.assert_allclose(actual.astype(wide), expected.astype(wide),
                                   rtol=t, atol=t, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def assert_tree_same(actual, expected, tol, what):
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), f"{what}: {a_tree} vs jax {e_tree}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        assert_same(a, e, tol, f"{what}[{i}]")


def all_records():
    """Every ``RECORDS`` row of every module of this package, in module order."""
    import importlib
    import pkgutil
    rows = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        rows += importlib.import_module(f"{__name__}.{info.name}").RECORDS
    return rows
