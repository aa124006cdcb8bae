"""xform.ffi against jax.ffi: jaxlib's registered LAPACK targets and docs/ffi.md's C++
kernel (compiled here; the doc's example runs too), called eagerly, under jit and under
vmap (every vmap_method), compared with JAX and NumPy; the lowered custom calls compared
attribute by attribute with JAX's; and JAX's errors."""
import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import jax
import numpy as np
import pytest
from jaxlib import lapack

import xform
from xform.core.array import Array as ConcreteArray

METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
           "legacy_vectorized"]
L = np.uint8(ord("L"))


@pytest.fixture(scope="module", autouse=True)
def _lapack_ready():
    lapack.prepare_lapack_call("potrf_ffi", np.dtype(np.float32))  # loads LAPACK


def _spd(*batch, n=3, seed=0):
    a = np.random.RandomState(seed).randn(*batch, n, n).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


def _potrf(api, n=3, **kw):
    """LAPACK's Cholesky (column-major in and out, as jax.lax.linalg calls it)."""
    return api.ffi.ffi_call("lapack_spotrf_ffi", (
        api.ShapeDtypeStruct((n, n), np.float32), api.ShapeDtypeStruct((), np.int32)),
        input_layouts=[(1, 0)], output_layouts=[(1, 0), ()], **kw)


# ---- the lowered custom call, attribute by attribute ----

