"""xform.export's module safety checks against jax.export's, at run time: the same
targets refused (same error class, same offending ops named), the same let through by
``disabled_checks``, the same modules accepted; host callbacks refused whatever is
disabled; the checks' (de)serialization and the platform check on call."""
import re

import jax
import jax._src.export._export as jax_export_internals
import numpy as np
import pytest

import xform
from xform import export
from xform.export import _checks

S = xform.ShapeDtypeStruct
F32 = np.float32


def _export(api, fn, specs, **kw):
    """``api.export.export(api.jit(f, **jit_kw))(*specs)`` where ``fn(api)`` is ``f`` or
    ``(f, jit_kw)``, or the exception it raises; ``allow``: targets to let through."""
    dc = [api.export.DisabledSafetyCheck.custom_call(t) for t in kw.pop("allow", ())]
    f = fn(api)
    f, jit_kw = f if isinstance(f, tuple) else (f, {})
    try:
        return api.export.export(api.jit(f, **jit_kw), disabled_checks=dc, **kw)(
            *[api.ShapeDtypeStruct(s.shape, s.dtype) for s in specs])
    except Exception as e:  # noqa: BLE001 (compared with the other library's)
        return e


def _named_targets(err):
    return sorted(set(re.findall(r"custom_call @([\w$.]+)\(", str(err))))


def _targets(exp):
    return sorted(set(re.findall(r"custom_call @([\w$.]+)\(", exp.mlir_module())))


def test_allowlist_is_jaxs():
    assert _checks.GUARANTEED_STABLE == jax_export_internals._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE
    assert _checks.CPU_FFI_KERNELS == set(jax_export_internals._CPU_FFI_KERNELS)
    assert _checks.GPU_FFI_KERNELS == set(jax_export_internals._GPU_FFI_KERNELS)


def _user_ffi(api):
    return lambda a: api.ffi.ffi_call("my_unregistered_target", api.ShapeDtypeStruct(
        (3,), F32))(a) * 2


def _pivoted_qr(api):  # LAPACK's geqp3: a jaxlib kernel JAX does not keep stable
    return lambda a: api.scipy.linalg.qr(a, pivoting=True)


@pytest.mark.parametrize("fn,specs,platform,target", [
    (_user_ffi, [S((3,), F32)], "cpu", "my_unregistered_target"),
    (_pivoted_qr, [S((2, 6, 4), F32)], "cpu", "lapack_sgeqp3_ffi"),
    (_pivoted_qr, [S((2, 6, 4), F32)], "cuda", "cuhybrid_geqp3")])  # (JAX's GPU kernel)
def test_unstable_targets_refused_and_allowed_as_jax(fn, specs, platform, target):
    kw = {"platforms": (platform,)}
    ours, theirs = _export(xform, fn, specs, **kw), _export(jax, fn, specs, **kw)
    assert type(ours) is type(theirs) is ValueError
    assert str(ours).split("\n")[0] == str(theirs).split("\n")[0]
    assert str(ours).startswith("Cannot serialize code with custom calls whose targets "
                                "have no compatibility guarantees.")
    assert _named_targets(ours) == _named_targets(theirs) == [target]
    for allow in (["ALL"], [target]):
        ours, theirs = (_export(api, fn, specs, allow=allow, **kw) for api in (xform, jax))
        assert _targets(ours) == _targets(theirs)
        assert [str(c) for c in ours.disabled_safety_checks] == [
            str(c) for c in theirs.disabled_safety_checks] == [f"custom_call:{allow[0]}"]
    # the allowance travels with the bytes (both ways); loading does not check again
    back = jax.export.deserialize(ours.serialize())
    assert back.disabled_safety_checks == theirs.disabled_safety_checks
    assert export.deserialize(theirs.serialize()).disabled_safety_checks == (
        export.DisabledSafetyCheck.custom_call(target),)
    # re-exporting a call of it checks the whole module again, as JAX's does
    inner = {xform: export.deserialize(ours.serialize()), jax: theirs}
    outer = [_export(api, lambda api: inner[api].call, specs, **kw) for api in (xform, jax)]
    assert type(outer[0]) is type(outer[1]) is ValueError
    assert _named_targets(outer[0]) == _named_targets(outer[1]) == [target]


def _pure_callback(api):
    return lambda a: api.pure_callback(lambda x: x, api.ShapeDtypeStruct((3,), F32), a)


def _ordered_io_callback(api):
    io = api.experimental.io_callback
    return lambda a: io(lambda x: x, api.ShapeDtypeStruct((3,), F32), a, ordered=True)


