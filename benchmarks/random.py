"""PRNG throughput, jax or xform: jit(normal(k, (1000, 1000))), split(key, 10_000),
jit(gamma(k, 2.5, (10_000,))), eager split(key) and uniform(key, (8,)) (dispatch); and
the compile time of jit(gamma(k, 0.7, (1000,))).

usage: python benchmarks/random.py --lib jax|xform [--quick]
Prints one JSON line: median microseconds per call of each (compiled, warm), and the
median milliseconds to lower and compile the gamma program (a new one each time).
"""
import argparse
import json
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", choices=["jax", "xform"], required=True)
    p.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = p.parse_args()
    if args.lib == "jax":
        import jax
        import jax.random as random
    else:
        import xform as jax
        import xform.random as random
    reps = 3 if args.quick else 30

    def timeit(f, *a):
        jax.block_until_ready(f(*a))            # compile + warm
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(f(*a))
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e6

    def compile_ms():
        # a rejection sampler: one threefry per draw inside two nested while loops
        # (a new alpha each time: a new program, which no in-memory cache has compiled)
        ts = []
        for i in range(1 if args.quick else 3):
            f = jax.jit(lambda k: random.gamma(k, 0.7 + 0.01 * i, (1000,)))
            t = time.perf_counter()
            f.lower(key).compile()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e3

    key = random.PRNGKey(0)
    normal = jax.jit(lambda k: random.normal(k, (1000, 1000)))
    split = jax.jit(lambda k: random.split(k, 10_000))
    gamma = jax.jit(lambda k: random.gamma(k, 2.5, (10_000,)))   # rejection loops
    out = {"script": "random", "lib": args.lib, "normal_1e6_us": round(timeit(normal, key), 1),
           "split_1e4_us": round(timeit(split, key), 1),
           "split_1e4_eager_us": round(timeit(lambda k: random.split(k, 10_000), key), 1),
           "gamma_1e4_us": round(timeit(gamma, key), 1),
           "eager_split_us": round(timeit(random.split, key), 1),
           "eager_uniform8_us": round(timeit(lambda k: random.uniform(k, (8,)), key), 1),
           "gamma_compile_ms": round(compile_ms(), 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
