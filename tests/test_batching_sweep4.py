"""Regressions from a fourth differential sweep of batching and differentiation rules
(odd ``in_axes``/``out_axes``, size-0 batches, compositions) against JAX, compared at
run time.
"""
import jax
import numpy as np
import pytest

import xform
from optable import assert_tree_same

R = np.random.RandomState(0)


def _conv(L, groups):
    fgc, bgc = groups
    return lambda x, w: L.lax.conv_general_dilated(
        x, w, (1,), "VALID", feature_group_count=fgc, batch_group_count=bgc)


@pytest.mark.parametrize("groups,shapes", [
    ((1, 1), ((2, 3, 6), (4, 3, 3))), ((2, 1), ((2, 4, 6), (6, 2, 3))),
    ((1, 2), ((4, 2, 6), (4, 2, 3)))])
@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (1, 2)])
def test_conv_size_0_batch(groups, shapes, in_axes):
    # A size-0 vmapped axis can't be folded into features or groups: 0 // 0 was raised.
    args = [np.zeros(s[:a] + (0,) + s[a:], np.float32) if a is not None else
            R.uniform(-1, 1, s).astype(np.float32) for s, a in zip(shapes, in_axes)]
    want = jax.vmap(_conv(jax, groups), in_axes)(*args)
    assert_tree_same(xform.vmap(_conv(xform, groups), in_axes)(*args), want, 0, "conv")
