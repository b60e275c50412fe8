#!/usr/bin/python3
"""Runs one command under `/usr/bin/time -v` and reports, as one JSON line on stdout:
wall seconds, the command's user+system CPU seconds, its peak RSS (MiB), its exit status, and the
CPU seconds that OTHER processes used meanwhile (machine busy time from /proc/stat minus the
command's own), as a share of the machine's capacity ("foreign_frac"): the noise figure of a
measurement on a shared machine. The command's own stderr is kept in the JSON ("stderr_tail").

    bench/timed.py [--log FILE] [--stderr FILE] [--rss-timeline FILE] -- COMMAND ARGS...

--log appends the JSON to FILE; --stderr streams the command's stderr to FILE while it runs;
--rss-timeline samples the command's resident memory once a second into FILE.

Stdlib only (Debian /usr/bin/python3). compare_original.py imports run_timed() from here.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def cpu_busy_s():
    """Busy CPU seconds of the whole machine (all cores) from /proc/stat."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def parse_time_v(text):
    """Fields of GNU time -v output that we use."""
    out = {}
    pats = {
        "peak_rss_mib": (r"Maximum resident set size \(kbytes\): (\d+)", lambda s: int(s) / 1024),
        "user_s": (r"User time \(seconds\): ([\d.]+)", float),
        "sys_s": (r"System time \(seconds\): ([\d.]+)", float),
        "elapsed": (r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", str),
    }
    for k, (p, f) in pats.items():
        m = re.search(p, text)
        if m:
            out[k] = f(m.group(1))
    return out


def rss_mib(pid):
    """VmRSS of the (only) child of `pid` (time -v's child: the command), MiB; None if gone."""
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        for line in open(f"/proc/{kids[0]}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


def run_timed(cmd, env=None, log=None, cwd=None, stderr_file=None, rss_timeline=None, rss_period_s=1.0):
    """cmd under /usr/bin/time -v; returns a dict (see module docstring). stderr_file: the
    command's stderr goes there as it comes (progress you can poll). rss_timeline: a file that
    gets "seconds  VmRSS_MiB" lines every rss_period_s."""
    full = ["/usr/bin/time", "-v"] + list(cmd)
    b0, t0 = cpu_busy_s(), time.perf_counter()
    err = open(stderr_file, "w+") if stderr_file else tempfile.TemporaryFile("w+")
    out = tempfile.TemporaryFile("w+")
    p = subprocess.Popen(full, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
    tl = open(rss_timeline, "w") if rss_timeline else None
    while p.poll() is None:
        if tl:
            m = rss_mib(p.pid)
            if m is not None:
                tl.write(f"{time.perf_counter() - t0:.1f} {m:.0f}\n")
                tl.flush()
        try:
            p.wait(timeout=rss_period_s if tl else 3600)
        except subprocess.TimeoutExpired:
            pass
    wall = time.perf_counter() - t0
    busy = cpu_busy_s() - b0
    if tl:
        tl.close()
    err.seek(0)
    out.seek(0)
    p.stderr, p.stdout = err.read(), out.read()
    err.close()
    out.close()
    r = {"cmd": list(cmd), "rc": p.returncode, "wall_s": round(wall, 3)}
    r.update(parse_time_v(p.stderr))
    own = r.get("user_s", 0.0) + r.get("sys_s", 0.0)
    r["foreign_cpu_s"] = round(max(0.0, busy - own), 2)
    r["foreign_frac"] = round(r["foreign_cpu_s"] / max(1e-9, wall * (os.cpu_count() or 1)), 3)
    r["stdout"] = p.stdout
    # the command's stderr without time -v's block
    cut = p.stderr.find("\tCommand being timed:")
    r["stderr_tail"] = (p.stderr[:cut] if cut >= 0 else p.stderr)[-4000:]
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(r) + "\n")
    return r


def main():
    argv = sys.argv[1:]
    opts = {"--log": None, "--stderr": None, "--rss-timeline": None}
    while argv and argv[0] in opts:
        opts[argv[0]], argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.exit(__doc__)
    r = run_timed(argv, log=opts["--log"], stderr_file=opts["--stderr"], rss_timeline=opts["--rss-timeline"])
    sys.stderr.write(r["stderr_tail"])
    print(json.dumps({k: v for k, v in r.items() if k != "stdout"}))
    sys.exit(r["rc"])


if __name__ == "__main__":
    main()
