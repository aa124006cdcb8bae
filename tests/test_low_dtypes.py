"""The narrow dtypes (float8_*, float6_*, float4_e2m1fn, int4/uint4, int2/uint2, int1/uint1)
against jax at run time: the promotion lattice (which pairs raise, and JAX's messages),
casts bit for bit, float8 matmuls with preferred_element_type (and their gradients),
finfo/iinfo, dtype queries, jit/eager agreement, int4 arithmetic and bitcasts."""
import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import xform
import xform.numpy as xnp
from xform import lax as xlax
from xform.core import dtypes

FLOAT8 = sorted(d.name for d in dtypes.float8_dtypes)
# What this jaxlib computes with (float6 and int1/uint1 it cannot: see test_uncomputable).
FLOATS = FLOAT8 + ["float4_e2m1fn"]
INTS = ["int2", "int4", "uint2", "uint4"]
NARROW = sorted(d.name for d in dtypes.narrow_float_dtypes | dtypes.narrow_int_dtypes)
ALL = sorted(d.name for d in dtypes.all_dtypes)
# Values around each type's range: specials, ties, subnormals, overflow, -0.
F32 = np.array([0.0, -0.0, 1.0, -1.5, 0.3, 1 / 3, 2.25, 2.75, 1e-3, 1e-6, -7e-3, 5.0, 448.0,
                449.0, 500.0, 1e4, 6e4, -1e9, np.inf, -np.inf, np.nan], np.float32)
I32 = np.array([0, 1, -1, 2, -2, 3, 7, -8, 8, 15, 16, 100, -100], np.int32)


def bits(x):
    x = np.atleast_1d(np.asarray(x))
    return x.dtype, x.view(np.uint8).tolist()


def same(x_out, j_out):
    """xform's and jax's results agree in dtype and bit for bit (pytrees of arrays)."""
    xs, js = xform.tree_util.tree_leaves(x_out), jax.tree_util.tree_leaves(j_out)
    assert len(xs) == len(js)
    for x, j in zip(xs, js):
        assert np.shape(x) == np.shape(j)
        assert bits(x) == bits(j), (np.asarray(x), np.asarray(j))


def outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001  (the class and message are compared)
        return None, (type(e).__name__, str(e))


@pytest.mark.parametrize("mode", ["standard", "strict"])
def test_promote_types_all_pairs_match_jax(mode):
    specs = [np.dtype(n) for n in ALL] + [int, float, complex]
    old_j, old_x = jax.config.jax_numpy_dtype_promotion, xform.config.jax_numpy_dtype_promotion
    jax.config.update("jax_numpy_dtype_promotion", mode)
    xform.config.update("jax_numpy_dtype_promotion", mode)
    try:
        raised = 0
        for a, b in itertools.product(specs, repeat=2):
            if not {getattr(a, "name", None), getattr(b, "name", None)} & set(NARROW):
                continue
            got, want = outcome(xnp.promote_types, a, b), outcome(jnp.promote_types, a, b)
            assert got == want, (a, b)
            raised += want[1] is not None
        assert raised > 100  # the narrow types join almost nothing
    finally:
        jax.config.update("jax_numpy_dtype_promotion", old_j)
        xform.config.update("jax_numpy_dtype_promotion", old_x)


def test_promote_types_x64(x64):
    for a, b in itertools.product(["int4", "uint4", "float8_e5m2"], ALL):
        assert outcome(xnp.promote_types, a, b) == outcome(jnp.promote_types, a, b), (a, b)


def test_result_type_and_binary_ops_promotion():
    f8, i4 = np.ones(2, ml_dtypes.float8_e4m3fn), np.ones(2, ml_dtypes.int4)
    for args in [(f8, 1.0), (f8, 2), (f8, True), (f8, np.int8(1)), (i4, 3), (i4, True),
                 (f8, f8), ("int4", int), ("float8_e5m2", float, int)]:
        assert xform.dtypes.result_type(*args, return_weak_type_flag=True) == \
            jax.dtypes.result_type(*args, return_weak_type_flag=True), args
    xf8, jf8 = xnp.asarray(f8), jnp.asarray(f8)
    same((xf8 * 2.0, xf8 + 3, xf8 + xnp.int8(1)), (jf8 * 2.0, jf8 + 3, jf8 + jnp.int8(1)))
    for bad in [np.ones(2, np.float32), np.ones(2, ml_dtypes.bfloat16),
                np.ones(2, ml_dtypes.float8_e5m2)]:
        with pytest.raises(xform.dtypes.TypePromotionError, match="8-bit floats do not"):
            xf8 + bad
        with pytest.raises(jax.dtypes.TypePromotionError, match="8-bit floats do not"):
            jf8 + bad
    with pytest.raises(xform.dtypes.TypePromotionError, match="4-bit integers do not"):
        xnp.asarray(i4) + 1.0


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_casts_bit_exact(name):
    """f32/i32 -> narrow -> f32 (rounding, saturation, nan/inf, wrap-around), eager and
    jit, as jax computes it; device_put of an ml_dtypes array reads back bit for bit."""
    dt = np.dtype(getattr(ml_dtypes, name))
    src = I32 if name in INTS else F32

    def f(lax, v):
        n = lax.convert_element_type(v, dt)
        return n, lax.convert_element_type(n, np.float32)

    want = f(jlax, jnp.asarray(src))
    same(f(xlax, xnp.asarray(src)), want)
    same(xform.jit(lambda v: f(xlax, v))(src), want)
    same(xnp.asarray(src).astype(dt), jnp.asarray(src).astype(dt))
    host = np.asarray(want[0])
    assert bits(xform.device_get(xform.device_put(host))) == bits(host)
    same(xnp.array(src.tolist()[:6], dtype=dt), jnp.array(src.tolist()[:6], dtype=dt))


