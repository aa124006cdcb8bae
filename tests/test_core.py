"""Core invariants: every primitive has every rule; the IR typechecks, prints and
evaluates; tracers don't leak; eager execution caches compiled primitives."""
import jax
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
    "dynamic_slice", "dynamic_update_slice", "gather", "scatter-add", "scatter-sub", "scatter",
    "scatter-mul",
    "rev", "split",
    "custom_lin", "remat", "name",
    "cond",
    "jit",
    "fft",
    "psum", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "xla_pmap",
    "pvary", "psum_invariant", "all_gather_invariant", "ragged_all_to_all", "pbroadcast",
    "device_put",
}
NO_OPERANDS = {"iota", "platform_index", "dim_as_value"}  # nothing to batch or differentiate
# JAX 0.10.2 has no JVP (batching) rule for these either: differentiating (batching) them
# raises its NotImplementedError; a defnondiff rule would give silent zero tangents.
NO_JVP = {"cholesky_update", "geqrf", "hessenberg", "householder_product",
          "lu_pivots_to_permutation", "ormqr", "rng_uniform", "schur", "symmetric_product",
          "tridiagonal"}
NO_BATCHING = {"cholesky_update"}


@pytest.mark.parametrize("prim", all_primitives(), ids=lambda p: p.name)
def test_every_primitive_has_every_rule(prim):
    missing = []
    if prim._abstract_eval is None:
        missing.append("abstract eval")
    if prim.impl is None:
        missing.append("impl")
    if not mlir.has_lowering(prim):
        missing.append("lowering")
    if prim not in ad.primitive_jvps and prim.name not in NO_JVP:
        missing.append("jvp (or defnondiff)")
    if (prim.name not in NO_OPERANDS | NO_BATCHING
            and batching.primitive_batchers.get(prim) is None):
        missing.append("batching")
    if prim.name in LINEAR and prim not in ad.primitive_transposes:
        missing.append("transpose")
    assert not missing, f"primitive {prim.name} lacks: {', '.join(missing)}"


def test_rules_left_out_are_exactly_those_jax_leaves_out():
    from jax._src.interpreters import ad as jax_ad, batching as jax_batching
    import jax._src.lax.linalg as jax_linalg
    import jax._src.lax.lax as jax_lax
    ours = {p.name: p for p in all_primitives()}
    assert {n for n, p in ours.items() if p not in ad.primitive_jvps} == NO_JVP
    assert {n for n, p in ours.items() if batching.primitive_batchers.get(p) is None
            } - NO_OPERANDS == NO_BATCHING
    theirs = {n: getattr(jax_linalg, n + "_p", None) or getattr(jax_lax, n + "_p")
              for n in NO_JVP | NO_BATCHING}
    assert not any(theirs[n] in jax_ad.primitive_jvps for n in NO_JVP)
    assert not any(theirs[n] in jax_batching.fancy_primitive_batchers for n in NO_BATCHING)
    a = np.eye(3, dtype=np.float32) + 0.5
    for lib in (xform, jax):   # the error a user sees
        with pytest.raises(NotImplementedError, match="Differentiation rule for 'schur'"):
            lib.grad(lambda m: lib.lax.linalg.schur(m)[0].sum())(a)


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
    # JAX prints a jaxpr on one line where it fits in 80 columns ("let  in" when empty),
    # params by name
    def fns(lib):
        return [lambda x: lib.lax.mul(lib.lax.sin(x), 2.0), lib.lax.sin, lambda x: x,
                lambda x: (lib.lax.sin(x), lib.lax.cos(x)),
                lambda x: lib.lax.exp(lib.lax.sin(lib.lax.cos(x))),
                lambda x: lib.lax.convert_element_type(x, np.int32),
                lambda x: lib.lax.slice(x, (0,), (1,))]
    for fx, fj in zip(fns(xform), fns(jax)):
        assert str(xform.make_jaxpr(fx)(f32([1., 2.]))) == str(jax.make_jaxpr(fj)(f32([1., 2.])))


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
    y = lax.mul(x, 2.0)  # the float takes x's dtype
    assert y.dtype == np.float32 and not y.weak_type
    z = xform.jit(lambda a: lax.add(a, 1.0))(3.0)
    assert z.dtype == np.float32 and z.weak_type
    for lib in (jax.lax, lax):   # an int beside a float array: JAX's same-dtype rule
        with pytest.raises(TypeError, match="lax.mul requires arguments to have the same"):
            lib.mul(np.ones(2, np.float32), 2)


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
    if xform.default_backend() == "cpu":   # NumPy imports host memory only
        np.testing.assert_array_equal(np.from_dlpack(a), [[1., 2.], [3., 4.]])
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    assert a.block_until_ready() is a
    assert len(a.devices()) == 1


