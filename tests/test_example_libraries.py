"""xform.example_libraries follows jax.example_libraries: each optimizer's state after 3
steps (eager and jitted) equals JAX's, stax layers give JAX's params bit for bit from the
same key and JAX's outputs, a small MLP and CNN train with JAX's gradients, and the
OptimizerState pytree and its (un)packing round-trip."""
import doctest
import functools
import inspect

import jax
import jax.example_libraries.optimizers as jopt
import jax.example_libraries.stax as jstax
import numpy as np
import pytest

import xform
import xform.example_libraries.optimizers as xopt
import xform.example_libraries.stax as xstax
import xform.numpy as jnp
from xform import tree_util as tu

LIBS = {"jax": (jax, jopt, jstax), "xform": (xform, xopt, xstax)}
_rng = np.random.RandomState(0)
P0 = {"w": _rng.randn(2, 3).astype(np.float32), "b": _rng.randn(3).astype(np.float32),
      "s": np.float32(0.5)}
GRADS = [{k: np.asarray(_rng.randn(*np.shape(v)), np.float32) for k, v in P0.items()}
         for _ in range(3)]


def _leaves(tree, lib):
    return [np.asarray(x) for x in (jax.tree_util if lib == "jax" else tu).tree_leaves(tree)]


def _close(a, b, rtol=1e-6, atol=1e-7):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def _params(f):
    return [(p.name, p.kind, "<fn>" if callable(p.default) else p.default)
            for p in inspect.signature(f).parameters.values()]


def test_public_names_and_doctests():
    skip = {"annotations", "jax", "jnp", "lax", "random", "functools", "math", "partial",
            "namedtuple", "NamedTuple", "Callable", "Any", "safe_zip", "safe_map", "unzip2",
            "map", "zip"}
    for jmod, xmod in ((jopt, xopt), (jstax, xstax)):
        public = {n for n in vars(jmod) if not n.startswith("_")} - skip
        assert public - set(vars(xmod)) == set(), jmod.__name__
        for n in sorted(public):   # same parameters and defaults (initializers aside)
            f, g = getattr(jmod, n), getattr(xmod, n)
            if inspect.isfunction(f) and f.__module__ == jmod.__name__:
                assert _params(g) == _params(f), n
        assert doctest.testmod(xmod).failed == 0


# (constructor name, args): hyperparameters large enough that each term shows (eps 1e-8
# inside or outside a sqrt would not); schedules ride along, eager and jitted.
OPTIMIZERS = [
    ("sgd", lambda o: (o.piecewise_constant([0, 1], [0.1, 0.05, 0.01]),)),
    ("momentum", lambda o: (o.inverse_time_decay(0.1, 2, 0.5, staircase=True), 0.9)),
    ("nesterov", lambda o: (o.polynomial_decay(0.1, 2, 0.01, 2.0), 0.8)),
    ("adagrad", lambda o: (0.1, 0.7)),
    ("rmsprop", lambda o: (o.inverse_time_decay(0.01, 2, 0.5), 0.8, 0.1)),
    ("rmsprop_momentum", lambda o: (0.01, 0.8, 0.1, 0.7)),
    ("adam", lambda o: (o.exponential_decay(0.01, 2, 0.5), 0.8, 0.9, 0.1)),
    ("adamax", lambda o: (0.01, 0.8, 0.9, 0.1)),
    ("sm3", lambda o: (0.1, 0.8)),
]


def _run_optimizer(lib, name, jit):
    mod, opt, _ = LIBS[lib]
    init, update, get_params = getattr(opt, name)(*dict(OPTIMIZERS)[name](opt))
    if jit:
        update = mod.jit(update)
    state = init({k: mod.numpy.asarray(v) for k, v in P0.items()})
    for i, g in enumerate(GRADS):
        state = update(i, {k: mod.numpy.asarray(v) for k, v in g.items()}, state)
    return _leaves(state, lib), get_params(state)


@functools.lru_cache(maxsize=None)
def _jax_reference(name):
    return _run_optimizer("jax", name, jit=True)   # eager JAX would compile every op


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", [n for n, _ in OPTIMIZERS])
def test_optimizer_states_match_jax(name, jit):
    want, want_params = _jax_reference(name)
    got, got_params = _run_optimizer("xform", name, jit)
    _close(got, want)
    if name != "sm3":   # sm3 keeps the shape as leaves: arrays after a jitted step
        _close(_leaves(got_params, "xform"), _leaves(want_params, "jax"))
        assert tu.tree_structure(got_params) == tu.tree_structure(P0)


def test_utilities_and_schedules_match_jax():
    g = {k: v * 10 for k, v in GRADS[0].items()}
    for lib_x, lib_j in ((xopt, jopt),):
        _close([np.asarray(lib_x.l2_norm(g))], [np.asarray(lib_j.l2_norm(g))])
        for max_norm in (1.0, 1e3):
            _close(_leaves(lib_x.clip_grads(g, max_norm), "xform"),
                   _leaves(lib_j.clip_grads(g, max_norm), "jax"))
    assert xopt.make_schedule(0.3)(7) == 0.3
    f = lambda i: i
    assert xopt.make_schedule(f) is f


