"""Foreign functions (``jax.ffi``): call C/C++ kernels written against XLA's FFI from
xform programs, eagerly, under ``jit`` and ``vmap``.

A kernel is registered with XLA by name (``register_ffi_target``, through
``xform.backend``: the registry is jaxlib's, process-wide); ``ffi_call`` binds
``ffi_call_p``, whose lowering is one ``stablehlo.custom_call`` with ``api_version = 4``
and the call's keyword arguments as a dictionary ``backend_config`` (typed as JAX types
them: ``interpreters/ffi.ir_attribute``). The primitive knows its results only from
``result_shape_dtypes``, so it has no derivative, and ``vmap`` follows ``vmap_method``:
a scan of single calls (``"sequential"``) or one call on batched operands.
"""
import ctypes

import numpy as np

from xform import backend
from xform.core.avals import ShapedArray
from xform.core.tokens import is_token
from xform.core.trace import get_aval
from xform.interpreters import ad, batching, mlir
from xform.interpreters import ffi as ffi_lowerings
from xform.interpreters import partial_eval as pe
from xform.interpreters.callback import VMAP_METHODS  # (pure_callback's: the same)
from xform.lax._prim import standard_primitive
from xform.lax.control_flow.scan import scan



# ---- registration ----

def register_ffi_target(name, fn, platform="cpu", api_version=1, **kwargs):
    """Registers a foreign function target with XLA (process-wide, by name).

    Args:
      name: the target's name, as ``ffi_call`` names it.
      fn: a ``PyCapsule`` holding the handler's function pointer (see
        :func:`pycapsule`), or a dict of FFI stage names (``"execute"``...) to capsules.
      platform: the platform it runs on (``"cpu"``, ``"cuda"``...).
      api_version: 1 (the default) for the typed FFI, 0 for the older custom-call API.
      **kwargs: passed on to jaxlib's ``register_custom_call_target`` (``traits``).
    """
    return backend.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type_id(name, obj, platform="cpu"):
    """Removed in JAX 0.10.2: always raises ValueError (use :func:`register_ffi_type`)."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def register_ffi_type(name, type_registration, platform="cpu"):
    """Registers a custom type for FFI targets: ``type_registration`` is a dict with a
    ``type_id`` capsule (and optionally ``type_info``); ``name`` is unique per process."""
    return backend.register_custom_type(name, type_registration, platform=platform)


def register_ffi_target_as_batch_partitionable(name):
    """Lets SPMD partitioning split calls of target ``name`` along their leading axis."""
    backend.register_batch_partitionable(name)


def pycapsule(funcptr):
    """Wrap a ctypes function pointer (``ctypes.cdll.LoadLibrary(path).Handler``) in the
    ``PyCapsule`` that :func:`register_ffi_target` takes."""
    destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, destructor)
    return new(funcptr, None, destructor(0))


def include_dir():
    """The directory of the XLA FFI headers bundled with jaxlib (``xla/ffi/api/ffi.h``):
    compile a kernel with ``-I`` it."""
    return backend.FFI_INCLUDE_DIR


# ---- lowering rules ----

def _layout_order(aval, layout=None):
    """A layout as the custom call takes it, minor-to-major: row-major by default; a
    ``Layout``-like object (``major_to_minor``, no tiling) reversed; a tuple as is."""
    if layout is None:
        return tuple(range(len(aval.shape) - 1, -1, -1))
    if hasattr(layout, "major_to_minor"):
        if getattr(layout, "tiling", None) is not None:
            raise ValueError("The FFI does not support layouts with tiling")
        return tuple(layout.major_to_minor[::-1])
    return tuple(layout)


def build_ffi_lowering_function(call_target_name, *, operand_layouts=None,
                                result_layouts=None, backend_config=None,
                                skip_ffi_layout_processing=False, **lowering_args):
    """Build a function emitting the custom call of FFI target ``call_target_name``.

    The function, ``(ctx, *operands, **params) -> op``, takes result types and layouts
    from ``ctx``'s avals (row-major unless given; tuples here are minor-to-major, as XLA
    takes them, unlike ``ffi_call``'s) and its keyword ``params`` as the call's
    attributes, added to ``backend_config``.

    Args:
      call_target_name: the registered target.
      operand_layouts, result_layouts: one layout per operand / result, or None.
      backend_config: a dict of attributes (api_version >= 4) or an opaque string.
      skip_ffi_layout_processing: emit no layouts (XLA picks them).
      **lowering_args: ``api_version`` (default 4), ``has_side_effect``,
        ``operand_output_aliases`` ({operand: result}), ``result_types``,
        ``called_computations``, ``extra_attributes``.

    Raises:
      ValueError: for attributes with ``api_version`` < 4, or a string
        ``backend_config`` with ``api_version`` >= 4.
    """
    def lowering_op(ctx, *operands, **params):
        kwargs = dict(lowering_args)
        api_version = kwargs.pop("api_version", 4)
        if api_version >= 4:
            if backend_config is not None and not isinstance(backend_config, dict):
                raise ValueError("When api_version > 4, backend_config must be a dictionary.")
            config = dict(backend_config or {}, **{
                k: ffi_lowerings.ir_attribute(v) for k, v in params.items()})
        else:
            if params:
                raise ValueError(
                    "The use of ffi_call attributes requires a custom call API version "
                    f"of at least 4; got api_version={api_version}.")
            config = backend_config
        if any(not isinstance(d, (int, np.integer)) for a in ctx.avals_out for d in a.shape):
            raise NotImplementedError(f"{call_target_name}: xform's FFI calls take static "
                                      "result shapes only (not symbolic ones)")
        result_types = kwargs.pop("result_types", None) or [
            mlir.aval_to_ir_type(a) for a in ctx.avals_out]
        if not skip_ffi_layout_processing:
            kwargs["operand_layouts"] = [
                _layout_order(a, l) for a, l in zip(
                    ctx.avals_in, operand_layouts or [None] * len(ctx.avals_in))]
            kwargs["result_layouts"] = [
                _layout_order(a, l) for a, l in zip(
                    ctx.avals_out, result_layouts or [None] * len(ctx.avals_out))]
        return ffi_lowerings.emit_custom_call(call_target_name, operands, result_types,
                                              backend_config=config,
                                              api_version=api_version, **kwargs)
    return lowering_op


def ffi_lowering(call_target_name, *, operand_layouts=None, result_layouts=None,
                 backend_config=None, skip_ffi_layout_processing=False, **lowering_args):
    """A lowering rule (``mlir.register_lowering(prim, rule)``) calling FFI target
    ``call_target_name``; the arguments are :func:`build_ffi_lowering_function`'s.

    NB: xform's rules return one value for a single-result primitive (JAX's: a list)."""
    build = build_ffi_lowering_function(
        call_target_name, operand_layouts=operand_layouts, result_layouts=result_layouts,
        backend_config=backend_config, skip_ffi_layout_processing=skip_ffi_layout_processing,
        **lowering_args)

    def lowering(ctx, *operands, **params):
        results = list(build(ctx, *operands, **params).results)
        return results if ctx.primitive.multiple_results else results[0]
    return lowering


# ---- ffi_call ----

def ffi_call(target_name, result_shape_dtypes, *, has_side_effect=False, vmap_method=None,
             input_layouts=None, output_layouts=None, input_output_aliases=None,
             custom_call_api_version=4, legacy_backend_config=None):
    """Call a foreign function interface (FFI) target.

    Args:
      target_name: the name the target was registered under (``register_ffi_target``).
      result_shape_dtypes: an object with ``shape`` and ``dtype`` (e.g.
        ``xform.ShapeDtypeStruct``), or a sequence of them, describing the results.
      has_side_effect: the call runs even when its results are unused.
      vmap_method: how it batches under ``vmap``: ``"sequential"`` (a scan of calls;
        ``"sequential_unrolled"`` alike), ``"expand_dims"`` (one call, unbatched
        operands get a leading axis of size 1), ``"broadcast_all"`` (one call, all
        operands batched), ``"legacy_vectorized"`` (one call, unbatched operands as
        they are). ``None`` makes ``vmap`` raise.
      input_layouts, output_layouts: per input / output, None (row-major), a
        major-to-minor sequence of axes (``(1, 0)``: a column-major matrix) or a
        ``Layout``; XLA hands the kernel buffers in these layouts.
      input_output_aliases: {input index: output index} whose buffers may be shared.
      custom_call_api_version: 4 for the typed FFI; earlier versions are unsupported.
      legacy_backend_config: the opaque attribute string of an api_version < 4 target.

    Returns:
      A function of the input arrays; its keyword arguments are the handler's
      attributes (Python scalars, NumPy scalars and arrays, strings, dicts). It
      returns one Array, or a tuple (list) for a tuple (list) ``result_shape_dtypes``.

    Raises:
      ValueError: for an unknown ``vmap_method``, results without ``shape``/``dtype``,
        layouts or aliases that do not fit, and under differentiation.
      TypeError: for an attribute that cannot be hashed (not an array or a dict).
      NotImplementedError: under ``vmap`` without a ``vmap_method``.

    >>> import numpy as np, xform, xform.ffi
    >>> x = np.array([[4., 2.], [2., 5.]], np.float32)
    >>> _ = xform.numpy.linalg.cholesky(x)  # (initializes jaxlib's LAPACK targets)
    >>> spotrf = xform.ffi.ffi_call("lapack_spotrf_ffi", (xform.ShapeDtypeStruct(
    ...     x.shape, x.dtype), xform.ShapeDtypeStruct((), np.int32)),
    ...     input_layouts=[(1, 0)], output_layouts=[(1, 0), ()])
    >>> chol, info = spotrf(x, uplo=np.uint8(ord("L")))
    >>> np.tril(chol).tolist(), int(info)
    ([[2.0, 0.0], [1.0, 2.0]], 0)
    """
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    multiple_results = isinstance(result_shape_dtypes, (tuple, list))
    result_avals = _result_avals(result_shape_dtypes if multiple_results
                                 else [result_shape_dtypes])
    out_layouts = output_layouts if multiple_results else (output_layouts,)
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")

    def wrapped(*args, **kwargs):
        in_avals = [get_aval(x) for x in args]
        in_orders = _layout_orders(in_avals, input_layouts, "input arguments", "input layouts")
        out_orders = _layout_orders(result_avals, out_layouts, "outputs", "output layouts")
        aliases = _checked_aliases(input_output_aliases or {}, in_avals, result_avals,
                                   in_orders, out_orders)
        results = ffi_call_p.bind(
            *args, result_avals=result_avals, vmap_method=vmap_method,
            target_name=target_name, has_side_effect=has_side_effect,
            input_layouts=in_orders, output_layouts=out_orders,
            input_output_aliases=aliases, custom_call_api_version=custom_call_api_version,
            legacy_backend_config=legacy_backend_config, attributes=_hashable(kwargs))
        if not multiple_results:
            return results[0]
        return tuple(results) if isinstance(result_shape_dtypes, tuple) else list(results)
    return wrapped


def _result_avals(results):
    avals = []
    for i, r in enumerate(results):
        if not (hasattr(r, "shape") and hasattr(r, "dtype")):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and "
                             f"'dtype' attributes. Got {r} at position {i}.")
        # NB: the dtype as given (JAX's too): an FFI kernel may return 64-bit values
        avals.append(r if is_token(r) else ShapedArray(tuple(r.shape), np.dtype(r.dtype)))
    return tuple(avals)


def _layout_orders(avals, layouts, what, what_layouts):
    """Minor-to-major orders from ``ffi_call``'s major-to-minor layouts."""
    if layouts is None:
        return tuple(_layout_order(a) for a in avals)
    if len(layouts) != len(avals):
        raise ValueError(f"The number of {what} ({len(avals)}) must equal the number of "
                         f"{what_layouts} ({len(layouts)}).")
    return tuple(_layout_order(a, l if l is None or hasattr(l, "major_to_minor") else
                               tuple(l)[::-1]) for a, l in zip(avals, layouts))


