"""Eager control flow reuses a body's trace per (function identity, avals), as JAX's does
(``lax/control_flow/common.py``), and never a stale one."""
import jax
import numpy as np

import xform
from xform.interpreters import dispatch

X = np.arange(3, dtype=np.float32)


def _calls(lib):
    """Each construct twice with the same bodies; the bodies count their traces."""
    n = dict.fromkeys(("while", "fori", "fori_dyn", "scan", "cond"), 0)

    def body(c):
        n["while"] += 1
        return c * 2.0

    def fb(i, c):
        n["fori"] += 1
        return c + i

    def fd(i, c):
        n["fori_dyn"] += 1
        return c - i

    def sb(c, a):
        n["scan"] += 1
        return c + a, c

    def t(a):
        n["cond"] += 1
        return a + 1

    x, hi = lib.numpy.asarray(X + 1), lib.numpy.int32(4)
    for _ in range(2):
        lib.lax.while_loop(lambda c: c[0] < 100, body, x)
        lib.lax.fori_loop(0, 4, fb, x)
        lib.lax.fori_loop(0, hi, fd, x)  # (a traced bound: a while loop)
        lib.lax.scan(sb, x, lib.numpy.ones((4, 3)))
        lib.lax.cond(True, t, lambda a: a - 1, x)
    return n


def test_a_second_eager_call_does_not_trace_again_as_in_jax():
    assert _calls(xform) == _calls(jax) == dict.fromkeys(_calls(xform), 1)


def test_the_canonical_body_is_found_by_identity(monkeypatch):
    def cond(c):
        return c < 10.0
    xform.lax.while_loop(cond, lambda c: c + 1.0, 0.0)
    body = lambda c: c * 3.0  # noqa: E731
    xform.lax.while_loop(cond, body, 1.0)
    keys = []
    monkeypatch.setattr(dispatch, "structural_key", lambda c: keys.append(c) or 0)
    assert float(xform.lax.while_loop(cond, body, 1.0)) == 27.0
    assert not keys


def _make(k):
    return lambda c: c * k


def test_changed_closure_values_are_honoured():
    x = xform.numpy.asarray(X)
    for k in (2.0, 3.0, 2.0):  # a closure recreated per call
        np.testing.assert_array_equal(xform.lax.while_loop(lambda c: c[2] < 50, _make(k), x),
                                      jax.lax.while_loop(lambda c: c[2] < 50, _make(k), X))
    k = 2.0

    def body(i, c):  # one function object; the cell it reads is rebound
        return c * k + w
    for k, w in ((2.0, X), (3.0, X), (3.0, 2 * X)):
        want = X
        for i in range(3):
            want = want * k + w
        np.testing.assert_allclose(xform.lax.fori_loop(0, 3, body, X), want)
        np.testing.assert_allclose(xform.lax.scan(lambda c, _: (body(0, c), None), X, None,
                                                  length=3)[0], want)
    for i in range(6):  # a new lambda may take a dead one's id: never its trace
        f = (lambda c: c + 1.0) if i % 2 else (lambda c: c * 2.0)
        assert float(xform.lax.while_loop(lambda c: c < 10.0, f, 1.0)) == (10.0 if i % 2
                                                                           else 16.0)
        del f


SCALE = 2.0


def test_a_rebound_global_is_honoured():
    global SCALE

    def branch(a):
        return a * SCALE
    for SCALE in (2.0, 5.0):
        np.testing.assert_array_equal(xform.lax.cond(True, branch, lambda a: a, X), X * SCALE)
    SCALE = 2.0
