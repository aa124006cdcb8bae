"""Composites under a transformation bind their cached equations (interpreters/
composite_replay.py): the same jaxprs as running the function's Python (so the values
the rest of the suite compares with JAX's), and the Python run once per signature."""
import numpy as np
import pytest

import xform
import xform.nn as xnn
import xform.numpy as jnp
from xform.interpreters import composite, composite_replay
from xform.interpreters.composite import composite as composite_decorator

X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
I = np.arange(6, dtype=np.int32).reshape(2, 3)

FUNS = {
    "mlp": lambda x: jnp.sum(jnp.tanh(x @ x.T + 0.5) ** 2) + jnp.mean(x * 3)
    + jnp.std(x, axis=0).sum(),
    "nn": lambda x: xnn.softmax(x, axis=-1).sum() + xnn.relu(x).sum() + xnn.gelu(x).sum(),
    "index": lambda x: x[0, 1:].sum() + x.at[1].set(2.0).sum()
    + jnp.where(x > 0, x, 0.0).sum(),
    "joins": lambda x: jnp.concatenate([x, x], axis=0).sum() + jnp.clip(x, -0.5, 0.5).sum()
    + jnp.linalg.norm(x) + jnp.roll(x, 1, axis=1).sum() + jnp.cumsum(x).sum(),
    "ints": lambda x: (x * I + I // 2).astype(jnp.float32).sum() + jnp.power(x, 3).sum()
    + jnp.maximum(x, 0.1).sum() + jnp.copysign(x, -0.0).sum(),
}


def _jaxprs(f):
    x = jnp.asarray(X)
    return [str(xform.make_jaxpr(t)(a)) for t, a in
            ((f, x), (xform.grad(f), x), (xform.vmap(f), jnp.stack([x, x + 1])),
             (xform.jit(xform.grad(f)), x))]


@pytest.mark.parametrize("name", sorted(FUNS))
def test_same_jaxprs_as_running_the_python(name, monkeypatch):
    f = FUNS[name]
    composite._on_flag(None, None)  # (forget every replay traced before)
    monkeypatch.setattr(composite_replay, "_trace", lambda *a: False)
    python = _jaxprs(f)
    monkeypatch.undo()
    composite._on_flag(None, None)
    assert _jaxprs(f) == python
    assert _jaxprs(f) == python  # (the hits)


def test_python_runs_once_per_signature():
    calls = []

    @composite_decorator(static=("axis",))
    def scaled_sum(x, s, axis=None):
        calls.append(1)
        return jnp.sum(x * s, axis=axis)

    grad = xform.grad(lambda x, s: scaled_sum(x, s, axis=0).sum())
    x = jnp.asarray(X)
    for s in (2.0, 2.0, 3.0, 3.0, -0.0, 0.0):  # (a Python scalar keys by value)
        np.testing.assert_array_equal(np.asarray(grad(x, s)), np.full((2, 3), s, np.float32))
    assert len(calls) == 4  # (2.0, 3.0, -0.0 and 0.0 traced once each)
    assert str(xform.make_jaxpr(xform.grad(lambda x: scaled_sum(x, -0.0).sum()))(x)) \
        .count("-0.0") >= 1
    scaled_sum(x, float("nan"), axis=1)   # (eager) and traced: NaN runs the Python
    xform.jit(lambda x: scaled_sum(x, float("nan")))(x)
    xform.jit(lambda x: scaled_sum(x, float("nan")))(x + 1)


def test_errors_still_name_the_shapes_every_time():
    f = xform.jit(xform.grad(lambda x, y: jnp.add(x, y).sum()))
    for _ in range(2):
        with pytest.raises((TypeError, ValueError), match=r"\(2, ?3\).*\(4,?\)|\(4,?\).*\(2, ?3\)"):
            f(jnp.asarray(X), jnp.ones(4))
