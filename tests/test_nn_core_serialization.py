"""xform.nn.serialization and xform.nn.core against flax.serialization / flax.core:
byte-identical msgpack both ways (params of several dtypes, optimizer states, TrainState,
chunked arrays), the same state dicts and error texts, FrozenDict's text and semantics."""
import collections
import doctest
import pickle

import flax.core as fcore
import flax.serialization as fser
import flax.struct as fstruct
import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import optax as ox
import pytest
from flax.training import train_state as flax_ts

import xform
import xform.numpy as jnp
import xform.optim as optim
from xform.nn import core, serialization as ser
from xform.nn.core import frozen_dict
from xform.training import struct
from xform.training.train_state import TrainState

_r = np.random.RandomState(0)
PARAMS = {  # NumPy leaves; each library gets its own device arrays of them
    "dense": {"kernel": _r.randn(3, 2).astype(np.float32),
              "bias": _r.randn(2).astype(ml_dtypes.bfloat16)},
    "embed": _r.randint(-5, 5, (4,)).astype(np.int32),
    "mask": np.array([True, False, True]),
    "phase": (_r.randn(2) + 1j * _r.randn(2)).astype(np.complex64),
}
EXTRAS = {"step": 7, "lr": 0.5, "z": 1 + 2j, "scalar": np.float32(2.5), "none": None,
          "name": "run", "list": [1, 2.0, np.int32(3)], "tuple": (np.ones(2), "a")}
Point = collections.namedtuple("Point", "x y")


def _device(tree, lib):
    conv = jjnp.asarray if lib == "jax" else jnp.asarray
    return (jax if lib == "jax" else xform).tree_util.tree_map(conv, tree)


def _adam_state(lib):
    floats = {"dense": PARAMS["dense"]}
    tx = ox.adam(0.1) if lib == "jax" else optim.adam(0.1)
    return tx.init(_device(floats, lib))


def _assert_same(a, b):
    """Same structure, leaf types, dtypes and values (read through Flax's encoder)."""
    assert fser.to_bytes(a) == fser.to_bytes(b)
    assert [type(x) for x in jax.tree_util.tree_leaves(a)] == \
        [type(x) for x in jax.tree_util.tree_leaves(b)]


def test_bytes_identical_and_restore_both_ways():
    def tree(lib):
        return {"params": PARAMS if lib is None else _device(PARAMS, lib), "extras": EXTRAS,
                "point": Point(np.arange(3), [4, 5])}
    opt_j, opt_x = _adam_state("jax"), _adam_state("xform")
    for name, (tj, tx) in {
            "device": (tree("jax"), tree("xform")),
            "host": (tree(None), tree(None)),
            "opt_state": (opt_j, opt_x)}.items():
        bj, bx = fser.to_bytes(tj), ser.to_bytes(tx)
        assert bj == bx, name
        assert fser.to_state_dict(tj).keys() == ser.to_state_dict(tx).keys()
        # flax's bytes -> xform, xform's bytes -> flax, each against its own template
        _assert_same(ser.from_bytes(tx, bj), fser.from_bytes(tj, bx))
        _assert_same(ser.msgpack_restore(bj), fser.msgpack_restore(bx))
    restored = ser.from_bytes(opt_x, fser.to_bytes(opt_j))
    assert type(restored[0]) is type(opt_x[0])
    assert restored[0]._fields == ("count", "mu", "nu")
    back = ser.from_bytes(tree("xform"), fser.to_bytes(tree("jax")))
    assert back["params"]["dense"]["bias"].dtype == ml_dtypes.bfloat16
    assert back["extras"]["z"] == 1 + 2j and back["extras"]["tuple"][1] == "a"
    assert back["point"] == Point(*back["point"]) and back["extras"]["none"] is None


