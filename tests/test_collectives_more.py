"""``lax.ragged_all_to_all``, ``pbroadcast``, ``psend`` and ``precv`` against JAX at run
time. XLA:CPU runs none of them in a replicated program: both libraries must fail alike
there; values are compared where JAX computes them (pbroadcast against its documented
equivalent, ``psum`` of the source's masked value), and the GPU lowerings op for op."""
import doctest
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xform
import xform.numpy as xnp
from xform.interpreters import mlir
from xform.lax import collectives_more

N = 2
# the example of JAX's docstring, members stacked (operand, output, input_offsets,
# send_sizes, output_offsets, recv_sizes)
RAGGED = (np.float32([[1, 2, 2], [3, 4, 0]]), np.zeros((N, 4), np.float32),
          np.int32([[0, 1], [0, 1]]), np.int32([[1, 2], [1, 1]]),
          np.int32([[0, 0], [1, 2]]), np.int32([[1, 1], [2, 1]]))


def _mesh(lib):
    return lib.make_mesh((N,), ("i",), devices=lib.devices()[:N],
                         axis_types=(lib.sharding.AxisType.Auto,))


def _smap(lib, f, nargs, check_vma=True):
    spec = lib.sharding.PartitionSpec("i")
    return lib.shard_map(f, mesh=_mesh(lib), in_specs=(spec,) * nargs, out_specs=spec,
                         check_vma=check_vma)


def _flat(args):
    return [a.reshape((-1,) + a.shape[2:]) for a in args]


def _ragged(lib):
    return lambda *a: lib.lax.ragged_all_to_all(*a, axis_name="i")


def _cuda_ops(text, op):
    """The lines of ``op`` in a module, SSA names and locations dropped."""
    lines = [ln for ln in text.splitlines() if op in ln]
    return [re.sub(r"%[\w#:]+", "%", re.sub(r" loc\(.*\)$", "", ln)).strip()
            for ln in lines]


def _lower_cuda(f, args, nargs):
    theirs = jax.jit(_smap(jax, f(jax), nargs, False)).trace(*args).lower(
        lowering_platforms=("cuda",)).as_text()
    closed = xform.make_jaxpr(_smap(xform, f(xform), nargs, False))(*args)
    mine = str(mlir.lower_jaxpr_to_module(closed, platform="cuda", spmd=(
        _mesh(xform), (None,) * nargs, (None,) * len(closed.out_avals))))
    return mine, theirs


def test_public_names_as_in_jax():
    for n in ("ragged_all_to_all", "ragged_all_to_all_p", "psend", "precv", "pbroadcast"):
        assert hasattr(jax.lax, n) and hasattr(xform.lax, n), n


def test_doctests():
    assert doctest.testmod(collectives_more).failed == 0


# ---- ragged_all_to_all ----

def test_ragged_result_type_as_jax():
    args = [a.astype(np.float16) if a.dtype == np.float32 else a for a in _flat(RAGGED)]
    mine = xform.eval_shape(_smap(xform, _ragged(xform), 6), *args)
    theirs = jax.eval_shape(_smap(jax, _ragged(jax), 6), *args)
    assert (mine.shape, mine.dtype) == (theirs.shape, theirs.dtype) == ((8,), np.float16)


@pytest.mark.parametrize("k, bad", [(3, np.float32([0, 1, 0, 1])),        # float sizes
                                    (2, np.zeros((4, 2), np.int32))])     # rank 2
def test_ragged_bad_offsets_as_jax(k, bad):
    args = _flat(RAGGED)
    args[k] = bad
    with pytest.raises(ValueError) as e:
        jax.eval_shape(_smap(jax, _ragged(jax), 6), *args)
    with pytest.raises(ValueError, match=re.escape(str(e.value))):
        xform.eval_shape(_smap(xform, _ragged(xform), 6), *args)


@pytest.mark.parametrize("k, bad, msg", [
    (3, np.int32([1, 2, 1, 1, 0, 0]), "must have the same shape"),   # JAX leaves to XLA
    (1, np.zeros((8, 3), np.float32), "same dtype and the same shape")])
