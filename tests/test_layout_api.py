"""xform.experimental.layout against jax.experimental.layout (JAX 0.10.2) on CPU: the
formats arrays and compiled programs report, jit and device_put honouring explicit and
AUTO layouts, with_layout_constraint, and the errors. (tests/test_layout.py is the
repository's structure test.)"""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import layout as jl

import xform
import xform.numpy as xjnp
from xform.experimental import layout as xl


def _flat(fmts):
    """(major_to_minor, tiling) per Format of a (possibly nested) tree of Formats."""
    leaves = jax.tree_util.tree_leaves(fmts, is_leaf=lambda f: hasattr(f, "layout"))
    return [(f.layout.major_to_minor, f.layout.tiling) for f in leaves]


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value), str(e.value)


X = np.arange(12.0, dtype=np.float32).reshape(3, 4)
F = lambda a: (a.T * 2, a.sum(0))  # noqa: E731


def test_array_and_default_executable_formats():
    for v in (X, X[0], np.float32(3), np.ones((2, 3, 4), np.int8)):
        assert _flat(xjnp.asarray(v).format) == _flat(jjnp.asarray(v).format)
    xc, jc = xform.jit(F).lower(X).compile(), jax.jit(F).lower(X).compile()
    assert _flat(xc.input_formats) == _flat(jc.input_formats)
    g = lambda a, b=1: a * b  # noqa: E731   (the formats' tree: JAX's (args, kwargs))
    xi, ji = (lib.jit(g).lower(X, b=X).compile().input_formats for lib in (xform, jax))
    assert (len(xi[0]), list(xi[1])) == (len(ji[0]), list(ji[1])) == (1, ["b"])
    assert xi[1]["b"].layout == xl.Layout(ji[1]["b"].layout.major_to_minor, ())
    assert _flat(xc.output_formats) == _flat(jc.output_formats)
    assert repr(xl.Layout.AUTO) == repr(jl.Layout.AUTO) == "AUTO"
    assert repr(xl.Layout((1, 0))) == repr(jl.Layout((1, 0)))


@pytest.mark.parametrize("m2m", [(1, 0), (0, 1)])
def test_explicit_layouts_in_jit_and_device_put(m2m):
    xs, js = xjnp.asarray(X).sharding, jjnp.asarray(X).sharding
    xfmt, jfmt = xl.Format(xl.Layout(m2m), xs), jl.Format(jl.Layout(m2m), js)
    xf = xform.jit(F, in_shardings=xfmt, out_shardings=(xfmt, None))
    jf = jax.jit(F, in_shardings=jfmt, out_shardings=(jfmt, None))
    xc, jc = xf.lower(X).compile(), jf.lower(X).compile()
    assert _flat(xc.input_formats) == _flat(jc.input_formats)
    assert _flat(xc.output_formats) == _flat(jc.output_formats)
    xy, jy = xform.device_put(X, xfmt), jax.device_put(X, jfmt)
    assert _flat(xy.format) == _flat(jy.format)
    np.testing.assert_array_equal(np.asarray(xy), np.asarray(jy))
    for arg_x, arg_j in ((X, X), (xy, jy)):   # row-major and laid-out arguments
        xo, jo = xf(arg_x), jf(arg_j)
        assert _flat(xo[0].format) == _flat(jo[0].format)
        for a, b in zip(xo, jo):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # a laid-out array feeds default-layout programs and eager ops with its values
    np.testing.assert_array_equal(np.asarray(xform.jit(lambda a: a * 3)(xy) + xy.T.T),
                                  np.asarray(jax.jit(lambda a: a * 3)(jy) + jy.T.T))
    assert _flat((xy + 1).format) == _flat((jy + 1).format)


def test_struct_format_lays_out_the_aot_argument():
    def run(lib, m, jnp):
        fmt = m.Format(m.Layout((1, 0)), jnp.asarray(X).sharding)
        sds = lib.ShapeDtypeStruct(X.shape, jnp.float32, sharding=fmt)
        c = lib.jit(lambda a: a.T * 2).lower(sds).compile()
        return _flat(sds.format), _flat(c.input_formats), np.asarray(c(X))
    (xs, xi, xo), (js, ji, jo) = run(xform, xl, xjnp), run(jax, jl, jjnp)
    assert xs == [((1, 0), None)] == js and xi == ji
    np.testing.assert_array_equal(xo, jo)


