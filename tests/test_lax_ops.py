"""Every ``xform.lax`` primitive against ``jax.lax``, driven by one op table.

Each ``OpRecord`` row says how to call the op in both libraries, on which dtypes and
shapes, and from which input domain (log and sqrt positive, max/min operands apart,
...). The table drives:

* values and dtypes vs jax, eager and under ``xform.jit`` (float32, int32, bool);
* ``vmap`` vs a Python loop, the batch axis at random positions (some operands None);
* hypothesis-driven ``check_grads(order=2, modes=("fwd", "rev"))`` in float64;
* the dot-product identity between jvp and vjp, and jvp/vjp values vs jax;
* zero tangents and cotangents for the non-differentiable ops.
"""
import jax
import numpy as np
import pytest
from hypothesis import given, strategies as st

import xform
from xform import lax as xlax
from xform import test_util
from optable import (AD_TOL, F32, F64, FLOAT0, HypGen, RandGen, _rng, all_records,
                     assert_same, assert_tree_same)

RECORDS = all_records()
RECORDS_BY_NAME = {r.name: r for r in RECORDS}
assert len(RECORDS_BY_NAME) == len(RECORDS), "duplicate op record names"
DIFF = [r for r in RECORDS if r.grad_order]
NONDIFF = [r for r in RECORDS if r.grad_order == 0]


def test_table_covers_every_primitive():
    from xform.core.trace import Primitive
    prims = {v.name for v in vars(xlax).values() if isinstance(v, Primitive)}
    called = set()
    for r in RECORDS:
        jaxpr = _trace(r)
        called |= {str(e.primitive) for e in jaxpr.jaxpr.eqns}
    # Collectives need a bound axis name: tests/test_pmap.py and test_shard_map.py check
    # each against jax (values, grads, batching, lowering); test_collectives_more.py the
    # ones XLA:CPU cannot run (ragged_all_to_all...).
    from xform.lax import collectives, collectives_more, collectives_permute
    named = {v.name for m in (collectives, collectives_more, collectives_permute)
             for v in vars(m).values() if isinstance(v, Primitive)}
    # The primitives exported by the jax.lax names sweep (special functions, random bits,
    # scatter_sub, and the control-flow primitives' objects) are checked against jax in
    # tests/test_lax_scipy_api.py (values, grads, vmap); cond/while/scan also in
    # test_cond_while.py and test_scan.py, custom_linear_solve in test_linalg.py.
    from test_lax_scipy_api import LAX_NAMES
    swept = {getattr(xlax, n).name for n in LAX_NAMES
             if isinstance(getattr(xlax, n, None), Primitive)}
    # A sharding constraint needs a mesh: tests/test_sharded_jit.py checks it against jax;
    # tokens have no values to compare: tests/test_api_gaps.py checks their lowering.
    # composite and scaled_dot: tests/test_lax_composite.py (values, lowering, errors).
    others = {"sharding_constraint", "create_token", "after_all", "composite", "scaled_dot"}
    assert prims - called - named - swept - others == set()


def _trace(r):
    args = r.args_maker(RandGen(np.random.RandomState(0)), r.shapes[0], r.dtypes[0])
    return xform.make_jaxpr(r.fn_xform)(*args)


# ---- helpers ----

def _value_cases():
    for r in RECORDS:
        for dt in r.dtypes:
            for i, s in enumerate(r.shapes):
                yield pytest.param(r, dt, s, id=f"{r.name}-{dt.name}-{i}")