def _checked_aliases(aliases, in_avals, out_avals, in_orders, out_orders):
    checked = []
    for i, o in sorted(aliases.items()):
        i, o = int(i), int(o)
        where = f"input_output_aliases contains the mapping '{i}:{o}'"
        if i >= len(in_avals):
            raise ValueError(f"{where} with input index {i} outside the range [0, "
                             f"{len(in_avals)}).")
        if o >= len(out_avals):
            raise ValueError(f"{where} with output index {o} outside the range [0, "
                             f"{len(out_avals)}).")
        a, b = in_avals[i], out_avals[o]
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise ValueError(f"{where} referring to an input with abstract value {a} and "
                             f"an output with a different abstract value {b}.")
        if in_orders[i] != out_orders[o]:
            raise ValueError(f"{where} referring to an input with layout {in_orders[i]} "
                             f"and an output with a different layout {out_orders[o]}.")
        checked.append((i, o))
    return tuple(checked)


class _ByValue:
    """A NumPy array or dict attribute, hashed and compared by value: primitive params
    key the compile caches. (They are small: they are written into the program.)"""
    __slots__ = ("value", "_key")

    def __init__(self, value):
        self.value = value
        self._key = ((value.dtype.str, value.shape, value.tobytes())
                     if isinstance(value, np.ndarray) else tuple(sorted(value.items())))

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return type(other) is _ByValue and self._key == other._key

    def __repr__(self):
        return repr(self.value)


