"""Hypothesis fuzz of gather and scatter-add against jax.lax: random valid dimension
numbers (collapsed, offset and batching dimensions, permuted start_index_map), index
batch shapes, modes and (for CLIP / FILL_OR_DROP) out-of-bounds indices; values eager
and under jit, plus vmap over an extra leading axis of operand and indices.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax import lax as jlax

import xform
from xform import lax as xlax


@st.composite
def gather_problems(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dims = list(range(rank))
    n_batch = draw(st.integers(0, min(1, rank - 1)))
    op_batching = tuple(sorted(draw(st.permutations(dims))[:n_batch]))
    free = [d for d in dims if d not in op_batching]
    start_map = tuple(draw(st.permutations(free))[:draw(st.integers(0, len(free)))])
    sizes = [1 if d in op_batching else draw(st.integers(1, shape[d])) for d in dims]
    collapsed = tuple(d for d in free if sizes[d] == 1 and draw(st.booleans()))
    # index batch shape: random extra dims with the batching dims inserted among them
    extra = draw(st.lists(st.integers(1, 3), max_size=2))
    idx_batch = list(extra)
    idx_batching = []
    for d in op_batching:
        pos = draw(st.integers(0, len(idx_batch)))
        idx_batching = [p + (p >= pos) for p in idx_batching] + [pos]
        idx_batch.insert(pos, shape[d])
    n_offset = rank - len(collapsed) - n_batch
    out_rank = len(idx_batch) + n_offset
    offset_dims = tuple(sorted(draw(st.permutations(range(out_rank)))[:n_offset]))
    mode = draw(st.sampled_from(["clip", "fill", "promise_in_bounds"]))
    rng = np.random.RandomState(draw(st.integers(0, 2**31 - 1)))
    oob = 0 if mode == "promise_in_bounds" else 2
    cols = [rng.randint(-oob, shape[d] - sizes[d] + 1 + oob, size=idx_batch)
            for d in start_map]
    indices = np.stack(cols, -1).astype(np.int32) if cols else np.zeros(
        tuple(idx_batch) + (0,), np.int32)
    operand = rng.uniform(-3, 3, size=shape).astype(np.float32)
    dn = (offset_dims, collapsed, start_map, op_batching, tuple(idx_batching))
    return operand, indices, dn, tuple(sizes), mode, rng


def _gather(L, dn, sizes, mode):
    return lambda x, i: L.gather(x, i, L.GatherDimensionNumbers(*dn), sizes, mode=mode)


def _scatter_add(L, dn, mode):
    sdn = L.ScatterDimensionNumbers(*dn)
    return lambda x, i, u: L.scatter_add(x, i, u, sdn, mode=mode)


@settings(max_examples=25)
@given(gather_problems())
def test_gather_and_scatter_add_match_jax(problem):
    operand, indices, dn, sizes, mode, rng = problem
    expected = np.asarray(_gather(jlax, dn, sizes, mode)(operand, indices))
    got = _gather(xlax, dn, sizes, mode)(operand, indices)
    np.testing.assert_allclose(got, expected, rtol=0, atol=0, equal_nan=True,
                               err_msg=f"gather {dn} {sizes} {mode}")
    assert got.dtype == expected.dtype and got.shape == expected.shape
    updates = rng.uniform(-3, 3, size=expected.shape).astype(np.float32)
    expected = np.asarray(_scatter_add(jlax, dn, mode)(operand, indices, updates))
    got = xform.jit(_scatter_add(xlax, dn, mode))(operand, indices, updates)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5,
                               err_msg=f"scatter_add {dn} {mode}")


@settings(max_examples=8)
@given(gather_problems())
def test_gather_vmap_matches_loop(problem):
    operand, indices, dn, sizes, mode, rng = problem
    ops = np.stack([operand, operand + 1, -operand])
    idxs = np.stack([indices, indices[::-1], indices])
    f = _gather(xlax, dn, sizes, mode)
    want = np.stack([np.asarray(f(o, i)) for o, i in zip(ops, idxs)])
    np.testing.assert_array_equal(xform.vmap(f)(ops, idxs), want)


@pytest.mark.parametrize("bad, message", [
    (dict(dn=((2,), (0,), (0,))), "offset_dims"),
    (dict(dn=((1,), (1,), (0,))), "collapse slice dims with bound 1"),
    (dict(idx=np.zeros((2, 2), np.int32)), "start_index_map"),
    (dict(idx=np.zeros((2, 1), np.float32)), "integer type"),
    (dict(sizes=(1, 9)), "Slice size at index 1"),
    (dict(dn=((1,), (0,), (0,), (0,), (0,))), "disjoint"),
])
def test_gather_errors(bad, message):
    x = np.zeros((4, 3), np.float32)
    kw = dict(dn=((1,), (0,), (0,)), idx=np.zeros((2, 1), np.int32), sizes=(1, 3))
    kw.update(bad)
    with pytest.raises(TypeError, match=message):
        xlax.gather(x, kw["idx"], xlax.GatherDimensionNumbers(*kw["dn"]), kw["sizes"])


def test_scatter_errors():
    sdn = xlax.ScatterDimensionNumbers((1,), (0,), (0,))
    x, i = np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32)
    with pytest.raises(TypeError, match="same dtype"):
        xlax.scatter_add(x, i, np.zeros((2, 3), np.int32), sdn)
    with pytest.raises(TypeError, match="scatter dimensions of updates"):
        xlax.scatter_add(x, i, np.zeros((5, 3), np.float32), sdn)
    with pytest.raises(TypeError, match="exceeds the operand bound"):
        xlax.scatter_add(x, i, np.zeros((2, 4), np.float32), sdn)
    with pytest.raises(TypeError, match="scatter-add does not accept dtype bool"):
        xlax.scatter_add(x.astype(bool), i, np.zeros((2, 3), bool), sdn)


def test_dynamic_slice_errors():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="Length of slice indices"):
        xlax.dynamic_slice(x, (1,), (2, 2))
    with pytest.raises(TypeError, match="slice_sizes must be between"):
        xlax.dynamic_slice(x, (1, 1), (5, 2))
    with pytest.raises(TypeError, match="must be integers of the same type"):
        xlax.dynamic_slice(x, (np.float32(1), 0), (2, 2))
    with pytest.raises(TypeError, match="fit inside"):
        xlax.dynamic_update_slice(x, np.zeros((5, 1), np.float32), (0, 0))


def test_docstring_examples():
    import doctest
    import importlib
    for name in ("xform.lax.slicing", "xform.lax.scatter", "xform.lax.dynamic_slicing",
                 "xform.lax.sorting"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, name
        assert result.attempted > 0, name
