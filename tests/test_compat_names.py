"""JAX API names the tutorials use (issue 15, "Missing names" and config), each checked
side by side with real JAX: values, gradients, and error types where JAX raises."""
import collections
import io
import logging
import re

import jax
import jax.ad_checkpoint
import jax.numpy as jjnp
import numpy as np
import pytest
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

import xform
import xform.numpy as jnp
from xform import lax
from xform.transforms.checkpoint import saved_residuals

LIBS = [(jax, jjnp), (xform, jnp)]


def close(a, b, tol=1e-5):
    for x, y in zip(jax.tree_util.tree_leaves(a), xform.tree_util.tree_leaves(b),
                    strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def both(fn):
    """``fn(lib, np_)`` run with JAX and with xform."""
    return [fn(lib, np_) for lib, np_ in LIBS]


# ---- differentiation API ----

def test_jacobian_is_jacrev():
    f = lambda np_: lambda x: np_.sin(x) * x[::-1]  # noqa: E731
    x = np.linspace(0.1, 1, 4).astype(np.float32)
    close(*both(lambda L, np_: L.jacobian(f(np_))(x)))
    assert xform.jacobian is xform.jacrev


def test_linear_transpose():
    def run(L, np_):
        f = lambda x, y: (2.0 * x + y.sum(), x[0] * 3.0)  # noqa: E731
        t = L.linear_transpose(f, np.ones(3, np.float32), np.ones(2, np.float32))
        return t((np.arange(3, dtype=np.float32), np.float32(5)))
    close(*both(run))
    for L, _ in LIBS:  # a cotangent of the wrong type: TypeError in both
        t = L.linear_transpose(lambda x: 2.0 * x, np.ones(3, np.float32))
        with pytest.raises(TypeError, match="cotangent"):
            t(np.ones(2, np.float32))


def test_custom_gradient():
    def run(L, np_):
        @L.custom_gradient
        def f(x, y):
            out = np_.sin(x) * y
            return out, lambda g: (g * 10.0 * y, g * x)
        g = L.grad(lambda x, y: f(x, y).sum(), (0, 1))
        x, y = np.array([0.5, 1.0], np.float32), np.array([2.0, 3.0], np.float32)
        return f(x, y), g(x, y), L.jit(g)(x, y)
    close(*both(run))


def test_fwd_and_bwd():
    x, w = np.ones((2, 3), np.float32), np.arange(6.0, dtype=np.float32).reshape(3, 2)
    ct = np.ones((2, 2), np.float32)

    def run(L, np_, jitted):
        fwd, bwd = L.fwd_and_bwd(lambda x, w: np_.tanh(x @ w), argnums=(0, 1),
                                 jitted=jitted)
        y, res = fwd(x, w)
        return y, bwd(res, ct)
    close(*[run(L, np_, False) for L, np_ in LIBS])
    _, pullback = xform.vjp(jnp.sin, 1.0)
    if not xform.tree_util.all_leaves([pullback]) or len(
            xform.tree_util.tree_leaves(pullback)) == 0:  # needs vjp's Partial pullback
        close(*[run(L, np_, True) for L, np_ in LIBS])


# ---- runtime utilities ----

def test_named_call_and_scope_change_nothing():
    def run(L, np_):
        f = L.named_call(lambda x: np_.sin(x) * 2, name="double_sin")
        with L.named_scope("outer"):
            return L.jit(f)(np.float32(0.3)), f.__name__
    (a, na), (b, nb) = both(run)
    close(a, b)
    assert na == nb


def test_ensure_compile_time_eval():
    def run(L, np_):
        @L.jit
        def f(x):
            with L.ensure_compile_time_eval():
                n = int(np_.sum(np_.arange(4)))  # concrete under jit
            return x * n
        return f(np.float32(2))
    close(*both(run))
    with pytest.raises(xform.errors.TracerIntegerConversionError):
        xform.jit(lambda x: int(x))(1.0)


def test_typeof():
    for x in (np.ones((2, 3), np.float32), 1.0, np.int32(3)):
        a, b = jax.typeof(x), xform.typeof(x)
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)


