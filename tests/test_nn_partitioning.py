"""Flax's partitioning API (``nn.with_partitioning``, logical axis rules, ``nn.spmd``)
vs flax.linen at run time: the same models give the same boxed trees, partition specs,
shardings and errors."""
import functools

import numpy as np
import pytest

import flax
import flax.linen as fnn
import jax
import jax.numpy as fjnp

import xform
import xform.nn as xnn
import xform.numpy as xjnp
from nn_oracle import keys, same_leaves

LIBS = {"x": (xform, xnn, xjnp), "f": (jax, fnn, fjnp)}
RULES = (("batch", "data"), ("embed", None), ("mlp", "model"), ("heads", "model"),
         ("kv", None), ("layers", None), ("vocab", ("data", "model")))


def _specs(tree, lib):
    """A tree of PartitionSpecs (either library's) as plain nested dicts of tuples."""
    jx = LIBS[lib][0]
    spec_t = type(jx.sharding.PartitionSpec())
    return jx.tree_util.tree_map(lambda s: None if s is None else tuple(s), tree,
                                 is_leaf=lambda s: isinstance(s, spec_t) or s is None)


def _model(jx, nn, jnp):
    """An MLP block scanned over 2 layers, with mesh-named and logical-named params."""
    ki = nn.initializers.lecun_normal()

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            h = nn.Dense(8, kernel_init=nn.with_logical_partitioning(ki, ("embed", "mlp")),
                         bias_init=nn.with_logical_partitioning(
                             nn.initializers.zeros, ("mlp",)))(x)
            h = nn.with_logical_constraint(nn.relu(h), ("batch", "mlp"))
            y = nn.Dense(4, kernel_init=nn.with_partitioning(ki, ("model", None)))(h)
            return x + y, None

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Embed(16, 4, embedding_init=nn.with_logical_partitioning(
                nn.initializers.normal(1.0), ("vocab", "embed")))(x)
            x, _ = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                           length=2, metadata_params={nn.PARTITION_NAME: "layers"})()(x, None)
            return nn.LayerNorm()(x)
    return Net()


def test_model_boxes_specs_and_apply_match_flax():
    tokens = np.arange(6, dtype=np.int32).reshape(2, 3)
    res = {}
    for (lib, (jx, nn, jnp)), key in zip(LIBS.items(), keys(0)):
        model = _model(jx, nn, jnp)
        with nn.logical_axis_rules(RULES):
            v = jx.jit(model.init)(key, tokens)
            abstract = jx.eval_shape(model.init, key, tokens)
            y = jx.jit(model.apply)(v, tokens)   # boxed variables are unboxed on apply
        spec = nn.get_partition_spec(v)
        assert _specs(nn.get_partition_spec(abstract), lib) == _specs(spec, lib)
        boxes = jx.tree_util.tree_leaves(v, is_leaf=lambda b: isinstance(b, nn.Partitioned))
        res[lib] = dict(
            values=nn.unbox(v), y=y, spec=_specs(spec, lib),
            mesh_spec=_specs(nn.logical_to_mesh(spec, RULES), lib),
            kinds=[type(b).__name__ if isinstance(b, nn.Partitioned) else "-" for b in boxes],
            paths=[jx.tree_util.keystr(p) for p, _ in jx.tree_util.tree_leaves_with_path(v)])
    same_leaves(res["x"]["values"], res["f"]["values"], 0.0)
    same_leaves(res["x"]["y"], res["f"]["y"], 1e-5)
    for k in ("spec", "mesh_spec", "kinds", "paths"):
        assert res["x"][k] == res["f"][k], k
    assert res["x"]["mesh_spec"]["params"]["ScanBlock_0"]["Dense_0"]["kernel"] == (
        None, None, "model")


