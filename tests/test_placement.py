"""Where one-device computations run, against JAX at run time: ops on an Array put on
another device run there (eager primitives, composites, operators, jit, grad, vmap,
lazy mode), Python scalars and default-device Arrays follow it, two devices raise
JAX's error, and jax_default_device places new arrays and programs."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp

OPS = {
    "add_scalar": lambda L, np_, x: x + 1.0,
    "lax_sin": lambda L, np_, x: L.lax.sin(x),
    "mul": lambda L, np_, x: x * x,
    "sum": lambda L, np_, x: np_.sum(x, axis=0),
    "std": lambda L, np_, x: np_.std(x),
    "index": lambda L, np_, x: x[1],
    "at_set": lambda L, np_, x: x.at[0].set(5.0),
    "with_default_array": lambda L, np_, x: x + np_.ones(3),
    "jit": lambda L, np_, x: L.jit(lambda a: a * 2)(x),
    "grad": lambda L, np_, x: L.grad(lambda a: (a * a).sum())(x),
    "vmap": lambda L, np_, x: L.vmap(np_.sin)(x),
}
X = np.arange(3, dtype=np.float32)
pytestmark = pytest.mark.skipif(len(jax.devices()) < 6, reason="needs 6 devices (conftest "
                                "gives the CPU 8; a one-GPU machine has 1)")


def _devices(a):
    return sorted(d.id for d in a.devices())


@pytest.mark.parametrize("op", sorted(OPS))
def test_ops_run_on_their_arguments_device(op):
    got = OPS[op](xform, jnp, xform.device_put(X, xform.devices()[3]))
    want = OPS[op](jax, jjnp, jax.device_put(X, jax.devices()[3]))
    assert _devices(got) == _devices(want) == [3]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_lazy_mode_and_follow_on_ops_stay_there():
    x = xform.device_put(X, xform.devices()[5])
    with xform.lazy():
        y = jnp.tanh(x * 0.5 + 1.0)
        np.testing.assert_allclose(np.asarray(y), np.tanh(X * 0.5 + 1.0), rtol=1e-6)
    assert _devices(y) == [5] and _devices(jnp.exp(y) - y) == [5]


def test_two_devices_raise_jaxs_error():
    def run(L):
        d = L.devices()
        return L.device_put(X, d[3]) + L.device_put(X, d[4])
    with pytest.raises(ValueError, match="Received incompatible devices") as want:
        run(jax)
    with pytest.raises(ValueError, match="Received incompatible devices") as got:
        run(xform)
    assert "device ids [3]" in str(got.value) and "device ids [4]" in str(want.value)


def test_default_device_places_arrays_and_programs():
    def run(L, np_):
        f, make = L.jit(lambda a: a * 2), L.jit(lambda: np_.arange(3))
        f(np_.ones(3))
        make()   # (compiled before the context: its programs are on device 0)
        with L.default_device(L.devices()[2]):
            a = np_.ones(3)
            inside = [a, L.device_put(np.ones(2)), a + 1, np_.sin(a), f(a), make(),
                      L.device_put(X, L.devices()[3]) + a]
        return [_devices(v) for v in inside] + [_devices(np_.ones(3)), _devices(make())]
    assert run(xform, jnp) == run(jax, jjnp) == [[2]] * 6 + [[3], [0], [0]]
    for bad in (3, "bogus"):
        with pytest.raises(ValueError) as want:
            jax.config.update("jax_default_device", bad)
        with pytest.raises(ValueError) as got:
            xform.config.update("jax_default_device", bad)
        assert str(got.value) == str(want.value)
