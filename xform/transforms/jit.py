"""``jit``, ``make_jaxpr`` and ``eval_shape`` (the stages API is in ``stages.py``).

A jitted call flattens its arguments, keys a cache on (pytree structure, avals,
static arguments), and on a miss traces to a ClosedJaxpr, lowers it to StableHLO
and compiles it with XLA. Positional-Array-only calls take a leaner path keyed
on avals alone. Under another transformation, ``jit`` binds ``pjit`` instead so
that transformation sees through the call.
"""
import functools
import time

import numpy as np

from xform import backend
from xform.core import dtypes, errors, monitoring, transfer, tree_util
from xform.core.api_util import flatten_fun
from xform.core.array import Array
from xform.core.avals import ShapedArray, aval_of_value, canonical_aval
from xform.core.config import config, user_key
from xform.core.jaxpr import current_compute_type, eval_jaxpr
from xform.core.mesh import context_key
from xform.core.layout import AUTO
from xform.core.profiling import span
from xform.core.shape_dtype_struct import ShapeDtypeStruct
from xform.core.trace import Tracer, _context, eval_trace, set_current_trace
from xform.core.traceback_util import api_boundary
from xform.core.transfer import HOST_TYPES as _HOST_TYPES, host_leaf
from xform.interpreters.lazy import LazyTrace, concrete
from xform.interpreters.placement import run_elsewhere, run_there
from xform.interpreters import batching, compiler, dispatch, mesh_jit, spmd
from xform.interpreters import layouts as layouts_
from xform.interpreters import partial_eval as pe
from xform.interpreters.pjit import pjit_p, sharding_params
from xform.transforms import jit_explain as explain
from xform.transforms.jit_cache import Entry, fun_cache, validate_argnums
from xform.transforms import jit_sharding
from xform.transforms.stages import Traced, out_info
from xform import ref as refs

_flatten_builtin = backend.flatten_builtin


def _abstractify(x, path_fn):
    if isinstance(x, (Array, Tracer, ShapeDtypeStruct)):
        return x.aval
    try:
        return aval_of_value(x)
    except TypeError:
        if hasattr(x, "dtype") and not hasattr(x, "__jax_array__"):  # JAX's duck type:
            return ShapedArray(np.shape(x), dtypes.canonicalize_dtype(x.dtype),  # a shape
                               weak_type=bool(getattr(x, "weak_type", False)))  # and dtype
        raise TypeError(
            f"Error interpreting argument to {path_fn()[0]} as an abstract array. The "
            f"problematic value is of type {type(x)} and was passed to the function at "
            f"path {path_fn()[1]}.\nThis typically means that a jit-wrapped function was "
            "called with a non-array argument, and this argument was not marked as static "
            "using the static_argnums or static_argnames parameters of jit.") from None


def _arg_path(path):
    """Show a key path into ``(args, kwargs)`` as ``args[0]['a']`` / ``kwargs['b']``."""
    head, rest = path[0], path[1:]
    return ("args" if head.idx == 0 else "kwargs") + tree_util.keystr(rest)


def _flat_avals(fun_name, leaves, in_tree):
    avals = []
    for i, x in enumerate(leaves):
        if type(x) is Array:
            avals.append(x.aval)
        elif isinstance(x, refs.Ref):   # the key holds its type, Ref{f32[3]}
            avals.append(x.aval)
        else:
            def path_fn(i=i):
                tree = tree_util.tree_unflatten(in_tree, leaves)
                path = tree_util.tree_flatten_with_path(tree)[0][i][0]
                return fun_name, _arg_path(path)
            avals.append(_abstractify(x, path_fn))
    return tuple(avals)


