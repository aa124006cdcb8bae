"""xform vs JAX on the benchmark scripts in this folder: interleaved rounds, one table.

usage: python benchmarks/run.py [--rounds N] [--quick] [--only a,b] [--markdown FILE]
                                [--plot FILE]

The scripts are every ``benchmarks/*.py`` except this file and helper modules (names
starting with ``_``); each takes ``--lib jax|xform`` and ``--quick`` and prints one JSON
line. Each round runs every script once per library (the order alternates between
rounds), each in a fresh process, and collects its JSON line. A cell is the median across
rounds of that run's own median. Raw lines go to benchmarks/results/<timestamp>.jsonl.
``--markdown FILE`` also writes the tables with the date and machine (for the README),
``--plot FILE`` a PNG of the xform/jax ratio of every timing. Exit status 1 if a script
failed (its stderr tail is printed) or no result came back.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
LIBS = ["jax", "xform"]
# Run first, in this order; any other script found follows in alphabetical order.
PREFERRED = ["dispatch", "jit_cache", "eager_chain", "mlp_train", "per_example_grads",
             "compile_time", "hessian", "startup"]


def discover(bench_dir=BENCH_DIR):
    """Names of the benchmark scripts: every *.py here but run.py and _helpers."""
    names = sorted(p.stem for p in bench_dir.glob("*.py")
                   if p.name != "run.py" and not p.name.startswith("_"))
    return [n for n in PREFERRED if n in names] + [n for n in names if n not in PREFERRED]

# Per-run metadata and problem sizes: not measurements.
SKIP = {"nproc", "n", "n_ops", "size", "batch", "steps", "lr", "layers", "d_model", "heads",
        "seq", "compiled", "round", "fresh_vg_compiles", "mesh",
        "calls_over_1"}
# The targets: (script, metric, max ratio xform/jax).
TARGETS = [("dispatch", "eager_sin_us", 1.0, "eager single op (sin)"),
           ("dispatch", "eager_add_ab_us", 1.0, "eager single op (a + b)"),
           ("dispatch", "jit_us", 1.2, "jit, positional array"),
           ("dispatch", "jit_dict10_us", 1.5, "jit, dict of 10 arrays"),
           ("dispatch", "jit_static_args_us", 1.5, "jit, two static arguments"),
           ("mlp_train", "step_ms", 1.05, "compiled MLP step"),
           ("jit_cache", "rewrap_us", 3.0, "re-wrapped jit(f)(x)"),
           ("jit_cache", "fresh_vg_ms", 3.0, "fresh jit(value_and_grad) per step"),
           ("nn_train", "cnn_step_ms", 1.05, "CNN module train step"),
           ("nn_train", "transformer_step_ms", 1.05, "transformer module train step"),
           ("nn_train", "cnn_init_ms", 1.5, "CNN jit(init): trace + compile"),
           ("nn_train", "transformer_init_ms", 1.5, "transformer jit(init)"),
           ("random", "normal_1e6_us", 1.1, "jit random.normal (1000, 1000)"),
           ("random", "split_1e4_us", 1.1, "jit random.split(key, 10_000)"),
           ("random", "eager_uniform8_us", 1.2, "eager random.uniform(raw key, (8,))"),
           ("optim", "update_ms", 1.05, "adamw update, 10M params"),
           ("pmap", "step_ms", 1.2, "data-parallel MLP step, 8 devices"),
           ("sharded_train", "step_ms", 1.10, "DP x TP transformer step, (4, 2) mesh")]
# Targets across metrics: (script, xform metric, (lib, metric) it is divided by, max).
CROSS_TARGETS = [("lazy", "chain_lazy_us", ("jax", "chain_eager_us"), 0.2,
                  "lazy 100-op chain vs JAX eager (>= 5x faster)"),
                 ("lazy", "mlp_lazy_ms", ("xform", "mlp_jit_ms"), 2.0,
                  "lazy MLP step vs xform's jitted step")]
# Ratios a script computes itself, xform/jax interleaved in one process (lower is
# better): (script, metric, max, what).
SELF_RATIOS = [("eager_calls", "geomean_ratio", 0.85, "67 eager calls: geometric mean"),
               ("eager_calls", "worst_ratio", 1.0, "67 eager calls: the slowest one"),
               ("sharded_train", "interleaved_ratio", 1.10,
                "DP x TP transformer step, (4, 2) mesh, steps alternating")]
# Speedups reported per library (higher is better): (script, metric, min for xform).
SPEEDUPS = [("lazy", "chain_vs_jax_eager", 5.0, "lazy chain vs JAX eager, one process"),
            ("startup", "small_first_speedup", 3.0,
             "second process: small model's first result (cold/warm)"),
            ("startup", "ready_speedup", 3.0, "second process: step ready (cold/warm)"),
            ("startup", "first_call_speedup", None, "second process: first call (cold/warm)")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="pass --quick to the scripts (smoke test; numbers not meaningful)")
    p.add_argument("--only", default=None,
                   help="comma-separated subset of scripts (default: every script found)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per script run")
    p.add_argument("--out", type=Path, help="JSON-lines file (default benchmarks/results/...)")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write the tables as markdown, with the date and machine")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="also write a PNG of the xform/jax ratios (needs matplotlib)")
    return p.parse_args(argv)


def run_script(bench_dir, script, lib, quick, timeout):
    """Run one script in a fresh process; return (record, stderr tail or None)."""
    cmd = [sys.executable, f"{script}.py", "--lib", lib] + (["--quick"] if quick else [])
    env = dict(os.environ)  # make the checkout's xform importable even when not installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(cmd, cwd=bench_dir, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"script": script, "lib": lib, "error": f"timeout after {timeout:.0f} s"}, ""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    if proc.returncode != 0 or not lines:
        return {"script": script, "lib": lib, "error": f"exit {proc.returncode}"}, tail
    return json.loads(lines[-1]), None


def collect(records):
    """{(script, metric): {lib: [values]}} in first-seen order."""
    vals = defaultdict(lambda: defaultdict(list))
    for r in records:
        if "error" in r:
            continue
        for k, v in r.items():
            if k not in SKIP and isinstance(v, (int, float)) and not isinstance(v, bool):
                vals[(r["script"], k)][r["lib"]].append(v)
    return vals


def _fmt(v, metric):
    if "loss" in metric or "checksum" in metric:
        return f"{v:.7g}"
    if "err" in metric:
        return f"{v:.3g}"
    return f"{v:.0f}" if abs(v) >= 1e4 else f"{v:.4g}"


def _median(xs):
    return statistics.median(xs) if xs else None


def table(vals, scripts):
    rows = ["| script | metric | jax median | xform median | xform/jax |",
            "|---|---|---|---|---|"]
    for (script, metric), by_lib in sorted(vals.items(), key=lambda kv: scripts.index(kv[0][0])):
        j, x = _median(by_lib.get("jax", [])), _median(by_lib.get("xform", []))
        cells = ["" if v is None else _fmt(v, metric) for v in (j, x)]
        ratio = f"{x / j:.2f}" if j and x is not None else ""
        rows.append(f"| {script} | {metric} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(rows)


def targets(vals):
    rows = ["| target | metric | xform/jax | limit | result |", "|---|---|---|---|---|"]
    for script, metric, limit, what in TARGETS:
        by_lib = vals.get((script, metric), {})
        j, x = _median(by_lib.get("jax", [])), _median(by_lib.get("xform", []))
        if j and x is not None:
            r = x / j
            res = "pass" if r <= limit else "FAIL"
            rows.append(f"| {what} | {script}.{metric} | {r:.2f} | <= {limit:g} | {res} |")
        else:
            rows.append(f"| {what} | {script}.{metric} | n/a | <= {limit:g} | no data |")
    for script, metric, (lib, other), limit, what in CROSS_TARGETS:
        x = _median(vals.get((script, metric), {}).get("xform", []))
        d = _median(vals.get((script, other), {}).get(lib, []))
        if x is not None and d:
            res = "pass" if x / d <= limit else "FAIL"
            rows.append(f"| {what} | {script}.{metric} / {lib} {other} | {x / d:.2f} | "
                        f"<= {limit:g} | {res} |")
    for script, metric, limit, what in SELF_RATIOS:
        x = _median(vals.get((script, metric), {}).get("xform", []))
        if x is not None:
            rows.append(f"| {what} | {script}.{metric} | {x:.2f} | <= {limit:g} | "
                        f"{'pass' if x <= limit else 'FAIL'} |")
    for script, metric, limit, what in SPEEDUPS:
        by_lib = vals.get((script, metric), {})
        j, x = _median(by_lib.get("jax", [])), _median(by_lib.get("xform", []))
        if x is None:
            continue
        res = "" if limit is None else ("pass" if x >= limit else "FAIL")
        bound = "" if limit is None else f">= {limit:g} (xform)"
        jax_part = f"; jax {j:.2f}" if j else ""
        rows.append(f"| {what} | {script}.{metric} | xform {x:.2f}{jax_part} | {bound} "
                    f"| {res} |")
    return "\n".join(rows)


def machine():
    """One line naming the machine: CPU model, cores, OS, Python, jax/jaxlib version."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        from importlib.metadata import version
        jax_version = f"jax {version('jax')}, jaxlib {version('jaxlib')}"
    except Exception:   # pragma: no cover  (not installed)
        jax_version = "jax not installed"
    return (f"{cpu}, {os.cpu_count()} logical cores, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, {jax_version}")


