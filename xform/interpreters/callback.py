"""Host callbacks: Python functions called from traced and compiled programs.

``debug_callback_p`` (``debug.print``, ``debug.callback``) has no results and an
effect: DCE keeps it (``partial_eval.effectful_primitives``) and XLA keeps its
side-effecting custom call. ``pure_callback_p`` has typed results and no effect.

The ``callback`` param of both is a *host function*: it takes one NumPy array per
operand (Arrays when run eagerly) and returns a tuple of arrays, one per result.
``_UserCallback`` adapts a user's function to that convention (pytree arguments
rebuilt as Arrays). Eagerly the impl calls the host function directly; compiled,
it is registered with the module (``ModuleContext.add_host_callback``) and called
by XLA through ``backend.python_callback_target(platform)``. vmap transforms the host
function into a host-side loop (``_Sequential``) for debug callbacks and
``vmap_method="sequential"``, so a batched callback is still one custom call; the
vectorized methods move and broadcast the operands in the program, as JAX does.
"""
import numpy as np

from xform import backend
from xform.core import dtypes, transfer, tree_util
from xform.core.array import Array
from xform.core.avals import ShapedArray
from xform.core.trace import Primitive, Tracer, eval_trace, set_current_trace
from xform.interpreters import ad, batching, ffi, mlir
from xform.interpreters import partial_eval as pe
from xform.interpreters.placement import committed_device

ir, hlo = mlir.ir, mlir.hlo


# ---- host functions ----

def _is_dynamic(x):
    """Arguments that become operands (arrays, scalars); the rest are passed as is."""
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex))


def split_static(args, kwargs):
    """Flatten ``(args, kwargs)``: returns (operands, treedef, {leaf index: static leaf})."""
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    static = {i: x for i, x in enumerate(leaves) if not _is_dynamic(x)}
    return [x for x in leaves if _is_dynamic(x)], tree, static


class _UserCallback:
    """A user function as a host function: rebuilds its pytree arguments (operands as
    Arrays, static leaves as given) and returns its flattened results."""
    __slots__ = ("fn", "tree", "static")

    def __init__(self, fn, tree, static):
        self.fn, self.tree, self.static = fn, tree, static

    def __call__(self, *operands):
        it = iter(operands)
        leaves = [self.static[i] if i in self.static else _as_array(next(it))
                  for i in range(len(operands) + len(self.static))]
        args, kwargs = tree_util.tree_unflatten(self.tree, leaves)
        with set_current_trace(eval_trace):  # XLA may call back on any thread
            return tree_util.tree_leaves(self.fn(*args, **kwargs))

    # Equal for the same function and argument structure (as JAX's _FlatCallback), so
    # caches keyed on params (eager primitives, jaxprs) see repeated calls as one.
    def __eq__(self, other):
        return (type(other) is _UserCallback and self.fn == other.fn
                and self.tree == other.tree and self.static == other.static)

    def __hash__(self):
        return hash((self.fn, self.tree, tuple(self.static)))

    def __repr__(self):
        return getattr(self.fn, "__name__", None) or repr(self.fn)


def _as_array(x):
    return x if isinstance(x, Array) else transfer.device_put_value(x)


def _checked_results(outs, avals):
    """The callback's results as NumPy arrays of exactly ``avals`` (else RuntimeError)."""
    outs = list(outs) if outs is not None else []
    if len(outs) != len(avals):
        raise RuntimeError("Mismatched number of outputs from callback. "
                           f"Expected: {len(avals)}, Actual: {len(outs)}")
    checked = []
    for i, (x, aval) in enumerate(zip(outs, avals)):
        x = np.asarray(x)
        dtype = dtypes.canonicalize_dtype(x.dtype)
        x = x if dtype == x.dtype else x.astype(dtype)
        if x.shape != aval.shape:
            raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                               f"Expected: {aval.shape}, Actual: {x.shape}")
        if x.dtype != aval.dtype:
            raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                               f"Expected: {aval.dtype}, Actual: {x.dtype}")
        checked.append(x if x.flags.c_contiguous else x.copy(order="C"))
    return tuple(checked)


