"""Regressions from a differential sweep of transformation rules (jvp, vjp, vmap, jacobians,
linearize/linear_transpose, float0 and zero-size inputs) against JAX: one small case per
bug found, each compared with jax at run time.
"""
import copy
import functools
import pickle

import jax
import numpy as np
import pytest

import xform
from optable import assert_tree_same

LIBS = ((jax, jax.numpy), (xform, xform.numpy))


def _both(fn, *args):
    """``fn(lib, jnp, *args)`` for xform and for jax."""
    (jl, jn), (xl, xn) = LIBS
    return fn(xl, xn, *args), fn(jl, jn, *args)


def test_pow_grad_at_zero_follows_exponent_dtype():
    # d x^y/dx at x = y = 0: nan for a float y (0 * 0^-1), 0 for an integer y.
    x = np.zeros(3, np.float32)
    yf, yi = np.array([0., 1., 2.], np.float32), np.array([0, 1, 2], np.int32)
    ours, want = _both(lambda L, J: (L.grad(lambda a, b: L.lax.pow(a, b).sum(), (0, 1))(x, yf),
                                     L.grad(lambda a: L.lax.pow(a, yi).sum())(x)))
    assert_tree_same(ours, want, 1e-6, "grad pow at 0")


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
def test_sort_and_top_k_tangents_of_zero_size(shape):
    x = np.ones(shape, np.float32)

    def f(L, J):
        out = [L.jvp(lambda a: J.sort(a, 1), (x,), (x,)),
               L.grad(lambda a: J.sort(a, 0).sum())(x)]
        if shape[-1] == 0:
            out.append(L.jvp(lambda a: L.lax.top_k(a, 0)[0], (x,), (x,)))
        return out
    assert_tree_same(*_both(f), 0, "zero-size sort/top_k tangents")


def test_reduce_with_no_axes_and_top_k_types():
    # reduce_*(x, ()) gives an Array (not the NumPy input back); top_k a list, the
    # structure a VJP cotangent for it must have.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod"):
        out = getattr(xform.lax, name)(x, ())
        assert isinstance(out, xform.Array), name
        assert_tree_same(out, getattr(jax.lax, name)(x, ()), 0, name)
    assert type(xform.lax.top_k(x, 2)) is type(jax.lax.top_k(x, 2)) is list
    ct = [np.ones((2, 2), np.float32), np.zeros((2, 2), xform.dtypes.float0)]
    ours, want = _both(lambda L, J: L.vjp(lambda a: L.lax.top_k(a, 2), x)[1](ct))
    assert_tree_same(ours, want, 0, "top_k vjp")


def test_frexp_mantissa_tangent():
    # the mantissa comes from bit manipulation: its tangent is dx * 2**-e, not zero
    x = np.array([3., -0.3, 0., np.inf, 1.], np.float32)
    ours, want = _both(lambda L, J: (L.jvp(J.frexp, (x,), (np.ones_like(x),)),
                                     L.grad(lambda a: J.frexp(a)[0].sum())(x)))
    assert_tree_same(ours, want, 1e-6, "frexp jvp/grad")


def test_betainc_under_x64(x64):
    a, x = np.full(3, 1.5), np.array([0.2, 0.5, 0.9])
    ours, want = _both(lambda L, J: (L.lax.betainc(a, a + 1, x),
                                     L.grad(lambda v: L.lax.betainc(a, a + 1, v).sum())(x)))
    assert_tree_same(ours, want, 1e-9, "betainc x64")


def test_vjp_cotangent_dtype_is_checked():
    x = np.ones((2, 3), np.float32)
    for L in (jax, xform):
        with pytest.raises(ValueError, match="unexpected JAX type"):
            L.vjp(L.numpy.sin, x)[1](x.astype(np.float16))
        # an integer output takes any cotangent of its shape (it stands for float0)
        L.vjp(lambda a: a.astype(np.int32), x)[1](np.ones((2, 3), np.int32))