def test_train_state_and_struct_bytes():
    def make(lib):
        mod, tx = (flax_ts, ox.sgd(0.1, momentum=0.9)) if lib == "jax" else \
            (None, optim.sgd(0.1, momentum=0.9))
        cls = mod.TrainState if lib == "jax" else TrainState
        return cls.create(apply_fn=None, params=_device({"w": PARAMS["dense"]["kernel"]}, lib),
                          tx=tx)
    sj, sx = make("jax"), make("xform")
    sj = sj.replace(step=3)
    assert fser.to_bytes(sj) == ser.to_bytes(sx.replace(step=3))
    back = ser.from_bytes(sx, fser.to_bytes(sj))
    assert isinstance(back, TrainState) and back.step == 3 and back.tx is sx.tx

    @fstruct.dataclass
    class FS:
        a: object
        n: int = fstruct.field(pytree_node=False, default=1)

    @struct.dataclass
    class XS:
        a: object
        n: int = struct.field(pytree_node=False, default=1)
    assert fser.to_state_dict(FS([1, 2])) == ser.to_state_dict(XS([1, 2])) == \
        {"a": {"0": 1, "1": 2}}
    assert ser.from_state_dict(XS([0, 0]), {"a": {"0": 5, "1": 6}}) == XS([5, 6])
    # error texts (path included) as Flax's
    for bad in ({}, {"a": {"0": 1, "1": 2}, "b": 0}):
        with pytest.raises(ValueError) as ej:
            fser.from_state_dict(FS([0, 0]), bad)
        with pytest.raises(ValueError) as ex:
            ser.from_state_dict(XS([0, 0]), bad)
        assert str(ex.value).replace("XS", "FS") == str(ej.value)


def test_chunked_arrays_identical(monkeypatch):
    tree = {"big": np.arange(10, dtype=np.float32).reshape(2, 5),
            "small": np.ones(1, np.float32),
            "nested": {"b": np.arange(7, dtype=np.int32)}}
    monkeypatch.setattr(fser, "MAX_CHUNK_SIZE", 12)
    monkeypatch.setattr(ser, "MAX_CHUNK_SIZE", 12)
    bj, bx = fser.msgpack_serialize(tree), ser.msgpack_serialize(_device(tree, "xform"))
    assert bj == bx and b"__msgpack_chunked_array__" in bx
    back = ser.msgpack_restore(bj)
    _assert_same(back, fser.msgpack_restore(bx))
    np.testing.assert_array_equal(back["big"], tree["big"])
    assert back["big"].dtype == np.float32 and back["nested"]["b"].dtype == np.int32


def test_state_dict_errors_match_flax():
    cases = [({"a": 1, "b": 2}, {"a": 1}), ([1, 2], {"0": 1}),
             ({"p": Point(1, 2)}, {"p": {"x": 1, "z": 2}}),
             ({"p": [0]}, {"p": {"0": 1, "1": 2}})]
    for target, state in cases:
        with pytest.raises(ValueError) as ej:
            fser.from_state_dict(target, state)
        with pytest.raises(ValueError) as ex:
            ser.from_state_dict(target, state)
        assert str(ex.value) == str(ej.value)
    with pytest.raises(ValueError) as ej:
        fser.to_state_dict({1: 0, "1": 1})
    with pytest.raises(ValueError) as ex:
        ser.to_state_dict({1: 0, "1": 1})
    assert str(ex.value) == str(ej.value)
    with pytest.raises(ValueError, match='handler for "dict" is already registered'):
        ser.register_serialization_state(dict, None, None)
    assert ser.current_path() == "" and ser.is_serializable(TrainState)
    with pytest.raises(TypeError, match="cannot be converted to a NumPy array"):
        ser.to_bytes({"key": xform.random.key(0)})   # as Flax: no key-array ext type


FLAT = {"b": {"y": 1, "x": {"q": None, "p": [1, 2]}}, "a": np.float32(3), "e": {},
        "s": "str", 3: (1, 2)}