def test_optimizer_state_pytree_and_packing():
    init, update, get_params = xopt.adam(0.1)
    state = init(P0)
    assert isinstance(state, xopt.OptimizerState)
    leaves, treedef = tu.tree_flatten(state)
    assert len(leaves) == 3 * len(P0)   # (x, m, v) per parameter leaf
    back = tu.tree_unflatten(treedef, leaves)
    assert type(back) is xopt.OptimizerState
    assert (back.tree_def, back.subtree_defs) == (state.tree_def, state.subtree_defs)
    doubled = tu.tree_map(lambda x: 2 * x, state)   # a transform sees only the arrays
    np.testing.assert_array_equal(get_params(doubled)["w"], 2 * P0["w"])

    marked = xopt.unpack_optimizer_state(state)
    jmarked = jopt.unpack_optimizer_state(jopt.adam(0.1)[0](P0))
    assert sorted(marked) == sorted(jmarked)
    assert all(isinstance(m, xopt.JoinPoint) and len(m.subtree) == 3 for m in marked.values())
    repacked = xopt.pack_optimizer_state(marked)
    assert tu.tree_structure(repacked) == treedef
    _close(_leaves(repacked, "xform"), _leaves(state, "xform"), rtol=0, atol=0)
    # and a repacked state keeps training
    get_params(update(0, GRADS[0], repacked))


def test_optimizer_errors():
    init, update, get_params = xopt.momentum(0.1, 0.9)
    state = init(P0)
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        update(0, {"w": GRADS[0]["w"]}, state)
    with pytest.raises(TypeError, match="expects the OptimizerState"):
        get_params(P0)
    with pytest.raises(TypeError, match="scalar or a callable schedule"):
        xopt.sgd(np.ones(3))
    with pytest.raises(ValueError, match="one shorter"):
        xopt.piecewise_constant([1, 2], [0.1, 0.2])
    with pytest.raises(TypeError, match=r"leaf \['b'\] is a ndarray"):
        xopt.pack_optimizer_state({"b": np.ones(2)})
    bad = xopt.optimizer(lambda: (lambda x: (x, x), lambda i, g, s: s[0], lambda s: s[0]))()
    with pytest.raises(TypeError, match="output structure"):
        bad.update_fn(0, 1.0, bad.init_fn(1.0))


# ---- stax ----

def _fingerprint(np_mod):
    """An initializer filling the shape with a number read off the key: it checks stax's
    key plumbing without compiling a random draw per weight shape (0.2-0.8 s each)."""
    def init(key, shape, dtype=np.float32):
        return np_mod.full(shape, (key[0] % 1024).astype(dtype) / 1024 - 0.5, dtype)
    return init


def _net(mod, stax):
    """Every public layer and combinator, as one ``parallel`` of five nets. The stax
    defaults (glorot_normal weights, normal biases) stay on the two convolutions (HWIO and
    OIHW: the fan axes differ) and one dense bias; the rest take ``_fingerprint`` weights
    and zero biases (compile time)."""
    w, z = _fingerprint(mod.numpy), stax.zeros
    cnn = stax.serial(
        stax.Conv(3, (3, 3), padding="SAME"), stax.BatchNorm(), stax.Relu,
        stax.MaxPool((2, 2), strides=(2, 2)), stax.SumPool((1, 2)), stax.Flatten,
        stax.Dense(5, W_init=w, b_init=z), stax.Tanh, stax.Dropout(0.8), stax.LogSoftmax)
    branches = stax.serial(
        stax.FanOut(3),
        stax.parallel(stax.Dense(4, W_init=w), stax.serial(stax.Dense(4, W_init=w, b_init=z),
                                                  stax.Gelu), stax.Identity),
        stax.FanInSum, stax.FanOut(2), stax.parallel(stax.Sigmoid, stax.Softplus),
        stax.FanInConcat(), stax.Elu, stax.LeakyRelu, stax.Selu, stax.Softmax, stax.Exp)
    nchw = stax.serial(
        stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 3, (2, 3), strides=(2, 1),
                         padding=[(1, 0), (0, 1)], b_init=z),
        stax.MaxPool((2, 2), padding="SAME", spec="NCHW"),
        stax.AvgPool((2, 2), strides=(1, 1), padding="SAME", spec="NCHW"),
        stax.BatchNorm(axis=(0, 2, 3), center=False))
    transpose = stax.serial(
        stax.ConvTranspose(2, (3, 3), strides=(2, 2), padding="SAME", W_init=w, b_init=z),
        stax.BatchNorm(scale=False),
        stax.shape_dependent(lambda s: stax.Dense(s[-1] + 1, W_init=w, b_init=z)))
    conv1d_t = stax.Conv1DTranspose(3, (2,), strides=(2,), W_init=w, b_init=z)
    shapes = [(2, 6, 6, 2), (3, 4), (2, 2, 5, 5), (1, 3, 3, 2), (2, 4, 1)]
    return stax.parallel(cnn, branches, nchw, transpose, conv1d_t), shapes


