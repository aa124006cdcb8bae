"""``xform.scipy.cluster.vq``: assign observations to their nearest code-book entry."""
import xform.numpy as jnp
from xform.numpy import _util


def vq(obs, code_book, check_finite=True):
    """The index of each observation's nearest code (Euclidean) and that distance, as
    ``scipy.cluster.vq.vq`` (``obs`` (M, N) or (M,), ``code_book`` (K, N) or (K,)).

    >>> xform.scipy.cluster.vq.vq(jnp.array([[0., 0.], [4., 4.]]),
    ...                           jnp.array([[3., 3.], [0., 1.]]))
    (Array([1, 0], dtype=int32), Array([1.       , 1.4142135], dtype=float32))
    """
    del check_finite  # (nothing to check under jit)
    obs, code_book = _util.promote_dtypes("scipy.cluster.vq.vq", obs, code_book,
                                          to="inexact")
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[..., None], code_book[..., None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    dist = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=1)[:, 0]
