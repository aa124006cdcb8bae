"""``nn.tabulate`` / ``Module.tabulate``: Flax's summary table of every module call in
``init`` (path, module, input/output shapes, optional forward/VJP FLOPs, variables per
collection with counts and bytes, totals).

The table is built as Flax builds it (``init`` under ``eval_shape``: no compute) and,
when ``rich`` is installed, rendered with it exactly as Flax does (same text, same
``console_kwargs``/``table_kwargs``/``column_kwargs``); without ``rich`` a plain
box-drawing renderer prints the same cells with the markup removed. FLOPs are XLA's
cost analysis of each call lowered alone, as Flax reports them.
"""
import re

import numpy as np

from xform.core.tree_util import tree_leaves
from xform.nn import _module
from xform.nn._scope import DenyList, LazyRng
from xform.transforms.jit import ShapeDtypeStruct, eval_shape, jit
from xform.transforms.ad import vjp

try:   # optional: Flax's renderer
    import rich.console
    import rich.table
    import rich.text
except ImportError:   # pragma: no cover - exercised where rich is absent
    rich = None


class _Call:
    __slots__ = ("index", "path", "module", "method", "args", "kwargs", "out", "rngs",
                 "mutable")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class _CallRecorder:
    """Pushed on the module context while tabulating: every wrapped method call lands
    here (index taken on entry, so parents come before children), with its inputs and
    outputs as shapes."""

    def __init__(self):
        self.calls, self._next = [], 0

    def next_index(self):
        self._next += 1
        return self._next - 1

    def record(self, index, module, method, args, kwargs, out):
        scope = module.scope
        self.calls.append(_Call(
            index=index, path=module.path, module=module.clone(), method=method,
            args=_represent(args), kwargs=_represent(kwargs), out=_represent(out),
            rngs={k: r.rng if isinstance(r, LazyRng) else r for k, r in scope.rngs.items()},
            mutable=scope.mutable))


def _represent(tree):
    """Arrays (and tracers) as ``ShapeDtypeStruct``; other leaves kept."""
    if isinstance(tree, dict):
        return {k: _represent(tree[k]) for k in sorted(tree)}
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return tuple(_represent(x) for x in tree)
    if hasattr(tree, "shape") and hasattr(tree, "dtype") and not isinstance(
            tree, (int, float, bool)):
        return ShapeDtypeStruct(tuple(tree.shape), np.dtype(tree.dtype))
    return tree


def _render_leaf(x):
    if isinstance(x, ShapeDtypeStruct):
        return f"[dim]{np.dtype(x.dtype).name}[/dim][{','.join(map(str, x.shape))}]"
    return repr(x)


def _yaml(value, top=True):
    """Flax's cell text: the structure as block YAML (``yaml.safe_dump`` without
    quotes) of rendered leaves."""
    if isinstance(value, dict):
        if not value:
            return "" if top else "{}"
        lines = []
        for k, v in value.items():
            if isinstance(v, (dict, list, tuple)) and v:
                sub = _yaml(v, False).split("\n")
                pad = "  " if isinstance(v, dict) else ""
                lines += [f"{k}:"] + [pad + s for s in sub]
            else:
                lines.append(f"{k}: {_yaml(v, False)}")
        return "\n".join(lines)
    if isinstance(value, (list, tuple)):
        if not value:
            return "" if top else "[]"
        lines = []
        for v in value:
            sub = _yaml(v, False).split("\n")
            lines += ["- " + sub[0]] + ["  " + s for s in sub[1:]]
        return "\n".join(lines)
    return _render_leaf(value)


def _process_inputs(args, kwargs):
    if args and kwargs:
        return (*args, kwargs)
    if args:
        return args[0] if len(args) == 1 else args
    return kwargs if kwargs else ()


def _path_variables(path, variables):
    out = {}
    for col, tree in variables.items():
        for name in path:
            if not isinstance(tree, dict) or name not in tree:
                tree = None
                break
            tree = tree[name]
        if tree is not None:
            out[col] = tree
    return out


def _module_variables(path, variables, all_paths):
    """The variables at ``path`` minus those of submodules that were called."""
    own = {col: dict(v) if isinstance(v, dict) else v
           for col, v in _path_variables(path, variables).items()}
    for col in own:
        for key in list(own[col]):
            if path + (key,) in all_paths:
                del own[col][key]
    return own


def _size_and_bytes(tree):
    leaves = [x for x in tree_leaves(tree) if hasattr(x, "shape")]
    size = sum(int(np.prod(x.shape)) for x in leaves)
    return size, sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in leaves)


def _bytes_repr(n):
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if n > scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,} B"