@pytest.mark.parametrize("names, rules", [
    (("batch", "length", "heads", "features"),
     (("batch", "X"), ("features", "X"), ("heads", "Y"), ("batch", "Z"))),
    (("vocab", "mlp"), RULES),                 # ('data','model') then mlp finds model used
    (("mlp", "vocab"), RULES),
    ((None, "embed", "unknown"), RULES),
    (("a", "b"), (("a", ("x", "y")), ("b", "x"), ("b", "z"))),
    (None, RULES),
])
def test_logical_to_mesh_axes_matches_flax(names, rules):
    ours = xnn.logical_to_mesh_axes(names, rules)
    theirs = fnn.logical_to_mesh_axes(names, rules)
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert isinstance(ours, xform.sharding.PartitionSpec)
        assert tuple(ours) == tuple(theirs)


def test_rules_context_and_errors_match_flax():
    for nn in (xnn, fnn):
        assert nn.get_logical_axis_rules() == ()
        with nn.logical_axis_rules(RULES):
            assert nn.get_logical_axis_rules() == RULES
            assert tuple(nn.logical_to_mesh_axes(("mlp",))) == ("model",)
        assert nn.get_logical_axis_rules() == ()
        nn.set_logical_axis_rules(RULES)
        try:
            assert nn.get_logical_axis_rules() == RULES
        finally:
            nn.set_logical_axis_rules(())
        with pytest.raises(ValueError, match=r"Dimensions \('a',\) occur more than once"):
            nn.logical_to_mesh_axes(("a", "a"), RULES)
        with pytest.raises(ValueError, match="Unknown axis rule specification type"):
            nn.logical_to_mesh_axes(("a",), {"a": "x"})
        x = fjnp.ones(2) if nn is fnn else xjnp.ones(2)
        # without a mesh the constraint is a no-op; an unmatched name still raises
        assert nn.with_logical_constraint(x, ("mlp",), rules=RULES) is x
        with pytest.raises(ValueError, match="did not match a rule"):
            nn.with_logical_constraint(x, ("nope",), rules=RULES,
                                       fallback=nn.spmd.RulesFallback.RAISE_ERROR)


def test_sharding_trees_and_boxes_match_flax():
    res = {}
    for lib, (jx, nn, jnp) in LIBS.items():
        mesh = jx.sharding.Mesh(np.array(jx.devices()[:8]).reshape(4, 2), ("data", "model"))
        tree = {"w": nn.Partitioned(jnp.ones((4, 2)), ("data", "model")),
                "l": nn.LogicallyPartitioned(jnp.ones(4), ("mlp",), rules=RULES),
                "b": jnp.ones(3), "n": None, "s": 1.0}
        shard = nn.get_sharding({k: v for k, v in tree.items() if k != "l"}, mesh)
        with pytest.raises(ValueError, match="mlp"):   # logical names are not mesh axes
            nn.get_sharding(tree, mesh)
        logical = nn.logical_to_mesh_sharding(nn.get_partition_spec(tree), mesh, RULES)
        assert all(isinstance(s, jx.sharding.NamedSharding) and s.mesh == mesh
                   for s in jx.tree_util.tree_leaves(logical))
        res[lib] = (
            {k: None if s is None else tuple(s.spec) for k, s in shard.items()},
            {k: None if s is None else tuple(s.spec) for k, s in logical.items()},
            nn.get_partition_spec(tree)["s"],
            nn.LogicallyPartitioned(1, ("a",)) == nn.LogicallyPartitioned(1, ("b",)),
            nn.meta.unbox(tree)["w"].shape,
            nn.meta.replace_boxed(tree, {**nn.unbox(tree), "s": 2.0})["w"].names,
            type(tree["w"].replace_boxed(jnp.zeros(1))).__name__,
            tree["w"].add_axis(0, {nn.PARTITION_NAME: "layers"}).names,
            nn.meta.global_mesh_defined())
        errors = xnn.errors if lib == "x" else flax.errors
        with pytest.raises(errors.PartitioningUnspecifiedError, match="Partitioned variable"):
            tree["w"].add_axis(0, {})
    assert res["x"] == res["f"]


