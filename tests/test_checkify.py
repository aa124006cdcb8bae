"""xform.experimental.checkify vs jax.experimental.checkify: each case runs the same code
on both libraries and compares ``err.get()`` and the outputs; then the errors of
unfunctionalized and malformed checks, and docs/checkify.md's examples."""
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax import lax as jlax
from jax.experimental import checkify as jck
from jax.sharding import Mesh as JMesh, PartitionSpec as JP

import xform
import xform.numpy as xjnp
from xform import lax as xlax
from xform.experimental import checkify as xck
from xform.sharding import Mesh as XMesh, PartitionSpec as XP

JAX = SimpleNamespace(jax=jax, jnp=jjnp, lax=jlax, ck=jck, Mesh=JMesh, P=JP)
XF = SimpleNamespace(jax=xform, jnp=xjnp, lax=xlax, ck=xck, Mesh=XMesh, P=XP)


def _chk(m):
    def chk(x):
        m.ck.check(m.jnp.all(x < 5), "x={x} too big", x=x)
        return x
    return chk


def _cases():
    c = {}

    def case(name, *args, errors="all_checks"):
        def deco(build):
            c[name] = (build, args, errors)
            return build
        return deco

    @case("user_batch", np.array([1., 7., 9.], np.float32))
    @case("user_fail", np.float32(7))
    @case("user_pass", np.float32(1))
    def _(m):
        return _chk(m)

    @case("nan_batch", np.array([[1., -1.], [1., 2.], [-1., 0.]], np.float32))
    @case("nan", np.array([1., -1.], np.float32))
    def _(m):
        return m.jnp.log

    @case("div_int", np.arange(3), np.array([1, 0, 2]))
    def _(m):
        return lambda x, y: x // y

    @case("oob_gather", np.arange(3.), np.int32(5))
    @case("oob_negative", np.arange(3.), np.int32(-5))
    def _(m):
        return lambda x, i: x[i]

    @case("oob_static_int", np.arange(6.).reshape(2, 3))   # JAX: dynamic_slice, checked
    def _(m):
        return lambda x: (x[1, 5], x[-3], x[0, -1])

    @case("oob_scatter", np.arange(3.), np.int32(4))
    def _(m):
        return lambda x, i: x.at[m.jnp.array([0, i])].add(1.)

    @case("oob_update_slice", np.arange(3.), np.int32(2))
    def _(m):
        return lambda x, i: m.lax.dynamic_update_slice(x, m.jnp.ones(2), (i,))

    @case("errors_minus_nan", np.float32(-1), errors="minus")
    @case("user_only", np.float32(-1), errors="user_checks")
    def _(m):
        return lambda x: m.jnp.log(_chk(m)(x))

    @case("jit_inside", np.float32(9))
    def _(m):
        return m.jax.jit(lambda x: m.jnp.sin(_chk(m)(x)))

    @case("vmap_inside", np.array([1., -2., 6., 7.], np.float32))
    def _(m):
        return m.jax.vmap(lambda x: m.jnp.log(_chk(m)(x)))

    @case("vmap_jit", np.array([1., 6., 7.], np.float32))
    def _(m):
        return m.jax.vmap(m.jax.jit(_chk(m)))

    @case("grad_inside", np.float32(9))
    @case("grad_nan", np.float32(-1))
    def _(m):
        return m.jax.grad(lambda x: m.jnp.sqrt(_chk(m)(x)))

    @case("scan", np.array([1., 6., -1., 7.], np.float32))
    def _(m):
        def body(c, x):
            return c + _chk(m)(x), m.jnp.log(x)
        return lambda xs: m.lax.scan(body, 0., xs)

    @case("while", np.float32(1))
    def _(m):
        def cond(c):
            m.ck.check(c[0] < 10, "cond {}", c[0])
            return c[1] < 5
        return lambda x: m.lax.while_loop(
            cond, lambda c: (_chk(m)(c[0]) * 2, c[1] + 1), (x, 0))

    @case("cond_true", np.bool_(True), np.float32(7))
    @case("cond_false", np.bool_(False), np.float32(-7))
    def _(m):
        return lambda p, x: m.lax.cond(p, lambda x: _chk(m)(x) * 2, m.jnp.log, x)

    @case("custom_jvp_grad", np.float32(8))
    def _(m):
        f = m.jax.custom_jvp(lambda x: m.jnp.sin(_chk(m)(x)))
        f.defjvp(lambda p, t: (f(p[0]), 2. * t[0]))
        return m.jax.grad(f)

    @case("custom_vjp_grad", np.float32(8))
    def _(m):
        f = m.jax.custom_vjp(lambda x: m.jnp.sin(_chk(m)(x)))
        f.defvjp(lambda x: (f(x), x), lambda r, g: (3. * g,))
        return m.jax.grad(f)

    @case("remat_grad", np.float32(7))
    def _(m):
        return m.jax.grad(m.jax.checkpoint(lambda x: m.jnp.log(_chk(m)(x))))

    @case("check_error", np.float32(8))
    def _(m):
        def f(x):
            err, y = m.ck.checkify(_chk(m))(x)
            m.ck.check_error(err)
            return y
        return f

    @case("debug_check", np.float32(-1))
    def _(m):
        return lambda x: m.ck.debug_check(x > 0, "dbg {}", x)

    @case("pytree", {"a": np.float32(1), "b": np.int32(2)})
    def _(m):
        return lambda d: {"a": _chk(m)(d["a"]), "b": [d["b"] // 0]}

    @case("fmt_pytree_batch", np.array([[1., 2.], [-1., 3.], [4., 5.]], np.float32))
    def _(m):
        return lambda x: m.ck.check(m.jnp.all(x[0] < 0), "{} and {d} {}", [x, x * 2], x,
                                    d={"k": x[1]})

    @case("pmap", np.arange(4, dtype=np.float32) * 2 - 1)
    def _(m):
        return m.jax.pmap(lambda x: m.jnp.log(_chk(m)(x)))

    @case("shard_map", np.arange(4, dtype=np.float32) * 2 - 1)
    def _(m):
        mesh = m.Mesh(np.array(m.jax.devices()[:4]), ("i",))
        return m.jax.shard_map(lambda x: m.jnp.log(_chk(m)(x)), mesh=mesh,
                               in_specs=m.P("i"), out_specs=m.P("i"))
    return c


CASES = _cases()


def _errors(m, name):
    if name == "minus":
        return m.ck.all_checks - m.ck.nan_checks
    return getattr(m.ck, name)


def _run(m, name, outer=None):
    build, args, errors = CASES[name]
    checked = m.ck.checkify(build(m), errors=_errors(m, errors))
    if outer is not None:
        checked = getattr(m.jax, outer)(checked)
    args = m.jax.tree_util.tree_map(m.jnp.asarray, args)
    err, out = checked(*args)
    return err.get(), m.jax.tree_util.tree_map(np.asarray, out)


def _compare(name, outer=None):
    want_msg, want = _run(JAX, name, outer)
    got_msg, got = _run(XF, name, outer)
    assert got_msg == want_msg
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, want)
    return got_msg


@pytest.mark.parametrize("name", sorted(CASES))
def test_checkify_matches_jax(name):
    if name in ("pmap", "shard_map") and jax.local_device_count() < 4:
        pytest.skip("needs 4 devices of the default platform (a 1-GPU machine has one)")
    msg = _compare(name)
    assert (msg is None) == (name in ("user_pass", "errors_minus_nan", "user_only"))


# vmap of checkify: a batched error, one line per failing index
@pytest.mark.parametrize("name,outer", [("user_fail", "jit"), ("scan", "jit"),
                                        ("oob_static_int", "jit"),
                                        ("nan_batch", "vmap"), ("user_batch", "vmap"),
                                        ("fmt_pytree_batch", "vmap")])
def test_transformed_checkify_matches_jax(name, outer):
    assert _compare(name, outer) is not None


def test_grad_through_checkify_output():
    def loss(m, x):
        return m.jnp.sin(m.ck.checkify(_chk(m), errors=m.ck.all_checks)(x)[1]) ** 2
    got = xform.grad(lambda x: loss(XF, x))(xjnp.float32(2.))
    want = jax.grad(lambda x: loss(JAX, x))(jjnp.float32(2.))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_error_api_and_raising():
    err, _ = xck.checkify(_chk(XF))(xjnp.float32(7))
    with pytest.raises(xck.JaxRuntimeError, match=re.escape("x=7.0 too big (`check` failed)")):
        err.throw()
    assert isinstance(err.get_exception(), xck.FailedCheckError)
    assert issubclass(xck.JaxRuntimeError, ValueError)
    assert issubclass(xck.JaxRuntimeError, xform.errors.JaxRuntimeError)
    assert str(err) == "Error(x=7.0 too big (`check` failed))"
    ok, _ = xck.checkify(_chk(XF))(xjnp.float32(1))
    assert ok.get() is None and ok.get_exception() is None
    ok.throw()
    xck.check_error(ok)
    for name in ("user_checks", "nan_checks", "index_checks", "div_checks", "float_checks",
                 "automatic_checks", "all_checks"):
        names = lambda ck: sorted(c.__name__ for c in getattr(ck, name))  # noqa: E731
        assert names(xck) == names(jck)


@pytest.mark.parametrize("how", ["throw", "check_error", "rechecked"])
def test_batched_error_raises_last_failing_element_as_jax(how):
    def go(m):
        err, _ = m.jax.vmap(m.ck.checkify(_chk(m)))(m.jnp.array([1., 7., 9., 2.]))
        if how == "rechecked":
            return m.ck.checkify(err.throw)()[0].get()
        with pytest.raises(m.ck.JaxRuntimeError) as info:
            err.throw() if how == "throw" else m.ck.check_error(err)
        return str(info.value)
    assert go(XF) == go(JAX)


def _messages(m, fn):
    with pytest.raises(Exception) as info:
        fn(m)
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize("what", ["eager", "jit", "vector_pred", "int_pred", "float_fmt_arg",
                                  "check_error_type"])
def test_unfunctionalized_and_bad_checks_raise_as_jax(what):
    cases = {
        "eager": lambda m: _chk(m)(m.jnp.float32(7)),
        "jit": lambda m: m.jax.jit(_chk(m))(m.jnp.float32(7)),
        "vector_pred": lambda m: m.ck.check(m.jnp.array([True]), "a"),
        "int_pred": lambda m: m.ck.check(m.jnp.int32(1), "a"),
        "float_fmt_arg": lambda m: m.ck.checkify(
            lambda x: m.ck.check(x > 0, "{}", x))(-1.),
        "check_error_type": lambda m: m.ck.check_error(None),
    }
    want, got = _messages(JAX, cases[what]), _messages(XF, cases[what])
    if what != "jit":   # same class name; the jit one is a ValueError in both
        assert got == want
    else:
        assert got[1] == want[1] and got[0] == "ValueError"


def test_debug_check_outside_checkify_is_dropped():
    xck.debug_check(xjnp.array(False), "dropped")
    assert xform.jit(lambda x: (xck.debug_check(x > 0, "dropped"), x)[1])(-1.) == -1.


def test_docs_examples_run():
    text = (Path(__file__).resolve().parents[1] / "docs" / "checkify.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/checkify.md", "exec"), {})


def test_public_docstring_examples():
    import doctest
    result = doctest.testmod(xck, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
