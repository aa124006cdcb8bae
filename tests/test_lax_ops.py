"""Every ``xform.lax`` primitive against ``jax.lax``, driven by one op table.

Each ``OpRecord`` row says how to call the op in both libraries, on which dtypes and
shapes, and from which input domain (log and sqrt positive, max/min operands apart,
...). The table drives:

* values and dtypes vs jax, eager and under ``xform.jit`` (float32, int32, bool);
* ``vmap`` vs a Python loop, the batch axis at random positions (some operands None);
* hypothesis-driven ``check_grads(order=2, modes=("fwd", "rev"))`` in float64;
* the dot-product identity between jvp and vjp, and jvp/vjp values vs jax;
* zero tangents and cotangents for the non-differentiable ops.
"""
import dataclasses
import functools
import zlib
from typing import Callable, Optional

import jax
import numpy as np
import pytest
from hypothesis import given, strategies as st
from jax import lax as jlax

import xform
from xform import lax as xlax
from xform import test_util

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)
FLOAT0 = np.dtype([("float0", np.void, 0)])

# Tolerances of values vs jax: both lower to the same XLA ops, so nearly exact.
VALUE_TOL = {F16: 1e-3, F32: 1e-6, F64: 1e-13}
# jvp/vjp vs jax: the same math, possibly in a different order.
AD_TOL = {F32: 2e-5, F64: 1e-12}


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
        if np.issubdtype(dtype, np.integer):
            return self._out(self.rng.randint(-5, 6, size=shape), dtype)
        return self._out(self.rng.uniform(-3, 3, size=shape), dtype)

    def positive(self, shape, dtype):
        if np.issubdtype(dtype, np.integer):
            return self._out(self.rng.randint(1, 6, size=shape), dtype)
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