class _Sequential:
    """``callback`` vmapped on the host: called once per batch element (operands sliced
    along their batch dims ``dims``; ``None``: unbatched), results checked against the
    per-element ``result_avals`` and stacked (``None``: a debug callback, no results).
    Nested vmaps nest these: the outer one slices first, so inner ``dims`` stay right."""
    __slots__ = ("callback", "dims", "size", "result_avals")

    def __init__(self, callback, dims, size, result_avals):
        self.callback, self.dims, self.size = callback, tuple(dims), size
        self.result_avals = result_avals

    def __call__(self, *operands):
        xs = [np.asarray(x) for x in operands]
        outs = [self.callback(*[x if d is None else np.take(x, i, axis=d)
                                for x, d in zip(xs, self.dims)])
                for i in range(self.size)]
        if self.result_avals is None:
            return ()
        outs = [_checked_results(o, self.result_avals) for o in outs]
        return tuple(np.stack(o) for o in zip(*outs)) if outs else (
            tuple(np.zeros((0,) + a.shape, a.dtype) for a in self.result_avals))

    def __repr__(self):
        return f"sequential({self.callback!r})"


def _emit_callback(ctx, host_fn, operands, result_avals, has_side_effect):
    """A host-callback custom call running ``host_fn`` (see ``backend.compile``)."""
    index = ctx.module_ctx.add_host_callback(host_fn)
    op = hlo.CustomCallOp(
        [mlir.aval_to_ir_type(a) for a in result_avals], list(operands),
        backend.python_callback_target(ctx.module_ctx.platform),
        has_side_effect=has_side_effect,
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        backend_config=ir.DictAttr.get(
            {"index": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), index)}),
        # NumPy's layout both ways (on GPU XLA chose a transposed result layout for a
        # vmapped callback and read the host's row-major result wrong)
        operand_layouts=ffi.row_major_layouts(ir.RankedTensorType(v.type).rank
                                              for v in operands),
        result_layouts=ffi.row_major_layouts(len(a.shape) for a in result_avals))
    return list(op.results)


# ---- debug_callback ----

def debug_callback(callback, *args, **kwargs):
    """Stage ``callback(*args, **kwargs)`` for its side effect (``xform.debug.callback``)."""
    operands, tree, static = split_static(args, kwargs)
    debug_callback_p.bind(*operands, callback=_UserCallback(callback, tree, static))


def _debug_callback_impl(*args, callback):
    callback(*args)
    return []


def _debug_callback_jvp(primals, tangents, *, callback):
    # Called with the primal values only; nothing to differentiate.
    return debug_callback_p.bind(*primals, callback=callback), []


def _debug_callback_transpose(cts, *args, callback):
    return [None] * len(args)


def _debug_callback_batch(vals, dims, *, callback):
    # NB: as JAX, one call per batch element (JAX unrolls them in the program; here
    # the loop runs on the host). Nested vmaps loop outer-axis-major.
    size = batching.axis_size_of(vals, dims)
    debug_callback_p.bind(*vals, callback=_Sequential(callback, dims, size, None))
    return [], []


def _debug_callback_lowering(ctx, *args, callback):
    def host(*xs):
        callback(*xs)
        return ()
    return _emit_callback(ctx, host, args, [], has_side_effect=True)


debug_callback_p = Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.def_impl(_debug_callback_impl, lazy_kind="host_callback")
debug_callback_p.def_abstract_eval(lambda *avals, callback: [])
pe.effectful_primitives.add(debug_callback_p)
ad.primitive_jvps[debug_callback_p] = _debug_callback_jvp
ad.primitive_transposes[debug_callback_p] = _debug_callback_transpose
batching.primitive_batchers[debug_callback_p] = _debug_callback_batch
mlir.register_lowering(debug_callback_p, _debug_callback_lowering)