def test_ragged_mismatched_shapes(k, bad, msg):
    args = _flat(RAGGED)
    args[k] = bad
    with pytest.raises(ValueError, match=msg):
        xform.eval_shape(_smap(xform, _ragged(xform), 6), *args)


def test_ragged_fails_on_cpu_as_jax():
    # XLA:CPU cannot compile the custom call: both libraries' JaxRuntimeError
    for lib in (jax, xform):
        with pytest.raises(lib.errors.JaxRuntimeError, match="ragged-all-to-all"):
            lib.pmap(_ragged(lib), axis_name="i")(*RAGGED)
        with pytest.raises(lib.errors.JaxRuntimeError, match="ragged-all-to-all"):
            _smap(lib, _ragged(lib), 6)(*_flat(RAGGED))
        with pytest.raises(NotImplementedError):   # vmap of its axis: JAX has no rule
            lib.vmap(_ragged(lib), axis_name="i")(*RAGGED)
    with pytest.raises(NameError, match="unbound axis"):
        xform.lax.ragged_all_to_all(*RAGGED, axis_name="i")


def test_ragged_gpu_lowering_grad_and_vmap_as_jax():
    # the custom calls JAX emits (their backend config and types), for the exchange, its
    # vmap over another axis (one stacked exchange) and its VJP (the reverse exchange)
    args = _flat(RAGGED)

    def f(lib):
        ragged = _ragged(lib)

        def g(*a):
            out, vjp = lib.vjp(lambda x, y: ragged(x, y, *a[2:]), a[0], a[1])
            batched = lib.vmap(ragged)(*[v[None] for v in a])
            grouped = lib.lax.ragged_all_to_all(*a, axis_name="i", axis_index_groups=[[1, 0]])
            return out, batched, vjp(out), grouped
        return g
    mine, theirs = _lower_cuda(f, args, 6)
    calls = _cuda_ops(theirs, "custom_call @ragged_all_to_all")
    assert len(calls) == 4 and calls == _cuda_ops(mine, "custom_call @ragged_all_to_all")
    assert len(_cuda_ops(mine, "all_to_all")) == len(_cuda_ops(theirs, "all_to_all"))


# The rules (JVP, transpose, vmap over another axis) checked by value: JAX runs the
# exchange nowhere on CPU, so both sides run the docstring's semantics on stacked members
# (xform's as a stand-in rule for vmap of the axis, JAX's differentiated directly).

def _ragged_ref(np_, operand, output, input_offsets, send_sizes, output_offsets, _):
    n, k = input_offsets.shape
    per, rows = k // n, []
    m = np_.arange(output.shape[1])
    for r in range(n):
        res = output[r]
        for s in range(n):
            for kk in range(r * per, (r + 1) * per):
                start = output_offsets[s, kk]
                hit = (m >= start) & (m < start + send_sizes[s, kk])
                idx = np_.clip(input_offsets[s, kk] + m - start, 0, operand.shape[1] - 1)
                res = np_.where(hit.reshape((-1,) + (1,) * (res.ndim - 1)),
                                operand[s][idx], res)
        rows.append(res)
    return np_.stack(rows)