def test_float8_to_float8_and_int_casts():
    x = np.array([0.3, -1.75, 200.0, 3e4, np.nan], ml_dtypes.float8_e5m2)
    for to in ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu", "int4", "bfloat16"]:
        same(xnp.asarray(x).astype(to), jnp.asarray(x).astype(to))


def test_float8_matmul_preferred_element_type_and_grad():
    dt = ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4)).astype(dt)
    b = rng.normal(size=(4, 2)).astype(dt)

    def f(np_, lax, x, y):
        return (np_.matmul(x, y, preferred_element_type=np.float32),
                lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                preferred_element_type=np.float32))

    want = f(jnp, jlax, a, b)
    same(f(xnp, xlax, a, b), want)
    same(xform.jit(lambda x, y: f(xnp, xlax, x, y))(a, b), want)
    # Gradients of float8 operands are float8 (the f32 cotangent cast down), as in JAX.
    xg = xform.grad(lambda x, y: xnp.dot(x, y, preferred_element_type=np.float32).sum(),
                    argnums=(0, 1))(a, b)
    jg = jax.grad(lambda x, y: jnp.dot(x, y, preferred_element_type=np.float32).sum(),
                  argnums=(0, 1))(a, b)
    same(xg, jg)
    same(xform.vmap(lambda x: xnp.dot(x, b, preferred_element_type=np.float32))(a),
         jax.vmap(lambda x: jnp.dot(x, b, preferred_element_type=np.float32))(a))


