"""xform.nn module system vs flax.linen: same key -> same variables (paths and values)
and outputs; naming, setup/compact, collections, rngs, init/apply options, bind, and
xform's jit/grad/vmap over apply."""
import numpy as np
import pytest

import flax.linen as fnn
import jax
import jax.numpy as jjnp

import xform
import xform.numpy as jnp
import xform.nn as nn
from nn_oracle import assert_trees, keys

X = np.random.RandomState(0).randn(2, 4).astype(np.float32)


def _models(lib, np_):
    """The same model family written against ``lib`` (xform.nn or flax.linen)."""

    class Block(lib.Module):
        features: int

        @lib.compact
        def __call__(self, x):
            x = lib.Dense(self.features)(x)
            return lib.Dense(self.features, use_bias=False, name="proj")(lib.relu(x))

    class Nested(lib.Module):
        @lib.compact
        def __call__(self, x):
            x = Block(5)(x)
            x = Block(3)(x)
            shared = lib.Dense(3)
            return shared(shared(x))   # called twice: one set of params

    class WithSetup(lib.Module):
        def setup(self):
            self.layers = [lib.Dense(3), lib.Dense(3)]
            self.heads = {"a": lib.Dense(2), "b": lib.Dense(1)}
            self.first = lib.Dense(4, name="explicit")
            self.scale = self.param("scale", lib.initializers.ones, (3,))

        def __call__(self, x):
            x = self.first(x)
            for layer in self.layers:
                x = layer(x) * self.scale
            return self.heads["a"](x), self.heads["b"](x)

        def encode(self, x):
            return self.first(x)

    class Stateful(lib.Module):
        @lib.compact
        def __call__(self, x):
            count = self.variable("counter", "count", lambda: np_.zeros((), np_.int32))
            noise = self.make_rng("noise")
            h = lib.Dense(3)(x)
            self.sow("intermediates", "h", h)
            if not self.is_initializing():
                count.value += 1
            has = self.has_variable("counter", "count")
            return h, noise, has

    class Helper(lib.Module):
        @lib.nowrap
        def make(self, n):
            return lib.Dense(n)

        @lib.compact
        def __call__(self, x):
            return self.make(2)(x)

    return dict(Block=Block, Nested=Nested, WithSetup=WithSetup, Stateful=Stateful,
                Helper=Helper)


XM, FM = _models(nn, jnp), _models(fnn, jjnp)


@pytest.mark.parametrize("name,args", [("Nested", ()), ("WithSetup", ()),
                                       ("Helper", ()), ("Block", (4,))])
def test_init_apply_matches_flax(name, args):
    xk, fk = keys(1)
    xm, fm = XM[name](*args), FM[name](*args)
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(v, fv)
    assert_trees(xm.apply(v, X), fm.apply(fv, X))                 # all bit-exact
    assert_trees(xform.jit(lambda v, x: xm.apply(v, x))(v, X), fm.apply(fv, X))
    assert_trees(xform.jit(xm.init)(xk, X), fv)


def test_names_setup_lists_and_dicts():
    v = XM["WithSetup"]().init(keys(0)[0], X)
    assert sorted(v["params"]) == ["explicit", "heads_a", "heads_b", "layers_0",
                                   "layers_1", "scale"]
    v = XM["Nested"]().init(keys(0)[0], X)
    assert sorted(v["params"]) == ["Block_0", "Block_1", "Dense_0"]
    assert sorted(v["params"]["Block_0"]) == ["Dense_0", "proj"]


def test_method_string_and_function():
    xk, fk = keys(2)
    xm, fm = XM["WithSetup"](), FM["WithSetup"]()
    v, fv = xm.init(xk, X, method="encode"), fm.init(fk, X, method="encode")
    assert_trees(v, fv)
    assert_trees(xm.apply(v, X, method=xm.encode), fm.apply(fv, X, method=fm.encode),
                 rtol=1e-6)
    out = xm.apply(v, X, method=lambda m, x: m.encode(x) * 2)
    np.testing.assert_allclose(out, 2 * np.asarray(xm.apply(v, X, method="encode")))


def _outer(lib):
    class Outer(lib.Module):
        sub: lib.Module
        size: int = 3

        @lib.compact
        def __call__(self, x):
            return self.sub(x)
    return Outer(lib.Dense(3))


