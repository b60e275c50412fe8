#!/usr/bin/env python3
"""How long Ctrl-C takes to stop a long encode from Python, inside one layer's token mixing.

    PYTHONPATH=BUILD/python python3 bench/robustness/interrupt_latency.py BUILD_DIR [--rounds N]

Two cases where one layer runs for many seconds with no progress point inside it: dense T5 base
attention over 32K tokens (~20 s per layer on 2 cores) and the LOCOST base gated convolution over
697K tokens (the length of War and Peace). Both use the base demo checkpoints (UNTRAINED, seeded
random weights; `locost demo-checkpoint`), random ids, and the machine's threads. Each round starts
an encode, sends SIGINT to the process (as Ctrl-C does) at a random moment in the first layer,
and measures the time until KeyboardInterrupt reaches Python. The first round is a first call at
that length (its scratch is mapped inside the first layer). Prints each round and the maximum.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import locost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    # Started in the background by a shell without job control, Python inherits SIGINT ignored and
    # leaves it so: every signal below would be lost and each round would run to the end.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tool = os.path.join(args.build, "bin", "locost")
    work = os.path.join(args.build, "bench-demo")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(0)
    for family, length, window in (("t5", 32768, (0.5, 8.0)), ("locost", 697_000, (1.0, 20.0))):
        ckpt = os.path.join(work, f"{family}-base")
        if not os.path.isdir(ckpt):
            subprocess.run([tool, "demo-checkpoint", "--family", family, "--config", "base", "--seed", "1", "--out", ckpt],
                           check=True, stdout=subprocess.DEVNULL)
        model = locost.Model(ckpt)
        ids = np.random.default_rng(0).integers(5, 30000, size=(1, length))
        print(f"{family} base demo (UNTRAINED weights), {length} tokens, all threads:")
        worst = 0.0
        for r in range(args.rounds):
            at = rng.uniform(*window)
            timer = threading.Timer(at, lambda: os.kill(os.getpid(), signal.SIGINT))
            start = time.monotonic()
            timer.start()
            try:
                model.encode(ids)
                print(f"  round {r}: the encode ended before the signal ({time.monotonic() - start:.1f} s)")
                continue
            except KeyboardInterrupt:
                took = time.monotonic() - start - at
            timer.join()
            worst = max(worst, took)
            print(f"  round {r}: SIGINT at {at:5.2f} s, KeyboardInterrupt {took * 1000:6.0f} ms later")
        print(f"  worst: {worst * 1000:.0f} ms")
        sys.stdout.flush()
        del model


if __name__ == "__main__":
    main()
