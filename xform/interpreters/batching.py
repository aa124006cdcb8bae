"""Vectorization: BatchTrace carries (value, batch_dim) and applies batching rules.

A batching rule is ``rule(vals, dims, **params) -> (out, out_dim)`` (lists for
multiple-result primitives); ``dims`` entries are an int or ``not_mapped``.
Rules run under the parent trace, on values that include the batch axis.
"""
import contextlib
import threading

from xform.core.jaxpr import ClosedJaxpr, eval_jaxpr
from xform.core.trace import Trace, Tracer, current_trace, get_aval, set_current_trace
from xform.interpreters import ad_util
from xform.interpreters import partial_eval as pe

not_mapped = None
primitive_batchers = {}
# Collectives over a vmapped axis: ``rule(axis_size, axis_name, vals, dims, **params)``,
# used by the BatchTrace whose ``axis_name`` the primitive's ``axis_name`` names (even
# when no operand is batched: ``psum(1., 'i')`` is the axis size).
collective_batchers = {}


# ---- the axis environment: named axes bound by enclosing vmap/pmap/shard_map ----

class _AxisEnv(threading.local):
    def __init__(self):
        self.frames = []   # (name, size), innermost last
        # the axis name of the BatchTrace whose rule is running: a higher-order
        # primitive's rule (jit, scan, cond...) batches its jaxpr under that name, so
        # collectives inside see the vmapped axis
        self.rule_axis_name = None
        self.rule_spmd_name = None  # and its ``spmd_axis_name`` (sharding rules read it)
        self.rule_ema = None  # and the Explicit mesh axes its inputs' batch is split over


_axis_env = _AxisEnv()


@contextlib.contextmanager
def extend_axis_env(frames):
    """Bind ``frames`` (``[(name, size)]``) while tracing a mapped function's body."""
    n = len(_axis_env.frames)
    _axis_env.frames.extend(frames)
    try:
        yield
    finally:
        del _axis_env.frames[n:]


def axis_frame_size(name):
    """Size of the innermost bound axis ``name``; NameError naming it if unbound."""
    for n, size in reversed(_axis_env.frames):
        if n == name:
            return size
    bound = [n for n, _ in _axis_env.frames]
    raise NameError(f"unbound axis name: {name}. The following axis names (e.g. defined "
                    f"by pmap, vmap(axis_name=) or shard_map) are available to collective "
                    f"operations: {bound}")


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        aval = get_aval(self.val)
        if self.batch_dim is not_mapped:
            return aval
        d = self.batch_dim
        s = aval._sharding  # (explicit mode: the per-example type, as JAX's)
        return aval.update(shape=aval.shape[:d] + aval.shape[d + 1:], sharding=None
                           if s is None else s.with_spec(type(s.spec)(*s.spec[:d], *s.spec[d + 1:])))


class BatchTrace(Trace):
    __slots__ = ("axis_size", "axis_name", "spmd_name", "ema")

    def __init__(self, parent, axis_size, axis_name=None, spmd_name=None, ema=None):
        super().__init__(parent)
        self.axis_size = axis_size
        self.axis_name = axis_name
        self.spmd_name = spmd_name  # vmap's spmd_axis_name: mesh axes splitting the batch
        # explicit mode: the Explicit mesh axes (a tuple) the inputs' batch dimension is
        # split over (JAX's ``explicit_mesh_axis``): what reshard and unbatched outputs give it
        self.ema = ema

    def lift(self, x):
        if type(x) is BatchTracer and x._trace is self:
            return x
        pe._check_leak(x)
        return BatchTracer(self, x, not_mapped)

    def process_primitive(self, prim, args, params):
        tracers = [self.lift(x) for x in args]
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if (self.axis_name is not None and prim in collective_batchers
                and self.axis_name in params["axis_name"]):
            with set_current_trace(self.parent):
                out, out_dim = collective_batchers[prim](self.axis_size, self.axis_name,
                                                         vals, dims, **params)
            if prim.multiple_results:
                return [BatchTracer(self, o, d) for o, d in zip(out, out_dim)]
            return BatchTracer(self, out, out_dim)
        if all(d is not_mapped for d in dims):
            with set_current_trace(self.parent):
                return prim.bind(*vals, **params)
        rule = primitive_batchers.get(prim)
        if rule is None:
            raise NotImplementedError(f"Batching rule for '{prim.name}' not implemented")
        env = _axis_env
        prev = env.rule_axis_name, env.rule_spmd_name, env.rule_ema
        env.rule_axis_name, env.rule_spmd_name, env.rule_ema = \
            self.axis_name, self.spmd_name, self.ema
        try:
            with set_current_trace(self.parent):
                out, out_dim = rule(vals, dims, **params)
        finally:
            env.rule_axis_name, env.rule_spmd_name, env.rule_ema = prev
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dim)]
        return BatchTracer(self, out, out_dim)


