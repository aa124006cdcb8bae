"""Runs the code cells of Flax/Optax doc pages on xform (imports rewritten) or on the real
libraries (the baseline).

Usage: python scripts/doc_cells.py DIR [--real] [--json OUT] [--timeout 60] [--page-timeout 900]
       python scripts/doc_cells.py --compare REAL.json XFORM.json

DIR holds extracted .ipynb and .rst pages. Each page's code cells run in order in one namespace
(an .rst page runs one namespace per Sphinx doctest group, with its testsetup blocks first).
Shell (`!`) lines and `%` magics are dropped; cells left empty, `%%` cell magics and cells tagged
`skip-execution` are not counted. With --real nothing is rewritten (the baseline); otherwise
import statements are rewritten per docs/migration.md (jax -> xform, flax.linen -> xform.nn,
optax -> xform.optim, ...). Prints per page `run/total` and the first failing cell's error.
"""
import argparse
import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

# Longest prefix wins; a module maps to a module (docs/migration.md).
MODULE_MAP = {
    'jax': 'xform',
        'flax': 'xform.nn',
        'flax.linen': 'xform.nn',
        'flax.training': 'xform.training',
        'flax.training.checkpoints': 'xform.checkpoint',
        'flax.struct': 'xform.training.struct',
        'orbax.checkpoint': 'xform.checkpoint',
        'optax': 'xform.optim',
}
# Libraries whose absence (or need of the internet/data sets) is not xform's fault.
EXTERNAL = ('tensorflow', 'tensorflow_datasets', 'torch', 'torchvision', 'datasets', 'haiku',
            'tf_keras', 'keras', 'grain', 'sklearn', 'ml_collections', 'clu', 'transformers',
            'dp_accounting')


def map_module(name):
    parts = name.split('.')
    for i in range(len(parts), 0, -1):
        head = '.'.join(parts[:i])
        if head in MODULE_MAP:
            return '.'.join([MODULE_MAP[head]] + parts[i:])
    return name


def _rewrite_node(node):
    """Returns the rewritten statement(s) for an import node, or None when unchanged."""
    out = []
    if isinstance(node, ast.Import):
        changed = False
        for a in node.names:
            new = map_module(a.name)
            changed |= new != a.name
            if a.asname:
                out.append(f'import {new} as {a.asname}')
            elif '.' in a.name:  # `import jax.numpy` binds `jax`
                out.append(f'import {new}')
                top = a.name.split('.')[0]
                out.append(f'import {map_module(top)} as {top}')
            else:
                out.append(f'import {new} as {a.name}' if new != a.name else f'import {new}')
        return '; '.join(out) if changed else None
    if node.level or not node.module:
        return None
    new_mod = map_module(node.module)
    if new_mod == node.module and not any(
            map_module(f'{node.module}.{a.name}') != f'{node.module}.{a.name}'
            for a in node.names):
        return None
    for a in node.names:
        bound = a.asname or a.name
        if a.name == '*':
            out.append(f'from {new_mod} import *')
            continue
        full = map_module(f'{node.module}.{a.name}')
        if full == f'{new_mod}.{a.name}':
            alias = f' as {a.asname}' if a.asname else ''
            out.append(f'from {new_mod} import {a.name}{alias}')
        else:
            parent, _, last = full.rpartition('.')
            out.append(f'from {parent} import {last} as {bound}')
    return '; '.join(out)


