"""Leftovers of the Optax differential sweep: step-exact eager updates, compared with optax."""
import jax
import numpy as np
import optax
import pytest

import xform
import xform.optim as xo

R = np.random.RandomState(0)
PARAMS = {'w': R.randn(3, 4).astype(np.float32), 'b': R.randn(4).astype(np.float32),
          's': np.float32(0.7)}
GRADS = [{k: np.asarray(R.randn(*np.shape(v)) * (1 + i), np.float32) for k, v in PARAMS.items()}
         for i in range(4)]

CASES = {
    # bias correction's 1 - b2**t cancels: an ulp of XLA's pow showed as ~1e-5 of the update
    'scale_by_adam': lambda m: m.scale_by_adam(),
    'scale_by_adam_nesterov': lambda m: m.scale_by_adam(b1=0.5, nesterov=True),
    # Optax's lax.cond keeps bf16 ``b1 * mu`` unrounded before the f32 add
    'novograd_bf16': lambda m: m.scale_by_novograd(mu_dtype=jax.numpy.bfloat16 if m is optax
                                                   else xform.numpy.bfloat16),
    # prodigy divides by the *new* lr estimate (visible when lr 0 makes it Optax's NaN)
    'prodigy_lr0': lambda m: m.contrib.prodigy(m.warmup_cosine_decay_schedule(0., .2, 2, 5)),
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_step_exact_vs_optax(name):
    rt, xt = CASES[name](optax), CASES[name](xo)
    rs, xs = rt.init(PARAMS), xt.init(PARAMS)
    rp = xp = PARAMS
    for g in GRADS:
        ru, rs = rt.update(g, rs, rp)
        xu, xs = xt.update(g, xs, xp)
        for a, b in zip(xform.tree_util.tree_leaves((xu, xs)), jax.tree_util.tree_leaves((ru, rs))):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=0)
        rp, xp = optax.apply_updates(rp, ru), xo.apply_updates(xp, xu)


def test_multisteps_nan_gradients_eager_vs_optax():
    """MultiSteps' cond branches take their operands as Optax's do: closed over, eager
    ``emit * -inf`` in a non-emitting step gave NaN where Optax gives 0."""
    g = {'b': np.array([np.inf, -1.], np.float32), 's': np.float32(np.inf)}
    outs = []
    for m, tu in ((optax, jax.tree_util), (xo, xform.tree_util)):
        tx = m.MultiSteps(m.sgd(0.1), 2)
        p = {'b': np.zeros(2, np.float32), 's': np.float32(0.)}
        outs.append([np.asarray(x) for x in tu.tree_leaves(tx.update(g, tx.init(p), p))])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_sm3_rejects_complex_params_as_optax():
    p = {'c': np.ones(2, np.complex64)}
    msgs = []
    for m in (optax, xo):
        with pytest.raises(ValueError) as e:
            m.scale_by_sm3().init(p)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


_MIXED = {'w': R.randn(3, 2).astype(np.float32), 's': np.float32(0.7),
          'h': R.randn(2, 2).astype(jax.numpy.bfloat16), 'f': R.randn(3).astype(np.float16)}
_MIXED_GRADS = [jax.tree_util.tree_map(lambda v: np.asarray(R.randn(*np.shape(v)), v.dtype), _MIXED)
                for _ in range(3)]
_MIXED_CASES = {
    # non-default hyperparameters, schedules as learning rates, masks and low-precision
    # moments, on a tree mixing f32, a 0-d f32, bf16 and f16 leaves (round-2 sweep)
    'adamw': lambda m, n: m.adamw(m.exponential_decay(.1, 2, .5, staircase=True), b1=.8,
                                  weight_decay=.1, mask=lambda p: {k: k != 's' for k in p},
                                  mu_dtype=n.bfloat16, nesterov=True),
    'rmsprop': lambda m, n: m.rmsprop(.01, decay=.8, centered=True, momentum=.9,
                                      nesterov=True, eps_in_sqrt=False, bias_correction=True),
    'lion_multi': lambda m, n: m.multi_transform(
        {'a': m.lion(.01, mu_dtype=n.float16), 'b': m.sgd(.1, momentum=.5, nesterov=True)},
        {'w': 'a', 's': 'b', 'h': 'a', 'f': 'b'}),
    # bias_correction inlines under jit as Optax's jit(inline=True): as a nested call XLA
    # kept the bf16 leaf's intermediates unrounded (2e-3 off)
    'ademamix_sched': lambda m, n: m.contrib.ademamix(
        .1, b3=m.linear_schedule(.5, .9, 3), alpha=m.linear_schedule(0., 5., 3)),
}