def test_with_partitioning_keeps_initializer_and_names():
    init = xnn.with_partitioning(xnn.initializers.ones, ("a", None))
    assert init.__name__ == xnn.initializers.ones.__name__
    box = init(xform.random.PRNGKey(0), (2, 3))
    assert isinstance(box, xnn.Partitioned) and box.names == ("a", None)
    assert tuple(box.get_partition_spec()) == ("a", None)
    leaves, treedef = xform.tree_util.tree_flatten(box)
    assert len(leaves) == 1 and xform.tree_util.tree_unflatten(treedef, leaves).names == (
        "a", None)
    logical = functools.partial(xnn.with_logical_partitioning, rules=RULES)(
        xnn.initializers.zeros, ("mlp",))(xform.random.PRNGKey(0), (2,))
    assert logical.rules == RULES and isinstance(logical, xnn.Partitioned)


def test_doctests():
    import doctest
    from xform.nn import _meta, _spmd
    for mod in (_meta, _spmd):
        r = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert r.attempted and not r.failed, mod.__name__


def _mlp(nn):
    ki = nn.initializers.lecun_normal()

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(8, kernel_init=nn.with_logical_partitioning(ki, ("embed", "mlp")))(x)
            h = nn.with_logical_constraint(nn.relu(h), ("batch", "mlp"))
            return nn.Dense(4, kernel_init=nn.with_partitioning(ki, ("model", None)))(h)
    return MLP()


def _layout(tree, jx):
    """Per leaf: the spec and every device's (id, shard index, shard shape), as plain data."""
    def one(a):
        shards = sorted((s.device.id, str(s.index), s.data.shape) for s in a.addressable_shards)
        return tuple(a.sharding.spec), shards
    return jx.tree_util.tree_map(one, tree)


def test_sharded_init_apply_and_unbox_constraint_match_flax():
    """jit(init, out_shardings=logical_to_mesh_sharding(...) or get_sharding(...)) makes
    the params already sharded; apply under the mesh and rules; Partitioned.unbox under
    set_mesh constrains the value: the same layouts (spec, per-device index and shape)
    as Flax on JAX."""
    res = {}
    for (lib, (jx, nn, jnp)), key in zip(LIBS.items(), keys(0)):
        mesh = jx.make_mesh((4, 2), ("data", "model"),
                            axis_types=(jx.sharding.AxisType.Auto,) * 2)
        rules = (("batch", "data"), ("mlp", "model"), ("embed", None))
        model, x = _mlp(nn), jnp.ones((8, 4))
        specs = nn.get_partition_spec(jx.eval_shape(model.init, key, x))
        shardings = nn.logical_to_mesh_sharding(specs, mesh, rules)
        with nn.logical_axis_rules(rules):
            v = jx.jit(model.init, out_shardings=shardings)(key, x)
            with jx.set_mesh(mesh):
                y = jx.jit(model.apply)(v, x)
                boxed = {"w": nn.Partitioned(jnp.ones((4, 8)), (None, "model"))}
                unboxed = jx.jit(nn.unbox)(boxed)
            dense = nn.Dense(8, kernel_init=nn.with_partitioning(
                nn.initializers.lecun_normal(), (None, "model")))
            mesh_named = jx.jit(dense.init, out_shardings=nn.get_sharding(
                jx.eval_shape(dense.init, key, x), mesh))(key, x)
        res[lib] = (_layout(nn.unbox(v), jx), _layout(unboxed, jx),
                    _layout(nn.unbox(mesh_named), jx), nn.unbox(v), y)
    assert res["x"][:3] == res["f"][:3]
    assert res["x"][2]["params"]["kernel"][0] == (None, "model")
    assert res["x"][0]["params"]["Dense_0"]["kernel"][0] == (None, "model")
    assert res["x"][1]["w"][0] == (None, "model")
    same_leaves(res["x"][3], res["f"][3], 0.0)
    same_leaves(res["x"][4], res["f"][4], 1e-5)