# ---- pure_callback ----

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Call a pure Python function from inside transformed or compiled code.

    ``callback`` receives ``args``/``kwargs`` as pytrees of Arrays and must return a
    pytree of arrays matching ``result_shape_dtypes``. Being pure, it may be called
    any number of times (or not at all when its results are unused).

    Args:
      callback: the host function.
      result_shape_dtypes: pytree of objects with ``shape`` and ``dtype`` (e.g.
        ``xform.ShapeDtypeStruct``) describing the results.
      *args: positional arguments for ``callback``.
      sharding: accepted for JAX compatibility; the callback runs on the host.
      vmap_method: how it batches under ``vmap``: ``"sequential"`` (one call per
        element, ``"sequential_unrolled"`` alike), ``"expand_dims"`` (one call,
        unbatched operands get a leading axis of size 1), ``"broadcast_all"`` (one
        call, all operands batched) or ``"legacy_vectorized"`` (one call, unbatched
        operands unchanged). ``None`` (the default) makes ``vmap`` raise.
      **kwargs: keyword arguments for ``callback``.

    Returns:
      A pytree of Arrays with the structure of ``result_shape_dtypes``.

    Raises:
      ValueError: for an unknown ``vmap_method``, 64-bit result dtypes while x64 is
        disabled, or under differentiation (wrap it in ``custom_jvp``).
      RuntimeError: when the callback returns results of other shapes or dtypes.

    >>> import numpy as np, xform, xform.numpy as jnp
    >>> f = lambda x: xform.pure_callback(np.sin, xform.ShapeDtypeStruct((2,), jnp.float32), x)
    >>> xform.jit(f)(jnp.zeros(2))
    Array([0., 0.], dtype=float32)
    """
    del sharding
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    result_leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = tuple(_result_aval(r) for r in result_leaves)
    operands, tree, static = split_static(args, kwargs)
    if vmap_method == "sequential_unrolled":
        vmap_method = "sequential"
    outs = pure_callback_p.bind(*operands, callback=_UserCallback(callback, tree, static),
                                result_avals=result_avals, vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def _result_aval(r):
    if not (hasattr(r, "shape") and hasattr(r, "dtype")):
        raise TypeError("pure_callback: result_shape_dtypes leaves must have `shape` and "
                        f"`dtype` attributes (e.g. xform.ShapeDtypeStruct), got {r!r}")
    dtype = np.dtype(r.dtype)
    if dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                         "`jax_enable_x64` is disabled")
    return ShapedArray(tuple(r.shape), dtype)


def _pure_callback_impl(*args, callback, result_avals, vmap_method):
    device = _device(args, "pure_callback")
    return _placed(_checked_results(callback(*args), result_avals), device)


def _device(args, name):
    """Where an eager callback on ``args`` puts its results, as a computation on them
    (placement.py): their committed device, else None (the default device); JAX's
    error, before the call, for committed ones on two devices."""
    return committed_device(args, name, lambda i: f"args[{i}]")


def _placed(outs, device):
    return [transfer.device_put_value(x, device) for x in outs]


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. "
                     "Please use `jax.custom_jvp` to use callbacks while taking gradients.")


def _pure_callback_transpose(cts, *args, **params):
    raise ValueError("Pure callbacks do not support transpose. "
                     "Please use `jax.custom_vjp` to use callbacks while taking gradients.")


def _pure_callback_batch(vals, dims, *, callback, result_avals, vmap_method):
    if vmap_method is None:
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is "
            "one of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', "
            "or 'legacy_vectorized'. Got vmap_method=None.")
    size = batching.axis_size_of(vals, dims)
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    if vmap_method == "sequential":
        callback = _Sequential(callback, dims, size, result_avals)
    else:
        # One call on operands with the batch axis in front: unbatched ones get a leading
        # axis of size 1 (expand_dims), of the batch size (broadcast_all) or none (legacy).
        lead = {"expand_dims": 1, "broadcast_all": size}.get(vmap_method)
        vals = [batching.moveaxis(x, d, 0) if d is not batching.not_mapped else
                x if lead is None else batching.broadcast(x, lead, 0)
                for x, d in zip(vals, dims)]
    outs = pure_callback_p.bind(*vals, callback=callback, result_avals=batched,
                                vmap_method=vmap_method)
    return outs, [0] * len(outs)


def _callback_lowering(has_side_effect):
    """Lowering of a typed callback primitive: a host call checking its results."""
    def lowering(ctx, *args, callback, result_avals, **_):
        def host(*xs):
            return _checked_results(callback(*xs), result_avals)
        return _emit_callback(ctx, host, args, result_avals, has_side_effect=has_side_effect)
    return lowering


pure_callback_p = Primitive("pure_callback")
pure_callback_p.multiple_results = True
pure_callback_p.def_impl(_pure_callback_impl, lazy_kind="host_callback")
pure_callback_p.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
ad.primitive_jvps[pure_callback_p] = _pure_callback_jvp
ad.primitive_transposes[pure_callback_p] = _pure_callback_transpose
batching.primitive_batchers[pure_callback_p] = _pure_callback_batch
mlir.register_lowering(pure_callback_p, _callback_lowering(has_side_effect=False))


# ---- io_callback: typed results and an effect ----

def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False,
                **kwargs):
    """Call an impure Python function (I/O, state) from inside transformed or compiled code.

    Like ``pure_callback``, but the call is an effect: it is never removed, even when its
    results are unused, and it runs once per execution.

    Args:
      callback: the host function; gets ``args``/``kwargs`` as pytrees of Arrays.
      result_shape_dtypes: pytree of objects with ``shape`` and ``dtype`` (e.g.
        ``xform.ShapeDtypeStruct``) describing the results.
      *args: positional arguments for ``callback``.
      sharding: accepted for JAX compatibility; the callback runs on the host.
      ordered: JAX orders such calls with effect tokens. NB: xform threads no tokens;
        the calls of one program run on the host in the program's order on CPU.
      **kwargs: keyword arguments for ``callback``.

    Returns:
      A pytree of Arrays with the structure of ``result_shape_dtypes``.

    Raises:
      ValueError: under differentiation, and under ``vmap`` when ``ordered``.

    >>> import numpy as np, xform, xform.numpy as jnp
    >>> log = []
    >>> def record(x):
    ...   log.append(float(x))
    ...   return np.float32(len(log))
    >>> f = xform.jit(lambda x: xform.experimental.io_callback(
    ...     record, xform.ShapeDtypeStruct((), jnp.float32), x))
    >>> f(2.0)
    Array(1., dtype=float32)
    """
    del sharding
    result_leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = tuple(_result_aval(r) for r in result_leaves)
    operands, tree, static = split_static(args, kwargs)
    outs = io_callback_p.bind(*operands, callback=_UserCallback(callback, tree, static),
                              result_avals=result_avals, ordered=ordered)
    return tree_util.tree_unflatten(out_tree, outs)


def _io_callback_impl(*args, callback, result_avals, ordered):
    device = _device(args, "io_callback")
    return _placed(_checked_results(callback(*args), result_avals), device)


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _io_callback_transpose(cts, *args, **params):
    raise ValueError("IO callbacks do not support transpose.")


def _io_callback_batch(vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    size = batching.axis_size_of(vals, dims)
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    outs = io_callback_p.bind(*vals, callback=_Sequential(callback, dims, size, result_avals),
                              result_avals=batched, ordered=ordered)
    return outs, [0] * len(outs)


io_callback_p = Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.def_impl(_io_callback_impl, lazy_kind="host_callback")
io_callback_p.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
pe.effectful_primitives.add(io_callback_p)
ad.primitive_jvps[io_callback_p] = _io_callback_jvp
ad.primitive_transposes[io_callback_p] = _io_callback_transpose
batching.primitive_batchers[io_callback_p] = _io_callback_batch
mlir.register_lowering(io_callback_p, _callback_lowering(has_side_effect=True))
