"""xform.ops segment reductions against jax.ops at run time: values (out-of-range and
negative ids dropped, empty segments holding the identity, buckets, modes, dtypes),
gradients vs jax.grad, vmap, jit and the errors."""
import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import ops

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]
IDS = np.array([2, 0, 5, 2, -1, 0, 2])          # 5 and -1 out of range; segment 1, 3 empty


def _both(name):
    return getattr(ops, name), getattr(jax.ops, name)


@pytest.mark.parametrize("name", NAMES)
def test_values_match_jax(name):
    ours, ref = _both(name)
    rng = np.random.RandomState(0)
    cases = [
        (rng.randn(7).astype(np.float32), IDS, dict(num_segments=4)),
        (rng.randn(7, 2).astype(np.float32), IDS, dict(num_segments=4, bucket_size=3)),
        (rng.randint(-5, 5, 7).astype(np.int32), IDS, dict(num_segments=4)),
        (rng.rand(7) > 0.5, IDS, dict(num_segments=4)),
        (rng.randn(7).astype(np.float32), IDS, dict(num_segments=4, mode="clip")),
        (rng.randn(4).astype(np.float32), np.array([0, 1, 1, 3]),
         dict(indices_are_sorted=True)),                  # num_segments from max(ids) + 1
        (rng.randn(3).astype(np.float32), np.array([2, 0, 1]),
         dict(num_segments=3, unique_indices=True)),
        (np.zeros((0, 2), np.float32), np.zeros((0,), np.int32), dict(num_segments=2)),
    ]
    for data, ids, kw in cases:
        try:
            want = ref(data, ids, **kw)
        except TypeError:                  # e.g. sums and products of bools
            with pytest.raises(TypeError):
                ours(data, ids, **kw)
            continue
        got = ours(data, ids, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, (kw, got, want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6,
                                   err_msg=str(kw))


def test_jit_vmap_and_grads_match_jax():
    rng = np.random.RandomState(1)
    x = rng.randn(7, 3).astype(np.float32)
    x[3] = x[0]                                       # a tie in segment 2 (max and min)
    for name in NAMES:
        ours, ref = _both(name)
        kw = dict(unique_indices=True) if name == "segment_prod" else {}
        ids = np.array([2, 0, 4, 1, -1, 3, 5]) if kw else IDS
        f = lambda op: (lambda d, i: op(d, i, 4, **kw))  # noqa: E731
        got = xform.jit(f(ours))(x, ids)
        np.testing.assert_allclose(got, f(ref)(x, ids), rtol=1e-6, err_msg=name)
        xs, idss = np.stack([x, 2 * x]), np.stack([ids, ids[::-1]])
        np.testing.assert_allclose(xform.vmap(f(ours))(xs, idss),
                                   jax.vmap(f(ref))(xs, idss), rtol=1e-6, err_msg=name)
        w = rng.randn(4, 3).astype(np.float32)
        def loss(op, np_):
            def fn(d):
                out = f(op)(d, ids)
                return np_.sum(np_.where(np_.isfinite(out), out, 0.) ** 2 * w)
            return fn
        np.testing.assert_allclose(xform.grad(loss(ours, jnp))(x),
                                   jax.grad(loss(ref, jnp_ref))(x), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
        t_in = rng.randn(*x.shape).astype(np.float32)
        _, t = xform.jvp(lambda d: f(ours)(d, ids), (x,), (t_in,))
        _, t_ref = jax.jvp(lambda d: f(ref)(d, ids), (x,), (t_in,))
        np.testing.assert_allclose(t, t_ref, rtol=1e-6, err_msg=name)


def test_errors():
    x, ids = jnp.arange(3.), jnp.array([0, 1, 1])
    with pytest.raises(xform.errors.ConcretizationTypeError, match="num_segments"):
        xform.jit(ops.segment_sum)(x, ids)
    with pytest.raises(ValueError, match="num_segments must be non-negative"):
        ops.segment_sum(x, ids, num_segments=-1)
    with pytest.raises(TypeError):
        ops.segment_sum(x, jnp.array([0., 1., 1.]), 2)
    # JAX: scatter_mul's gradient needs unique indices
    with pytest.raises(NotImplementedError, match="unique_indices"):
        xform.grad(lambda d: ops.segment_prod(d, ids, 2).sum())(x)
    np.testing.assert_array_equal(
        xform.jit(ops.segment_sum, static_argnums=2)(x, ids, 2), [0., 3.])


def test_docstring_examples():
    import doctest
    result = doctest.testmod(ops, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted == 12 and result.failed == 0