def rewrite_imports(src):
    """Rewrites the import statements of a cell's source (only those lines change)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            new = _rewrite_node(node)
            if new is not None:
                edits.append((node.lineno, node.col_offset, node.end_lineno,
                              node.end_col_offset, new))
    for l0, c0, l1, c1, new in sorted(edits, reverse=True):
        first, last = lines[l0 - 1], lines[l1 - 1]
        lines[l0 - 1:l1] = [first[:c0] + new + last[c1:]]
    return ''.join(lines)


def clean_cell(src):
    """Drops shell/magic lines; returns None when nothing runnable is left."""
    if src.lstrip().startswith('%%'):
        return None
    keep = [l for l in src.splitlines() if not re.match(r'[!%]', l)]
    body = '\n'.join(keep)
    if not any(l.strip() and not l.strip().startswith('#') for l in keep):
        return None
    return body + '\n'


def notebook_cells(path):
    """[(group, kind, source)] of an .ipynb: one group; kind is 'cell' or 'skip'."""
    nb = json.loads(path.read_text())
    cells = []
    for c in nb['cells']:
        if c['cell_type'] != 'code':
            continue
        src = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
        tags = c.get('metadata', {}).get('tags', [])
        cells.append(('default', 'skip' if 'skip-execution' in tags else 'cell', src))
    return cells


_DIRECTIVE = re.compile(r'^(\s*)\.\. (testsetup|testcode|codediff)::\s*(.*)$')


def rst_cells(path):
    """[(group, kind, source)] of an .rst page in Sphinx doctest's groups; kind: setup/cell."""
    lines = path.read_text().splitlines()
    cells, i = [], 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        i += 1
        if not m:
            continue
        indent, kind, arg = len(m.group(1)), m.group(2), m.group(3).strip()
        opts, body = {}, []
        while i < len(lines):
            line = lines[i]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            om = re.match(r'\s*:(\w+):\s*(.*)$', line)
            if om and not body:
                opts[om.group(1)] = om.group(2)
            elif body or line.strip():
                body.append(line)
            i += 1
        strip = min((len(l) - len(l.lstrip()) for l in body if l.strip()), default=0)
        body = [l[strip:] for l in body]
        if kind == 'codediff':
            blocks, cur = [], []
            for l in body:
                if l.strip() == opts.get('code_sep', '---'):
                    blocks.append(cur)
                    cur = []
                else:
                    cur.append(l)
            blocks.append(cur)
            titles = [t.strip() for t in opts.get('title', '').split(',')]
            groups = ([g.strip() for g in opts['groups'].split(',')] if 'groups' in opts
                      else titles)
            skip = {s.strip() for s in opts.get('skip_test', '').split(',') if s.strip()}
            for g, block in zip(groups, blocks):
                if g not in skip:
                    cells.append((g, 'cell', '\n'.join(block) + '\n'))
        else:
            groups = [g.strip() for g in arg.split(',')] if arg else ['default']
            for g in groups:
                cells.append((g, 'setup' if kind == 'testsetup' else 'cell',
                              '\n'.join(body) + '\n'))
    return cells


RST_GLOBAL_SETUP = 'import jax\nimport jax.numpy as jnp\n'  # Flax's doctest_global_setup


def page_plan(path):
    """{group: [source]} in execution order (a group's setups first, as Sphinx), skip count."""
    raw = notebook_cells(path) if path.suffix == '.ipynb' else rst_cells(path)
    skipped = sum(k == 'skip' for _, k, _ in raw)
    names = []
    for g, _, _ in raw:
        if g != '*' and g not in names:
            names.append(g)
    plan = {}
    for g in names:
        mine = [(k, s) for gg, k, s in raw if gg in (g, '*') and k != 'skip']
        srcs = ([RST_GLOBAL_SETUP] if path.suffix == '.rst' else [])
        srcs += [s for k, s in mine if k == 'setup'] + [s for k, s in mine if k == 'cell']
        cleaned = [clean_cell(s) for s in srcs]
        skipped += sum(c is None for c in cleaned)
        plan[g] = [c for c in cleaned if c is not None]
    return plan, skipped


def run_page(path, real, timeout):
    """Runs in a child process: executes the page's cells, prints one JSON result per cell."""
    import signal
    import traceback
    os.environ.setdefault('MPLBACKEND', 'Agg')
    plan, skipped = page_plan(path)

    def alarm(*_):
        raise TimeoutError(f'cell ran over {timeout} s')
    signal.signal(signal.SIGALRM, alarm)
    for group, cells in plan.items():
        ns = {'__name__': '__main__', 'display': print}
        for idx, src in enumerate(cells):
            code = src if real else rewrite_imports(src)
            err = None
            signal.alarm(timeout)
            try:
                exec(compile(code, f'<{path.name}:{group}:{idx}>', 'exec'), ns)
            except BaseException as e:  # pylint: disable=broad-except
                tb = traceback.extract_tb(e.__traceback__)
                where = f'{tb[-1].filename}:{tb[-1].lineno}' if tb else ''
                err = f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""} [{where}]'
            finally:
                signal.alarm(0)
            rec = {'group': group, 'idx': idx, 'err': err, 'src': src[:2000]}
            print('@@CELL ' + json.dumps(rec), flush=True)
    print('@@SKIPPED ' + json.dumps(skipped), flush=True)


