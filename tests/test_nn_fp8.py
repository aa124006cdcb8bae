"""FP8 training (xform.nn's fp8_ops vs flax.linen's) and block-scaled matmul (vs jax.nn's
and jax.lax.scaled_dot): same variables, outputs, gradients, and the scale/amax-history
updates that come back as the gradient of the '_overwrite_with_gradient' collection."""
import functools

import numpy as np
import pytest

import flax.linen as fnn
import jax
import jax.numpy as jjnp

import xform
import xform.numpy as jnp
import xform.nn as nn
from nn_oracle import assert_trees, keys, to_np

OWG = "_overwrite_with_gradient"
R = np.random.RandomState(0)
X = R.randn(2, 3, 8).astype(np.float32)


def _train(lib, model, variables, x, steps, jit):
    """``steps`` SGD steps on ``sum(y**2)``; the fp8 collection is overwritten by its
    gradient (the delayed-scaling update). Returns each step's (loss, grads)."""
    jnp_ = jjnp if lib is jax else jnp

    def loss(v):
        return jnp_.sum(model.apply(v, x) ** 2)
    vg = lib.value_and_grad(loss)
    vg = lib.jit(vg) if jit else vg
    out = []
    for _ in range(steps):
        l, g = vg(variables)
        out.append((l, g))
        params = lib.tree_util.tree_map(lambda p, d: p - 0.01 * d, variables["params"],
                                        g["params"])
        variables = {"params": params, OWG: g[OWG]}
    return out


def _compare(xmodel, fmodel, x, steps=2, jit=False, tol=1e-6):
    kx, kf = keys(0)
    xv, fv = xform.jit(xmodel.init)(kx, x), jax.jit(fmodel.init)(kf, x)
    assert_trees(xv, fv)   # same collections, names, shapes, dtypes, values
    xs = _train(xform, xmodel, xv, x, steps, jit)
    fs = _train(jax, fmodel, fv, x, steps, True)
    for (xl, xg), (fl, fg) in zip(xs, fs):
        np.testing.assert_allclose(np.asarray(xl), np.asarray(fl), rtol=tol)
        assert_trees(xg, fg, rtol=tol, atol=tol)
    # the scale/history updates really happened (the test could otherwise pass on zeros)
    for op in jax.tree_util.tree_leaves(to_np(xs[-1][1][OWG]), is_leaf=lambda d: (
            isinstance(d, dict) and "input_scale" in d)):
        assert op["input_amax_history"][0] > 0 and op["output_grad_amax_history"][0] > 0
        assert op["input_amax_history"][-1] > 0   # rolled: step 1's amax moved to the back


def _model(lib_nn):
    """Dense (NANOOFp8DotGeneralOp: Fp8DotGeneralOp's qdq path in the fnuz types),
    DenseGeneral (the Fp8DirectDotGeneralOp alias, batch_dims), two Fp8Einsums (in the
    second, JAX's einsum puts the kernel first, so the 'input' scale and history
    quantize the kernel, as in Flax)."""
    op = lambda name: functools.partial(getattr(lib_nn, name), amax_history_length=4)

    class M(lib_nn.Module):
        @lib_nn.compact
        def __call__(self, x):
            x = lib_nn.Dense(6, dot_general_cls=op("NANOOFp8DotGeneralOp"))(x)
            x = lib_nn.DenseGeneral((2, 4), batch_dims=(0,),
                                    dot_general_cls=op("Fp8DotGeneral"))(x)
            x = x.reshape(x.shape[:2] + (8,))
            k1 = self.param("k1", lib_nn.initializers.lecun_normal(), (8, 4))
            k2 = self.param("k2", lib_nn.initializers.lecun_normal(), (5, 4))
            x = op("Fp8Einsum")()("bti,io->bto", x, k1)
            return op("Fp8Einsum")()("bti,oi->bot", x, k2)
    return M()


def test_fp8_layers_train_like_flax():
    _compare(_model(nn), _model(fnn), X, jit=True)


def test_fp8_dense_eager_like_flax():
    with pytest.warns(DeprecationWarning, match="Fp8DotGeneralOp is deprecated"):
        nn.Fp8DotGeneralOp()
    op = functools.partial(nn.Fp8DirectDotGeneralOp, amax_history_length=4)
    fop = functools.partial(fnn.Fp8DirectDotGeneralOp, amax_history_length=4)
    _compare(nn.Dense(5, dot_general_cls=op), fnn.Dense(5, dot_general_cls=fop), X)


def test_fp8_helpers_like_flax():
    from flax.linen import fp8_ops as F
    from xform.nn import fp8_ops as O
    x = X * 40
    scale, hist = np.array([2.0], np.float32), np.array([3.0, 700.0, 0.0], np.float32)
    for q in (jnp.float8_e4m3fn, jnp.float8_e5m2):
        assert_trees(O.qdq(jnp.asarray(x), q, jnp.asarray(scale), jnp.float32),
                     F.qdq(jjnp.asarray(x), q, jjnp.asarray(scale), jjnp.float32))
        assert_trees(O.update_fp8_meta(jnp.asarray(x), q, scale, hist),
                     F.update_fp8_meta(jjnp.asarray(x), q, scale, hist))
    amax = np.array([0.0, np.inf, 5.0], np.float32)   # zero / not finite: scale kept
    assert_trees(O.compute_scale(jnp.asarray(amax), scale, 448.0, margin=1),
                 F.compute_scale(jjnp.asarray(amax), scale, 448.0, margin=1))
    with pytest.raises(ValueError, match="fp8_dtype must be one of"):
        O.get_fp8_max(jnp.float16, jnp.float32)
    assert O.OVERWRITE_WITH_GRADIENT == F.OVERWRITE_WITH_GRADIENT
