"""Shared test setup: several host devices (set before any backend starts), hypothesis
profiles, and the ``x64`` fixture.

Hypothesis profiles: ``ci`` (the default: few examples, derandomized, no deadline) and
``dev`` (many examples); pick one with ``HYPOTHESIS_PROFILE=dev pytest ...``.
"""
import os

# Must run before xform (or jax) creates the CPU client: pmap tests need 8 devices.
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()

import pytest  # noqa: E402

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover  (hypothesis is a test extra)
    settings = None

if settings is not None:
    _common = dict(deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow,
                                          HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])
    settings.register_profile("ci", max_examples=5, derandomize=True, **_common)
    settings.register_profile("dev", max_examples=200, **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _both(flag):
    """Set config ``flag`` to True in both xform and jax for one test, then restore."""
    import jax
    import xform
    old_jax, old_xform = getattr(jax.config, flag), getattr(xform.config, flag)
    jax.config.update(flag, True)
    xform.config.update(flag, True)
    try:
        yield
    finally:
        xform.config.update(flag, old_xform)
        jax.config.update(flag, old_jax)


@pytest.fixture
def x64():
    """Enable 64-bit dtypes in both xform and jax for one test."""
    yield from _both("jax_enable_x64")


@pytest.fixture
def debug_nans():
    """Turn jax_debug_nans on in both xform and jax for one test."""
    yield from _both("jax_debug_nans")
