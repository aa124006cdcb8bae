"""Compute types in lowered programs, as JAX lowers ``compute_on``: the ops of an
equation marked with a compute type carry ``mhlo.frontend_attributes`` telling XLA where
to run them (``_xla_compute_type``: ``host``, ``dense``, ``sparseoffload``; or a GPU
stream, ``_xla_stream_annotation``). A backend that has no such place (CPU) ignores them."""
from xform import backend

ir = backend.ir

_XLA_COMPUTE_TYPES = {"device_host": "host", "device": "dense",
                      "tpu_sparsecore": "sparseoffload"}


def frontend_attrs(compute_type):
    """The frontend attributes (name -> ir.Attribute) marking ops of ``compute_type``."""
    if compute_type.startswith("gpu_stream:"):
        return {"_xla_stream_annotation": ir.StringAttr.get(compute_type.split(":", 1)[1]),
                "inlineable": ir.StringAttr.get("false")}
    return {"_xla_compute_type": ir.StringAttr.get(_XLA_COMPUTE_TYPES[compute_type])}


def _merge_frontend_attrs(op, attrs):
    """Add ``attrs`` to ``op``'s ``mhlo.frontend_attributes``; one the op already has
    wins (as JAX's ``_update_frontend_attributes``: an inner call's own marks stay)."""
    merged = dict(attrs)
    if "mhlo.frontend_attributes" in op.attributes:
        merged |= {a.name: a.attr
                   for a in ir.DictAttr(op.attributes["mhlo.frontend_attributes"])}
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(merged)


def ops_count():
    """How many ops the block being lowered into holds (before an equation's rule)."""
    return len(ir.InsertionPoint.current.block.operations)


def tag(values, compute_type, first_op):
    """Mark one equation's ops with ``compute_type``: those its rule added to the block
    (from index ``first_op``; constants excepted) and those producing its outputs
    ``values`` (block arguments, values passed through, are left alone). JAX marks the
    outputs' ops and the broadcasts its rules make; marking every op the rule emitted
    keeps a composite lowering in one place."""
    attrs = frontend_attrs(compute_type)
    ops = ir.InsertionPoint.current.block.operations
    for i in range(first_op, len(ops)):
        op = ops[i].operation
        if op.name != "stablehlo.constant":
            _merge_frontend_attrs(op, attrs)
    for v in values:
        while not isinstance(v, ir.BlockArgument):
            op = v.owner
            op = op.operation if isinstance(op, ir.OpView) else op
            if op.name != "sdy.sharding_constraint":
                _merge_frontend_attrs(op, attrs)
                break
            v = op.operands[0]
