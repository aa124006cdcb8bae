"""``xform.debug.visualize_array_sharding`` / ``visualize_sharding`` /
``inspect_array_sharding``: which device holds which block of an array.

The table is JAX's: drawn with ``rich`` (required, as in JAX), one cell per distinct
block sized by its share of the array, labelled with the platform and the ids of the
devices holding it; coloured only when ``matplotlib`` supplies JAX's colour map.

Inside jit the sharding is XLA's choice, known only while compiling: as JAX,
``inspect_sharding`` lowers to an ``InspectSharding`` custom call that XLA's
partitioner calls back with the sharding it chose (named as a NamedSharding over the
program's mesh), so the callback runs when the program compiles (not on cached calls).
"""
import importlib.util

from xform import backend
from xform.core import tree_util
from xform.core.mesh import Mesh
from xform.core.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding
from xform.core.trace import Primitive
from xform.interpreters import ad, batching, mlir, pxla, spmd
from xform.interpreters import partial_eval as pe


def _block_index(size, s):
    """Which block along a dimension slice ``s`` is (0 for a whole dimension)."""
    if isinstance(s, int):
        return s
    start = s.start or 0
    stop = size if s.stop is None else s.stop
    return start // max(stop - start, 1)


def visualize_sharding(shape, sharding, *, use_color=True, scale=1.0, min_width=9,
                       max_width=80, color_map=None):
    """Print how ``sharding`` splits an array of ``shape`` (1-d or 2-d) over devices.

    Raises:
      ValueError: if ``rich`` is not installed or ``shape`` is not 1-d or 2-d.
    """
    if not importlib.util.find_spec("rich"):
        raise ValueError("`visualize_sharding` requires `rich` to be installed.")
    import rich.align
    import rich.box
    import rich.console
    import rich.padding
    import rich.style
    import rich.table
    shape = tuple(shape)
    if not 1 <= len(shape) <= 2:
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 "
                         "dimensions.")
    console = rich.console.Console(width=max_width)
    use_color = use_color and console.color_system is not None
    if use_color and not color_map:
        try:
            import matplotlib as mpl
            color_map = mpl.colormaps["tab20b"]
        except ModuleNotFoundError:
            use_color = False
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    kind = next(iter(sharding.device_set)).platform.upper()
    cells, heights, widths = {}, {}, {}
    for dev, index in sharding.devices_indices_map(shape).items():
        sizes = [len(range(*s.indices(n))) if isinstance(s, slice) else 1
                 for s, n in zip(index, shape)]
        pos = tuple(_block_index(n, s) for n, s in zip(shape, index))
        if len(shape) == 1:
            pos = (0,) + pos
            heights[pos] = None
        else:
            heights[pos] = sizes[0] / shape[0]
        widths[pos] = sizes[-1] / shape[-1]
        cells.setdefault(pos, set()).add(dev.id)
    rows = max(p[0] for p in cells) + 1
    cols = max(p[1] for p in cells) + 1
    colors = iter(_colors(color_map, rows * cols)) if use_color else None
    table = rich.table.Table(show_header=False, show_lines=not use_color, padding=0,
                             highlight=not use_color, pad_edge=False,
                             box=None if use_color else rich.box.SQUARE)
    for i in range(rows):
        row = []
        for j in range(cols):
            text = f"{kind} " + ",".join(str(d) for d in sorted(cells[i, j]))
            width = min(max(int(widths[i, j] * base_width * 2.5), min_width), max_width)
            height = 1 if heights[i, j] is None else int(heights[i, j] * base_height)
            left, extra = divmod(width - len(text) - 2, 2)
            top, extra_v = divmod(height - 2, 2)
            pad = [top, left + extra, top + extra_v, left]
            style = rich.style.Style()
            if colors is not None:
                color = next(colors)
                style = rich.style.Style(bgcolor=color, color=_text_color(color))
                pad = [p + 1 for p in pad]
            row.append(rich.padding.Padding(
                rich.align.Align(text, "center", vertical="middle"),
                tuple(max(p, 0) for p in pad), style=style))
        table.add_row(*row)
    console.print(table, end="\n\n")


