"""Regressions from a differential sweep of ``xform.numpy`` shape/indexing/sorting/set/
statistics functions, linalg, fft, random keys and grad/vmap against JAX on edge
inputs (zero-size and 0-d arrays, unsigned and low-precision dtypes, NaNs, option
variants): one small case per bug class, compared with jax at run time.
"""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as xjnp
from optable import assert_tree_same

F32 = np.array([[3.0, np.nan, 1.0], [-0.0, 2.0, 0.5]], np.float32)


def same(name, *args, tol=1e-6, **kw):
    want = getattr(jjnp, name)(*args, **kw)
    assert_tree_same(getattr(xjnp, name)(*args, **kw), want, tol, name)


def test_partition_of_unsigned_keeps_zero():
    # Negating uint8 maps 0 to itself; the order is flipped with ~a, as JAX's -(a + 1).
    a = np.array([[3, 1, 0, 255], [2, 7, 5, 0]], np.uint8)
    same("partition", a, 2)
    same("argpartition", a, 0)


def test_unique_inverse_of_0d_keeps_input_shape():
    same("unique", np.float32(2.5), return_inverse=True)
    same("unique_all", np.array(3, np.int32))


def test_take_along_axis_zero_size_batch():
    # A unit gather slice cannot span a zero-size batch dim; the result is empty.
    same("take_along_axis", np.zeros((0, 3), np.float32), np.zeros((0, 1), np.int32), -1)
    same("median", np.zeros((0, 3), np.float32), axis=-1)


@pytest.mark.parametrize("nan", [False, True])
def test_quantile_inverted_cdf_and_weights(nan):
    f = "nanquantile" if nan else "quantile"
    q = np.array([0.0, 0.3, 1.0], np.float32)
    w = np.array([[1.0, 0.0, 2.0], [0.5, -1.0, 1.0]], np.float32)  # a negative weight: NaN
    same(f, F32, q, axis=1, method="inverted_cdf", weights=w, keepdims=True)
    same(f, F32, 0.5, axis=0, method="inverted_cdf", weights=np.array([1.0, 3.0], np.float32))
    with pytest.raises(NotImplementedError):
        getattr(xjnp, f)(F32, 0.5, method="linear", weights=w)


def test_quantile_interpolates_in_q_dtype():
    # JAX computes positions and the linear blend in q's dtype, then casts to a's.
    a = (np.arange(6) * 0.7 - 1).astype(jjnp.bfloat16).reshape(2, 3)
    same("quantile", a, np.array([0.3, 0.7], np.float32), axis=-1, tol=1e-2)
    with pytest.raises(ValueError, match="rank"):
        xjnp.nanpercentile(F32, np.array([[10.0, 90.0]]))


def test_take_and_put_along_axis_modes():
    a = np.array([[3, 1, 0], [2, 7, 5]], np.uint8)
    idx = np.array([[0, 2, -1], [5, -4, 1]])
    same("take_along_axis", a, idx, axis=1, mode="clip")  # negatives wrap, then clip
    same("take_along_axis", a, np.array([[1, 5, 1]]), axis=0, fill_value=-1)  # wraps to 255
    same("take_along_axis", a, np.array([[2, 0, 1]]))  # axis defaults to -1
    for mode in (None, "clip"):
        same("put_along_axis", a, np.array([[5], [-1]]), 9, axis=1, inplace=False, mode=mode)
    same("put_along_axis", a, np.array([0, 4]), 9, axis=None, inplace=False)


def test_insert_clips_and_delete_takes_a_mask():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    same("insert", a, np.array([-7, 5]), 9.0, axis=1)
    same("delete", a, np.array([True, False, True]), axis=1)
    with pytest.raises(ValueError):
        xjnp.insert(a, np.array([True, False, True]), 9.0, axis=1)
    same("reshape", a, (3, 2), order="A")


def test_convert_python_int_out_of_range_wraps():
    for v, dt in ((-1, np.uint8), (300, np.uint8), (2**40, np.int32)):
        assert_tree_same(xform.lax.convert_element_type(v, dt),
                         jax.lax.convert_element_type(v, dt), 0, f"{v}->{dt}")


