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
    ops = jax.tree_util.tree_leaves(to_np(xs[-1][1][OWG]), is_leaf=lambda d: (
        isinstance(d, dict) and "input_scale" in d))
    assert ops
    for op in ops:
        assert op["input_amax_history"][0] > 0 and op["output_grad_amax_history"][0] > 0
        assert (op["input_amax_history"][-1] > 0) == (steps > 1)  # rolled to the back
        assert (op["kernel_scale"][0] != 1) == (steps > 1)  # from step 1's amax


def _model(lib_nn):
    """Dense (NANOOFp8DotGeneralOp: Fp8DotGeneralOp's qdq path in the fnuz types),
    DenseGeneral (the Fp8DirectDotGeneralOp alias, batch_dims), Fp8Einsum (where JAX's
    einsum puts the kernel first, so the 'input' scale and history quantize the kernel,
    as in Flax)."""
    op = lambda name: functools.partial(getattr(lib_nn, name), amax_history_length=4)

    class M(lib_nn.Module):
        @lib_nn.compact
        def __call__(self, x):
            x = lib_nn.Dense(6, dot_general_cls=op("NANOOFp8DotGeneralOp"))(x)
            x = lib_nn.DenseGeneral((2, 4), batch_dims=(0,),
                                    dot_general_cls=op("Fp8DotGeneral"))(x)
            x = x.reshape(x.shape[:2] + (8,))
            k = self.param("k", lib_nn.initializers.lecun_normal(), (5, 8))
            return op("Fp8Einsum")()("bti,oi->bot", x, k)
    return M()


def test_fp8_layers_train_like_flax():
    _compare(_model(nn), _model(fnn), X, jit=True)


def test_fp8_dense_eager_like_flax():
    with pytest.warns(DeprecationWarning, match="Fp8DotGeneralOp is deprecated"):
        nn.Fp8DotGeneralOp()
    op = functools.partial(nn.Fp8DirectDotGeneralOp, amax_history_length=4)
    fop = functools.partial(fnn.Fp8DirectDotGeneralOp, amax_history_length=4)
    _compare(nn.Dense(5, dot_general_cls=op), fnn.Dense(5, dot_general_cls=fop), X, steps=1)


def test_fp8_helpers_like_flax():
    from flax.linen import fp8_ops as F
    from xform.nn import fp8_ops as O

    def helpers(m, x, scale, hist, amax):
        return (m.qdq(x, jnp.float8_e4m3fn, scale, jnp.float32),
                m.qdq(x, jnp.float8_e5m2, scale, jnp.float32),
                m.update_fp8_meta(x, jnp.float8_e4m3fn, scale, hist),
                m.compute_scale(amax, scale, 448.0, margin=1))
    args = (X * 40, np.array([2.0], np.float32), np.array([3.0, 700.0, 0.0], np.float32),
            np.array([0.0, np.inf, 5.0], np.float32))   # zero / inf amax: scale kept
    assert_trees(xform.jit(functools.partial(helpers, O))(*args),
                 jax.jit(functools.partial(helpers, F))(*args))
    with pytest.raises(ValueError, match="fp8_dtype must be one of"):
        O.get_fp8_max(jnp.float16, jnp.float32)
    assert O.OVERWRITE_WITH_GRADIENT == F.OVERWRITE_WITH_GRADIENT


def test_einsum_dot_general_hook_order_like_jax():
    """jnp.einsum's ``_dot_general`` sees JAX's operands and dimension numbers (the fp8
    scales follow the lhs): recorded under make_jaxpr, nothing compiles."""
    def recorded(lib, eqn, shapes):
        seen = []

        def hook(a, b, dims, precision=None, preferred_element_type=None):
            seen.append((a.shape, b.shape, dims, np.dtype(preferred_element_type)))
            return lib.lax.dot_general(a, b, dims, precision,
                                       preferred_element_type=preferred_element_type)
        m = jjnp if lib is jax else jnp
        lib.make_jaxpr(lambda *o: m.einsum(eqn, *o, _dot_general=hook))(
            *[np.ones(sh, np.float32) for sh in shapes])
        return [(a, b, tuple(tuple(map(tuple, d)) for d in dims), t)
                for a, b, dims, t in seen]
    for eqn, shapes in [("bi,io->bo", [(2, 3), (3, 4)]), ("bi,oi->ob", [(2, 3), (4, 3)]),
                        ("bti,oi->bot", [(2, 5, 3), (4, 3)]),
                        ("btk,bkd->btd", [(2, 5, 3), (2, 3, 4)]),
                        ("btk,bdk->bdt", [(2, 5, 3), (2, 4, 3)]),
                        ("bji,oij->bo", [(2, 3, 4), (5, 4, 3)])]:
        assert recorded(xform, eqn, shapes) == recorded(jax, eqn, shapes), eqn


