"""Memory kinds in lowered programs, as JAX lowers them: ``mhlo.memory_kind`` on
``@main``'s arguments and results outside device memory (host-typed values, outputs
a jit's out_shardings pin) and ``annotate_device_placement`` custom calls, which
make XLA place those buffers there."""
from xform import backend
from xform.core.avals import MemorySpace, memory_space_of

ir, hlo = backend.ir, backend.hlo


def set_attrs(fn, key, updates):
    """Merge ``updates`` (per argument/result: a dict of attributes, or None) into
    ``fn``'s ``arg_attrs``/``res_attrs`` (``key``)."""
    old = ([{a.name: a.attr for a in ir.DictAttr(d)} for d in fn.attributes[key]]
           if key in fn.attributes else [{} for _ in updates])
    for d, u in zip(old, updates, strict=True):
        d.update(u or {})
    fn.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in old])


def annotate_placement(x, kind):
    """JAX's ``annotate_device_placement`` custom call: XLA puts ``x`` in memory ``kind``
    (what a jit's out_shardings with a memory kind lowers to)."""
    op = hlo.CustomCallOp(
        [x.type], [x], "annotate_device_placement", has_side_effect=True,
        backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1))
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"_xla_buffer_placement": ir.StringAttr.get(kind)})
    return op.result


def out_memory_kinds(out_shardings, in_avals, out_avals):
    """Per output the memory kind a jit's ``out_shardings`` entry pins it to (lowered
    as :func:`annotate_placement`), or None where it names none; None for the whole
    call when every kind is ``device`` and no value is host-typed (JAX's
    ``all_default_mem_kind``: nothing annotated)."""
    kinds = [getattr(s, "memory_kind", None) for s in out_shardings or ()]
    if all(k in (None, "device") for k in kinds) and all(
            a.memory_space is MemorySpace.Device for a in (*in_avals, *out_avals)):
        return None
    return kinds


def with_memory_kinds(avals, kinds):
    """``avals`` typed by the memory ``kinds`` outputs are pinned to (None: as they are)."""
    return [a if k is None else a.update(memory_space=memory_space_of(k))
            for a, k in zip(avals, kinds or [None] * len(avals), strict=True)]


def annotate_memory_kinds(fn, n_lead, in_avals, out_avals, out_kinds):
    """``mhlo.memory_kind`` on ``@main``'s arguments and results outside device memory,
    as JAX's: host-typed values (``pinned_host``) and outputs ``out_kinds`` places
    (``n_lead``: leading arguments, never annotated). XLA then takes and leaves those
    buffers in that memory."""
    def kinds(avals, given):
        return [k if k is not None else "pinned_host"
                if getattr(a, "memory_space", None) is MemorySpace.Host else None
                for a, k in zip(avals, given, strict=True)]
    for key, ks in (("arg_attrs", [None] * n_lead + kinds(in_avals, [None] * len(in_avals))),
                    ("res_attrs", kinds(out_avals, out_kinds))):
        if any(ks):
            set_attrs(fn, key, [k and {"mhlo.memory_kind": ir.StringAttr.get(k)} for k in ks])


def annotate_layout_modes(fn, n_lead, in_modes, out_modes):
    """``mhlo.layout_mode`` on ``@main``'s arguments and results a jit's formats give a
    layout (``"auto"``, or XLA's minor-to-major ``"{0,1}"``; None: the default), which
    PJRT's compile reads, as JAX lowers them (``n_lead`` leading arguments: none)."""
    for key, modes in (("arg_attrs", [None] * n_lead + list(in_modes)),
                       ("res_attrs", list(out_modes))):
        if any(modes):
            set_attrs(fn, key, [m and {"mhlo.layout_mode": ir.StringAttr.get(m)}
                                for m in modes])