def test_interp_period_and_extrapolate():
    xp = np.array([0.0, 1.0, 2.0, 4.0], np.float32)
    fp = np.array([0.0, 10.0, 5.0, 7.0], np.float32)
    x = np.array([-1.0, 0.5, 3.9, 9.0], np.float32)
    same("interp", x, xp, fp, period=-3.0)          # |period|
    same("interp", x, xp, fp, -1.0, 99.0, period=3.0)  # left/right ignored with a period
    same("interp", x, xp, fp, "extrapolate", "extrapolate")
    same("interp", x, np.array([0.0, 1e-9, 1.0, 2.0], np.float32), fp)  # JAX's dx bound


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 2, 2), (0, 3)])
def test_linalg_of_zero_size(shape):
    z = np.zeros(shape, np.float32)
    for f in ("inv", "det", "slogdet", "svd") if shape[-1] == shape[-2] else ("svd",):
        assert_tree_same(getattr(xjnp.linalg, f)(z), getattr(jjnp.linalg, f)(z), 1e-6, f)
    if shape == (0, 0):
        assert_tree_same(xjnp.linalg.solve(z, np.zeros(0, np.float32)),
                         jjnp.linalg.solve(z, np.zeros(0, np.float32)), 0, "solve")
        for o in (1, 2, np.inf):
            assert_tree_same(xjnp.linalg.norm(z, o), jjnp.linalg.norm(z, o), 0, f"norm {o}")


def test_scipy_qr_modes_and_small_fixes():
    import jax.scipy.linalg as jsl
    import xform.scipy.linalg as xsl
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for mode in ("r", "economic"):  # mode="r" is the 1-tuple (r,)
        assert_tree_same(xsl.qr(a, mode=mode), jsl.qr(a, mode=mode), 1e-5, mode)
    same("poly", np.zeros(0, np.float32))   # no roots: 0-d 1
    assert_tree_same(xjnp.linalg.matrix_rank(a, hermitian=False),
                     jjnp.linalg.matrix_rank(a, hermitian=False), 0, "rank")


def test_det_gradient_at_singular_matrices():
    # d det = tr(adj(a) da) through a cofactor solve (JAX's), not lu's JVP (NaN there).
    f = lambda n: lambda a: n.linalg.det(a).sum()
    for a in (np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], np.float32),):
        assert_tree_same(xform.grad(f(xjnp))(a), jax.grad(f(jjnp))(a), 1e-5, "grad det")


def test_scipy_cholesky_reads_one_triangle_and_lu_p_is_real():
    import jax.scipy.linalg as jsl
    import xform.scipy.linalg as xsl
    a = np.array([[4.0, 1.0], [3.0, 5.0]], np.float32)  # not symmetric: one triangle counts
    for lower in (False, True):
        assert_tree_same(xsl.cholesky(a, lower=lower), jsl.cholesky(a, lower=lower), 1e-5,
                         f"cholesky lower={lower}")
    c = np.array([[2 + 1j, 1], [1j, 3]], np.complex64)
    assert_tree_same(xsl.lu(c), jsl.lu(c), 1e-5, "lu complex")


def test_pad_mean_of_bool_is_not_rounded():
    a = np.array([[True, False, True], [False, False, True]])
    same("pad", a, 1, mode="mean")


def test_fft_of_empty_input_and_zero_length():
    z = np.zeros((0,), np.float32)
    for f, kw in (("fft", {"norm": "forward"}), ("irfft", {}), ("hfft", {})):
        assert_tree_same(getattr(xjnp.fft, f)(z, **kw), getattr(jjnp.fft, f)(z, **kw), 0, f)
    with pytest.raises(ValueError, match="positive"):
        xjnp.fft.fft(np.ones(3, np.float32), 0)


