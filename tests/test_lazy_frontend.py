"""The numpy front end's fast paths for recorded/traced ops (``x + 0.5`` reusing its weak
scalar operand): values, dtypes and weak types as JAX, in lazy mode, under jit, and for
the values the fast path must not take (0, -0.0, nan, ints out of an int dtype's range)."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp

_OPS = [lambda a, s: a + s, lambda a, s: s * a, lambda a, s: a - s, lambda a, s: s / a,
        lambda a, s: (jjnp if isinstance(a, jax.Array) else jnp).maximum(a, s)]
_SCALARS = [0.5, 3, -0.0, 0.0, float("nan"), 2.5, 300]


def _check(got, want):
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.array_equal(np.signbit(np.asarray(got)), np.signbit(np.asarray(want)))


@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_scalar_operands_lazy_jit_eager(dtype):
    v = np.array([1, -2, 4], dtype)
    x, xj = jnp.asarray(v), jjnp.asarray(v)
    jitted = xform.jit(lambda a, i, s: _OPS[i](a, s), static_argnums=(1, 2))
    for _ in range(2):  # the second round takes the cached operands
        for i, op in enumerate(_OPS):
            for s in _SCALARS:
                try:
                    want = op(xj, s)
                except (OverflowError, TypeError):
                    with pytest.raises((OverflowError, TypeError)):
                        op(x, s)
                    continue
                _check(op(x, s), want)
                with xform.lazy():
                    got = op(x, s)
                _check(got, want)
                if s == s and s != 0:  # (static arguments: nan is unequal to itself,
                    _check(jitted(x, i, s), want)  # -0.0 hits 0.0's trace, as in JAX)
