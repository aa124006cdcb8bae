"""``jax.lax`` / ``jax.scipy.special`` names xform added to close the API gap, each run
side by side with real JAX: values (edge cases included) and dtypes, eagerly and under
jit; gradients where JAX differentiates; one vmap each; doctests of the new modules."""
import doctest
import importlib

import jax
import jax.lax as jlax
import jax.scipy.special as jsp
import numpy as np
import pytest

import xform
import xform.lax as xlax
import xform.scipy.special as xsp

LAX_NAMES = """
bitcast_convert_type bitcast_convert_type_p cond_p while_p scan_p linear_solve_p
conv_general_permutations mulhi mulhi_p zeta zeta_p bessel_i0e bessel_i0e_p bessel_i1e
bessel_i1e_p igamma igamma_p igammac igammac_p igamma_grad_a igamma_grad_a_p
random_gamma_grad betainc regularized_incomplete_beta_p cumlogsumexp cumlogsumexp_p
tile collapse stack unstack broadcast_to_rank broadcast_like broadcast_shapes empty dtype
batch_matmul scatter_sub scatter_sub_p index_take approx_max_k approx_min_k
rng_bit_generator rng_bit_generator_p RandomAlgorithm conv_general_dilated_patches
conv_general_dilated_local conv_shape_tuple conv_general_shape_tuple conv_transpose_shape_tuple
reduce_window_shape_tuple ragged_dot scatter_apply DotDimensionNumbers PrecisionLike
ConvGeneralDilatedDimensionNumbers pswapaxes rng_uniform rng_uniform_p ragged_dot_general
RaggedDotDimensionNumbers
""".split()
SPECIAL_NAMES = """
erfinv gamma gammasgn loggamma beta factorial comb poch multigammaln polygamma zeta
bernoulli i0 i0e i1 i1e erfcx dawsn rel_entr kl_div boxcox boxcox1p exp1 expi expn spence
bessel_jn sici owens_t hyp1f1 hyp2f1 wofz fresnel sph_harm_y
""".split()


def test_public_names_exist_as_in_jax():
    for names, mine, theirs in [(LAX_NAMES, xlax, jlax), (SPECIAL_NAMES, xsp, jsp)]:
        assert set(names) <= set(dir(theirs))     # JAX's names, not invented ones
        missing = [n for n in names if not hasattr(mine, n)]
        assert not missing, missing


F32 = np.float32
X = F32([-4.0, -1.5, -0.0, 0.0, 0.3, 1.0, 2.5, 9.0, 30.0, np.inf, np.nan])
A = F32([0.5, 1.0, 2.0, 5.0, 0.0, -1.0, 3.0, np.nan, 2.0, 30.0, 0.1])
B = F32([0.1, 1.0, 3.0, 2.0, 1.0, 1.0, 0.0, 1.0, np.inf, 25.0, 12.0])
P = F32([0.3, 0.5, 0.9, 0.2, 0.0, 1.0, 0.5, 1.5, 0.99, 0.1, 0.6])
POS = F32([0.5, 1.5, 3.0])
IMG = np.random.RandomState(0).randn(1, 4, 5, 2).astype(F32)
LOCAL_RHS = np.random.RandomState(1).randn(3, 4, 8, 3).astype(F32)
NHWC = ("NHWC", "HWIO", "NHWC")
GROUPS = np.array([2, 0, 2], np.int32)
I32 = np.array([np.iinfo(np.int32).min, -3, 0, 12345, np.iinfo(np.int32).max], np.int32)