def test_bool_products_with_preferred_type_count_and_small_fixes():
    v = np.array([False, True, True])
    same("einsum", "i,i", v, v, preferred_element_type=np.float32)  # a count: 2, not any()
    same("dot", v, v)
    same("diff", v.reshape(1, 3), 0, prepend=1)  # n=0: the input as it is
    same("ix_", np.array([1, 2]), np.zeros(0, np.float32))  # an empty index is an int


def test_einsum_contracts_in_jax_order():
    # JAX takes opt_einsum's "optimal" path for up to four operands: the fewest FLOPs,
    # so the same products round alike (jax.image.resize's two weight matrices were an
    # ulp apart: it contracted x with the first one, JAX the second one with x)
    import opt_einsum
    rng = np.random.default_rng(0)
    for _ in range(150):
        terms = ["".join(rng.choice(list("abcdef"), rng.integers(1, 4), replace=False))
                 for _ in range(rng.integers(2, 5))]
        out = "".join(sorted(c for c in set("".join(terms)) if rng.random() < 0.3))
        size = {c: int(rng.choice([1, 2, 3, 5, 8])) for c in "abcdef"}
        ops = [np.ones([size[c] for c in t], np.float32) for t in terms]
        sub = ",".join(terms) + "->" + out
        for optimize in ("auto", True):
            want = opt_einsum.contract_path(sub, *ops, optimize="optimal")[0]
            assert xjnp.einsum_path(sub, *ops, optimize=optimize)[0] == want, (sub, ops)
    x, w0, w1 = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (4, 8), (6, 12)))
    same("einsum", x, [0, 1], w0, [0, 2], w1, [1, 3], [2, 3], tol=0)


def test_select_takes_non_bool_conditions():
    # JAX's select reads each condition as astype(bool): non-zero (NaN too) is true.
    conds = [np.array([0, 1, 2], np.int32), np.array([0.5, 0.0, np.nan], np.float32)]
    same("select", conds, [np.float32([1, 2, 3]), np.float32([4, 5, 6])], 0.5)


def _error_types(fn):
    """The exception class each of jax.numpy and xform.numpy raises for ``fn(jnp)``."""
    out = []
    for jn in (jjnp, xjnp):
        with pytest.raises(Exception) as e:
            fn(jn)
        out.append(e.type)
    return out


def test_poly_functions_of_2d_and_0d_coefficients():
    # JAX's polyder scales a 2-D p's trailing axis (p[:-m] * coeff), polyint concatenates
    # k onto p (a 2-D p: concatenate's rank error), polyadd adds into the longer's tail
    p2, p1 = np.arange(6.).reshape(2, 3).astype(np.float32), np.array([1., 2, 3], np.float32)
    same("polyder", p2)
    same("polyder", p1, 5)
    same("polyint", np.ones(12, np.float32), 3, k=np.array([1., 2., 3.], np.float32))
    same("polyadd", p2, np.ones((1, 1), np.float32))
    same("polysub", np.ones((1, 3), np.float32), p2)
    for fn in (lambda jn: jn.polyder(p2, 2), lambda jn: jn.polyint(p2),
               lambda jn: jn.polyder(np.float32(3)), lambda jn: jn.polyint(np.float32(3)),
               lambda jn: jn.polyval(np.float32(3), p1), lambda jn: jn.polyadd(p2, p1),
               lambda jn: jn.concatenate([p2, np.ones((2, 4), np.float32)])):
        theirs, ours = _error_types(fn)
        assert ours is theirs, (theirs, ours)
    assert repr(xjnp.polyder(p1, 5)) == repr(jjnp.polyder(p1, 5))   # "[], shape=(0,)"


def test_roll_by_a_traced_shift():
    # JAX's dynamic roll (a window of [a, a]) for a shift only known at run time
    x = np.arange(12.).reshape(3, 4).astype(np.float32)
    run = lambda L, jn: L.jit(lambda a, s: (  # noqa: E731
        jn.roll(a, s), jn.roll(a, -s, axis=0), jn.roll(a, jn.stack([s, s + 1]), axis=(0, 1))))(
        x, 5)
    assert_tree_same(run(xform, xjnp), run(jax, jjnp), 0, "roll")