# ---- soundness: conversions that would drop a derivative raise (issue 8, bug 1) ----

@pytest.mark.parametrize("convert,error,message", [
    (float, xform.errors.ConcretizationTypeError, "The problem arose with the `float`"),
    (complex, xform.errors.ConcretizationTypeError, "The problem arose with the `complex`"),
    (np.asarray, xform.errors.TracerArrayConversionError,
     "The numpy.ndarray conversion method __array__() was called on traced array"),
])
@pytest.mark.parametrize("transform", ["grad", "jvp", "jit"])
def test_float_complex_asarray_of_tracer_raise(convert, error, message, transform):
    def f(x):
        return x * convert(x)
    run = {"grad": lambda: xform.grad(f)(3.0),
           "jvp": lambda: xform.jvp(f, (3.0,), (1.0,)),
           "jit": lambda: xform.jit(f)(3.0)}[transform]
    with pytest.raises(error) as info:
        run()
    assert message in str(info.value)


def test_bool_and_int_still_concretize_under_grad():
    # As in JAX: a JVP primal is known, so Python control flow on it works under grad.
    def f(x):
        return x * x if x > 0 else -x * int(x)
    assert float(xform.grad(f)(3.0)) == 6.0
    assert float(xform.grad(f)(-2.0)) == 2.0


# ---- soundness: lax binary ops never truncate a Python scalar (bug 4) ----

@pytest.mark.parametrize("op,x,scalar,message", [
    ("add", np.arange(3, dtype=np.int32), 2.5,
     "lax.add requires arguments to have the same dtypes, got int32, float32"),
    ("lt", np.arange(3, dtype=np.int32), 1.5,
     "lax.lt requires arguments to have the same dtypes, got int32, float32"),
    ("mul", np.arange(3, dtype=np.float32), 1j,
     "lax.mul requires arguments to have the same dtypes, got float32, complex64"),
    ("add", np.arange(3, dtype=np.uint8), 300,
     "lax.add requires arguments to have the same dtypes, got uint8, int32"),
    ("sub", np.arange(3, dtype=np.uint8), -1,
     "lax.sub requires arguments to have the same dtypes, got uint8, int32"),
])
def test_lax_binary_op_rejects_truncating_python_scalar(op, x, scalar, message):
    with pytest.raises(TypeError) as info:
        getattr(lax, op)(x, scalar)
    assert message in str(info.value)
    assert "is a similar function that does automatic type promotion" in str(info.value)
    with pytest.raises(TypeError) as info:   # the scalar first
        getattr(lax, op)(scalar, x)
    assert message.split(", got")[0] in str(info.value)


def test_lax_binary_op_keeps_exact_python_scalars():
    np.testing.assert_array_equal(lax.add(np.arange(3, dtype=np.int32), 2), [2, 3, 4])
    assert lax.add(np.arange(3, dtype=np.int32), 2).dtype == np.int32
    np.testing.assert_allclose(lax.mul(np.ones(2, np.float32), 2.5), [2.5, 2.5])


