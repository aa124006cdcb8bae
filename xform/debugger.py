"""``debug.breakpoint``: a pdb-like prompt (JAX's "jdb") at a point of a traced function.

At trace time the Python stack (user frames only) is captured; the arrays among the
frames' locals (leaves of pytrees included) become the operands of a ``debug.callback``,
so when the compiled program reaches that point the prompt sees their runtime values.
The prompt is a ``cmd.Cmd`` reading ``stdin`` (the terminal by default), with JAX's
commands: ``p``/``pp`` expression, ``u``/``d`` (frames), ``l`` (list), ``w`` (where),
``c`` (continue), ``q``/EOF (quit: ``sys.exit(0)``, as in JAX).
"""
import cmd
import inspect
import pprint
import sys
import traceback

from xform.core import source_info_util, tree_util
from xform.core.array import Array
from xform.core.trace import Tracer
from xform.interpreters.callback import debug_callback


class DebuggerFrame:
    """A frame seen by the debugger: file, line, locals, globals and source."""

    def __init__(self, filename, locals, globals, source, lineno, offset):
        self.filename, self.locals, self.globals = filename, locals, globals
        self.source, self.lineno, self.offset = source, lineno, offset

    @classmethod
    def from_frame(cls, frame):
        try:
            _, start = inspect.getsourcelines(frame)
            source = inspect.getsource(frame).split("\n")
            offset = frame.f_lineno - max(start, 1)
        except (OSError, TypeError):
            source, offset = [], None
        return cls(frame.f_code.co_filename, dict(frame.f_locals), frame.f_globals, source,
                   frame.f_lineno, offset)


def _is_dynamic(x):
    return isinstance(x, (Array, Tracer))


def _user_frames(filter_frames, num_frames):
    frames = []
    f = sys._getframe(2)
    while f is not None:
        if not (filter_frames and source_info_util.is_internal_file(f.f_code.co_filename)):
            frames.append(DebuggerFrame.from_frame(f))
        f = f.f_back
    return frames if num_frames is None else frames[:num_frames]


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False,
               token=None, **kwargs):
    """Stop at this point of the (possibly jitted) computation and open a prompt where
    ``p expr`` evaluates ``expr`` with the runtime values of the local variables.

    Args:
      backend: accepted for JAX compatibility (xform has one debugger, the CLI).
      filter_frames: hide xform's own frames.
      num_frames: how many frames (innermost first) the prompt can move through.
      ordered: accepted for JAX compatibility.
      token: accepted for JAX compatibility (must be None).
      **kwargs: ``stdin``/``stdout`` for the prompt (default: the terminal).

    >>> import io, xform, xform.numpy as jnp
    >>> out = io.StringIO()
    >>> def f(x):
    ...     y = x + 1
    ...     xform.debug.breakpoint(stdin=io.StringIO("p y\\nc\\n"), stdout=out)
    ...     return y
    >>> _ = xform.jit(f)(jnp.float32(1))
    >>> print(out.getvalue().splitlines()[1])
    (jdb) Array(2., dtype=float32)
    """
    del backend, ordered
    if token is not None:
        raise NotImplementedError("debug.breakpoint: tokens are not supported")
    frames = _user_frames(filter_frames, num_frames)
    dyn, rebuild = [], []
    for frame in frames:
        entries = []
        for name, value in frame.locals.items():
            try:
                leaves, tree = tree_util.tree_flatten(value)
            except Exception:  # unflattenable: shown as it is
                entries.append((name, value, None, None))
                continue
            mask = [_is_dynamic(v) for v in leaves]
            entries.append((name, [v for v, m in zip(leaves, mask) if not m], tree, mask))
            dyn.extend(v for v, m in zip(leaves, mask) if m)
        rebuild.append(entries)

    def run(*values):
        it = iter(values)
        out = []
        for frame, entries in zip(frames, rebuild):
            local = {}
            for name, static, tree, mask in entries:
                if tree is None:
                    local[name] = static
                    continue
                st = iter(static)
                local[name] = tree_util.tree_unflatten(
                    tree, [next(it) if m else next(st) for m in mask])
            out.append(DebuggerFrame(frame.filename, local, frame.globals, frame.source,
                                     frame.lineno, frame.offset))
        CliDebugger(out, **kwargs).run()
    debug_callback(run, *dyn)


class CliDebugger(cmd.Cmd):
    """The text debugger (JAX's jdb): ``p``, ``pp``, ``u``, ``d``, ``l``, ``w``, ``c``,
    ``q``."""
    prompt = "(jdb) "

    def __init__(self, frames, stdin=None, stdout=None, completekey="tab"):
        super().__init__(completekey=completekey, stdin=stdin, stdout=stdout)
        self.use_rawinput = stdin is None
        self.frames = frames
        self.frame_index = 0
        self.intro = "Entering jdb:"

    def evaluate(self, expr):
        frame = self.frames[self.frame_index]
        return eval(expr, {}, {**frame.globals, **frame.locals})

    def _error_message(self):
        msg = traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip()
        print("***", msg, file=self.stdout)

    def default(self, line):
        self.do_p(line)

    def do_p(self, arg):
        """p expression: print the value of an expression."""
        try:
            print(repr(self.evaluate(arg)), file=self.stdout)
        except Exception:
            self._error_message()

    def do_pp(self, arg):
        """pp expression: pretty-print the value of an expression."""
        try:
            print(pprint.pformat(self.evaluate(arg)), file=self.stdout)
        except Exception:
            self._error_message()

    def do_up(self, _):
        """u(p): move up a stack frame."""
        if self.frame_index == len(self.frames) - 1:
            print("At topmost frame.", file=self.stdout)
        else:
            self.frame_index += 1
        self.print_context()
    do_u = do_up

    def do_down(self, _):
        """d(own): move down a stack frame."""
        if self.frame_index == 0:
            print("At bottommost frame.", file=self.stdout)
        else:
            self.frame_index -= 1
        self.print_context()
    do_d = do_down

    def do_list(self, _):
        """l(ist): list the source around the current line."""
        self.print_context(num_lines=5)
    do_l = do_list

    def do_continue(self, _):
        """c(ont(inue)): continue the program."""
        return True
    do_c = do_cont = do_continue

    def do_quit(self, _):
        """q(uit): quit; the program is given an exit command (as in JAX)."""
        sys.exit(0)
    do_q = do_EOF = do_exit = do_quit

    def do_where(self, _):
        """w(here): print a stack trace, most recent frame at the bottom."""
        lines = ["Traceback:"]
        for frame in self.frames[::-1]:
            lines.append(f'  File "{frame.filename}", line {frame.lineno}')
            lines.append("    <no source>" if frame.offset is None
                         else f"    {frame.source[frame.offset].strip()}")
        print("\n".join(lines), file=self.stdout)
    do_w = do_bt = do_where

    def print_context(self, num_lines=2):
        frame = self.frames[self.frame_index]
        lines = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for i, line in enumerate(frame.source):
                if frame.offset - 1 - num_lines <= i <= frame.offset + num_lines:
                    lines.append(f"->  {line}" if i == frame.offset else f"    {line}")
        print("\n".join(lines), file=self.stdout)

    def run(self):
        while True:
            try:
                self.cmdloop()
                break
            except KeyboardInterrupt:
                print("--KeyboardInterrupt--", file=sys.stdout)
