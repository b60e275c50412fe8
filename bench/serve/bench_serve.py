#!/usr/bin/python3
"""locost serve, measured as its users run it (bench/RESULTS.md, "locost serve").

    bench/serve/bench_serve.py --tool BUILD/bin/locost --t5 T5_BASE --locost LOCOST_BASE \
        --book TEXT --work-dir DIR [--parts throughput,arrivals,overhead,ttft] [--threads N] [--baseline-tool OLD]

throughput  16 short documents (cut from BOOK, --doc-chars characters each, 2,000 by default) sent at
            once to a server on the T5 base demo, greedy, --new-tokens new tokens each (64 by default;
            min_tokens = max_tokens, so an untrained
            model's early end-of-sequence cannot shorten one run and not the other), against the
            same 16 sent one after another to the same server; the server's resident memory and
            its reserved estimate are sampled from /metrics meanwhile, against the budget.
overhead    one ~4K-token document through the server (request to response) against `locost
            summarize`'s own encode + decode time for it (its closing line), same settings, in turns;
            and the request's time beyond the server's own encode + decode (/metrics): what HTTP,
            JSON, tokenizing and scheduling add.
arrivals    16 short documents arriving one every --gap seconds (T5 base demo, greedy, as in
            throughput), so that each arrives while others decode: each request's latency and the time
            to the last answer, and the mean batch the decoder ran (/metrics: rows / steps), for --tool
            and, in the same run, for --baseline-tool (an earlier build) when given.
ttft        time to the first streamed token of a short request on an idle server, and while a
            100K-token document is being encoded (LOCOST base demo: its SSM encoder is linear in
            the length), and the book's encode time alone.

Every part prints one JSON line (with the share of the machine other processes used meanwhile,
`foreign_frac`); stdlib plus requests.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timed import cpu_busy_s  # noqa: E402


class Server:
    def __init__(self, tool, model, threads, *extra):
        self.proc = subprocess.Popen([tool, "serve", "--model", model, "--port", "0", "--threads", str(threads), *extra],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.port = None
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.base = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                if requests.get(self.base + "/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)

    def metric(self, name):
        text = requests.get(self.base + "/metrics", timeout=10).text
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def foreign(busy0, t0, own_cpu):
    """Share of the machine's capacity other processes used since (busy0, t0)."""
    wall = time.time() - t0
    cap = wall * os.cpu_count()
    return max(0.0, (cpu_busy_s() - busy0 - own_cpu) / cap) if cap > 0 else 0.0


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def throughput(a, docs):
    srv = Server(a.tool, a.t5, a.threads)
    body = lambda d: {"prompt": d, "max_tokens": a.new_tokens, "min_tokens": a.new_tokens, "temperature": 0}  # noqa: E731
    post = lambda d: requests.post(srv.base + "/v1/completions", json=body(d), timeout=3600).json()  # noqa: E731
    post(docs[0])  # warm-up
    out = {}
    for mode in ("sequential", "concurrent"):
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                samples.append((srv.metric("locost_memory_resident_bytes"), srv.metric("locost_memory_reserved_bytes")))
                time.sleep(0.25)
        th = threading.Thread(target=sample)
        th.start()
        busy0, c0, t0 = cpu_busy_s(), proc_cpu(srv.proc.pid), time.time()
        if mode == "sequential":
            res = [post(d) for d in docs]
        else:
            with cf.ThreadPoolExecutor(len(docs)) as ex:
                res = list(ex.map(post, docs))
        wall = time.time() - t0
        f = foreign(busy0, t0, proc_cpu(srv.proc.pid) - c0)
        stop.set()
        th.join()
        out[mode] = {"wall_s": round(wall, 2), "foreign_frac": round(f, 3),
                     "completion_tokens": sum(r["usage"]["completion_tokens"] for r in res),
                     "peak_rss_gb": round(max(s[0] for s in samples) / 1e9, 3),
                     "peak_reserved_gb": round(max(s[1] for s in samples) / 1e9, 3)}
        out.setdefault("texts", {})[mode] = [r["choices"][0]["text"] for r in res]
    same = out["texts"]["sequential"] == out["texts"]["concurrent"]
    del out["texts"]
    out.update({"part": "throughput", "documents": len(docs), "doc_chars": a.doc_chars, "new_tokens": a.new_tokens,
                "prompt_tokens_per_doc": round(sum(r["usage"]["prompt_tokens"] for r in res) / len(res)), "speedup": round(out["sequential"]["wall_s"] / out["concurrent"]["wall_s"], 2),
                "texts_equal": same, "budget_gb": round(srv.metric("locost_memory_budget_bytes") / 1e9, 2),
                "weights_gb": round(srv.metric("locost_memory_weights_bytes") / 1e9, 3),
                "cohorts": srv.metric("locost_cohorts_total")})
    srv.stop()
    print(json.dumps(out), flush=True)


