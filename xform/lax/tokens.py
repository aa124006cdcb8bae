"""Tokens (JAX's ``lax.create_token``/``after_all``): values that order side effects.
See ``xform.core.tokens`` for how a token is represented."""
from xform.core.tokens import abstract_token, is_token
from xform.interpreters import ad, batching, mlir
from xform.lax._prim import allow_extended, standard_primitive


def create_token(_=None):
    """A fresh token. The argument is ignored (JAX accepts one for its old signature).

    >>> from xform import lax
    >>> lax.after_all(lax.create_token(), lax.create_token()).dtype
    token
    """
    return create_token_p.bind()


def after_all(*operands):
    """A token that comes after all the ``operands`` (tokens).

    Raises:
      TypeError: if an operand is not a token.
    """
    return after_all_p.bind(*operands)


def _after_all_abstract_eval(*avals):
    if not all(is_token(a) for a in avals):
        raise TypeError("Arguments to after_all must be tokens")
    return abstract_token


def _token_batch(prim):
    # a token has no batch dimension: the result is the same for every batch member
    return lambda vals, dims: (prim.bind(*vals), batching.not_mapped)


create_token_p = standard_primitive("create_token", lambda *_: abstract_token)
mlir.register_lowering(create_token_p, lambda ctx, *_: mlir.hlo.create_token())
after_all_p = standard_primitive("after_all", _after_all_abstract_eval)
allow_extended(after_all_p)  # its operands are tokens (checked above)
mlir.register_lowering(after_all_p, lambda ctx, *ops: mlir.hlo.after_all(list(ops)))
for _p in (create_token_p, after_all_p):
    ad.defnondiff(_p)
    batching.primitive_batchers[_p] = _token_batch(_p)
