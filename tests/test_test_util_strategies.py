"""The public hypothesis strategies of xform.test_util: bounds, dtypes, and that with
check_grads they find a wrong custom derivative rule (the pattern notebook 02 teaches)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import xform
import xform.numpy as jnp
from xform.test_util import arrays, check_grads, float_elements, shapes


@given(shapes(min_rank=1, max_rank=3, min_side=2, max_side=4))
def test_shapes_bounds(shape):
    assert isinstance(shape, tuple) and 1 <= len(shape) <= 3
    assert all(2 <= d <= 4 for d in shape)


@given(arrays(shapes(0, 2), np.float32))
def test_float_arrays_default_range(x):
    assert x.dtype == np.float32 and x.ndim <= 2
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 3)


@given(arrays((3,), np.int32), arrays((2,), np.bool_), arrays((2, 2), np.float64,
                                                              float_elements(0.5, 1.0)))
def test_int_bool_and_custom_elements(i, b, f):
    assert i.dtype == np.int32 and np.all((-5 <= i) & (i <= 5))
    assert b.dtype == np.bool_ and b.shape == (2,)
    assert np.all((0.5 <= f) & (f <= 1.0))


@xform.custom_jvp
def _bad_softplus(x):
    return jnp.logaddexp(x, 0.0)


@_bad_softplus.defjvp
def _bad_softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _bad_softplus(x), t * jnp.where(x > 1.0, 1.0, xform.nn.sigmoid(x))   # wrong for x > 1


def test_strategies_find_a_wrong_rule():
    @settings(max_examples=60, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(arrays(shapes(1, 1, max_side=3), np.float32, float_elements(-8, 8, width=32)))
    def prop(x):
        check_grads(_bad_softplus, (jnp.asarray(x),), order=1)

    with pytest.raises(AssertionError, match="JVP .*tangent mismatch"):
        prop()