def test_apply_method_string_names_a_submodule_or_fails_as_flax():
    xm, fm = _outer(nn), _outer(fnn)
    xk, fk = keys(2)
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(xm.apply(v, X, method="sub"), fm.apply(fv, X, method="sub"))
    for m, vs in ((xm, v), (fm, fv)):    # Flax's error classes
        with pytest.raises(TypeError, match=r"'Outer\.size' must be a callable"):
            m.apply(vs, X, method="size")
        with pytest.raises(AttributeError, match='no attribute "nope"'):
            m.apply(vs, X, method="nope")


def test_collections_rng_streams_sow_and_mutable():
    xk, fk = keys(3)
    xn, fn = keys(4)
    xm, fm = XM["Stateful"](), FM["Stateful"]()
    (h, noise, has), v = xm.init_with_output({"params": xk, "noise": xn}, X)
    (fh, fnoise, fhas), fv = fm.init_with_output({"params": fk, "noise": fn}, X)
    assert_trees(v, fv)            # intermediates not kept by init (DenyList)
    assert "intermediates" not in v
    assert_trees(noise, fnoise)    # make_rng('noise') derives Flax's key
    assert bool(has) and bool(fhas)
    (out, nz, _), upd = xm.apply(v, X, rngs={"noise": xn},
                                 mutable=["counter", "intermediates"])
    (fout, fnz, _), fupd = fm.apply(fv, X, rngs={"noise": fn},
                                    mutable=["counter", "intermediates"])
    assert_trees(upd, fupd, rtol=1e-6)
    assert int(upd["counter"]["count"]) == 1
    assert_trees(nz, fnz)
    # make_rng falls back to the params stream when 'noise' is absent
    _, nz2, _ = xm.apply(v, X, rngs={"params": xk}, mutable=["counter"])[0]
    _, fnz2, _ = fm.apply(fv, X, rngs={"params": fk}, mutable=["counter"])[0]
    assert_trees(nz2, fnz2)


def test_capture_intermediates():
    xk, fk = keys(5)
    xm, fm = XM["Nested"](), FM["Nested"]()
    v, fv = xm.init(xk, X), fm.init(fk, X)
    _, st = xm.apply(v, X, capture_intermediates=True, mutable=["intermediates"])
    _, fst = fm.apply(fv, X, capture_intermediates=True, mutable=["intermediates"])
    assert_trees(st, fst, rtol=1e-6, atol=1e-6)
    assert len(st["intermediates"]["Dense_0"]["__call__"]) == 2


def test_bind_unbind_clone():
    xk, _ = keys(6)
    m = XM["WithSetup"]()
    v = m.init(xk, X)
    bound = m.bind(v)
    np.testing.assert_array_equal(bound.encode(X), m.apply(v, X, method="encode"))
    sub, sub_vars = bound.first.unbind()
    assert isinstance(sub, nn.Dense) and sub.scope is None
    np.testing.assert_array_equal(sub.apply(sub_vars, X), bound.encode(X))
    c = nn.Dense(3).clone(features=5)
    assert c.features == 5 and c.name is None


def test_grad_and_vmap_over_apply():
    xk, fk = keys(7)
    xm, fm = XM["Nested"](), FM["Nested"]()
    v, fv = xm.init(xk, X), fm.init(fk, X)
    g = xform.grad(lambda v: jnp.sum(xm.apply(v, X) ** 2))(v)
    fg = jax.grad(lambda v: jjnp.sum(fm.apply(v, X) ** 2))(fv)
    assert_trees(g, fg, rtol=1e-5, atol=1e-6)
    xs = np.random.RandomState(1).randn(3, 2, 4).astype(np.float32)
    ys = xform.vmap(lambda x: xm.apply(v, x))(xs)
    loop = np.stack([np.asarray(xm.apply(v, x)) for x in xs])
    np.testing.assert_allclose(ys, loop, rtol=1e-6, atol=1e-6)