def test_argsort_index_dtype_and_errors(x64):
    # JAX's indices are the default int (int64 under x64), or ``dtype``; kind/order are
    # TypeErrors.
    x = np.array([[3., 1., 2.], [0., 5., 1.]], np.float32)
    ours, want = _both(lambda L, J: (J.argsort(x), J.argsort(x + 1j, descending=True),
                                     J.argsort(x, dtype=np.int16)))
    assert_tree_same(ours, want, 0, "argsort")
    for L in (jax, xform):
        for kw in ({"kind": "quicksort"}, {"order": "a"}):
            with pytest.raises(TypeError):
                L.numpy.argsort(x, **kw)


def test_lax_zeta_is_not_differentiable_but_scipy_zeta_is():
    # JAX's zeta_p has no JVP rule; only scipy.special.zeta differentiates (a custom JVP)
    errors = []
    for L in (jax, xform):
        for argnum in (0, 1):
            with pytest.raises(NotImplementedError) as e:
                L.grad(L.lax.zeta, argnum)(3.0, 1.5)
            errors.append(str(e.value))
    assert errors[:2] == errors[2:], errors
    ours, want = _both(lambda L, J: L.jacfwd(L.scipy.special.zeta, (0, 1))(
        np.array([2., 4.], np.float32), np.array([1., .5], np.float32)))
    assert_tree_same(ours, want, 1e-5, "scipy zeta jacobian")


def _weak(tree):
    return [getattr(getattr(x, "aval", None), "weak_type", None)
            for x in jax.tree_util.tree_leaves(tree)]


def test_vmap_axes_skip_none_leaves_of_the_value():
    # a None in the arguments or outputs has no leaves: the prefix's entries must not
    # shift onto the next array (that mapped A over its axis 0 instead of 1)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours, want = _both(lambda L, J: L.jit(lambda a: (
        L.vmap(lambda n, x: x.sum(), in_axes=(0, 1))(None, a),
        L.vmap(lambda n, x: x.sum(), in_axes=(None, 0))(None, a),
        L.vmap(lambda x: (None, x), out_axes=(None, 1))(a),
        L.jacfwd(lambda x: (x * 2, None))(a[0]), L.jacrev(lambda x: (None, x * 2))(a[0])))(a))
    assert_tree_same(ours, want, 0, "vmap with None leaves")


def test_jacobians_of_mixed_precision_arguments():
    # each argument's basis rows take its own dtype (the jvp would reject others)
    a, b = np.arange(1, 3, dtype=np.float16), np.arange(1, 3, dtype=np.float32)
    f = lambda x, y: x * y  # noqa: E731
    ours, want = _both(lambda L, J: L.jit(lambda x, y: (L.jacfwd(f, (0, 1))(x, y),
                                                         L.jacrev(f, (0, 1))(x, y)))(a, b))
    assert_tree_same(ours, want, 1e-3, "mixed-precision jacobians")


def test_grad_of_constant_output_and_zero_cotangent_weak_type():
    # a Python-scalar output is a scalar output (its gradient zero); a zero gradient has
    # the argument's weak type, a zero tangent its output's
    ours, want = _both(lambda L, J: (L.value_and_grad(lambda x: 1.0)(2.0),
                                     L.grad(lambda x, y: x * 3.0, (0, 1))(2.0, 3.0),
                                     L.grad(lambda d: d["a"] * 2)({"a": 1.0, "b": 3.0}),
                                     L.jvp(lambda x: (1.0, J.zeros(2)), (2.0,), (1.0,))[1]))
    assert_tree_same(ours, want, 0, "constant-output grad")
    assert _weak(ours) == _weak(want), (_weak(ours), _weak(want))
    for L in (jax, xform):
        with pytest.raises(TypeError, match="Output was None"):
            L.grad(lambda x: None)(1.0)


def test_gradient_of_a_weak_argument_met_by_a_strong_one_is_weak():
    # jnp records JAX's weak-to-strong convert: its transpose makes the cotangent weak
    # and its JVP the tangent strong; lax ops record none (JAX's cotangent stays strong)
    s, h = np.float32(3), np.ones((), np.float16)
    ours, want = _both(lambda L, J: (
        L.grad(lambda x, y: x * y, (0, 1))(2.0, s), L.grad(lambda x, y: x * y)(2.0, h),
        L.grad(lambda x: J.sin(x).astype(np.float32) * s)(2.0),
        L.jit(L.grad(lambda x, y: J.sum(x * y)))(1.5, J.ones(3)),
        L.vmap(L.grad(lambda x, y: x * y), (None, 0))(2.0, J.ones(3)),
        L.grad(lambda x, y: L.lax.mul(x, y))(2.0, J.float32(3)),
        L.grad(lambda x: L.lax.select(True, x, J.float32(1)))(2.0),
        L.jvp(lambda x: x + s, (2.0,), (1.0,))[1]))
    assert_tree_same(ours, want, 0, "weak-argument gradients")
    assert _weak(ours) == _weak(want), (_weak(ours), _weak(want))


