"""Tokens: values that order side effects (``lax.create_token``/``after_all``), as JAX's.

A token is an array of the extended dtype ``token`` and shape ``()``: abstractly it
flows through jaxprs, ``jit`` arguments and results like any array. It lowers to
``!stablehlo.token``; at run time XLA holds an empty ``bool[0]`` buffer (its physical
element, as JAX's ``get_token_aval``). NB JAX gives tokens their own aval (``Tok``) and
a ``core.Token`` class; xform's are ``Array``s of this dtype, printed ``token[]``.
"""
import numpy as np

from xform.core.avals import ShapedArray
from xform.core.dtype_table import extended


class token_type(extended):
    """The scalar type of tokens."""


class _TokenRules:
    physical_element_aval = ShapedArray((0,), np.bool_)


class TokenTy:
    """The dtype of tokens, printed ``token``."""
    name = "token"
    type = token_type
    itemsize = 0
    kind = "V"
    _rules = _TokenRules

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return other == self.name if isinstance(other, str) else isinstance(other, TokenTy)

    def __hash__(self):
        return hash(self.name)


token_dtype = TokenTy()
abstract_token = ShapedArray((), token_dtype)


def is_token(aval):
    return getattr(aval, "dtype", None) == token_dtype and isinstance(aval.dtype, TokenTy)