# ---- block-scaled matmul (jax.nn.scaled_matmul / scaled_dot_general) ----

def _lax_scaled_matmul(a, b, a_scales, b_scales, preferred_element_type=np.float32):
    # JAX's ROCm lowering of scaled_matmul (its CUDA one is a cuDNN kernel; CPU has none)
    return jax.lax.scaled_dot(a, b, lhs_scale=a_scales, rhs_scale=b_scales,
                              dimension_numbers=(((2,), (2,)), ((0,), (0,))),
                              preferred_element_type=preferred_element_type)


@pytest.mark.parametrize("data,scale", [(jnp.float8_e4m3fn, jnp.float8_e8m0fnu),
                                        (jnp.float4_e2m1fn, jnp.float8_e4m3fn)])
def test_scaled_matmul_like_jax(data, scale):
    a, b = (R.randn(2, n, 64).astype(data) for n in (3, 5))
    sa, sb = ((R.rand(2, n, 2) * 4).astype(scale) for n in (3, 5))
    for pet in (np.float32, jnp.bfloat16):
        got = nn.scaled_matmul(*map(jnp.asarray, (a, b, sa, sb)), preferred_element_type=pet)
        assert_trees(got, _lax_scaled_matmul(a, b, sa, sb, pet))
    with pytest.raises(ValueError, match="matching batch .B. and contract .K. dimensions"):
        nn.scaled_matmul(jnp.asarray(a), jnp.asarray(b[:, :, :32]), sa, sb)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_like_jax(mode, monkeypatch):
    from jax._src.cudnn import scaled_matmul_stablehlo
    monkeypatch.setattr(scaled_matmul_stablehlo, "scaled_matmul_wrapper", _lax_scaled_matmul)
    gs = [np.array([0.5], np.float32)] if mode == "nvfp4" else []
    jc = [jax.nn.get_scaled_dot_general_config(mode, *map(jjnp.asarray, gs))] * 3
    xc = [nn.get_scaled_dot_general_config(mode, *map(jnp.asarray, gs))] * 3
    assert (xc[0].block_size, xc[0].data_type, xc[0].scale_type) == (
        jc[0].block_size, jc[0].data_type, jc[0].scale_type)
    # contracting, lhs-free and rhs-free sizes all multiples of 32: the backward pass
    # block-quantizes along each
    x, y = R.randn(32, 2, 32).astype(np.float32), R.randn(2, 32, 32).astype(np.float32)
    dn = (((2,), (1,)), ((1,), (0,)))
    w = np.arange(1.0, 33.0, dtype=np.float32)

    def loss(lib, c):
        return lambda x, y: (lib.nn.scaled_dot_general(x, y, dn, configs=c) * w).sum()
    want = jax.jit(jax.value_and_grad(loss(jax, jc), (0, 1)))(x, y)
    got = xform.jit(xform.value_and_grad(loss(xform, xc), (0, 1)))(x, y)
    assert_trees(got, want, rtol=1e-6, atol=1e-4)
    x2, dn2 = R.randn(4, 32).astype(np.float32), (((1,), (1,)), ((), ()))  # no batch axes
    nobatch = lambda lib, c: lib.jit(lambda v: lib.nn.scaled_dot_general(v, v, dn2,
                                                                         configs=c))
    assert_trees(nobatch(xform, xc)(x2), nobatch(jax, jc)(x2), rtol=1e-6, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of the .* block size"):
        nn.scaled_dot_general(x2[:, :20], x2[:, :20], dn2, configs=xc)
