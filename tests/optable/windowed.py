"""Op-table rows of the windowed reductions (pooling) through ``lax.reduce_window``:
max/min pools (distinct inputs: no ties), sum/average pools, SAME/explicit padding,
base and window dilation."""
import numpy as np

from optable import NUM, domains, rec

_INIT = {"add": lambda dt: 0,
         "max": lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min,
         "min": lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max}


def _jax_by_slices(L, x, op, dims, strides, padding, wdil):
    """A window-dilated pool in jax from strided slices of the padded operand: jax
    cannot differentiate reduce_window_max with window dilation."""
    init = np.array(_INIT[op](x.dtype), x.dtype)
    xp = L.pad(x, init, [(lo, hi, 0) for lo, hi in padding])
    out = [(n - (w - 1) * r - 1) // s + 1 for n, w, r, s in zip(xp.shape, dims, wdil, strides)]
    result = None
    for offset in np.ndindex(*dims):
        start = [k * r for k, r in zip(offset, wdil)]
        part = L.slice(xp, start, [b + (n - 1) * s + 1 for b, n, s in zip(start, out, strides)],
                       strides)
        result = part if result is None else getattr(L, op)(result, part)
    return result


def _pool(name, op, shape, dims, strides, padding, base=None, wdil=None, scale=None,
          call_jax=None):
    def call(L, x):
        init = np.array(_INIT[op](x.dtype), x.dtype)
        out = L.reduce_window(x, init, getattr(L, op), dims, strides, padding, base, wdil)
        return out if scale is None else L.mul(out, np.array(scale, x.dtype))
    domain = "real" if op == "add" else "distinct"
    dtypes = NUM if scale is None else (np.float32,)
    return rec(name, 1, dtypes, [(shape,)], domains(domain), call=call, op=op,
               call_jax=call_jax and (lambda L, x: call_jax(L, x, op, dims, strides, padding,
                                                            wdil)),
               window_dimensions=dims, window_strides=strides, padding=padding,
               base_dilation=base, window_dilation=wdil)


RECORDS = [
    _pool("max_pool_2x2_stride2", "max", (4, 6), (2, 2), (2, 2), "VALID"),
    _pool("min_pool_nhwc_same_lower", "min", (2, 5, 5, 1), (1, 2, 2, 1), (1, 2, 2, 1),
          "SAME_LOWER"),
    _pool("max_pool_dilated", "max", (7, 5), (2, 2), (1, 2), ((1, 0), (0, 1)), None, (2, 2),
          call_jax=_jax_by_slices),
    _pool("max_pool_base_dilated", "max", (3, 4), (2, 2), (1, 2), ((0, 1), (1, 1)), (2, 1)),
    _pool("avg_pool_2x2", "add", (4, 5), (2, 2), (1, 1), "VALID", scale=0.25),
    _pool("sum_pool_same", "add", (5, 6), (3, 3), (2, 2), "SAME"),
    _pool("sum_pool_1d_negative_pad", "add", (8,), (3,), (2,), ((-1, 2),)),
    _pool("sum_pool_dilations", "add", (5, 4), (2, 2), (2, 1), ((1, 2), (0, 1)), (2, 1),
          (1, 2)),
]
