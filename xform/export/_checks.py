"""``export``'s module safety checks, as JAX 0.10.2's: a serialized module may call only
custom-call targets whose compatibility is guaranteed (kernels jaxlib keeps ABI-stable
for years, JAX's own structural markers), unless ``disabled_checks`` names the target.

The check runs once, at export, on the final module (after the shape-assertion
wrapper), as JAX's ``_check_module``; deserializing and calling run none of it, only
the platform check (``_call``), which ``DisabledSafetyCheck.platform()`` lifts. Calls
back into this process (host callbacks, ``debug.inspect_array_sharding`` in a sharded
program) are refused first, with JAX's NotImplementedError, whatever is disabled: the
module would carry pointers into the exporting process.
"""
import re

from xform import backend
from xform.interpreters import mlir

ir = mlir.ir


class DisabledSafetyCheck:
    """A safety check to skip: ``platform()`` lets a function exported for one platform
    run on another (checked when called); ``custom_call(target)`` lets an export call
    ``target`` (checked at export; ``custom_call("ALL")`` allows every target)."""

    def __init__(self, _impl):
        self._impl = _impl

    @classmethod
    def platform(cls):
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name):
        return cls(f"custom_call:{target_name}")

    def is_custom_call(self):
        m = re.match(r"custom_call:(.+)$", self._impl)
        return m.group(1) if m else None

    def __str__(self):
        return self._impl

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self):
        return hash(self._impl)


def _lapack(real, complex_=None):
    """jaxlib's LAPACK FFI kernels of one routine for the four dtypes (``getrf`` ->
    ``lapack_sgetrf_ffi``...; ``complex_``: the complex routine's name where it differs,
    ``orgqr``/``ungqr``)."""
    return ({f"lapack_{p}{real}_ffi" for p in "sd"}
            | {f"lapack_{p}{complex_ or real}_ffi" for p in "cz"})


def _gpu(*names):
    """CUDA's targets and their ROCm twins (``solver_getrf_ffi`` -> ``cusolver_getrf_ffi``,
    ``hipsolver_getrf_ffi``)."""
    return {f"{vendor}{n}" for n in names for vendor in ("cu", "hip")}


CPU_FFI_KERNELS = frozenset().union(
    *(_lapack(f) for f in ("potrf", "geqrf", "geev", "gesdd", "getrf", "gehrd", "gees",
                           "trsm", "gtsv")),
    _lapack("orgqr", "ungqr"), _lapack("syevd", "heevd"), _lapack("sytrd", "hetrd"))

GPU_FFI_KERNELS = frozenset({
    *_gpu("_lu_pivots_to_permutation", "solver_getrf_ffi", "solver_geqrf_ffi",
          "solver_orgqr_ffi", "solver_potrf_ffi", "solver_syevd_ffi", "solver_gesvd_ffi",
          "solver_gesvdj_ffi", "solver_sytrd_ffi"),
    "hipsolver_gesdd_ffi", "cusparse_gtsv2_ffi"})

# Targets JAX guarantees stable (its back-compat tests hold them): the kernels above,
# sharding and placement markers, TPU kernels, StableHLO's dynamic-shape stand-ins and
# the shape assertions of a shape-polymorphic wrapper. Those xform emits: the LAPACK and
# cuSOLVER kernels, annotate_device_placement, stablehlo.dynamic_reduce_window,
# shape_assertion; the rest are here so that a module JAX accepts xform accepts too.
GUARANTEED_STABLE = CPU_FFI_KERNELS | GPU_FFI_KERNELS | {
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
    "annotate_device_placement", "cu_threefry2x32_ffi", "hip_threefry2x32_ffi",
    "Eigh", "Qr", "ProductOfElementaryHouseholderReflectors", "LuDecomposition",
    "ApproxTopK", "stablehlo.dynamic_approx_top_k", "tf.call_tf_function",
    "tpu_custom_call", "AllocateBuffer", "mosaic_gpu_v2",
    "stablehlo.dynamic_reduce_window", "stablehlo.dynamic_rng_bit_generator",
    "stablehlo.dynamic_top_k", "shape_assertion"}


def _custom_calls(op):
    """Every ``stablehlo.custom_call`` in ``op``, nested regions included, in order."""
    if op.name == "stablehlo.custom_call":
        yield op
    for region in op.regions:
        for block in region:
            for inner in block:
                yield from _custom_calls(inner.operation)


# Targets whose backend_config points into this process (a Python callback, the
# partitioner's sharding report): JAX's lowering lists them as host callbacks/keepalives.
_IN_PROCESS = {backend.python_callback_target(p) for p in ("cpu", "cuda")} | {
    "InspectSharding"}


def check_module(module, disabled_checks):
    """Raise JAX's ValueError, listing each offending op with its location, if
    ``module`` calls a custom-call target neither guaranteed stable nor allowed by a
    ``DisabledSafetyCheck.custom_call``; JAX's NotImplementedError, whatever is
    disabled, if it calls back into this process."""
    targets = [(op, ir.StringAttr(op.attributes["call_target_name"]).value)
               for op in _custom_calls(module.operation)]
    if any(t in _IN_PROCESS for _, t in targets):
        raise NotImplementedError("serialization of host_callbacks is not yet implemented")
    allowed = GUARANTEED_STABLE | {t for t in map(DisabledSafetyCheck.is_custom_call,
                                                 disabled_checks) if t is not None}
    if "ALL" in allowed:
        return
    bad = [f"{op} at {op.location}" for op, t in targets if t not in allowed]
    if bad:
        raise ValueError(
            "Cannot serialize code with custom calls whose targets have no compatibility "
            "guarantees. See https://docs.jax.dev/en/latest/export/export.html"
            "#compatibility-guarantees-for-custom-calls. Examples are:\n"
            + "\n".join(bad) + ".\n")
