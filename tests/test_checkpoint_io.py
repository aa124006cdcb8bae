"""xform.checkpoint: round trips of every dtype and structure, resuming training gives
the same trajectory as not stopping, CheckpointManager bookkeeping, and every bad file or
target gives a clear error with nothing executed, loaded or overwritten."""
import collections
import os
import pickle

import ml_dtypes
import numpy as np
import pytest

import xform
import xform.numpy as jnp
import xform.optim as optax
from xform import checkpoint
from xform.checkpoint import CheckpointError, CheckpointManager
from xform.training.train_state import TrainState


def _same(a, b):
    ta, tb = xform.tree_util.tree_structure(a), xform.tree_util.tree_structure(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(xform.tree_util.tree_leaves(a), xform.tree_util.tree_leaves(b)):
        assert type(x) is type(y) or hasattr(x, "dtype")
        if hasattr(y, "dtype"):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == y


DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16,
          np.int32, np.uint32, np.bool_, np.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_dtypes(tmp_path, dtype):
    vals = np.arange(-3, 9).reshape(3, 4) % (2 if dtype is np.bool_ else 100)
    tree = {"a": jnp.asarray(vals.astype(dtype)), "scalar": jnp.asarray(np.array(5, dtype)),
            "empty": jnp.zeros((0, 3), dtype)}
    checkpoint.save(tmp_path / "c.safetensors", tree)
    _same(checkpoint.restore(tmp_path / "c.safetensors"), tree)
    _same(checkpoint.restore(tmp_path / "c.safetensors", target=tree), tree)


def test_round_trip_numpy_only_dtypes(tmp_path):
    # float64 / int64 / complex128 / float8 leaves: NumPy targets get them back exactly
    tree = [np.linspace(0, 1, 5), np.arange(3, dtype=np.int64),
            np.array([1 + 2j], np.complex128),
            np.array([0.5, -2.0], ml_dtypes.float8_e4m3fn)]
    checkpoint.save(tmp_path / "c", tree)
    out = checkpoint.restore(tmp_path / "c", target=tree)
    for x, y in zip(out, tree):
        assert isinstance(x, np.ndarray) and x.dtype == y.dtype
        np.testing.assert_array_equal(x.astype(np.float64) if x.dtype.kind == "V" else x,
                                      y.astype(np.float64) if y.dtype.kind == "V" else y)


def test_64bit_leaves_are_never_narrowed_and_float8_kept(tmp_path):
    """Issue 22 #2: without x64, restoring 64-bit data with no target gives NumPy arrays
    of the saved dtype; a 32-bit target leaf for it, or a Python number the target dtype
    cannot hold, is a CheckpointError naming the leaf (never a silent narrowing); with
    x64 the leaves come back as Arrays of the saved dtype, as JAX holds them. float8
    data, which xform holds on the device as JAX does, comes back as a float8 Array."""
    import jax
    import jax.numpy as jjnp
    from xform.experimental import enable_x64
    saved = {"u": np.array([2**40 + 7], np.uint64), "i": np.array([-2**40 - 3], np.int64),
             "f": np.array([1e300]), "c": np.array([1e300j]), "s": np.float64(1e-300),
             "f8": np.array([0.5, -2.0], ml_dtypes.float8_e4m3fn), "w": jnp.ones(2),
             "big": 2**40, "huge": 1e300}
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, saved)
    mgr = CheckpointManager(tmp_path / "m")
    mgr.save(0, saved)
    for out in (checkpoint.restore(path), mgr.restore()):
        _same(out, saved)
        assert isinstance(out["w"], xform.Array)
        assert all(type(out[k]) is np.ndarray for k in ("u", "i", "f", "c", "s"))
        assert isinstance(out["f8"], xform.Array) and out["f8"].dtype == saved["f8"].dtype
        assert out["f8"].dtype == jjnp.asarray(saved["f8"]).dtype  # (as JAX holds it)
    bad = [("f", jnp.zeros(1), r"\['f'\] has shape \(1,\) dtype float64 in the checkpoint "
            r"but shape \(1,\) dtype float32 in the target \(.*jax_enable_x64"),
           ("u", jnp.zeros(1, np.uint32), r"\['u'\].*uint64.*uint32.*jax_enable_x64"),
           ("big", jnp.zeros((), np.int32), r"\['big'\] holds 1099511627776 .* int32"),
           ("huge", jnp.zeros(()), r"\['huge'\] holds 1e\+300 .* float32")]
    for key, leaf, msg in bad:
        for restore in (checkpoint.restore, lambda p, target: mgr.restore(target=target)):
            with pytest.raises(CheckpointError, match=msg):
                restore(path, target={**saved, key: leaf})
    with enable_x64(), jax.enable_x64(True):
        out = checkpoint.restore(path)
        _same({k: out[k] for k in "uifcs"}, {k: saved[k] for k in "uifcs"})
        for k in "uifcs":   # the dtype JAX itself holds the saved data in under x64
            assert isinstance(out[k], xform.Array)
            assert out[k].dtype == jjnp.asarray(saved[k]).dtype