def markdown(vals, scripts, rounds, quick):
    """The README's benchmark section body: when, where, then both tables."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    note = ", --quick: numbers not meaningful" if quick else ""
    return (f"Measured {when} on {machine()}; {rounds} interleaved round(s){note}. "
            "Ratios are xform/jax: below 1 xform is faster (times), above 1 it is slower.\n\n"
            f"{table(vals, scripts)}\n\n{targets(vals)}\n")


def _is_time(metric):
    return metric.endswith(("_us", "_ms", "_s")) and "p10_p90" not in metric


def plot(vals, scripts, path, title):
    """Horizontal bars: xform/jax ratio of each timing (log scale; 1 = parity)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = []
    for (script, metric), by_lib in sorted(vals.items(),
                                           key=lambda kv: scripts.index(kv[0][0])):
        j, x = _median(by_lib.get("jax", [])), _median(by_lib.get("xform", []))
        if _is_time(metric) and j and x:
            rows.append((f"{script}.{metric}", x / j))
    if not rows:
        raise SystemExit("error: --plot: no timing with results from both libraries")
    labels, ratios = zip(*rows[::-1])
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    colors = ["tab:green" if r <= 1 else "tab:red" for r in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=1)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xlabel("xform / jax time (log scale; < 1: xform faster)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    bench_dir = BENCH_DIR
    found = discover(bench_dir)
    scripts = found if args.only is None else [s for s in args.only.split(",") if s]
    missing = [s for s in scripts if s not in found]
    if missing:
        sys.exit(f"error: {', '.join(m + '.py' for m in missing)} not found in {bench_dir}")
    out = args.out or RESULTS_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)

    records, failures = [], []
    t_start = time.perf_counter()
    with open(out, "w") as fh:
        for rnd in range(args.rounds):
            libs = LIBS if rnd % 2 == 0 else LIBS[::-1]  # alternate who goes first
            for script in scripts:
                for lib in libs:
                    t0 = time.perf_counter()
                    rec, err = run_script(bench_dir, script, lib, args.quick, args.timeout)
                    rec.setdefault("round", rnd)
                    records.append(rec)
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    state = "ok" if err is None else rec["error"]
                    print(f"[round {rnd + 1}/{args.rounds}] {script:<18} {lib:<6} "
                          f"{time.perf_counter() - t0:6.1f} s  {state}", file=sys.stderr)
                    if err is not None:
                        failures.append((rnd, script, lib, rec["error"], err))

    vals = collect(records)
    print(f"\n## xform vs jax ({args.rounds} interleaved round(s)"
          f"{', --quick: numbers not meaningful' if args.quick else ''})\n")
    print(table(vals, scripts))
    print("\n## targets\n")
    print(targets(vals))
    if failures:
        print("\n## failures\n")
        for rnd, script, lib, what, tail in failures:
            print(f"- round {rnd + 1}, {script}.py --lib {lib}: {what}")
            if tail:
                print("  ```\n" + "\n".join("  " + ln for ln in tail.splitlines()) + "\n  ```")
    if args.markdown:
        args.markdown.write_text(markdown(vals, scripts, args.rounds, args.quick))
        print(f"markdown: {args.markdown}")
    if args.plot:
        plot(vals, scripts, args.plot, f"xform vs jax, {args.rounds} interleaved round(s), "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}")
        print(f"plot: {args.plot}")
    print(f"\nraw JSON lines: {out} ({time.perf_counter() - t_start:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
