"""``xform.random``: JAX's counter-based Threefry PRNG, bit for bit.

Keys are ``uint32[2]`` arrays (JAX's legacy "raw" keys). Derivation follows JAX
0.10.2 with its default ``jax_threefry_partitionable=True``: ``split(key, shape)``
encrypts the 64-bit linear index of each output position (hi word, lo word) under
``key``; ``fold_in(key, d)`` encrypts the counter ``(0, uint32(d))``; ``bits``
encrypts the index of every output element and xors the two output words.
Samplers use JAX's formulas and key usage: ``_core`` (keys, uniform, normal and
their simple transforms), ``_continuous``, ``_gamma`` (gamma family), ``_discrete``.
"""
from xform.random._core import (PRNGKey, key, key_data, wrap_key_data, split,  # noqa: F401
                                fold_in, bits, uniform, normal, truncated_normal,
                                bernoulli, exponential, laplace, logistic, gumbel,
                                cauchy, rademacher, lognormal, pareto, rayleigh, randint)
from xform.random._continuous import (weibull_min, maxwell,  # noqa: F401
                                      double_sided_maxwell, multivariate_normal,
                                      orthogonal, triangular, wald)
from xform.random._gamma import (gamma, loggamma, beta, dirichlet, t,  # noqa: F401
                                 chisquare, f, generalized_normal, ball)
from xform.random._discrete import (categorical, permutation, choice,  # noqa: F401
                                    poisson, geometric, binomial, multinomial)
