"""``nn.tabulate`` / ``Module.tabulate``: a plain-text table of every module call in
``init`` (path, class, input and output shapes, variables per collection with counts
and bytes, totals), like Flax's, plus a FLOPs column: XLA's cost analysis of each
call compiled on its own (``jit(...).lower(...).compile().cost_analysis()``)."""
import numpy as np

from xform.core.trace import Tracer
from xform.core.tree_util import tree_leaves
from xform.nn import _module
from xform.nn._scope import DenyList


class _Call:
    __slots__ = ("index", "path", "module", "cls", "method", "args", "kwargs", "out")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class _CallRecorder:
    """Pushed on the module context while tabulating: every wrapped method call lands
    here (index taken on entry, so parents come before children)."""

    def __init__(self):
        self.calls, self._next = [], 0

    def next_index(self):
        self._next += 1
        return self._next - 1

    def record(self, index, module, method, args, kwargs, out):
        self.calls.append(_Call(index=index, path=module.path, module=module.clone(),
                                cls=type(module).__name__, method=method, args=args,
                                kwargs=kwargs, out=out))


def _shape_str(tree):
    def one(x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return f"{np.dtype(x.dtype).name}[{','.join(map(str, x.shape))}]"
        return repr(x)
    if isinstance(tree, (tuple, list)):
        parts = [_shape_str(x) for x in tree]
        return parts[0] if len(parts) == 1 and isinstance(tree, tuple) else \
            "(" + ", ".join(parts) + ")"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k}: {_shape_str(v)}" for k, v in tree.items()) + "}"
    return one(tree)


def _own_vars(variables, path):
    """``{collection: {name: array}}`` of the module at ``path`` (not its children)."""
    out = {}
    for col, tree in variables.items():
        node = tree
        for p in path:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        leaves = {k: node[k] for k in sorted(node) if not isinstance(node[k], dict)} \
            if isinstance(node, dict) else {}
        if leaves:
            out[col] = leaves
    return out


def _size(tree):
    leaves = tree_leaves(tree)
    return (sum(int(np.prod(np.shape(x))) for x in leaves),
            sum(int(np.prod(np.shape(x))) * np.dtype(x.dtype).itemsize for x in leaves))


def _fmt_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1000


def _subtree(variables, path):
    out = {}
    for col, tree in variables.items():
        node = tree
        for p in path:
            node = node.get(p) if isinstance(node, dict) else None
        if node is not None:
            out[col] = node
    return out


def _flops(call, variables, rngs):
    """FLOPs of one call compiled alone, or None where it ran inside a transform."""
    if any(isinstance(x, Tracer) for x in tree_leaves((call.args, call.kwargs))):
        return None
    from xform.transforms.jit import jit
    sub = _subtree(variables, call.path)

    def f(v, args, kwargs):
        return call.module.apply(v, *args, rngs=rngs, method=call.method, mutable=True,
                                 **kwargs)
    try:
        cost = jit(f).lower(sub, call.args, call.kwargs).compile().cost_analysis()
    except Exception:   # noqa: BLE001  (a method that cannot run alone: no figure)
        return None
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return int(cost.get("flops", 0)) if cost else None


def _render(title, header, rows, footer):
    cells = [header] + rows + [footer]
    widths = [max(len(line) for r in cells for line in r[i].split("\n"))
              for i in range(len(header))]

    def line(left, mid, right, fill):
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def row(r):
        parts = [c.split("\n") for c in r]
        height = max(len(p) for p in parts)
        return "\n".join(
            "│" + "│".join(f" {(p[k] if k < len(p) else ''):<{w}} "
                         for p, w in zip(parts, widths)) + "│"
            for k in range(height))
    out = [title.center(len(line("┌", "┬", "┐", "─"))), line("┌", "┬", "┐", "─"),
           row(header), line("├", "┼", "┤", "═")]
    for r in rows:
        out += [row(r), line("├", "┼", "┤", "─")]
    out += [row(footer), line("└", "┴", "┘", "─")]
    return "\n".join(out)


def tabulate(module, rngs, depth=None, show_repeated=False,
             mutable=DenyList("intermediates"), console_kwargs=None, table_kwargs=None,
             column_kwargs=None, compute_flops=True, compute_vjp_flops=False, **kwargs):
    """Returns ``fn(*args, **kw) -> str``: the summary table of ``module.init(rngs,
    *args, **kw)``.

    Args:
      module: the module to summarize.
      rngs: the key (or dict of streams) passed to ``init``.
      depth: rows only for paths at most this deep (None: all).
      show_repeated: also list repeated calls of the same module.
      mutable: collections created by ``init`` (as ``init``).
      compute_flops: add XLA's FLOPs of each call's forward pass (beyond Flax's
        default; Flax's ``compute_flops=True``).
      **kwargs: forwarded to ``init`` (e.g. ``method=``).

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> table = nn.tabulate(nn.Dense(3), xform.random.PRNGKey(0))(jnp.ones((2, 4)))
    >>> 'Total Parameters: 15 (60 B)' in table
    True
    """
    del console_kwargs, table_kwargs, column_kwargs, compute_vjp_flops

    def run(*args, **call_kwargs):
        recorder = _CallRecorder()
        _module._context.call_info_stack.append(recorder)
        try:
            variables = module.init(rngs, *args, mutable=mutable, **kwargs,
                                    **call_kwargs)
        finally:
            _module._context.call_info_stack.pop()
        calls = sorted(recorder.calls, key=lambda c: c.index)
        seen, rows_calls = set(), []
        for c in calls:
            if depth is not None and len(c.path) > depth:
                continue
            if not show_repeated and c.path in seen:
                continue
            seen.add(c.path)
            rows_calls.append(c)
        cols = sorted({col for c in rows_calls for col in _own_vars(variables, c.path)})
        header = ["path", "module", "inputs", "outputs"] + \
            (["flops"] if compute_flops else []) + cols
        stream = rngs if isinstance(rngs, dict) else {"params": rngs}
        rows = []
        for c in rows_calls:
            name = c.cls if c.method == "__call__" else f"{c.cls}.{c.method}"
            ins = c.args[0] if len(c.args) == 1 and not c.kwargs else (c.args, c.kwargs) \
                if c.kwargs else c.args
            r = ["/".join(c.path), name, _shape_str(ins), _shape_str(c.out)]
            if compute_flops:
                f = _flops(c, variables, stream)
                r.append("-" if f is None else str(f))
            own = _own_vars(variables, c.path)
            for col in cols:
                vs = own.get(col)
                if not vs:
                    r.append("")
                    continue
                n, b = _size(vs)
                r.append("\n".join(f"{k}: {_shape_str(v)}" for k, v in vs.items())
                         + f"\n\n{n} ({_fmt_bytes(b)})")
            rows.append(r)
        footer = [""] * (4 + bool(compute_flops)) + [
            "{} ({})".format(*(lambda nb: (nb[0], _fmt_bytes(nb[1])))(
                _size(variables.get(col, {})))) for col in cols]
        footer[3 + bool(compute_flops)] = "Total"
        total_n, total_b = _size({k: v for k, v in variables.items()})
        title = f"{type(module).__name__} Summary"
        return (_render(title, header, rows, footer)
                + f"\n\nTotal Parameters: {total_n} ({_fmt_bytes(total_b)})\n")
    return run
