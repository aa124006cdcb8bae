"""Symbolic dimensions through more of the library (strided and reversed slices,
gathers, dynamic slices, cumulative ops, loops of symbolic trip count, einsum,
convolutions, random), against jax at several sizes and through jax.export's bytes."""
import jax
import numpy as np
import pytest

import xform
from xform import export

F32 = np.float32


def _cases(lib):
    jnp, lax = lib.numpy, lib.lax
    return {
        "indexing": lambda x: (
            x[::2], x[1::3, ::-1], x[::-2], jnp.flip(x, 0), jnp.take(x, jnp.array([0, -1]), 0),
            x[jnp.array([1, 0])], jnp.roll(x, 1, axis=0), lax.dynamic_slice(x, (1, 1), (1, 2)),
            lax.dynamic_update_slice(x, jnp.ones((1, 2), x.dtype), (-1, 0))),
        "loops_and_scans": lambda x: (
            jnp.cumsum(x, axis=0), lax.cummax(x, axis=0),
            lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i], jnp.zeros(4, x.dtype)),
            lax.scan(lambda c, r: (c + r, c * 2.0), jnp.zeros(4, x.dtype), x),
            lax.while_loop(lambda c: c[0] < x.shape[0], lambda c: (c[0] + 1, c[1] * 1.5),
                           (0, x))[1]),
        "contractions": lambda x: (
            jnp.einsum("ij,kj->ik", x, x),
            lax.conv_general_dilated(x[None, None], jnp.ones((1, 1, 2, 2), x.dtype), (1, 1),
                                     "SAME")[0, 0],
            lib.random.uniform(lib.random.key(0), x.shape) + x),
    }


@pytest.mark.parametrize("name", sorted(_cases(jax)))
def test_symbolic_ops_match_jax_at_several_sizes_and_cross_to_jax(name):
    b, = export.symbolic_shape("b")
    ours = export.export(xform.jit(_cases(xform)[name]))(xform.ShapeDtypeStruct((b, 4), F32))
    in_jax = jax.export.deserialize(ours.serialize())
    for n in (3, 6):
        x = np.arange(n * 4, dtype=F32).reshape(n, 4) / 7
        want = jax.tree.leaves(jax.jit(_cases(jax)[name])(x))
        for got in (xform.tree_util.tree_leaves(ours.call(x)), jax.tree.leaves(in_jax.call(x))):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def _decisions(lib, constraints):
    """Comparisons, max_dim and division of a grid of expressions, as values or the
    kind of error (JAX's decision procedure: implicit dims >= 1, min/max, floordiv/mod)."""
    a, b, n = lib.export.symbolic_shape("a, b, n", constraints=constraints)
    core = xform.core.shape_poly if lib is xform else jax.core
    exprs = [a, b, 2, -1, a - 1, a * b, a // 2, a % 3, core.min_dim(a, 2),
             core.max_dim(a, b), core.min_dim(n, 3) - 1, core.max_dim(n - 2, 0),
             2 * (a // 2), (a * a + a) // (a + 1)]
    out = [str(e) for e in exprs]
    for x in exprs:
        for y in exprs:
            for op in (lambda: x >= y, lambda: x < y, lambda: core.max_dim(x, y)):
                try:
                    out.append(str(op()))
                except Exception as e:  # (jax.export does not name the error class)
                    out.append(type(e).__name__)
    return out


@pytest.mark.parametrize("constraints", [(), ("a >= b", "b >= 3"),
                                         ("n >= a + 2", "mod(a, 2) == 0", "a*b >= 8")])
def test_symbolic_decisions_match_jax(constraints):
    assert _decisions(xform, constraints) == _decisions(jax, constraints)


def _slicing(lib):
    jnp, lax = lib.numpy, lib.lax
    return lambda v: (
        v[:, :2], v[:, -2:], v[1:-1, 1:3], v[::2, 1::2], v[3:0:-1], v[: v.shape[0] // 2],
        v[jnp.array([0, 1])], v.at[:, :2].add(1.0), v[jnp.array(5)], jnp.trace(v),
        lax.slice_in_dim(v, 1, v.shape[0]), lax.index_in_dim(v, -1),
        jnp.eye(v.shape[0]) @ v,
        jnp.delete(v, 0, axis=0), jnp.median(v, axis=1), v.reshape(-1)[: v.shape[0]])


def _reshaping(lib):   # under constraints: b and n even, n >= 4
    jnp, lax = lib.numpy, lib.lax
    return lambda v: (
        v.reshape(v.shape[0], 2, v.shape[1] // 2), *jnp.split(v, 2, axis=0),
        lax.dynamic_slice_in_dim(v, 1, v.shape[0] - 1, axis=0), jnp.full_like(v, v.shape[0]),
        lax.dynamic_update_slice_in_dim(v, v[:1] * 0, v.shape[0] - 1, axis=0),
        lax.conv_general_dilated(v[None, None], jnp.ones((1, 1, 3, 1)), (2, 1), "SAME"),
        lax.reduce_window(v, -np.inf, lax.max, (2, 2), (2, 2), "SAME"),
        jnp.pad(v, ((1, 2), (0, 1))), jnp.arange(0, v.shape[0], 2), jnp.tri(v.shape[0]) @ v,
        lib.nn.one_hot(jnp.argmax(v, axis=1), v.shape[1]),
        jnp.pad(v, ((0, v.shape[0]), (0, 0))), jnp.roll(v, v.shape[0] // 2, axis=0))


@pytest.mark.parametrize("ops, constraints", [
    (_slicing, ()), (_reshaping, ("n >= 4", "mod(b, 2) == 0", "mod(n, 2) == 0"))])
def test_symbolic_slicing_shapes_assertions_and_values_match_jax(ops, constraints):
    exported = {lib: lib.export.export(lib.jit(ops(lib)))(lib.ShapeDtypeStruct(
        lib.export.symbolic_shape("b, n", constraints=constraints), F32))
        for lib in (xform, jax)}
    ours, theirs = exported[xform], exported[jax]
    assert [str(a) for a in ours.out_avals] == [str(a) for a in theirs.out_avals]
    count = lambda e: e.mlir_module().count("custom_call @shape_assertion")  # noqa: E731
    assert count(ours) == count(theirs)
    for shape in ((4, 6), (2, 8)):
        x = np.arange(np.prod(shape), dtype=F32).reshape(shape) % 5 - 1
        for g, w in zip(ours.call(x), theirs.call(x)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
