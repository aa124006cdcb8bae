"""Jitted programs compile to the same shape as JAX's: XLA's optimized HLO of a few
functions whose lowering once differed (same values, slower program) has the same
loops, custom calls and converts as JAX's, compiled at run time from both."""
import re

import jax
import numpy as np
import pytest

import xform


def _optimized(lib, f, *args):
    return lib.jit(f).lower(*args).compile().as_text()


def _count(pattern, text):
    return len(re.findall(pattern, text))


def _ops(text):
    return _count(r"(?m)^\s*(?:ROOT )?%\S+ = ", text)


def _largest(text):
    """Element count of the program's largest array."""
    return max(int(np.prod([int(d) for d in dims.split(",")]))
               for dims in re.findall(r"\b[a-z]+\d*\[(\d+(?:,\d+)*)\]", text))


def _compare(make, *args):
    """make(lib, jnp, lax) -> function; (xform's, JAX's) optimized HLO texts."""
    ours = _optimized(xform, make(xform, xform.numpy, xform.lax), *args)
    theirs = _optimized(jax, make(jax, jax.numpy, jax.lax), *args)
    return ours, theirs


_rng = np.random.default_rng(0)
_X = _rng.standard_normal((16, 64)).astype(np.float32)


def test_top_k_is_a_partial_sort_not_a_full_sort():
    ours, theirs = _compare(lambda lib, jnp, lax: lambda x: lax.top_k(x, 4), _X)
    for op in (r"\bsort\(", r"custom-call\(", r"\btranspose\("):
        assert _count(op, ours) == _count(op, theirs), op


def test_lu_solve_has_jaxs_single_pivot_loop_and_blas_solves():
    a = _rng.standard_normal((16, 16)).astype(np.float32)
    ours, theirs = _compare(lambda lib, jnp, lax: jnp.linalg.solve, a, _X[:, :3].copy())
    loops = 1 if xform.default_backend() == "cpu" else 0  # (a pivots kernel on GPU)
    assert _count(r"\bwhile\(", ours) == _count(r"\bwhile\(", theirs) == loops
    for op in (r"custom-call\(", r"\bdot\("):  # rows permuted by a gather, not P @ b
        assert _count(op, ours) == _count(op, theirs), op
    assert _ops(ours) <= 1.2 * _ops(theirs)  # unrolled pivot swaps: ~40x


def test_grad_of_solve_reuses_the_factorization():
    a = _rng.standard_normal((16, 16)).astype(np.float32)
    ours, theirs = _compare(lambda lib, jnp, lax: lib.grad(
        lambda a, b: (jnp.linalg.solve(a, b) ** 2).sum()), a, _X[:, :3].copy())
    assert _count(r"custom-call\(", ours) == _count(r"custom-call\(", theirs)  # 1 getrf


def test_take_fill_bounds_mask_has_no_converts():
    idx = _rng.integers(-20, 20, size=(50,)).astype(np.int32)
    ours, theirs = _compare(
        lambda lib, jnp, lax: lambda x, i: jnp.take(x, i, axis=0, mode="fill"), _X, idx)
    assert _count(r"\bconvert\(", ours) == _count(r"\bconvert\(", theirs)
    assert _ops(ours) <= _ops(theirs)


_SMALLER_OR_EQUAL = {
    # rem folds to an AND for powers of 2 (x - x // y * y did not)
    "int_rem_floordiv": (lambda lib, jnp, lax: lambda n: (n % 4, n // 4, n % 3),
                         np.arange(-50, 50, dtype=np.int32)),
    # is-finite, not x - x == 0
    "logsumexp": (lambda lib, jnp, lax: lambda x: lib.nn.logsumexp(x, axis=1), _X),
}


@pytest.mark.parametrize("name", sorted(_SMALLER_OR_EQUAL))
def test_program_no_larger_than_jaxs(name):
    make, *args = _SMALLER_OR_EQUAL[name]
    ours, theirs = _compare(make, *args)
    assert _ops(ours) <= _ops(theirs)
    assert _count(r"\bmultiply\(", ours) <= _count(r"\bmultiply\(", theirs)


def test_searchsorted_binary_searches_without_an_all_pairs_array():
    a, v = np.sort(_rng.standard_normal(512)).astype(np.float32), _X.ravel()
    ours, theirs = _compare(lambda lib, jnp, lax: jnp.searchsorted, a, v)
    assert _largest(ours) <= _largest(theirs)  # was pred[1024, 512]


def test_unique_with_size_sorts_once():
    x = _rng.integers(0, 40, size=(200,)).astype(np.int32)
    ours, theirs = _compare(lambda lib, jnp, lax: lambda x: jnp.unique(x, size=50), x)
    assert _count(r"\bsort\(", ours) == _count(r"\bsort\(", theirs)  # no argsort of the mask
