"""NumPy indexing (``x[idx]``) and ``x.at[idx]`` updates against jax.numpy.

A hypothesis fuzz draws index expressions (ints, slices with steps, None, Ellipsis,
integer arrays and lists incl. negative entries, boolean masks) on random shapes and
compares values, shapes and dtypes eagerly and under jit; explicit cases cover traced
indices (jit, vmap), gradients, out-of-bounds modes, dtype rules and error texts.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xform
import xform.numpy as xnp
from xform.test_util import check_grads
from xform.errors import NonConcreteBooleanIndexError

# jax warns when .at[] casts float updates into an int array (xform casts silently)
pytestmark = pytest.mark.filterwarnings("ignore:scatter inputs have incompatible types")


def _same(got, want, exact=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _jaxify(idx):
    """The same index for jax: xform Arrays inside it become jax arrays."""
    if isinstance(idx, tuple):
        return tuple(_jaxify(i) for i in idx)
    if isinstance(idx, xform.Array):
        return jnp.asarray(np.asarray(idx))
    return idx


# ---- the fuzz ----

@st.composite
def index_problems(draw):
    """(x, index, rng): the structure comes from a drawn seed, so that even the few
    derandomized examples of the ci profile are all different."""
    rng = np.random.RandomState(draw(st.integers(0, 2**31 - 1)))
    rank = rng.randint(1, 5)
    shape = tuple(int(d) for d in rng.randint(1, 5, size=rank))
    kinds = rng.choice(["int", "slice", "slice", "none", "array", "list", "mask"],
                       size=rng.randint(1, rank + 2))
    batch = tuple(rng.randint(1, 4, size=rng.randint(0, 3)))  # advanced-index shape
    idx, axis, masks, arrays = [], 0, False, False
    for kind in kinds:
        if kind == "none":
            idx.append(None)
            continue
        if axis == rank:
            break
        n = min(shape)  # ints valid on any axis: an Ellipsis may be inserted below
        if kind == "int":
            idx.append(int(rng.randint(-n, n)))
        elif kind == "slice":
            n = shape[axis]
            bound = lambda: None if rng.rand() < 0.3 else int(rng.randint(-n - 2, n + 3))  # noqa
            idx.append(slice(bound(), bound(), [None, 1, 2, 3, -1, -2][rng.randint(6)]))
        elif kind in ("array", "list") or masks or arrays:
            # a suffix of the common batch shape with some dims squashed to 1 (0-d after
            # a mask, whose nonzero count need not broadcast with the batch shape)
            sub = () if masks else tuple(
                1 if rng.rand() < 0.3 else d for d in batch[rng.randint(len(batch) + 1):])
            arrays |= bool(sub)
            a = rng.randint(-n, n, size=sub).astype(["int32", "int8", "uint8"][rng.randint(3)])
            if a.dtype == np.uint8:
                a = a % n
            idx.append(a.tolist() if kind == "list" and sub else a)
        else:  # one boolean mask over one or two dimensions
            k = min(rank - axis, rng.randint(1, 3))
            idx.append(rng.rand(*shape[axis:axis + k]) < 0.5)
            axis, masks = axis + k, True
            continue
        axis += 1
    if rng.rand() < 0.4 and (not masks or axis == rank):  # (masks need their own axes)
        idx.insert(rng.randint(len(idx) + 1), Ellipsis)
    x = rng.randint(-5, 6, size=shape).astype(["float32", "int32"][rng.randint(2)])
    return x, tuple(idx), rng


@settings(max_examples=40)
@given(index_problems())
def test_getitem_fuzz_matches_jax(problem):
    x, idx, _ = problem
    want = jnp.asarray(x)[idx]
    _same(xnp.asarray(x)[idx], want)
    _same(xform.jit(lambda a: a[idx])(x), want)


@settings(max_examples=25)
@given(index_problems(), st.sampled_from(["set", "add", "multiply", "min", "max"]),
       st.sampled_from(["full", "scalar", "trailing"]))
def test_at_update_fuzz_matches_jax(problem, method, upd):
    x, idx, rng = problem
    shape = jnp.asarray(x)[idx].shape
    has_arrays = any(isinstance(i, (np.ndarray, list)) for i in idx)
    if upd == "scalar" or (method == "set" and has_arrays):  # duplicates: winner unspecified
        v = np.float32(rng.randint(-3, 4))
    else:
        v = rng.randint(-3, 4, size=shape if upd == "full" else shape[-1:]).astype(np.float32)
    want = getattr(jnp.asarray(x).at[idx], method)(v)
    _same(getattr(xnp.asarray(x).at[idx], method)(v), want)
    _same(xform.jit(lambda a, u: getattr(a.at[idx], method)(u))(x, v), want)


# ---- lowering choice ----

def _prims(f, *args):
    return {e.primitive.name for e in xform.make_jaxpr(f)(*args).jaxpr.eqns}


def test_basic_indexing_is_slices_not_gathers():
    x = np.zeros((3, 4, 5), np.float32)
    assert _prims(lambda a: a[1, ::-2, None, 1:3], x) <= {"slice", "rev", "squeeze",
                                                            "broadcast_in_dim"}
    assert _prims(lambda a: a[...], x) == set()
    assert "dynamic_slice" in _prims(lambda a, i: a[i, :, ::-1], x, 1)
    assert "gather" not in _prims(lambda a, i: a[i, :, ::-1], x, 1)
    assert "gather" in _prims(lambda a, i: a[i, ::2], x, 1)
    assert "gather" in _prims(lambda a: a[np.array([0, 2])], x)


# ---- traced indices: jit and vmap ----

def test_traced_indices_under_jit():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    fs = [lambda a, i: a[i], lambda a, i: a[i, 1:3, -1], lambda a, i: a[:, i, ::-1],
          lambda a, i: a[i, ::2, None], lambda a, i: a[1, :, i],
          lambda a, i: a.at[i, 1].get(mode="fill", fill_value=-1.)]
    for f in fs:
        for i in (0, 2, -1, -3, 7, -9):  # out-of-range traced scalars clamp, as in JAX
            _same(xform.jit(f)(x, i), jax.jit(f)(jnp.asarray(x), i))
    g = lambda a, i, j: a[i, :, j]  # noqa: E731  (advanced indices split by a slice)
    i, j = np.array([[0, -1], [2, 1]]), np.array([4, -5])
    _same(xform.jit(g)(x, i, j), g(jnp.asarray(x), i, j))
    h = lambda a, i: a[([i, 0],)]  # noqa: E731  (a list holding a tracer)
    _same(xform.jit(h)(x, 2), jax.jit(h)(jnp.asarray(x), 2))


def test_vmap_with_batched_indices():
    x = np.arange(36, dtype=np.float32).reshape(3, 4, 3)
    idx = np.array([[0, 2], [1, 1], [2, -1]])
    cases = [(lambda a, i: a[i], (None, 0)),
             (lambda a, i: a[:, i, 1], (None, 0)),
             (lambda a, i: a[i[0], ::-1, i], (None, 0)),
             (lambda a, i: a.at[i, 0].add(1.), (None, 0)),
             (lambda a, i: a.at[i].set(a[0]), (0, 0)),
             (lambda a, i: a[i[1]], (2, 0))]
    for f, in_axes in cases:
        got = xform.vmap(f, in_axes)(xnp.asarray(x), idx)
        _same(got, jax.vmap(f, in_axes)(jnp.asarray(x), idx))
        xs = x if in_axes[0] is None else np.moveaxis(x, in_axes[0], 0)
        loop = [f(xnp.asarray(x if in_axes[0] is None else xs[b]), xnp.asarray(idx[b]))
                for b in range(3)]
        _same(got, np.stack([np.asarray(v) for v in loop]))
    # a batched scalar index takes the dynamic_slice path
    _same(xform.vmap(lambda a, i: a[i, 1:], (None, 0))(xnp.asarray(x), np.array([2, 0, -1])),
          jax.vmap(lambda a, i: a[i, 1:], (None, 0))(jnp.asarray(x), np.array([2, 0, -1])))


# ---- gradients ----

def test_grads_through_getitem_and_at():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    v = np.array([0.5, -2., 3.], np.float32)
    i = np.array([2, 0, 2])  # a repeated index: .add accumulates, so do the cotangents

    def f(a, u):
        y = a.at[i, 1].add(u * a[0, :3])
        y = y.at[1:, ::-2].set(u[:2, None] * 2.)
        y = y.at[0].multiply(u[1]).at[:, 0].max(u * 0.1)
        return (y ** 2).sum() + (a[i][:, ::2] * a[[1], :2]).sum() + y.at[1].get().sum()

    got = xform.grad(f, (0, 1))(x, v)
    want = jax.grad(f, (0, 1))(jnp.asarray(x), v)
    for g, w in zip(got, want):
        _same(g, w, exact=False)
    check_grads(lambda a: a[i, 1::2] * a[None, 0, ::-1][:, :2],
                                (x.astype(np.float64),), order=2, modes=("fwd", "rev"))
    check_grads(lambda a, u: xnp.asarray(a).at[i].add(u[:, None]),
                                (x.astype(np.float64), v.astype(np.float64)), order=1,
                                modes=("fwd", "rev"))


def test_grad_with_traced_index():
    x = np.arange(5, dtype=np.float32)
    f = lambda a, k: (a[k] * a.at[k].set(3.)).sum()  # noqa: E731
    for k in (1, -2):
        _same(xform.jit(xform.grad(f))(x, k), jax.jit(jax.grad(f))(jnp.asarray(x), k))


# ---- out-of-bounds behaviour ----

def test_out_of_bounds_modes_match_jax():
    x = np.arange(10, dtype=np.float32)
    i = np.array([12, -13, 3, -1])
    xa, ja = xnp.asarray(x), jnp.asarray(x)
    _same(xa[i], ja[i])  # default gather clamps
    for mode in (None, "clip", "fill", "drop", "promise_in_bounds"):
        _same(xa.at[i].get(mode=mode), ja.at[i].get(mode=mode))
        for m in ("set", "add", "min"):
            _same(getattr(xa.at[i], m)(7., mode=mode), getattr(ja.at[i], m)(7., mode=mode))
    _same(xa.at[i].get(mode="fill", fill_value=-1), ja.at[i].get(mode="fill", fill_value=-1))
    _same(xa.at[12].set(1.), ja.at[12].set(1.))  # a static out-of-range update is dropped
    _same(xa.at[i].set(1., wrap_negative_indices=False),
          ja.at[i].set(1., wrap_negative_indices=False))
    _same(xa[xnp.asarray(11)], ja[jnp.asarray(11)])  # Array scalars clamp (dynamic_slice)
    _same(xnp.asarray(np.arange(6).reshape(2, 3)).at[:, 5].get(mode="fill"),
          jnp.arange(6).reshape(2, 3).at[:, 5].get(mode="fill"))


def test_static_out_of_range_int_clamps_as_jax():
    x, jx = xnp.arange(12).reshape(3, 4), jnp.arange(12).reshape(3, 4)
    _same(xnp.arange(10)[11], jnp.arange(10)[11])  # 9, as JAX's docs call out
    _same(xnp.arange(10)[-11], jnp.arange(10)[-11])  # 0
    _same(x[:, -5], jx[:, -5])
    _same(x[5, [0, 1]], jx[5, [0, 1]])  # the gather path clamps the same way
    _same(x[1, 9], jx[1, 9])
    _same(xform.jit(lambda a: a[-7, 1:3])(x), jax.jit(lambda a: a[-7, 1:3])(jx))
    _same(xform.jit(lambda a, i: a[i, -5])(x, 0), jx[0, -5])
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        xnp.zeros((0, 3))[0]
    _same(x.at[7].get(mode="clip"), jx.at[7].get(mode="clip"))


# ---- dtypes, scalars, booleans ----

def test_update_dtypes_and_weak_types():
    xi, ji = xnp.arange(5), jnp.arange(5)
    _same(xi.at[1].set(2.7), ji.at[1].set(2.7))  # cast back to x's dtype
    _same(xi.at[1].add(2.7), ji.at[1].add(2.7))
    _same(xi.at[1].divide(2), ji.at[1].divide(2))  # true division: float result
    _same(xi.at[2:].power(2), ji.at[2:].power(2))
    _same(xi.at[::2].subtract(3), ji.at[::2].subtract(3))
    _same(xnp.arange(4, dtype="uint8").at[1].set(300), jnp.arange(4, dtype="uint8").at[1].set(300))
    _same(xnp.ones(3, "bfloat16").at[0].mul(3), jnp.ones(3, "bfloat16").at[0].mul(3))
    w = xform.jit(lambda a: (a * 0 + 2.0).at[0].set(1))(np.ones(2, np.float32))
    assert w.dtype == np.float32 and not w.weak_type
    f = lambda s: (s * 1.0)[None].at[0].add(1).at[...].get()  # noqa: E731  weak scalar
    got, want = xform.jit(f)(2.0), jax.jit(f)(2.0)
    _same(got, want)
    assert got.weak_type == want.weak_type
    _same(xnp.ones((2, 3)).at[1].set(np.arange(3)), jnp.ones((2, 3)).at[1].set(np.arange(3)))
    # complex min/max order (real, imag) lexicographically, as lax.min (XLA's scatter
    # compared the real parts only: ties kept the operand)
    c = np.array([1, 1, 2 - 5j, 3j], np.complex64)
    u, i = np.array([1 - 1j, 1 + 1j, 2 + 1j, 2j], np.complex64), np.array([0, 1, 2, 3])
    for m in ("min", "max"):
        _same(getattr(xnp.asarray(c).at[i], m)(u), getattr(jnp.asarray(c).at[i], m)(u))


def test_scalar_bool_and_zero_d_indices():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    xa, ja = xnp.asarray(x), jnp.asarray(x)
    for idx in [True, False, (True, 1), (1, slice(None), True), (Ellipsis, False),
                (True, slice(None), True), np.array(True), (np.int8(2),), (np.array(-1),),
                (np.uint8(1), np.array([3, 0])), np.array([[True, False, True, False]] * 3)]:
        _same(xa[idx], ja[idx])
        _same(xa.at[idx].add(100), ja.at[idx].add(100))
    _same(xa[xnp.asarray(1), xnp.asarray([2, -1])], ja[jnp.asarray(1), jnp.asarray([2, -1])])
    _same(xa[xnp.asarray(1):], ja[jnp.asarray(1):])  # concrete Array slice bounds
    _same(xa[np.zeros(0, np.int32)], ja[np.zeros(0, np.int32)])
    _same(xnp.zeros((0, 3))[:, [0, 2]], jnp.zeros((0, 3))[:, [0, 2]])
    _same(xa.at[np.zeros((0,), np.int32)].set(5), ja.at[np.zeros((0,), np.int32)].set(5))


# ---- errors ----

def test_traced_boolean_mask_error():
    x = np.arange(6.)
    with pytest.raises(NonConcreteBooleanIndexError,
                       match="(?s)boolean indices must be concrete.*data-dependent"):
        xform.jit(lambda a: a[a > 2])(x)
    with pytest.raises(NonConcreteBooleanIndexError, match="must be concrete"):
        xform.jit(lambda a: a.at[a > 2].set(0.))(x)
    with pytest.raises(NonConcreteBooleanIndexError, match="must be concrete"):
        xform.jit(lambda a, b: a[b])(x, True)
    assert issubclass(NonConcreteBooleanIndexError, IndexError)
    # a mask known at trace time (a JVP primal) is fine
    _same(xform.grad(lambda a: a[a > 2].sum())(x), jax.grad(lambda a: a[a > 2].sum())(x))


def test_index_error_messages():
    x = xnp.zeros((3, 4))
    cases = [
        (lambda: x[[0, 1]], TypeError, "non-tuple sequence for multidimensional indexing"),
        (lambda: x[1.5], TypeError, "Indexer must have integer or boolean type, got "
                                    "indexer with type float64"),
        (lambda: x[xnp.ones(2)], TypeError, "integer or boolean type, got indexer with "
                                            "type float32"),
        (lambda: x["a"], TypeError, "string indexing"),
        (lambda: x[0, 0, 0], IndexError, "Too many indices: array is 2-dimensional, but 3 "
                                         "were indexed"),
        (lambda: x[..., 0, ...], IndexError, "single ellipsis"),
        (lambda: x[np.ones((3, 5), bool)], IndexError,
         r"boolean index did not match shape of indexed array in index 0: got \(3, 5\), "
         r"expected \[3, 4\]"),
        (lambda: x[[0, 1], [0, 1, 2]], ValueError, "Incompatible shapes for broadcasting"),
        (lambda: x[::0], ValueError, "slice step cannot be zero"),
        (lambda: xform.jit(lambda a, i: a[i:])(x, 1), IndexError,
         "Slice entries must be static integers"),
        (lambda: x[{}], IndexError, "only integers, slices"),
        (lambda: x.at[0].get(fill_value=np.ones(2), mode="fill"), ValueError,
         "fill_value argument to indexed get\\(\\) must be a scalar"),
        (lambda: x.at[0].set(np.ones(3)), ValueError, "Incompatible shapes for broadcasting"),
    ]
    def assign():
        x[0] = 1.
    cases.append((assign, TypeError, "immutable.*x.at\\[idx\\].set\\(y\\)"))
    for f, err, msg in cases:
        with pytest.raises(err, match=msg):
            f()


def test_eager_int_and_slice_indexing_share_one_executable():
    # As JAX's eager slice: the starts are operands (dynamic_slice), so x[i] for a new
    # Python int must not compile a new program.
    from xform.interpreters import compiler
    base = np.arange(60.0, dtype=np.float32).reshape(12, 5)
    x = xnp.asarray(base)
    x[0], x[0:3], x[0, 1:3]
    before = compiler.stats["compile"]
    for i in range(10):  # x[i:i + 3] keeps its size
        np.testing.assert_array_equal(x[i], base[i])
        np.testing.assert_array_equal(x[i:i + 3], base[i:i + 3])
        np.testing.assert_array_equal(x[i, 1:3], base[i, 1:3])
    np.testing.assert_array_equal(x[1:9:3], base[1:9:3])  # strided: a real slice
    assert compiler.stats["compile"] - before <= 1


def test_at_apply_matches_jax():
    """``.at[idx].apply(f)``: f once per occurrence of an index, dropped out of bounds."""
    x = np.arange(6.0).reshape(2, 3)
    rows, cols = np.array([0, 0, 1]), np.array([1, 1, 2])
    for idx in [(rows, cols), 1, (slice(None), 7)]:
        for f, jf in [(lambda v: v * 10 + 1, lambda v: v * 10 + 1), (xnp.sin, jnp.sin)]:
            _same(xnp.asarray(x).at[idx].apply(f), jnp.asarray(x).at[idx].apply(jf),
                  exact=False)
    i = np.arange(4)
    _same(xform.jit(lambda a: a.at[rows].apply(xnp.negative))(i),
          jax.jit(lambda a: a.at[rows].apply(jnp.negative))(i))
