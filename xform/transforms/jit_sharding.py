"""jit's ``in_shardings`` / ``out_shardings``: pytree prefixes of shardings resolved to
one NamedSharding (or None: unspecified) per flat argument and output, and the
placement of a call (``interpreters.spmd``) that decides whether it compiles as one
SPMD program over a mesh."""
import warnings
from typing import NamedTuple

from xform.core import transfer, tree_util
from xform.core.array import Array, ShardedArray
from xform.core.layout import AutoLayout, Format, Layout
from xform.core.mesh import current_mesh
from xform.core.shape_dtype_struct import ShapeDtypeStruct
from xform.core.sharding import (UNCONSTRAINED, NamedSharding, PartitionSpec, Sharding,
                                  SingleDeviceSharding)
from xform.interpreters import mesh_jit, mlir_memory, spmd
from xform.interpreters.placement import committed_device


def _leaf(s):
    return s is None or isinstance(s, (Sharding, PartitionSpec, Format, Layout, AutoLayout))


def _named(s, what):
    if s is None or isinstance(s, NamedSharding):
        return s
    if isinstance(s, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise RuntimeError(
                f"jit's {what} holds the PartitionSpec {s}, which needs a mesh in "
                "context: call `jax.set_mesh(mesh)` or pass a NamedSharding.")
        return NamedSharding(mesh, s)
    if isinstance(s, Sharding):  # a one-device sharding: nothing to partition
        return None
    raise TypeError(f"jit's {what} must be Shardings or PartitionSpecs (a pytree prefix "
                    f"of the arguments), got {s!r}")


def _one_device(s):
    return isinstance(s, Sharding) and not isinstance(s, NamedSharding)


class _JitDevice(SingleDeviceSharding):
    """A jit's (deprecated) ``device=``: every argument, keywords too, goes there."""


def for_device(device, backend, in_shardings, out_shardings):
    """The in/out_shardings ``jit(device=device)`` means, after JAX's checks and warning."""
    warnings.warn("backend and device argument on jit is deprecated. You can use "
                  "`jax.device_put(..., jax.local_devices(backend=\"cpu\")[0])` on the "
                  "inputs to the jitted function to get the same behavior.",
                  DeprecationWarning, stacklevel=3)
    if backend is not None:
        raise ValueError("can't specify both a device and a backend for jit, "
                         f"got {device=} and {backend=}")
    for given, what in ((in_shardings, "in_shardings"), (out_shardings, "out_shardings")):
        if given is not None:
            raise ValueError("If backend or device is specified on jit, then "
                             f"{what} should not be specified.")
    return _JitDevice(device)


class JitShardings:
    """The ``in_shardings`` and ``out_shardings`` one jit was given; ``key`` is
    hashable (part of the function cache's options) or None if it is not;
    ``one_device``: some are one-device shardings (see ``put_one_device``); ``device``:
    jit's ``device=`` (else None)."""
    __slots__ = ("in_shardings", "out_shardings", "key", "one_device", "device",
                 "in_layouts", "out_layouts")

    def __init__(self, in_shardings, out_shardings):
        # ``Format`` leaves: their shardings as the shardings, their layouts apart
        # (``in_layouts``/``out_layouts``: the same trees of Layout/AUTO/None, or None)
        in_shardings, self.in_layouts = _split_formats(in_shardings)
        out_shardings, self.out_layouts = _split_formats(out_shardings)
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self.device = in_shardings._device if type(in_shardings) is _JitDevice else None
        parts = []
        self.one_device = False
        for tree, what in ((in_shardings, "in_shardings"), (out_shardings, "out_shardings")):
            leaves, treedef = tree_util.tree_flatten(tree, is_leaf=_leaf)
            parts.append((tuple(leaves), treedef))
            self.one_device = self.one_device or any(map(_one_device, leaves))
            for s in leaves:  # (JAX's check: a jit's shardings pin every dimension)
                if UNCONSTRAINED in getattr(s, "spec", s if isinstance(s, PartitionSpec)
                                            else ()):
                    raise ValueError(f"Unconstrained dims are not allowed when passed to "
                                     f"{what}: {s}")
        for tree in (self.in_layouts, self.out_layouts):
            leaves, treedef = tree_util.tree_flatten(tree, is_leaf=_leaf)
            parts.append((tuple(leaves), treedef))
        try:
            hash(tuple(parts))
            self.key = tuple(parts)
        except TypeError:
            self.key = None

    def flat_in(self, dyn_args, n_leaves, named=True):
        """Per flat argument its NamedSharding or None (``named=False``: the sharding
        as given)."""
        if self.in_shardings is None:
            return None
        spec = self.in_shardings
        if isinstance(spec, list):
            spec = tuple(spec)
        flat = tree_util.broadcast_prefix(spec, tuple(dyn_args), is_leaf=_leaf)
        flat = [_named(s, "in_shardings") for s in flat] if named else flat
        return flat + [None] * (n_leaves - len(flat))

    def flat_out(self, out_tree, named=True, concrete=False):
        """Per flat output its NamedSharding or None (``named=False``: the sharding
        as given; ``concrete``: each a Sharding, PartitionSpecs over the context mesh)."""
        if self.out_shardings is None:
            return None
        full = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
        flat = tree_util.broadcast_prefix(self.out_shardings, full, is_leaf=_leaf)
        if concrete:
            return [_named(s, "out_shardings") if isinstance(s, PartitionSpec) else s
                    for s in flat]
        return [_named(s, "out_shardings") for s in flat] if named else flat

    def flat_layouts(self, dyn_args, n_leaves, out_tree):
        """``(per flat argument, per flat output)`` the layout its Format gives (a
        Layout, ``AUTO`` or None), or None where no Format gives one."""
        if self.in_layouts is None and self.out_layouts is None:
            return None
        ins = [None] * n_leaves
        if self.in_layouts is not None:
            spec = self.in_layouts
            flat = tree_util.broadcast_prefix(tuple(spec) if isinstance(spec, list) else spec,
                                              tuple(dyn_args), is_leaf=_leaf)
            ins[:len(flat)] = flat
        outs = [None] * out_tree.num_leaves
        if self.out_layouts is not None:
            full = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
            outs = tree_util.broadcast_prefix(self.out_layouts, full, is_leaf=_leaf)
        return ins, outs


def _split_formats(tree):
    """``tree`` with each ``Format`` replaced by its sharding, and the tree of their
    layouts (None if no Format is in it)."""
    leaves, treedef = tree_util.tree_flatten(tree, is_leaf=_leaf)
    if not any(isinstance(x, Format) for x in leaves):
        return tree, None
    return (tree_util.tree_unflatten(treedef, [x.sharding if isinstance(x, Format) else x
                                               for x in leaves]),
            tree_util.tree_unflatten(treedef, [x.layout if isinstance(x, Format) else None
                                               for x in leaves]))


def put_one_device(shardings, leaves, dyn_args, out_tree, describe, name):
    """``leaves`` placed as one-device in/out_shardings say, as JAX's: an argument
    given one goes to its device, committed (wherever it was); with an output given
    one, the other arguments, uncommitted, go to that device too (a committed one
    elsewhere raises JAX's error), so the call runs and its results are committed
    there (interpreters/placement.py); ``put_outputs`` commits results that took
    no argument there."""
    flat_in = shardings.flat_in(dyn_args(), len(leaves), named=False) or [None] * len(leaves)
    outs = {s._device_assignment[0] for s in shardings.flat_out(out_tree, named=False) or ()
            if _one_device(s)}
    ins = [s._device_assignment[0] if _one_device(s) else shardings.device for s in flat_in]
    out = next(iter(outs), None)

    def incompatible(what, d):
        return ValueError(
            f"Received incompatible devices for jitted computation. Got {what} with device "
            f"ids [{d.id}] on platform {d.platform.upper()} and explicit output sharding "
            f"with device ids [{out.id}] on platform {out.platform.upper()}")
    placed = []
    for i, (x, d) in enumerate(zip(leaves, ins)):
        if _one_device(flat_in[i]) and type(x) is Array and type(flat_in[i]) is not _JitDevice:
            spmd.check_memory_kind(flat_in[i], x.sharding, x.aval)
        if d is None and out is not None:
            where = transfer.committed_device(x)
            if where is not None and where != out:
                raise incompatible(f"argument {describe(i)} of {name} with shape "
                                   f"{x.aval.str_short()} and", where)
            d = out
        elif d is not None and out is not None and d != out:
            raise incompatible(f"in_shardings of argument {describe(i)} of {name}", d)
        placed.append(x if d is None or isinstance(x, ShardedArray) else
                      transfer.device_put_value(x, d))
    return placed


class Pin(NamedTuple):
    """Where a lowered one-device program runs, fixed at lowering as JAX's: ``device``
    (None: the default device, results uncommitted), whether every argument is moved
    there (``device=``) rather than committed ones elsewhere refused, and the flat
    arguments' names for that error."""
    device: object
    move_all: bool
    names: tuple


def aot_pin(shardings, leaves, dyn_args, out_tree, names, name):
    """The ``Pin`` of ``jit(...).lower(*args)``: the device its one-device in/out
    shardings or ``device=`` name, else its committed arguments' (or structs') one
    device, else None; ``names``: the flat arguments' names."""
    names = tuple(names) + tuple(f"leaf {i}" for i in range(len(names), len(leaves)))
    describe = names.__getitem__
    device = None
    if shardings is not None and shardings.one_device:
        flat = (shardings.flat_in(dyn_args(), len(leaves), named=False) or []) + \
            (shardings.flat_out(out_tree, named=False) or [])
        device = shardings.device or next(s._device_assignment[0] for s in flat
                                          if _one_device(s))
    device = device or committed_device(leaves, name, describe) or \
        struct_device(leaves, describe, name)
    return Pin(device, shardings is not None and shardings.device is not None, names)


def struct_device(leaves, describe, name):
    """The one device the ``ShapeDtypeStruct`` leaves' SingleDeviceShardings name (an
    AOT program runs there, as JAX's), or None; two devices raise JAX's error."""
    found = {}
    for i, x in enumerate(leaves):
        if type(x) is ShapeDtypeStruct and _one_device(x._sharding):
            found.setdefault(x._sharding._device_assignment[0], i)
    if len(found) > 1:
        raise ValueError("Received incompatible devices for jitted computation. Got " +
                         " and ".join(f"argument {describe(i)} of {name} with device ids "
                                      f"[{d.id}]" for d, i in found.items()))
    return next(iter(found), None)


def put_outputs(shardings, outs, out_tree):
    """Flat results ``outs`` on the devices one-device out_shardings name, committed."""
    flat = shardings.flat_out(out_tree, named=False)
    if flat is None:
        return outs
    return [transfer.device_put_value(o, s._device_assignment[0])
            if _one_device(s) and type(o) is Array else o for o, s in zip(outs, flat)]


def out_kinds(shardings, closed, out_tree):
    """Per output the memory kind the jit's out_shardings pin it to, or None
    (``mlir_memory.out_memory_kinds``)."""
    flat = shardings and shardings.flat_out(out_tree, named=False)
    return mlir_memory.out_memory_kinds(flat, closed.in_avals, closed.out_avals)


def placement(shardings, closed, leaves, dyn_args, out_tree, describe, name, memo=None):
    """The call's ``spmd.Placement``, or None when it runs on one device
    (``dyn_args()`` gives the non-static positional arguments).

    ``memo`` (a dict the function's cache owns): memoized on the identities of what
    decides it (arguments laid out by the same layout objects as last call, the usual
    case of a train step fed its own outputs), so a hit derives nothing. The memo holds
    those objects, so their ids stay theirs while it does."""
    if memo is None:
        return _placement(shardings, closed, leaves, dyn_args, out_tree, describe, name)
    ctx = current_mesh()
    key = (id(shardings), id(closed), id(ctx),
           *[id(x.layout) if type(x) is ShardedArray else 0 for x in leaves])
    hit = memo.get(key)
    if hit is not None:
        return hit[-1]
    place = _placement(shardings, closed, leaves, dyn_args, out_tree, describe, name)
    if len(memo) > 256:
        memo.clear()
    memo[key] = (shardings, closed, ctx, [x.layout for x in leaves
                                          if type(x) is ShardedArray], place)
    return place


_PLACED = (ShardedArray, ShapeDtypeStruct)  # (what may name a sharding)


def _placement(shardings, closed, leaves, dyn_args, out_tree, describe, name):
    if shardings is None and not any(type(x) in _PLACED for x in leaves) and \
            not spmd.has_sharding_constraints(closed):
        return None
    def make_place():
        flat_in = shardings.flat_in(dyn_args(), len(leaves)) if shardings else None
        flat_out = shardings.flat_out(out_tree) if shardings else None
        return spmd.placement(closed, leaves, flat_in, flat_out, describe, name)
    named = bool(shardings) or any(spmd.named_sharding_of(x) for x in leaves)
    return mesh_jit.partitioned_placement(closed, named, make_place)