def _split_top(s):
    """``a = x, b = {c = y, d = z}`` -> {"a": "x", "b": "{c = y, d = z}"}."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        depth += ch in "{[(<" or -(ch in "}])>" and s[i - 1] != "-")
        if ch == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return dict(p.strip().split(" = ", 1) for p in parts if p.strip())


def _custom_call(text):
    """The (one) custom call of a lowered module: target, attributes, signature; the
    dict backend_config read from where each writes it (JAX: mhlo.backend_config with
    api_version 1; xform: backend_config with api_version 4, which XLA reads alike)."""
    line, = [ln for ln in text.splitlines() if "stablehlo.custom_call" in ln]
    m = re.search(r"custom_call @(\w+)\(.*?\) \{(.*)\} : (\(.*)$", line)
    target, attrs, signature = m.groups()
    attrs = _split_top(attrs)
    if "mhlo.backend_config" in attrs:  # JAX's typed-FFI call
        assert attrs.pop("backend_config") == '""' and "api_version" not in attrs
        attrs["backend_config"] = attrs.pop("mhlo.backend_config")
        attrs["api_version"] = "4 : i32"
    attrs.setdefault("has_side_effect", "false")
    if attrs.get("output_operand_aliases") == "[]":
        del attrs["output_operand_aliases"]
    return target, attrs, signature


def _same_call(fx, fj, *args):
    x = _custom_call(xform.jit(fx).lower(*args).as_text())
    j = _custom_call(jax.jit(fj).lower(*args).as_text())
    assert x == j
    return x


def test_lowered_attributes_layouts_aliases_match_jax():
    attrs = dict(i=1, f=2.5, b=True, f32=np.float32(3), arr=np.arange(3, dtype=np.int32),
                 farr=np.ones((2, 2), np.float32), s="text", t=np.dtype(np.float16),
                 seq=(1, 2), d={"k": 1, "v": np.int8(-2)}, u8=L)

    def call(api):
        f = api.ffi.ffi_call("some_target", (api.ShapeDtypeStruct((2, 3), np.float32),
                                             api.ShapeDtypeStruct((4,), np.int32)),
                             has_side_effect=True, input_output_aliases={0: 0},
                             input_layouts=[(0, 1), None], output_layouts=[(0, 1), None])
        return lambda x, y: f(x, y, **attrs)
    _, got, _ = _same_call(call(xform), call(jax), np.ones((2, 3), np.float32),
                           np.ones((5,), np.int8))
    # (Python int/float are i64/f64 even with x64 off: an FFI kernel decodes by type)
    assert "i = 1 : i64" in got["backend_config"] and ": f64" in got["backend_config"]
    assert got["has_side_effect"] == "true"


def test_legacy_call_lowers_as_jax():
    """custom_call_api_version < 4: the attributes are an opaque string."""
    def legacy(api):
        return api.ffi.ffi_call("old_target", api.ShapeDtypeStruct((2,), np.float32),
                                custom_call_api_version=2, legacy_backend_config="opaque")
    _, got, _ = _same_call(legacy(xform), legacy(jax), np.ones(2, np.float32))
    assert got["api_version"] == "2 : i32" and got["backend_config"] == '"opaque"'


@pytest.mark.parametrize("method", METHODS)
def test_vmapped_call_lowers_as_jax(method):
    """Operand broadcasting and layouts per vmap_method, with an unbatched operand."""
    def call(api):
        f = api.ffi.ffi_call("some_target", api.ShapeDtypeStruct((2, 3), np.float32),
                             vmap_method=method, input_layouts=[(0, 1), None])
        return api.vmap(lambda x, y: f(x, y, k=1), in_axes=(0, None))
    _same_call(call(xform), call(jax), np.ones((4, 2, 3), np.float32),
               np.ones((5,), np.int32))


def test_side_effect_kept_when_unused():
    """A call with has_side_effect survives dead-code elimination; a pure one does not."""
    from xform.interpreters import partial_eval as pe

    def call(api, side):
        f = api.ffi.ffi_call("some_target", api.ShapeDtypeStruct((), np.float32),
                             has_side_effect=side)
        return lambda x: (f(x), x)[1]
    for side in (True, False):
        pruned, _ = pe.dce_jaxpr(xform.make_jaxpr(call(xform, side))(np.float32(1)).jaxpr)
        kept = "custom_call" in jax.jit(call(jax, side)).lower(np.float32(1)).as_text()
        assert kept == side == any(e.primitive.name == "ffi_call" for e in pruned.eqns)


# ---- jaxlib's LAPACK targets, run ----

def test_lapack_potrf_eager_and_jit_match_jax_and_numpy():
    x = _spd()
    for wrap in (lambda api, f: f, lambda api, f: api.jit(f)):
        cx, ix = wrap(xform, lambda x: _potrf(xform)(x, uplo=L))(x)
        cj, ij = wrap(jax, lambda x: _potrf(jax)(x, uplo=L))(x)
        assert type(cx) is ConcreteArray and int(ix) == int(ij) == 0
        np.testing.assert_array_equal(np.tril(cx), np.tril(cj))
        np.testing.assert_allclose(np.tril(cx), np.linalg.cholesky(x), rtol=1e-5)
    _same_call(lambda x: _potrf(xform, input_output_aliases={0: 0})(x, uplo=L),
               lambda x: _potrf(jax, input_output_aliases={0: 0})(x, uplo=L), x)


def test_lapack_getrf_list_results_match_jax():
    """Three results from a list (a list back, as JAX's); a wide matrix; no attributes."""
    a = np.random.RandomState(2).randn(3, 4).astype(np.float32)

    def getrf(api):
        return api.ffi.ffi_call("lapack_sgetrf_ffi", [
            api.ShapeDtypeStruct(a.shape, a.dtype), api.ShapeDtypeStruct((3,), np.int32),
            api.ShapeDtypeStruct((), np.int32)], input_layouts=[(1, 0)],
            output_layouts=[(1, 0), None, None])
    lapack.prepare_lapack_call("getrf_ffi", np.dtype(np.float32))
    got, want = getrf(xform)(a), getrf(jax)(a)
    assert type(got) is list and len(got) == 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("method", METHODS)
def test_lapack_potrf_vmap_methods(method):
    xs = _spd(2, seed=1)
    cx, ix = xform.jit(xform.vmap(lambda x: _potrf(xform, vmap_method=method)(x, uplo=L)))(xs)
    cj, ij = jax.vmap(lambda x: _potrf(jax, vmap_method=method)(x, uplo=L))(xs)
    np.testing.assert_allclose(np.tril(cx), np.tril(cj), rtol=1e-6)
    np.testing.assert_allclose(np.tril(cx), np.linalg.cholesky(xs), rtol=1e-5)
    np.testing.assert_array_equal(ix, ij)


def test_ffi_lowering_for_a_users_primitive():
    """ffi_lowering as a lowering rule of one's own primitive (JAX's documented use)."""
    from xform.core.avals import ShapedArray
    from xform.core.trace import Primitive
    from xform.interpreters import mlir
    from xform.lax._prim import standard_primitive
    p = standard_primitive("my_spotrf", lambda x, **_: [x, ShapedArray((), np.int32)],
                           multiple_results=True)
    try:
        mlir.register_lowering(p, xform.ffi.ffi_lowering(
            "lapack_spotrf_ffi", operand_layouts=[(0, 1)], result_layouts=[(0, 1), ()]))
        x = _spd()
        c, info = xform.jit(lambda x: p.bind(x, uplo=L))(x)
        np.testing.assert_allclose(np.tril(c), np.linalg.cholesky(x), rtol=1e-5)
        assert int(info) == 0
    finally:
        Primitive.registry.remove(p)


# ---- a C++ kernel compiled against include_dir() ----

DOC = Path(__file__).resolve().parents[1] / "docs" / "ffi.md"


def _doc_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture(scope="session")
def affine_target(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++/c++) on PATH: the FFI kernel test compiles one")
    d = tmp_path_factory.mktemp("ffi_kernel")
    (d / "affine.cc").write_text(_doc_blocks("cpp")[0])  # docs/ffi.md's kernel
    subprocess.run([cxx, "-O0", "-w", "-std=c++17", "-shared", "-fPIC",
                    f"-I{xform.ffi.include_dir()}", "affine.cc", "-o", "libaffine.so"],
                   cwd=d, check=True, capture_output=True, timeout=120)
    lib = ctypes.cdll.LoadLibrary(str(d / "libaffine.so"))
    xform.ffi.register_ffi_target("xform_test_affine", xform.ffi.pycapsule(lib.Affine))
    return "xform_test_affine", d / "libaffine.so"


def _affine(api, target, shape, method=None):
    f = api.ffi.ffi_call(target, api.ShapeDtypeStruct(shape, np.float32),
                         vmap_method=method)
    return lambda x: f(x, scale=2.5, shift=3, offsets=np.array([0.5, -1.0], np.float32))


def test_cpp_kernel_eager_jit_vmap(affine_target):
    affine_target, _ = affine_target
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x * 2.5 + np.resize(np.array([0.5, -1.0], np.float32), 6).reshape(2, 3) + 3
    for api in (xform, jax):  # registered once (by xform), called from both
        f = _affine(api, affine_target, (2, 3))
        np.testing.assert_array_equal(f(x), want)
        np.testing.assert_array_equal(api.jit(f)(x), want)
    row = _affine(xform, affine_target, (3,), "sequential")
    np.testing.assert_array_equal(xform.vmap(row)(x), jax.vmap(
        _affine(jax, affine_target, (3,), "sequential"))(x))
    np.testing.assert_array_equal(xform.vmap(row)(x)[1], want[0] + 3 * 2.5)
    _same_call(_affine(xform, affine_target, (2, 3)), _affine(jax, affine_target, (2, 3)), x)


def test_doc_example_runs(affine_target):
    code, = _doc_blocks("python")
    exec(code.replace("./libaffine.so", str(affine_target[1])), {})  # noqa: S102


# ---- errors, as JAX's ----

def _same_error(fx, fj):
    with pytest.raises(Exception) as ej:
        fj()
    with pytest.raises(type(ej.value)) as ex:
        fx()
    assert str(ex.value) == str(ej.value)


def test_errors_match_jax():
    x = _spd()
    s = lambda api: api.ShapeDtypeStruct((), np.float32)  # noqa: E731
    bad = object()  # (printed in the message: the same object for both)
    for make in [
        lambda api: api.ffi.ffi_call("t", [s(api), bad]),
        lambda api: api.ffi.ffi_call("t", s(api), vmap_method="vectorized"),
        lambda api: api.ffi.ffi_call("t", s(api), legacy_backend_config="opaque"),
        lambda api: api.ffi.ffi_call("t", s(api), input_layouts=[None, None])(1.0),
        lambda api: api.ffi.ffi_call("t", s(api), input_output_aliases={0: 0})(
            np.ones(2, np.float32)),
        lambda api: api.ffi.ffi_call("t", s(api))(1.0, bad=[1]),
        lambda api: api.ffi.register_ffi_type_id("t", None),
        lambda api: api.grad(lambda x: _potrf(api)(x, uplo=L)[0].sum())(x),
        lambda api: api.vmap(lambda x: _potrf(api)(x, uplo=L))(x[None]),
    ]:
        _same_error(lambda: make(xform), lambda: make(jax))


def test_include_dir_and_pycapsule():
    assert xform.ffi.include_dir() == jax.ffi.include_dir()
    fn = ctypes.CFUNCTYPE(None)(lambda: None)
    assert type(xform.ffi.pycapsule(fn)).__name__ == "PyCapsule"


def test_doctests():
    import doctest
    r = doctest.testmod(xform.ffi, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert r.attempted > 0 and r.failed == 0