_LEAF_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.bool_]


def _leaves():
    from hypothesis import strategies as st
    arrays = st.tuples(st.sampled_from(_LEAF_DTYPES),
                       st.lists(st.integers(0, 3), max_size=3), st.integers(0, 2 ** 31 - 1)
                       ).map(lambda a: jnp.asarray(np.random.RandomState(a[2]).randint(
                           -5, 5, size=a[1]).astype(a[0])))
    return st.one_of(arrays, st.integers(-10, 10), st.floats(-1, 1), st.booleans(),
                     st.none())


def test_round_trip_random_structures(tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    trees = st.recursive(_leaves(), lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.tuples(kids, kids),
        st.dictionaries(st.text("abcxyz", min_size=1, max_size=3), kids, max_size=3)),
        max_leaves=8)

    @hypothesis.given(trees)
    def check(tree):
        path = tmp_path / "h.safetensors"
        checkpoint.save(path, tree)
        _same(checkpoint.restore(path), tree)
        _same(checkpoint.restore(path, target=tree), tree)
    check()


def test_round_trip_structures(tmp_path):
    params = {"dense": {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)}}
    tree = {
        "opt": optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3)).init(params),
        "list": [jnp.arange(3), None, (jnp.float32(2.0), ())],
        "ordered": collections.OrderedDict([("z", jnp.ones(1)), ("a", jnp.zeros(1))]),
        "int_keys": {1: jnp.ones(1), 0: jnp.zeros(1)},
        "py": {"step": 7, "lr": 0.5, "flag": True, "none": None},
    }
    path = tmp_path / "s.safetensors"
    checkpoint.save(path, tree)
    _same(checkpoint.restore(path, target=tree), tree)
    loose = checkpoint.restore(path)          # no target: rebuilt from the file alone
    adam_state = loose["opt"][1][0]
    assert type(adam_state).__name__ == "ScaleByAdamState"
    assert adam_state._fields == ("count", "mu", "nu")
    np.testing.assert_array_equal(adam_state.mu["dense"]["kernel"], np.zeros((2, 3)))
    assert loose["list"][1] is None and loose["list"][2][1] == ()
    assert list(loose["ordered"]) == ["z", "a"] and set(loose["int_keys"]) == {0, 1}
    assert loose["py"] == {"step": 7, "lr": 0.5, "flag": True, "none": None}


def _state(tx=None):
    return TrainState.create(apply_fn=lambda p, x: x @ p["w"],
                             params={"w": jnp.asarray(np.eye(3, dtype=np.float32) * 0.5),
                                     "b": jnp.zeros(3, jnp.bfloat16)},
                             tx=tx or optax.adam(0.1))


