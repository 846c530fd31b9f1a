"""A tiny stand-in command line (not powerlab) for the fuzz harness's self-test.

Each sub-command produces one known outcome: ``ok``, ``error`` (one clean line, exit 2),
``traceback`` (an uncaught exception), ``overwrite`` (rewrites its input FILE in place),
``bare`` (a bare exception repr, exit 1), ``silent`` (exit 3, nothing printed),
``crash`` (SIGSEGV) and ``hang`` (sleeps).
"""

import argparse
import os
import signal
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(prog="standin", description="stand-in for the fuzz self-test")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True)
    sub.add_parser("ok", help="exit 0")
    e = sub.add_parser("error", help="clean one-line error, exit 2")
    e.add_argument("--draws", type=int, default=3, help="Monte Carlo draws (default 3)")
    sub.add_parser("traceback", help="uncaught KeyError")
    o = sub.add_parser("overwrite", help="write over the input")
    o.add_argument("scenario", help="scenario YAML file")
    o.add_argument("--out", required=True, help="output folder")
    o.add_argument("--tick-s", help="engine tick [s]")
    sub.add_parser("bare", help="bare exception line, exit 1")
    sub.add_parser("silent", help="exit 3 with no message")
    sub.add_parser("crash", help="SIGSEGV")
    h = sub.add_parser("hang", help="sleep")
    h.add_argument("--seconds", type=float, default=60.0, help="how long [s]")
    a = ap.parse_args(argv)
    if a.cmd == "ok":
        print("fine")
        return 0
    if a.cmd == "error":
        print("standin error: error: bad value in x.yaml, line 3", file=sys.stderr)
        return 2
    if a.cmd == "traceback":
        return {}["missing"]
    if a.cmd == "overwrite":
        with open(a.scenario, "a") as fh:
            fh.write("# overwritten\n")
        return 0
    if a.cmd == "bare":
        print("KeyError: 'met'", file=sys.stderr)
        return 1
    if a.cmd == "silent":
        return 3
    if a.cmd == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if a.cmd == "hang":
        time.sleep(a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