def batch_flat(fun, axis_size, vals, in_dims, out_dims_fn, axis_name=None, spmd_name=None,
               ema=None):
    """Apply ``fun`` (flat in/out) to batched ``vals``; move outputs to the dims that
    ``out_dims_fn(per-example out avals)`` gives (``not_mapped`` only for outputs that
    don't depend on the batch)."""
    trace = BatchTrace(current_trace(), axis_size, axis_name, spmd_name, ema)
    args = [BatchTracer(trace, v, d) if d is not not_mapped else v
            for v, d in zip(vals, in_dims)]
    frames = [(axis_name, axis_size)] if axis_name is not None else []
    try:
        with set_current_trace(trace), extend_axis_env(frames):
            outs = fun(*args)
        outs = [trace.lift(o) for o in outs]
        out_dims = out_dims_fn([o.aval for o in outs])
    finally:
        trace.invalidate()
    out = []
    for i, (o, d) in enumerate(zip(outs, out_dims)):
        try:
            out.append(matchaxis(axis_size, o.batch_dim, d, o.val, ema))
        except SpecMatchError as e:
            e.leaf_idx = i
            raise
    return out


def moveaxis(x, src, dst):
    if src == dst:
        return x
    ndim = get_aval(x).ndim
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return ad_util.transpose(x, perm)


_RULE = object()


def broadcast(x, axis_size, axis, ema=_RULE):
    """Insert a new axis of ``axis_size`` at ``axis``, split over the Explicit mesh axes
    ``ema`` (default: those of the vmap whose rule runs), the rest typed as ``x``: JAX's
    ``explicit_mesh_axis``, so a broadcast unbatched operand is typed as the batched.
    In a rule an untyped ``x`` stays untyped (the sharding rules let it fit any)."""
    aval = get_aval(x)
    if ema is _RULE:
        ema = None if aval._sharding is None else _axis_env.rule_ema
    shape = list(aval.shape)
    shape.insert(axis, axis_size)
    dims = [i for i in range(len(shape)) if i != axis]
    s = aval.sharding  # (untyped: over the mesh in context, which may lack ``ema``)
    if ema is None or not set(ema) <= set(s.mesh.axis_names):
        return ad_util.broadcast_in_dim(x, shape, dims)
    spec = list(s.spec) + [None] * (aval.ndim - len(s.spec))
    spec.insert(axis, _entry(ema))
    return ad_util.broadcast_in_dim(x, shape, dims,
                                    out_sharding=s.with_spec(type(s.spec)(*spec)))


class SpecMatchError(ValueError):
    """A mapped output whose out_axes is None (``src``: its batch dim; ``leaf_idx``:
    which flat output): vmap names its out_axes path, as JAX's."""
    def __init__(self, src, msg):
        super().__init__(msg)
        self.src, self.leaf_idx = src, None


def _entry(ema):
    """A spec entry naming the Explicit mesh axes ``ema`` (a tuple, or None)."""
    return None if ema is None else ema[0] if len(ema) == 1 else ema


def matchaxis(axis_size, src, dst, x, ema=_RULE):
    """Move ``x``'s batch axis from ``src`` to ``dst`` (creating it if unbatched, split
    over ``ema``)."""
    if dst is not_mapped:
        if src is not not_mapped:
            raise SpecMatchError(src, "vmap has mapped output but out_axes is None (an "
                                 "output that depends on a mapped input must have an "
                                 "integer out_axes)")
        return x
    if src is not_mapped:
        return broadcast(x, axis_size, dst, ema)
    return moveaxis(x, src, dst)


def bdim_at_front(x, bdim, axis_size):
    return matchaxis(axis_size, bdim, 0, x)


def axis_size_of(vals, dims):
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            return get_aval(v).shape[d]
    raise AssertionError("no batched argument")


def operands_at_front(vals, dims, n, unbatched_rest):
    """The first ``n`` operands with their batch dimension in front, for a primitive
    whose other operands (reductions' init values) must be unbatched: otherwise
    NotImplementedError(``unbatched_rest``), as JAX."""
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError(unbatched_rest)
    size = axis_size_of(vals, dims)
    return [bdim_at_front(x, d, size) for x, d in zip(vals[:n], dims[:n])]


# ---- registrars ----