def test_auto_layouts_report_xla_choice():
    g = lambda a: a.T * 2  # noqa: E731
    xf = xform.jit(g, in_shardings=xl.Format(xl.Layout.AUTO),
                   out_shardings=xl.Format(xl.Layout.AUTO))
    jf = jax.jit(g, in_shardings=jl.Format(jl.Layout.AUTO),
                 out_shardings=jl.Format(jl.Layout.AUTO))
    xc, jc = xf.lower(X).compile(), jf.lower(X).compile()
    assert _flat(xc.input_formats) == _flat(jc.input_formats)
    assert _flat(xc.output_formats) == _flat(jc.output_formats)
    assert 'mhlo.layout_mode = "auto"' in xf.lower(X).as_text()
    xo, jo = xf(X), jf(X)
    assert _flat(xo.format) == _flat(jo.format)
    np.testing.assert_array_equal(np.asarray(xo), np.asarray(jo))
    # an Array already in another concrete layout is refused, as JAX refuses it
    cm = lambda lib, m, x: lib.device_put(x, m.Format(m.Layout((1, 0)), x.sharding))  # noqa
    xe = _error(lambda: xf(cm(xform, xl, xjnp.asarray(X))))
    je = _error(lambda: jf(cm(jax, jl, jjnp.asarray(X))))
    assert xe[0] is je[0] is ValueError
    assert xe[1].split("Got")[0] == je[1].split("Got")[0]


def test_with_layout_constraint_jit_grad_vmap_eager():
    def make(lib, m):
        return lambda a: m.with_layout_constraint(a * 2, m.Layout((1, 0)))
    xg, jg = make(xform, xl), make(jax, jl)
    xo, jo = xform.jit(xg)(X), jax.jit(jg)(X)
    assert _flat(xo.format) == _flat(jo.format)
    np.testing.assert_array_equal(np.asarray(xo), np.asarray(jo))
    np.testing.assert_array_equal(np.asarray(xg(xjnp.asarray(X))), np.asarray(jg(jjnp.asarray(X))))
    np.testing.assert_array_equal(np.asarray(xform.grad(lambda a: xg(a).sum())(X)),
                                  np.asarray(jax.grad(lambda a: jg(a).sum())(X)))
    xs = np.stack([X, X + 1])
    np.testing.assert_array_equal(np.asarray(xform.jit(xform.vmap(xg))(xs)),
                                  np.asarray(jax.jit(jax.vmap(jg))(xs)))


def test_errors_match_jax():
    xs, js = xjnp.asarray(X).sharding, jjnp.asarray(X).sharding
    xe = _error(lambda: xl.Format(xl.Layout((1, 0))))
    assert (xe[0], xe[1].replace("xform.core.layout", "jax._src.layout")) == \
        _error(lambda: jl.Format(jl.Layout((1, 0))))
    assert _error(lambda: xl.Format(3))[0] is _error(lambda: jl.Format(3))[0] is TypeError
    bad = lambda lib, m, s: lib.jit(F, in_shardings=m.Format(m.Layout((0, 1, 2)), s))  # noqa
    assert _error(lambda: bad(xform, xl, xs)(X)) == _error(lambda: bad(jax, jl, js)(X))
    auto = lambda lib, m, s: lib.device_put(X, m.Format(m.Layout.AUTO, s))  # noqa: E731
    assert _error(lambda: auto(xform, xl, xs)) == _error(lambda: auto(jax, jl, js))
    wlc = lambda lib, m: lib.jit(  # noqa: E731
        lambda a: m.with_layout_constraint(a, m.Layout((1, 0, 2))))(X)
    assert _error(lambda: wlc(xform, xl)) == _error(lambda: wlc(jax, jl))


def test_docstring_examples_run():
    import doctest
    result = doctest.testmod(xl, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