def _debug_print(api):
    def f(a):
        api.debug.print("a={}", a, ordered=True)
        return a
    return f


@pytest.mark.parametrize("fn", [_pure_callback, _ordered_io_callback, _debug_print])
def test_host_callbacks_refused_whatever_is_disabled(fn):
    for allow in ((), ["ALL"]):
        ours, theirs = (_export(api, fn, [S((3,), F32)], allow=allow) for api in (xform, jax))
        assert type(ours) is type(theirs) is NotImplementedError
        assert str(ours) == str(theirs)


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs 2 devices")
def test_inspect_sharding_in_a_sharded_export_is_a_host_callback():
    def fn(api):
        def f(a):
            api.debug.inspect_array_sharding(a, callback=lambda s: None)
            return a * 2
        mesh = api.make_mesh((2,), ("x",))
        return f, {"in_shardings": api.sharding.NamedSharding(
            mesh, api.sharding.PartitionSpec("x"))}
    ours, theirs = (_export(api, fn, [S((4,), F32)], allow=["ALL"]) for api in (xform, jax))
    assert type(ours) is type(theirs) is NotImplementedError
    assert str(ours) == str(theirs)


def _lapack_kernels(api):
    la = api.numpy.linalg
    return lambda a: (la.eigh(a), la.cholesky(a), la.svd(a), la.qr(a), la.slogdet(a))


@pytest.mark.parametrize("fn,specs,platforms", [
    (_lapack_kernels, [S((3, 3), F32)], ("cpu",)),
    (lambda api: api.numpy.linalg.solve, [S((3, 3), F32), S((3,), F32)], ("cuda",))])
def test_stable_kernels_export_as_jax(fn, specs, platforms):
    ours, theirs = (_export(api, fn, specs, platforms=platforms) for api in (xform, jax))
    assert isinstance(ours, export.Exported), ours
    assert isinstance(theirs, jax.export.Exported), theirs
    assert _targets(ours) and set(_targets(ours)) <= _checks.GUARANTEED_STABLE


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs 2 devices")
def test_shardings_and_symbolic_shapes_export():
    def fn(api):
        mesh = api.make_mesh((2,), ("x",), axis_types=(api.sharding.AxisType.Auto,))
        sh = api.sharding.NamedSharding(mesh, api.sharding.PartitionSpec("x"))
        return (lambda v: api.lax.with_sharding_constraint(api.numpy.cumsum(v * 2), sh),
                {"in_shardings": sh, "out_shardings": sh})
    sharded = [_export(api, fn, [S((4,), F32)]) for api in (xform, jax)]
    assert _targets(sharded[0]) == _targets(sharded[1]) == []
    assert sharded[0].nr_devices == sharded[1].nr_devices == 2
    poly = [api.export.export(api.jit(lambda v: api.lax.cumsum(v, axis=0)))(
        api.export.symbolic_args_specs(np.zeros((4, 3), F32), "b, n")) for api in (xform, jax)]
    assert _targets(poly[0]) == _targets(poly[1]) == [
        "shape_assertion", "stablehlo.dynamic_reduce_window"]


def test_disabled_platform_check_runs_elsewhere():
    x = np.linspace(0, 1, 3, dtype=F32)
    for api in (xform, jax):
        tpu = api.export.export(api.jit(api.numpy.sin), platforms=("tpu",))
        with pytest.raises(ValueError, match="was exported for platforms"):
            tpu(api.ShapeDtypeStruct((3,), F32)).call(x)
        anywhere = api.export.export(api.jit(api.numpy.sin), platforms=("tpu",), disabled_checks=[
            api.export.DisabledSafetyCheck.platform()])(api.ShapeDtypeStruct((3,), F32))
        back = api.export.deserialize(anywhere.serialize())
        np.testing.assert_allclose(back.call(x), np.sin(x), rtol=1e-6)


def test_check_kinds_match_jax():
    for name in ("platform", "custom_call", "shape_assertions"):
        assert hasattr(export.DisabledSafetyCheck, name) == hasattr(
            jax.export.DisabledSafetyCheck, name)
    for api in (xform, jax):
        exp = api.export.export(api.jit(api.numpy.sin), disabled_checks=[
            api.export.DisabledSafetyCheck("bogus")])(api.ShapeDtypeStruct((3,), F32))
        with pytest.raises(NotImplementedError, match="serializing DisabledSafetyCheck: bogus"):
            exp.serialize()
