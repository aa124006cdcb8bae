"""Signature parity with the reference libraries, read at run time: every public linen
module's dataclass fields and methods, every public flax.linen / jax.nn.initializers /
optax / jnp.linalg / jax.scipy.linalg / jax.lax.linalg function and class, compared with xform's (names, kinds, defaults, positional
order), so drift on either side fails here; plus behaviour checks of the options that
this comparison found missing (Conv's conv_general_dilated, initializers' out_sharding,
Module.module_paths)."""
import dataclasses
import importlib
import inspect
import types
from collections.abc import Mapping

import numpy as np
import pytest

import flax.linen as fnn
import jax

import xform
import xform.nn as nn
from nn_oracle import keys, same_leaves

# What xform leaves out on purpose (each with its reason); everything else must match.
KNOWN = {
    # the NNX bridge: xform has no NNX
    "linen.Partitioned.to_nnx_metadata", "linen.Partitioned.from_nnx_metadata",
    "linen.LogicallyPartitioned.to_nnx_metadata",
    "linen.LogicallyPartitioned.from_nnx_metadata",
    # Flax's Variable ids and its lift.jit cache helpers: xform's Variable has no id and
    # its jit cache is xform.nn._lifted_jit's
    "flax.core.scope.uuid", "flax.core.lift.CountsHolder",
    "flax.core.lift.TransformContext", "flax.core.lift.set_from_dict",
    # flax.errors: checkpoint errors (xform.checkpoint raises its CheckpointError), NNX's,
    # ones Flax never raises
    "flax.errors.AlreadyExistsError", "flax.errors.InvalidCheckpointError",
    "flax.errors.MPACheckpointingRequiredError", "flax.errors.MPARestoreDataCorruptedError",
    "flax.errors.MPARestoreTargetRequiredError", "flax.errors.ImmutableVariableError",
    "flax.errors.JaxTransformError", "flax.errors.MultipleMethodsCompactError",
    "flax.errors.TraceContextError",
    "flax.errors.ApplyScopeInvalidVariablesStructureError",   # (variables optional)
    # flax.typing's NNX-only helpers
    "flax.typing.HashableMapping", "flax.typing.PytreeDeque", "flax.typing.BaseConfigContext",
}

_REFERENCE = [("flax.linen", "xform.nn", "linen"),
              ("jax.nn.initializers", "xform.nn.initializers", "initializers")] + [
    ("optax" + s, "xform.optim" + s, "optax" + s)
    for s in ("", ".losses", ".schedules", ".tree_utils", ".tree", ".contrib",
              ".projections", ".second_order", ".transforms", ".perturbations",
              ".assignment", ".microbatching", ".experimental")] + [
    # Flax beyond linen: these modules have no __all__, so only Flax's own names count
    ("flax." + r, "xform." + o, "flax." + r)
    for r, o in (("struct", "nn.struct"), ("traverse_util", "nn.traverse_util"),
                 ("serialization", "nn.serialization"), ("jax_utils", "nn.jax_utils"),
                 ("training.train_state", "training.train_state"),
                 ("training.common_utils", "training.common_utils"),
                 ("training.dynamic_scale", "training.dynamic_scale"),
                 ("training.early_stopping", "training.early_stopping"),
                 ("training.lr_schedule", "training.lr_schedule"),
                 ("core", "nn.core"), ("core.scope", "nn.core.scope"),
                 ("core.lift", "nn.core.lift"), ("core.frozen_dict", "nn.core.frozen_dict"),
                 ("core.tracers", "nn.core.tracers"), ("core.nn", "nn.core.nn"),
                 ("cursor", "nn.cursor"), ("typing", "nn.typing"), ("errors", "nn.errors"))] + [
    # JAX's linalg namespaces (svd's subset_by_index, multi_dot's precision were missing)
    ("jax.numpy.linalg", "xform.numpy.linalg", "jnp.linalg"),
    ("jax.scipy.linalg", "xform.scipy.linalg", "jax.scipy.linalg"),
    ("jax.lax.linalg", "xform.lax.linalg", "jax.lax.linalg")]


