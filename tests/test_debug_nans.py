"""``jax_debug_nans``: a NaN produced by an eager primitive or a jitted computation raises
FloatingPointError naming the primitive (jit re-runs op by op), as in JAX; off, nothing."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp


def _cases(lib):
    np_ = lib.numpy

    def f(x):
        return np_.log(x) * 2.0

    return {
        "eager": (np_.log, -1.0),
        "eager_binary": (lambda x: lax_div(lib, x, x), 0.0),
        "jit": (lib.jit(f), -1.0),
        "jit_div": (lib.jit(lambda x: x / x), 0.0),
        "nested_jit": (lib.jit(lambda x: lib.jit(f)(x) + 1.0), -1.0),
        "grad_forward": (lib.grad(f), -1.0),
        # (jit checks outputs only: grad(f)(-1) = 2/x is fine, grad(log(x) * x) is not)
        "jit_grad": (lib.jit(lib.grad(lambda x: np_.log(x) * x)), -1.0),
        "vmap_jit": (lib.vmap(lib.jit(f)), np.array([1.0, -1.0], np.float32)),
        # eager higher-order primitives are one compiled op: the error names them
        "eager_scan": (lambda xs: lib.lax.scan(lambda c, x: (c, np_.log(x)), 0.0, xs),
                       np.array([1.0, -1.0], np.float32)),
        "eager_cond": (lambda x: lib.lax.cond(True, np_.log, lambda x: x, x), -1.0),
    }


def lax_div(lib, x, y):
    return lib.lax.div(x, y)


@pytest.mark.parametrize("case", ["eager", "eager_binary", "jit", "jit_div", "nested_jit",
                                  "grad_forward", "jit_grad", "vmap_jit", "eager_scan",
                                  "eager_cond"])
def test_names_the_primitive_like_jax(case, debug_nans):
    # Device arrays as inputs: JAX re-runs the Python function on the given arguments.
    # JAX's caches are cleared first: its re-run of a jitted function goes through eager
    # callables that an earlier test may have compiled without the NaN check (JAX then
    # reports that the re-run "did not produce invalid values").
    jax.clear_caches()
    fn, x = _cases(jax)[case]
    with pytest.raises(FloatingPointError) as want:
        fn(jax.device_put(np.asarray(x, np.float32)))
    fn, x = _cases(xform)[case]
    with pytest.raises(FloatingPointError) as got:
        fn(xform.device_put(np.asarray(x, np.float32)))
    assert str(got.value) == str(want.value)
    assert str(got.value).startswith("invalid value (nan) encountered in ")


def test_nan_in_backward_pass(debug_nans):
    # d/dx sqrt(x) * 0 at 0: the cotangent 0 meets 1/sqrt(0). sqrt's JVP is JAX's,
    # t * (0.5 / sqrt(x)), so the NaN is 0 * inf, in mul, as JAX reports it.
    g = lambda x: jnp.sqrt(x) * 0.0  # noqa: E731
    with jax.debug_nans(True), pytest.raises(FloatingPointError, match="encountered in mul"):
        jax.grad(lambda x: jjnp.sqrt(x) * 0.0)(0.0)
    for fn in (xform.grad(g), xform.jit(xform.grad(g)), xform.grad(xform.jit(g))):
        with pytest.raises(FloatingPointError,
                           match=r"^invalid value \(nan\) encountered in mul(\n|$)"):
            fn(0.0)


def test_nan_not_produced_by_any_primitive(debug_nans):
    with pytest.raises(FloatingPointError,
                       match=r"invalid value \(nan\) encountered in jit\(<lambda>\)\. Because "
                             r"jax_debug_nans is set, the program was re-run"):
        xform.jit(lambda x: x)(np.float32(np.nan))


def test_only_nans_of_floating_outputs(debug_nans):
    assert np.isinf(float(xform.jit(lambda x: 1.0 / x)(0.0)))
    assert np.isinf(float(jnp.log(0.0)))
    assert int(xform.jit(lambda x: x // 0)(1)) == int(jjnp.asarray(1) // 0)
    np.testing.assert_allclose(float(xform.jit(lambda x: jnp.log(x) * 2)(1.0)), 0.0)


def test_off_does_nothing_and_flag_flips_take_effect():
    f = xform.jit(lambda x: jnp.log(x) * 2)
    assert not xform.config.jax_debug_nans
    assert np.isnan(float(f(-1.0))) and np.isnan(float(jnp.log(-1.0)))
    g = xform.jit(lambda x: xform.jit(jnp.log)(x))
    assert np.isnan(float(g(-1.0)))  # compiled (and cached) with the flag off
    xform.config.update("jax_debug_nans", True)
    try:
        for fn in (f, g, jnp.log):
            with pytest.raises(FloatingPointError, match="encountered in log"):
                fn(-1.0)
    finally:
        xform.config.update("jax_debug_nans", False)
    assert np.isnan(float(f(-1.0))) and np.isnan(float(g(-1.0)))
    assert np.isnan(float(jnp.log(-1.0)))


def test_hot_paths_unwrapped_when_off():
    """The flag is baked in at compile time: off, eager and jit execute jaxlib directly."""
    from xform.interpreters import dispatch
    x = xform.device_put(np.ones(3, np.float32))
    f = xform.jit(lambda x: x + 1.0)

    def executes():
        xform.lax.sin(x)  # (jnp.sin is a composite: its executable is not in _prim_cache)
        f(x)
        return [e.execute for e in dispatch._prim_cache.values()] + [
            e.compiled.execute for e in f._fast.values()]
    assert executes() and not any("_nan_checked" in ex.__qualname__ for ex in executes())
    xform.config.update("jax_debug_nans", True)
    try:
        checked = [ex for ex in executes() if "_nan_checked" in ex.__qualname__]
        assert len(checked) >= 2  # sin and the jitted add (both have float outputs)
    finally:
        xform.config.update("jax_debug_nans", False)
    assert not any("_nan_checked" in ex.__qualname__ for ex in executes())