def defvectorized(prim):
    """Elementwise unary (or parameterized) primitive: apply directly, same dim."""
    def rule(vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    primitive_batchers[prim] = rule


def defbroadcasting(prim):
    """Elementwise n-ary primitive with lax's broadcasting (rank 0, and size-1 axes of
    equal ranks), batched as JAX's ``broadcast_batcher``: operands sharing one shape and
    batch dimension (and scalars) bind as they are; otherwise each operand of rank > 0
    gets its batch axis in front, of size 1 where unbatched, and a batched per-example
    scalar trailing size-1 axes, so the primitive broadcasts them. Nothing is
    materialized at full size, and XLA simplifies the program as it does JAX's (a
    ``div`` by a size-1 broadcast becomes a multiplication by its reciprocal: values
    an ulp apart otherwise). Operands with explicit shardings broadcast at full size."""
    def rule(vals, dims, **params):
        shapes = {(get_aval(v).ndim, d) for v, d in zip(vals, dims) if d is not not_mapped}
        avals = [get_aval(v) for v in vals]
        if len(shapes) == 1 and all(
                d is not not_mapped or a.ndim == 0 for a, d in zip(avals, dims)):
            ndim, d = shapes.pop()
            if all(a.ndim == ndim or a.ndim == 0 and dd is not_mapped
                   for a, dd in zip(avals, dims)):
                return prim.bind(*vals, **params), d
        if all(a._sharding is None for a in avals):
            args = [bdim_at_front(v, d, 1) if a.ndim else v
                    for v, a, d in zip(vals, avals, dims)]
            nd = max(get_aval(x).ndim for x in args)
            args = [x if d is not_mapped or get_aval(x).ndim == nd else
                    ad_util.broadcast_in_dim(x, get_aval(x).shape + (1,) * (
                        nd - get_aval(x).ndim), tuple(range(get_aval(x).ndim)))
                    for x, d in zip(args, dims)]
            return prim.bind(*args, **params), 0
        size = axis_size_of(vals, dims)
        example_shape = ()
        for a, d in zip(avals, dims):
            shape = a.shape if d is not_mapped else a.shape[:d] + a.shape[d + 1:]
            if shape:
                example_shape = shape
        out_shape = (size,) + tuple(example_shape)
        args = []
        for v, a, d in zip(vals, avals, dims):
            if d is not_mapped:
                args.append(v if a.ndim == 0 else broadcast(v, size, 0))
            else:
                v = moveaxis(v, d, 0)
                if a.ndim - 1 < len(example_shape):  # a batched per-example scalar
                    v = ad_util.broadcast_in_dim(v, out_shape, (0,))
                args.append(v)
        return prim.bind(*args, **params), 0
    primitive_batchers[prim] = rule


def batch_jaxpr(closed: ClosedJaxpr, axis_size, in_dims, instantiate=False, axis_name=None,
                consts=None):
    """A jaxpr computing ``closed`` on inputs batched at ``in_dims`` (the one helper every
    higher-order primitive's batching rule uses). Outputs that depend on a batched input,
    or that ``instantiate`` (a bool or one per output) asks for, come out batched at
    axis 0; the others unbatched. ``consts``, ``(values, dims)``, replace
    ``closed.consts`` (e.g. batched tracers a custom rule closed over).
    Returns ``(jaxpr, out_batched)``."""
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.out_avals)
    c_vals, c_dims = consts if consts is not None else (
        closed.consts, [not_mapped] * len(closed.consts))
    if axis_name is None:
        axis_name = _axis_env.rule_axis_name
    spmd_name, ema = _axis_env.rule_spmd_name, _axis_env.rule_ema
    in_avals = []
    for a, d in zip(closed.in_avals, in_dims):
        if d is not not_mapped:
            shape = list(a.shape)
            shape.insert(d, axis_size)
            s = a._sharding  # (typed: the batch dim split over the batch's Explicit axes)
            a = a.update(shape=tuple(shape), sharding=None if s is None else s.with_spec(
                type(s.spec)(*s.spec[:d], _entry(ema), *s.spec[d:])))
        in_avals.append(a)
    result = {}

    def fun(*args):
        trace = BatchTrace(current_trace(), axis_size, axis_name, spmd_name, ema)
        c_tracers, tracers = ([BatchTracer(trace, v, d) if d is not not_mapped else v
                               for v, d in zip(vals, dims)]
                              for vals, dims in ((c_vals, c_dims), (args, in_dims)))
        frames = [(axis_name, axis_size)] if axis_name is not None else []
        try:
            with set_current_trace(trace), extend_axis_env(frames):
                outs = eval_jaxpr(closed.jaxpr, c_tracers, *tracers)
            outs = [trace.lift(o) for o in outs]
        finally:
            trace.invalidate()
        out_batched = [o.batch_dim is not not_mapped or inst
                       for o, inst in zip(outs, instantiate)]
        result["out_batched"] = out_batched
        return [matchaxis(axis_size, o.batch_dim, 0 if b else not_mapped, o.val)
                for o, b in zip(outs, out_batched)]

    jaxpr = pe.trace_to_jaxpr(fun, in_avals)
    return jaxpr, result["out_batched"]
