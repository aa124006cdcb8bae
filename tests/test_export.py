"""xform.export against the installed jax.export: the serialized bytes are JAX's (each
library deserializes and calls the other's), symbolic shapes, VJPs, platforms, errors;
and serialize_executable reloading in a fresh process."""
import functools
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.numpy as jnp
from xform import export, lax
from xform.experimental import serialize_executable as se

S = xform.ShapeDtypeStruct
F32 = np.float32


def _f(np_):
    return lambda x, y: {"a": np_.sin(x) + y, "b": (x * 2.0,)}


def _args():
    return np.arange(6, dtype=F32).reshape(2, 3) / 5, np.ones((2, 3), F32)


def _close(a, b):
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-6), a, b)


def test_round_trip_and_call_eager_and_in_jit():
    x, y = _args()
    exp = export.export(xform.jit(_f(jnp)))(S(x.shape, F32), S(y.shape, F32))
    assert exp.fun_name == "<lambda>" and exp.platforms == (xform.backend.platform(),)
    assert exp.in_avals == (xform.core.avals.ShapedArray((2, 3), F32),) * 2
    assert exp.nr_devices == 1 and exp.in_shardings_hlo == (None, None)
    text = exp.mlir_module()
    for attr in ("func.func public @main", "jax.uses_shape_polymorphism = false",
                 "mhlo.num_partitions = 1", "mhlo.num_replicas = 1",
                 "jax.result_info = \"result['b'][0]\""):
        assert attr in text
    back = export.deserialize(exp.serialize())
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    want = _f(np)(x, y)
    _close(back.call(x, y), want)
    _close(xform.jit(lambda a, b: back.call(a, b)["a"] * 2)(x, y), want["a"] * 2)
    # static arguments are baked in and leave the signature, as in JAX
    scaled = export.export(xform.jit(lambda a, k: a * k, static_argnums=1))(x, 3.0)
    j_scaled = jax.export.export(jax.jit(lambda a, k: a * k, static_argnums=1))(x, 3.0)
    assert str(scaled.in_tree) == str(j_scaled.in_tree)
    _close(scaled.call(x), j_scaled.call(x))


def test_interop_both_ways_with_jax_export():
    x, y = _args()
    ours = export.export(xform.jit(_f(jnp)))(S(x.shape, F32), S(y.shape, F32))
    theirs = jax.export.deserialize(ours.serialize())
    assert theirs.calling_convention_version == ours.calling_convention_version
    _close(theirs.call(x, y), jax.jit(_f(jjnp))(x, y))
    jexp = jax.export.export(jax.jit(_f(jjnp)))(jax.ShapeDtypeStruct(x.shape, F32),
                                                jax.ShapeDtypeStruct(y.shape, F32))
    back = export.deserialize(jexp.serialize())
    assert back.fun_name == jexp.fun_name and str(back.in_tree) == str(jexp.in_tree)
    _close(back.call(x, y), jexp.call(x, y))
    _close(xform.jit(back.call)(x, y), jexp.call(x, y))


