"""shard_map's varying-manual-axes typing (check_vma) against jax.shard_map: gradients
of replicated and sharded inputs inside and outside the body, the out_specs
replication error, carries, and check_vma=False."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as JP

import xform
import xform.numpy as xnp
from xform.sharding import PartitionSpec as XP

W = np.linspace(-1, 1, 6).astype(np.float32).reshape(2, 3)
X = np.arange(24, dtype=np.float32).reshape(8, 3) / 10
LIBS = {
    "jax": (jax, jax.numpy, JP, jax.sharding.Mesh(np.array(jax.devices()[:4]), ("i",)),
            jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))),
    "xform": (xform, xnp, XP, xform.sharding.Mesh(np.array(xform.devices()[:4]), ("i",)),
              xform.sharding.Mesh(np.array(xform.devices()).reshape(4, 2), ("x", "y"))),
}


def _cases(lib, check_vma):
    j, np_, P, mesh1, mesh2 = LIBS[lib]
    lax = j.lax

    def sm(f, ins, outs, mesh=mesh1):
        return j.shard_map(f, mesh=mesh, in_specs=ins, out_specs=outs, check_vma=check_vma)

    def inner(w, x):  # a per-device loss differentiated inside the body
        return j.grad(lambda w: np_.sum(np_.sin(w[0] * x)))(w)

    def outer(w, x):
        return lax.psum(np_.sum(np_.sin(w[0] * x)), "i")
    return {
        "inner_grad": lambda: sm(inner, (P(), P("i")), P())(W, X),
        "inner_grad_psum": lambda: sm(lambda w, x: j.grad(
            lambda w: lax.psum(np_.sum(w[0] * x), "i"))(w), (P(), P("i")), P())(W, X),
        "inner_grad_pmean_x": lambda: sm(lambda w, x: j.grad(
            lambda x: lax.pmean(np_.sum(np_.sin(w[0] * x)), "i"))(x),
            (P(), P("i")), P("i"))(W, X),
        "outer_grad": lambda: j.grad(
            lambda w, x: sm(outer, (P(), P("i")), P())(w, x), (0, 1))(W, X),
        "outer_grad_spec_i": lambda: j.grad(
            lambda w: sm(lambda w: np_.sin(w), P(), P("i"))(w).sum())(W),
        "2d_partial": lambda: sm(lambda w, x: j.grad(
            lambda w: np_.sum(np_.cos(w * x[:, :1].sum())))(w),
            (P(None, "y"), P("x")), P(None, "y"), mesh2)(X[:2, :2], X),
        "jit_vmap_inside": lambda: sm(lambda w, x: j.jit(j.vmap(
            lambda r: j.grad(lambda w: np_.sum(w[0] * r))(w)))(x),
            (P(), P("i")), P("i"))(W, X),
        "collectives": lambda: sm(lambda w, x: j.grad(lambda w: np_.sum(
            lax.ppermute(x * w[0], "i", [(0, 1), (1, 2), (2, 3), (3, 0)])
            * lax.axis_index("i") + lax.all_gather(w[1] * x, "i")[1]))(w),
            (P(), P("i")), P())(W, X),
        "all_gather_invariant": lambda: j.grad(lambda x: np_.sum(np_.sin(sm(
            lambda x: lax.all_gather(x * 2, "i", axis=1, to="invarying"), P("i"), P())(x))))(X),
        "psum_of_invariant": lambda: j.grad(
            lambda w: sm(lambda w: lax.psum(w * w, "i"), P(), P())(w).sum())(W),
    }


@pytest.mark.parametrize("check_vma", [True, False])
def test_gradients_match_jax(check_vma):
    want, got = _cases("jax", check_vma), _cases("xform", check_vma)
    for name in want if check_vma else ["inner_grad", "inner_grad_psum",
                                        "all_gather_invariant"]:
        e = jax.tree_util.tree_map(np.asarray, want[name]())
        r = jax.tree_util.tree_map(np.asarray, got[name]())
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(
            b, a, rtol=1e-5, atol=1e-6, err_msg=f"{name} check_vma={check_vma}"), e, r)


def test_vma_types_errors_and_pcast():
    lax, P = xform.lax, XP
    mesh = LIBS["xform"][3]
    seen = {}

    def body(w, x):
        seen.update(x=xform.typeof(x).mat.varying, w=xform.typeof(w).vma,
                    wx=xform.typeof(w * x).vma, psum=xform.typeof(lax.psum(x, "i")).vma,
                    gather=xform.typeof(lax.all_gather(x, "i")).vma,
                    idx=xform.typeof(lax.axis_index("i")).vma,
                    like=xform.typeof(xnp.zeros_like(x)).vma,
                    inv=xform.typeof(lax.all_gather(x, "i", to="invarying")).vma)
        with pytest.raises(ValueError, match=r"unexpected JAX type .* for argument to VJP "
                                             r"function: got f32\[2,3\], but expected "
                                             r"f32\[2,3\]\{V:i\}"):
            xform.vjp(lambda w: w * x, w)[1](w)
        return w
    xform.shard_map(body, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())(W, X)
    i = frozenset({"i"})
    assert seen == dict(x=i, w=frozenset(), wx=i, psum=frozenset(), gather=i, idx=i,
                        like=i, inv=frozenset())
    sm = lambda f, o, **kw: xform.shard_map(f, mesh=mesh, in_specs=(P(), P("i")),
                                            out_specs=o, **kw)
    with pytest.raises(ValueError, match=r"(?s)out_specs\[1\]\['a'\] is P\(\) "
                       r"which implies .* replicated across mesh axis 'i', but could not "
                       r"infer replication .*check_vma=False"):
        sm(lambda w, x: (w, {"a": x * 2}), (P(), {"a": P()}))(W, X)
    # the legacy name, and check_vma=False: the first device's block, as JAX
    jf = jax.shard_map(lambda w, x: x * 2, mesh=LIBS["jax"][3], in_specs=(JP(), JP("i")),
                       out_specs=JP(), check_vma=False)
    np.testing.assert_array_equal(sm(lambda w, x: x * 2, P(), check_rep=False)(W, X),
                                  jf(W, X))
    with pytest.raises(TypeError, match=r"(?s)scan body function carry input .* manual axis "
                                        r"types do not match.*pcast\(\.\.\., \('i',\)"):
        sm(lambda w, x: lax.scan(lambda c, r: (c * r.sum(), None), 1.0, x)[0], P("i"))(W, X)
    with pytest.raises(ValueError, match=r"jax.lax.psum can only accept axis_name which "
                                         r"corresponds to one of varying, .* state"):
        xform.shard_map(lambda x: lax.psum(x, ("x", "y")), mesh=LIBS["xform"][4],
                        in_specs=P("x"), out_specs=P())(X)
    with pytest.raises(ValueError, match="Unsupported pcast from=varying"):
        sm(lambda w, x: lax.pcast(x, "i", to="varying"), P("i"))(W, X)
    # pcast'ing the carry makes the scan typecheck; its gradient sums over devices
    g = sm(lambda w, x: xform.grad(lambda w: lax.scan(
        lambda c, r: (c * xnp.sin(w[0] * r).sum(), None),
        lax.pcast(xnp.float32(1.0), "i", to="varying"), x)[0])(w), P("i"))(W, X)
    jg = jax.shard_map(lambda w, x: jax.grad(lambda w: jax.lax.scan(
        lambda c, r: (c * jax.numpy.sin(w[0] * r).sum(), None),
        jax.lax.pcast(np.float32(1.0), "i", to="varying"), x)[0])(w),
        mesh=LIBS["jax"][3], in_specs=(JP(), JP("i")), out_specs=JP("i"))(W, X)
    np.testing.assert_allclose(g, jg, rtol=1e-5)