def _size_repr(size, nbytes):
    return f"{size:,} [dim]({_bytes_repr(nbytes)})[/dim]" if size else ""


def _flops(fn, *args):
    cost = jit(fn).lower(*args).cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return int(cost["flops"]) if cost and "flops" in cost else 0


def _call_flops(c, compute_flops, compute_vjp_flops):
    """Forward and VJP FLOPs of one call run alone (-1 when not asked for)."""
    if not compute_flops and not compute_vjp_flops:
        return -1, -1
    is_dyn = lambda x: isinstance(x, ShapeDtypeStruct)
    leaves = tree_leaves((c.args, c.kwargs), is_leaf=is_dyn)
    dyn = [x for x in leaves if is_dyn(x)]

    def inputs(dynamic):
        it = iter(dynamic)
        swap = lambda t: (
            {k: swap(v) for k, v in t.items()} if isinstance(t, dict) else
            tuple(swap(v) for v in t) if isinstance(t, tuple) else
            next(it) if is_dyn(t) else t)
        return swap((c.args, c.kwargs))

    def init(rngs, dynamic):
        args, kwargs = inputs(dynamic)
        return c.module.init(rngs, *args, method=c.method, mutable=c.mutable, **kwargs)
    variables = eval_shape(init, c.rngs, dyn)

    def apply(variables, rngs, dynamic):
        args, kwargs = inputs(dynamic)
        return c.module.apply(variables, *args, rngs=rngs, method=c.method,
                              mutable=c.mutable, **kwargs)
    flops = _flops(apply, variables, c.rngs, dyn) if compute_flops else -1
    vjp_flops = -1
    if compute_vjp_flops:
        def apply_vjp(variables, rngs, dynamic):
            out, vjp_fn = vjp(lambda v, d: apply(v, rngs, d), variables, dynamic)
            return vjp_fn(out)
        vjp_flops = _flops(apply_vjp, variables, c.rngs, dyn)
    return flops, vjp_flops


def _table(module, rngs, args, kwargs, depth, show_repeated, compute_flops,
           compute_vjp_flops):
    """``(collections, rows)``: Flax's ``Table`` of one ``init``."""
    recorder = _CallRecorder()
    _module._context.call_info_stack.append(recorder)
    try:
        variables = eval_shape(lambda r: module.init(r, *args, **kwargs), rngs)
    finally:
        _module._context.call_info_stack.pop()
    variables = _represent(dict(variables))
    calls = sorted(recorder.calls, key=lambda c: c.index)
    all_paths, visited, rows = {c.path for c in calls}, set(), []
    for c in calls:
        if c.path in visited or not hasattr(c.module, c.method):
            if not show_repeated:
                continue
            module_vars, counted = {}, {}
        elif depth is not None:
            if len(c.path) > depth:
                continue
            module_vars = _module_variables(c.path, variables, all_paths)
            counted = (_path_variables(c.path, variables) if len(c.path) == depth
                       else module_vars)
        else:
            module_vars = counted = _module_variables(c.path, variables, all_paths)
        visited.add(c.path)
        rows.append((c, _process_inputs(c.args, c.kwargs), module_vars, counted,
                     *_call_flops(c, compute_flops, compute_vjp_flops)))
    # NB: Flax orders the collections as a set does (varies between runs); here
    # 'params' first, then the others sorted.
    return tuple(sorted(variables, key=lambda c: (c != "params", c))), rows


def _strip(markup):
    return re.sub(r"\[/?(dim|bold)\]", "", markup)


def _render_plain(title, columns, rows, footer, caption):
    cells = [columns] + [[_strip(c) for c in r] for r in rows] + [
        [_strip(c) for c in footer]]
    widths = [max(len(line) for r in cells for line in r[i].split("\n"))
              for i in range(len(columns))]
    rule = lambda l, m, r, f="─": l + m.join(f * (w + 2) for w in widths) + r

    def row(r, right=()):
        parts = [c.split("\n") for c in r]
        return "\n".join("│" + "│".join(
            f" {(p[k] if k < len(p) else ''):{'>' if i in right else '<'}{w}} "
            for i, (p, w) in enumerate(zip(parts, widths))) + "│"
            for k in range(max(len(p) for p in parts)))
    total = len(footer) - len([c for c in footer if c and c != "Total"]) - 1
    out = [title.center(len(rule("┏", "┳", "┓"))), rule("┏", "┳", "┓", "━"),
           row(columns).replace("│", "┃"), rule("┡", "╇", "┩", "━")]
    for r in cells[1:-1]:
        out += [row(r), rule("├", "┼", "┤")]
    width = len(rule("┏", "┳", "┓"))
    out += [row(cells[-1], right={total}), rule("└", "┴", "┘")]
    out += [line.center(width).rstrip() for line in _strip(caption).split("\n")]
    return "\n" + "\n".join(out) + "\n\n"