class JitWrapped:
    """The callable ``jit`` returns. Also offers ``lower`` (AOT) and ``trace``."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=(), _shared=True, in_shardings=None, out_shardings=None,
                 inline=False):
        functools.update_wrapper(self, fun, updated=())  # (name, doc, __wrapped__)
        self.__dict__.update((k, v) for k, v in getattr(fun, "__dict__", {}).items()
                             if not k.startswith("_"))  # (a callable object's private
        self._fun = fun                                 # state must not shadow ours)
        self._name = getattr(fun, "__name__", "fun")
        self._inline = bool(inline)
        self._shardings = None
        if in_shardings is not None or out_shardings is not None:
            self._shardings = jit_sharding.JitShardings(in_shardings, out_shardings)
            _shared = _shared and self._shardings.key is not None
        cache = self._cache = fun_cache(fun, _shared, static_argnums, static_argnames,
                                         donate_argnums, donate_argnames,
                                         self._shardings and self._shardings.key)
        self._static_argnums = cache.static_argnums
        self._static_argnames = cache.static_argnames
        self._plain = cache.plain
        # host arguments (Python scalars, NumPy) in the fast path: not where a buffer may
        # be donated (a cached scalar's or a zero-copy NumPy buffer would be given away)
        self._host_ok = not cache.donate_argnums and not cache.donate_argnames
        self._fast = cache.fast
        self._tree_fast = cache.tree_fast

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        # Cache-hit fast paths: no Python frame but this one and Array.__init__. Exact
        # Arrays qualify (a ShardedArray's ``_buf`` would assemble it on the host), and
        # Python scalars and NumPy arrays, as the slow path would transfer them.
        if self._plain and not kwargs and _context.trace is eval_trace:
            bufs, avals, c = [], [], False
            for a in args:  # (a loop beats map(attrgetter) for a few arguments)
                if type(a) is not Array:
                    leaf = host_leaf(a) if type(a) in _HOST_TYPES and self._host_ok \
                        else None
                    if leaf is None:
                        break
                    bufs.append(leaf[0])
                    avals.append(leaf[1])
                    continue
                bufs.append(a._buf)
                avals.append(a.aval)
                c = c or a._committed
            else:
                avals = tuple(avals)
                entry = self._fast.get(avals)
                if entry is not None:
                    if entry.consts:
                        bufs = entry.consts + bufs
                    if c and c is not True:   # (committed to a non-default device)
                        outs = run_there(entry.compiled, bufs, args, f"jit({self._name})",
                                         lambda i: explain.leaf_name(self, args, {}, i))
                    else:
                        try:
                            outs = entry.run(bufs).consume_with_handlers(entry.handlers)
                        except Exception as e:
                            outs = run_elsewhere(
                                entry.compiled, bufs, args, f"jit({self._name})", e,
                                lambda i: explain.leaf_name(self, args, {}, i))
                    if entry.out_aval is not None:
                        return Array(outs[0], entry.out_aval, c)
                    outs = [Array(b, v, c) for b, v in zip(outs, entry.out_avals)]
                    if entry.c_out_tree is not None:
                        return entry.c_out_tree.unflatten(outs)
                    return tree_util.tree_unflatten(entry.out_tree, outs)
                return self._call(args, kwargs)
            # Pytree arguments: jaxlib's C++ flatten (builtin containers only; other
            # nodes come back as leaves that are not Arrays, which take the slow path).
            leaves, c_tree = _flatten_builtin(args)
            bufs, avals, c = [], [], False
            for a in leaves:
                if type(a) is not Array:
                    return self._call(args, kwargs)
                bufs.append(a._buf)
                avals.append(a.aval)
                c = c or a._committed
            entry = self._tree_fast.get((c_tree, tuple(avals)))
            if entry is not None and entry.c_out_tree is not None:
                if entry.consts:
                    bufs = entry.consts + bufs
                if c and c is not True:
                    outs = run_there(entry.compiled, bufs, leaves, f"jit({self._name})",
                                     lambda i: explain.leaf_name(self, args, {}, i))
                else:
                    try:
                        outs = entry.run(bufs).consume_with_handlers(entry.handlers)
                    except Exception as e:
                        outs = run_elsewhere(
                            entry.compiled, bufs, leaves, f"jit({self._name})", e,
                            lambda i: explain.leaf_name(self, args, {}, i))
                return entry.c_out_tree.unflatten([Array(b, v, c)
                                                   for b, v in zip(outs, entry.out_avals)])
        elif _context.trace is eval_trace:
            # Static or keyword arguments: the key also holds each static's type and
            # value and the keywords' names (JAX's C++ fast path keys them too).
            statics = self._cache.static_at.get(len(args))
            if statics is not None:
                hit = self._keyed(args, kwargs, statics, False)
                if hit is not None:
                    try:
                        entry = self._fast.get(hit[0])
                    except Exception:  # noqa: BLE001  (unhashable: the slow path's error)
                        entry = None
                    if entry is not None:
                        return self._run_fast(entry, hit, args, kwargs)
        return self._call(args, kwargs)

    def _keyed(self, args, kwargs, statics, canonical):
        """A call with static or keyword arguments: its fast-path key, its buffers in the
        slow path's leaf order (positional, then keywords by name), those leaves and
        whether one is committed; None where an argument is not a leaf the fast path
        takes (a pytree)."""
        key, bufs, dyn, c = [len(args)], [], [], False
        if kwargs:
            names = sorted(kwargs)
            key.append(tuple(names))
            items = [*args, *[kwargs[k] for k in names]]
            static = [i in statics for i in range(len(args))] + [
                k in self._static_argnames for k in names]
        else:
            items, static = args, None
        for i, a in enumerate(items):
            if static[i] if static is not None else i in statics:
                key += (type(a), a)
                continue
            if type(a) is Array:
                bufs.append(a._buf)
                key.append(canonical_aval(a.aval) if canonical else a.aval)
                c = c or a._committed
            else:
                leaf = host_leaf(a) if type(a) in _HOST_TYPES and self._host_ok else None
                if leaf is None:
                    return None
                bufs.append(leaf[0])
                key.append(leaf[1])
            dyn.append(a)
        return tuple(key), bufs, dyn, c

    def _run_fast(self, entry, hit, args, kwargs):
        _, bufs, dyn, c = hit
        if entry.consts:
            bufs = entry.consts + bufs
        if c and c is not True:
            outs = run_there(entry.compiled, bufs, dyn, f"jit({self._name})",
                             lambda i: explain.leaf_name(self, args, kwargs, i))
        else:
            try:
                outs = entry.run(bufs).consume_with_handlers(entry.handlers)
            except Exception as e:
                outs = run_elsewhere(entry.compiled, bufs, dyn, f"jit({self._name})", e,
                                     lambda i: explain.leaf_name(self, args, kwargs, i))
        if entry.out_aval is not None:
            return Array(outs[0], entry.out_aval, c)
        return tree_util.tree_unflatten(entry.out_tree, [Array(b, v, c)
                                                         for b, v in zip(outs, entry.out_avals)])

    @api_boundary
    def _call(self, args, kwargs):
        if config.jax_disable_jit:
            return self._fun(*args, **kwargs)
        if self._shardings is not None and self._shardings.one_device and \
                type(_context.trace) is LazyTrace:  # (placed as eagerly: after a barrier)
            args, kwargs = tree_util.tree_map(lambda x: concrete(x, "jit"), (args, kwargs))
            with set_current_trace(eval_trace):
                return self._call(args, kwargs)
        if kwargs and self._shardings is not None and self._shardings.device is None and \
                self._shardings.in_shardings is not None:  # (JAX's rule)
            raise ValueError("pjit does not support kwargs when in_shardings is specified.")
        key, leaves, closed, out_tree, refinfo = self._specialize(args, kwargs)
        if config.jax_debug_key_reuse:
            for i in self._cache.consumed.get(key, ()):
                errors.consume_key(f"jit({self._name})", leaves[i])
        if refinfo is not None:
            return self._call_with_refs(key, leaves, closed, out_tree, refinfo)
        cache = self._cache
        if _context.trace is eval_trace and not any(isinstance(x, Tracer) for x in leaves):
            describe = lambda i: explain.leaf_name(self, args, kwargs, i)  # noqa: E731
            one_device = self._shardings is not None and self._shardings.one_device
            if one_device:  # (SingleDeviceShardings: placed here, so no fast paths)
                leaves = jit_sharding.put_one_device(
                    self._shardings, leaves, lambda: self._split_static(args, kwargs)[0],
                    out_tree, describe, self._name)
            # sharded arguments, in/out_shardings or constraints: one SPMD program
            place = jit_sharding.placement(self._shardings, closed, leaves,
                                           lambda: self._split_static(args, kwargs)[0],
                                           out_tree, describe, self._name,
                                           cache.placements)
            if place is not None:
                key = (key, place.key)
            entry = cache.entries.get(key)
            if entry is None:
                donated = self._donated(args, kwargs, len(leaves))
                laid = self._laid_out(args, kwargs, leaves, closed, out_tree, place,
                                      donated, describe)
                # a program that maps over several devices is compiled for all of them
                compiled = laid or (
                    spmd.PartitionedJaxpr(closed, place, f"jit({self._name})", donated)
                    if place is not None else
                    mesh_jit.compile_jaxpr(closed, f"jit({self._name})", donated))
                entry = cache.entries[key] = Entry(compiled or dispatch.CompiledJaxpr(
                    closed, name=f"jit({self._name})", donated=donated,
                    out_kinds=jit_sharding.out_kinds(self._shardings, closed, out_tree)),
                    out_tree)
                if compiled is None and not one_device and not config.jax_debug_key_reuse:
                    self._add_fast_paths(entry, args, kwargs, leaves)  # (they check no keys)
                with span("xform.jit.execute", name=f"jit({self._name})"):  # first call
                    outs = entry.compiled(leaves, describe)
            else:
                outs = entry.compiled(leaves, describe)
            if one_device:
                outs = jit_sharding.put_outputs(self._shardings, outs, out_tree)
            return tree_util.tree_unflatten(out_tree, outs)
        if self._inline and self._shardings is None and pe.staging():
            # JAX's inline=True: staged into an enclosing jaxpr, the traced equations
            # join it (no call boundary for XLA); eagerly and under grad/vmap a call
            return tree_util.tree_unflatten(out_tree, eval_jaxpr(closed.jaxpr, closed.consts,
                                                                 *leaves))
        # Consts become explicit operands so outer transformations see them (they may
        # be tracers the function closed over).
        hoisted, consts = self._hoisted(key, closed)
        params = dict(jaxpr=hoisted, name=self._name)
        if self._shardings is not None:  # (kept through grad/vmap by pjit's rules)
            flat_in = self._shardings.flat_in(self._split_static(args, kwargs)[0],
                                              len(leaves))
            params = sharding_params(params, flat_in and [None] * len(consts) + flat_in,
                                     self._shardings.flat_out(out_tree))
        outs = pjit_p.bind(*consts, *leaves, **params)
        return tree_util.tree_unflatten(out_tree, outs)

    def _layouts(self, args, kwargs, leaves, closed, out_tree, place=None):
        """``(per flat argument, per output)`` a Layout or ``AUTO`` (None: the default);
        None when all are default. A ShapeDtypeStruct argument's Format gives its
        layout; outputs a ``with_layout_constraint`` gives are ``AUTO`` unless a Format
        says otherwise (JAX's layout propagation; not in a program over a mesh)."""
        layouts = self._shardings and self._shardings.flat_layouts(
            self._split_static(args, kwargs)[0], len(leaves), out_tree)
        constrained = layouts_.constrained_outputs(closed) if place is None else []
        structs = [x.format.layout if type(x) is ShapeDtypeStruct else None for x in leaves]
        if layouts is None and not any(constrained) and not any(structs):
            return None
        ins, outs = layouts or ([None] * len(leaves), [None] * len(closed.out_avals))
        ins = [layouts_.given(s if i is None else i, a)
               for i, s, a in zip(ins, structs, closed.in_avals, strict=True)]
        outs = [layouts_.given(AUTO if c and o is None else o, a) for c, o, a in
                zip(constrained or [False] * len(outs), outs, closed.out_avals, strict=True)]
        return (ins, outs) if any(ins) or any(outs) else None

    def _laid_out(self, args, kwargs, leaves, closed, out_tree, place, donated, describe):
        """The program of a call whose in/out_shardings hold ``Format``s with layouts
        or whose outputs a layout constraint gives (``interpreters/layouts.py``), else
        None."""
        layouts = self._layouts(args, kwargs, leaves, closed, out_tree, place)
        if layouts is None:
            return None
        if place is not None:
            raise NotImplementedError(
                f"jit({self._name}): layouts in in_shardings/out_shardings are supported "
                "for one-device programs only (this one is partitioned over a mesh).")
        return layouts_.LaidOutJaxpr(
            closed, name=f"jit({self._name})", donated=donated,
            out_kinds=jit_sharding.out_kinds(self._shardings, closed, out_tree),
            in_layouts=layouts[0], out_layouts=layouts[1], describe=describe)

    def _call_with_refs(self, key, leaves, closed, out_tree, refinfo):
        """A call whose function uses refs from outside it (arguments or closed over):
        their current values go in as extra operands, their final values come back as
        extra outputs and are written to the refs (see ``xform/ref.py``)."""
        ref_pos, ext_refs = refinfo
        all_refs = [leaves[i] for i in ref_pos] + list(ext_refs)
        refs.check_no_aliasing(self._name, [leaves[i] for i in ref_pos], ref_pos, ext_refs)
        vals = list(leaves)
        for i in ref_pos:
            vals[i] = leaves[i]._read()
        vals += [r._read() for r in ext_refs]
        if _context.trace is eval_trace and not any(isinstance(x, Tracer) for x in vals):
            entry = self._cache.entries.get(key)
            if entry is None:
                entry = self._cache.entries[key] = Entry(
                    dispatch.CompiledJaxpr(closed, name=f"jit({self._name})"), out_tree)
            outs = entry.compiled(vals)
        else:
            hoisted, consts = self._hoisted(key, closed)
            outs = pjit_p.bind(*consts, *vals, jaxpr=hoisted, name=self._name)
        n = len(outs) - len(all_refs)
        for r, v in zip(all_refs, outs[n:]):
            r._write(v)
        return tree_util.tree_unflatten(out_tree, outs[:n])

    def _add_fast_paths(self, entry, args, kwargs, leaves):
        # Keys hold canonical avals: hits from dispatch-made Arrays compare by identity.
        if transfer.has_float0(entry.out_avals):  # (outputs that are host zeros)
            return
        if not self._plain or kwargs:
            n = len(args)
            statics = self._cache.static_at.setdefault(
                n, frozenset(i % n for i in self._static_argnums if -n <= i < n))
            hit = self._keyed(args, kwargs, statics, True)
            if hit is not None:
                self._fast[hit[0]] = entry
            return
        if all(type(a) is Array or type(a) in _HOST_TYPES and self._host_ok for a in args):
            avals = []
            for a in args:
                leaf = (None, canonical_aval(a.aval)) if type(a) is Array else host_leaf(a)
                if leaf is None:  # (one the fast path declines: the slow path each call)
                    return
                avals.append(leaf[1])
            self._fast[tuple(avals)] = entry
            return
        c_leaves, c_tree = backend.flatten_builtin(args)
        # Only when jaxlib's flatten sees exactly xform's leaves, in xform's order.
        if len(c_leaves) == len(leaves) and all(
                type(a) is Array and a is b for a, b in zip(c_leaves, leaves)):
            self._tree_fast[(c_tree, tuple(canonical_aval(a.aval) for a in leaves))] = entry

    def _donated(self, args, kwargs, n_leaves):
        """Per flat argument leaf: is it donated (``donate_argnums``/``argnames``)?"""
        cache = self._cache
        if not cache.donate_argnums and not cache.donate_argnames:
            return None
        static = set(cache.static_argnums)
        static_names = set(cache.static_argnames)
        donate = {i % len(args) for i in cache.donate_argnums if -len(args) <= i < len(args)}
        mask = []
        for i, a in enumerate(args):
            if i not in static:
                mask += [i in donate] * len(tree_util.tree_leaves(a))
        for k in sorted(kwargs):
            if k not in static_names:
                mask += [k in cache.donate_argnames] * len(tree_util.tree_leaves(kwargs[k]))
        return mask if len(mask) == n_leaves else None

    def _hoisted(self, key, closed):
        cache = self._cache.hoisted
        hit = cache.get(key)
        if hit is None or hit[0] is not closed:
            hit = (closed,) + pe.convert_constvars_jaxpr(closed)
            if key in self._cache.jaxprs:
                cache[key] = hit
        return hit[1], hit[2]

    def _split_static(self, args, kwargs):
        nums, names = self._static_argnums, self._static_argnames
        n = len(args)
        # Static arguments not passed take their defaults inside the function, as in JAX.
        nums = {i % n for i in nums if -n <= i < n}
        # The key holds each static value's type too: 1 == True == 1.0 hash equal, but
        # they trace to different programs (as in JAX, which compares types).
        static = tuple((i, type(args[i]), args[i]) for i in sorted(nums)) + tuple(
            (k, type(kwargs[k]), kwargs[k]) for k in sorted(kwargs) if k in names)
        for where, _, value in static:
            try:
                hash(value)
            except TypeError:
                raise ValueError(
                    f"Non-hashable static arguments are not supported. An error occurred "
                    f"while trying to hash an object of type {type(value)}, {value!r}. "
                    f"The static argument {where!r} of {self._name} must be hashable "
                    "(e.g. a tuple instead of a list).") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        return dyn_args, dyn_kwargs, static, nums

    def _specialize(self, args, kwargs):
        dyn_args, dyn_kwargs, static, nums = self._split_static(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = _flat_avals(self._name, leaves, in_tree)
        # the bound axis names and sizes too (as JAX's trace context): a body calling
        # axis_size or all_gather traces differently under another vmap/pmap size (or
        # inside shard_map(check_vma=True), where psum binds psum_invariant)
        key = (in_tree, avals, static, len(args), config.jax_enable_x64,
               (config.jax_default_matmul_precision, config.jax_numpy_dtype_promotion,
                config.jax_numpy_rank_promotion, user_key(), current_compute_type(),
                context_key()),
               tuple(batching._axis_env.frames)
               + ((("check_vma", True),) if _context.vma is not None else ()))
        jaxprs = self._cache.jaxprs
        hit = jaxprs.get(key)
        if hit is None:
            if config.jax_explain_cache_misses:
                explain.explain_cache_miss(self, key, args, nums)
            consumed = []
            hit = self._trace(in_tree, avals, args, kwargs, nums, consumed)
            if config.jax_debug_key_reuse:
                self._cache.consumed[key] = tuple(consumed)
            # A jaxpr that captured tracers of an enclosing transformation (or refs
            # created inside one) is valid only for this call: don't cache it.
            if not any(isinstance(c, Tracer) for c in hit[0].consts) and (
                    hit[2] is None or all(r._scope is None for r in hit[2][1])):
                jaxprs[key] = hit
        return (key, leaves) + hit

    def _trace(self, in_tree, avals, args, kwargs, static_nums, consumed=None):
        # ``consumed`` (with jax_debug_key_reuse): gets the argument leaves whose typed
        # keys the function consumed
        out_tree_box = []
        ref_pos = tuple(i for i, a in enumerate(avals) if isinstance(a, refs.AbstractRef))
        refinfo = []

        def flat_fun(*flat):
            with refs.RefScope(_context.trace) as scope:
                flat = list(flat)
                arg_refs = []
                for i in ref_pos:   # a ref argument: a ref from outside, seeded
                    flat[i] = refs.Ref.placeholder(scope, flat[i])
                    arg_refs.append(flat[i])
                dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat)
                it = iter(dyn_args)
                full_args = [args[i] if i in static_nums else next(it)
                             for i in range(len(args))]
                full_kwargs = {k: (dyn_kwargs[k] if k in dyn_kwargs else kwargs[k])
                               for k in kwargs}
                out = self._fun(*full_args, **full_kwargs)
                if config.jax_debug_key_reuse and consumed is not None:
                    consumed.extend(i for i, x in enumerate(flat)
                                    if errors.key_consumer(x) is not None)
                out_leaves, out_tree = tree_util.tree_flatten(out)
                refs.check_no_ref_outputs(self._fun, out_leaves)
                out_tree_box.append(out_tree)
                ext = [r for r in scope.inputs if r not in arg_refs]
                refinfo.append(ext)
                return out_leaves + [scope.values[r] for r in arg_refs + ext]

        t0 = time.perf_counter()
        in_avals = [a.inner_aval if isinstance(a, refs.AbstractRef) else a for a in avals]
        # JAX times only outermost traces (its trace state is clean there)
        timed = (monitoring.log_elapsed_time(monitoring.JAXPR_TRACE_EVENT, self._name)
                 if _context.trace is eval_trace else monitoring._off)
        with span("xform.jit.trace", name=f"jit({self._name})"), timed:
            closed = pe.trace_to_jaxpr(flat_fun, in_avals)
        compiler.stats["trace"] += 1
        explain.note_traced(self._fun)
        if config.jax_log_compiles:
            compiler.logger.warning("Finished tracing + transforming %s for pjit in "
                                    "%.6f sec", self._name, time.perf_counter() - t0)
        uses_refs = ref_pos or refinfo[0]
        return closed, out_tree_box[0], (ref_pos, tuple(refinfo[0])) if uses_refs else None

    def trace(self, *args, **kwargs):
        """Trace without compiling: returns a ``Traced`` with ``.jaxpr`` and ``.lower()``."""
        key, leaves, closed, out_tree, refinfo = self._specialize(args, kwargs)
        if refinfo is not None:
            raise NotImplementedError(
                f"jit({self._name}).trace/lower: the function uses array references from "
                "outside it (arguments or closed over); call it instead.")
        donated = self._donated(args, kwargs, len(closed.in_avals))
        place = jit_sharding.placement(
            self._shardings, closed, leaves, lambda: self._split_static(args, kwargs)[0],
            out_tree, lambda i: explain.leaf_name(self, args, kwargs, i), self._name)
        out_shardings = self._shardings and self._shardings.flat_out(out_tree, concrete=True)
        names = explain.leaf_names(self, args, kwargs)
        pin = None if place is not None else jit_sharding.aot_pin(
            self._shardings, leaves, lambda: self._split_static(args, kwargs)[0], out_tree,
            names, self._name)
        layouts = self._layouts(args, kwargs, leaves, closed, out_tree, place)
        if layouts is not None and place is not None:
            self._laid_out(args, kwargs, leaves, closed, out_tree, place, donated, str)
        return Traced(closed, out_tree, self._name, donated, place, out_shardings, pin,
                      layouts, in_tree=key[0], names=names)

    def lower(self, *args, **kwargs):
        """Ahead-of-time lowering for these arguments' shapes: returns ``Lowered``."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs):
        """``trace(...).out_info``: the outputs' ShapeDtypeStructs (see ``eval_shape``)."""
        return self.trace(*args, **kwargs).out_info

    def clear_cache(self):
        """Forget this function's traces and executables (every wrapper of it)."""
        self._cache.clear()


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), in_shardings=None, out_shardings=None, device=None,
        backend=None, inline=False, keep_unused=False, compiler_options=None):
    """Compile ``fun`` with XLA: traced once per argument signature, then cached.

    The cache belongs to the function object, not to the wrapper: ``jit(f)`` created
    again for the same ``f`` (with the same options) reuses its traces, and a fresh
    function that traces to the same program reuses the compiled executable (and, with
    ``jax_compilation_cache_dir`` set, so does the next process).

    Args:
      fun: function of arrays (pytrees of arrays) returning arrays.
      static_argnums, static_argnames: arguments treated as compile-time constants
        (they must be hashable; each new value, or a value of a new type, re-traces).
      donate_argnums, donate_argnames: arguments whose buffers the computation may
        reuse for outputs of the same shape and dtype; a donated Array is deleted by the
        call and using it afterwards raises an error naming it.
      in_shardings, out_shardings: pytree prefixes of the positional arguments /
        outputs holding NamedShardings (PartitionSpecs under a mesh context) or None:
        the call compiles as ONE program XLA partitions over the mesh (as do calls
        with arguments already sharded); outputs left unspecified get the sharding
        XLA chose.
      device: deprecated, as in JAX: the arguments are put on it (committed, wherever
        they were) and the call runs there.
      inline: as JAX's: when traced into an enclosing jit (or linearize's jaxpr), the
        function's equations join the enclosing program instead of a nested call.
      backend, keep_unused, compiler_options: accepted for JAX compatibility.

    Returns:
      A wrapped function with the same signature, plus ``.lower(*args)`` and
      ``.trace(*args)``.

    >>> import xform, xform.numpy as jnp
    >>> xform.jit(lambda x: x * 2.0)(jnp.arange(3.0))
    Array([0., 2., 4.], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums,
                                 donate_argnames=donate_argnames,
                                 in_shardings=in_shardings, out_shardings=out_shardings,
                                 device=device, backend=backend, inline=inline)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    validate_argnums(fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
    if device is not None:
        in_shardings = out_shardings = jit_sharding.for_device(
            device, backend, in_shardings, out_shardings)
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                      in_shardings=in_shardings, out_shardings=out_shardings, inline=inline)




def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """A function returning the ClosedJaxpr of ``fun`` for the given arguments;
    ``axis_env`` (``[(name, size)]``) binds axis names for collectives in ``fun``.

    >>> import xform, xform.numpy as jnp
    >>> print(xform.make_jaxpr(jnp.sin)(1.0))
    { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """
    wrapped = JitWrapped(fun, static_argnums, _shared=False)  # JAX re-traces every time

    @api_boundary
    @functools.wraps(fun)
    def make(*args, **kwargs):
        with batching.extend_axis_env(list(axis_env or ())):
            _, _, closed, out_tree, _ = wrapped._specialize(args, kwargs)
        if return_shape:
            return closed, out_info(closed, out_tree)
        return closed
    return make


def eval_shape(fun, *args, **kwargs):
    """Shapes and dtypes of ``fun``'s outputs, without running it (arguments may be
    ShapeDtypeStructs); their shardings as JAX's (``stages.out_info``)."""
    if isinstance(fun, JitWrapped):
        return fun.eval_shape(*args, **kwargs)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = _flat_avals(getattr(fun, "__name__", "fun"), leaves, in_tree)
    flat_fun, store = flatten_fun(fun, in_tree, kwargs=True)
    closed = pe.trace_to_jaxpr(flat_fun, avals)
    return out_info(closed, store.out_tree)
