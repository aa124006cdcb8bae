"""xform.tree (the short pytree API) against jax.tree."""
import operator

import jax
import pytest

import xform


TREE = [1, (2, None, {"b": 3, "a": 4}), [5, 6]]


def test_tree_module_matches_jax():
    assert xform.tree.leaves(TREE) == jax.tree.leaves(TREE)
    assert xform.tree.map(lambda x: x * 2, TREE) == jax.tree.map(lambda x: x * 2, TREE)
    assert xform.tree.reduce(operator.add, TREE, 10) == jax.tree.reduce(operator.add, TREE, 10)
    assert (xform.tree.reduce_associative(operator.add, TREE)
            == jax.tree.reduce_associative(operator.add, TREE))
    assert xform.tree.all(TREE) == jax.tree.all(TREE)
    prefix, full = (1, 2, 3), (0, {"a": 0, "b": 0}, (0, 0))
    assert xform.tree.broadcast(prefix, full) == jax.tree.broadcast(prefix, full)
    leaves, td = xform.tree.flatten(TREE)
    assert xform.tree.unflatten(td, leaves) == TREE
    outer, inner = xform.tree.structure([0, 0]), xform.tree.structure((0, 0))
    assert xform.tree.transpose(outer, inner, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert (xform.tree.map_with_path(lambda p, x: xform.tree_util.keystr(p), {"a": [1]})
            == jax.tree.map_with_path(lambda p, x: jax.tree_util.keystr(p), {"a": [1]}))
    assert len(xform.tree.leaves_with_path(TREE)) == 6


def test_reduce_associative_empty_needs_identity():
    assert xform.tree.reduce_associative(operator.add, [], identity=0) == 0
    for lib in (jax, xform):   # (JAX's TypeError)
        with pytest.raises(TypeError, match="identity"):
            lib.tree.reduce_associative(operator.add, [])


@pytest.mark.parametrize("n", [3, 5, 6, 7])
def test_reduce_associative_combines_halves_as_jax(n):
    # the grouping shows in the operation's calls (and in float rounding)
    leaves = [str(i) for i in range(n)]
    op = lambda a, b: f"({a}+{b})"
    assert (xform.tree.reduce_associative(op, leaves)
            == jax.tree.reduce_associative(op, leaves))
    assert (xform.tree_util.tree_reduce_associative(op, leaves)
            == jax.tree_util.tree_reduce_associative(op, leaves))