def test_param_and_variable_api():
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            if self.is_mutable_collection("stats"):
                self.put_variable("stats", "last", x)
            return x + self.param("b", nn.initializers.zeros, x.shape[-1:])

    v = M().init(keys(0)[0], X)
    assert sorted(v) == ["params", "stats"]
    np.testing.assert_array_equal(v["stats"]["last"], X)
    assert M().apply({"params": v["params"]}, X).shape == X.shape


def test_typed_key_or_lazy_rng_accepted_and_bad_rng_rejected():
    with pytest.raises(nn.errors.InvalidRngError, match="RNGs should be of shape"):
        nn.Dense(2).init(np.zeros(3, np.float32), X)
    # a dict with a non-key value: flax.core's init/apply ValueError; bind takes no bare key
    xv, fv = nn.Dense(2).init(keys(0)[0], X), fnn.Dense(2).init(keys(0)[1], X)
    calls = [lambda lib, v, k: lib.Dense(2).init({"params": 0}, X),
             lambda lib, v, k: lib.Dense(2).apply(v, X, rngs={"dropout": 0}),
             lambda lib, v, k: lib.Dense(2).bind(v, rngs=k)]
    for call in calls:
        with pytest.raises(Exception) as want:
            call(fnn, fv, keys(1)[1])
        with pytest.raises(Exception) as got:
            call(nn, xv, keys(1)[0])
        assert type(got.value).__name__ == type(want.value).__name__
        assert str(got.value)[:40] == str(want.value)[:40]


# ---- errors: named classes, messages naming the module path and the fix ----

