#!/usr/bin/python3
"""The lead baseline of the manual-page data set: each page's summary is the first sentence of its
DESCRIPTION section (the first paragraph of the document when it has none), written as result lines
that `locost eval --results` scores:

    lead_baseline.py build/manpages/test.jsonl > lead.jsonl
    locost eval --data build/manpages/test.jsonl --results lead.jsonl
"""
import json
import re
import sys

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


def first_sentence(paragraph):
    return SENTENCE_END.split(paragraph.strip(), 1)[0]


def lead(document):
    lines = document.split("\n")
    for i, line in enumerate(lines):
        if line.strip().upper() == "DESCRIPTION":
            for para in lines[i + 1:]:
                if para.strip():
                    return first_sentence(para)
    for para in lines:
        # the first line that reads as prose: several words, not a section title in capitals
        if len(para.split()) >= 4 and not para.isupper():
            return first_sentence(para)
    return ""


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: lead_baseline.py DATA.jsonl > results.jsonl")
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            if line.strip():
                page = json.loads(line)
                print(json.dumps({"id": page["id"], "summary": lead(page["document"])}, ensure_ascii=False))


if __name__ == "__main__":
    main()
