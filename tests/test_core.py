"""Core invariants: every primitive has every rule; the IR typechecks, prints and
evaluates; tracers don't leak; eager execution caches compiled primitives."""
import numpy as np
import pytest

import xform
from xform import lax
from xform.core.jaxpr import JaxprTypeError, eval_jaxpr, typecheck
from xform.core.trace import Primitive
from xform.interpreters import ad, batching, dispatch, mlir
from xform.interpreters.pjit import pjit_p


def all_primitives():
    """Every primitive xform declares (importing all its public modules first)."""
    import xform.numpy  # noqa: F401  (declares no primitives today; future-proof)
    prims = set(Primitive.registry)
    assert {pjit_p, lax.sin_p} <= prims
    return sorted(prims, key=lambda p: p.name)


# Primitives linear in (some of) their inputs: they need a transpose rule.
# One line per family, so that families can be added without touching others.
LINEAR = {
    "add", "sub", "neg", "mul", "div", "add_any", "convert_element_type", "select_n",
    "reduce_sum", "broadcast_in_dim", "reshape", "transpose", "squeeze", "slice",
    "pad", "concatenate",
    "dot_general",
    "cumsum", "reduce_window_sum", "conv_general_dilated", "reduce_precision",
    "real", "imag", "conj", "complex",
    "dynamic_slice", "dynamic_update_slice", "gather", "scatter-add", "scatter", "scatter-mul",
    "rev", "split",
    "custom_lin", "remat", "name",
    "cond",
    "jit",
    "fft",
    "psum", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "xla_pmap",
}
NO_OPERANDS = {"iota"}  # nothing to batch or differentiate


@pytest.mark.parametrize("prim", all_primitives(), ids=lambda p: p.name)
def test_every_primitive_has_every_rule(prim):
    missing = []
    if prim._abstract_eval is None:
        missing.append("abstract eval")
    if prim.impl is None:
        missing.append("impl")
    if not mlir.has_lowering(prim):
        missing.append("lowering")
    if prim not in ad.primitive_jvps:
        missing.append("jvp (or defnondiff)")
    if prim.name not in NO_OPERANDS and batching.primitive_batchers.get(prim) is None:
        missing.append("batching")
    if prim.name in LINEAR and prim not in ad.primitive_transposes:
        missing.append("transpose")
    assert not missing, f"primitive {prim.name} lacks: {', '.join(missing)}"


def test_issue_primitive_set_is_present():
    names = {p.name for p in all_primitives()}
    wanted = ("add sub mul div neg max min pow integer_pow exp log sin cos tanh logistic "
              "sqrt rsqrt abs sign eq ne lt le gt ge select_n convert_element_type "
              "broadcast_in_dim reshape transpose squeeze reduce_sum reduce_max reduce_min "
              "argmax dot_general iota slice concatenate stop_gradient").split()
    assert set(wanted) <= names, set(wanted) - names


def f32(x):
    return xform.device_put(np.asarray(x, np.float32))


def test_jaxpr_typechecks_and_evaluates():
    def f(x, y):
        return lax.reduce_sum(lax.mul(lax.sin(x), y), (0,)), lax.add(x, 2.0)
    x, y = f32([1., 2., 3.]), f32([4., 5., 6.])
    closed = xform.make_jaxpr(f)(x, y)
    typecheck(closed.jaxpr)
    got = eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    want = f(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_typecheck_rejects_bad_jaxpr():
    closed = xform.make_jaxpr(lambda x: lax.sin(lax.cos(x)))(f32([1.]))
    jaxpr = closed.jaxpr
    jaxpr.eqns.reverse()  # use before definition
    with pytest.raises(JaxprTypeError, match="used before it is bound"):
        typecheck(jaxpr)


def test_pretty_print_matches_jax_format():
    text = str(xform.make_jaxpr(lambda x: lax.mul(lax.sin(x), 2.0))(f32([1., 2.])))
    assert text == ("{ lambda ; a:f32[2]. let\n"
                    "    b:f32[2] = sin a\n"
                    "    c:f32[2] = mul b 2.0:f32[]\n"
                    "  in (c,) }")
    one = str(xform.make_jaxpr(lax.sin)(1.0))
    assert one == "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }"


def test_nested_jaxpr_prints_inner_jaxpr():
    inner = xform.jit(lax.sin)
    text = str(xform.make_jaxpr(lambda x: inner(lax.cos(x)))(1.0))
    assert "jit[" in text and "jaxpr={ lambda ; " in text and "name=sin" in text


def test_leaked_tracer_raises():
    leaked = []

    @xform.jit
    def f(x):
        leaked.append(x)
        return x

    f(f32([1.]))
    with pytest.raises(xform.errors.UnexpectedTracerError, match="leaked"):
        lax.sin(leaked[0])
    with pytest.raises(xform.errors.UnexpectedTracerError):
        xform.jit(lambda y: lax.add(y, leaked[0]))(f32([1.]))


def test_leaked_grad_tracer_raises():
    leaked = []

    def f(x):
        leaked.append(x)
        return lax.sin(x)

    xform.grad(f)(1.0)
    with pytest.raises(xform.errors.UnexpectedTracerError):
        lax.cos(leaked[0])


def test_eager_primitive_compiled_once():
    x = f32(np.arange(5.0))
    lax.exp(x)
    n = len(dispatch._prim_cache)
    for _ in range(3):
        lax.exp(x)
    assert len(dispatch._prim_cache) == n


def test_python_scalars_are_weakly_typed():
    x = f32([1., 2.])
    y = lax.mul(x, 2)  # the int takes x's dtype
    assert y.dtype == np.float32 and not y.weak_type
    z = xform.jit(lambda a: lax.add(a, 1.0))(3.0)
    assert z.dtype == np.float32 and z.weak_type


def test_perturbation_confusion_avoided():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1  (JAX's classic nested-derivative test)
    def f(x):
        return lax.mul(x, xform.grad(lambda y: lax.add(x, y))(1.0))
    assert float(xform.grad(f)(3.0)) == 1.0


def test_array_basics():
    a = f32([[1., 2.], [3., 4.]])
    assert a.shape == (2, 2) and a.ndim == 2 and a.size == 4 and a.dtype == np.float32
    assert repr(f32([1., 2.])) == "Array([1., 2.], dtype=float32)"
    assert a.tolist() == [[1., 2.], [3., 4.]]
    assert f32(3.0).item() == 3.0
    np.testing.assert_array_equal(np.asarray(a), [[1., 2.], [3., 4.]])
    np.testing.assert_array_equal(np.from_dlpack(a), [[1., 2.], [3., 4.]])
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    assert a.block_until_ready() is a
    assert len(a.devices()) == 1
