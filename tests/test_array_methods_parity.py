"""jax.Array's methods and operators (and the device queries beside them) vs xform's,
as a differential sweep found them to disagree: each row runs on both libraries
(eagerly) and must give the same value, dtype and weak type, or the same error class
and message."""
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp

X = np.arange(6, dtype=np.float32).reshape(2, 3)
C = np.array([1 + 2j, 3 - 4j], np.complex64)

ROWS = [
    # x.view(dtype) was missing
    ("view_same_width", lambda m: m.asarray(X).view(m.int32)),
    ("view_narrower", lambda m: m.asarray(X).view(m.uint8)),
    ("view_wider", lambda m: m.arange(8, dtype=m.uint8).view(m.float32)),
    ("view_complex", lambda m: m.asarray(C).view(m.float32)),
    ("view_bool", lambda m: (m.array([1, 0, 1], m.int8).view(bool),
                             m.array([True, False]).view(m.uint8))),
    ("view_scalar", lambda m: m.float32(1).view(m.int32)),
    ("view_none", lambda m: m.asarray(X).view()),
]

ERRORS = [
    # == / != with a list or tuple was False / True by identity (JAX: TypeError)
    ("eq_tuple", lambda m: m.ones(2) == (1, 1)),
    ("ne_list", lambda m: m.ones(2) != [1, 1]),
    ("eq_dict_reflected", lambda m: {1: 2} == m.ones(2)),
    ("add_list_reflected", lambda m: [1, 2] + m.ones(2)),
    ("mul_list_reflected", lambda m: [1, 2] * m.array(2)),   # (not a repeated list)
    ("lt_tuple", lambda m: m.ones(2) < (1, 1)),
    ("pow_list", lambda m: m.ones(2) ** [1, 1]),
    # scalar conversions: JAX's messages
    ("int_of_1d", lambda m: int(m.array([3.0]))),
    ("float_of_2d", lambda m: float(m.asarray(X))),
    ("complex_of_1d", lambda m: complex(m.asarray(C))),
    ("index_of_float", lambda m: [0, 1][m.array(1.0)]),
    ("index_of_1d", lambda m: [0, 1][m.array([1])]),
    ("view_scalar_width", lambda m: m.float32(1).view(m.int16)),
    ("view_indivisible", lambda m: m.arange(6, dtype=m.uint8).view(m.float32)),
    ("view_type", lambda m: m.asarray(X).view(type=np.ndarray)),
    ("flat", lambda m: m.asarray(X).flat),
]


def _same(a, b):
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb
    for u, v in zip(la, lb):
        assert (u.dtype, u.shape, u.weak_type) == (v.dtype, v.shape, v.weak_type)
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.parametrize("fn", [r[1] for r in ROWS], ids=[r[0] for r in ROWS])
def test_row(fn):
    _same(fn(xnp), fn(jnp))


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_match_jax(fn):
    def raised(m):
        try:
            fn(m)
        except Exception as e:  # noqa: BLE001 (class and message are compared)
            return type(e).__name__, str(e).replace("jaxlib._jax.", "").replace("ArrayImpl", "Array")
    j = raised(jnp)
    assert j is not None and raised(xnp) == j


def test_traced_eq_tuple_and_buffer_pointer():
    for lib, m in ((xform, xnp), (jax, jnp)):
        with pytest.raises(TypeError, match="unsupported operand"):
            lib.jit(lambda a: a == (1, 1))(m.ones(2))
    x = xnp.ones(3)   # (was missing; a copy has a buffer of its own)
    assert isinstance(x.unsafe_buffer_pointer(), int)
    assert x.unsafe_buffer_pointer() != x.copy().unsafe_buffer_pointer()
    assert operator.index(xnp.array(3)) == 3


def test_process_queries_take_a_backend():
    # jax.process_index("cpu") raised TypeError (no backend parameter)
    for fn in ("process_index", "process_count", "process_indices"):
        assert getattr(xform, fn)("cpu") == getattr(jax, fn)("cpu")
        for lib in (xform, jax):
            with pytest.raises(RuntimeError, match="Unknown backend"):
                getattr(lib, fn)("nope")


def test_isinstance_array_holds_for_tracers_as_jax():
    # jax.Array answers True for traced values inside jit/grad/vmap (its metaclass), so
    # user code branching on it takes the same branch traced and eager
    def probe(lib, m):
        f = lambda x: lib.numpy.where(isinstance(x, lib.Array), x, -x)  # noqa: E731
        return (f(m.ones(2)), lib.jit(f)(m.ones(2)), lib.vmap(f)(m.ones(2)),
                lib.grad(lambda x: f(x).sum())(m.ones(2)),
                isinstance(np.ones(2), lib.Array), isinstance(1.0, lib.Array),
                m.ndarray is lib.Array, issubclass(type(m.ones(2)), lib.Array))
    ours, want = probe(xform, xnp), probe(jax, jnp)
    for o, w in zip(ours, want):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(w))