def _diff_fn(r, args, fn=None):
    """``fn`` as a function of the differentiated operands only (others closed over)."""
    fn = fn or r.fn_xform
    nums = r.diff_argnums if r.diff_argnums is not None else tuple(range(len(args)))

    def f(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fn(*full)
    return f, tuple(args[i] for i in nums)




# ---- (a) values and dtypes vs jax, eager and jit ----

@pytest.mark.parametrize("r,dtype,shapes", list(_value_cases()))
def test_values_match_jax(r, dtype, shapes):
    args = r.args_maker(RandGen(_rng(r.name, dtype.name, shapes)), shapes, dtype)
    expected = r.fn_jax(*args)
    eager = r.fn_xform(*[xform.device_put(a) for a in args])
    assert_tree_same(eager, expected, r.tol, f"{r.name} eager")
    for i, (x, e) in enumerate(zip(_leaves(eager), _leaves(expected))):
        assert isinstance(x, xform.Array), f"{r.name}[{i}]: {type(x)}"
        assert x.aval.weak_type == e.weak_type, f"{r.name}[{i}]: weak_type"
    jitted = xform.jit(r.fn_xform)(*args)
    assert_tree_same(jitted, expected, r.tol, f"{r.name} jit")


# ---- (b) vmap vs a Python loop, batch axis anywhere ----

@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("r", [r for r in RECORDS if r.nargs], ids=repr)
def test_vmap_matches_loop(r, seed):
    rng = _rng(r.name, seed)
    dtype = r.dtypes[seed % len(r.dtypes)]
    shapes = r.shapes[seed % len(r.shapes)]
    size = 3
    examples = [r.args_maker(RandGen(rng), shapes, dtype) for _ in range(size)]
    in_axes = [None if rng.rand() < 0.3 else int(rng.randint(-len(s) - 1, len(s) + 1))
               for s in shapes]
    if all(a is None for a in in_axes):
        in_axes[int(rng.randint(len(shapes)))] = 0
    batched = [examples[0][i] if ax is None else
               np.stack([ex[i] for ex in examples], axis=ax) for i, ax in enumerate(in_axes)]
    loop = [r.fn_xform(*[examples[b if ax is not None else 0][i]
                         for i, ax in enumerate(in_axes)]) for b in range(size)]
    ndim = min(np.ndim(x) for x in _leaves(loop[0]))
    out_axis = int(rng.randint(-ndim - 1, ndim + 1))
    got = xform.vmap(r.fn_xform, in_axes=tuple(in_axes), out_axes=out_axis)(*batched)
    want = [np.stack([np.asarray(_leaves(o)[i]) for o in loop], axis=out_axis)
            for i in range(len(_leaves(loop[0])))]
    assert_tree_same(_leaves(got), want, r.tol,
                     f"{r.name} vmap in_axes={in_axes} out_axes={out_axis}")


def test_vmap_of_nullary_op_broadcasts():
    got = xform.vmap(lambda x: xlax.add(x, xlax.iota(np.int32, 4)))(
        np.arange(8, dtype=np.int32).reshape(2, 4))
    np.testing.assert_array_equal(got, np.arange(8).reshape(2, 4) + np.arange(4))


# ---- (c) check_grads vs finite differences, float64, hypothesis-driven ----

@pytest.mark.parametrize("r", DIFF, ids=repr)
@given(data=st.data())
def test_check_grads(x64, r, data):
    shapes = data.draw(st.sampled_from(r.shapes), label="shapes")
    args = r.args_maker(HypGen(data.draw), shapes, r.grad_dtype)
    f, dyn = _diff_fn(r, args)
    test_util.check_grads(f, dyn, order=r.grad_order, modes=("fwd", "rev"), **r.grad_kw)


# ---- (d) the dot-product identity <u, J v> == <J^T u, v> ----

@pytest.mark.parametrize("r", DIFF, ids=repr)
def test_jvp_vjp_dot_product(x64, r):
    rng = _rng(r.name, "dot")
    for shapes in r.shapes:
        args = r.args_maker(RandGen(rng), shapes, r.grad_dtype)
        f, dyn = _diff_fn(r, args)
        v = tuple(rng.standard_normal(np.shape(x)).astype(r.grad_dtype) for x in dyn)
        y, jv = xform.jvp(f, dyn, v)
        u = _random_like(rng, y)
        y2, f_vjp = xform.vjp(f, *dyn)
        jtu = f_vjp(u)
        for a, b in zip(_leaves(y), _leaves(y2)):
            np.testing.assert_array_equal(a, b)
        pairs = list(zip(_leaves(u), _leaves(jv))) + list(zip(_leaves(jtu), v))
        lhs = sum(float(np.sum(np.asarray(a, F64) * np.asarray(b, F64)))
                  for a, b in pairs[:len(_leaves(u))])
        rhs = sum(float(np.sum(np.asarray(a, F64) * np.asarray(b, F64)))
                  for a, b in pairs[len(_leaves(u)):])
        scale = sum(float(np.sum(np.abs(np.asarray(a, F64) * np.asarray(b, F64))))
                    for a, b in pairs)
        tol = 1e-12 if _leaves(y)[0].dtype == F64 else 1e-6
        assert abs(lhs - rhs) <= tol * scale + 1e-300, (
            f"{r.name} shapes {shapes}: <u, Jv> = {lhs!r} but <J^T u, v> = {rhs!r}")


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def _random_like(rng, tree):
    """A random cotangent for each (floating) leaf of ``tree``, same structure."""
    return jax.tree_util.tree_map(
        lambda y: rng.standard_normal(np.shape(y)).astype(np.asarray(y).dtype), tree)


# ---- (e) jvp and vjp values vs jax ----

@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("r", DIFF, ids=repr)
def test_jvp_vjp_match_jax(r, precision, request):
    if precision == "f64":
        request.getfixturevalue("x64")
    dtype = F64 if precision == "f64" else F32
    rng = _rng(r.name, precision)
    for shapes in r.shapes[:2]:   # jax's eager jvp compiles per shape: keep it quick
        args = r.args_maker(RandGen(rng), shapes, dtype)
        fx, dyn = _diff_fn(r, args)
        fj, _ = _diff_fn(r, args, r.fn_jax)
        t = tuple(rng.standard_normal(np.shape(x)).astype(dtype) for x in dyn)
        assert_tree_same(xform.jvp(fx, dyn, t), jax.jvp(fj, dyn, t), AD_TOL,
                         f"{r.name} {shapes} jvp")
        y, x_vjp = xform.vjp(fx, *dyn)
        y_j, j_vjp = jax.vjp(fj, *dyn)
        assert_tree_same(y, y_j, AD_TOL, f"{r.name} {shapes} vjp primal")
        ct = _random_like(rng, y_j)
        assert_tree_same(x_vjp(ct), j_vjp(ct), AD_TOL, f"{r.name} {shapes} vjp")


# ---- non-differentiable ops: zero tangents and cotangents ----

@pytest.mark.parametrize("r", NONDIFF, ids=repr)
def test_nondiff_zero_tangents(r):
    rng = _rng(r.name, "zero")
    dtype = F32 if F32 in r.dtypes else r.dtypes[0]
    args = tuple(r.args_maker(RandGen(rng), r.shapes[0], dtype))
    t = tuple(rng.standard_normal(np.shape(x)).astype(dtype) for x in args)
    (y, ty), (y_j, ty_j) = xform.jvp(r.fn_xform, args, t), jax.jvp(r.fn_jax, args, t)
    assert_same(y, y_j, r.tol, f"{r.name} jvp primal")
    assert_same(ty, ty_j, r.tol, f"{r.name} jvp tangent")
    if np.asarray(ty).dtype != FLOAT0:   # float0 tangents hold no values
        assert not np.any(np.asarray(ty)), f"{r.name}: nonzero tangent {ty}"
    if not args:
        return
    _, x_vjp = xform.vjp(r.fn_xform, *args)
    _, j_vjp = jax.vjp(r.fn_jax, *args)
    out_dt = np.asarray(y_j).dtype
    ct = (rng.standard_normal(np.shape(y)).astype(out_dt)
          if np.issubdtype(out_dt, np.inexact) else np.zeros(np.shape(y), FLOAT0))
    cts, cts_j = x_vjp(ct), j_vjp(ct)
    assert_tree_same(cts, cts_j, r.tol, f"{r.name} vjp")
    for c in cts:
        assert not np.any(np.asarray(c)), f"{r.name}: nonzero cotangent {c}"


def test_grad_through_nondiff_ops_is_zero():
    x = np.array([-1.5, 0.5, 2.0], np.float32)

    def f(x):
        s = xlax.mul(xlax.sign(x), xlax.stop_gradient(x))        # no gradient
        m = xlax.convert_element_type(xlax.gt(x, 0.0), np.float32)
        return xlax.reduce_sum(xlax.add(s, m), (0,))
    np.testing.assert_array_equal(xform.grad(f)(x), np.zeros(3, np.float32))