@pytest.mark.parametrize("make", [
    lambda L: L.grad(3), lambda L: L.value_and_grad(3), lambda L: L.jacfwd(3),
    lambda L: L.jacrev(3), lambda L: L.hessian(3), lambda L: L.vmap(3),
    lambda L: L.eval_shape(3, 1.0)])
def test_transforms_reject_a_non_callable_at_once(make):
    for L in (jax, xform):
        with pytest.raises(TypeError, match="Expected a callable value, got 3"):
            make(L)


@pytest.mark.parametrize("kw, match", [
    ({"static_argnums": 3}, r"static_argnums=\(3,\), but only accepts 2 positional"),
    ({"static_argnums": -3}, r"static_argnums=\(-3,\), but only accepts 2"),
    ({"donate_argnums": (5,)}, r"donate_argnums=\(5,\), but only accepts 2"),
    ({"static_argnames": "zz"}, "invalid argnames {'zz'} in static_argnames"),
    ({"donate_argnames": ("a", "q")}, "invalid argnames {'q'} in donate_argnames"),
    ({"static_argnums": 0, "donate_argnums": 0}, "cannot intersect"),
    ({"static_argnames": "b", "donate_argnums": 1}, "cannot intersect")])
def test_jit_checks_argnums_and_argnames_against_the_signature(kw, match):
    for L in (jax, xform):
        with pytest.raises(ValueError, match=match):
            L.jit(lambda a, b=1: a, **kw)
    for L in (jax, xform):   # *args / **kwargs take any
        L.jit(lambda *a, **k: a, static_argnums=4, static_argnames="zz")


def test_jit_argnums_may_be_numpy_integers():
    # JAX's operator.index: a NumPy integer (one, or in a sequence) is an argnum
    x = np.ones(2, np.float32)
    ours, want = _both(lambda L, J: (
        L.jit(lambda a, k: a * k, static_argnums=np.int64(1))(x, 2),
        L.jit(lambda a, k: a * k, static_argnums=[np.int32(-1)])(x, 3),
        L.jit(lambda a, k: a + k, donate_argnums=np.int64(0))(J.ones(2), 1.0),
        str(L.make_jaxpr(lambda a, k: a * k, static_argnums=np.int8(1))(x, 2).in_avals)))
    assert_tree_same(ours, want, 0, "numpy argnums")


def test_stages_describe_arguments_and_outputs_as_jax():
    # Traced/Lowered/Compiled: in_tree, in_avals, args_info (donation), out_tree,
    # out_info; Compiled.input_shardings a tree (args, kwargs); a call with another
    # argument structure refused
    x = np.ones(3, np.float32)

    def f(a, n, b, c=1.0):
        return {"y": a * b + c, "n": None}

    def describe(L):
        t = L.jit(f, donate_argnums=0, static_argnums=1).trace(x, 2, x, c=2.0)
        lo = t.lower()
        co = lo.compile()
        out = [t.fun_name, str(t.out_avals)]
        for o in (t, lo, co):
            info = L.tree_util.tree_map(lambda a: (a.shape, str(a.dtype), a.donated),
                                        o.args_info)
            out.append((str(o.in_tree), str(o.out_tree), str(o.in_avals), info,
                        L.tree_util.tree_map(lambda s: (s.shape, s.dtype), o.out_info)))
        shardings = L.tree_util.tree_map(lambda s: type(s).__name__, co.input_shardings)
        with pytest.raises(TypeError, match="input pytree does not match"):
            co(x, x, 1.0)
        return out, shardings, co(x, x, c=3.0)
    ours, want = describe(xform), describe(jax)
    assert ours[:2] == want[:2]
    assert_tree_same(ours[2], want[2], 0, "compiled call")