RECORDS = [
    # -- elementwise unary --
    unary("neg", NUM),
    unary("exp", FLOAT),
    unary("log", FLOAT, "positive"),
    unary("sin", FLOAT),
    unary("cos", FLOAT),
    unary("tanh", FLOAT),
    unary("logistic", FLOAT),
    unary("sqrt", FLOAT, "positive"),
    unary("rsqrt", FLOAT, "positive"),
    unary("abs", NUM, "nonzero"),   # away from the kink at 0
    unary("sign", NUM, "ties", grad_order=0),
    unary("stop_gradient", ALL, grad_order=0),
    unary("integer_pow_3", NUM, op="integer_pow", y=3),
    unary("integer_pow_2", NUM, op="integer_pow", y=2),
    unary("integer_pow_1", NUM, op="integer_pow", y=1),
    unary("integer_pow_0", NUM, op="integer_pow", y=0),
    unary("integer_pow_neg1", FLOAT, "nonzero", op="integer_pow", y=-1),
    unary("integer_pow_neg3", FLOAT, "nonzero", op="integer_pow", y=-3),
    # -- elementwise binary (rank-0 operands broadcast) --
    binary("add", NUM),
    binary("sub", NUM),
    binary("mul", NUM),
    binary("div", NUM, domains("real", "nonzero")),   # int division rounds toward zero
    binary("max", NUM, separated),                    # no ties: the derivative is defined
    binary("min", NUM, separated),
    # y != 0: like JAX, d(x^y)/dx is defined as 0 at y == 0, so the second derivative
    # there is not the limit that finite differences see.
    binary("pow", FLOAT, domains("positive", "nonzero")),
    binary("add_any", NUM, shapes=[((3, 4), (3, 4)), ((), ())],
           call_jax=lambda L, x, y: L.add(x, y)),     # jax.lax has no public add_any
    # -- comparisons (ties on purpose) --
    *[binary(c, ALL, domains("ties", "ties"), grad_order=0)
      for c in ("eq", "ne", "lt", "le", "gt", "ge")],
    # -- select_n: which bool (array or rank 0) or int32 --
    rec("select_n_bool", 3, ALL, [((3, 4), (3, 4), (3, 4)), ((), (2, 3), (2, 3))],
        select_args(2, True), op="select_n", diff_argnums=(1, 2)),
    rec("select_n_int", 4, ALL, [((3, 4),) * 4, ((), (5,), (5,), (5,))],
        select_args(3, False), op="select_n", diff_argnums=(1, 2, 3)),
    rec("select_n_one_case", 2, NUM, [((3,), (3,))], select_args(1, False),
        op="select_n", diff_argnums=(1,)),
    # -- convert_element_type between float, int and bool --
    unary("convert_to_f32", (I32, BOOL), op="convert_element_type", new_dtype=F32,
          # f64 -> f32 in the gradient tests: linear, so a large finite-difference step
          # is exact, but every check sees float32 rounding.
          grad_kw=dict(eps=1e-2, atol=1e-4, rtol=1e-4)),
    unary("convert_to_i32", (F32, BOOL), grad_order=0, op="convert_element_type",
          new_dtype=I32),
    unary("convert_to_bool", (F32, I32), "ties", grad_order=0, op="convert_element_type",
          new_dtype=BOOL),
    unary("convert_to_f16", (F32, I32, BOOL), grad_order=None, op="convert_element_type",
          new_dtype=F16),   # values only: float16 is too coarse for finite differences
    # -- shapes --
    rec("broadcast_in_dim", 1, ALL, [((3,),)], domains("real"), op="broadcast_in_dim",
        shape=(2, 3, 4), broadcast_dimensions=(1,)),
    rec("broadcast_in_dim_unit", 1, ALL, [((3, 1),)], domains("real"),
        op="broadcast_in_dim", shape=(2, 3, 4), broadcast_dimensions=(1, 2)),
    rec("broadcast_in_dim_scalar", 1, ALL, [((),)], domains("real"),
        op="broadcast_in_dim", shape=(2, 3), broadcast_dimensions=()),
    rec("reshape", 1, ALL, [((3, 4),)], domains("real"), new_sizes=(2, 6)),
    rec("reshape_flat", 1, ALL, [((2, 3, 2),)], domains("real"), op="reshape",
        new_sizes=(12,)),
    rec("reshape_dimensions", 1, ALL, [((2, 3, 4),)], domains("real"), op="reshape",
        new_sizes=(4, 6), dimensions=(2, 0, 1)),
    rec("transpose", 1, ALL, [((2, 3, 4),)], domains("real"), permutation=(2, 0, 1)),
    rec("transpose_2d", 1, ALL, [((3, 4),)], domains("real"), op="transpose",
        permutation=(1, 0)),
    rec("squeeze", 1, ALL, [((3, 1, 4, 1),)], domains("real"), dimensions=(1, 3)),
    rec("squeeze_negative", 1, ALL, [((1, 3, 1),)], domains("real"), op="squeeze",
        dimensions=(-1, 0)),
    rec("expand_dims", 1, ALL, [((3, 4),)], domains("real"), dimensions=(0, 3)),
    rec("expand_dims_negative", 1, ALL, [((3,),)], domains("real"), op="expand_dims",
        dimensions=(-1,)),
    rec("iota", 0, (I32, F32), [()], domains(), grad_order=0,
        call=lambda L: L.iota(np.int32, 5)),
    rec("iota_f32", 0, (F32,), [()], domains(), grad_order=0,
        call=lambda L: L.iota(np.float32, 4)),
    rec("broadcasted_iota", 0, (I32,), [()], domains(), grad_order=0,
        call=lambda L: L.broadcasted_iota(np.int32, (2, 3, 4), 1)),
    rec("slice", 1, ALL, [((5, 6),)], domains("real"), start_indices=(1, 2),
        limit_indices=(4, 6)),
    rec("slice_strided", 1, ALL, [((5, 7),)], domains("real"), op="slice",
        start_indices=(0, 1), limit_indices=(5, 7), strides=(2, 3)),
    rec("slice_strided_1d", 1, ALL, [((8,),)], domains("real"), op="slice",
        start_indices=(1,), limit_indices=(7,), strides=(4,)),
    rec("pad", 2, ALL, [((3, 4), ())], domains("real", "real"),
        padding_config=((1, 2, 0), (0, 3, 0))),
    rec("pad_interior_negative", 2, ALL, [((3, 4), ())], domains("real", "real"),
        op="pad", padding_config=((1, -1, 1), (-2, 2, 2))),
    rec("pad_negative_1d", 2, ALL, [((6,), ())], domains("real", "real"), op="pad",
        padding_config=((-2, -1, 1),)),
    _concat("concatenate_0", ((2, 3), (4, 3), (1, 3)), 0),
    _concat("concatenate_1", ((2, 3), (2, 1)), 1),
    # -- reductions, multiple and negative axes --
    _reduction("reduce_sum", (0,), (3, 4)),
    _reduction("reduce_sum", (0, 2), (2, 3, 4)),
    _reduction("reduce_sum", (-1,), (2, 3, 4)),
    _reduction("reduce_sum", (-1, 0, 1), (2, 3, 4)),
    _reduction("reduce_sum", (), (3, 4)),
    _reduction("reduce_max", (1,), (3, 4), "distinct"),
    _reduction("reduce_max", (0, -1), (2, 3, 4), "distinct"),
    _reduction("reduce_min", (0,), (3, 4), "distinct"),
    _reduction("reduce_min", (-2, 2), (2, 3, 4), "distinct"),
    rec("argmax_ties", 1, NUM, [((4, 5),)], domains("ties"), grad_order=0,
        call=lambda L, x: L.argmax(x, 1, np.int32), axis=1),
    rec("argmax_nan", 1, FLOAT, [((6, 5),)], domains("ties_nan"), grad_order=0,
        call=lambda L, x: L.argmax(x, 0, np.int32), axis=0),
    rec("argmax_negative_axis", 1, NUM, [((2, 3, 4),)], domains("ties"), grad_order=0,
        call=lambda L, x: L.argmax(x, -2, np.int32),
        call_jax=lambda L, x: L.argmax(x, 1, np.int32), axis=-2),
    # -- dot_general: contracting and batch dimensions in unusual positions --
    _dot("dot_matmul", (2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    _dot("dot_contract_first_last", (3, 2), (4, 3), (((0,), (1,)), ((), ()))),
    _dot("dot_vector", (3,), (3,), (((0,), (0,)), ((), ()))),
    _dot("dot_outer", (2,), (3,), (((), ()), ((), ()))),
    _dot("dot_batch_middle", (4, 2, 5, 3), (3, 5, 6, 4),
         (((0, 3), (3, 0)), ((2,), (1,)))),
    _dot("dot_two_batch_swapped", (2, 3, 4), (4, 3, 2), (((1,), (1,)), ((0, 2), (2, 0)))),
]
RECORDS_BY_NAME = {r.name: r for r in RECORDS}
assert len(RECORDS_BY_NAME) == len(RECORDS), "duplicate op record names"
DIFF = [r for r in RECORDS if r.grad_order]
NONDIFF = [r for r in RECORDS if r.grad_order == 0]


def test_table_covers_every_primitive():
    from xform.core.trace import Primitive
    prims = {v.name for v in vars(xlax).values() if isinstance(v, Primitive)}
    called = set()
    for r in RECORDS:
        jaxpr = _trace(r)
        called |= {str(e.primitive) for e in jaxpr.jaxpr.eqns}
    assert prims - called == set()


def _trace(r):
    args = r.args_maker(RandGen(np.random.RandomState(0)), r.shapes[0], r.dtypes[0])
    return xform.make_jaxpr(r.fn_xform)(*args)


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
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=t, atol=t, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def assert_tree_same(actual, expected, tol, what):
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), f"{what}: {a_tree} vs jax {e_tree}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        assert_same(a, e, tol, f"{what}[{i}]")


def _value_cases():
    for r in RECORDS:
        for dt in r.dtypes:
            for i, s in enumerate(r.shapes):
                yield pytest.param(r, dt, s, id=f"{r.name}-{dt.name}-{i}")


def _diff_fn(r, args, fn=None):
    """``fn`` as a function of the differentiated operands only (others closed over)."""
    fn = fn or r.fn_xform
    nums = r.diff_argnums if r.diff_argnums is not None else tuple(range(len(args)))

    def f(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fn(*full)
    return f, tuple(args[i] for i in nums)


# ---- (a) values and dtypes vs jax, eager and jit ----

@pytest.mark.parametrize("r,dtype,shapes", list(_value_cases()))
def test_values_match_jax(r, dtype, shapes):
    args = r.args_maker(RandGen(_rng(r.name, dtype.name, shapes)), shapes, dtype)
    expected = r.fn_jax(*args)
    eager = r.fn_xform(*[xform.device_put(a) for a in args])
    assert isinstance(eager, xform.Array)
    assert_same(eager, expected, r.tol, f"{r.name} eager")
    assert eager.aval.weak_type == expected.weak_type, f"{r.name}: weak_type"
    jitted = xform.jit(r.fn_xform)(*args)
    assert_same(jitted, expected, r.tol, f"{r.name} jit")


# ---- (b) vmap vs a Python loop, batch axis anywhere ----

@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("r", [r for r in RECORDS if r.nargs], ids=repr)
def test_vmap_matches_loop(r, seed):
    rng = _rng(r.name, seed)
    dtype = r.dtypes[seed % len(r.dtypes)]
    shapes = r.shapes[seed % len(r.shapes)]
    size = 3
    examples = [r.args_maker(RandGen(rng), shapes, dtype) for _ in range(size)]
    in_axes = [None if rng.rand() < 0.3 else int(rng.randint(-len(s) - 1, len(s) + 1))
               for s in shapes]
    if all(a is None for a in in_axes):
        in_axes[int(rng.randint(len(shapes)))] = 0
    batched = [examples[0][i] if ax is None else
               np.stack([ex[i] for ex in examples], axis=ax) for i, ax in enumerate(in_axes)]
    loop = [np.asarray(r.fn_xform(*[examples[b if ax is not None else 0][i]
                                    for i, ax in enumerate(in_axes)]))
            for b in range(size)]
    out_axis = int(rng.randint(-loop[0].ndim - 1, loop[0].ndim + 1))
    got = xform.vmap(r.fn_xform, in_axes=tuple(in_axes), out_axes=out_axis)(*batched)
    assert_same(got, np.stack(loop, axis=out_axis), r.tol,
                f"{r.name} vmap in_axes={in_axes} out_axes={out_axis}")


def test_vmap_of_nullary_op_broadcasts():
    got = xform.vmap(lambda x: xlax.add(x, xlax.iota(np.int32, 4)))(
        np.arange(8, dtype=np.int32).reshape(2, 4))
    np.testing.assert_array_equal(got, np.arange(8).reshape(2, 4) + np.arange(4))


# ---- (c) check_grads vs finite differences, float64, hypothesis-driven ----

@pytest.mark.parametrize("r", DIFF, ids=repr)
@given(data=st.data())
def test_check_grads(x64, r, data):
    shapes = data.draw(st.sampled_from(r.shapes), label="shapes")
    args = r.args_maker(HypGen(data.draw), shapes, r.grad_dtype)
    f, dyn = _diff_fn(r, args)
    test_util.check_grads(f, dyn, order=r.grad_order, modes=("fwd", "rev"), **r.grad_kw)


# ---- (d) the dot-product identity <u, J v> == <J^T u, v> ----

@pytest.mark.parametrize("r", DIFF, ids=repr)
def test_jvp_vjp_dot_product(x64, r):
    rng = _rng(r.name, "dot")
    for shapes in r.shapes:
        args = r.args_maker(RandGen(rng), shapes, r.grad_dtype)
        f, dyn = _diff_fn(r, args)
        v = tuple(rng.standard_normal(np.shape(x)).astype(r.grad_dtype) for x in dyn)
        y, jv = xform.jvp(f, dyn, v)
        u = rng.standard_normal(np.shape(y)).astype(y.dtype)
        y2, f_vjp = xform.vjp(f, *dyn)
        jtu = f_vjp(u)
        np.testing.assert_array_equal(y, y2)
        lhs = float(np.sum(u.astype(F64) * np.asarray(jv, F64)))
        rhs = sum(float(np.sum(np.asarray(c, F64) * t)) for c, t in zip(jtu, v))
        scale = float(np.sum(np.abs(u) * np.abs(np.asarray(jv, F64)))) + sum(
            float(np.sum(np.abs(np.asarray(c, F64) * t))) for c, t in zip(jtu, v))
        tol = 1e-12 if y.dtype == F64 else 1e-6
        assert abs(lhs - rhs) <= tol * scale + 1e-300, (
            f"{r.name} shapes {shapes}: <u, Jv> = {lhs!r} but <J^T u, v> = {rhs!r}")


# ---- (e) jvp and vjp values vs jax ----

@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("r", DIFF, ids=repr)
def test_jvp_vjp_match_jax(r, precision, request):
    if precision == "f64":
        request.getfixturevalue("x64")
    dtype = F64 if precision == "f64" else F32
    rng = _rng(r.name, precision)
    for shapes in r.shapes[:2]:   # jax's eager jvp compiles per shape: keep it quick
        args = r.args_maker(RandGen(rng), shapes, dtype)
        fx, dyn = _diff_fn(r, args)
        fj, _ = _diff_fn(r, args, r.fn_jax)
        t = tuple(rng.standard_normal(np.shape(x)).astype(dtype) for x in dyn)
        assert_tree_same(xform.jvp(fx, dyn, t), jax.jvp(fj, dyn, t), AD_TOL,
                         f"{r.name} {shapes} jvp")
        y, x_vjp = xform.vjp(fx, *dyn)
        y_j, j_vjp = jax.vjp(fj, *dyn)
        assert_same(y, y_j, AD_TOL, f"{r.name} {shapes} vjp primal")
        ct = rng.standard_normal(np.shape(y)).astype(np.asarray(y_j).dtype)
        assert_tree_same(x_vjp(ct), j_vjp(ct), AD_TOL, f"{r.name} {shapes} vjp")


# ---- non-differentiable ops: zero tangents and cotangents ----

@pytest.mark.parametrize("r", NONDIFF, ids=repr)
def test_nondiff_zero_tangents(r):
    rng = _rng(r.name, "zero")
    dtype = F32 if F32 in r.dtypes else r.dtypes[0]
    args = tuple(r.args_maker(RandGen(rng), r.shapes[0], dtype))
    t = tuple(rng.standard_normal(np.shape(x)).astype(dtype) for x in args)
    (y, ty), (y_j, ty_j) = xform.jvp(r.fn_xform, args, t), jax.jvp(r.fn_jax, args, t)
    assert_same(y, y_j, r.tol, f"{r.name} jvp primal")
    assert_same(ty, ty_j, r.tol, f"{r.name} jvp tangent")
    if np.asarray(ty).dtype != FLOAT0:   # float0 tangents hold no values
        assert not np.any(np.asarray(ty)), f"{r.name}: nonzero tangent {ty}"
    if not args:
        return
    _, x_vjp = xform.vjp(r.fn_xform, *args)
    _, j_vjp = jax.vjp(r.fn_jax, *args)
    out_dt = np.asarray(y_j).dtype
    ct = (rng.standard_normal(np.shape(y)).astype(out_dt)
          if np.issubdtype(out_dt, np.inexact) else np.zeros(np.shape(y), FLOAT0))
    cts, cts_j = x_vjp(ct), j_vjp(ct)
    assert_tree_same(cts, cts_j, r.tol, f"{r.name} vjp")
    for c in cts:
        assert not np.any(np.asarray(c)), f"{r.name}: nonzero cotangent {c}"


def test_grad_through_nondiff_ops_is_zero():
    x = np.array([-1.5, 0.5, 2.0], np.float32)

    def f(x):
        s = xlax.mul(xlax.sign(x), xlax.stop_gradient(x))        # no gradient
        m = xlax.convert_element_type(xlax.gt(x, 0.0), np.float32)
        return xlax.reduce_sum(xlax.add(s, m), (0,))
    np.testing.assert_array_equal(xform.grad(f)(x), np.zeros(3, np.float32))
