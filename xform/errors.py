"""Public error classes (``jax.errors`` names)."""
from xform.core.errors import (ConcretizationTypeError, JAXIndexError,  # noqa: F401
                               JAXTypeError, KeyReuseError, JaxRuntimeError,
                               NonConcreteBooleanIndexError,
                               TracerArrayConversionError, TracerBoolConversionError,
                               TracerIntegerConversionError, UnexpectedTracerError)
from xform.core.jaxpr import JaxprTypeError  # noqa: F401
from xform.core.shape_poly import InconclusiveDimensionOperation  # noqa: F401