def test_grad_through_vjp_order_1_both_ways():
    x = np.linspace(-1, 1, 4).astype(F32)
    f = lambda np_: (lambda v: np_.sum(np_.sin(v) * v))  # noqa: E731
    ours = export.export(xform.jit(f(jnp)))(S(x.shape, F32))
    back = export.deserialize(ours.serialize(vjp_order=1))
    np.testing.assert_allclose(xform.grad(back.call)(x), xform.grad(f(jnp))(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(jax.export.deserialize(ours.serialize(1)).call)(x),
                               jax.grad(f(jjnp))(x), rtol=1e-6)
    jexp = jax.export.export(jax.jit(f(jjnp)))(jax.ShapeDtypeStruct(x.shape, F32))
    np.testing.assert_allclose(xform.grad(export.deserialize(jexp.serialize(1)).call)(x),
                               jax.grad(f(jjnp))(x), rtol=1e-6)
    with pytest.raises(ValueError, match="vjps of high-enough order"):
        export.deserialize(ours.serialize()).serialize(vjp_order=1)


def test_multi_platform_export_with_platform_dependent():
    x = np.linspace(0, 1, 3).astype(F32)
    g = xform.jit(lambda v: lax.platform_dependent(v, cpu=jnp.sin, cuda=jnp.cos))
    exp = export.export(g, platforms=("cpu", "cuda"))(S(x.shape, F32))
    text = exp.mlir_module()
    assert 'jax.global_constant = "_platform_index"' in text
    assert "stablehlo.sine" in text and "stablehlo.cosine" in text
    want = jax.jit(lambda v: jax.lax.platform_dependent(v, cpu=jjnp.sin, cuda=jjnp.cos))(x)
    np.testing.assert_allclose(export.deserialize(exp.serialize()).call(x), want)
    np.testing.assert_allclose(jax.export.deserialize(exp.serialize()).call(x), want)
    tpu = export.export(xform.jit(jnp.sin), platforms=("tpu",))(S(x.shape, F32))
    with pytest.raises(ValueError, match="was exported for platforms"):
        tpu.call(x)


def test_tpu_export_takes_the_portable_linalg_lowerings():
    # no LAPACK/cuSOLVER custom calls there: StableHLO's own ops, as JAX's export has
    a = S((3, 3), F32)
    f = lambda m: (lax.linalg.cholesky(m), lax.linalg.triangular_solve(m, m))  # noqa: E731
    ours = export.export(xform.jit(f), platforms=("tpu",))(a).mlir_module()
    theirs = jax.export.export(jax.jit(lambda m: (
        jax.lax.linalg.cholesky(m), jax.lax.linalg.triangular_solve(m, m))),
        platforms=("tpu",))(a).mlir_module()
    for op in ("stablehlo.cholesky", "stablehlo.triangular_solve"):
        assert op in ours and op in theirs
    assert "stablehlo.custom_call" not in ours



_CUDA_KERNELS = [  # (xform's, JAX's, argument, JAX's kernels there)
    # the pivots-to-permutation step is cuSOLVER-side JAX's custom call, not a serial loop
    # of k swaps (a kernel launch each)
    (jnp.linalg.solve, jax.numpy.linalg.solve, [S((2, 8, 8), F32), S((2, 8, 3), F32)],
     ["cu_lu_pivots_to_permutation", "cusolver_getrf_ffi"]),
    # jaxlib's hybrid host-LAPACK/MAGMA kernels, with JAX's attributes
    (functools.partial(xform.scipy.linalg.qr, pivoting=True),
     functools.partial(jax.scipy.linalg.qr, pivoting=True), [S((2, 6, 4), F32)],
     ["cuhybrid_geqp3", "cusolver_orgqr_ffi"]),
    (xform.lax.linalg.eig, jax.lax.linalg.eig, [S((5, 5), F32)], ["cuhybrid_eig_real"]),
    (xform.lax.linalg.eig, jax.lax.linalg.eig, [S((3, 3), np.complex64)],
     ["cuhybrid_eig_comp"]),
]


@pytest.mark.parametrize("ours,theirs,args,kernels", _CUDA_KERNELS)
def test_cuda_export_calls_jaxs_gpu_kernels(ours, theirs, args, kernels):
    # what the lowering picks on a GPU, checkable here through an export for CUDA
    def calls(text):
        return (sorted(re.findall(r"custom_call @(\w+)", text)),
                sorted(c for c in re.findall(r"backend_config = (\{[^}]*\})", text)
                       if c != "{}"),
                text.count("stablehlo.while"))
    hybrid = [k for k in kernels if "hybrid" in k]   # (no compatibility guarantee)
    ours = export.export(xform.jit(ours), platforms=("cuda",), disabled_checks=[
        export.DisabledSafetyCheck.custom_call(k) for k in hybrid])(*args)
    theirs = jax.export.export(jax.jit(theirs), platforms=("cuda",), disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call(k) for k in hybrid])(*args)
    assert calls(ours.mlir_module()) == calls(theirs.mlir_module())
    assert calls(ours.mlir_module())[0] == kernels


def test_symbolic_shapes_and_dimension_expressions():
    a, b = export.symbolic_shape("a, b")
    ja, jb = jax.export.symbolic_shape("a, b")
    from jax._src import core as jcore
    ours = [a + 1, 2 * a, a * b, a // 2, a % 3, xform.core.shape_poly.max_dim(a, b), a - b,
            3 - a, a * a]
    theirs = [ja + 1, 2 * ja, ja * jb, ja // 2, ja % 3, jcore.max_dim(ja, jb), ja - jb,
              3 - ja, ja * ja]
    assert [str(e) for e in ours] == [str(e) for e in theirs]
    assert (a >= 1) and (a + 1 > 0) and (2 * a) // 2 == a
    with pytest.raises(export.InconclusiveDimensionOperation, match="inconclusive"):
        a >= b
    spec = export.symbolic_args_specs(np.zeros((3, 4), F32), "b, 2*n",
                                      constraints=("b >= n",))
    assert tuple(map(str, spec.shape)) == ("b", "2*n")


