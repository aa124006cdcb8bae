"""``python -m xform.launch -n 2 script.py [args...]``: run a script as N local processes.

Like ``torchrun`` for trying multi-process code on one machine: picks a free port on
127.0.0.1, starts N copies of the script with JAX's environment variables set
(``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``, and
``XFORM_NUM_LOCAL_DEVICES``), so the script only calls
``xform.distributed.initialize()``. Waits at most ``--timeout`` seconds; if one process
fails the others are stopped, and the exit status is the first failure's.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script_args, num_processes, devices_per_process=1, port=None, timeout=300,
           env=None, capture=False):
    """Start ``num_processes`` copies of ``python script_args...``; returns
    ``(returncodes, outputs)`` (outputs are the processes' stdout+stderr when
    ``capture``, else None). Processes still running after ``timeout`` s are killed
    (returncode -9)."""
    port = port or free_port()
    procs = []
    for i in range(num_processes):
        penv = dict(os.environ if env is None else env)
        penv.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                    JAX_NUM_PROCESSES=str(num_processes), JAX_PROCESS_ID=str(i),
                    XFORM_NUM_LOCAL_DEVICES=str(devices_per_process))
        out = subprocess.PIPE if capture else None
        procs.append(subprocess.Popen([sys.executable] + list(script_args), env=penv,
                                      stdout=out, stderr=subprocess.STDOUT if capture
                                      else None, text=True))
    deadline = time.monotonic() + timeout
    codes = [None] * num_processes
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            for i, p in enumerate(procs):  # one failed or time is up: stop the rest
                if codes[i] is None:
                    p.kill()
                    p.wait()
                    codes[i] = -9
            break
        time.sleep(0.05)
    outputs = [p.communicate()[0] for p in procs] if capture else None
    return codes, outputs


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m xform.launch",
        description="Run a script as N local processes joined by xform.distributed.")
    parser.add_argument("-n", "--num-processes", type=int, required=True)
    parser.add_argument("-d", "--devices-per-process", type=int, default=1,
                        help="CPU devices each process gets (default 1)")
    parser.add_argument("--port", type=int, default=None,
                        help="coordinator port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before all processes are killed (default 600)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.num_processes < 1:
        parser.error(f"-n must be at least 1, got {ns.num_processes}")
    if not os.path.exists(ns.script):
        parser.error(f"script {ns.script!r} does not exist")
    codes, _ = launch([ns.script] + ns.args, ns.num_processes, ns.devices_per_process,
                      ns.port, ns.timeout)
    bad = [c for c in codes if c != 0]
    if -9 in codes:
        print(f"xform.launch: stopped after a failure or the {ns.timeout:g} s timeout; "
              f"exit codes {codes}", file=sys.stderr)
    return bad[0] if bad else 0


if __name__ == "__main__":
    sys.exit(main())