def test_clear_caches_forces_retrace():
    from xform.interpreters import compiler
    f = xform.jit(lambda x: x + 1)
    f(1.0)
    before = compiler.stats["trace"]
    f(1.0)
    assert compiler.stats["trace"] == before
    xform.clear_caches()
    assert float(f(1.0)) == 2.0
    assert compiler.stats["trace"] == before + 1


def test_live_arrays_and_delete():
    for L, np_ in LIBS:
        x = np_.arange(7.0)
        assert any(a is x for a in L.live_arrays())
        x.delete()
        assert x.is_deleted() and not any(a is x for a in L.live_arrays())
        with pytest.raises(RuntimeError, match="deleted"):
            x + 1


def test_effects_barrier_after_callback():
    seen = []
    for L, np_ in LIBS:
        L.jit(lambda x: L.debug.callback(lambda v: seen.append(float(v)), x))(2.0)
        L.effects_barrier()
    assert seen == [2.0, 2.0]


def test_context_managers():
    for L, np_ in LIBS:
        with L.enable_x64(True):
            assert np_.ones(2).dtype == np.float64
        assert np_.ones(2).dtype == np.float32
        with L.debug_infs(True):
            assert L.config.jax_debug_infs
            with pytest.raises(FloatingPointError, match="inf"):
                L.jit(lambda x: np_.log(x))(0.0)
            with pytest.raises(FloatingPointError):
                np_.log(np_.zeros(2))
        assert not L.config.jax_debug_infs
        assert float(np_.log(0.0)) == -np.inf
        with L.debug_nans():
            assert L.debug_nans.value
            with pytest.raises(FloatingPointError, match="nan"):
                L.jit(lambda x: np_.log(x))(-1.0)
        assert not L.debug_nans.value


def test_debug_breakpoint_transcript_matches_jax():
    outs = []
    for L, np_ in LIBS:
        out = io.StringIO()

        def f(x):
            y = np_.sin(x) * 2
            L.debug.breakpoint(stdin=io.StringIO("p y\npp x + 1\np nope\nl\nc\n"),
                               stdout=out)
            return y
        L.jit(f)(np.arange(3, dtype=np.float32))
        f(np.arange(3, dtype=np.float32))
        outs.append(out.getvalue())
    assert outs[0] == outs[1]
    assert "NameError" in outs[1] and outs[1].count("Entering jdb:") == 2
    for L, _ in LIBS:  # end of input quits (sys.exit), as in JAX
        with pytest.raises(SystemExit):
            L.debug.breakpoint(stdin=io.StringIO(""), stdout=io.StringIO())


# ---- lax ----

def _newton_sqrt(L, np_):
    def sqrt_cubed(a):
        def solve(f, x0):
            return L.lax.fori_loop(0, 25, lambda i, y: y - f(y) / (2 * y), x0)
        return L.lax.custom_root(lambda y: y ** 2 - a ** 3, 1.0, solve,
                                 lambda g, y: y / g(1.0))
    return sqrt_cubed


def test_custom_root_vs_jax():
    def run(L, np_):
        f = _newton_sqrt(L, np_)
        xs = np.array([1.5, 2.0], np.float32)
        return (f(2.0), L.jvp(f, (2.0,), (1.0,)), L.jit(L.grad(f))(2.0),
                L.jit(L.grad(L.grad(f)))(2.0), L.jit(L.vmap(L.grad(f)))(xs))
    close(*both(run), tol=2e-4)


def _inv2(np_, a):
    """The inverse of a 2x2 matrix from elementwise ops (no LAPACK: fast to compile)."""
    det = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    return np_.stack([np_.stack([a[1, 1], -a[0, 1]]), np_.stack([-a[1, 0], a[0, 0]])]) / det


