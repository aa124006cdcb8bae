"""Tests for xform.core.dtypes, with jax as the oracle for promotion semantics."""
import itertools
import types
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax._src import dtypes as jax_dtypes

from xform.core import dtypes
from xform.core.config import config

DTYPES = [dtypes.bool_, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
          dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.float16,
          dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.complex64,
          dtypes.complex128]
PY_SCALARS = [True, 3, 2.5, 1j]


class FakeArray:
    """Stands in for an xform/JAX array: a .dtype and an aval.weak_type (both read it)."""

    def __init__(self, dtype, weak_type):
        self.dtype = dtype
        self.aval = types.SimpleNamespace(weak_type=weak_type)

    def __repr__(self):
        return f"FakeArray({self.dtype}, weak={self.aval.weak_type})"


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    old_jax, old_xform = jax.config.jax_enable_x64, config.jax_enable_x64
    jax.config.update("jax_enable_x64", request.param)
    config.update("jax_enable_x64", request.param)
    yield request.param
    jax.config.update("jax_enable_x64", old_jax)
    config.update("jax_enable_x64", old_xform)


def jax_result(*args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns on explicit 64-bit dtypes under x32
        return jax_dtypes.result_type(*args, return_weak_type_flag=True)


def outcome(fn, *args):
    """fn(*args), or the marker "error" if it raises."""
    try:
        return fn(*args)
    except (TypeError, ValueError):
        return "error"


def test_dtype_objects_and_groups():
    assert dtypes.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.float0 == np.dtype([("float0", np.void, 0)])
    assert dtypes.float0 == jax_dtypes.float0
    assert all(isinstance(d, np.dtype) for d in DTYPES)
    narrow = dtypes.narrow_float_dtypes | dtypes.narrow_int_dtypes  # (test_low_dtypes.py)
    assert dtypes.all_dtypes == frozenset(DTYPES) | narrow
    assert dtypes.int_dtypes == dtypes.signed_int_dtypes | dtypes.unsigned_int_dtypes
    assert dtypes.bfloat16 in dtypes.float_dtypes
    assert dtypes.inexact_dtypes == dtypes.float_dtypes | dtypes.complex_dtypes
    assert dtypes.numeric_dtypes == dtypes.all_dtypes - dtypes.bool_dtypes
    assert dtypes.float0 not in dtypes.all_dtypes


def test_promote_types_matches_jax(x64):
    specs = DTYPES + [bool, int, float, complex]
    for a, b in itertools.product(specs, repeat=2):
        expected = jnp.promote_types(a, b)
        got = dtypes.promote_types(a, b)
        assert got == expected and type(got) is type(expected), (a, b, got, expected)


def test_promote_types_specs_and_errors():
    assert dtypes.promote_types("int32", np.float32) == dtypes.float32
    assert dtypes.promote_types("uint8", int) == dtypes.uint8
    assert dtypes.promote_types(int, float) == dtypes.float64  # as in JAX, even under x32
    with pytest.raises(TypeError, match="float0 does not participate"):
        dtypes.promote_types(dtypes.float0, "float32")
    with pytest.raises(TypeError, match="Unsupported dtype object"):
        dtypes.promote_types(object, "float32")
    with pytest.raises(TypeError, match="Cannot interpret 'nope' as a dtype"):
        dtypes.promote_types("nope", "float32")


def _values():
    strong = [np.zeros((), d) for d in DTYPES]
    weak = [FakeArray(d, True) for d in DTYPES]
    return strong + weak + PY_SCALARS


def test_result_type_pairs_match_jax(x64):
    for a, b in itertools.product(_values(), repeat=2):
        assert dtypes.result_type(a, b, return_weak_type_flag=True) == jax_result(a, b), (a, b)
        assert dtypes.result_type(a, b) == jax_result(a, b)[0]


def test_result_type_single_and_all_triples_match_jax(x64):
    values = _values()
    for a in values:
        assert dtypes.result_type(a, return_weak_type_flag=True) == jax_result(a), a
    for args in itertools.product(values, repeat=3):
        assert dtypes.result_type(*args, return_weak_type_flag=True) == jax_result(*args), args
    four = (np.zeros((), np.int8), 3, FakeArray(dtypes.uint8, True), np.zeros((), np.int8))
    assert dtypes.result_type(*four, return_weak_type_flag=True) == jax_result(*four)


def test_result_type_dtype_like_args_match_jax(x64):
    specs = DTYPES + ["int64", "float16", np.int32, np.float64, ml_dtypes.bfloat16,
                      bool, int, float, complex, None]
    for a, b in itertools.product(specs, repeat=2):
        assert dtypes.result_type(a, b, return_weak_type_flag=True) == jax_result(a, b), (a, b)


def test_result_type_weak_examples():
    i8 = np.zeros(3, np.int8)
    assert dtypes.result_type(i8, 1) == dtypes.int8
    assert dtypes.result_type(i8, 1, return_weak_type_flag=True) == (dtypes.int8, False)
    assert dtypes.result_type(np.zeros(3, np.int32), 1.0,
                              return_weak_type_flag=True) == (dtypes.float32, True)
    assert dtypes.result_type(1, 2.0, return_weak_type_flag=True) == (dtypes.float32, True)
    assert dtypes.result_type(True, return_weak_type_flag=True) == (dtypes.bool_, False)
    assert dtypes.result_type(FakeArray(dtypes.int16, True),
                              return_weak_type_flag=True) == (dtypes.int32, True)


def test_result_type_cache_follows_x64_flag(x64):
    args = (np.zeros(2, np.int64), 1.0)
    expected = dtypes.float64 if x64 else dtypes.float32
    assert dtypes.result_type(*args) == expected
    assert dtypes.result_type(1) == (dtypes.int64 if x64 else dtypes.int32)


def test_result_type_weak_type_attribute():
    class WithAttr:
        dtype = dtypes.float16
        weak_type = True
    assert dtypes.result_type(WithAttr(), return_weak_type_flag=True) == (dtypes.float32, True)
    assert dtypes.result_type(WithAttr(), np.zeros((), np.float16),
                              return_weak_type_flag=True) == (dtypes.float16, False)


def test_result_type_errors():
    with pytest.raises(TypeError, match="needs at least one argument"):
        dtypes.result_type()
    with pytest.raises(TypeError, match="Unsupported dtype object"):
        dtypes.result_type(np.zeros(2, object), 1)
    with pytest.raises(TypeError, match="float0 does not participate"):
        dtypes.result_type(np.zeros((), dtypes.float0), 1.0)
    assert dtypes.result_type(np.zeros((), dtypes.float0), dtypes.float0) == dtypes.float0


def test_canonicalize_dtype(x64):
    for d in DTYPES + [dtypes.float0]:
        assert dtypes.canonicalize_dtype(d) == jax_dtypes.canonicalize_dtype(d), d
    mapping = {int: "int64", float: "float64", complex: "complex128", bool: "bool"}
    for typ, wide in mapping.items():
        expected = np.dtype(wide) if x64 else jax_dtypes.canonicalize_dtype(wide)
        assert dtypes.canonicalize_dtype(typ) == expected
    assert dtypes.canonicalize_dtype("uint64") == (dtypes.uint64 if x64 else dtypes.uint32)
    assert dtypes.canonicalize_dtype(np.float16) == dtypes.float16


def test_canonicalize_dtype_errors():
    with pytest.raises(TypeError, match=r"Unsupported dtype object \(from <class 'object'>\)"):
        dtypes.canonicalize_dtype(object)
    with pytest.raises(TypeError, match=r"Unsupported dtype \|S3 \(from 'S3'\): xform supports"):
        dtypes.canonicalize_dtype("S3")
    with pytest.raises(TypeError, match="Cannot interpret 'float33' as a dtype"):
        dtypes.canonicalize_dtype("float33")


def test_public_canonicalize_dtype_and_extended_dtypes():
    # jax.dtypes.canonicalize_dtype takes a key dtype only with allow_extended_dtype
    import xform
    for L in (jax, xform):
        kd = L.random.key(0).dtype
        assert str(L.dtypes.canonicalize_dtype(kd, allow_extended_dtype=True)) == "key<fry>"
        with pytest.raises(ValueError, match="allow_extended_dtype=False"):
            L.dtypes.canonicalize_dtype(kd)
        assert L.dtypes.canonicalize_dtype(np.int64, True) == np.int32
    assert sorted(n for n in dir(xform.dtypes) if not n.startswith("_")) == sorted(
        n for n in dir(jax.dtypes) if not n.startswith("_"))


def test_default_dtypes(x64):
    assert dtypes.default_int_dtype() == jax_dtypes.default_int_dtype()
    assert dtypes.default_uint_dtype() == jax_dtypes.default_uint_dtype()
    assert dtypes.default_float_dtype() == jax_dtypes.default_float_dtype()
    assert dtypes.default_complex_dtype() == jax_dtypes.default_complex_dtype()
    expected = {bool: dtypes.bool_, int: dtypes.default_int_dtype(),
                float: dtypes.default_float_dtype(), complex: dtypes.default_complex_dtype()}
    assert dict(dtypes.python_scalar_dtypes) == expected
    assert np.dtype("int64") not in dtypes.python_scalar_dtypes


def test_dtype_of_values(x64):
    for v in PY_SCALARS + [np.zeros(2, d) for d in DTYPES] + [np.float32(1), np.int64(1)]:
        assert dtypes.dtype(v) == jax_dtypes.dtype(v), v
    for spec in DTYPES + ["float64", np.int16, int, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert dtypes.dtype(spec) == jax_dtypes.dtype(spec), spec
    assert dtypes.dtype(np.zeros(2, np.int64), canonicalize=False) == dtypes.int64
    assert dtypes.dtype(FakeArray(dtypes.bfloat16, True)) == dtypes.bfloat16
    assert dtypes.dtype(dtypes.float0) == dtypes.float0


def test_dtype_errors():
    with pytest.raises(TypeError, match="Unsupported dtype object \\(from a ndarray\\)"):
        dtypes.dtype(np.zeros(2, object))
    with pytest.raises(TypeError, match="Unsupported dtype <U1"):
        dtypes.dtype("U1")
    with pytest.raises(TypeError, match="Cannot interpret a list as a dtype"):
        dtypes.dtype([1, 2])
    with pytest.raises(ValueError, match="dtype\\(None\\) is ambiguous"):
        dtypes.dtype(None)


def test_is_weakly_typed():
    assert dtypes.is_weakly_typed(1) and dtypes.is_weakly_typed(1.0)
    assert dtypes.is_weakly_typed(1j)
    assert not dtypes.is_weakly_typed(True)
    assert not dtypes.is_weakly_typed(np.float64(1.0))  # a float subclass, but strong
    assert not dtypes.is_weakly_typed(np.zeros(2))
    assert dtypes.is_weakly_typed(FakeArray(dtypes.float32, True))
    assert not dtypes.is_weakly_typed(FakeArray(dtypes.float32, False))
    assert dtypes.is_weakly_typed(types.SimpleNamespace(weak_type=True))


CATEGORIES = [np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger,
              np.inexact, np.floating, np.complexfloating, np.bool_]


def test_issubdtype_matches_jax():
    for a, b in itertools.product(DTYPES, DTYPES + CATEGORIES):
        assert dtypes.issubdtype(a, b) == jnp.issubdtype(a, b), (a, b)
    for a, b in [(ml_dtypes.bfloat16, np.floating), ("bfloat16", np.inexact), (int, np.integer),
                 (np.float32, "float32"), (dtypes.float0, np.floating),
                 (dtypes.float0, dtypes.float0), (dtypes.float0, np.generic)]:
        assert dtypes.issubdtype(a, b) == jnp.issubdtype(a, b), (a, b)
    assert not dtypes.issubdtype(np.dtype("V8"), dtypes.float0)  # NB: JAX says True


def test_predicates():
    kinds = {"b": dtypes.is_bool, "i": dtypes.is_integer, "f": dtypes.is_floating,
             "c": dtypes.is_complex}
    for d in DTYPES:
        kind = "f" if d == dtypes.bfloat16 else {"u": "i"}.get(d.kind, d.kind)
        for k, pred in kinds.items():
            assert pred(d) == (k == kind), (d, k)
        assert dtypes.is_unsigned(d) == (d.kind == "u")
        assert dtypes.is_inexact(d) == (kind in "fc")
    assert dtypes.is_floating("bfloat16") and dtypes.is_integer(int) and dtypes.is_bool(bool)
    assert not dtypes.is_floating(dtypes.float0) and not dtypes.is_integer("S3")


def test_finfo_iinfo():
    assert float(dtypes.finfo(dtypes.bfloat16).eps) == 2.0 ** -7
    assert dtypes.finfo("bfloat16").bits == 16
    assert dtypes.finfo(np.float32).eps == np.finfo(np.float32).eps
    assert dtypes.finfo(dtypes.complex64).dtype == dtypes.float32
    assert dtypes.iinfo("int8").min == -128 and dtypes.iinfo(np.uint16).max == 65535
    with pytest.raises(ValueError, match="finfo\\(\\) needs a floating or complex dtype, got int32"):
        dtypes.finfo("int32")
    with pytest.raises(ValueError, match="iinfo\\(\\) needs an integer dtype, got float32"):
        dtypes.iinfo(np.float32)


def test_to_inexact_dtype(x64):
    for d in DTYPES:
        expected = jax_dtypes.canonicalize_dtype(jax_dtypes.to_inexact_dtype(d))
        assert dtypes.to_inexact_dtype(d) == expected, d
    assert dtypes.to_inexact_dtype(int) == (dtypes.float64 if x64 else dtypes.float32)


def test_scalar_type_of(x64):
    for v in PY_SCALARS + [np.zeros(2, d) for d in DTYPES]:
        assert dtypes.scalar_type_of(v) is jax_dtypes.scalar_type_of(v), v
    with pytest.raises(TypeError, match="has no Python scalar type"):
        dtypes.scalar_type_of(np.zeros((), dtypes.float0))


def test_module_does_not_import_jax():
    import xform.core.dtypes as mod
    source = open(mod.__file__).read()
    assert "import jax" not in source and "from jax" not in source
