"""Tests for xform.core.tree_util, using jax.tree_util as the oracle."""
import collections
import copy
import dataclasses
import functools
import operator

import numpy as np
import pytest
from jax import tree_util as jtu

from xform.core import tree_util as tu

Point = collections.namedtuple("Point", ["x", "y"])
Empty = collections.namedtuple("Empty", [])


class Pair:
    """Custom node registered in both registries without keys."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __repr__(self):   # stable test ids (pytest-xdist workers must agree on them)
        return f"Pair({self.a!r}, {self.b!r})"

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)


class Tagged:
    """Custom node with keys and aux data, registered in both registries."""

    def __init__(self, tag, value):
        self.tag, self.value = tag, value

    def __repr__(self):
        return f"Tagged({self.tag!r}, {self.value!r})"

    def __eq__(self, other):
        return type(other) is Tagged and (self.tag, self.value) == (other.tag, other.value)


for _m in (tu, jtu):
    _m.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    _m.register_pytree_with_keys(
        Tagged, lambda t, m=_m: ([(m.GetAttrKey("value"), t.value)], t.tag),
        lambda tag, c: Tagged(tag, *c))

TREES = [
    1,
    None,
    (),
    [],
    {},
    (None,),
    (1,),
    [1, None, 2],
    (1, (2, 3), [4, (5,)]),
    {"b": 1, "a": [2, None], "c": {"z": (), "y": 3}},
    {1: "x", 0: "y"},
    Point(1, Point(2, None)),
    Empty(),
    collections.OrderedDict([("z", 1), ("a", (2, 3))]),
    collections.defaultdict(list, {"q": 1, "b": [2]}),
    Pair(1, {"k": Pair(None, [2])}),
    Tagged("t", [1, Point(2, 3)]),
    [Tagged("u", None), Pair((), 4)],
    (np.float32(1.5), "str-leaf", b"bytes", 3 + 4j),
]


def _same_value(x, y):
    """Structural equality that also checks container types and dict key order."""
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return list(x) == list(y) and all(_same_value(x[k], y[k]) for k in x)
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(map(_same_value, x, y))
    return x == y


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_flatten_matches_jax(tree):
    leaves, td = tu.tree_flatten(tree)
    jleaves, jtd = jtu.tree_flatten(tree)
    assert leaves == jleaves
    assert tu.tree_leaves(tree) == jleaves
    assert repr(td) == repr(jtd)
    assert (td.num_leaves, td.num_nodes) == (jtd.num_leaves, jtd.num_nodes)
    assert [repr(c) for c in td.children()] == [repr(c) for c in jtd.children()]
    assert tu.treedef_is_leaf(td) == jtu.treedef_is_leaf(jtd)
    assert td == tu.tree_structure(tree) and hash(td) == hash(tu.tree_structure(tree))
    rebuilt = tu.tree_unflatten(td, leaves)
    assert _same_value(rebuilt, jtu.tree_unflatten(jtd, jleaves))
    if isinstance(tree, collections.defaultdict):
        assert rebuilt.default_factory is tree.default_factory


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_paths_and_map_match_jax(tree):
    pairs = [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)]
    assert pairs == [(jtu.keystr(p), x) for p, x in jtu.tree_leaves_with_path(tree)]
    simple = [tu.keystr(p, simple=True, separator="/") for p, _ in tu.tree_flatten_with_path(tree)[0]]
    assert simple == [jtu.keystr(p, simple=True, separator="/")
                      for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    f = lambda x: (x, 0)  # noqa: E731
    assert _same_value(tu.tree_map(f, tree), jtu.tree_map(f, tree))
    g = lambda p, x: tu.keystr(p)  # noqa: E731
    jg = lambda p, x: jtu.keystr(p)  # noqa: E731
    assert _same_value(tu.tree_map_with_path(g, tree), jtu.tree_map_with_path(jg, tree))


def test_node_data_and_tuple_builder():
    for tree in [(1, 2), {"b": 1, "a": 2}, [1], None, Point(1, 2),
                 collections.OrderedDict(a=1)]:
        assert tu.tree_structure(tree).node_data() == jtu.tree_structure(tree).node_data()
    assert tu.tree_structure(1).node_data() is None
    td = tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([1, None])])
    assert td == tu.tree_structure((0, [0, None])) and repr(td) == "PyTreeDef((*, [*, None]))"
    assert tu.treedef_children(td) == td.children()


def test_is_leaf():
    tree = (None, [1, (2, 3)], {"a": (4,)})
    for pred in [lambda x: x is None, lambda x: isinstance(x, tuple) and len(x) == 2,
                 lambda x: isinstance(x, dict)]:
        leaves, td = tu.tree_flatten(tree, is_leaf=pred)
        jleaves, jtd = jtu.tree_flatten(tree, is_leaf=pred)
        assert leaves == jleaves and repr(td) == repr(jtd)
        assert tu.tree_leaves(tree, is_leaf=pred) == jleaves
        assert tu.tree_unflatten(td, leaves) == tree
        assert ([tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree, is_leaf=pred)]
                == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree, is_leaf=pred)])
    seen, jseen = [], []
    tu.tree_flatten(tree, is_leaf=lambda x: seen.append(x) or False)
    jtu.tree_flatten(tree, is_leaf=lambda x: jseen.append(x) or False)
    assert seen == jseen
    f = lambda x: x is None  # noqa: E731
    assert tu.tree_map(lambda x: x is None, tree, is_leaf=f) == jtu.tree_map(f, tree, is_leaf=f)


def test_treedef_equality_and_hash():
    a = tu.tree_structure({"a": (1, 2), "b": None})
    b = tu.tree_structure({"b": None, "a": ("x", "y")})
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert copy.deepcopy(a) == a and copy.copy(a) == a
    different = [{"a": (1, 2), "c": None}, {"a": [1, 2], "b": None}, {"a": (1, 2), "b": 1},
                 collections.OrderedDict([("a", (1, 2)), ("b", None)]), (1, 2)]
    for tree in different:
        assert tu.tree_structure(tree) != a
    assert tu.tree_structure(None) != tu.tree_structure(())
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))
    assert tu.tree_structure(Tagged("a", 1)) != tu.tree_structure(Tagged("b", 1))
    assert tu.tree_structure(1) == tu.tree_structure("leaf")
    assert (tu.tree_structure(collections.defaultdict(list, a=1))
            != tu.tree_structure(collections.defaultdict(dict, a=1)))


def test_unhashable_aux_data_compares_by_equality():
    # As JAX: unhashable aux data (a list, a dict) is left out of the hash and compared
    # by equality, so such treedefs hash and can key jit caches.
    td = tu.tree_structure(Tagged(["unhashable"], 1))
    assert td == tu.tree_structure(Tagged(["unhashable"], 2))
    assert hash(td) == hash(tu.tree_structure(Tagged(["unhashable"], 2)))
    assert td != tu.tree_structure(Tagged(["other"], 1))


def test_reduce_all_and_all_leaves():
    tree = [1, (2, None, {"a": 3})]
    assert tu.tree_reduce(operator.add, tree) == jtu.tree_reduce(operator.add, tree) == 6
    assert tu.tree_reduce(operator.add, tree, 10) == 16
    assert tu.tree_reduce(lambda a, b: a + [b], tree, []) == [1, 2, 3]
    with pytest.raises(TypeError):
        tu.tree_reduce(operator.add, [])
    assert tu.tree_all([True, (1, None)]) and not tu.tree_all([True, (0,)])
    assert tu.tree_all(None) == jtu.tree_all(None)
    for items in [[1, 2], [1, None], [(1,)], [], [np.ones(2)]]:
        assert tu.all_leaves(items) == jtu.all_leaves(items)
    f = lambda x: isinstance(x, tuple)  # noqa: E731
    assert tu.all_leaves([(1,), 2], is_leaf=f) == jtu.all_leaves([(1,), 2], is_leaf=f)


def test_tree_transpose():
    outer, inner = [0, {"a": 0}], (0, 0, 0)
    tree = [(1, 2, 3), {"a": (4, 5, 6)}]
    args = (tu.tree_structure(outer), tu.tree_structure(inner), tree)
    jargs = (jtu.tree_structure(outer), jtu.tree_structure(inner), tree)
    assert tu.tree_transpose(*args) == jtu.tree_transpose(*jargs)
    assert tu.tree_transpose(args[0], None, tree) == jtu.tree_transpose(jargs[0], None, tree)
    with pytest.raises(TypeError, match="Mismatch"):
        tu.tree_transpose(args[0], args[1], [(1, 2, 3), {"a": (4, 5)}])


def test_unflatten_wrong_leaf_count():
    td = tu.tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match=r"Too few leaves for PyTreeDef; expected 3, got 2"):
        tu.tree_unflatten(td, [1, 2])
    with pytest.raises(ValueError, match=r"Too many leaves for PyTreeDef; expected 3, got 4"):
        td.unflatten(iter([1, 2, 3, 4]))


def test_tree_map_multiple_trees_and_errors():
    assert tu.tree_map(lambda x, y: (x, y), (1, 2), ((3, 4), [5])) == ((1, (3, 4)), (2, [5]))
    assert tu.tree_map(lambda x, y: y, 1, None) is None
    with pytest.raises(ValueError) as e:
        tu.tree_map(lambda x, y: x, (1, 2), (1, 2, 3))
    msg = str(e.value)
    assert "pytree structure mismatch at key path <root>" in msg
    assert "the first tree has a tuple of length 2 but tree argument 1 has a tuple of length 3" in msg
    assert "PyTreeDef((*, *))" in msg and "PyTreeDef((*, *, *))" in msg
    with pytest.raises(ValueError, match=r"key path \[0\]: the first tree has a dict with "
                                         r"keys \['a'\] but tree argument 2 has a dict with keys"):
        tu.tree_map(lambda *xs: 0, [{"a": 1}], [{"a": 1}], [{"b": 1}])
    with pytest.raises(ValueError, match=r"key path \.x: .* has a list of length 1 but .* a leaf"):
        tu.tree_map(lambda *xs: 0, Point([1], 2), Point(3, 4))
    with pytest.raises(ValueError, match=r"namedtuple Point of length 2 but .* tuple of length 2"):
        tu.tree_map(lambda *xs: 0, Point(1, 2), (3, 4))
    with pytest.raises(ValueError, match=r"None but tree argument 1 has a leaf of type int"):
        tu.tree_map(lambda *xs: 0, None, 1)
    with pytest.raises(ValueError, match=r"key path \[<flat index 1>\]\[0\]"):
        tu.tree_map(lambda *xs: 0, Pair(1, [(2,)]), Pair(1, [3]))
    with pytest.raises(ValueError, match=r"key path \.value"):
        tu.tree_map_with_path(lambda *xs: 0, Tagged("t", [1]), Tagged("t", {}))
    with pytest.raises(ValueError, match=r"Tagged node with node data 't' and 1 children but"):
        tu.tree_map(lambda *xs: 0, Tagged("t", 1), Tagged("s", 1))


def test_flatten_up_to():
    td = tu.tree_structure((1, {"a": 2}))
    assert td.flatten_up_to(([1, 2], {"a": (3,)})) == [[1, 2], (3,)]
    with pytest.raises(ValueError, match=r"key path \[1\]: the treedef has a dict"):
        td.flatten_up_to((1, [2]))


def test_unsortable_dict_keys():
    with pytest.raises(ValueError, match="Comparator raised exception while sorting pytree dic"):
        tu.tree_flatten({1: "a", "b": 2})


def test_broadcast_prefix():
    full = ([1, 2], {"a": 3, "b": (4, None, 5)}, 6)
    assert tu.broadcast_prefix(0, full) == [0] * 6
    assert tu.broadcast_prefix(None, full) == [None] * 6
    assert tu.broadcast_prefix((0, None, 1), full) == [0, 0, None, None, None, 1]
    assert tu.broadcast_prefix((None, {"a": 1, "b": (2, 3, 4)}, 0), full) == [
        None, None, 1, 2, 4, 0]
    assert tu.broadcast_prefix((0, 1), ((), 5)) == [1]
    assert tu.broadcast_prefix({"x": 1}, {"x": None}) == []
    # is_leaf marks the prefix's leaves only: the value's subtrees count their own leaves
    # (a None there has none), as JAX's
    from jax._src.tree_util import broadcast_prefix as jax_broadcast_prefix
    f = lambda x: isinstance(x, list)  # noqa: E731
    for args in [((0, 1, 2), full, f), ((0, 1), (None, [1, 2]), lambda x: x is None),
                 ((None, 0), (None, 5), lambda x: x is None)]:
        assert tu.broadcast_prefix(*args) == jax_broadcast_prefix(*args), args
    with pytest.raises(ValueError) as e:
        tu.broadcast_prefix((0, {"a": 0}, 0), full)
    assert str(e.value).startswith(
        "pytree structure mismatch at key path [1]: prefix has a dict with keys ['a'] but the "
        "value has a dict with keys ['a', 'b'].")
    with pytest.raises(ValueError, match=r"key path \[1\]\['b'\]: prefix has a list of length 3 "
                                         r"but the value has a tuple of length 3"):
        tu.broadcast_prefix((0, {"a": 0, "b": [0, 0, 0]}, 0), full)
    with pytest.raises(ValueError, match=r"key path \[0\]\[1\]: prefix has a tuple of length 0 "
                                         r"but the value has a leaf of type int"):
        tu.broadcast_prefix(([0, ()], 0, 0), full)


def test_key_classes():
    pairs = [(tu.DictKey("a"), jtu.DictKey("a")), (tu.DictKey(3), jtu.DictKey(3)),
             (tu.SequenceKey(2), jtu.SequenceKey(2)), (tu.GetAttrKey("x"), jtu.GetAttrKey("x")),
             (tu.FlattenedIndexKey(1), jtu.FlattenedIndexKey(1))]
    for k, jk in pairs:
        assert (str(k), repr(k)) == (str(jk), repr(jk))
        assert k == type(k)(k._value()) and hash(k) == hash(type(k)(k._value()))
    assert tu.DictKey(0) != tu.SequenceKey(0)
    assert tu.keystr((tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"))) == "['a'][0].x"
    assert tu.keystr(()) == ""
    match tu.GetAttrKey("y"):
        case tu.GetAttrKey(name):
            assert name == "y"


def test_partial():
    def f(a, b, c=1):
        return a + 10 * b + 100 * c

    p = tu.Partial(f, 1, c=3)
    leaves, td = tu.tree_flatten(p)
    assert leaves == jtu.tree_leaves(jtu.Partial(f, 1, c=3)) == [1, 3]
    assert td == tu.tree_structure(tu.Partial(f, 5, c=7))
    assert td != tu.tree_structure(tu.Partial(f, 5, b=7))
    doubled = tu.tree_map(lambda x: 2 * x, p)
    assert isinstance(doubled, tu.Partial) and doubled(4) == f(2, 4, c=6)
    pp = tu.Partial(p, 2)
    assert tu.tree_leaves(pp) == [2] and pp() == f(1, 2, c=3)
    assert tu.tree_unflatten(*reversed(tu.tree_flatten(pp)))() == pp()
    q = functools.partial(f, 1)
    assert tu.tree_structure(tu.Partial(q, 2)) == tu.tree_structure(tu.Partial(q, 5))
    assert tu.tree_leaves(tu.Partial(f)) == []


def test_registration():
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda _, c: Pair(0, 0))
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_pytree_node(tuple, lambda p: ((), None), lambda _, c: ())

    @tu.register_pytree_node_class
    class Wrap:
        def __init__(self, x, scale):
            self.x, self.scale = x, scale

        def tree_flatten(self):
            return (self.x,), self.scale

        @classmethod
        def tree_unflatten(cls, scale, children):
            return cls(*children, scale)

    assert tu.tree_leaves(Wrap(1, 2)) == [1]
    assert repr(tu.tree_structure(Wrap([1], 2))) == "PyTreeDef(CustomNode(Wrap[2], [[*]]))"
    w = tu.tree_map(lambda x: x + 1, Wrap(1, 2))
    assert (type(w), w.x, w.scale) == (Wrap, 2, 2)

    class Seen:
        pass

    assert tu.tree_leaves(Seen) == [Seen]
    s = Seen()
    assert tu.tree_leaves(s) == [s]  # Seen is now cached as a leaf type ...
    tu.register_pytree_node(Seen, lambda _: ((), "seen"), lambda *_: Seen())
    assert tu.tree_leaves(s) == [] and tu.tree_structure(s).num_nodes == 1  # ... until registered


def test_register_dataclass():
    @dataclasses.dataclass
    class D:
        x: object
        y: object = dataclasses.field(default=3, metadata=dict(static=True))

    @dataclasses.dataclass
    class E:
        x: object
        y: object

    tu.register_dataclass(D)
    jtu.register_dataclass(D)
    tu.register_dataclass(E, data_fields=["y"], meta_fields=["x"])
    jtu.register_dataclass(E, data_fields=["y"], meta_fields=["x"])
    for tree in [D([1, 2], 4), E("m", (1,))]:
        assert tu.tree_leaves(tree) == jtu.tree_leaves(tree)
        assert repr(tu.tree_structure(tree)) == repr(jtu.tree_structure(tree))
        assert ([tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
                == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)])
        assert tu.tree_map(lambda v: v, tree) == tree


@pytest.mark.parametrize("fields", [
    dict(data_fields=["x"], meta_fields=[]),              # y missing
    dict(data_fields=["x", "y", "z"], meta_fields=[]),    # z init=False
    dict(data_fields=["x", "y"], meta_fields=["y"]),      # y both (and z is not init)
    dict(data_fields=["x", "y"]),                         # meta_fields not given
    dict()])                                              # z init=False, not dropped
def test_register_dataclass_checks_fields_as_jax(fields):
    def errors(reg):
        @dataclasses.dataclass
        class F:
            x: object
            y: object
            z: object = dataclasses.field(init=False, default=0)
        with pytest.raises(Exception) as e:
            reg(F, **fields)
        return type(e.value), str(e.value)
    assert errors(tu.register_dataclass) == errors(jtu.register_dataclass)


def test_treedef_compose():
    inners = [(1, {"k": 2}), None, 5, [None, ()]]
    outers = [{"a": [0, None, ()], "b": Point(0, (0,))}, 1, [1, 2]]
    for o in outers:
        for i in inners:
            ours = tu.tree_structure(o).compose(tu.tree_structure(i))
            want = jtu.tree_structure(o).compose(jtu.tree_structure(i))
            assert (repr(ours), ours.num_leaves, ours.num_nodes) == (
                repr(want), want.num_leaves, want.num_nodes)
            full = tu.tree_unflatten(ours, range(ours.num_leaves))
            assert tu.tree_structure(full) == ours


def test_numpy_leaves_flatten_fast_path():
    a, b = np.ones(2), np.zeros(3)
    leaves, td = tu.tree_flatten((a, b))
    assert leaves[0] is a and leaves[1] is b and repr(td) == "PyTreeDef((*, *))"
    out = tu.tree_unflatten(td, leaves)
    assert out[0] is a and out[1] is b


def test_public_namespaces_match_jax():
    import jax
    import xform
    public = lambda m: {n for n in dir(m) if not n.startswith("_")}  # noqa: E731
    assert public(xform.tree) == public(jax.tree)
    # xform's extras: the registry's class and broadcast_prefix (vmap's in_axes helper)
    assert public(xform.tree_util) - public(jax.tree_util) == {"PyTreeRegistry",
                                                               "broadcast_prefix"}
    assert public(jax.tree_util) <= public(xform.tree_util)


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_is_leaf_takes_path_as_jax(tree):
    # is_leaf(key_path, x): a node two keys deep (or a tuple) is a leaf
    import jax
    import xform

    def check(lib):
        m = lib.tree_util
        is_leaf = lambda p, x: len(p) == 2 or isinstance(x, tuple)  # noqa: E731
        pairs, td = lib.tree.flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)
        mapped = m.tree_map_with_path(lambda p, x: len(p), tree, is_leaf=is_leaf,
                                      is_leaf_takes_path=True)
        reg = m.default_registry.flatten_with_path(tree, lambda p, x: len(p) == 1)
        return ([(m.keystr(p), x) for p, x in pairs], str(td), str(reg[1]),
                len(m.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path=True))), mapped
    got, want = check(xform), check(jax)
    assert got[0] == want[0] and _same_value(got[1], want[1]), (got, want)
