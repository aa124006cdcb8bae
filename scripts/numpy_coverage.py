"""How much of ``jax.numpy``'s public API ``xform.numpy`` provides.

Counting rule: every public name of ``jax.numpy`` (no leading underscore) whose value
is callable, and not a module (``fft``/``linalg`` are counted as submodules apart).
That includes functions, ufuncs and the classes a user calls or passes as a dtype
(``jnp.float32``, ``jnp.dtype``, ``jnp.finfo``): each is part of the API that ``import
xform.numpy as jnp`` code may touch. A name counts as provided when ``xform.numpy``
has an attribute of that name. Functions and classes are also reported apart.

Run: ``python scripts/numpy_coverage.py`` (``-v`` lists what is provided too).
"""
import inspect
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def coverage():
    """``(provided, missing, functions_provided, functions_total)`` name lists/counts."""
    import jax.numpy as jnp
    import xform.numpy as xnp
    names = sorted(n for n in dir(jnp) if not n.startswith("_"))
    api = [n for n in names if callable(getattr(jnp, n))
           and not inspect.ismodule(getattr(jnp, n))]
    provided = [n for n in api if hasattr(xnp, n)]
    missing = [n for n in api if not hasattr(xnp, n)]
    functions = [n for n in api if not inspect.isclass(getattr(jnp, n))]
    return provided, missing, sum(n in provided for n in functions), len(functions)


def main(argv):
    provided, missing, fn_have, fn_total = coverage()
    total = len(provided) + len(missing)
    print(f"xform.numpy provides {len(provided)} of {total} public jax.numpy callables "
          f"({fn_have} of {fn_total} functions, {len(provided) - fn_have} of "
          f"{total - fn_total} classes/dtypes)")
    if "-v" in argv:
        print("provided:", " ".join(provided))
    print(f"missing ({len(missing)}):", " ".join(missing))


if __name__ == "__main__":
    main(sys.argv[1:])