def _hashable(kwargs):
    out = []
    for k, v in sorted(kwargs.items()):
        if isinstance(v, (np.ndarray, dict)):
            v = _ByValue(v)
        try:
            hash(v)
        except TypeError as e:
            raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
        out.append((k, v))
    return tuple(out)


def _ffi_call_abstract_eval(*avals_in, result_avals, **_):
    return list(result_avals)


def _ffi_call_jvp(primals, tangents, *, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. "
                     "You can use `jax.custom_jvp` or `jax.custom_jvp` to add support.")


def _ffi_call_transpose(cts, *args, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. "
                     "You can use `jax.custom_jvp` or `jax.custom_jvp` to add support.")


def _ffi_call_lowering(ctx, *operands, target_name, has_side_effect, input_layouts,
                       output_layouts, input_output_aliases, custom_call_api_version,
                       legacy_backend_config, attributes, **_):
    rule = ffi_lowering(target_name, has_side_effect=has_side_effect,
                        operand_layouts=input_layouts, result_layouts=output_layouts,
                        operand_output_aliases=dict(input_output_aliases),
                        api_version=custom_call_api_version,
                        backend_config=legacy_backend_config)
    return rule(ctx, *operands, **{k: v.value if type(v) is _ByValue else v
                                   for k, v in attributes})