def arrivals(a, docs):
    body = lambda d: {"prompt": d, "max_tokens": a.new_tokens, "min_tokens": a.new_tokens, "temperature": 0}  # noqa: E731
    tools = [("tool", a.tool)] + ([("baseline", a.baseline_tool)] if a.baseline_tool else [])
    out = {"part": "arrivals", "documents": len(docs), "gap_s": a.gap, "new_tokens": a.new_tokens, "runs": {}}
    texts = {}
    for name, tool in tools:
        srv = Server(tool, a.t5, a.threads)
        requests.post(srv.base + "/v1/completions", json=body(docs[0]), timeout=3600)  # warm-up
        steps0, rows0 = srv.metric("locost_decode_steps_total"), srv.metric("locost_decode_rows_total")
        busy0, c0, t0 = cpu_busy_s(), proc_cpu(srv.proc.pid), time.time()
        lat = [0.0] * len(docs)
        res = [None] * len(docs)

        def one(i):
            time.sleep(max(0.0, t0 + i * a.gap - time.time()))
            ts = time.time()
            res[i] = requests.post(srv.base + "/v1/completions", json=body(docs[i]), timeout=3600).json()
            lat[i] = time.time() - ts
        with cf.ThreadPoolExecutor(len(docs)) as ex:
            list(ex.map(one, range(len(docs))))
        wall = time.time() - t0
        f = foreign(busy0, t0, proc_cpu(srv.proc.pid) - c0)
        steps = srv.metric("locost_decode_steps_total") - steps0
        rows = srv.metric("locost_decode_rows_total") - rows0
        srv.stop()
        texts[name] = [r["choices"][0]["text"] for r in res]
        out["runs"][name] = {"tool": tool, "last_answer_s": round(wall, 2), "mean_latency_s": round(sum(lat) / len(lat), 2),
                             "max_latency_s": round(max(lat), 2), "mean_batch_rows": round(rows / steps, 2) if steps == steps else None,
                             "foreign_frac": round(f, 3)}
    if len(texts) == 2:
        out["texts_equal"] = texts["tool"] == texts["baseline"]
        b, t = out["runs"]["baseline"], out["runs"]["tool"]
        out["mean_latency_ratio"] = round(b["mean_latency_s"] / t["mean_latency_s"], 2)
        out["last_answer_ratio"] = round(b["last_answer_s"] / t["last_answer_s"], 2)
    print(json.dumps(out), flush=True)