def _legacy_model(nn, part):
    """T5X-style: param_with_axes/variable_with_axes, scan_with_axes, vmap_with_axes."""
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            w = part.param_with_axes("w", nn.initializers.lecun_normal(), (4, 8),
                                     axes=("embed", "mlp"))
            count = part.variable_with_axes("stats", "count", lambda: fjnp.zeros(8)
                                            if nn is fnn else xjnp.zeros(8), axes=("mlp",))
            h = part.with_sharding_constraint(x @ w, ("batch", "mlp"))
            if self.is_mutable_collection("stats"):
                count.value = count.value + h.sum(0)
            return x + h @ w.T, None

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x, _ = part.scan_with_axes(Block, variable_axes={"params": 0, "stats": 0},
                                       split_rngs={"params": True}, length=2,
                                       axes_collections=("params", "stats"))()(x, None)
            dense = part.vmap_with_axes(
                nn.Dense, variable_axes={"params": 0}, split_rngs={"params": True},
                in_axes=0, partitioning_axis_names={"params": "heads"})
            return dense(4)(x.reshape(2, 2, 4))
    return Net()


def test_legacy_partitioning_module_matches_flax():
    import flax.linen.partitioning as fpart
    import xform.nn.partitioning as xpart
    res = {}
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    for (lib, (jx, nn, jnp)), part, key in zip(LIBS.items(), (xpart, fpart), keys(0)):
        model = _legacy_model(nn, part)
        with part.axis_rules(RULES):
            v = jx.jit(functools.partial(model.init))(key, x)
            y, upd = jx.jit(functools.partial(model.apply, mutable=["stats"]))(v, x)
        names = {c: part.get_axis_names(v[c]) for c in ("params_axes", "stats_axes")}
        res[lib] = ({k: v[k] for k in ("params", "stats")}, y, upd,
                    jx.tree_util.tree_map(tuple, names, is_leaf=lambda s: isinstance(
                        s, type(jx.sharding.PartitionSpec()))))
    same_leaves(res["x"][0], res["f"][0], 0.0)
    same_leaves(res["x"][1:3], res["f"][1:3], 1e-5)
    assert res["x"][3] == res["f"][3]
    block = "Map_variablesMap_variablesScanBlock_0"   # (Flax's name for it too)
    assert res["x"][3]["params_axes"][block]["w"] == ("layers", "embed", "mlp")
    with pytest.raises(ValueError, match="inside a Module method"):
        xpart.param_with_axes("w", xnn.initializers.zeros, (2,), axes=("a",))


@pytest.mark.parametrize("explicit", [False, True])
def test_vmap_spmd_axis_name_matches_flax(explicit):
    """nn.vmap's ``spmd_axis_name`` splits the mapped axis of a sharding constraint
    inside (auto mesh), and in explicit mode the split dropout keys follow the batch:
    the same values and output layout as Flax."""
    res = {}
    for (lib, (jx, nn, jnp)), key in zip(LIBS.items(), keys(0)):
        kind = jx.sharding.AxisType.Explicit if explicit else jx.sharding.AxisType.Auto
        mesh = jx.make_mesh((4, 2), ("x", "y"), axis_types=(kind,) * 2)
        P = jx.sharding.PartitionSpec

        class Inner(nn.Module):
            @nn.compact
            def __call__(self, x):
                y = nn.Dense(4)(x)
                y = y if explicit else jx.lax.with_sharding_constraint(y, P("x"))
                return nn.Dropout(0.5, deterministic=False)(y)
        V = nn.vmap(Inner, variable_axes={"params": 0}, in_axes=0, spmd_axis_name="y",
                    split_rngs={"params": True, "dropout": True})
        x = jnp.linspace(-1.0, 1.0, 48).reshape(2, 8, 3)
        with jx.set_mesh(mesh):
            x = jx.device_put(x, P("y")) if explicit else x
            y, v = jx.jit(lambda k, x: V().init_with_output(
                {"params": k, "dropout": k}, x))(key, x)
        res[lib] = (_layout(y, jx), y, v)
    assert res["x"][0] == res["f"][0]
    same_leaves(res["x"][1:], res["f"][1:], 1e-6)
