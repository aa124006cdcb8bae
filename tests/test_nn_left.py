"""flax.cursor and flax.typing as ``xform.nn.cursor`` / ``xform.nn.typing``, and the
linen errors the API sweep found missing, against Flax at run time: the same edits of
nested containers (FrozenDict, dict, list, tuple, namedtuple, dataclass) give the same
objects, paths, reprs and errors; misuses raise Flax's error classes and messages."""
import collections
import dataclasses

import flax.core as fcore
import flax.cursor as fcursor
import flax.errors as ferrors
import flax.linen as fnn
import flax.typing as ftyping
import jax
import numpy as np
import pytest

import xform
import xform.nn as xnn
from xform.nn import core as xcore, cursor as xcursor, errors as xerrors, typing as xtyping

NT = collections.namedtuple("NT", "a b")


@dataclasses.dataclass(frozen=True)
class DC:
    x: object
    y: int = 2


def _data(core):
    return {"params": core.freeze({"Dense_0": {"kernel": 1, "bias": 2},
                                   "Dense_1": {"kernel": 3}}),
            "opt": [NT(1, (2, 3)), DC([4, 5])], "t": (6, {"u": 7})}


def _edits(C, core):
    d, out = _data(core), []
    out.append(C.cursor(d)["params"]["Dense_0"]["kernel"].set(10))
    c = C.cursor(d)
    c["opt"][0].a = 11
    c["opt"][0][1] = 12
    c["opt"][1].x[0] = 13
    c["t"][1]["u"] = 14
    out += [c.build(), repr(C.cursor(d)["t"][1])]
    out.append(C.cursor(d).apply_update(
        lambda p, v: v * 100 if p.endswith("kernel") else v).build())
    out.append([x._path for x in C.cursor(d).find_all(
        lambda p, v: isinstance(v, int) and v > 3)])
    out.append(C.cursor(d).find(lambda p, v: p.endswith("Dense_1"))._path)
    c = C.cursor([1, {"a": 2}])
    c[1]["a"] = 5
    out += [repr(c), [list(map(str, C.cursor([1, 2]))), C.cursor(3) + 1, 2 - C.cursor(3),
                      C.cursor(3) == 3, -C.cursor(2), round(C.cursor(2.567), 1)]]
    out.append(d == _data(core))   # the original is untouched
    return [str(o).replace("FrozenDict", "") for o in out]


def test_cursor_edits_match_flax():
    assert _edits(xcursor, xcore) == _edits(fcursor, fcore)


@pytest.mark.parametrize("case", ["none_found", "two_found", "index", "key", "attr",
                                  "traverse"])
def test_cursor_errors_match_flax(case):
    def run(C, core, E):
        d = _data(core)
        calls = {"none_found": lambda: C.cursor(d).find(lambda p, v: False),
                 "two_found": lambda: C.cursor(d).find(
                     lambda p, v: p.startswith("params/Dense")),
                 "index": lambda: C.cursor(3)[0], "key": lambda: C.cursor({"a": 1})["b"],
                 "attr": lambda: C.cursor(d).nope,
                 "traverse": lambda: list(C._traverse_tree((), d))}
        with pytest.raises(Exception) as info:
            calls[case]()
        return type(info.value).__name__, str(info.value).split(" (https://")[0]
    ours, theirs = run(xcursor, xcore, xerrors), run(fcursor, fcore, ferrors)
    assert ours[0] == theirs[0]
    if case != "traverse":   # (Flax's message there says "must be None" for "not None")
        assert ours == theirs


def test_typing_helpers_match_flax():
    tree = {"a": np.ones((3, 4), np.float32), "b": [np.zeros(2, np.int8), 1.0]}
    assert repr(xtyping.SizeBytes.from_any(tree)) == repr(ftyping.SizeBytes.from_any(tree))
    big = xtyping.SizeBytes(10**7, 4 * 10**7)
    assert repr(big) == repr(ftyping.SizeBytes(10**7, 4 * 10**7)) and bool(big)
    assert xtyping.In(0) == xcore.lift.In(0) and isinstance(xtyping.MISSING, xtyping.Missing)
    assert [xtyping.is_key_like(k) for k in ("a", 1, None)] == [
        ftyping.is_key_like(k) for k in ("a", 1, None)]


def _module_error(nn, L, case):
    """The error ``case`` raises in linen code, as ``(class name, message)``."""
    def reserved():
        class M(nn.Module):
            parent: int = 1

    def post_init():
        class M(nn.Module):
            def __post_init__(self):
                pass

            def __call__(self, x):
                return x
        M().init(L.random.PRNGKey(0), 1.0)

    def returns_module():
        class M(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)
        nn.vmap(M, variable_axes={"params": 0}, split_rngs={"params": True})().init(
            L.random.PRNGKey(0), L.numpy.ones((2, 3)))

    def share_unbound():
        nn.share_scope(nn.Dense(2), nn.Dense(3))

    def bad_property():
        class M(nn.Module):
            @property
            def d(self):
                return self.missing

            @nn.compact
            def __call__(self, x):
                return self.d
        M().init(L.random.PRNGKey(0), 1.0)
    def lazy_init_reads_value():   # a variable made from the input's value
        class M(nn.Module):
            @nn.compact
            def __call__(self, x):
                self.variable("stats", "mean", lambda: x.mean(0))
                return nn.Dense(2)(x)
        M().lazy_init(L.random.PRNGKey(0), L.ShapeDtypeStruct((8, 4), np.float32))
    calls = {"bad_property": bad_property, "reserved": reserved, "post_init": post_init, "target": lambda: nn.vmap(3),
             "returns_module": returns_module, "share_unbound": share_unbound,
             "lazy_init": lazy_init_reads_value}
    with pytest.raises(Exception) as info:
        calls[case]()
    return type(info.value).__name__, str(info.value).split(" (https://")[0]


@pytest.mark.parametrize("case", ["reserved", "post_init", "target", "returns_module",
                                  "share_unbound", "bad_property", "lazy_init"])
def test_module_errors_match_flax(case):
    assert _module_error(xnn, xform, case) == _module_error(fnn, jax, case)


def test_batch_apply_helpers_and_flip_sequences_match_flax():
    def run(nn, L):
        x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
        ba, flip = nn.batch_apply, nn.recurrent.flip_sequences
        merged = ba.merge_leading_dims(x, 2)
        return (merged, ba.split_leading_dim(merged, (2, 3)), ba.merge_leading_dims(x, 4),
                ba.ndim_at_least(x, 3), ba.arbitrary_mergeable_leaf(2, (1.0,), {"a": x}),
                ba.arbitrary_mergeable_leaf(4, (x,), {}),
                *L.jit(lambda x, n: (flip(x, n, 1, False), flip(x, None, 1, True)))(
                    x, np.array([1, 3])))
    for a, b in zip(run(xnn, xform), run(fnn, jax)):
        if b is None or isinstance(b, bool):
            assert a == b
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