def _render(module, collections, rows, console_kwargs, table_kwargs, column_kwargs,
            non_param_cols):
    title = f"{type(module).__name__} Summary"
    body = []
    totals = {col: (0, 0) for col in collections}
    for c, inputs, module_vars, counted, flops, vjp_flops in rows:
        sizes = {col: _size_and_bytes(counted[col]) if col in counted else (0, 0)
                 for col in collections}
        col_reprs = []
        for col in collections:
            text = _yaml(module_vars[col]) if col in module_vars else ""
            text = text + "\n\n" if text else ""
            col_reprs.append(text + f"[bold]{_size_repr(*sizes[col])}[/bold]")
            totals[col] = tuple(a + b for a, b in zip(totals[col], sizes[col]))
        method = f" [dim]({c.method})[/dim]" if c.method not in ("__call__",
                                                                "<lambda>") else ""
        values = {"inputs": inputs, "outputs": c.out, "flops": flops,
                  "vjp_flops": vjp_flops}
        body.append(["/".join(c.path), type(c.module).__name__ + method]
                    + [_yaml(values[k]) if k in ("inputs", "outputs") else str(values[k])
                       for k in non_param_cols[2:]] + col_reprs)
    caption = "\nTotal Parameters: " + _size_repr(*(sum(v[i] for v in totals.values())
                                                     for i in (0, 1)))
    footer = [""] * (len(non_param_cols) - 1) + ["Total"] + [
        _size_repr(*totals[col]) for col in collections]
    columns = list(non_param_cols) + list(collections)
    if rich is None:
        return _render_plain(title, columns, body, footer, caption)
    table = rich.table.Table(show_header=True, show_lines=True, show_footer=True,
                             title=title, **table_kwargs)
    for col in columns:
        table.add_column(col, **column_kwargs)
    for r in body:
        table.add_row(*r)
    table.columns[len(non_param_cols) - 1].footer = rich.text.Text.from_markup(
        "Total", justify="right")
    for i, col in enumerate(collections):
        table.columns[len(non_param_cols) + i].footer = footer[len(non_param_cols) + i]
    table.caption_style = "bold"
    table.caption = caption
    kwargs = {"force_terminal": True, "force_jupyter": False, **(console_kwargs or {})}
    import io
    f = io.StringIO()
    rich.console.Console(file=f, **kwargs).print(table)
    return "\n" + f.getvalue() + "\n"


def tabulate(module, rngs, depth=None, show_repeated=False,
             mutable=DenyList("intermediates"), console_kwargs=None, table_kwargs={},
             column_kwargs={}, compute_flops=False, compute_vjp_flops=False,
             **kwargs):  # noqa: B006
    """Returns ``fn(*args, **kw) -> str``: Flax's summary table of
    ``module.init(rngs, *args, **kw)`` (run under ``eval_shape``: no compute).

    Args:
      module: the module to summarize.
      rngs: the key (or dict of streams) passed to ``init``.
      depth: rows only for paths at most this deep; the deepest rows count their
        submodules' variables (None: all rows).
      show_repeated: also list repeated calls of the same module.
      mutable: collections created by ``init`` (as ``init``).
      console_kwargs: for ``rich.console.Console`` (e.g. ``{'width': 120}``).
      table_kwargs, column_kwargs: for ``rich.table.Table`` and its columns.
      compute_flops, compute_vjp_flops: add XLA's FLOPs of each call's forward
        pass / VJP.
      **kwargs: forwarded to ``init`` (e.g. ``method=``).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> table = nn.tabulate(nn.Dense(3), xform.random.PRNGKey(0),
    ...                     console_kwargs={'force_terminal': False})(jnp.ones((2, 4)))
    >>> 'Total Parameters: 15 (60 B)' in table
    True
    """
    if mutable != DenyList("intermediates"):
        kwargs["mutable"] = mutable

    def run(*args, **call_kwargs):
        collections, rows = _table(module, rngs, args, {**call_kwargs, **kwargs}, depth,
                                   show_repeated, compute_flops, compute_vjp_flops)
        cols = ["path", "module", "inputs", "outputs"] + (
            ["flops"] if compute_flops else []) + (
            ["vjp_flops"] if compute_vjp_flops else [])
        return _render(module, collections, rows, console_kwargs, table_kwargs,
                       column_kwargs, cols)
    return run