def _batched_layouts(layouts, batched=None):
    """Minor-to-major orders with a new leading (most major) batch axis, where batched."""
    return tuple(l if (batched is not None and not b) else tuple(n + 1 for n in l) + (0,)
                 for l, b in zip(layouts, batched or [True] * len(layouts)))


def _ffi_call_batch(vals, dims, *, vmap_method, result_avals, **params):
    if vmap_method not in VMAP_METHODS[:-1]:
        raise NotImplementedError(
            "vmap is only supported for the ffi_call primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    size = batching.axis_size_of(vals, dims)
    batched = [d is not batching.not_mapped for d in dims]
    vals = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(vals, dims, batched)]
    if vmap_method in ("sequential", "sequential_unrolled"):
        def body(_, xs):
            it = iter(xs)
            args = [next(it) if b else x for x, b in zip(vals, batched)]
            return (), ffi_call_p.bind(*args, vmap_method=vmap_method,
                                       result_avals=result_avals, **params)
        _, outs = scan(body, (), [x for x, b in zip(vals, batched) if b],
                       unroll=vmap_method == "sequential_unrolled")
        return outs, [0] * len(outs)
    params["output_layouts"] = _batched_layouts(params["output_layouts"])
    if vmap_method == "legacy_vectorized":  # unbatched operands passed as they are
        params["input_layouts"] = _batched_layouts(params["input_layouts"], batched)
    else:
        lead = size if vmap_method == "broadcast_all" else 1
        vals = [x if b else batching.broadcast(x, lead, 0) for x, b in zip(vals, batched)]
        params["input_layouts"] = _batched_layouts(params["input_layouts"])
    batched_avals = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    outs = ffi_call_p.bind(*vals, vmap_method=vmap_method, result_avals=batched_avals,
                           **params)
    return outs, [0] * len(outs)


ffi_call_p = standard_primitive("ffi_call", _ffi_call_abstract_eval, multiple_results=True)
pe.effectful_params[ffi_call_p] = lambda params: params["has_side_effect"]
ad.primitive_jvps[ffi_call_p] = _ffi_call_jvp
ad.primitive_transposes[ffi_call_p] = _ffi_call_transpose
batching.primitive_batchers[ffi_call_p] = _ffi_call_batch
mlir.register_lowering(ffi_call_p, _ffi_call_lowering)