class _Two(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(3)(x)


def _vars():
    return _Two().init(keys(0)[0], X)


def test_error_param_shape_mismatch_names_path_and_shapes():
    with pytest.raises(nn.errors.ScopeParamShapeError,
                       match=r'"kernel" in "/Dense_0".*shape \(5, 3\).*shape \(4, 3\)'):
        _Two().apply(_vars(), np.ones((2, 5), np.float32))


def test_error_apply_without_params():
    with pytest.raises(nn.errors.ScopeCollectionNotFound,
                       match=r'"kernel" from collection "params" in "/Dense_0" but the '
                             r'collection is empty\. Pass the variables returned by init'):
        _Two().apply({}, X)
    with pytest.raises(nn.errors.ApplyScopeInvalidVariablesStructureError,
                       match="extra params layer"):
        _Two().apply({"params": _vars()}, X)
    with pytest.raises(nn.errors.ApplyScopeInvalidVariablesTypeError):
        _Two().apply([1], X)


def test_repr_as_flax():
    assert repr(XM["Block"](4)) == repr(FM["Block"](4))     # fields by name, one a line
    assert repr(nn.Dense(3, use_bias=False)) == repr(fnn.Dense(3, use_bias=False))
    assert repr(nn.Module()).startswith("<xform.nn._module.Module object at")   # as Flax's
    xm, fm = XM["Nested"](), FM["Nested"]()
    xb, fb = xm.bind(xm.init(keys(0)[0], X)), fm.bind(fm.init(keys(0)[1], X))
    xb(X), fb(X)                                              # children once bound
    assert repr(xb) == repr(fb) and "# children" in repr(xb)


def test_error_invalid_method():
    with pytest.raises(nn.errors.ApplyModuleInvalidMethodError,
                       match=r"is not a valid function for apply\(\)"):
        _Two().apply(_vars(), X, method=lambda: None)


def test_error_submodule_outside_init_apply():
    with pytest.raises(nn.errors.CallCompactUnboundModuleError,
                       match=r"unbound modules \(Dense\).*module\.init\(key, x\)"):
        nn.Dense(3)(X)
    with pytest.raises(nn.errors.UnboundSubmoduleError,
                       match=r'"layers" is defined in \'\.setup\(\)\'.*inside \'init\''):
        XM["WithSetup"]().layers
    with pytest.raises(nn.errors.AssignSubModuleError, match="Submodule Dense must be "
                                                             "defined in `setup\\(\\)`"):
        nn.Dense(2, parent=_Two().bind(_vars()))   # bound, but not in setup/compact


def test_error_writing_immutable_collection():
    bn = nn.BatchNorm(use_running_average=False)
    v = bn.init(keys(0)[0], X)
    with pytest.raises(nn.errors.ModifyScopeVariableError,
                       match=r'update variable "mean" in "/" because collection '
                             r'"batch_stats" is immutable\. Pass mutable=\["batch_stats"\]'):
        bn.apply(v, X)


def test_error_name_in_use_and_missing_stream():
    class Dup(nn.Module):
        @nn.compact
        def __call__(self, x):
            nn.Dense(3, name="a")(x)
            return nn.Dense(3, name="a")(x)

    with pytest.raises(nn.errors.NameInUseError,
                       match='Could not create submodule "a" in Module Dup: Name in use'):
        Dup().init(keys(0)[0], X)

    class Noisy(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x + xform.random.normal(self.make_rng("noise"), x.shape)

    with pytest.raises(nn.errors.InvalidRngError,
                       match=r'/ needs PRNG for "noise": pass it to init/apply, e\.g\. '
                             r'rngs=\{"noise": key\}'):
        Noisy().apply({}, X)


def test_tabulate_paths_shapes_counts_flops():
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(5)(x)
            x = nn.BatchNorm(use_running_average=False)(x)
            return nn.Dense(2, name="out")(x)

    plain = {"force_terminal": False, "width": 200}   # rich's text without colours
    table = Net().tabulate(keys(0)[0], X, compute_flops=True, console_kwargs=plain)
    lines = table.splitlines()
    row = next(line for line in lines if line.startswith("│ Dense_0 "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    # path, module, inputs, outputs, flops (2*2*4*5 matmul + 10 bias adds), ...
    assert cells[:5] == ["Dense_0", "Dense", "float32[2,4]", "float32[2,5]", "90"]
    assert "bias: float32[5]" in table and "kernel: float32[4,5]" in table
    assert "mean: float32[5]" in table and "25 (100 B)" in table
    assert "│ out " in table and "BatchNorm_0" in table
    assert "Total Parameters: 57 (228 B)" in table      # 47 params + 10 batch_stats
    shallow = nn.tabulate(Net(), keys(0)[0], depth=0, console_kwargs=plain)(X)
    assert "Dense_0" not in shallow and "flops" not in shallow


def test_functional_init_apply_inheritance_kw_only():
    class Base(nn.Module):
        features: int

        @nn.compact
        def __call__(self, x):
            return nn.Dense(self.features)(x) * self.scale()

        def scale(self):
            return 1.0

    class Child(Base):
        factor: float = 3.0

        def scale(self):
            return self.factor

    class KW(nn.Module, kw_only=True):
        a: int = 1
        b: int

    xk, _ = keys(8)
    m = Child(2)
    v = nn.init(lambda mdl, x: mdl(x), m)(xk, X)
    assert_trees(v, m.init(xk, X))
    out = nn.apply(lambda mdl, x: mdl(x), m)(v, X)
    np.testing.assert_allclose(out, 3.0 * Base(2).apply(v, X), rtol=1e-6)
    assert KW(b=2).a == 1
    with pytest.raises(TypeError):
        KW(1, 2)
    assert nn.initializers.zeros_init()(None, (2,)).shape == (2,)


def test_docstring_examples_run():
    import doctest
    import importlib
    for name in ["_module", "_linear", "_normalization", "_stochastic", "_transforms",
                 "_summary", "_meta", "_control", "initializers"]:
        mod = importlib.import_module(f"xform.nn.{name}")
        result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, (name, result)


def test_perturb_gives_intermediate_gradients_like_flax():
    def model(lib):
        class M(lib.Module):
            @lib.compact
            def __call__(self, x):
                h = self.perturb("h", lib.Dense(3)(x))
                return lib.Dense(1)(lib.relu(h))
        return M()

    xm, fm = model(nn), model(fnn)
    xk, fk = keys(9)
    v, fv = xm.init(xk, X), fm.init(fk, X)
    assert_trees(v, fv)
    g = xform.grad(lambda p: jnp.sum(xm.apply({"params": v["params"],
                                               "perturbations": p}, X)))(v["perturbations"])
    fg = jax.grad(lambda p: jjnp.sum(fm.apply({"params": fv["params"],
                                               "perturbations": p}, X)))(fv["perturbations"])
    assert_trees(g, fg, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(xm.apply({"params": v["params"]}, X),
                                  fm.apply({"params": fv["params"]}, X))
