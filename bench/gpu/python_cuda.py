"""The Python module on a GPU against the same module on the CPU (issue 58, item 3), run by
bench/gpu/run_checks.sh on a machine with a GPU and a module built with -DLOCOST_CUDA=ON.

For every family's tiny demo checkpoint (`locost demo-checkpoint --config tiny`, UNTRAINED weights)
and SLED over the T5 one: the same text summarized with device="cpu" and device="cuda", greedy
and beam 4, and streamed with generate_tokens on the GPU: the generated ids must be equal (the
GPU computes in float32 like the CPU, in another order: ids equal, as the C++ tests require).
Then the base demo checkpoint (argument 2) on a 4K-token text: seconds per call on each device.
Prints one line per check and exits 1 if any differs. Needs no numpy.

    python3 bench/gpu/python_cuda.py TESTS_DATA BASE_DEMO [LOCOST_TOOL]
"""
import os
import subprocess
import sys
import time

import locost


def main():
    data, base = sys.argv[1], sys.argv[2]
    tool = sys.argv[3] if len(sys.argv) > 3 else "locost"
    book = open(os.path.join(data, "..", "..", "examples", "data", "pride_and_prejudice.txt"), encoding="utf-8").read()
    text = book[:2500]  # (within the 1024 learned positions of the BART and LED demos)
    failures = 0
    for family in ["locost", "t5", "bart", "led", "longt5", "pegasus_x"]:
        d = f"/tmp/demo-tiny-{family}"
        if not os.path.isdir(d):
            subprocess.run([tool, "demo-checkpoint", "--family", family, "--config", "tiny", "--seed", "3", "--out", d], check=True,
                           capture_output=True)
        setups = [(family, {})] + ([("sled over t5", {"sled": dict(context=128, window_fraction=0.5)})] if family == "t5" else [])
        for name, extra in setups:
            for beams in (1, 4):
                got = {}
                for device in ("cpu", "cuda"):
                    m = locost.Model(d, device=device, **extra)
                    s = m.summarize(text, details=True, max_new_tokens=24, min_new_tokens=24, num_beams=beams)
                    got[device] = list(s.ids)
                ok = got["cpu"] == got["cuda"]
                failures += not ok
                print(f"{'ok' if ok else 'DIFFERENT'}: {name}, beams {beams}: {len(got['cuda'])} ids" +
                      ("" if ok else f"\n  cpu  {got['cpu']}\n  cuda {got['cuda']}"), flush=True)
            m = locost.Model(d, device="cuda", **extra)
            streamed = [t.id for t in m.generate_tokens(text, max_new_tokens=24, min_new_tokens=24)]
            ref = list(locost.Model(d, device="cpu", **extra).summarize(text, details=True, max_new_tokens=24, min_new_tokens=24).ids)
            ok = streamed == ref[1:]  # (the summary's ids start with the decoder's start token)
            failures += not ok
            print(f"{'ok' if ok else 'DIFFERENT'}: {name}, generate_tokens on cuda against summarize on cpu", flush=True)
    # The base demo: time of one 4K-token summarize on each device (the first call pays for warm-up).
    long_text = book[:24000]
    for device in ("cuda", "cpu"):
        m = locost.Model(base, device=device)
        m.summarize(long_text[:2000], max_new_tokens=4)
        t0 = time.perf_counter()
        s = m.summarize(long_text, details=True, max_new_tokens=32, min_new_tokens=32)
        print(f"base demo, {device}: {s.input_tokens} tokens, {time.perf_counter() - t0:.2f} s "
              f"(encode {s.encode_seconds:.2f} s, decode {s.decode_seconds:.2f} s for {s.steps} steps)", flush=True)
    print("python on cuda:", "all equal" if failures == 0 else f"{failures} differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
