"""Bad uses of xform.distributed, each in a fresh process; prints one line per check."""
import sys

import xform


def check(fn, exc, text):
    try:
        fn()
    except exc as e:
        print("OK" if text in str(e) else f"BAD MESSAGE: {e}", flush=True)
        return
    print(f"NOT RAISED: {text}", flush=True)


def main(case):
    if case == "unreachable":  # nobody listens there: a timeout with a message
        check(lambda: xform.distributed.initialize("127.0.0.1:" + sys.argv[2], 2, 1,
                                                   initialization_timeout=2),
              TimeoutError, "could not reach the coordinator at 127.0.0.1:")
    elif case == "twice":
        xform.distributed.initialize("127.0.0.1:" + sys.argv[2], 1, 0,
                                     initialization_timeout=10)
        check(lambda: xform.distributed.initialize("127.0.0.1:" + sys.argv[2], 1, 0),
              RuntimeError, "should only be called once")
        assert xform.distributed.process_count() == 1
        xform.distributed.shutdown()
    elif case == "after_use":
        xform.numpy.ones(2).block_until_ready()
        check(lambda: xform.distributed.initialize("127.0.0.1:1", 2, 0),
              RuntimeError, "must be called before any device is used")
        check(lambda: xform.distributed.initialize(None, 2, 0), ValueError,
              "coordinator_address should be defined")


if __name__ == "__main__":
    main(sys.argv[1])