# (name, fn(lib), args): lib is (lax, scipy.special) of JAX or of xform
VALUES = [
    ("bessel_i0e", lambda L, S: L.bessel_i0e, (X,)),
    ("bessel_i1e", lambda L, S: L.bessel_i1e, (X,)),
    ("zeta", lambda L, S: L.zeta, (F32([1.5, 2.0, 4.0, 0.5]), F32([0.5, 1.0, 3.0, 1.0]))),
    ("igamma", lambda L, S: L.igamma, (A, B)),
    ("igammac", lambda L, S: L.igammac, (A, B)),
    ("betainc", lambda L, S: L.betainc, (A, B, P)),
    ("mulhi", lambda L, S: L.mulhi, (I32, I32[::-1])),
    ("bitcast", lambda L, S: lambda x: L.bitcast_convert_type(x, np.uint8), (POS,)),
    ("cumlogsumexp", lambda L, S: lambda x: L.cumlogsumexp(x, 0, True), (X,)),
    ("tile", lambda L, S: lambda x: L.tile(x.reshape(1, 3), (2, 2)), (POS,)),
    ("stack", lambda L, S: lambda x: L.stack([x, x + 1], 1), (POS,)),
    ("unstack", lambda L, S: lambda x: L.unstack(x.reshape(3, 1), 1), (POS,)),
    ("collapse", lambda L, S: lambda x: L.collapse(x.reshape(1, 3, 1), 0, 2), (POS,)),
    ("batch_matmul", lambda L, S: lambda x: L.batch_matmul(x.reshape(1, 3, 1),
                                                           x.reshape(1, 1, 3)), (POS,)),
    ("index_take", lambda L, S: lambda x: L.index_take(x, (np.array([2, -1, 0]),), (0,)),
     (POS,)),
    ("approx_max_k", lambda L, S: lambda x: L.approx_max_k(x, 2), (F32([3, 9, 1, 9, 5]),)),
    ("approx_min_k", lambda L, S: lambda x: L.approx_min_k(x, 2), (F32([3, 9, 1, 1, 5]),)),
    ("scatter_sub", lambda L, S: lambda x: L.scatter_sub(
        x, np.array([[1], [1]]), F32([2, 4]), L.ScatterDimensionNumbers((), (0,), (0,))),
     (POS,)),
    ("rng_bit_generator", lambda L, S: lambda k: L.rng_bit_generator(
        k, (2, 3), np.uint16, L.RandomAlgorithm.RNG_PHILOX), (np.arange(4, dtype=np.uint32),)),
    ("conv_patches", lambda L, S: lambda x: L.conv_general_dilated_patches(
        x, (2, 3), (1, 2), "SAME", rhs_dilation=(2, 1), dimension_numbers=NHWC), (IMG,)),
    ("conv_local", lambda L, S: lambda x: L.conv_general_dilated_local(
        x, LOCAL_RHS, (1, 1), "VALID", (2, 2), dimension_numbers=NHWC), (IMG,)),
    ("ragged_dot", lambda L, S: lambda l: L.ragged_dot(l, LOCAL_RHS[:, :2, 0], GROUPS),
     (IMG[0, 0, :, :2],)),
    ("ragged_dot_general", lambda L, S: lambda l: L.ragged_dot_general(   # contracting
        l, LOCAL_RHS[:2, :2, 0], np.array([[1, 1], [0, 2]], np.int32),
        L.RaggedDotDimensionNumbers((([2], [1]), ([0], [0])), [2], [])),
     (IMG[0, :2, :3, :2],)),
    ("scatter_apply", lambda L, S: lambda x: L.scatter_apply(
        x, np.array([[1], [1], [0]]), lambda v: v * 2 + 1,
        L.ScatterDimensionNumbers((), (0,), (0,)), update_shape=(3,)), (POS,)),
    ("erfinv", lambda L, S: S.erfinv, (F32([-1, -0.5, 0, 0.9, 1, 2]),)),
    ("gamma", lambda L, S: S.gamma, (X,)),
    ("gammasgn", lambda L, S: S.gammasgn, (X,)),
    ("complex gamma", lambda L, S: lambda z: (S.gamma(z), S.loggamma(z)),
     (np.complex64([1 + 1j, -2.5 + 0.5j, 0.5 - 1j, -3, 4, -0.5 - 2j, 10 + 3j]),)),
    ("loggamma", lambda L, S: S.loggamma, (X,)),
    ("factorial", lambda L, S: S.factorial, (X,)),
    ("beta", lambda L, S: S.beta, (A, B)),
    ("comb", lambda L, S: S.comb, (B, A)),
    ("poch", lambda L, S: S.poch, (A, B)),
    ("multigammaln", lambda L, S: lambda a: S.multigammaln(a, 3), (F32([1.5, 4.0]),)),
    ("polygamma", lambda L, S: lambda x: S.polygamma(np.array([0, 1, 3]), x), (POS,)),
    ("special.zeta", lambda L, S: S.zeta, (F32([2.0, 3.0, 1.0]), POS)),
    ("i0", lambda L, S: S.i0, (X,)),
    ("bessel_jn", lambda L, S: lambda z: S.bessel_jn(z, v=3, n_iter=20), (X,)),
    ("i1", lambda L, S: S.i1, (X,)),
    ("erfcx", lambda L, S: S.erfcx, (X,)),
    ("dawsn", lambda L, S: S.dawsn, (X,)),
    ("wofz", lambda L, S: S.wofz, (np.complex64([1 + 1j, -2 + 0.5j, 0.5 - 1j, 0, 3 - 3j]),)),
    ("erfcx complex", lambda L, S: S.erfcx, (np.complex64([1 + 1j, -1 - 2j]),)),
    ("rel_entr", lambda L, S: S.rel_entr, (P, B)),
    ("kl_div", lambda L, S: S.kl_div, (P, B)),
    ("boxcox", lambda L, S: S.boxcox, (POS, F32([0.0, 0.5, -1.0]))),
    ("boxcox1p", lambda L, S: S.boxcox1p, (POS, F32([0.0, 0.5, -1.0]))),
    ("expi", lambda L, S: S.expi, (X,)),
    ("expn", lambda L, S: lambda x: S.expn(np.array([0, 1, 2, 3, 6000, 2]), x),
     (F32([0.5, 0.0, 1.5, 30.0, 2.0, 0.0]),)),
    ("spence", lambda L, S: S.spence, (X,)),
    ("sici", lambda L, S: S.sici, (X,)),
    ("fresnel", lambda L, S: S.fresnel, (X,)),
    ("sph_harm_y", lambda L, S: lambda t, p: S.sph_harm_y(np.array([0, 1, 2, 4, 5]),
                                                      np.array([0, -1, 2, -3, 5]), t, p),
     (F32([0.3, 1.0, 2.0, 2.5, 0.7]), F32([0.0, 0.5, 1.0, -1.0, 0.2]))),
    ("owens_t", lambda L, S: S.owens_t, (X, A)),
    ("hyp1f1", lambda L, S: S.hyp1f1, (F32([1, 0, 2, 0.5, 3, -1.5]), F32([2, 1, 2, 1.5, 0, 2.5]),
                                       F32([1, 5, 3, -2, 1, 120]))),
    ("hyp2f1", lambda L, S: S.hyp2f1, (F32([1, 0.5, -2, 1.5, 0, 2, 3, 1]),
                                       F32([1, 1.5, 3, 2.5, 2, 1, 1, 2]),
                                       F32([2, 3, 4, 4, 1, 3, 5, 2]),
                                       F32([0.5, 0.95, 0.3, 0.99, 0.4, 1, 0.92, 0.97]))),
]
JAX, XF = (jlax, jsp), (xlax, xsp)