def _init_apply(lib):
    mod, _, stax = LIBS[lib]
    (init_fun, apply_fun), shapes = _net(mod, stax)
    out_shapes = []

    def run(key, xs, rng):
        out_shape, params = init_fun(key, shapes)
        out_shapes.append(out_shape)
        return params, apply_fun(params, xs, rng=rng)
    rs = np.random.RandomState(0)
    xs = [rs.randn(*shape).astype(np.float32) for shape in shapes]
    params, outs = mod.jit(run)(mod.random.PRNGKey(1), xs, mod.random.key(2))
    return out_shapes[0], params, outs


def test_stax_init_is_bit_exact_and_apply_matches():
    j_shapes, j_params, j_outs = _init_apply("jax")
    x_shapes, x_params, x_outs = _init_apply("xform")
    assert [tuple(s) for s in x_shapes] == [tuple(s) for s in j_shapes]
    assert [np.shape(o) for o in x_outs] == [tuple(s) for s in j_shapes]
    paths = jax.tree_util.tree_flatten_with_path(j_params)[0]
    xl = _leaves(x_params, "xform")
    assert len(xl) == len(paths)
    for (path, want), got in zip(paths, xl):
        np.testing.assert_array_equal(got, want, err_msg=jax.tree_util.keystr(path))
    for k, (got, want) in enumerate(zip(x_outs, j_outs)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6,
                                   err_msg=f"net {k}")


def _train(lib, shape=(2, 4, 4, 1), steps=2):
    """A small CNN with an MLP head: eager init, then jitted grad + adam steps."""
    mod, opt, s = LIBS[lib]
    w, z = _fingerprint(mod.numpy), s.zeros   # few random draws: see _net
    init_fun, apply_fun = s.serial(
        s.Conv(2, (3, 3), padding="SAME", W_init=w, b_init=z), s.Relu,
        s.AvgPool((2, 2), (2, 2)), s.Flatten, s.Dense(6, W_init=w, b_init=z), s.Relu,
        s.Dense(3, W_init=w, b_init=z), s.LogSoftmax)
    _, params = init_fun(mod.random.PRNGKey(0), shape)
    rs = np.random.RandomState(1)
    x = mod.numpy.asarray(rs.randn(*shape).astype(np.float32))
    y = mod.numpy.asarray(np.eye(3, dtype=np.float32)[rs.randint(0, 3, shape[0])])

    def loss(p):
        return -mod.numpy.mean(mod.numpy.sum(apply_fun(p, x) * y, axis=-1))
    opt_init, opt_update, get_params = opt.adam(0.01)

    @mod.jit
    def step(i, state):
        g = mod.grad(loss)(get_params(state))
        return opt_update(i, g, state), g
    state, grads = opt_init(params), []
    for i in range(steps):
        state, g = step(i, state)
        grads.append(g)
    return _leaves(params, lib), _leaves(grads, lib), _leaves(get_params(state), lib)


def test_stax_cnn_trains_with_jax_gradients():
    j_init, j_grads, j_params = _train("jax")
    x_init, x_grads, x_params = _train("xform")
    _close(x_init, j_init, rtol=0, atol=0)   # eager init: bit for bit too
    _close(x_grads, j_grads, rtol=2e-5, atol=1e-6)
    _close(x_params, j_params, rtol=2e-5, atol=1e-6)


def test_stax_dropout_modes_and_errors():
    init_fun, apply_fun = xstax.Dropout(0.5, mode="test")
    x = jnp.ones((2, 3))
    assert apply_fun((), x, rng=xform.random.key(0)) is x
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        xstax.serial(xstax.Dropout(0.5))[1]([()], x)
    with pytest.raises(TypeError, match=r"layer 1 is not an \(init_fun, apply_fun\) pair"):
        xstax.serial(xstax.Relu, xstax.Dense)
    with pytest.raises(ValueError, match="spatial dimensions"):
        xstax.Conv(3, (3,))
    with pytest.raises(TypeError, match="filter_shape must be a tuple"):
        xstax.Conv(3, 3)
    with pytest.raises(ValueError, match="needs inputs of rank 4"):
        xstax.MaxPool((2, 2))[0](None, (3, 4))
    with pytest.raises(ValueError, match="2 input shapes for 3 layers"):
        xstax.parallel(xstax.Relu, xstax.Relu, xstax.Relu)[0](xform.random.key(0),
                                                              [(1,), (1,)])
    # negative BatchNorm axes count from the end
    _, params = xstax.BatchNorm(axis=-1)[0](xform.random.key(0), (2, 3))
    assert params[0].shape == (2,)
