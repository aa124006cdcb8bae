"""xform.image against jax.image at run time: every method up and down, with and without
antialiasing, dtypes, scale_and_translate, a gradient, vmap/jit, and the errors."""
import jax
import jax.image as jimage
import numpy as np
import pytest

import xform
import xform.image as image
import xform.numpy as jnp

_IMG = np.random.default_rng(0).standard_normal((2, 7, 9, 3)).astype(np.float32)
_METHODS = ["nearest", "linear", "cubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"]


def close(a, b, tol=0):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# up in one dimension and down in another; without antialiasing where it changes the
# kernel (edge padding for cubic-pytorch); to a single pixel
_CASES = [(m, (2, 14, 4, 3), True) for m in _METHODS] + [
    (m, (2, 14, 4, 3), False) for m in ("linear", "cubic-pytorch", "lanczos3")] + [
    ("cubic", (2, 1, 1, 3), True)]


@pytest.mark.parametrize("method,shape,antialias", _CASES)
def test_resize_matches_jax(method, shape, antialias):
    close(image.resize(_IMG, shape, method, antialias=antialias),
          jimage.resize(_IMG, shape, method, antialias=antialias))


def test_resize_dtypes_method_enum_and_integer_images():
    ints = np.random.default_rng(1).integers(0, 255, (5, 6)).astype(np.uint8)
    for method in ("nearest", image.ResizeMethod.LINEAR, "bicubic"):
        jm = method if isinstance(method, str) else jimage.ResizeMethod.LINEAR
        close(image.resize(ints, (3, 9), method), jimage.resize(ints, (3, 9), jm))
    assert image.ResizeMethod.from_string("trilinear") is image.ResizeMethod.LINEAR


@pytest.mark.parametrize("method", ["cubic", "area"])
def test_scale_and_translate_matches_jax(method):
    scale, shift = np.float32([1.5, 0.7]), np.float32([0.3, -1.2])
    f = lambda im: lambda x, s, t: im.scale_and_translate(x, (2, 10, 6, 3), (1, 2), s, t,  # noqa: E731
                                                          method)
    close(f(image)(_IMG, scale, shift), jax.jit(f(jimage))(_IMG, scale, shift), 1e-5)


def test_grad_vmap_and_jit():
    loss = lambda lib, im: lambda x: (im.resize(x, (2, 4, 5, 3), "cubic") ** 2).sum()  # noqa: E731
    close(xform.jit(xform.grad(loss(xform, image)))(_IMG),
          jax.jit(jax.grad(loss(jax, jimage)))(_IMG), 1e-5)
    per = lambda im: lambda x: im.resize(x, (5, 5, 3), "linear")  # noqa: E731
    close(xform.vmap(per(image))(_IMG), jax.vmap(per(jimage))(_IMG), 2e-6)  # (the batched
    # dots' layouts are not JAX's: an ulp apart)
    close(xform.jit(per(image))(jnp.asarray(_IMG[0])), per(jimage)(_IMG[0]))


def test_errors_match_jax():
    cases = [lambda im: im.resize(_IMG, (3, 3), "linear"),
             lambda im: im.resize(_IMG, (2, 3, 3, 3), "bogus"),
             lambda im: im.scale_and_translate(_IMG, (2, 3, 3, 3), (1, 2), np.ones(2),
                                               np.zeros(2), "nearest")]
    for case in cases:
        with pytest.raises(ValueError) as want:
            case(jimage)
        with pytest.raises(ValueError) as got:
            case(image)
        assert str(got.value) == str(want.value)