@pytest.mark.parametrize("wrap", ["checkpoint_name", "remat", "custom_jvp", "custom_vjp"])
def test_leaked_tracer_into_python_impls_raises(wrap):
    # These eager impls run Python (identity / a jaxpr), not one compiled op: they check.
    leaked = []

    def f(x):
        leaked.append(x)
        return lax.sin(x)
    xform.grad(f)(1.0)

    ident = lambda x: x  # noqa: E731
    cj = xform.custom_jvp(ident)
    cj.defjvp(lambda p, t: (p[0], t[0]))
    cv = xform.custom_vjp(ident)
    cv.defvjp(lambda x: (x, None), lambda _, g: (g,))
    if wrap == "checkpoint_name":
        def call(x):
            return xform.ad_checkpoint.checkpoint_name(x, "a")
    else:   # eagerly these call the function; a jaxpr holding the primitive runs its impl
        fun = {"remat": xform.checkpoint(ident), "custom_jvp": cj, "custom_vjp": cv}[wrap]
        closed = xform.make_jaxpr(fun)(1.0)

        def call(x):
            return eval_jaxpr(closed.jaxpr, closed.consts, x)
    with pytest.raises(xform.errors.UnexpectedTracerError, match="outside any transformation"):
        call(leaked[0])


def test_array_and_tracer_share_the_operators_declared_in_core():
    from xform.core import array_ops
    from xform.core.trace import Tracer
    for name in array_ops.METHODS + array_ops.PROPERTIES:
        impl = array_ops.ArrayOps.__dict__[name]
        assert impl is not array_ops._stubs[name], f"{name} not installed"
        assert getattr(xform.Array, name) is getattr(Tracer, name) is (
            impl if name in array_ops.METHODS else getattr(array_ops.ArrayOps, name))
    assert issubclass(xform.Array, array_ops.ArrayOps) and issubclass(Tracer, array_ops.ArrayOps)


# ---- errors point at the user's code (traceback filtering) ----

def _user_fn(x):
    return lax.add(x, np.ones(3, np.float32))   # the user's line: a shape error


def _tb_files(e):
    import traceback
    return [(f.filename, f.lineno) for f in traceback.extract_tb(e.__traceback__)]


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap", "jvp", "scan", "checkpoint"])
def test_traceback_filtering_keeps_user_frames_only(transform):
    import inspect
    import os
    x = np.ones((2, 2), np.float32)
    run = {"jit": lambda: xform.jit(_user_fn)(x),
           "grad": lambda: xform.grad(lambda v: _user_fn(v).sum())(x),
           "vmap": lambda: xform.vmap(_user_fn)(np.ones((2, 2), np.float32)),
           "jvp": lambda: xform.jvp(_user_fn, (x,), (x,)),
           "scan": lambda: lax.scan(lambda c, v: (c, _user_fn(v)), 0.0, x),
           "checkpoint": lambda: xform.grad(lambda v: xform.checkpoint(_user_fn)(v).sum())(x),
           }[transform]
    with pytest.raises(TypeError, match="incompatible shapes|same number of dimensions") \
            as info:   # (vmap and scan see rank-1 operands; the rest ranks 2 and 1)
        run()
    frames = _tb_files(info.value)
    xform_dir = os.path.dirname(xform.__file__)
    line = inspect.getsourcelines(_user_fn)[1] + 1
    assert (__file__, line) in frames
    internal = [f for f, _ in frames if f.startswith(xform_dir)]
    assert len(internal) <= 1, internal   # at most jit's __call__ (the boundary is below it)
    assert "xform has removed its internal frames" in "".join(info.value.__notes__)


def test_traceback_filtering_modes(monkeypatch):
    import os
    xform_dir = os.path.dirname(xform.__file__)
    monkeypatch.setenv("JAX_TRACEBACK_FILTERING", "off")
    with pytest.raises(TypeError) as info:
        xform.grad(lambda v: _user_fn(v).sum())(np.ones((2, 2), np.float32))
    assert sum(f.startswith(xform_dir) for f, _ in _tb_files(info.value)) > 3
    monkeypatch.setenv("JAX_TRACEBACK_FILTERING", "remove_frames")
    with pytest.raises(TypeError) as info:
        xform.grad(lambda v: _user_fn(v).sum())(np.ones((2, 2), np.float32))
    cause = info.value.__cause__
    assert type(cause).__name__ == "UnfilteredStackTrace"
    assert sum(f.startswith(xform_dir) for f, _ in _tb_files(cause)) > 3
    assert not any(f.startswith(xform_dir) for f, _ in _tb_files(info.value))