def _lsolve(L, np_, transpose=True, symmetric=False):
    def f(a, b):
        solve = lambda mv, b: _inv2(np_, a) @ b  # noqa: E731
        tsolve = (lambda vm, b: _inv2(np_, a).T @ b) if transpose else None
        return L.lax.custom_linear_solve(lambda x: a @ x, b, solve, tsolve,
                                         symmetric=symmetric)
    return f


def test_custom_linear_solve_vs_jax():
    a = np.array([[3.0, 1.0], [0.5, 2.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)

    def run(L, np_):
        f = _lsolve(L, np_)
        loss = lambda a, b: (f(a, b) ** 2).sum()  # noqa: E731
        return (f(a, b), L.jvp(f, (a, b), (a, b)), L.jit(L.grad(loss, (0, 1)))(a, b),
                L.jit(L.vmap(f, (None, 0)))(a, np.stack([b, 2 * b])),
                L.jit(L.hessian(loss, 1))(a, b), L.jit(L.jacfwd(f, 1))(a, b))
    close(*both(run), tol=1e-4)
    s = a @ a.T  # symmetric: solve serves as its own transpose
    close(*both(lambda L, np_: L.grad(lambda b: _lsolve(L, np_, False, True)(s, b).sum())(b)),
          tol=1e-4)

    def with_aux(L, np_):  # has_aux, and vmap over the matrix (batched closed-over values)
        def f(a, b):
            solve = lambda mv, b: (_inv2(np_, a) @ b, np_.sum(b))  # noqa: E731
            tsolve = lambda vm, b: (_inv2(np_, a).T @ b, np_.sum(b))  # noqa: E731
            return L.lax.custom_linear_solve(lambda x: a @ x, b, solve, tsolve, has_aux=True)
        g = L.grad(lambda a, b: f(a, b)[0].sum())
        return f(a, b), L.jit(L.vmap(g, (0, None)))(np.stack([a, 2 * a]), b)
    close(*both(with_aux), tol=1e-4)
    for L, np_ in LIBS:  # reverse mode needs transpose_solve
        with pytest.raises(TypeError, match="transpose_solve"):
            L.grad(lambda b: _lsolve(L, np_, False)(a, b).sum())(b)


def test_optimization_barrier():
    def run(L, np_):
        f = lambda x: L.lax.optimization_barrier((np_.sin(x), x * 2))  # noqa: E731
        g = L.grad(lambda x: sum(v.sum() for v in f(x)))
        x = np.linspace(0, 1, 3).astype(np.float32)
        return f(x), g(x), L.jit(g)(x), L.vmap(f)(x), L.jvp(f, (x,), (x,))
    close(*both(run))
    assert "optimization_barrier" in xform.jit(lax.optimization_barrier).lower(1.0).as_text()


def test_platform_dependent():
    def run(L, np_):
        f = lambda x: L.lax.platform_dependent(  # noqa: E731
            x, cpu=lambda x: x + 1, tpu=lambda x: x * 0, default=lambda x: x * 3)
        return f(np.float32(2)), L.jit(f)(np.float32(2))
    close(*both(run))


def test_general_reduce_vs_jax():
    x = (np.arange(12.0).reshape(3, 4) / 7).astype(np.float32)

    def run(L, np_):
        lx = L.lax

        def argmax(x):  # two operands, a custom computation
            idx = lx.broadcasted_iota(np.int32, x.shape, 1)

            def comp(a, b):
                take = a[0] >= b[0]
                return lx.select(take, a[0], b[0]), lx.select(take, a[1], b[1])
            return lx.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), comp, (1,))

        def sumsq(x):
            return lx.reduce(x, np.float32(0), lambda a, b: a + b * b, (0,))
        return (lx.reduce(x, 0.0, lx.add, (1,)), argmax(x), sumsq(x),
                L.jit(L.grad(lambda x: sumsq(x).sum()))(x), L.jit(L.vmap(sumsq, 1))(x),
                L.jit(L.grad(lambda x: lx.reduce(x, np.float32(1), lx.mul, (0, 1))))(x))
    close(*both(run))
    jaxpr = str(xform.make_jaxpr(lambda x: lax.reduce(x, 0.0, lax.add, (0,)))(x))
    assert "reduce_sum" in jaxpr  # a monoid becomes its reduce_* primitive, as in JAX