_POLY = {  # the core set traced with symbolic dimensions
    "elementwise": lambda np_: lambda x: np_.sin(x) * 2.0 + x,
    "reductions": lambda np_: lambda x: (np_.sum(x, axis=0), np_.max(x, axis=1),
                                         np_.mean(x, axis=0)),
    "broadcast_matmul": lambda np_: lambda x: (x + np_.ones((x.shape[1],), x.dtype)).T @ x,
    "reshape_concat": lambda np_: lambda x: np_.concatenate([x, x]).reshape((-1,)),
    "arange_slice": lambda np_: lambda x: (np_.arange(x.shape[0]), x[:, :2], x[1:]),
    "argmax_where_sort": lambda np_: lambda x: (np_.argmax(x, axis=0), np_.sort(x, axis=0),
                                                np_.where(x > 0.5, x, 0.0),
                                                x.reshape(x.shape[0], 2, -1)),
}


@pytest.mark.parametrize("name", sorted(_POLY))
def test_export_with_symbolic_shapes_vs_jax_at_several_sizes(name):
    spec = S(export.symbolic_shape("b, 2*n"), F32)
    ours = export.export(xform.jit(_POLY[name](jnp)))(spec)
    assert "tensor<?x?xf32>" in ours.mlir_module() and ours.uses_global_constants
    theirs = jax.export.deserialize(ours.serialize())
    for shape in [(2, 4), (3, 6)]:
        x = np.arange(np.prod(shape), dtype=F32).reshape(shape) / 7
        want = _POLY[name](jjnp)(x)
        _close(ours.call(x), want)
        _close(theirs.call(x), want)