def test_bool_sum_prod_and_unsigned_int_linspace():
    b = np.array([[True, False, True]])
    same("sum", b, promote_integers=False)  # bools are cast to the default int first
    same("prod", b, axis=1, promote_integers=False)
    same("linspace", -5, 5, 4, dtype=np.uint8)  # floor, then the saturating convert: 0


def test_complex_to_bool_reads_the_real_part_only_in_lax():
    # lax's conversion (and so all/any) takes the real part; astype/select test x != 0
    c = np.array([-1j, 0j, 1 + 0j, np.nan * 1j], np.complex64)
    assert_tree_same(xform.lax.convert_element_type(c, bool),
                     jax.lax.convert_element_type(c, bool), 0, "convert")
    same("all", c[:1])
    same("any", c[:2])
    same("astype", c, bool)
    same("select", [c], [np.ones(4, np.float32)])
    assert_tree_same(xjnp.asarray(c).astype(bool), jjnp.asarray(c).astype(bool), 0, "method")


def test_var_std_correction_and_mean_and_cov_edges():
    a = np.array([[3.0, 4.0, 1.0], [-0.0, 2.0, 0.5]], np.float32)
    for f in ("var", "std"):
        same(f, a, axis=1, correction=0.5)
        same(f, a, axis=0, mean=np.array([[1.0, 2, 3]], np.float32))
    with pytest.raises(ValueError, match="simultaneously"):
        xjnp.var(a, ddof=1, correction=1)
    same("cov", np.zeros((2, 0), np.float32))  # no observations: NaN, not -0
    same("cov", np.zeros((0, 2), np.float32))  # no variables: a (0, 0) array
    same("cov", np.ones((1, 3), np.float32), rowvar=False)  # a 2-D row is transposed
    same("cov", a, fweights=np.array([1, -2, 3]), aweights=np.array([1.0, -2, 3], np.float32))
    same("corrcoef", a, dtype=np.float16, tol=1e-3)


def test_histogram_weights_promote_with_a():
    a = np.array([0.5, 1.5, 1.5, 2.0, 9.0, -1.0], np.float32)
    same("histogram", a, 3, weights=np.arange(6))  # float counts, not int
    same("histogram", np.array([1, 2], np.uint8), np.array([0, 1, 2]))  # float edges
    same("histogramdd", a.reshape(3, 2), 2, weights=np.arange(3))
    with pytest.raises(ValueError, match="same shape"):
        xjnp.histogram(a, weights=np.ones(7))


def test_matrix_rank_given_rtol_is_absolute_and_rfft_complex_error():
    # JAX 0.10.2 compares singular values with a given rtol/tol as it is (not scaled)
    a = np.array([[4.0, 1, 0.5], [1, 3, -1], [0.5, -1, 2]], np.float32)
    for kw in ({"rtol": 1.5}, {"tol": 0.5}):
        assert_tree_same(xjnp.linalg.matrix_rank(a, **kw), jjnp.linalg.matrix_rank(a, **kw),
                         0, f"rank {kw}")
    assert_tree_same(xjnp.linalg.matrix_rank(np.array([0.0, 1.0], np.float32)),
                     jjnp.linalg.matrix_rank(np.array([0.0, 1.0], np.float32)), 0, "rank 1-D")
    theirs, ours = _error_types(lambda jn: jn.fft.rfft(np.ones(3, np.complex64)))
    assert ours is theirs, (theirs, ours)


def test_svd_and_pinv_hermitian_take_jax_eigh_path():
    # eigh of the symmetrized input: U's column signs and pinv of a non-symmetric input
    a = np.array([[4.0, 1, 0.5], [1, 3, -1], [0.5, -1, 2]], np.float32)
    b = np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], np.float32)
    assert_tree_same(xjnp.linalg.svd(a, hermitian=True), jjnp.linalg.svd(a, hermitian=True),
                     1e-6, "svd")
    assert_tree_same(xjnp.linalg.pinv(b, hermitian=True), jjnp.linalg.pinv(b, hermitian=True),
                     1e-5, "pinv")