def test_train_state_round_trip_via_target(tmp_path):
    state = _state()
    state = state.apply_gradients(grads=xform.tree_util.tree_map(jnp.ones_like, state.params))
    checkpoint.save(tmp_path / "ts", state)
    fresh = _state()
    back = checkpoint.restore(tmp_path / "ts", target=fresh)
    assert isinstance(back, TrainState) and back.tx is fresh.tx
    _same(back, state.replace(tx=fresh.tx, apply_fn=fresh.apply_fn))
    # an abstract target works too
    shapes = xform.eval_shape(lambda: state)
    _same(checkpoint.restore(tmp_path / "ts", target=shapes.replace(tx=fresh.tx,
                                                                   apply_fn=fresh.apply_fn)),
          back)
    loose = checkpoint.restore(tmp_path / "ts")     # no target: a dict of its fields
    assert sorted(loose) == [".opt_state", ".params", ".step"]


def test_resume_gives_the_same_trajectory(tmp_path):
    x = jnp.asarray(np.random.RandomState(0).randn(4, 3).astype(np.float32))

    @xform.jit
    def step(state):
        g = xform.grad(lambda p: jnp.sum(jnp.tanh(state.apply_fn(p, x)) ** 2)
                       + jnp.sum(p["b"].astype(jnp.float32) ** 2))(state.params)
        return state.apply_gradients(grads=g)

    tx = optax.chain(optax.clip_by_global_norm(1.0),
                     optax.adamw(optax.warmup_cosine_decay_schedule(0., 0.1, 3, 12)))
    straight = _state(tx)
    for _ in range(12):
        straight = step(straight)

    mgr = CheckpointManager(tmp_path / "run", max_to_keep=2)
    s = _state(tx)
    for i in range(1, 7):
        s = step(s)
        mgr.save(i, s)
    del s                                   # "crash"
    mgr2 = CheckpointManager(tmp_path / "run", max_to_keep=2)
    assert mgr2.all_steps() == [5, 6] and mgr2.latest_step() == 6
    s = mgr2.restore(target=_state(tx))
    assert int(s.step) == 6
    for _ in range(6):
        s = step(s)
    _same(s.replace(tx=straight.tx, apply_fn=straight.apply_fn), straight)


def test_typed_keys_round_trip(tmp_path):
    # typed PRNG keys (an extended dtype) are saved as their uint32 data and come back
    # as keys, with or without a target; a raw-key target does not accept them
    import xform.random as random
    tree = {"rng": random.split(random.key(3), 2), "k": random.key(7), "raw": random.PRNGKey(1),
            "rbg": random.key(2, impl="rbg"), "urbg": random.key(2, impl="unsafe_rbg")}
    path = tmp_path / "keys.safetensors"
    checkpoint.save(path, tree)
    for back in (checkpoint.restore(path), checkpoint.restore(path, target=tree)):
        for name, tag in (("rng", "fry"), ("k", "fry"), ("rbg", "rbg"), ("urbg", "urbg")):
            assert str(back[name].dtype) == f"key<{tag}>"
            assert back[name].shape == tree[name].shape
            np.testing.assert_array_equal(random.key_data(back[name]),
                                          random.key_data(tree[name]))
        assert back["raw"].dtype == np.uint32
    with pytest.raises(CheckpointError, match=r"'k'.*dtype key<fry> in the checkpoint but "
                                              r"shape \(2,\) dtype uint32 in the target"):
        checkpoint.restore(path, target={**tree, "k": random.PRNGKey(7)})


def test_checkpoint_manager(tmp_path):
    mgr = CheckpointManager(tmp_path, max_to_keep=3, save_interval_steps=5)
    saved = [s for s in range(0, 31) if mgr.save(s, {"s": jnp.int32(s)})]
    assert saved == [0, 5, 10, 15, 20, 25, 30]
    assert mgr.all_steps() == [20, 25, 30] and mgr.latest_step() == 30
    assert int(mgr.restore(25)["s"]) == 25 and int(mgr.restore()["s"]) == 30
    assert mgr.save(31, {"s": jnp.int32(31)}, force=True) and mgr.all_steps() == [25, 30, 31]
    assert not mgr.save(30, {"s": jnp.int32(0)})   # already saved: kept as it was
    assert int(mgr.restore(30)["s"]) == 30
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]
    with pytest.raises(FileNotFoundError, match=r"no checkpoint for step 7 .*saved steps: "
                                                r"\[25, 30, 31\]"):
        mgr.restore(7)
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        CheckpointManager(tmp_path / "empty").restore()
    with pytest.raises(ValueError, match="max_to_keep must be a positive int"):
        CheckpointManager(tmp_path, max_to_keep=0)
    with pytest.raises(ValueError, match="save_interval_steps must be a positive int"):
        CheckpointManager(tmp_path, save_interval_steps=0)


