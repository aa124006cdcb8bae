"""Host callbacks: debug.print / debug.callback / pure_callback, eagerly and under jit,
vmap and grad, against real JAX (printed text compared verbatim, values and dtypes)."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform.interpreters import partial_eval as pe


def _printer(lib):
    def f(x):
        lib.debug.print("x={x} y={} s={s}", x * 2, x=x, s="static")
        return lib.numpy.sin(x)
    return f


def _transformed(lib, how):
    f = _printer(lib)
    scalar_loss = (lambda x: f(x).sum())
    return {
        "eager": f,
        "jit": lib.jit(f),
        "vmap": lib.vmap(f),
        "jit_vmap": lib.jit(lib.vmap(f)),
        "vmap_jit": lib.vmap(lib.jit(f)),
        "grad": lib.grad(scalar_loss),
        "jit_grad": lib.jit(lib.grad(scalar_loss)),
        "grad_jit": lib.grad(lib.jit(scalar_loss)),
        "vmap_grad": lib.vmap(lib.grad(scalar_loss)),
    }[how]


@pytest.mark.parametrize("how", ["eager", "jit", "vmap", "jit_vmap", "vmap_jit", "grad",
                                 "jit_grad", "grad_jit", "vmap_grad"])
def test_debug_print_matches_jax(how, capfd):
    x = np.array([0.5, 1.5, -2.0], np.float32)
    if how in ("grad", "jit_grad", "grad_jit"):
        x = np.float32(0.75)
    want_val = _transformed(jax, how)(x)
    want = capfd.readouterr().out
    got_val = _transformed(xform, how)(x)
    got = capfd.readouterr().out
    if "vmap" in how:
        # JAX unrolls a vmapped print into unordered callbacks that XLA may reorder;
        # xform runs them in batch order from one callback.
        assert sorted(got.splitlines()) == sorted(want.splitlines())
        assert got.splitlines() == [f"x={v} y={2 * v} s=static" for v in x]
    else:
        assert got == want and want.count("x=") == 1
    np.testing.assert_allclose(np.asarray(got_val), np.asarray(want_val), rtol=1e-6)


def test_debug_print_forms_and_printoptions(capfd):
    def f(lib, x):
        lib.debug.print("no placeholders", x, skip_format_check=True)
        lib.debug.print(ordered=True)("{} {a:.2f}", x, a=x[0])
        with np.printoptions(precision=2):
            lib.debug.print("{}", x / 3)
        lib.debug.print("{0}+{0}", 1)
    x = np.array([1.0, 2.0], np.float32)
    for jitted in (False, True):
        f(jax, x) if not jitted else jax.jit(lambda x: f(jax, x))(x)
        want = capfd.readouterr().out
        f(xform, x) if not jitted else xform.jit(lambda x: f(xform, x))(x)
        assert capfd.readouterr().out == want
    assert "[0.33 0.67]" in want


def test_debug_print_errors():
    with pytest.raises(ValueError, match=r"Unused keyword arguments to `jax.debug.print`: "
                                         r"\['y'\]. You may be passing an f-string"):
        xform.debug.print("{x}", x=1, y=2)
    with pytest.raises(ValueError, match=r"Unused positional arguments to `jax.debug.print`"):
        xform.debug.print("{}", 1, 2)
    with pytest.raises(TypeError, match="two-call form"):
        xform.debug.print(None, 1)
    with pytest.raises(TypeError, match="first argument to jax.debug.callback must be callable"):
        xform.debug.callback(3, 1)


def test_debug_callback_values_under_transformations():
    seen = []

    def f(x, n):
        xform.debug.callback(lambda a, tag, n: seen.append((tag, np.asarray(a), n)), x,
                             "tag", n=n)
        return x * 3.0

    x = jnp.arange(3.0)
    f(x, 7)
    xform.jit(f)(x, 7)
    xform.vmap(f, in_axes=(0, None))(x, 7)
    xform.grad(lambda x: f(x, 7).sum())(x)
    with xform.disable_jit():
        xform.jit(f)(x, 7)
    tags = {t for t, _, _ in seen}
    assert tags == {"tag"}
    arrays = [a.tolist() for _, a, _ in seen]
    assert arrays == [[0, 1, 2], [0, 1, 2], 0, 1, 2, [0, 1, 2], [0, 1, 2]]
    assert [int(n) for _, _, n in seen] == [7] * 7


def test_debug_callback_receives_arrays_like_jax():
    got, want = [], []
    jax.debug.callback(lambda *a: want.extend(a), jjnp.arange(2), 3)
    xform.debug.callback(lambda *a: got.extend(a), jnp.arange(2), 3)
    assert [repr(a) for a in got] == [repr(a) for a in want]
    got.clear()
    xform.jit(lambda x: xform.debug.callback(lambda *a: got.extend(a), x, x > 0))(
        jnp.arange(2))
    assert all(isinstance(a, xform.Array) for a in got)
    assert [a.dtype for a in got] == [np.int32, np.bool_]


def test_debug_print_under_disable_jit(capfd):
    f = xform.jit(lambda x: (xform.debug.print("v={}", x), x + 1)[1])
    with xform.disable_jit():
        f(jnp.float32(2.0))
    assert capfd.readouterr().out == "v=2.0\n"


def test_effects_survive_dce(capfd):
    def f(x):
        xform.debug.print("seen {}", x)
        xform.jit(lambda y: xform.debug.print("inner {}", y))(x + 1)
        return x * 0 + 1.0
    closed = xform.make_jaxpr(f)(1.0)
    pruned, _ = pe.dce_jaxpr(closed.jaxpr)
    names = [e.primitive.name for e in pruned.eqns]
    assert "debug_callback" in names and "jit" in names
    # The print's value is not an output: reverse mode must still run it (once).
    xform.grad(f)(2.0)
    xform.jit(xform.grad(f))(2.0)
    xform.grad(xform.jit(f))(2.0)
    assert capfd.readouterr().out == "seen 2.0\ninner 3.0\n" * 3


# ---- pure_callback ----

def _pure(lib, vmap_method=None, record=None):
    def host(x, y):
        if record is not None:
            record.append((np.shape(x), np.shape(y)))
        return np.sin(np.asarray(x)) * np.asarray(y)

    def f(x, y):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        return lib.pure_callback(host, lib.ShapeDtypeStruct(shape, np.float32), x, y,
                                 vmap_method=vmap_method)
    return f


def test_pure_callback_values_eager_and_jit():
    x = np.array([0.1, 0.2, 0.3], np.float32)
    want = _pure(jax)(x, np.float32(2))
    for f in (_pure(xform), xform.jit(_pure(xform))):
        got = f(x, np.float32(2))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
@pytest.mark.parametrize("in_axes", [(0, None), (1, None), (None, 0)])
def test_pure_callback_vmap_methods(method, in_axes):
    shapes = {(0, None): ((2, 3), (3,)), (1, None): ((3, 2), (3,)), (None, 0): ((3,), (2, 3))}
    x = np.arange(np.prod(shapes[in_axes][0]), dtype=np.float32).reshape(shapes[in_axes][0])
    y = np.linspace(1, 2, np.prod(shapes[in_axes][1]), dtype=np.float32).reshape(
        shapes[in_axes][1])
    want_rec, got_rec, got_jit_rec = [], [], []
    want = jax.vmap(_pure(jax, method, want_rec), in_axes=in_axes)(x, y)
    got = xform.vmap(_pure(xform, method, got_rec), in_axes=in_axes)(x, y)
    got_jit = xform.jit(xform.vmap(_pure(xform, method, got_jit_rec), in_axes=in_axes))(x, y)
    assert got_rec == want_rec and got_jit_rec == want_rec  # what the callback was given
    for g in (got, got_jit):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all",
                                    "legacy_vectorized"])
def test_pure_callback_nested_vmap(method):
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    y = np.arange(4, dtype=np.float32) + 1
    want_rec, got_rec = [], []

    def nested(lib, rec):
        return lib.vmap(lib.vmap(_pure(lib, method, rec), in_axes=(1, None)),
                        in_axes=(0, None))
    want = nested(jax, want_rec)(x, y)
    got = xform.jit(nested(xform, got_rec))(x, y)
    assert got_rec == want_rec
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_pure_callback_pytrees_kwargs_and_nested_vmap():
    def host(d, scale):
        return {"s": np.asarray(d["a"] + d["b"]) * scale, "n": np.asarray(d["a"]).sum()}

    def f(lib, a, b):
        out_type = {"s": lib.ShapeDtypeStruct(a.shape, a.dtype),
                    "n": lib.ShapeDtypeStruct((), a.dtype)}
        return lib.pure_callback(host, out_type, {"a": a, "b": b}, scale=2.0,
                                 vmap_method="sequential")
    a = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    b = np.ones((3, 2, 2), np.float32)
    want = jax.vmap(jax.vmap(lambda a, b: f(jax, a, b)))(a, b)
    got = xform.jit(xform.vmap(xform.vmap(lambda a, b: f(xform, a, b))))(a, b)
    for k in ("s", "n"):
        assert got[k].shape == want[k].shape
        np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]))


def test_pure_callback_may_call_xform_inside():
    f = lambda x: xform.pure_callback(lambda a: jnp.sin(a) * 2,  # noqa: E731
                                      xform.ShapeDtypeStruct(x.shape, x.dtype), x)
    np.testing.assert_allclose(np.asarray(xform.jit(f)(jnp.arange(3.0))),
                               np.sin(np.arange(3.0)) * 2, rtol=1e-6)


def test_pure_callback_scalar_and_bool_results():
    f = xform.jit(lambda x: (
        xform.pure_callback(lambda: 3.0, xform.ShapeDtypeStruct((), np.float32)),
        xform.pure_callback(lambda a: a > 1, xform.ShapeDtypeStruct((3,), np.bool_), x)))
    s, b = f(jnp.arange(3))
    assert s.shape == () and float(s) == 3.0
    assert b.dtype == np.bool_ and np.asarray(b).tolist() == [False, False, True]


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("result, message", [
    (lambda a: np.zeros(2, np.float32),
     r"Incorrect output shape for return value #0: Expected: \(3,\), Actual: \(2,\)"),
    (lambda a: a.astype(np.int32),
     r"Incorrect output dtype for return value #0: Expected: float32, Actual: int32"),
    (lambda a: (a, a), r"Mismatched number of outputs from callback. Expected: 1, Actual: 2"),
])
def test_pure_callback_result_type_errors(jitted, result, message):
    f = lambda x: xform.pure_callback(  # noqa: E731
        lambda a: result(np.asarray(a)), [xform.ShapeDtypeStruct((3,), np.float32)], x)
    f = xform.jit(f) if jitted else f
    with pytest.raises(RuntimeError, match=message):
        f(jnp.arange(3.0))


def test_pure_callback_exception_propagates_from_jit():
    def host(x):
        raise KeyError("boom")
    f = xform.jit(lambda x: xform.pure_callback(host, xform.ShapeDtypeStruct((), np.float32), x))
    with pytest.raises(KeyError, match="boom"):
        f(1.0)
    g = xform.jit(lambda x: xform.debug.callback(host, x))
    with pytest.raises(KeyError, match="boom"):
        g(1.0)


def test_pure_callback_transformation_errors_match_jax():
    x = np.ones(3, np.float32)
    cases = [
        lambda lib: lib.vmap(_pure(lib), in_axes=(0, None))(np.ones((2, 3), np.float32), x),
        lambda lib: lib.grad(lambda x: _pure(lib)(x, x).sum())(x),
        lambda lib: lib.jvp(lambda x: _pure(lib)(x, x), (x,), (x,)),
        lambda lib: lib.jit(lib.grad(lambda x: _pure(lib)(x, x).sum()))(x),
        lambda lib: lib.pure_callback(np.sin, lib.ShapeDtypeStruct((3,), np.float32), x,
                                      vmap_method="foo"),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(jax)
        with pytest.raises(type(want.value)) as got:
            case(xform)
        assert str(got.value) == str(want.value)


def test_pure_callback_result_spec_errors():
    class Spec:
        shape, dtype = (3,), np.float64
    with pytest.raises(ValueError, match="cannot specify 64-bit types when `jax_enable_x64`"):
        xform.pure_callback(np.sin, Spec(), 1.0)
    with pytest.raises(TypeError, match="must have `shape` and `dtype` attributes"):
        xform.pure_callback(np.sin, 3, 1.0)


def test_pure_callback_allowed_in_custom_jvp():
    @xform.custom_jvp
    def f(x):
        return xform.pure_callback(np.sin, xform.ShapeDtypeStruct(x.shape, x.dtype), x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jnp.cos(x) * t
    x = jnp.array([0.1, 0.5], dtype=jnp.float32)
    np.testing.assert_allclose(np.asarray(xform.grad(lambda x: f(x).sum())(x)),
                               np.cos(np.asarray(x)), rtol=1e-6)


def test_docstring_examples():
    import doctest
    from xform import debug
    from xform.interpreters import callback
    for module in (debug, callback):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted and not result.failed, module.__name__


def test_callbacks_inside_control_flow(capfd):
    from xform import lax

    def body(c, x):
        xform.debug.print("c={} x={}", c, x)
        return c + x, c * x
    xs = jnp.arange(3.0)
    want = "c=0.0 x=0.0\nc=0.0 x=1.0\nc=1.0 x=2.0\n"
    for run in (lambda: lax.scan(body, 0.0, xs),   # eager scan: a one-op executable
                lambda: xform.jit(lambda xs: lax.scan(body, 0.0, xs))(xs)):
        run()
        assert capfd.readouterr().out == want

    def f(x):
        return lax.cond(x > 0, lambda x: xform.debug.print("pos {}", x),
                        lambda x: xform.debug.print("neg {}", x), x)
    xform.jit(f)(2.0)
    xform.jit(f)(-3.0)
    assert capfd.readouterr().out == "pos 2.0\nneg -3.0\n"


def test_compile_refuses_callbacks_it_was_not_given():
    from xform import backend
    text = xform.jit(lambda x: xform.debug.print("{}", x)).lower(1.0).as_text()
    assert backend.python_callback_target(backend.platform()) in text
    with pytest.raises(ValueError, match="This module calls host callbacks: pass them"):
        backend.compile(text)


def test_callback_params_equal_for_equal_calls():
    def f(x):
        xform.debug.print("x={x}", x=x)
        xform.debug.callback(np.shape, x, "s")
        return xform.pure_callback(np.sin, xform.ShapeDtypeStruct((), np.float32), x)
    first, second = (xform.make_jaxpr(f)(1.0).jaxpr.eqns for _ in range(2))
    assert [e.params for e in first] == [e.params for e in second]
    assert len({hash(tuple(e.params.items())) for e in first + second}) == 3
    assert "debug_callback[callback=print('x={x}')]" in str(xform.make_jaxpr(f)(1.0))
    g = lambda x: xform.debug.print("y={}", x)  # noqa: E731
    with np.printoptions(precision=2):
        other = xform.make_jaxpr(g)(1.0).jaxpr.eqns[0].params
    assert other != xform.make_jaxpr(g)(1.0).jaxpr.eqns[0].params
