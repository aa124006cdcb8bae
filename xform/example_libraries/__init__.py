"""``jax.example_libraries``: the small ``optimizers`` and ``stax`` libraries that older
JAX code still imports (``from xform.example_libraries import optimizers, stax``)."""