def test_make_jaxpr_axis_env_binds_names_for_collectives():
    x = np.ones(3, np.float32)

    def prims(L):
        j = L.make_jaxpr(lambda a: L.lax.pmean(a, ("i", "j")),
                         axis_env=[("i", 4), ("j", 2)])(x)
        with pytest.raises(NameError, match="unbound axis name: k"):
            L.make_jaxpr(lambda a: L.lax.psum(a, "k"), axis_env=[("i", 4)])(x)
        return [e.primitive.name for e in j.jaxpr.eqns], str(j.jaxpr.eqns[-1].invars[1])
    assert prims(xform) == prims(jax)


def test_checkpoint_called_directly_returns_arrays_in_pytree_order():
    x = np.arange(3, dtype=np.float32)

    def run(L):
        out = L.checkpoint(lambda a, n: {"z": a * n, "a": [n, None]}, static_argnums=1)(x, 2)
        return list(out), [type(v).__name__ for v in L.tree_util.tree_leaves(out)], out
    (keys, types, ours), (jkeys, _, want) = run(xform), run(jax)
    assert keys == jkeys and types == ["Array", "Array"]
    want = jax.tree.map(jax.numpy.asarray, want)   # (JAX passes a static int through)
    assert_tree_same(ours, want, 0, "eager checkpoint")
    assert _weak(ours) == _weak(want)


def test_vjp_and_linearize_argument_mismatches_are_value_errors():
    x = np.ones(3, np.float32)
    for L in (jax, xform):
        with pytest.raises(ValueError, match="unexpected tree structure"):
            L.vjp(lambda a: (a, a), x)[1](x)
        f_jvp = L.linearize(lambda a: a * 2, x)[1]
        for t in (x.astype(np.float16), np.ones(4, np.float32)):
            with pytest.raises(ValueError, match="linearized function called on tangent "
                                                 "values inconsistent with the original"):
                f_jvp(t)


def test_grad_input_dtype_checks():
    # float0 is not a number: refused even with allow_int; a key is allowed with it
    x, z = np.ones(2, np.float32), np.zeros(2, jax.dtypes.float0)
    for L in (jax, xform):
        with pytest.raises(TypeError, match="requires numerical-valued inputs"):
            L.grad(lambda a, b: a.sum(), argnums=1, allow_int=True)(x, z)
        assert L.grad(lambda k: 1.0, allow_int=True)(L.random.key(0)).dtype == z.dtype
        with pytest.raises(TypeError, match="requires real- or complex-valued inputs"):
            L.grad(lambda k: 1.0)(L.random.key(0))


def test_repeated_argnums_are_type_errors():
    # JAX fails with a TypeError; xform gave a zero for the first of the two
    x = np.ones(3, np.float32)
    for L in (jax, xform):
        for make in (L.grad, L.jacfwd, L.jacrev):
            with pytest.raises(TypeError):
                make(lambda a: (a * a).sum(), (0, -1))(x)


def test_device_queries_name_the_backend_as_jax():
    # ``backend=`` by keyword; a platform that is not running is a RuntimeError (the
    # usual ``try: jax.devices("gpu")`` probe), an unknown name too
    import inspect
    for name in ("devices", "local_devices", "device_count", "local_device_count"):
        assert (list(inspect.signature(getattr(xform, name)).parameters)
                == list(inspect.signature(getattr(jax, name)).parameters)), name
    for L in (jax, xform):
        assert L.device_count(backend="cpu") == len(L.devices(backend="cpu"))
        bads = [("nope", "Unknown backend nope. Available backends are")]
        if jax.default_backend() == "cpu":
            bads.append(("gpu", "no platforms that are instances of gpu"))
        for bad, match in bads:
            for f in (L.devices, L.device_count, L.local_device_count):
                with pytest.raises(RuntimeError, match=match):
                    f(bad)