def _same(got, want, name, rtol=2e-5):
    got_l, want_l = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l), name
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-30, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name,fn,args", VALUES, ids=[v[0] for v in VALUES])
def test_values_and_dtypes_match_jax(name, fn, args):
    want = jax.jit(fn(*JAX))(*args)   # (the oracle jitted: JAX's op-by-op is slow)
    _same(fn(*XF)(*args), want, name)
    if name in ("bessel_i0e", "mulhi", "tile"):
        _same(xform.jit(fn(*XF))(*args), want, name + " (jit)")


GRADS = [   # (name, fn(lib), args, argnums)
    ("zeta", lambda L, S: S.zeta, (F32(3.0), F32(1.5)), (0, 1)),
    ("bessel_i0e", lambda L, S: L.bessel_i0e, (F32(-2.0),), (0,)),
    ("bessel_i1e", lambda L, S: L.bessel_i1e, (F32(0.0),), (0,)),
    ("igamma", lambda L, S: L.igamma, (F32(2.5), F32(1.5)), (0, 1)),
    ("igammac", lambda L, S: L.igammac, (F32(0.5), F32(3.0)), (0, 1)),
    ("betainc", lambda L, S: lambda x: L.betainc(F32(2.0), F32(3.0), x), (F32(0.3),), (0,)),
    ("cumlogsumexp", lambda L, S: lambda x: L.cumlogsumexp(x)[-2], (F32([1, -3, 2]),), (0,)),
    ("poch", lambda L, S: S.poch, (F32(2.5), F32(1.5)), (0, 1)),
    ("gamma", lambda L, S: S.gamma, (F32(-1.5),), (0,)),
    ("erfcx", lambda L, S: S.erfcx, (F32(12.0),), (0,)),
    ("dawsn", lambda L, S: S.dawsn, (F32(4.0),), (0,)),
    ("expi", lambda L, S: S.expi, (F32(-2.0),), (0,)),
    ("sici", lambda L, S: lambda x: S.sici(x)[0] + S.sici(x)[1], (F32(2.0),), (0,)),
    ("fresnel", lambda L, S: lambda x: S.fresnel(x)[0] + S.fresnel(x)[1], (F32(2.3),), (0,)),
    ("expn", lambda L, S: lambda x: S.expn(3, x), (F32(1.5),), (0,)),
    ("rel_entr", lambda L, S: S.rel_entr, (F32(0.5), F32(2.0)), (0, 1)),
    ("owens_t", lambda L, S: S.owens_t, (F32(0.7), F32(1.5)), (0, 1)),
    ("hyp1f1", lambda L, S: S.hyp1f1, (F32(1.5), F32(2.5), F32(0.8)), (0, 1, 2)),
    ("hyp2f1", lambda L, S: S.hyp2f1, (F32(0.5), F32(1.5), F32(3.0), F32(0.4)), (0, 1, 2, 3)),
    ("approx_min_k", lambda L, S: lambda x: L.approx_min_k(x, 2)[0][1], (F32([3, 2, 1]),),
     (0,)),
    ("ragged_dot", lambda L, S: lambda l, r: L.ragged_dot(l, r, GROUPS).sum(),
     (IMG[0, 0, :, :2], LOCAL_RHS[:, :2, 0]), (0, 1)),
]


