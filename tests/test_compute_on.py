"""xform.experimental.compute_on against jax.experimental.compute_on (JAX 0.10.2) on CPU:
the frontend attributes lowering puts on ops and calls, values under jit/grad/vmap,
eager use, and the errors."""
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import compute_on as jco

import xform
import xform.numpy as xjnp
from xform.experimental import compute_on as xco

_OP = re.compile(r"= (stablehlo\.\w+|call @)")
_ATTRS = re.compile(r"mhlo\.frontend_attributes = (\{[^}]*\})")


def marks(text, ops=("sine", "cosine", "multiply", "add", "call")):
    """{(op, its frontend attributes or None)} of the lowered ops named in ``ops``."""
    out = set()
    for line in text.splitlines():
        m = _OP.search(line)
        if m:
            op = "call" if m.group(1) == "call @" else m.group(1).split(".")[1]
            attrs = _ATTRS.search(line)
            if op in ops:
                out.add((op, attrs and attrs.group(1)))
    return out


def both(make):
    """``make(lib, jnp, compute_on module)`` for JAX and for xform."""
    return make(jax, jjnp, jco), make(xform, xjnp, xco)


def _close(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)


X = np.linspace(-1.0, 1.0, 4, dtype=np.float32)


def test_a_jit_called_eagerly_under_the_context_traces_again_as_jax():
    # its cache-hit path, keyed on avals, must not run the program traced outside it
    def traces(lib, co):
        n = []
        f = lib.jit(lambda a: n.append(1) or a * 2)
        f(X), f(X)
        with co.compute_on("device_host"):
            f(X), f(X)
            inside = len(n)
            text = f.lower(X).as_text()
        f(X)
        return inside, len(n), marks(text)
    assert traces(xform, xco) == traces(jax, jco)


@pytest.mark.parametrize("ctype", ["device_host", "gpu_stream:1"])
def test_context_marks_ops_and_inner_jit_as_jax(ctype):
    def make(lib, jnp, co):
        inner = lib.jit(lambda a: a + 3)

        def f(x):
            y = inner(x)                 # traced outside: untagged
            with co.compute_on(ctype):
                z = inner(jnp.sin(x) * 2)   # the same jit, traced again under it
            return z + y
        return f
    jf, xf = both(make)
    assert marks(xform.jit(xf).lower(X).as_text()) == marks(jax.jit(jf).lower(X).as_text())
    _close(xform.jit(xf)(X), jax.jit(jf)(X))
    _close(xf(X), jf(X))                # eager: the marks change nothing


def test_nested_contexts_inner_wins_and_grad_vmap():
    def make(lib, jnp, co):
        def f(x):
            with co.compute_on("device_host"):
                y = jnp.sin(x) * x
                with co.compute_on("device"):
                    y = jnp.cos(y) * 2
            return y.sum()
        return f
    jf, xf = both(make)
    assert marks(xform.jit(xf).lower(X).as_text()) == marks(jax.jit(jf).lower(X).as_text())
    # the cotangent ops inherit the marks of the equations they transpose (cosine left
    # out: xform keeps the unused primal cos in grad's program, XLA drops it)
    ops = ("sine", "multiply", "add", "negate")
    assert marks(xform.jit(xform.grad(xf)).lower(X).as_text(), ops) == \
        marks(jax.jit(jax.grad(jf)).lower(X).as_text(), ops)
    _close(xform.jit(xform.grad(xf))(X), jax.jit(jax.grad(jf))(X))
    xs = np.stack([X, 2 * X])
    _close(xform.jit(xform.vmap(xf))(xs), jax.jit(jax.vmap(jf))(xs))


def test_compute_on2_call_lowering_values_and_transforms():
    def make(lib, jnp, co, **kw):
        g = co.compute_on2(lambda a, b: (jnp.sin(a) * b, a + b),
                           out_memory_spaces=lib.memory.Space.Device, **kw)
        return g
    for kw in (dict(compute_type="device_host"), dict(compute_type="device"),
               dict(compute_type="device", compiler_options={"xla_x": 1})):
        jg, xg = (make(jax, jjnp, jco, **kw), make(xform, xjnp, xco, **kw))
        ops = ("call", "sine", "custom_call")
        assert marks(xform.jit(xg).lower(X, X).as_text(), ops) == \
            marks(jax.jit(jg).lower(X, X).as_text(), ops)
    _close(xform.jit(xg)(X, X + 1), jax.jit(jg)(X, X + 1))
    _close(xg(X, X + 1), jg(X, X + 1))
    loss = lambda g: lambda a, b: sum(o.sum() for o in g(a, b))  # noqa: E731
    _close(xform.grad(loss(xg), (0, 1))(X, X), jax.grad(loss(jg), (0, 1))(X, X))
    _close(xform.jit(xform.grad(loss(xg)))(X, X), jax.jit(jax.grad(loss(jg)))(X, X))
    _close(xform.jvp(xg, (X, X), (X, X)), jax.jvp(jg, (X, X), (X, X)))
    xs = np.stack([X, -X])
    _close(xform.vmap(xg)(xs, xs), jax.vmap(jg)(xs, xs))


def test_compute_on2_host_output_is_typed_and_placed_on_host():
    jg, xg = both(lambda lib, jnp, co: co.compute_on2(
        lambda a: a * 2, compute_type="device_host",
        out_memory_spaces=lib.memory.Space.Host))
    jt, xt = jax.jit(jg).lower(X).as_text(), xform.jit(xg).lower(X).as_text()
    assert 'mhlo.memory_kind = "pinned_host"' in xt and \
        'mhlo.memory_kind = "pinned_host"' in jt
    assert marks(xt, ("call", "custom_call")) == marks(jt, ("call", "custom_call"))
    out = xform.jit(xg)(X)
    assert out.sharding.memory_kind == jax.jit(jg)(X).sharding.memory_kind == "pinned_host"
    np.testing.assert_allclose(np.asarray(out), X * 2)


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value), str(e.value).split("\n")[0]


def test_errors_match_jax():
    for bad in (3, "foo"):
        assert _error(lambda: xco.compute_on(bad).__enter__()) == \
            _error(lambda: jco.compute_on(bad).__enter__())
        assert _error(lambda: xco.compute_on2(lambda a: a, compute_type=bad,
                                              out_memory_spaces=None)) == \
            _error(lambda: jco.compute_on2(lambda a: a, compute_type=bad,
                                           out_memory_spaces=None))

    def nested(lib, jnp, co):
        space = lib.memory.Space.Device
        inner = co.compute_on2(lambda a: a * 2, compute_type="device",
                               out_memory_spaces=space)
        return co.compute_on2(lambda a: inner(a) + 1, compute_type="device_host",
                              out_memory_spaces=space)
    jn, xn = both(nested)
    assert _error(lambda: xform.jit(xn)(X)) == _error(lambda: jax.jit(jn)(X))
    assert _error(lambda: xn(X)) == _error(lambda: jn(X))
    jt, xt = both(lambda lib, jnp, co: co.compute_on2(
        lambda a: (a, a), compute_type="device", out_memory_spaces=(lib.memory.Space.Device,)))
    je, xe = _error(lambda: jt(X)), _error(lambda: xt(X))
    assert xe[0] is je[0] is ValueError and xe[1].startswith(
        "compute_on out_memory_spaces specification must be a tree prefix")


def test_docstring_examples_run():
    import doctest
    result = doctest.testmod(xco, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