# ---------------------------------------------------------------- bad input

@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.safetensors"
    tree = {"w": jnp.arange(64, dtype=jnp.float32).reshape(8, 8), "b": jnp.ones(8),
            "step": jnp.int32(3)}
    checkpoint.save(path, tree)
    return path, tree


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint.restore(tmp_path / "nope.safetensors")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        checkpoint.restore(tmp_path)


@pytest.mark.parametrize("cut", [0, 5, 40, -1, -100])
def test_truncated_file(good, tmp_path, cut):
    path, _ = good
    data = open(path, "rb").read()
    bad = _write(tmp_path / "cut", data[:cut] if cut >= 0 else data[:len(data) + cut])
    with pytest.raises(CheckpointError, match="truncated|not an xform checkpoint"):
        checkpoint.restore(bad)


def test_corrupted_data_and_header(good, tmp_path):
    path, _ = good
    data = bytearray(open(path, "rb").read())
    flipped = bytearray(data)
    flipped[-20] ^= 0xFF                      # a byte inside a tensor
    with pytest.raises(CheckpointError, match="corrupted: the bytes of tensor .* SHA-256"):
        checkpoint.restore(_write(tmp_path / "flip", bytes(flipped)))
    header_end = 8 + int.from_bytes(data[:8], "little")
    mangled = bytearray(data)
    mangled[header_end - 3] = ord("#")        # break the JSON header
    with pytest.raises(CheckpointError, match="not an xform checkpoint"):
        checkpoint.restore(_write(tmp_path / "mangled", bytes(mangled)))


def test_tensor_dtype_must_match_its_metadata(good, tmp_path):
    path, _ = good
    data = open(path, "rb").read()
    swapped = data.replace(b'"dtype":"I32"', b'"dtype":"F32"', 1)   # same size, other type
    assert swapped != data
    with pytest.raises(CheckpointError, match="stored as F32 but its metadata says int32"):
        checkpoint.restore(_write(tmp_path / "swapped", swapped))


def test_save_creates_missing_folders(tmp_path):
    checkpoint.save(tmp_path / "a" / "b" / "c.safetensors", {"x": jnp.ones(1)})
    assert float(checkpoint.restore(tmp_path / "a" / "b" / "c.safetensors")["x"][0]) == 1.0


