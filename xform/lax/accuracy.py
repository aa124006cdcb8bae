"""``accuracy=`` of lax's transcendental unary ops (exp, log, sin, tanh, sqrt, ...): a
``Tolerance`` or an ``AccuracyMode`` the compiler picks an implementation for.

The op's primitive carries it as the ``accuracy`` param only when given, so the
common call keeps its parameterless equation (and eager/lazy fast paths); it lowers to
StableHLO's ``result_accuracy`` attribute. Backends with one implementation (XLA:CPU)
use it, as JAX's; under AD, ``HIGHEST`` picks JAX's more accurate derivative forms."""
import enum

from xform.interpreters import mlir

hlo = mlir.hlo


class Tolerance:
    """Tolerances an op's result must meet: at most two of ``atol``, ``rtol`` (both
    absolute/relative errors) and ``ulps`` (units in the last place)."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0.0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def _key(self):
        return (self.atol, self.rtol, self.ulps)

    def __eq__(self, other):  # (by value: equal tolerances share compiled programs)
        return type(other) is Tolerance and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"


class AccuracyMode(enum.Enum):
    HIGHEST = 1
    DEFAULT = 2


def bind(prim, x, accuracy):
    """``prim`` on ``x``, with the ``accuracy`` param only when one is given."""
    if accuracy is None:
        return prim.bind(x)
    if not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise NotImplementedError(f"Accuracy {accuracy} not supported")
    return prim.bind(x, accuracy=accuracy)


def attr(accuracy):
    """The ``result_accuracy`` attribute for ``accuracy`` (None: none)."""
    if accuracy is None:
        return None
    if isinstance(accuracy, AccuracyMode):
        return hlo.ResultAccuracyAttr.get(0.0, 0.0, 0, accuracy.name)
    return hlo.ResultAccuracyAttr.get(atol=accuracy.atol, rtol=accuracy.rtol,
                                      ulps=accuracy.ulps, mode="TOLERANCE")


def lowering(op):
    """Lowering rule of a unary op taking StableHLO's ``result_accuracy``."""
    def rule(ctx, x, accuracy=None):
        return op(x) if accuracy is None else op(x, result_accuracy=attr(accuracy))
    return rule