def test_deprecated_and_newer_options_as_jax():
    # nondiff_argnames, checkpoint static_argnames, jit compiler_options; the removed
    # reduce_axes/concrete options are NotImplementedErrors
    x = np.arange(1, 4, dtype=np.float32)

    def run(L):
        @functools.partial(L.custom_jvp, nondiff_argnames=("n",))
        def f(a, n):
            return a * n
        f.defjvp(lambda n, p, t: (f(p[0], n), t[0] * n * 10))

        @functools.partial(L.custom_vjp, nondiff_argnames="n")
        def g(a, n):
            return a * n
        g.defvjp(lambda a, n: (g(a, n), None), lambda n, r, ct: (ct * n * 5,))
        c = L.checkpoint(lambda a, n: (a ** n).sum(), static_argnames="n")
        for bad in (lambda: L.vjp(jax.numpy.sin, 1.0, reduce_axes=("i",)),
                    lambda: L.grad(lambda a: a, reduce_axes=("i",)),
                    lambda: L.checkpoint(lambda a: a, concrete=True)):
            with pytest.raises(NotImplementedError):
                bad()
        return (f.nondiff_argnums, g.nondiff_argnums, L.grad(lambda a: f(a, 3.).sum())(x),
                L.grad(lambda a: g(a, 3.).sum())(x), L.grad(c)(x, 2),
                L.jit(lambda a: a * 2, compiler_options={})(x))
    ours, want = run(xform), run(jax)
    assert ours[:2] == want[:2] == ((1,), (1,))
    assert_tree_same(ours[2:], want[2:], 1e-6, "options")


def test_jnp_power_int_exponent_grad_at_zero():
    # jnp.power(float, int array) keeps the int exponent (lax.pow's JVP is then 0 at
    # x = 0 where the exponent is 0); promoting it to float gave nan.
    x, n = np.zeros(3, np.float32), np.array([0, 1, 2], np.int32)
    ours, want = _both(lambda L, J: (L.grad(lambda a: J.power(a, n).sum())(x),
                                     L.jvp(lambda a: J.power(a, n), (x,), (x + 1,))))
    assert_tree_same(ours, want, 1e-6, "grad power(x, int) at 0")


def test_grad_of_python_scalar_output_and_float0_tangent_check():
    # a Python/NumPy scalar output is a scalar (zero gradient); a float0 tangent stands
    # only for an int/bool primal
    x = np.ones(2, np.float32)
    ours, want = _both(lambda L, J: (L.grad(lambda a: 0.)(x),
                                     L.value_and_grad(lambda a: np.float32(1.))(x)))
    assert_tree_same(ours, want, 0, "grad of a constant")
    for L in (jax, xform):
        with pytest.raises(TypeError, match="tangent dtype"):
            L.jvp(lambda a: a * 2, (x,), (np.zeros(2, jax.dtypes.float0),))
        with pytest.raises(TypeError, match="scalar-output functions. Output was"):
            L.grad(lambda a: [a.sum()])(x)


def test_nan_and_complex_zero_tangents_follow_jax():
    # sqrt at a complex 0: t * (0.5 / 0j) is nan (t / 0j was inf); cholesky of a matrix
    # that is not positive definite: the tangent's upper triangle stays 0, not NaN
    z = np.array([0j, 1 + 1j], np.complex64)
    s = np.array([[1., 2., 0.], [2., 1., 0.], [0., 0., 1.]], np.float32)
    ours, want = _both(lambda L, J: (L.jvp(J.sqrt, (z,), (z + 1,)),
                                     L.jvp(J.linalg.cholesky, (s,), (s,))))
    assert_tree_same(ours, want, 1e-6, "sqrt / cholesky tangents")


def test_shape_dtype_struct_keeps_its_dtype_and_is_immutable():
    # JAX's struct keeps the dtype as given (float64, int64 without x64); avals built from
    # it are canonical, and a 64-bit callback result is refused as JAX refuses it
    def f(L, J):
        s, i = L.ShapeDtypeStruct((2, 0), float), L.ShapeDtypeStruct((2,), np.int64)
        return (str(s.dtype), str(i.dtype), repr(s), s.size, s == L.ShapeDtypeStruct(
                    (2, 0), np.float32), str(L.eval_shape(lambda a: a, s).dtype),
                str(L.jit(lambda a: a + 1).lower(i).out_info.dtype))
    ours, want = _both(f)
    assert ours == want, (ours, want)
    for L in (jax, xform):
        s = L.ShapeDtypeStruct((2,), np.float32)
        with pytest.raises(RuntimeError, match="Cannot reassign"):
            s.shape = (3,)
        assert copy.deepcopy(s) == pickle.loads(pickle.dumps(s)) == s
        with pytest.raises(ValueError, match="64-bit"):
            L.pure_callback(lambda: np.zeros(2), L.ShapeDtypeStruct((2,), np.float64))