@pytest.fixture
def ragged_vmap_stand_in(monkeypatch):
    from xform.interpreters import batching

    def rule(size, name, vals, dims, **params):
        vals = [batching.broadcast(v, size, 0) if d is batching.not_mapped
                else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
        return _ragged_ref(xnp, *vals), 0
    monkeypatch.setitem(batching.collective_batchers, collectives_more.ragged_all_to_all_p,
                        rule)


def _ragged_case():
    """Valid, non-overlapping slices over 2 members, trailing dim 2, 2 slices each."""
    send = np.int32([[1, 2, 0, 1], [2, 1, 1, 1]])   # sender s, slice k -> member k // 2
    inp = np.zeros_like(send)
    inp[:, 1:] = np.cumsum(send, 1)[:, :-1] + 1   # one row of padding between slices
    out_off, recv = np.zeros_like(send), np.zeros_like(send)
    for r in range(N):
        at = 1
        for s in range(N):
            for j in range(2):
                out_off[s, 2 * r + j] = at
                recv[r, 2 * s + j] = send[s, 2 * r + j]
                at += send[s, 2 * r + j]
    rng = np.random.RandomState(0)
    data = rng.randn(N, 9, 2).astype(np.float32), rng.randn(N, 8, 2).astype(np.float32)
    return data, (inp, send, out_off, recv)


def test_ragged_rules_by_value(ragged_vmap_stand_in):
    (operand, output), index = _ragged_case()
    rng = np.random.RandomState(1)
    ct, t_operand = rng.randn(*output.shape), rng.randn(*operand.shape)
    ct, t_operand = ct.astype(np.float32), t_operand.astype(np.float32)
    ref = jax.jit(lambda x, y: _ragged_ref(jnp, x, y, *index))

    def per_member(f):
        return xform.jit(xform.vmap(lambda *a: f(lambda x, y: xform.lax.ragged_all_to_all(
            x, y, *a[-4:], axis_name="i"), *a[:-4]), axis_name="i"))
    out = per_member(lambda f, x, y: f(x, y))(operand, output, *index)
    np.testing.assert_array_equal(out, ref(operand, output))
    # the transpose: the reverse exchange, and ct where nothing arrived
    vjp = per_member(lambda f, x, y, c: xform.vjp(f, x, y)[1](c))
    for got, want in zip(vjp(operand, output, ct, *index),
                         jax.vjp(ref, operand, output)[1](ct)):
        np.testing.assert_array_equal(got, want)
    jvp = per_member(lambda f, x, y, tx, ty: xform.jvp(f, (x, y), (tx, ty))[1])
    np.testing.assert_array_equal(jvp(operand, output, t_operand, ct, *index),
                                  jax.jvp(ref, (operand, output), (t_operand, ct))[1])
    # vmap over another axis inside: one stacked exchange (batch member 1 reversed)
    stacked = [np.stack([v, v[::-1] if v.dtype == np.float32 else v])
               for v in (operand, output, *index)]
    inner = xform.jit(xform.vmap(xform.vmap(lambda *a: xform.lax.ragged_all_to_all(
        *a, axis_name="i")), in_axes=1, out_axes=1, axis_name="i"))(*stacked)
    for b in range(2):
        np.testing.assert_array_equal(inner[b], _ragged_ref(jnp, *[v[b] for v in stacked]))


# ---- pbroadcast ----

def _pbroadcast_ref(x, source):   # JAX's docstring: what collective_broadcast computes
    keep = jax.lax.axis_index("i") == source
    return jax.lax.psum(jnp.where(keep, x, jnp.zeros_like(x)), "i")


X = np.arange(12, dtype=np.float32).reshape(4, 3)
W = np.linspace(-1, 2, 12, dtype=np.float32).reshape(4, 3)


@pytest.mark.parametrize("source", [0, 3])
def test_pbroadcast_vmap_values_and_grad(source):
    mine = xform.vmap(lambda x: xform.lax.pbroadcast(x, "i", source), axis_name="i")
    ref = jax.vmap(lambda x: _pbroadcast_ref(x, source), axis_name="i")
    np.testing.assert_array_equal(mine(X), ref(X))
    np.testing.assert_array_equal(
        xform.grad(lambda x: (mine(x) * W).sum())(X),
        jax.grad(lambda x: (ref(x) * W).sum())(X))
    tree = xform.vmap(lambda t: xform.lax.pbroadcast(t, "i", source), axis_name="i")(
        {"a": X, "b": X[:, 0].astype(np.int32)})
    np.testing.assert_array_equal(tree["b"], np.full(4, X[source, 0], np.int32))


def test_pbroadcast_transpose_under_vmap():
    # grad inside the vmap: the transpose rule (psum, kept at the source) runs per member
    def loss(lib, bcast):
        return lambda x, w: (bcast(x) * w).sum()
    mine = xform.vmap(xform.grad(loss(xform, lambda x: xform.lax.pbroadcast(x, "i", 2))),
                      axis_name="i")
    ref = jax.vmap(jax.grad(loss(jax, lambda x: _pbroadcast_ref(x, 2))), axis_name="i")
    np.testing.assert_allclose(mine(X, W), ref(X, W))


def test_pbroadcast_fails_on_cpu_as_jax():
    for lib in (jax, xform):
        f = lambda x: lib.lax.pbroadcast(x, "i", 1)   # noqa: E731
        msg = "MLIR translation rule for primitive 'pbroadcast' not found for platform cpu"
        with pytest.raises(NotImplementedError, match=msg):
            lib.pmap(f, axis_name="i")(X[:N])
        with pytest.raises(NotImplementedError, match=msg):
            _smap(lib, f, 1)(X)
        with pytest.raises(NotImplementedError, match=msg):
            lib.jit(_smap(lib, f, 1))(X)
        invariant = lib.shard_map(f, mesh=_mesh(lib), in_specs=lib.sharding.PartitionSpec(),
                                  out_specs=lib.sharding.PartitionSpec("i"))
        with pytest.raises(ValueError, match="must be applied to a device-varying"):
            lib.make_jaxpr(invariant)(X)   # (as JAX: no implicit pvary)
    with pytest.raises(ValueError, match="source 2 is out of range"):
        xform.vmap(lambda x: xform.lax.pbroadcast(x, "i", 2), axis_name="i")(X[:N])


# ---- psend / precv ----

def _send_recv(lib, perm=((0, 1),)):
    def f(x):
        token = lib.lax.psend(x, "i", perm)
        return lib.lax.precv(token, lib.ShapeDtypeStruct(x.shape, x.dtype), "i", perm)
    return f


def _body_eqns(closed):
    """The equations of the mapped body, by primitive name."""
    (eqn,) = [e for e in closed.jaxpr.eqns if "jaxpr" in e.params]
    body = eqn.params["jaxpr"]
    return {e.primitive.name: e for e in getattr(body, "jaxpr", body).eqns}


def test_send_recv_types_as_jax():
    mine = _body_eqns(xform.make_jaxpr(_smap(xform, _send_recv(xform), 1))(X))
    theirs = _body_eqns(jax.make_jaxpr(_smap(jax, _send_recv(jax), 1))(X))
    (m_tok,), (t_tok,) = mine["psend"].outvars, theirs["psend"].outvars
    assert str(m_tok.aval.dtype) == "token" and type(t_tok.aval).__name__ == "AbstractToken"
    (m,), (t,) = mine["precv"].outvars, theirs["precv"].outvars
    assert (m.aval.shape, m.aval.dtype) == (t.aval.shape, t.aval.dtype) == ((2, 3),
                                                                            np.float32)


def test_send_recv_fail_on_cpu_as_jax():
    for lib in (jax, xform):
        with pytest.raises(NotImplementedError, match="psend is currently only implemented"
                                                      " on GPU"):
            lib.pmap(_send_recv(lib), axis_name="i")(X[:N])
        with pytest.raises(NotImplementedError, match="Differentiation rule for 'psend'"):
            lib.vmap(lib.grad(lambda x: _send_recv(lib)(x).sum()), axis_name="i")(X[:N])
    with pytest.raises(NotImplementedError, match="psend is currently only implemented"):
        _smap(xform, _send_recv(xform), 1)(X)
    with pytest.raises(NotImplementedError, match="under vmap of its axis"):
        xform.vmap(_send_recv(xform), axis_name="i")(X[:N])


@pytest.mark.parametrize("perm, msg", [(((0, 1), (0, 0)), "must be unique"),
                                       (((0, 2),), "out of range")])
def test_send_recv_bad_perm(perm, msg):
    f = xform.vmap(lambda x: xform.lax.psend(x, "i", perm), axis_name="i")
    with pytest.raises(ValueError, match=msg):
        f(X[:N])
    with pytest.raises(TypeError, match="precv token must be a token"):
        xform.vmap(lambda x: xform.lax.precv(x, x, "i", [(0, 1)]), axis_name="i")(X[:N])


def test_send_recv_pbroadcast_gpu_lowering_as_jax():
    def f(lib):
        return lambda x: _send_recv(lib)(x) + lib.lax.pbroadcast(x, "i", 1)
    mine, theirs = _lower_cuda(f, (X,), 1)
    for op in ("stablehlo.send", "stablehlo.recv", "stablehlo.collective_broadcast"):
        assert _cuda_ops(mine, op) == _cuda_ops(theirs, op) != [], op
