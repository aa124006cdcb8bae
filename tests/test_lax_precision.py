"""lax precision options against JAX: dot algorithms (DotAlgorithm / DotAlgorithmPreset as
precision=) and the transcendental ops' accuracy= (Tolerance / AccuracyMode)."""
import re

import numpy as np
import pytest

import jax
import jax.numpy as jjnp

import xform
import xform.numpy as jnp
from xform import lax

RNG = np.random.RandomState(0)
A = RNG.randn(4, 5).astype(np.float32)
B = RNG.randn(5, 3).astype(np.float32)
CPU_OK = ["DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
          "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"]


def test_preset_properties_match_jax():
    names = lambda ts: None if ts is None else [np.dtype(t).name for t in ts]  # noqa: E731
    assert list(lax.DotAlgorithmPreset.__members__) == list(
        jax.lax.DotAlgorithmPreset.__members__)
    for ours in lax.DotAlgorithmPreset:
        theirs = jax.lax.DotAlgorithmPreset[ours.name]
        assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
        assert names(ours.supported_lhs_types) == names(theirs.supported_lhs_types)
        acc = lambda p: None if p.accumulation_type is None else np.dtype(  # noqa: E731
            p.accumulation_type).name
        assert acc(ours) == acc(theirs)
        for dt in ("float32", "float16", "bfloat16"):
            assert (names(ours.supported_output_types(dt, dt))
                    == names(theirs.supported_output_types(dt, dt))), (ours, dt)


def _algorithm(text):
    m = re.search(r"algorithm = <[^>]*>", text)
    return m and m.group(0)


@pytest.mark.parametrize("name", CPU_OK)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cpu_presets_match_jax(name, dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    for precision in (name, lax.DotAlgorithmPreset[name]):
        got = lax.dot(jnp.asarray(a), jnp.asarray(b), precision=precision)
        want = jax.lax.dot(a, b, precision=name)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    f = lambda L: L.jit(lambda x, y: L.lax.dot(x, y, precision=name)).lower(a, b).as_text()  # noqa: E731
    assert _algorithm(f(xform)) == _algorithm(f(jax))


def test_grad_vmap_jit_and_the_default_option():
    loss = lambda L: lambda x, y: (L.lax.dot(x, y, precision="F16_F16_F16") ** 2).sum()  # noqa: E731
    for g, h in zip(xform.grad(loss(xform), (0, 1))(A, B), jax.grad(loss(jax), (0, 1))(A, B)):
        np.testing.assert_allclose(g, h, rtol=1e-6)
    jaxpr = str(xform.make_jaxpr(xform.grad(loss(xform)))(A, B))
    assert jaxpr.count("precision=F16_F16_F16") == 2  # forward, transpose
    mm = lambda L: L.vmap(lambda x: L.lax.dot(x, B, precision="F16_F16_F16"))  # noqa: E731
    np.testing.assert_array_equal(mm(xform)(A), mm(jax)(A))
    with xform.default_matmul_precision("F16_F16_F16"), \
            jax.default_matmul_precision("F16_F16_F16"):
        np.testing.assert_array_equal(xform.jit(jnp.matmul)(A, B), jax.jit(jjnp.matmul)(A, B))
        x4 = A[None, None, :4, :4]
        np.testing.assert_array_equal(lax.conv(x4, x4, (1, 1), "SAME"),
                                      jax.lax.conv(x4, x4, (1, 1), "SAME"))


def test_unsupported_on_cpu_raises_as_jax():
    for precision in ("TF32_TF32_F32", lax.DotAlgorithm("float32", "float32", "float32")):
        with pytest.raises(ValueError, match="is not supported by dot_general on CPU"):
            lax.dot(A, B, precision=precision)
    with pytest.raises(ValueError, match="lax.DotAlgorithmPreset or its name"):
        lax.dot(A, B, precision="F17_F17_F17")


ACCURATE = ["exp", "log", "sin", "cos", "tanh", "logistic", "sqrt", "rsqrt", "tan", "exp2",
            "expm1", "log1p", "cbrt"]


@pytest.mark.parametrize("mode", ["HIGHEST", "tolerance"])
def test_accuracy_values_gradients_and_attribute_match_jax(mode):
    x = np.linspace(0.1, 2, 5).astype(np.float32)
    acc = {"HIGHEST": (lax.AccuracyMode.HIGHEST, jax.lax.AccuracyMode.HIGHEST),
           "tolerance": (lax.Tolerance(atol=1e-3, ulps=2),
                         jax.lax.Tolerance(atol=1e-3, ulps=2))}[mode]
    attr = lambda text: re.findall(r"result_accuracy = [^}]*", text)  # noqa: E731
    for name in ACCURATE:
        fs = [lambda v, L=L, a=a: getattr(L, name)(v, accuracy=a)
              for L, a in ((lax, acc[0]), (jax.lax, acc[1]))]
        np.testing.assert_array_equal(fs[0](x), fs[1](x), err_msg=name)
        if mode == "HIGHEST":  # (where some derivatives take another form)
            np.testing.assert_allclose(xform.grad(lambda v: fs[0](v).sum())(x),
                                       jax.grad(lambda v: fs[1](v).sum())(x), rtol=1e-6,
                                       err_msg=name)
        if name != "logistic":  # (JAX expands logistic before lowering, dropping it)
            assert attr(xform.jit(fs[0]).lower(x).as_text()) == attr(
                jax.jit(fs[1]).lower(x).as_text()) != [], name
    assert "exp[accuracy=AccuracyMode.HIGHEST]" in str(
        xform.make_jaxpr(lambda v: lax.exp(v, accuracy=lax.AccuracyMode.HIGHEST))(1.0))
    assert "accuracy" not in str(xform.make_jaxpr(lax.exp)(1.0))  # the default: no param


def test_accuracy_errors_match_jax():
    for kwargs in ({}, {"atol": -1.0}):
        with pytest.raises(ValueError) as want:
            jax.lax.Tolerance(**kwargs)
        with pytest.raises(ValueError) as got:
            lax.Tolerance(**kwargs)
        assert str(got.value) == str(want.value)
    with pytest.raises(NotImplementedError, match="Accuracy foo not supported"):
        lax.exp(np.ones(2, np.float32), accuracy="foo")