def _two_ops(x):
    y = lax.sin(x)          # line +1
    return lax.log(y)       # line +2


def test_equations_carry_the_users_source_line():
    import inspect
    first = inspect.getsourcelines(_two_ops)[1]
    eqns = xform.make_jaxpr(_two_ops)(1.0).jaxpr.eqns
    assert [(e.primitive.name, e.source_info.lineno) for e in eqns] == [
        ("sin", first + 1), ("log", first + 2)]
    assert eqns[0].source_info.filename == __file__
    assert eqns[0].source_info.function == "_two_ops"
    # Derived jaxprs (JVP, transpose) inherit the source of the equation they came from.
    grad_eqns = xform.make_jaxpr(xform.grad(_two_ops))(1.0).jaxpr.eqns
    assert {e.source_info.lineno for e in grad_eqns} <= {first + 1, first + 2}
    assert {e.primitive.name for e in grad_eqns} >= {"sin", "cos", "log"}


def test_debug_nans_error_cites_the_users_line(debug_nans):
    import inspect
    first = inspect.getsourcelines(_two_ops)[1]
    with pytest.raises(FloatingPointError, match="invalid value") as info:
        xform.jit(_two_ops)(-1.0)
    notes = "".join(getattr(info.value, "__notes__", []))
    assert f"{__file__}:{first + 2} (_two_ops)" in notes, notes
    assert "log(f32[]) -> f32[]" in notes


def test_shaped_array_vma_hashes_like_its_frozenset():
    # vma given as any iterable is stored (and hashed) as a frozenset; a set used to be
    # hashed as given, which raised TypeError
    from xform.core.avals import ShapedArray
    a = ShapedArray((2,), np.float32, vma={"i"})
    b = ShapedArray((2,), np.float32, vma=frozenset({"i"}))
    assert a == b and hash(a) == hash(b) and a != ShapedArray((2,), np.float32)


def test_jax_core_public_names():
    # `jax.core.Tracer` / `jax.core.ShapedArray` are what users import from jax.core:
    # xform.core had none of its public names
    missing = {"AbstractValue", "eval_context", "ensure_compile_time_eval"}  # (see __init__)
    names = {n for n in dir(jax.core) if not n.startswith("_")} - missing
    assert names and all(hasattr(xform.core, n) for n in names), names
    assert xform.core.max_dim(3, 4) == jax.core.max_dim(3, 4) == 4
    assert str(xform.core.ShapedArray((2,), np.float32)) == \
        str(jax.core.ShapedArray((2,), np.float32))
    seen = []
    xform.jit(lambda x: seen.append(isinstance(x, xform.core.Tracer)))(1.0)
    assert seen == [True]
    with pytest.raises(AttributeError):
        xform.core.no_such_name


def test_jaxpr_effects_as_jax():
    # ClosedJaxpr.effects / Jaxpr.effects / JaxprEqn.effects were missing: a set, empty
    # for a pure program, one effect per kind of effectful primitive (nested ones too)
    def fns(lib):
        cb = lambda y: y  # noqa: E731
        sds = lib.ShapeDtypeStruct((), np.float32)
        io_callback = lib.experimental.io_callback
        return [lambda x: x * 2, lambda x: lib.debug.print("{}", x) or x,
                lib.jit(lambda x: lib.debug.print("{}", x) or x),
                lambda x: io_callback(cb, sds, x), lambda x: lib.pure_callback(cb, sds, x),
                lambda x: lib.lax.cond(x > 0, lambda y: lib.debug.print("a") or y,
                                       lambda y: y, x)]
    import jax.experimental  # noqa: F401
    import xform.experimental  # noqa: F401
    for fx, fj in zip(fns(xform), fns(jax)):
        jx, jj = xform.make_jaxpr(fx)(1.0), jax.make_jaxpr(fj)(1.0)
        assert type(jx.effects) is type(jj.effects) is set
        assert len(jx.effects) == len(jx.jaxpr.effects) == len(jj.effects)
        assert [len(e.effects) for e in jx.eqns] == [len(e.effects) for e in jj.eqns]