def test_frozen_dict_matches_flax():
    fj, fx = fcore.freeze(FLAT), core.freeze(FLAT)
    for ns in (4, 2):
        assert fx.pretty_repr(ns) == fj.pretty_repr(ns)
        assert core.pretty_repr(FLAT, ns) == fcore.pretty_repr(FLAT, ns)
    assert repr(fx) == repr(fj) and repr(fx["b"]) == repr(fj["b"])
    assert core.pretty_repr(fx, 2) == fcore.pretty_repr(fj, 2)
    assert core.pretty_repr(5) == fcore.pretty_repr(5) == "5"
    assert repr(fx.keys()) == repr(fj.keys()) and repr(fx.values()) == repr(fj.values())
    assert list(fx.items()) == list(fj.items())
    assert fx == FLAT and fx == core.freeze(dict(reversed(FLAT.items())))
    assert hash(core.freeze({"a": 1})) == hash(fcore.freeze({"a": 1}))
    # pytree: children in sorted key order (xform's and jax's leaves line up)
    simple = {"b": {"y": 1, "x": 2}, "a": 3, "c": {}}
    assert xform.tree_util.tree_leaves(core.freeze(simple)) == \
        jax.tree_util.tree_leaves(fcore.freeze(simple))
    mapped = xform.tree_util.tree_map(lambda v: v * 2, core.freeze(simple))
    assert isinstance(mapped, core.FrozenDict) and list(mapped) == ["a", "b", "c"]
    paths = [xform.tree_util.keystr(p) for p, _ in
             xform.tree_util.tree_leaves_with_path(core.freeze(simple))]
    assert paths == [jax.tree_util.keystr(p) for p, _ in
                     jax.tree_util.tree_leaves_with_path(fcore.freeze(simple))]
    # unfreeze / copy / pop: same values and key order as Flax, originals untouched
    for fn in (lambda m, x: m.unfreeze(x), lambda m, x: m.copy(x, {"z": 0, "a": 9}),
               lambda m, x: m.pop(x, "b")):
        for src in (simple, "frozen"):
            xj = fn(fcore, fcore.freeze(simple) if src == "frozen" else simple)
            xx = fn(core, core.freeze(simple) if src == "frozen" else simple)
            assert repr(xx) == repr(xj)
    assert simple == {"b": {"y": 1, "x": 2}, "a": 3, "c": {}}
    assert type(fx.copy({})) is core.FrozenDict and fx.get("zz", 4) == 4
    assert pickle.loads(pickle.dumps(core.freeze(simple))) == simple
    for mod, f in ((fcore, fj), (core, fx)):
        with pytest.raises(ValueError, match="FrozenDict is immutable."):
            f["a"] = 1
        with pytest.raises(TypeError, match="Expected FrozenDict or dict, got <class 'list'>"):
            mod.copy([], {})
        with pytest.raises(TypeError, match="Expected FrozenDict or dict, got <class 'int'>"):
            mod.pop(3, "a")
    # serialization: a FrozenDict is a dict on the wire
    v = {"params": {"w": np.ones(2, np.float32)}}
    assert ser.to_bytes(core.freeze(v)) == fser.to_bytes(fcore.freeze(v))
    back = ser.from_bytes(core.freeze(v), fser.to_bytes(fcore.freeze(v)))
    assert isinstance(back, core.FrozenDict) and isinstance(back["params"], core.FrozenDict)


def test_frozen_variables_in_apply_and_meta_names():
    import xform.nn as nn
    m = nn.Dense(2)
    v = m.init(xform.random.PRNGKey(0), jnp.ones((1, 3)))
    np.testing.assert_array_equal(m.apply(core.freeze(v), jnp.ones((1, 3))),
                                  m.apply(v, jnp.ones((1, 3))))
    assert core.meta.Partitioned is nn.Partitioned and core.DenyList is nn.DenyList
    assert core.broadcast is nn.broadcast
    boxed = {"w": nn.Partitioned(1, ("a",)), "b": 2}
    assert core.map_axis_meta(lambda b: b.names, boxed) == {"w": ("a",), "b": 2}
    assert core.unbox(boxed) == {"w": 1, "b": 2}


def test_doctests():
    for mod in (ser, frozen_dict):
        r = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert r.attempted and not r.failed, mod.__name__