@pytest.mark.parametrize('name', sorted(_MIXED_CASES))
def test_mixed_dtype_tree_jitted_steps_vs_optax(name):
    outs = []
    for m, n, jit, tu in ((optax, jax.numpy, jax.jit, jax.tree_util),
                          (xo, xform.numpy, xform.jit, xform.tree_util)):
        tx = _MIXED_CASES[name](m, n)
        p = tu.tree_map(n.asarray, _MIXED)
        s, upd, leaves = tx.init(p), jit(tx.update), []
        for g in _MIXED_GRADS:
            u, s = upd(g, s, p)
            p = m.apply_updates(p, u)
            leaves.append([np.asarray(x) for x in tu.tree_leaves((u, s))])
        outs.append(leaves)
    for ra, xa in zip(*outs):
        assert len(ra) == len(xa)
        for a, b in zip(xa, ra):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32))


@pytest.mark.parametrize('assoc', [False, True])
def test_tree_sum_order_vs_optax(assoc):
    """``associative_reduction=True`` sums pairwise as ``jax.tree.reduce_associative``:
    on {bf16, int32, f32} leaves the bf16 + int32 pair rounds to bf16 first (xform summed
    left to right, 0.4% off Optax)."""
    t = {'h': np.array([.3, .77], jax.numpy.bfloat16), 'i': np.array([1, -2, 3], np.int32),
         'w': np.arange(6, dtype=np.float32) * .37}
    r = optax.tree_utils.tree_sum(t, associative_reduction=assoc)
    x = xo.tree_utils.tree_sum(t, associative_reduction=assoc)
    assert np.asarray(x).dtype == np.asarray(r).dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(r))


@pytest.mark.parametrize('name', ['adamw_callable_mask', 'multi_transform'])
def test_tree_map_params_through_masks_vs_optax(name):
    """``masked`` passes tree_map_params' placeholder to its inner init unmasked, as
    Optax's (xform applied the mask to it: TypeError/ValueError)."""
    make = {'adamw_callable_mask': lambda m: m.adamw(.1, mask=lambda p: {k: k != 's' for k in p}),
            'multi_transform': lambda m: m.multi_transform(
                {'a': m.adam(.1), 'b': m.sgd(.1, momentum=.9)}, {'w': 'a', 'b': 'b', 's': 'a'})}
    outs = []
    for m, tu in ((optax, jax.tree_util), (xo, xform.tree_util)):
        tx = make[name](m)
        s = m.tree_utils.tree_map_params(tx, lambda v: v + 1, tx.init(PARAMS),
                                         transform_non_params=lambda v: v * 0)
        outs.append([np.asarray(x) for x in tu.tree_leaves(s)])
    assert len(outs[0]) == len(outs[1])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize('key', ['none', 'np_int', 'seed', 'raw'])
def test_add_noise_keys_and_warnings_vs_optax(key):
    """add_noise canonicalizes its key as Optax's (a NumPy int seed works, a raw
    uint32[2] PRNGKey is a TypeError) and warns as Optax 0.2.8 for seed= / no key."""
    import warnings
    res = []
    for m, n, jr in ((optax, jax.numpy, jax.random), (xo, xform.numpy, xform.random)):
        args, kw = {'none': ((), {}), 'np_int': ((np.int32(3),), {}), 'seed': ((), {'seed': 4}),
                    'raw': ((jr.PRNGKey(5),), {})}[key]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            try:
                tx = m.add_noise(.1, .55, *args, **kw)
                out = np.asarray(tx.update({'a': n.ones(2)}, tx.init({'a': n.ones(2)}))[0]['a'])
            except TypeError:
                out = 'TypeError'
        res.append((out if isinstance(out, str) else out.tolist(),
                    [(x.category, str(x.message)) for x in w]))
    assert res[0] == res[1]


def test_inject_hyperparams_numpy_scalars_vs_optax():
    """Optax injects int/float/ndarray/jax.Array hyperparameters only: a NumPy float32
    or int64 scalar stays static (xform put them in ``state.hyperparams`` too)."""
    keys, vals = [], []
    for m, n in ((optax, jax.numpy), (xo, xform.numpy)):
        tx = m.inject_hyperparams(m.adam)(learning_rate=np.float64(.1), b1=np.float32(.8),
                                          b2=n.asarray(.9), eps=np.array(1e-3))
        s = tx.init(PARAMS)
        keys.append(sorted(s.hyperparams))
        vals.append([(np.asarray(v).dtype, float(v)) for _, v in sorted(s.hyperparams.items())])
    assert keys[0] == keys[1] and vals[0] == vals[1]
