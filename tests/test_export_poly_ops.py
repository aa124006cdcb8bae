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