# ---- checkpointing ----

def _residual_model(L, np_):
    def f(W, x):
        h = L.ad_checkpoint.checkpoint_name(np_.sin(W @ x), "a")
        h = L.ad_checkpoint.checkpoint_name(np_.cos(W @ h), "b")
        return np_.sum(np_.tanh(W @ h))
    return f


@pytest.mark.parametrize("new, same_as", [
    (("save_anything_except_these_names", ("b",), {}), ("everything_saveable", None, {})),
    (("save_and_offload_only_these_names", (), dict(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
        offload_src="device", offload_dst="pinned_host")),
     ("save_only_these_names", ("a", "b"), {})),
    (("offload_dot_with_no_batch_dims", ("device", "pinned_host"), {}),
     ("dots_with_no_batch_dims_saveable", None, {})),
])
def test_new_checkpoint_policies(new, same_as):
    """Each new policy saves what an existing one saves (here; in JAX too), and
    gradients are unchanged. NB: on CPU an offloaded value is saved."""
    W, x = np.eye(3, dtype=np.float32) * 0.5, np.ones(3, np.float32)
    for (L, np_), residuals in zip(LIBS, (jax_saved_residuals, saved_residuals)):
        counts = []
        for name, args, kwargs in (new, same_as):
            pol = getattr(L.checkpoint_policies, name)
            pol = pol if args is None else pol(*args, **kwargs)
            f = L.checkpoint(_residual_model(L, np_), policy=pol)
            close(L.grad(f, (0, 1))(W, x), L.grad(_residual_model(L, np_), (0, 1))(W, x))
            counts.append(len(residuals(f, W, x)))
        assert counts[0] == counts[1] > 2


def test_print_saved_residuals(capsys):
    W, x = np.eye(3, dtype=np.float32), np.ones(3, np.float32)
    for L, np_ in LIBS:
        L.ad_checkpoint.print_saved_residuals(
            lambda W, x: np_.sin(np_.dot(W["a"], x)).sum(), {"a": W}, x)
    out = capsys.readouterr().out.splitlines()
    n = len(out) // 2
    assert out[:2] == out[n:n + 2] == ["f32[3,3] from the argument W['a']",
                                       "f32[3] from the argument x"]
    assert out[2].startswith("f32[3] output of cos from") and \
        out[n + 2].startswith("f32[3] output of cos from")
    for L, np_ in LIBS:
        g = L.jit(lambda x: np_.sin(x) * 2)
        L.ad_checkpoint.print_saved_residuals(lambda x: g(x).sum(), np_.ones(3))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("f32[3] output of jitted function '<lambda>'")
    assert out[0].split(" from")[0] == out[1].split(" from")[0]


# ---- Array placement ----

def test_array_placement_properties():
    a, b = jjnp.arange(4.0), jnp.arange(4.0)
    assert len(a.devices()) == len(b.devices()) == 1
    assert a.is_fully_addressable and b.is_fully_addressable
    assert [s.index for s in a.addressable_shards] == [s.index for s in b.addressable_shards]
    close(a.addressable_shards[0].data, b.addressable_shards[0].data)
    assert type(b.sharding).__name__ == type(a.sharding).__name__ == "SingleDeviceSharding"


# ---- config ----

