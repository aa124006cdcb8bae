"""xform.nn.traverse_util and xform.nn.config against flax.traverse_util / flax.config:
the same flattened dicts, traversals and errors; the same flags, defaults and texts,
and the flags xform.nn implements change variables and names as they do in Flax."""
import collections
import dataclasses
import doctest
import warnings

import flax
import flax.linen as fnn
import flax.traverse_util as ftu
from flax import configurations as fconf
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import xform
import xform.nn as nn
import xform.numpy as jnp
from xform.nn import configurations, core, traverse_util as tu

TREE = {"enc": {"Dense_0": {"kernel": 1, "bias": 2}, "empty": {}},
        "dec": {"w": 3}, "top": 4}


def test_flatten_unflatten_and_path_aware_map_match_flax():
    for kw in ({}, {"keep_empty_nodes": True}, {"sep": "/"},
               {"is_leaf": lambda path, x: "Dense_0" in path}):
        for tree in (TREE, core.freeze(TREE)):
            fx = tu.flatten_dict(tree, **kw)
            fj = ftu.flatten_dict(flax.core.freeze(TREE) if tree is not TREE else TREE, **kw)
            assert repr(fx) == repr(fj), kw
            sep = kw.get("sep")
            flat_x = {k: ({} if v is tu.empty_node else v) for k, v in fx.items()}
            flat_j = {k: ({} if v is ftu.empty_node else v) for k, v in fj.items()}
            assert tu.unflatten_dict(fx, sep=sep) == ftu.unflatten_dict(fj, sep=sep)
            assert flat_x == flat_j
    f = lambda path, x: -x if "w" in path else path  # noqa: E731
    assert tu.path_aware_map(f, TREE) == ftu.path_aware_map(f, TREE)
    assert tu.flatten_dict({}, keep_empty_nodes=True) == {}
    for mod, bad in ((tu, tu.flatten_dict), (ftu, ftu.flatten_dict)):
        with pytest.raises(AssertionError, match="expected \\(frozen\\)dict; got <class 'list'>"):
            bad([])


@dataclasses.dataclass
class Foo:
    foo: int = 0
    bar: int = 0


def test_traversals_match_flax():
    P = collections.namedtuple("P", "a b")
    data = {"xs": [Foo(1, 2), Foo(3, 4)], "t": (1, 2, 3), "p": P(5, [6, 7])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for lib in (tu, ftu):
            t = lib.t_identity
            travs = [t["xs"].each().foo, t["t"][1:], t["p"].b.each(),
                     t["xs"][0].merge(lib.TraverseAttr("foo"), lib.TraverseAttr("bar")),
                     t["t"].each().filter(lambda x: x % 2), t["p"].tree()]
            got = [(list(tr.iterate(data)), tr.update(lambda x: x * 10, data))
                   for tr in travs]
            got.append(t["t"].each().set([7, 8, 9], data))
            mpt = lib.ModelParamTraversal(lambda path, _: "bias" not in path)
            got.append((list(mpt.iterate(TREE)), mpt.update(lambda x: -x, TREE),
                        mpt.update(lambda x: -x, core.freeze(TREE) if lib is tu
                                   else flax.core.freeze(TREE)).unfreeze()))
            errs = []
            for bad in (lambda: t["t"].each().set([1], data),
                        lambda: t["t"].each().set([1, 2, 3, 4], data),
                        lambda: t["xs"][0].each().update(lambda x: x, data),
                        lambda: mpt.update(lambda x: x, [1])):
                with pytest.raises(ValueError) as e:
                    bad()
                errs.append(str(e.value))
            if lib is tu:
                ours, our_errs = got, errs
        assert repr(ours) == repr(got)
        assert our_errs == errs
    with pytest.warns(DeprecationWarning, match="`flax.traverse_util.Traversal` will be"):
        tu.TraverseEach()


def test_config_flags_match_flax():
    fc, xc = flax.config, nn.config
    assert xc._values == fc._values
    assert repr(xc) == repr(fc)
    for lib, cfg in ((configurations, xc), (fconf, fc)):
        with pytest.raises(LookupError, match="Unrecognized config option: flax_nope"):
            cfg.update("flax_nope", 1)
        with pytest.raises(TypeError, match="bool\\(\\) not supported"):
            bool(lib.flax_fix_rng)
    assert configurations.flax_fix_rng.__name__ == fconf.flax_fix_rng.__name__
    with xc.temp_flip_flag("return_frozendict", True):
        assert xc.flax_return_frozendict and configurations.flax_return_frozendict.value
    assert not xc.flax_return_frozendict


class _Inner(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, name="named")(x) + nn.Dense(2)(x)


class _FInner(fnn.Module):
    @fnn.compact
    def __call__(self, x):
        return fnn.Dense(2, name="named")(x) + fnn.Dense(2)(x)


def _outer(lib):
    m, inner = (nn, _Inner) if lib == "xform" else (fnn, _FInner)

    class Outer(m.Module):
        child: m.Module

        @m.compact
        def __call__(self, x):
            return self.child(x)
    return Outer(child=inner(name="given"))


def _init(lib, flags):
    xs = np.ones((1, 3), np.float32)
    mod, cfg = (xform, nn.config) if lib == "xform" else (jax, flax.config)
    old = {k: getattr(cfg, k) for k in flags}
    try:
        for k, v in flags.items():
            cfg.update(k, v)
        return _outer(lib).init(mod.random.PRNGKey(0), mod.numpy.asarray(xs))
    finally:
        for k in flags:
            cfg.update(k, old[k])


def test_flags_take_effect_as_in_flax():
    leaves = {}
    for flags in ({}, {"flax_fix_rng_separator": True},
                  {"flax_preserve_adopted_names": True, "flax_return_frozendict": True}):
        vx, vj = _init("xform", flags), _init("jax", flags)
        assert isinstance(vx, core.FrozenDict) == isinstance(vj, flax.core.FrozenDict)
        lx = xform.tree_util.tree_leaves_with_path(vx)
        lj = jax.tree_util.tree_leaves_with_path(vj)
        assert [xform.tree_util.keystr(p) for p, _ in lx] == \
            [jax.tree_util.keystr(p) for p, _ in lj]
        for (_, a), (_, b) in zip(lx, lj):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        leaves[tuple(flags)] = lx
    # each flag changed something (else the comparisons above could not fail)
    default, fix, names = leaves.values()
    assert [p for p, _ in fix] == [p for p, _ in default]
    assert not np.array_equal(np.asarray(fix[1][1]), np.asarray(default[1][1]))
    assert [p for p, _ in names] != [p for p, _ in default]


def test_doctests():
    for mod in (tu, configurations):
        with warnings.catch_warnings():   # the finder's getattr probes build Traversals
            warnings.simplefilter("ignore", DeprecationWarning)
            r = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert r.attempted and not r.failed, mod.__name__