@pytest.mark.parametrize("name,fn,args,argnums", GRADS, ids=[g[0] for g in GRADS])
def test_grads_match_jax(name, fn, args, argnums):
    want = jax.jit(jax.grad(fn(*JAX), argnums))(*args)
    _same(xform.jit(xform.grad(fn(*XF), argnums))(*args), want, name, rtol=1e-4)


def test_shape_tuples_match_jax():
    cases = [("conv_shape_tuple", ((2, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME")),
             ("conv_general_shape_tuple", ((2, 8, 8, 3), (3, 3, 3, 4), (2, 1), "VALID", NHWC)),
             ("conv_transpose_shape_tuple", ((2, 8, 8, 3), (3, 3, 3, 4), (2, 1), "SAME", NHWC)),
             ("reduce_window_shape_tuple", ((5, 6), (2, 2), (1, 2), ((0, 1), (1, 0)), (1, 2)))]
    for name, args in cases:
        assert getattr(xlax, name)(*args) == tuple(getattr(jlax, name)(*args)), name


def test_rng_uniform_draws_in_range_like_jax():
    got = xlax.rng_uniform(F32(1.0), F32(2.0), (3, 4))
    want = jlax.rng_uniform(F32(1.0), F32(2.0), (3, 4))   # stateful: compare types and range
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    assert bool(((got >= 1) & (got < 2)).all())


def test_undifferentiable_arguments_raise_as_in_jax():
    with pytest.raises(ValueError, match="Betainc gradient with respect to a and b"):
        xform.grad(xlax.betainc)(F32(2.0), F32(3.0), F32(0.5))
    with pytest.raises(NotImplementedError, match="igamma_grad_a"):
        xform.grad(xlax.igamma_grad_a)(F32(2.0), F32(3.0))


def test_vmap_matches_jax():
    x = F32([[1.0, 0.5], [2.0, 4.0], [-1.0, np.inf]])
    _same(xform.vmap(lambda v: xlax.cumlogsumexp(v), 1, 1)(x), jlax.cumlogsumexp(x, 0),
          "vmap cumlogsumexp")
    y = np.arange(12.0, dtype=F32).reshape(2, 3, 2)
    _same(xform.vmap(lambda v: xlax.pswapaxes(v, "i", 1), axis_name="i")(y),
          jax.vmap(lambda v: jlax.pswapaxes(v, "i", 1), axis_name="i")(y), "pswapaxes")
    keys = np.arange(12, dtype=np.uint32).reshape(4, 3)   # batched along axis 1
    _same(xform.vmap(lambda k: xlax.rng_bit_generator(k, (2,)), 1)(keys),
          jax.vmap(lambda k: jlax.rng_bit_generator(k, (2,)), 1)(keys), "vmap rbg")


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="reps length must be equal to the ndim of x"):
        xlax.tile(POS, (2, 2))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        xlax.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="but 1 \\* 8 != 32"):
        xlax.bitcast_convert_type(np.uint8(1), np.float32)
    with pytest.raises(ValueError, match="Argument `n` to polygamma must be of integer"):
        xsp.polygamma(1.0, 2.0)


@pytest.mark.parametrize("module", ["xform.lax.special_series", "xform.lax.special_incomplete",
                                    "xform.lax.shape_utils", "xform.lax.conv_utils",
                                    "xform.lax.scatter_apply", "xform.lax.ragged_dot",
                                    "xform.scipy.special._gamma",
                                    "xform.scipy.special._misc",
                                    "xform.scipy.special._expint",
                                    "xform.scipy.special._hyper",
                                    "xform.scipy.special._fresnel",
                                    "xform.scipy.special._sph_harm"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