def overhead(a, text):
    path = os.path.join(a.work_dir, "doc4k.txt")
    with open(path, "w") as f:
        f.write(text)
    flags = ["--max-new-tokens", "64", "--min-new-tokens", "64", "--threads", str(a.threads)]
    srv = Server(a.tool, a.t5, a.threads)
    body = {"prompt": text, "max_tokens": 64, "min_tokens": 64}
    requests.post(srv.base + "/v1/completions", json=body, timeout=3600)  # warm-up
    rows = []
    for _ in range(a.reps):
        busy0, t0, ch0 = cpu_busy_s(), time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([a.tool, "summarize", "--model", a.t5, "--input", path, *flags], capture_output=True, text=True, check=True)
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        f_tool = foreign(busy0, t0, (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime))
        m = re.search(r"encode ([\d.]+) s .*decode (\d+) steps, ([\d.]+) ms/token", r.stderr)
        work = float(m.group(1)) + int(m.group(2)) * float(m.group(3)) / 1000
        e0, d0 = srv.metric("locost_encode_seconds_total"), srv.metric("locost_decode_seconds_total")
        busy1, c0, t1 = cpu_busy_s(), proc_cpu(srv.proc.pid), time.time()
        j = requests.post(srv.base + "/v1/completions", json=body, timeout=3600).json()
        served = time.time() - t1
        server_work = (srv.metric("locost_encode_seconds_total") - e0) + (srv.metric("locost_decode_seconds_total") - d0)
        f = max(f_tool, foreign(busy1, t1, proc_cpu(srv.proc.pid) - c0))
        rows.append({"summarize_work_s": round(work, 3), "server_request_s": round(served, 3), "overhead": round(served / work - 1, 4),
                     "server_work_s": round(server_work, 3), "beyond_work_s": round(served - server_work, 4),
                     "same_text": j["choices"][0]["text"] == r.stdout.rstrip("\n"), "foreign_frac": round(f, 3),
                     "prompt_tokens": j["usage"]["prompt_tokens"]})
    srv.stop()
    med = sorted(x["overhead"] for x in rows)[len(rows) // 2]
    beyond = sorted(x["beyond_work_s"] / x["server_request_s"] for x in rows)[len(rows) // 2]
    print(json.dumps({"part": "overhead", "median_overhead": med, "median_beyond_work_share": round(beyond, 5), "runs": rows}), flush=True)


def first_token_s(base, doc, max_tokens=8):
    t0 = time.time()
    with requests.post(base + "/v1/completions", json={"prompt": doc, "max_tokens": max_tokens, "min_tokens": max_tokens,
                                                       "stream": True}, stream=True, timeout=3600) as r:
        for raw in r.iter_lines():
            if raw.startswith(b"data: ") and b'"text"' in raw:
                return time.time() - t0
    return float("nan")


def ttft(a, short, book):
    srv = Server(a.tool, a.locost, a.threads)
    first_token_s(srv.base, short)  # warm-up
    idle = sorted(first_token_s(srv.base, short) for _ in range(5))[2]
    busy0, t0 = cpu_busy_s(), time.time()
    book_done = {}

    def run_book():
        tb = time.time()
        book_done["first_token_s"] = first_token_s(srv.base, book, 4)
        book_done["wall_s"] = time.time() - tb
    th = threading.Thread(target=run_book)
    th.start()
    time.sleep(3.0)  # the book is being encoded by now
    during = []
    while th.is_alive() and len(during) < 5:
        during.append(first_token_s(srv.base, short))
        time.sleep(1.0)
    th.join()
    tokens_in = srv.metric("locost_tokens_in_total")
    f = foreign(busy0, t0, 0)
    srv.stop()
    print(json.dumps({"part": "ttft", "idle_s": round(idle, 3), "during_book_s": [round(x, 3) for x in during],
                      "book_first_token_s": round(book_done["first_token_s"], 1), "book_tokens_approx": len(book) // 4,
                      "tokens_in_total": tokens_in, "note": "foreign_frac includes the server's own work", "machine_busy_frac": round(f, 3)}),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--t5", required=True)
    ap.add_argument("--locost", required=True)
    ap.add_argument("--book", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--parts", default="throughput,overhead,ttft")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--book-chars", type=int, default=450000)
    ap.add_argument("--doc-chars", type=int, default=2000, help="throughput: characters per short document")
    ap.add_argument("--overhead-chars", type=int, default=18500, help="overhead: the document's characters (~4K tokens)")
    ap.add_argument("--new-tokens", type=int, default=64, help="throughput, arrivals: new tokens per document")
    ap.add_argument("--gap", type=float, default=1.0, help="arrivals: seconds between two documents' arrivals")
    ap.add_argument("--baseline-tool", help="arrivals: an earlier build of the tool, measured in the same run")
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    text = open(a.book, encoding="utf-8").read()
    start = len(text) // 5
    docs = [text[start + i * a.doc_chars: start + (i + 1) * a.doc_chars] for i in range(16)]
    parts = a.parts.split(",")
    if "throughput" in parts:
        throughput(a, docs)
    if "arrivals" in parts:
        arrivals(a, docs)
    if "overhead" in parts:
        overhead(a, text[start: start + a.overhead_chars])
    if "ttft" in parts:
        ttft(a, docs[0], text[start: start + a.book_chars])


if __name__ == "__main__":
    main()