def test_symbolic_export_checks_shapes_as_jax():
    f = lambda np_: lambda x: np_.sum(x, axis=0)  # noqa: E731
    ours = export.export(xform.jit(f(jnp)))(S(export.symbolic_shape("b, 2*n"), F32))
    text = ours.mlir_module()
    assert "@shape_assertion" in text and "Expected value >= 1 for dimension variable" in text
    jexp = jax.export.export(jax.jit(f(jjnp)))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 2*n"), F32))
    for bad in [(0, 4), (3, 5)]:
        with pytest.raises(ValueError) as theirs:
            jexp.call(np.zeros(bad, F32))
        with pytest.raises(ValueError) as mine:
            export.deserialize(ours.serialize()).call(np.zeros(bad, F32))
        assert str(mine.value) == str(theirs.value)
    with pytest.raises(export.InconclusiveDimensionOperation):
        export.export(xform.jit(lambda x: x[: x.shape[0] // 2 - x.shape[1]]))(
            S(export.symbolic_shape("b, n"), F32))


def test_call_a_polymorphic_jax_export_at_several_sizes_and_bad_shapes():
    jf = lambda x: jjnp.sum(x * 2, axis=0) + jjnp.arange(x.shape[1], dtype=x.dtype)  # noqa
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 2*n"), F32)
    jexp = jax.export.export(jax.jit(jf))(spec)
    ours = export.deserialize(jexp.serialize())
    assert tuple(map(str, ours.in_avals[0].shape)) == ("b", "2*n")
    for shape in [(1, 2), (3, 4), (2, 6)]:
        x = np.arange(np.prod(shape), dtype=F32).reshape(shape)
        np.testing.assert_allclose(ours.call(x), jf(x))
        np.testing.assert_allclose(xform.jit(ours.call)(x), jf(x))
    for bad in [(0, 4), (3, 5), (3,)]:
        with pytest.raises(ValueError) as theirs:
            jexp.call(np.zeros(bad, F32))
        with pytest.raises(ValueError) as mine:
            ours.call(np.zeros(bad, F32))
        assert str(mine.value) == str(theirs.value)
    with pytest.raises(ValueError) as theirs:
        jexp.call(np.zeros((3, 4), np.int32))
    with pytest.raises(ValueError, match="Dtype mismatch for args") as mine:
        ours.call(np.zeros((3, 4), np.int32))
    assert str(mine.value) == str(theirs.value)


def test_wrong_shape_and_pytree_errors():
    exp = export.export(xform.jit(jnp.sin))(S((3,), F32))
    with pytest.raises(ValueError, match=r"Shape mismatch for args\[0\].shape\[0\] "
                       r"\(expected same constant\): expected \(3,\) and called with"):
        exp.call(np.zeros(4, F32))
    with pytest.raises(ValueError, match="same pytree structure"):
        exp.call(np.zeros(3, F32), np.zeros(3, F32))
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(jnp.sin)


def test_bad_bytes_are_refused_before_anything_runs():
    good = export.export(xform.jit(jnp.sin))(S((3,), F32)).serialize()
    for blob in (good[:40], b"\x10\x00\x00\x00 not an exported module at all", b""):
        with pytest.raises(ValueError, match="not a serialized jax.export.Exported"):
            export.deserialize(blob)


_RELOAD = """
import sys, numpy as np, xform
from xform.experimental import serialize_executable as se
payload = sys.stdin.buffer.read()
f = se.deserialize_and_load(payload, None, xform.tree_util.tree_structure({'s': 0}))
x = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
print(repr(np.asarray(f(x, x)['s']).tolist()))
"""


def test_serialize_executable_reloads_in_a_new_process():
    c = xform.jit(lambda x, y: {"s": jnp.sin(x) @ y}).lower(
        np.ones((4, 4), F32), np.ones((4, 4), F32)).compile()
    payload, in_tree, out_tree = se.serialize(c)
    x = np.arange(16, dtype=F32).reshape(4, 4) / 10
    np.testing.assert_allclose(se.deserialize_and_load(payload, in_tree, out_tree)(x, x)["s"],
                               c(x, x)["s"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(__file__)), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _RELOAD], input=payload, env=env,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    np.testing.assert_allclose(eval(r.stdout.decode().strip().splitlines()[-1]),
                               np.sin(x) @ x, rtol=1e-5)
    with pytest.raises(ValueError, match="truncated"):
        se.deserialize_and_load(payload[:-10], in_tree, out_tree)


def test_vmap_and_jvp_of_a_call_fail_as_in_jax():
    exp = export.export(xform.jit(jnp.sin))(S((3,), F32))
    x = np.ones((2, 3), F32)
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported'"):
        xform.vmap(exp.call)(x)
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported'"):
        jax.vmap(jax.export.deserialize(exp.serialize()).call)(x)
    with pytest.raises(TypeError, match="forward-mode"):
        xform.jvp(exp.call, (x[0],), (x[0],))


def test_namedtuple_pytrees_serialize_both_ways():
    import collections
    Pair = collections.namedtuple("Pair", ["u", "v"])
    export.register_namedtuple_serialization(Pair, serialized_name="test_export.Pair")
    jax.export.register_namedtuple_serialization(Pair, serialized_name="test_export.Pair")
    x = np.arange(3, dtype=F32)
    f = lambda np_: (lambda p: Pair(np_.sin(p.u), p.v * 2))  # noqa: E731
    ours = export.export(xform.jit(f(jnp)))(Pair(S((3,), F32), S((3,), F32)))
    got = jax.export.deserialize(ours.serialize()).call(Pair(x, x))
    assert type(got) is Pair
    _close(got, f(np)(Pair(x, x)))
    jexp = jax.export.export(jax.jit(f(jjnp)))(Pair(x, x))
    back = export.deserialize(jexp.serialize()).call(Pair(x, x))
    assert type(back) is Pair
    _close(back, f(np)(Pair(x, x)))
    with pytest.raises(ValueError, match="Duplicate serialization registration"):
        export.register_namedtuple_serialization(Pair, serialized_name="other")


def test_custom_pytree_node_round_trip_and_unregistered_error():
    class Box:
        def __init__(self, value, scale):
            self.value, self.scale = value, scale
    xform.tree_util.register_pytree_node(Box, lambda b: ((b.value,), b.scale),
                                         lambda scale, kids: Box(kids[0], scale))
    fn = xform.jit(lambda b: Box(b.value * b.scale, b.scale))
    exp = export.export(fn)(Box(S((2,), F32), 3.0))
    with pytest.raises(ValueError, match="unregistered type"):
        exp.serialize()
    export.register_pytree_node_serialization(
        Box, serialized_name="test_export.Box", serialize_auxdata=lambda s: repr(s).encode(),
        deserialize_auxdata=lambda b: float(b.decode()))
    out = export.deserialize(exp.serialize()).call(Box(np.ones(2, F32), 3.0))
    assert type(out) is Box and out.scale == 3.0
    np.testing.assert_allclose(out.value, [3.0, 3.0])


def test_host_callbacks_and_ordered_effects_refused_as_in_jax():
    def body(lib):
        def f(x):
            lib.debug.print("x={x}", x=x, ordered=True)
            return x * 2
        return f
    errors = []
    for lib in (jax, xform):
        with pytest.raises(NotImplementedError) as e:
            lib.export.export(lib.jit(body(lib)))(np.ones(3, F32))
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_symbolic_args_specs_canonicalize_dtypes_as_jax():
    # a float64 NumPy argument (or a Python float) gives a float32 spec without x64
    got = export.symbolic_args_specs((np.ones((3, 2)), 1.0), ("b, 2", None))
    want = jax.export.symbolic_args_specs((np.ones((3, 2)), 1.0), ("b, 2", None))
    assert [str(s.dtype) for s in got] == [str(s.dtype) for s in want] == ["float32"] * 2
