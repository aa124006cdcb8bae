"""What XLA tells about a program, beside ``backend.py`` (the door to jaxlib, at its line
cap): a compiled executable's cost and memory estimates, its optimized HLO and the
runtime object itself; a lowered module's unoptimized HLO. It reads the jaxlib objects
``backend`` hands out and imports nothing from jaxlib itself."""


class Analyses:
    """The queries both executable kinds answer (``backend.Executable`` and
    ``backend.ReplicatedExecutable``: ``_exe`` is jaxlib's LoadedExecutable)."""
    __slots__ = ()

    def cost_analysis(self):
        """XLA's cost estimate of the optimized program (``flops``, ``bytes accessed``...)."""
        return dict(self._exe.cost_analysis())

    def memory_analysis(self):
        """Sizes in bytes of arguments, outputs, aliased buffers, temporaries and code."""
        return self._exe.get_compiled_memory_stats()

    def hlo_text(self):
        """The optimized HLO XLA compiled (JAX's ``Compiled.as_text()``)."""
        return self._exe.get_hlo_text()

    def runtime_executable(self):
        """jaxlib's LoadedExecutable (what JAX's ``Compiled.runtime_executable()`` gives)."""
        return self._exe


def hlo_text(computation):
    """An ``XlaComputation``'s unoptimized HLO as JAX's ``Lowered.as_text("hlo")`` prints
    it (short, parsable; xform's modules carry no op metadata to print)."""
    return computation.as_hlo_text()
