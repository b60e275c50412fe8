#!/usr/bin/python3
"""Each page's real NAME line beside the lines models generated for it:

    show_summaries.py DATA.jsonl LABEL=RESULTS.jsonl [LABEL=RESULTS.jsonl ...]

DATA.jsonl: the pages (id, summary), as make_dataset.py writes them; RESULTS.jsonl: `locost eval
--out` (or `summarize --inputs --out`) lines (id, summary or error). Pages in DATA's order.
"""
import json
import sys


def main():
    if len(sys.argv) < 3 or any("=" not in x for x in sys.argv[2:]):
        sys.exit("usage: show_summaries.py DATA.jsonl LABEL=RESULTS.jsonl [LABEL=RESULTS.jsonl ...]")
    pages = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
    runs = []
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        got = {}
        for l in open(path, encoding="utf-8"):
            if l.strip():
                j = json.loads(l)
                got[j["id"]] = j.get("summary") if "summary" in j else "[error: %s]" % j.get("error", {}).get("id", "?")
        runs.append((label, got))
    width = max(len(label) for label, _ in runs + [("NAME line", None)])
    for p in pages:
        print("%s (%d words)" % (p["id"], len(p["document"].split())))
        print("  %-*s  %s" % (width, "NAME line", p["summary"]))
        for label, got in runs:
            print("  %-*s  %s" % (width, label, got.get(p["id"], "[not summarized]")))


if __name__ == "__main__":
    main()