def _same_default(a, b):
    empty = inspect.Parameter.empty
    if a is empty or b is empty:
        return a is b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return dict(a).keys() == dict(b).keys() and all(
            _same_default(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(map(_same_default, a, b))
    if isinstance(a, (type(None), bool, int, float, str)):
        return type(a) is type(b) and a == b
    if type(a).__name__ == "DenyList":
        return type(b).__name__ == "DenyList" and a.deny == b.deny
    if isinstance(a, type) and not isinstance(b, str):   # dtypes: jnp.float32 etc
        try:
            return np.dtype(a) == np.dtype(b)
        except TypeError:
            return a.__name__ == b.__name__
    if callable(a) and callable(b):   # public functions by name; lambdas as any callable
        na, nb = getattr(a, "__name__", ""), getattr(b, "__name__", "")
        return na == nb or na.startswith(("<", "_")) or nb.startswith(("<", "_")) or (
            type(a).__name__ == type(b).__name__)
    return type(a).__name__.lstrip("_") == type(b).__name__.lstrip("_") or (
        type(a).__name__.startswith("_") and type(b).__name__.startswith("_"))


def _signature(f):
    try:
        return list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None


def _param_diffs(name, ref, ours):
    """Missing or extra-required parameters, changed defaults and kinds, and
    positional order (a positional call must bind the same names)."""
    if ref is None or ours is None:
        return []
    out, by_name = [], {p.name: p for p in ours}
    var = {p.kind for p in ours if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    for p in ref:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.kind not in var:
                out.append(f"{name}: lacks *{p.name}")
            continue
        q = by_name.get(p.name)
        if q is None:
            if inspect.Parameter.VAR_KEYWORD not in var:
                out.append(f"{name}: lacks parameter {p.name}")
        elif not _same_default(p.default, q.default):
            out.append(f"{name}: {p.name} defaults to {q.default!r}, not {p.default!r}")
        elif q.kind == q.KEYWORD_ONLY and p.kind != p.KEYWORD_ONLY:
            out.append(f"{name}: {p.name} is keyword-only")
    ref_names = {p.name for p in ref}
    out += [f"{name}: extra required parameter {q.name}" for q in ours
            if q.name not in ref_names and q.default is inspect.Parameter.empty
            and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
    positional = lambda ps: [p.name for p in ps
                             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    r, o = positional(ref), positional(ours)
    n = min(len(r), len(o))
    if r[:n] != o[:n]:
        out.append(f"{name}: positional order {o}, not {r}")
    return out


def _fields(cls):
    """Dataclass fields but ``parent`` and ``name`` (xform's base Module is no dataclass:
    its subclasses are made ones)."""
    return [f for f in dataclasses.fields(cls) if f.name not in ("parent", "name")
            ] if dataclasses.is_dataclass(cls) else []


def _field_default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return inspect.Parameter.empty


def _module_diffs(name, ref, ours):
    out, theirs = [], {f.name: f for f in _fields(ours)}
    for f in _fields(ref):
        if f.name not in theirs:
            out.append(f"{name}: lacks field {f.name}")
        elif not _same_default(_field_default(f), _field_default(theirs[f.name])):
            out.append(f"{name}: field {f.name} defaults to "
                       f"{_field_default(theirs[f.name])!r}")
    drop = lambda ps: ps and [p for p in ps if p.name not in ("parent", "name")]
    out += _param_diffs(name, drop(_signature(ref)), drop(_signature(ours)))
    field_names = {f.name for f in _fields(ref)}
    for m in dir(ref):
        if m.startswith("_") or m in field_names or (
                ref is not fnn.Module and hasattr(fnn.Module, m)):
            continue
        rm = getattr(ref, m)
        if not callable(rm) or isinstance(rm, type):
            continue
        if not hasattr(ours, m):
            out.append(f"{name}.{m}")
            continue
        out += _param_diffs(f"{name}.{m}", _signature(rm), _signature(getattr(ours, m)))
    return out


def _class_diffs(name, ref, ours):
    out = _param_diffs(name, _signature(ref), _signature(ours))
    for m in dir(ref):
        raw = inspect.getattr_static(ref, m, None)
        if m.startswith("_") or not (inspect.isfunction(raw) or isinstance(
                raw, (staticmethod, classmethod))):
            continue
        if not hasattr(ours, m):
            out.append(f"{name}.{m}")
            continue
        out += _param_diffs(f"{name}.{m}", _signature(getattr(ref, m)),
                            _signature(getattr(ours, m)))
    return out


def api_diffs(ref_mod, our_mod, prefix):
    """Every difference between the public callables of two modules, as strings (a
    missing name is reported as the bare ``prefix.name``)."""
    out, own = [], prefix.startswith("flax.")
    for n in sorted(dir(ref_mod)):
        r = getattr(ref_mod, n)
        if n.startswith("_") or isinstance(r, types.ModuleType) or not callable(r) or (
                own and not getattr(r, "__module__", "").startswith("flax.")):
            continue
        full = f"{prefix}.{n}"
        if not hasattr(our_mod, n):
            out.append(full)
        elif isinstance(r, type) and issubclass(r, fnn.Module):
            out += _module_diffs(full, r, getattr(our_mod, n))
        elif isinstance(r, type):
            out += _class_diffs(full, r, getattr(our_mod, n))
        else:
            out += _param_diffs(full, _signature(r), _signature(getattr(our_mod, n)))
    return out


@pytest.mark.parametrize("ref,ours,prefix", _REFERENCE, ids=[p for *_, p in _REFERENCE])
def test_signatures_match_reference(ref, ours, prefix):
    diffs = api_diffs(importlib.import_module(ref), importlib.import_module(ours), prefix)
    unexpected = [d for d in diffs if d.split(":")[0] not in KNOWN]
    assert not unexpected, "\n".join(unexpected)


_FACTORY_ARGS = {"constant": (1.0,), "variance_scaling": (1.0, "fan_in", "normal")}
_FACTORIES = sorted(n for n in dir(jax.nn.initializers) if not n.startswith("_")
                    and n not in ("Initializer", "zeros", "ones"))


def test_initializer_functions_match_reference():
    """The functions the factories return: ``(key, shape, dtype, out_sharding)``."""
    diffs = []
    for n in _FACTORIES:
        args = _FACTORY_ARGS.get(n, ())
        ref, ours = getattr(jax.nn.initializers, n)(*args), getattr(nn.initializers, n)(*args)
        diffs += _param_diffs(n + "()", _signature(ref), _signature(ours))
    assert not diffs, "\n".join(diffs)


def test_comparison_catches_drift():
    """The comparison is not vacuous: each kind of difference is reported."""
    def ref(a, b=1, *, c=None): ...
    def ours(b, a, d, b_=1, c=2): ...
    diffs = _param_diffs("f", _signature(ref), _signature(ours))
    assert any("b defaults" in d for d in diffs) and any("c defaults" in d for d in diffs)
    assert any("extra required parameter d" in d for d in diffs)
    assert any("positional order" in d for d in diffs)
    assert _param_diffs("g", _signature(lambda x, y: 0), _signature(lambda x: 0)) == [
        "g: lacks parameter y"]
    mod = types.SimpleNamespace(Dense=fnn.Dense)
    assert api_diffs(fnn, mod, "linen")   # everything but Dense is missing
    assert not _same_default(jax.numpy.float32, "float32")


# ---- behaviour of the options the comparison found missing ----

X = np.random.RandomState(0).randn(2, 6, 3).astype(np.float32)


def _scaled_conv(lib):
    conv = lib.lax.conv_general_dilated
    return lambda *a, **k: conv(*a, **k) * 2.0


def test_conv_general_dilated_replacement():
    """Conv runs the given convolution; ``_cls`` (built per call) is preferred."""
    xk, fk = keys(0)
    ours = nn.Conv(4, (3,), conv_general_dilated=_scaled_conv(xform))
    theirs = fnn.Conv(4, (3,), conv_general_dilated=_scaled_conv(jax))
    v, fv = ours.init(xk, X), theirs.init(fk, X)
    same_leaves(v, fv, 0)
    y = ours.apply(v, X)
    same_leaves(y, theirs.apply(fv, X))
    np.testing.assert_allclose(y, 2 * np.asarray(nn.Conv(4, (3,)).apply(v, X)), rtol=1e-6)
    by_cls = nn.Conv(4, (3,), conv_general_dilated_cls=lambda: _scaled_conv(xform),
                     conv_general_dilated=xform.lax.add)
    np.testing.assert_array_equal(by_cls.apply(v, X), y)


def test_conv_local_shape_from_replacement():
    """ConvLocal calls the replacement only for its output (kernel) shape, as Flax."""
    def build(lib, jx, calls):
        conv = jx.lax.conv_general_dilated
        return lib.ConvLocal(4, (3,), padding="VALID", conv_general_dilated=lambda *a, **k:
                             calls.append(1) or conv(*a, **k))
    xk, fk = keys(1)
    ours, theirs = [], []
    v = xform.eval_shape(build(nn, xform, ours).init, xk, X)
    fv = jax.eval_shape(build(fnn, jax, theirs).init, fk, X)
    assert jax.tree.map(lambda a: (a.shape, a.dtype), v) == jax.tree.map(
        lambda a: (a.shape, a.dtype), fv)
    assert ours and len(ours) == len(theirs)


def test_initializers_out_sharding():
    """``out_sharding`` gives JAX's values laid out as asked; the QR-based ones refuse
    it, as JAX's."""
    from xform.sharding import NamedSharding, PartitionSpec as P
    mesh = xform.make_mesh((2,), ("x",))
    jmesh = jax.make_mesh((2,), ("x",))
    cases = [("lecun_normal", ()), ("constant", (2.0,))]
    for name, args in cases:
        with jax.set_mesh(jmesh):
            want = getattr(jax.nn.initializers, name)(*args)(
                jax.random.PRNGKey(0), (4, 3), out_sharding=jax.sharding.PartitionSpec("x"))
        with xform.set_mesh(mesh):
            got = getattr(nn.initializers, name)(*args)(
                xform.random.PRNGKey(0), (4, 3), out_sharding=P("x"))
        np.testing.assert_array_equal(got, want)
        assert got.sharding.spec == P("x", None) and got.sharding.mesh.shape == {"x": 2}
    z = nn.initializers.zeros(None, (4,), out_sharding=NamedSharding(mesh, P("x")))
    assert z.sharding.spec == P("x")
    with pytest.raises(NotImplementedError, match="orthogonal"):
        nn.initializers.orthogonal()(xform.random.PRNGKey(0), (4, 4),
                                     out_sharding=NamedSharding(mesh, P("x")))


def test_module_paths():
    def model(lib):
        class Foo(lib.Module):
            @lib.compact
            def __call__(self, x):
                return lib.Sequential([lib.Dense(3), lib.Dense(2)])(lib.Dense(4)(x))
        return Foo()
    ours = model(nn).module_paths(xform.random.PRNGKey(0), X)
    theirs = model(fnn).module_paths(jax.random.PRNGKey(0), X)
    summary = lambda paths: [(k, type(m).__name__, getattr(m, "features", None))
                             for k, m in paths.items()]
    assert summary(ours) == summary(theirs)
    assert summary(ours)[1] == ("Dense_2", "Dense", 4)


def test_pytreenode_base_is_not_constructed():
    """``struct.PyTreeNode`` itself refuses construction, as Flax's; subclasses work."""
    import flax.struct
    from xform.training import struct
    for lib in (flax.struct, struct):
        with pytest.raises(NotImplementedError):
            lib.PyTreeNode()

    class Node(struct.PyTreeNode):
        x: int
    assert Node(3).replace(x=4).x == 4