def test_mixed_float8_dot():
    """e4m3fn x e5m2 (fp8 training's backward products): lax computes in the more
    precise operand dtype; jnp passes mixed operands on when given a preferred type."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(size=(4, 2)).astype(ml_dtypes.float8_e5m2)

    def f(np_, lax, x, y):
        return (lax.dot(x, y), lax.dot(x, y, preferred_element_type=np.float32),
                np_.matmul(x, y, preferred_element_type=np.float32),
                np_.tensordot(x, y, 1, preferred_element_type=np.float32),
                np_.einsum("ij,jk,k->i", x, y, y[0], preferred_element_type=np.float32))

    same(f(xnp, xlax, a, b), f(jnp, jlax, a, b))
    grad = lambda g, lax: g(lambda x, y: lax.dot(  # noqa: E731
        x, y, preferred_element_type=np.float32).sum(), argnums=(0, 1))(a, b)
    same(grad(xform.grad, xlax), grad(jax.grad, jlax))
    with pytest.raises(xform.dtypes.TypePromotionError, match="8-bit floats"):
        xnp.matmul(a, b)  # (without a preferred type: the promotion jax refuses too)
    with pytest.raises(jax.dtypes.TypePromotionError, match="8-bit floats"):
        jnp.matmul(a, b)


def test_float8_arithmetic_reductions_jit_eager_agree():
    x = np.array([[1.0, -2.0, 0.5], [3.0, 448.0, -0.125]], ml_dtypes.float8_e4m3fn)
    y = np.array([[0.25, 1.5, -1.0], [2.0, 0.5, 4.0]], ml_dtypes.float8_e4m3fn)

    def f(np_, a, b):
        lax = xlax if np_ is xnp else jlax
        return (a + b, a * b - 1, a / b, np_.exp(a / 64), np_.maximum(a, b), -a, a > b,
                a.sum(0), a.mean(), a.max(axis=1), a.min(), np_.argmax(a, 1),
                np_.where(a > 0, a, 0), lax.cummax(a, axis=1),  # (max/min: no -inf in e4m3fn)
                lax.reduce_window(a, -np.inf, lax.max, (1, 2), (1, 1), "SAME"))

    want = jax.jit(lambda a, b: f(jnp, a, b))(x, y)  # (jax's eager agrees; fewer compiles)
    same(f(xnp, xnp.asarray(x), xnp.asarray(y)), want)
    same(xform.jit(lambda a, b: f(xnp, a, b))(x, y), want)
    same(xform.grad(lambda a: (a * a).sum())(x), jax.grad(lambda a: (a * a).sum())(x))


def test_int4_arithmetic():
    x = np.array([1, -2, 3, 7, -8, 0], ml_dtypes.int4)
    u = np.array([1, 2, 15, 0, 9, 4], ml_dtypes.uint4)

    def f(np_, a, b):
        return (a + 5, a * 3, a - a, a // 2, a % 3, a >> 1, ~a, -a, a == 3, a.max(),
                np_.clip(a, -1, 2), ~b, b << 1, b * b, b.min(), np_.where(a > 0, a, 0),
                a.astype(np.float32), a.astype("int2"), np_.sort(a), a.mean())

    want = jax.jit(lambda a, b: f(jnp, a, b))(x, u)
    same(f(xnp, xnp.asarray(x), xnp.asarray(u)), want)
    same(xform.jit(lambda a, b: f(xnp, a, b))(x, u), want)
    with pytest.raises(TypeError, match="narrow-width integers is platform-dependent"):
        xnp.abs(xnp.asarray(x))


def test_bitcast_convert_type():
    i8 = np.array([0x21, 0x7F, -1], np.int8)
    f8 = np.array([1.5, -2.0, 0.125], ml_dtypes.float8_e4m3fn)
    cases = [(i8, "int4"), (i8, "float8_e5m2"), (f8, "uint8"), (f8, "float8_e5m2"),
             (np.array([[1, 2], [3, 15]], ml_dtypes.uint4), "uint8")]
    for x, to in cases:
        same(xlax.bitcast_convert_type(x, to), jlax.bitcast_convert_type(x, to))
        same(xform.jit(lambda v, to=to: xlax.bitcast_convert_type(v, to))(x),
             jlax.bitcast_convert_type(x, to))


@pytest.mark.parametrize("name", NARROW)
def test_finfo_iinfo_queries_and_scalar_types(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    x_t, j_t = getattr(xnp, name), getattr(jnp, name)
    assert x_t == dt.type and np.dtype(x_t) == np.dtype(j_t) and x_t.dtype == dt
    if dt in dtypes.narrow_float_dtypes:
        xi, ji = xnp.finfo(x_t), jnp.finfo(j_t)
        for f in ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal",
                  "smallest_subnormal", "nmant", "nexp", "maxexp", "minexp", "precision",
                  "resolution", "dtype"]:
            xv, jv = getattr(xi, f), getattr(ji, f)
            assert type(xv) is type(jv) and xv == jv, f
    else:
        xi, ji = xnp.iinfo(x_t), jnp.iinfo(j_t)
        assert (xi.bits, xi.min, xi.max, xi.dtype) == (ji.bits, ji.min, ji.max, ji.dtype)
    for sup in [np.floating, np.inexact, np.integer, np.signedinteger, np.unsignedinteger,
                np.number, np.generic, np.float32, dt]:
        assert xnp.issubdtype(dt, sup) == jnp.issubdtype(dt, sup), sup
        assert xnp.issubdtype(x_t, sup) == jnp.issubdtype(j_t, sup), sup
    for kind in ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric"]:
        assert xnp.isdtype(dt, kind) == jnp.isdtype(dt, kind), kind
    assert xform.dtypes.itemsize_bits(dt) == jax.dtypes.itemsize_bits(dt)
    assert xform.dtypes.canonicalize_dtype(dt) == jax.dtypes.canonicalize_dtype(dt)
    assert xform.dtypes.scalar_type_of(np.zeros(1, dt)) is \
        jax.dtypes.scalar_type_of(np.zeros(1, dt))


def test_scalar_constructors_and_lowering_types():
    same((xnp.float8_e4m3fn(1.3), xnp.int4(5), xnp.full(3, 2.5, xnp.float8_e5m2),
          xnp.arange(4, dtype=xnp.uint4), xnp.zeros(2, xnp.float4_e2m1fn)),
         (jnp.float8_e4m3fn(1.3), jnp.int4(5), jnp.full(3, 2.5, jnp.float8_e5m2),
          jnp.arange(4, dtype=jnp.uint4), jnp.zeros(2, jnp.float4_e2m1fn)))
    text = xform.jit(lambda a, b, c: (a, b, c)).lower(
        np.ones(2, ml_dtypes.float8_e4m3fn), np.ones(2, ml_dtypes.int4),
        np.ones(2, ml_dtypes.uint2)).as_text()
    for t in ["tensor<2xf8E4M3FN>", "tensor<2xi4>", "tensor<2xui2>"]:
        assert t in text
    assert "f8_e4m3fn[2]" in str(xform.make_jaxpr(lambda a: a * a)(
        np.ones(2, ml_dtypes.float8_e4m3fn)))


@pytest.mark.parametrize("name", ["int1", "uint1", "float6_e2m3fn"])
def test_uncomputable_types_fail_clearly(name):
    """jax lowers these, then fails in XLA (or reads int1 as bool); xform says so first."""
    with pytest.raises(TypeError, match=f"cannot compute with dtype {name}"):
        xnp.zeros(2, np.float32).astype(getattr(ml_dtypes, name))