def test_abstract_evaluation_takes_any_value_with_shape_and_dtype():
    # JAX abstractifies a duck-typed value (shape, dtype, weak_type attributes) for
    # eval_shape, make_jaxpr and lower; calling the jit with it stays a TypeError. (And
    # Lowered/Compiled.out_info have no weak types, as JAX's, unlike Traced's.)
    class Spec:
        shape, dtype, weak_type = (2,), np.float64, True
    ours, want = _both(lambda L, J: tuple(map(repr, (
        L.eval_shape(lambda a: a * 2, Spec()), L.make_jaxpr(lambda a: a)(Spec()).in_avals,
        L.jit(lambda a: a + 1).trace(Spec()).out_info,
        L.jit(lambda a: a + 1).lower(Spec()).out_info,
        L.jit(lambda a: a + 1).lower(Spec()).compile().out_info.weak_type))))
    assert ours == want, (ours, want)
    for L in (jax, xform):
        with pytest.raises(TypeError):
            L.jit(lambda a: a)(Spec())


def test_linear_transpose_of_an_unused_integer_input_is_float0():
    # JAX instantiates an integer input's zero cotangent in its tangent type, float0; a
    # duck-typed primal's weak type is kept
    class Spec:
        shape, dtype, weak_type = (), np.float32, True
    i = np.arange(3, dtype=np.int32)
    ours, want = _both(lambda L, J: (
        L.linear_transpose(lambda a, b: a * 2, i, i)(J.ones(3, np.int32)),
        L.linear_transpose(lambda a: a * 2, Spec())(1.0)))
    assert [(np.asarray(a).dtype, np.shape(a)) for a in jax.tree.leaves(ours)] == \
        [(np.asarray(a).dtype, np.shape(a)) for a in jax.tree.leaves(want)]
    assert _weak(ours[1]) == _weak(want[1]), (_weak(ours), _weak(want))


@pytest.mark.parametrize("device", ["cpu", 3])
def test_device_put_refuses_what_is_not_a_device_as_jax(device):
    # (a string reached jaxlib and failed there with a TypeError about its arguments)
    for L in (jax, xform):
        with pytest.raises(ValueError, match="only accepts `None`"):
            L.device_put(np.ones(2, np.float32), device)
        with pytest.raises(ValueError, match="only accepts `None`"):
            L.device_put([np.ones(2, np.float32)], [device])


def test_vmap_sum_match_sums_mapped_outputs_where_out_axes_is_none():
    # JAX's sum_match: x.sum(batch axis) (jnp.sum's dtype), an unmapped output as is
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours, want = _both(lambda L, J: (
        L.vmap(lambda a, b: (a * 2, a.sum(), b), in_axes=(0, None), out_axes=(None, 0, None),
               sum_match=True)(x, 5.0),
        L.vmap(lambda a: {"p": a > 1, "q": a.astype(np.int8)}, out_axes=None,
               sum_match=True, axis_name="i")(x),
        L.grad(lambda z: L.vmap(lambda a: a ** 2, out_axes=None, sum_match=True)(z).sum())(x)))
    assert_tree_same(ours, want, 0, "sum_match")
    with pytest.raises(ValueError):
        xform.vmap(lambda a: a, out_axes=None)(x)


def test_argnums_numpy_ints_and_jacobian_range_errors():
    f = lambda a, b: a * b * b  # noqa: E731
    for xf, jf in ((xform.grad, jax.grad), (xform.jacfwd, jax.jacfwd),
                   (xform.jacrev, jax.jacrev), (xform.hessian, jax.hessian)):
        for nums in (np.int64(1), (np.int32(0), 1)):
            got, want = xf(f, argnums=nums)(2.0, 3.0), jf(f, argnums=nums)(2.0, 3.0)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want))
        try:   # (an argnum past the arguments: JAX's error class for each)
            jf(lambda a: a, argnums=3)(2.0)
            raise AssertionError("jax accepted argnums=3 for one argument")
        except (TypeError, ValueError) as e:
            want_type = type(e)
        with pytest.raises(want_type):
            xf(lambda a: a, argnums=3)(2.0)