def external_reason(err):
    """Why a failure is not xform's: a missing external library or a download, else None."""
    if err is None:
        return None
    m = re.search(r"No module named '([\w.]+)'", err)
    if m and m.group(1).split('.')[0] in EXTERNAL:
        return f'needs {m.group(1).split(".")[0]}'
    if re.search(r'URLError|ConnectionError|getaddrinfo|Temporary failure in name', err):
        return 'needs the internet'
    return None


def measure(path, real, timeout, page_timeout):
    """Runs one page in a child process (in a fresh temporary directory); its cell results."""
    env = dict(os.environ)
    if not real:
        env['PYTHONPATH'] = str(pathlib.Path(__file__).resolve().parents[1])
    else:
        env.pop('PYTHONPATH', None)
    with tempfile.TemporaryDirectory() as cwd:
        try:
            cmd = [sys.executable, os.path.abspath(__file__), '--child', str(path.resolve()),
                   '--timeout', str(timeout)] + (['--real'] if real else [])
            out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                                 timeout=page_timeout).stdout
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b'').decode() if isinstance(e.stdout, bytes) else (e.stdout or '')
    cells, skipped = [], 0
    for line in out.splitlines():
        if line.startswith('@@CELL '):
            cells.append(json.loads(line[7:]))
        elif line.startswith('@@SKIPPED '):
            skipped = json.loads(line[10:])
    plan, skipped_plan = page_plan(path)
    total = sum(len(c) for c in plan.values())
    done = {(c['group'], c['idx']) for c in cells}
    for g, srcs in plan.items():  # cells never reached (page timeout or crash)
        for idx, src in enumerate(srcs):
            if (g, idx) not in done:
                cells.append({'group': g, 'idx': idx, 'err': 'not reached (page timeout/crash)',
                              'src': src[:2000]})
    return {'cells': cells, 'total': total, 'skipped': skipped or skipped_plan}


def compare(real_json, xform_json):
    """Per page: cells run on xform / cells run on the real libraries; then xform's failures."""
    real = json.loads(pathlib.Path(real_json).read_text())
    xf = json.loads(pathlib.Path(xform_json).read_text())
    tot_ok = tot_base = tot_ext = 0
    failures = []
    for page, r in real.items():
        base = {(c['group'], c['idx']): c for c in r['cells'] if c['err'] is None}
        ext = sum(external_reason(c['err']) is not None for c in r['cells'])
        if not r['total']:
            continue
        xcells = {(c['group'], c['idx']): c for c in xf[page]['cells']}
        ok = sum(k in xcells and xcells[k]['err'] is None for k in base)
        failures += [(page, k, xcells.get(k, {}).get('err', 'missing')) for k in base
                     if xcells.get(k, {}).get('err') is not None]
        tot_ok, tot_base, tot_ext = tot_ok + ok, tot_base + len(base), tot_ext + ext
        print(f'{page}: {ok}/{len(base)} (of {r["total"]} cells; {r["total"] - len(base)} fail'
              f' on the real libraries, {ext} of them for external libraries/data;'
              f' {r["skipped"]} skipped)')
    pct = 100 * tot_ok / max(tot_base, 1)
    print(f'TOTAL: {tot_ok}/{tot_base} = {pct:.1f}%'
          f' ({tot_ext} cells need external libraries/data)')
    for page, k, err in failures:
        print(f'  FAIL {page} [{k[0]}:{k[1]}] {err}')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('dir', nargs='?')
    p.add_argument('--real', action='store_true')
    p.add_argument('--child', action='store_true')
    p.add_argument('--compare', nargs=2, metavar=('REAL_JSON', 'XFORM_JSON'))
    p.add_argument('--json')
    p.add_argument('--timeout', type=int, default=60)
    p.add_argument('--page-timeout', type=int, default=900)
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.child:
        return run_page(pathlib.Path(args.dir), args.real, args.timeout)
    root = pathlib.Path(args.dir)
    pages = sorted(q for q in root.rglob('*') if q.suffix in ('.ipynb', '.rst'))
    results = {}
    for page in pages:
        r = measure(page, args.real, args.timeout, args.page_timeout)
        rel = str(page.relative_to(root))
        results[rel] = r
        ok = sum(c['err'] is None for c in r['cells'])
        ext = sum(external_reason(c['err']) is not None for c in r['cells'])
        first = next((c for c in r['cells'] if c['err']), None)
        why = f'; first failure [{first["group"]}:{first["idx"]}] {first["err"]}' if first else ''
        print(f'{rel}: {ok}/{r["total"]} cells run ({ext} need external libraries/data,'
              f' {r["skipped"]} skipped){why}', flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
    main()
