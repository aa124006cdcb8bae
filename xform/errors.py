"""Public error classes (``jax.errors`` names)."""
from xform.core.errors import (ConcretizationTypeError, JAXTypeError,  # noqa: F401
                               KeyReuseError,
                               JaxRuntimeError,
                               NonConcreteBooleanIndexError,
                               TracerArrayConversionError, TracerBoolConversionError,
                               TracerIntegerConversionError, UnexpectedTracerError)
