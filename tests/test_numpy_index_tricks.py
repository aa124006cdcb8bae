"""Index tricks (mgrid, ogrid, r_, c_, s_, index_exp), jnp.ufunc / frompyfunc and the
top-level names added beside them, against jax at run time."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp
from test_numpy import check

A = np.arange(12, dtype=np.int32).reshape(3, 4)
F = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 2


def _both(fn, weak=False, tol=None):
    """``fn(m)`` with m = jax.numpy and xform.numpy, each under its jit (one compile, not
    one per op): same pytree of shapes/dtypes/values; where JAX raises, xform raises the
    same class."""
    try:
        expected = jax.jit(lambda: fn(jnp))()
    except (TypeError, ValueError, IndexError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            xform.jit(lambda: fn(xnp))()
        return
    got = xform.jit(lambda: fn(xnp))()
    check(list(got) if isinstance(got, (list, tuple)) else got,
          list(expected) if isinstance(expected, (list, tuple)) else expected, tol, weak)


@pytest.mark.parametrize("expr", [
    lambda m: m.mgrid[0:4:2, 1:2:3j], lambda m: m.mgrid[-1:1:5j], lambda m: m.mgrid[:0],
    lambda m: m.ogrid[0:3, 0.5:2:0.5], lambda m: m.mgrid[0:2, 0:1.:3j],
    lambda m: m.r_[0:3, 5, m.array([7, 8])], lambda m: m.r_[-1:1:5j, [1., 2.]],
    lambda m: m.r_["0,2,0", [1, 2, 3], [4, 5, 6]], lambda m: m.r_["1,2,-1", [1, 2], [3, 4]],
    lambda m: m.r_["r", [1, 2]], lambda m: m.r_["c", [1, 2]], lambda m: m.c_[A, A[:, :1]],
    lambda m: m.c_["0", [1, 2], [3]], lambda m: m.c_[[1, 2], [3, 4]],
    lambda m: m.r_["bad", [1]], lambda m: m.r_[[1], "c"],
])
def test_index_tricks(expr):
    _both(expr)


def test_s_index_exp_euler_gamma():
    assert xnp.s_[1:2, ::2] == jnp.s_[1:2, ::2] and xnp.index_exp[3] == jnp.index_exp[3]
    assert xnp.euler_gamma == jnp.euler_gamma
    with pytest.raises(xform.errors.ConcretizationTypeError):
        xform.jit(lambda n: xnp.mgrid[0:n])(3)


UFUNC_CASES = [
    lambda m: (m.add.reduce(A), m.add.reduce(A, axis=None, keepdims=True),
               m.multiply.reduce(A[:, :2] + 1, axis=1, dtype=np.float32),
               m.maximum.reduce(A, axis=1, initial=5, where=A > 6),
               m.minimum.reduce(F, axis=None), m.logical_and.reduce(A, axis=1),
               m.logical_or.reduce(A > 10, initial=True), m.bitwise_or.reduce(A),
               m.bitwise_xor.reduce(A, axis=1), m.logical_xor.reduce(A > 4),
               m.logaddexp.reduce(F, axis=1), m.add.reduce(A, where=A > 2),
               m.add.reduce(np.zeros((0, 2), np.int32)), m.subtract.reduce(A, axis=1)),
    lambda m: (m.add.accumulate(A, axis=1), m.multiply.accumulate(A[:2] + 1),
               m.subtract.accumulate(F, axis=1), m.maximum.accumulate(F[::-1], axis=0),
               m.logaddexp2.accumulate(F, axis=-1, dtype=np.float32)),
    lambda m: (m.add.outer(np.arange(2), np.arange(3.)), m.multiply.outer(A[0], F),
               m.bitwise_and.outer(A[0], A[1])),
    lambda m: (m.add.at(A, (np.array([0, 0, 2]), 1), 7, inplace=False),
               m.multiply.at(F, np.array([1, 1]), 3., inplace=False),
               m.subtract.at(A, 2, np.arange(4), inplace=False),
               m.add.at(np.array([True, False]), np.array([1, 1]), True, inplace=False),
               m.maximum.at(A, np.array([0, 1]), 6, inplace=False),
               m.negative.at(F, np.array([1, 0, 1]), inplace=False)),
    lambda m: (m.add.reduceat(np.arange(8), np.array([0, 4, 1, 5])),
               m.maximum.reduceat(A, np.array([0, 2]), axis=1)),
    lambda m: (m.negative(A), m.add(A, 1.5), m.logaddexp(F, 0.)),
]


@pytest.mark.parametrize("case", range(len(UFUNC_CASES)))
def test_ufunc_methods(case):
    _both(UFUNC_CASES[case], tol=1e-5)


def test_frompyfunc():
    def make(m):
        return m.frompyfunc(lambda x, y: x * y + 1, nin=2, nout=1, identity=1)
    _both(lambda m: (make(m)(A, 2), make(m).reduce(A), make(m).accumulate(A, axis=1),
                     make(m).outer(A[0], A[1, :2]), make(m).reduce(np.zeros(0, np.int32)),
                     make(m).at(A[0], np.array([1, 1]), 2, inplace=False),
                     make(m).reduceat(np.arange(5), np.array([0, 3]))))
    f = xnp.frompyfunc(lambda x, y: x * y + 1, 2, 1)
    g = jnp.frompyfunc(lambda x, y: x * y + 1, 2, 1)
    assert (f.nin, f.nout, f.nargs, f.identity) == (g.nin, g.nout, g.nargs, g.identity)
    assert repr(xnp.add) == repr(jnp.add) and xnp.add.identity == jnp.add.identity
    assert xnp.add == xnp.add and hash(xnp.add) == hash(xnp.add) and xnp.add != xnp.subtract
    # bad input raises as JAX does
    unary = xnp.frompyfunc(lambda x: x, 1, 1)
    _both(lambda m: m.frompyfunc(lambda x: x, 1, 1).reduce(A))
    _both(lambda m: m.frompyfunc(lambda x: x, 1, 1).outer(A, A))
    _both(lambda m: m.maximum.reduce(A, where=A > 1))      # no identity, no initial
    _both(lambda m: m.add.reduce(A, where=A))              # where not bool
    _both(lambda m: m.maximum.reduce(np.zeros((0,), np.float32)))
    _both(lambda m: m.frompyfunc(lambda x, y: x, 2, 1).accumulate(A, axis=None))
    with pytest.raises(NotImplementedError, match="inplace"):
        xnp.add.at(A, 0, 1)
    with pytest.raises(NotImplementedError):
        unary(A, out=A)


def test_ufunc_transforms():
    f = lambda m: lambda x: m.multiply.reduce(x, axis=0) + m.add.accumulate(x, axis=1).sum(0)
    x = F + 3
    check(xform.grad(lambda x: f(xnp)(x).sum())(x), jax.grad(lambda x: f(jnp)(x).sum())(x))
    check(xform.jit(xform.vmap(f(xnp)))(x[:, None]), jax.vmap(f(jnp))(x[:, None]), 1e-5)
    h = lambda m: lambda x: m.frompyfunc(m.maximum, 2, 1).accumulate(x)
    check(xform.jit(h(xnp))(x), jax.jit(h(jnp))(x))


def test_top_level_names():
    for name in ("float0", "Device", "Shard", "ds", "process_indices", "host_count", "host_id", "host_ids",
                 "print_environment_info", "copy_to_host_async", "version"):
        assert hasattr(xform, name), name
    assert xform.float0 == jax.float0 and xform.Device is jax.Device
    assert isinstance(xnp.ones(2).addressable_shards[0], xform.Shard)
    assert xform.process_indices() == jax.process_indices()
    assert isinstance(xform.version.__version__, str)
    assert xform.__version_info__ == tuple(int(p) for p in xform.__version__.split("."))
    for name in ("host_id", "host_count", "host_ids"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert getattr(xform, name)() == getattr(jax, name)()
        assert "renamed" in str(w[0].message)
    info = xform.print_environment_info(return_string=True)
    assert "numpy:" in info and "process_count: 1" in info
    tree = {"a": xnp.ones(2), "b": 3}
    assert xform.copy_to_host_async(tree) is tree


def test_numpy_names():
    for name in ("mgrid", "ogrid", "r_", "c_", "s_", "index_exp", "euler_gamma", "ufunc",
                 "frompyfunc"):
        assert hasattr(xnp, name), name
    assert all(isinstance(getattr(xnp, n), xnp.ufunc) for n in dir(jnp)
               if isinstance(getattr(jnp, n), jnp.ufunc))
    assert all(hasattr(xnp.ufunc, n) for n in dir(jnp.ufunc) if not n.startswith("_"))


X10 = np.arange(10, dtype=np.int32)


@pytest.mark.parametrize("expr", [
    lambda J, m: (m.asarray(X10)[J.ds(9, 2)], m.asarray(X10)[J.ds(-1, 2)],
                  m.asarray(X10)[J.ds(-12, 2)], m.asarray(X10)[J.ds(8, 3, 2)],
                  m.asarray(X10)[J.ds(-3, 2, 2)], m.asarray(X10)[J.ds(3)],
                  m.asarray(X10).at[J.ds(7, 3)].get(), m.asarray(A)[1:, J.ds(1, 2)],
                  m.asarray(A)[J.ds(1, 2), m.array([0, 3])], m.asarray(A)[..., J.ds(2, 2)],
                  m.asarray(A)[J.ds(1, 2), None], m.asarray(A)[[True, False, True], J.ds(1, 2)]),
    lambda J, m: (m.asarray(X10).at[J.ds(9, 2)].set(0), m.asarray(X10).at[J.ds(2, 3, 2)].set(-1),
                  m.asarray(X10).at[J.ds(-1, 2)].add(100), m.asarray(X10).at[J.ds(8, 3, 2)].set(-1),
                  m.asarray(A).at[J.ds(1, 2), m.array([0, 3])].add(100),
                  m.asarray(A).at[None, ..., J.ds(1, 2, 2)].set(0)),
    lambda J, m: [J.jit(lambda y, i: (y.at[J.ds(i, 2), 1].set(0), y[J.ds(i, 2)]))(A, i)
                  for i in (1, 2)],
    lambda J, m: (J.vmap(lambda i: m.asarray(X10)[J.ds(i, 3)])(m.arange(3)),
                  J.grad(lambda v, i: (v[J.ds(i, 2)] ** 2).sum())(m.arange(5.), 1)),
])
def test_ds(expr):
    got, expected = expr(xform, xnp), expr(jax, jnp)
    flat = lambda t: [a for x in t for a in (x if isinstance(x, tuple) else (x,))]
    check(flat(got), flat(expected))


def test_ds_pytree_and_errors():
    assert xform.ds(None) == slice(None) and xform.ds(3) == xform.ds(0, 3)
    assert xform.tree_util.tree_leaves(xform.ds(xnp.int32(1), 2)) == []   # static start
    seen = []
    xform.jit(lambda i: seen.append(xform.tree_util.tree_leaves(xform.ds(i, 2))) or i)(1)
    assert len(seen[0]) == 1                                                # traced start
    with pytest.raises(ValueError, match="stride"):
        xform.ds(1, 2, -1)
    with pytest.raises(ValueError, match="Non-static stride"):
        xform.ds(1, 2, 1.5)


def test_docstring_examples():
    import doctest
    import importlib
    for name in ("xform.numpy._index_tricks", "xform.numpy._ufunc", "xform.numpy._dslice",
                 "xform.environment_info"):
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE,
                                 extraglobs={"jnp": xnp, "np": np, "xform": xform})
        assert result.attempted > 0 and result.failed == 0, name


def test_roots():
    p = np.array([0., 0., 1., -3., 2., 5.], np.float32)
    sort = lambda r: r[np.lexsort((np.round(r.imag, 4), np.round(r.real, 4)))]
    for args, kw in (((p,), {}), ((p[2:],), {}), ((np.array([2, -4]),), {}),
                     ((np.array([3.]),), {})):
        got, expected = xnp.roots(*args, **kw), jnp.roots(*args, **kw)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(sort(np.asarray(got)), sort(np.asarray(expected)), atol=1e-4)
    got = xform.jit(lambda p: xnp.roots(p, strip_zeros=False))(p)
    expected = jax.jit(lambda p: jnp.roots(p, strip_zeros=False))(p)
    np.testing.assert_allclose(sort(np.asarray(got)), sort(np.asarray(expected)), atol=1e-4)
    with pytest.raises(ValueError, match="rank-1"):
        xnp.roots(np.ones((2, 2)))
    with pytest.raises(xform.errors.ConcretizationTypeError):
        xform.jit(xnp.roots)(p)
    import doctest
    from xform.numpy import _roots
    assert doctest.testmod(_roots, extraglobs={"jnp": xnp}).failed == 0
