"""Layouts the runtime reports, beside ``backend.py`` (the door to jaxlib, at its line
cap): a buffer's and a compiled program's parameters' and outputs'. It reads the jaxlib
objects ``backend`` hands out and imports nothing from jaxlib itself.

A layout is returned as ``(major_to_minor, tiling, sub_byte_element_size_in_bits)``
(XLA stores minor-to-major; tiling a tuple of tile shapes, ``()`` when untiled)."""


def _triple(pjrt_layout):
    xla = pjrt_layout._xla_layout()
    return (tuple(xla.minor_to_major())[::-1], tuple(map(tuple, xla.tiling())),
            xla.element_size_in_bits())


def buffer_layout(buf):
    """The layout of a buffer (jaxlib's one-device array); None if the runtime has none
    (an UNIMPLEMENTED error, as JAX's ``Array.format`` treats it)."""
    try:
        return _triple(buf._pjrt_layout)
    except RuntimeError as e:
        if str(e).startswith("UNIMPLEMENTED"):
            return None
        raise


def executable_layouts(executable):
    """``(parameters, outputs)``: the layouts a ``backend.Executable`` takes and gives,
    one per flat parameter (hoisted consts first) and output."""
    exe = executable._exe
    return ([_triple(p) for p in exe.get_parameter_layouts()],
            [_triple(p) for p in exe.get_output_layouts()])