def test_config_knows_every_jax_option():
    names = sorted(jax.config._value_holders)
    for name in names:
        xform.config.read(name)
    assert xform.config.jax_default_matmul_precision is None
    xform.config.update("jax_numpy_rank_promotion", "raise")
    assert xform.config.jax_numpy_rank_promotion == "raise"
    xform.config.update("jax_numpy_rank_promotion", "allow")
    from jax._src.config import State
    for name in dir(jax):  # JAX's top-level states exist, and work as context managers
        if isinstance(getattr(jax, name), State):
            state = getattr(xform, name)
            assert state.value == xform.config.read(state.name)
    with xform.default_matmul_precision("highest"), xform.transfer_guard("log"):
        assert xform.config.jax_default_matmul_precision == "highest"
        assert xform.config.jax_transfer_guard_device_to_host == "log"
    assert xform.config.jax_default_matmul_precision is None
    for L, _ in LIBS:
        with pytest.raises(AttributeError, match="Unrecognized config option: jax_bogus"):
            L.config.update("jax_bogus", True)
        with pytest.raises(AttributeError):
            L.config.jax_bogus  # noqa: B018


@pytest.mark.parametrize("name", [
    "xform.ref", "xform.debugger", "xform.transforms.runtime", "xform.transforms.ad_extras",
    "xform.core.config", "xform.lax.control_flow.solves", "xform.lax.general_reduce",
    "xform.lax.barriers", "xform.transforms.ad", "xform.transforms.custom_derivatives",
    "xform.transforms.checkpoint"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0

def test_numpy_rank_promotion_raise_and_warn():
    # implicit rank promotion (not scalars, not explicit broadcasting) as JAX reports it
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    implicit = [lambda np_: np_.add(a, b), lambda np_: np_.asarray(a) * np_.asarray(b),
                lambda np_: np_.clip(a, b, 2.0), lambda np_: np_.hypot(a, b)]
    allowed = [lambda np_: np_.asarray(a) * 2.0, lambda np_: np_.broadcast_arrays(a, b),
               lambda np_: np_.matmul(a, b)]
    for f in implicit:
        msgs = []
        for L, np_ in LIBS:
            with L.numpy_rank_promotion("raise"), pytest.raises(ValueError) as e:
                f(np_)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1] and "jax_numpy_rank_promotion='raise'" in msgs[0]
    with xform.numpy_rank_promotion("raise"):
        for f in allowed:
            f(jnp)
    with xform.numpy_rank_promotion("warn"), jax.numpy_rank_promotion("warn"):
        for L, np_ in LIBS:
            with pytest.warns(UserWarning, match="Following NumPy automatic rank promotion "
                              r"for add on shapes \(2, 3\) \(3,\)"):
                np_.add(a, b + 1)
    close(jnp.add(a, b), a + b)   # "allow" again

def test_numpy_dtype_promotion_strict():
    # JAX's strict lattice: a Python scalar joins types of its kind or higher, two
    # different dtypes never; TypePromotionError (a ValueError) names them; jit retraces
    def cases(np_):
        i32, f32, f16 = np_.ones(3, np_.int32), np_.ones(3), np_.ones(3, np_.float16)
        return [lambda: i32 * 2.0, lambda: f32 * i32, lambda: f16 + f32,
                lambda: np_.promote_types("int8", "int16"), lambda: np_.ones(3, bool) + 1,
                lambda: np_.concatenate([f32, i32]), lambda: f32 * 2, lambda: i32 + 1,
                lambda: np_.mean(i32), lambda: i32 / 2]

    def outcome(f):
        try:
            return str(f().dtype)
        except ValueError as e:
            names = re.search(r"Input dtypes \((.*)\) have no", str(e)).group(1)
            return type(e).__name__, sorted(names.split(", "))
    got, want = [], []
    for (L, np_), out in zip(LIBS, (want, got)):
        f = L.jit(lambda a, b: a + b)
        f(np_.ones(3), np_.ones(3, np_.int32))
        with L.numpy_dtype_promotion("strict"):
            out.extend(outcome(c) for c in cases(np_))
            out.append(outcome(lambda: f(np_.ones(3), np_.ones(3, np_.int32))))
    assert got == want and got[0][0] == "TypePromotionError" and got[6] == "float32"
    assert issubclass(xform.dtypes.TypePromotionError, ValueError)
    with pytest.raises(ValueError, match="'bogus' is not a valid NumpyDtypePromotion"):
        xform.config.update("jax_numpy_dtype_promotion", "bogus")
    assert (jnp.ones(3, jnp.int32) * 2.0).dtype == np.float32   # standard again


def test_dtypes_helpers_match_jax():
    for d in (np.bool_, np.int8, np.uint32, np.float16, "bfloat16", np.complex64):
        assert xform.dtypes.itemsize_bits(d) == jax.dtypes.itemsize_bits(d)
    for v in (1, 1.0, True, 1j, np.ones(2, np.int8), np.float16(1)):
        assert xform.dtypes.scalar_type_of(v) is jax.dtypes.scalar_type_of(v)
    assert xform.dtypes.scalar_type_of(jnp.ones(2, "bfloat16")) is float

def test_default_matmul_precision_reaches_dots_and_jit_keys():
    # the option is read when a dot or conv is bound (as JAX's): jaxprs carry it, a jit
    # traced outside the context is not reused inside it, and bad values are refused
    a = np.ones((2, 3), np.float32)

    def precision(L):
        eqns = L.make_jaxpr(lambda x: x @ x.T)(a).jaxpr.eqns
        return str(next(e for e in eqns if e.primitive.name == "dot_general").params[
            "precision"])
    f = xform.jit(lambda x: x @ x.T)
    f(a)
    for value, attr in (("float32", "HIGHEST"), ("tensorfloat32", "HIGH"),
                        ("bfloat16", "DEFAULT"), ("highest", "HIGHEST")):
        with xform.default_matmul_precision(value), jax.default_matmul_precision(value):
            assert precision(xform) == precision(jax) != "None"
            assert f"precision = [{attr}, {attr}]" in f.lower(a).as_text()
            close(f(a), a @ a.T)
    assert precision(xform) == precision(jax) == "None"
    assert "precision = " not in f.lower(a).as_text()
    with pytest.raises(ValueError) as want:
        jax.config.update("jax_default_matmul_precision", "bogus")
    with pytest.raises(ValueError) as got:
        xform.config.update("jax_default_matmul_precision", "bogus")
    assert str(got.value) == str(want.value)
    with xform.default_matmul_precision("F16_F16_F16"), \
            jax.default_matmul_precision("F16_F16_F16"):  # (a preset: tests/test_lax_precision.py)
        assert precision(xform) == precision(jax) == "F16_F16_F16"
        np.testing.assert_array_equal(f(a), jax.jit(lambda x: x @ x.T)(a))



def test_device_get_matches_jax():
    tree = lambda m, r: {"a": m.numpy.ones(2), "n": 3, "k": r.key(0), "np": np.zeros(1),  # noqa: E731
                         "b": [m.numpy.float32(2)]}
    ours, theirs = xform.device_get(tree(xform, xform.random)), jax.device_get(
        tree(jax, jax.random))
    assert sorted(ours) == sorted(theirs)
    for k in ("a", "n", "np"):
        assert type(ours[k]) is type(theirs[k]) and np.array_equal(ours[k], theirs[k]), k
    assert type(ours["b"][0]) is np.ndarray and ours["b"][0].dtype == theirs["b"][0].dtype
    assert str(ours["k"].dtype) == "key<fry>"          # keys stay device arrays, as JAX's
    assert xform.jit(lambda x: xform.device_get(x) * 2)(1.0) == 2.0  # tracers pass through


# ---- tree_util, errors and debug names ----

def test_tree_util_one_level_static_and_keys_class():
    P = collections.namedtuple("P", "x y")
    for v in ({"a": [1, 2], "b": {"c": 3}}, (1, 2), [1, [2]], None, P(1, 2),
              collections.OrderedDict(b=1, a=2)):
        assert xform.tree_util.flatten_one_level(v) == jax.tree_util.flatten_one_level(v)
    for L in (jax, xform):
        with pytest.raises(ValueError, match="can't tree-flatten type: <class 'int'>"):
            L.tree_util.flatten_one_level(1)
    assert [xform.tree_util.is_tree_node(t) for t in (dict, P, int, type(None))] == [
        jax.tree_util.is_tree_node(t) for t in (dict, P, int, type(None))]
    prefix, full = [1, {"a": 2}], [(3, 4), {"a": [5, 6]}]
    assert xform.tree_util.tree_broadcast(prefix, full) == jax.tree_util.tree_broadcast(
        prefix, full)

    @xform.tree_util.register_static
    class Mode(str):
        pass
    assert xform.jit(lambda x, m: x + 1 if m == "add" else x - 1)(1., Mode("add")) == 2.

    @xform.tree_util.register_pytree_with_keys_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return ((xform.tree_util.GetAttrKey("a"), self.a),
                    (xform.tree_util.GetAttrKey("b"), self.b)), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    path, leaf = xform.tree_util.tree_leaves_with_path(Pair(1, 2))[1]
    assert xform.tree_util.keystr(path) == ".b" and leaf == 2
    assert xform.tree_util.tree_map(lambda x: x * 3, Pair(1, 2)).b == 6
    for name in ("JAXIndexError", "JaxprTypeError", "InconclusiveDimensionOperation"):
        base = next(c for c in getattr(jax.errors, name).__mro__ if c.__module__ == "builtins")
        assert issubclass(getattr(xform.errors, name), base)
    assert issubclass(xform.errors.NonConcreteBooleanIndexError, xform.errors.JAXIndexError)


def test_debug_log_goes_to_logging_with_the_callers_line(caplog):
    with caplog.at_level(logging.INFO, logger="xform.debug"):
        xform.jit(lambda x: xform.debug.log("y={}", x * 2))(jnp.arange(2.))
        xform.debug.log()("two-call {}", 5)
    assert [r.getMessage() for r in caplog.records] == ["y=[0. 2.]", "two-call 5"]
    assert {r.filename for r in caplog.records} == {"test_compat_names.py"}


def test_pjit_compilation_cache_and_stages_modules(tmp_path):
    from xform.experimental import pjit
    from xform.experimental.compilation_cache import compilation_cache as cc
    with pytest.warns(DeprecationWarning, match="Please use `jax.jit` instead"):
        f = pjit.pjit(lambda x: x * 2, donate_argnums=())
    close(f(np.ones(2, np.float32)), np.full(2, 2.0))
    cc.set_cache_dir(str(tmp_path))
    assert xform.config.jax_compilation_cache_dir == str(tmp_path)
    cc.reset_cache()
    cc.set_cache_dir(None)
    assert isinstance(xform.jit(lambda x: x).lower(1.), xform.stages.Lowered)
    assert isinstance(xform.jit(lambda x: x), xform.stages.Wrapped)
    assert xform.reshard is xform.sharding.reshard and callable(jax.reshard)
    assert {"Compiled", "Lowered", "Traced", "Wrapped"} <= set(dir(jax.stages)) & set(
        dir(xform.stages))


def test_user_context_retraces_as_jax():
    # jax.make_user_context: a jitted function retraces while the context's value is
    # one it has not seen, exactly as often as JAX's
    def count(L):
        ctx, n = L.make_user_context(None), []
        f = L.jit(lambda x: n.append(1) or x * 2)
        f(1.0), f(1.0)
        with ctx(1):
            f(1.0), f(1.0)
            assert ctx.value == 1
        with ctx(2):
            f(1.0)
        f(1.0)
        return len(n), ctx.value
    assert count(xform) == count(jax) == (3, None)
    with pytest.raises(TypeError, match="must be hashable"):
        xform.make_user_context([1])