def test_files_that_are_not_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="not an xform checkpoint"):
        checkpoint.restore(_write(tmp_path / "txt", b"hello world, not a checkpoint\n" * 3))
    with pytest.raises(CheckpointError, match="truncated or empty"):
        checkpoint.restore(_write(tmp_path / "empty", b""))
    from safetensors.numpy import save_file      # a safetensors file, but not ours
    save_file({"x": np.ones(2, np.float32)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(CheckpointError, match="no valid 'xform' metadata"):
        checkpoint.restore(tmp_path / "plain.safetensors")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))        # would create the marker file if unpickled


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle_payload_is_never_executed(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    payload = pickle.dumps({"w": _Evil(str(marker))}, protocol=protocol)
    bad = _write(tmp_path / "evil.safetensors", payload)
    with pytest.raises(CheckpointError, match="pickle, which is never loaded"):
        checkpoint.restore(bad)
    os.makedirs(tmp_path / "run")
    os.rename(bad, tmp_path / "run" / "ckpt_1.safetensors")
    with pytest.raises(CheckpointError, match="pickle"):
        CheckpointManager(tmp_path / "run").restore()
    assert not marker.exists()


def test_structure_mismatch_names_the_key_path(good):
    path, tree = good
    wrong = dict(tree, extra=jnp.ones(1))
    with pytest.raises(CheckpointError, match=r"differs from the target's at the root: the "
                       r"checkpoint has a dict with keys \['b', 'step', 'w'\], the target "
                       r"has a dict with keys \['b', 'extra', 'step', 'w'\]"):
        checkpoint.restore(path, target=wrong)
    nested = {"w": [tree["w"]], "b": tree["b"], "step": tree["step"]}
    with pytest.raises(CheckpointError, match=r"at \['w'\]: the checkpoint has a leaf, the "
                                              r"target has a list of length 1"):
        checkpoint.restore(path, target=nested)
    state = optax.adam(0.1).init({"w": jnp.ones(2)})
    other = optax.sgd(0.1, momentum=0.9).init({"w": jnp.ones(2)})
    p2 = str(path) + ".opt"
    checkpoint.save(p2, state)
    with pytest.raises(CheckpointError, match=r"at \[0\]: the checkpoint has NamedTuple "
                                              r"ScaleByAdamState\(count, mu, nu\), the target "
                                              r"has NamedTuple TraceState\(trace\)"):
        checkpoint.restore(p2, target=other)


def test_leaf_mismatch_names_leaf_and_both(good):
    path, tree = good
    with pytest.raises(CheckpointError, match=r"the leaf \['w'\] has shape \(8, 8\) dtype "
                       r"float32 in the checkpoint but shape \(8, 4\) dtype float32 in the "
                       r"target"):
        checkpoint.restore(path, target=dict(tree, w=jnp.zeros((8, 4))))
    with pytest.raises(CheckpointError, match=r"the leaf \['b'\] has shape \(8,\) dtype "
                       r"float32 in the checkpoint but shape \(8,\) dtype bfloat16"):
        checkpoint.restore(path, target=dict(tree, b=jnp.zeros(8, jnp.bfloat16)))
    with pytest.raises(CheckpointError, match=r"the leaf \['step'\] has shape \(\) dtype "
                       r"int32 in the checkpoint but a Python float in the target"):
        checkpoint.restore(path, target=dict(tree, step=0.0))
    # a Python int in the target accepts the saved 0-d int (TrainState.create's step=0)
    assert checkpoint.restore(path, target=dict(tree, step=0))["step"] == 3


def test_save_errors_write_nothing(good, tmp_path):
    path, tree = good
    before = open(path, "rb").read()
    with pytest.raises(TypeError, match=r"the leaf at \['name'\] is a str; checkpoints hold "
                                        r"arrays and numbers"):
        checkpoint.save(path, dict(tree, name="adam"))
    with pytest.raises(TypeError, match=r"the leaf at \['x'\] .* has no NumPy value to save"):
        xform.jit(lambda x: checkpoint.save(path, {"x": x}) or x)(jnp.ones(1))
    with pytest.raises(TypeError, match="dict key \\(1, 2\\) at the root has type tuple"):
        checkpoint.save(path, {(1, 2): jnp.ones(1)})
    with pytest.raises(FileExistsError, match="overwrite=True"):
        checkpoint.save(path, tree, overwrite=False)
    notes = _write(tmp_path / "notes.txt", b"my precious notes")
    with pytest.raises(FileExistsError, match="is not an xform checkpoint; refusing"):
        checkpoint.save(notes, tree)
    assert open(notes, "rb").read() == b"my precious notes"
    assert open(path, "rb").read() == before
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_crash_mid_save_keeps_the_old_checkpoint(good, monkeypatch):
    path, tree = good
    before = open(path, "rb").read()

    def crash(*args):
        raise KeyboardInterrupt("power cut")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(path, {"w": jnp.zeros(3)})
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert not [f for f in os.listdir(path.parent) if f.startswith(".tmp")]
    _same(checkpoint.restore(path), tree)


def test_module_is_still_jax_checkpoint():
    f = xform.checkpoint(lambda x: jnp.sin(x) * x)
    np.testing.assert_allclose(xform.grad(f)(1.0), np.cos(1.0) + np.sin(1.0), rtol=1e-6)
    assert xform.checkpoint.save is checkpoint.save


def test_doctests():
    import doctest
    r = doctest.testmod(checkpoint, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert r.failed == 0 and r.attempted > 0