def _colors(color_map, n):
    out = []
    for k in range(n):
        r, g, b = (int(c * 255) for c in color_map(k / max(n, 1))[:3])
        out.append(f"#{r:02X}{g:02X}{b:02X}")
    return out


def _text_color(color):
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#000000" if r * 0.299 + g * 0.587 + b * 0.114 > 186 else "#ffffff"


def visualize_array_sharding(arr, **kwargs):
    """Print the device table of ``arr``'s sharding (see :func:`visualize_sharding`);
    inside jit, when the program compiles (see :func:`inspect_array_sharding`)."""
    inspect_array_sharding(
        arr, callback=lambda sharding: visualize_sharding(arr.shape, sharding, **kwargs))


def inspect_array_sharding(value, *, callback):
    """Call ``callback(sharding)`` for each array of pytree ``value``: at once for
    concrete arrays; inside jit with the sharding XLA chose, when the program compiles.

    NB: in a one-device program the callback gets a ``SingleDeviceSharding`` where JAX
    gives its ``GSPMDSharding({replicated})``."""
    for leaf in tree_util.tree_leaves(value):
        inspect_sharding_p.bind(leaf, callback=_Callback(callback))


class _Callback:
    """The user's callback, holding the partitioner's callbacks lowered for it alive
    (jaxlib keeps only a pointer) as long as the jaxpr that holds it."""
    __slots__ = ("fn", "keepalive")

    def __init__(self, fn):
        self.fn, self.keepalive = fn, []

    def __call__(self, sharding):
        self.fn(sharding)

    def __repr__(self):
        return repr(self.fn)


def _impl(x, *, callback):
    callback(x.sharding)
    return []


def _batch(vals, dims, *, callback):
    inspect_sharding_p.bind(*vals, callback=callback)
    return [], []


def _lowering(ctx, x, *, callback):
    mesh, shape = ctx.module_ctx.mesh, ctx.avals_in[0].shape
    if mesh is None:  # a one-device program: nothing for XLA to choose
        callback(SingleDeviceSharding(backend.default_device()))
        return []

    auto, names = pxla.auto_axes(), mesh.axis_names
    # (in a partially manual body XLA's sharding is over the automatic axes' sub-mesh)
    over = mesh if not auto else Mesh(mesh.devices[tuple(
        slice(None) if n in auto else 0 for n in names)], tuple(n for n in names if n in auto))

    def chosen(tiling):
        spec = PartitionSpec() if tiling == "manual" else spmd.named_from_tiling(
            tiling, shape, over, ()).spec
        callback(NamedSharding(mesh, spec))
    config, keepalive = backend.inspect_sharding_target(chosen)
    callback.keepalive.append(keepalive)
    mlir.hlo.CustomCallOp([x.type], [x], call_target_name="InspectSharding",
                          has_side_effect=True, api_version=mlir.ir.IntegerAttr.get(
                              mlir.ir.IntegerType.get_signless(32), 1),
                          backend_config=mlir.ir.StringAttr.get(config))
    return []


inspect_sharding_p = Primitive("inspect_sharding")
inspect_sharding_p.multiple_results = True
inspect_sharding_p.def_impl(_impl, lazy_kind="host_callback")
inspect_sharding_p.def_abstract_eval(lambda aval, **_: [])
pe.effectful_primitives.add(inspect_sharding_p)  # no outputs, never dead code
ad.primitive_jvps[inspect_sharding_p] = lambda primals, tangents, **params: (
    inspect_sharding_p.bind(*primals, **params), [])
batching.primitive_batchers[inspect_sharding_p] = _batch
mlir.register_lowering(inspect_sharding_p, _lowering)
