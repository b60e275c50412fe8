"""make_dataset.py on a few fixed pages written here in roff: groff's rendering split into the NAME
line and the document, what is left out and why, the split by source package, and the test split
remade from a committed list. Needs groff (Debian's groff-base); skipped without it."""
import gzip
import json
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import make_dataset as md  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed (Debian: groff-base)")

WORDS = " ".join("word%d" % i for i in range(30))
FROB = r""".TH FROB 1 "2024-01-01" "frob 1.0" "User Commands"
.SH NAME
frob, frobnicate \- adjust the frobs of a file
.SH SYNOPSIS
.B frob
[\fIOPTION\fR]... \fIFILE\fR
.SH DESCRIPTION
.B frob
adjusts the frobs of
.IR FILE .
It reads the whole file first.
.PP
A second paragraph: %s.
.SH OPTIONS
.TP
.B \-v
say what is done
""" % WORDS


def page(name, description, body=WORDS):
    return ".TH %s 1\n.SH NAME\n%s \\- %s\n.SH DESCRIPTION\n%s\n" % (name.upper(), name, description, body)


def write(root, section, name, text, compress=True):
    d = os.path.join(root, "man" + section)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name + (".gz" if compress else ""))
    data = text.encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
    return path


def test_a_page_splits_into_its_name_line_and_the_rest(tmp_path):
    path = write(str(tmp_path), "1", "frob.1", FROB)
    name, text, why = md.render(path)
    assert (name, why) == ("frob.1", None)
    names, description, document = md.split_page(text)
    assert names == "frob, frobnicate"
    assert description == "adjust the frobs of a file"
    lines = document.split("\n")
    # Sections in order without NAME, titles on lines of their own, the running header and footer gone.
    assert [l for l in lines if l.isupper()] == ["SYNOPSIS", "DESCRIPTION", "OPTIONS"]
    assert "NAME" not in document and "User Commands" not in document and "2024-01-01" not in document
    # A paragraph is one line, without hyphenation or the page width's breaks.
    assert "frob adjusts the frobs of FILE. It reads the whole file first." in lines
    assert "A second paragraph: %s." % WORDS in lines


def test_pages_without_a_name_line_aliases_and_unreadable_files(tmp_path):
    root = str(tmp_path)
    assert md.split_page(md.render(write(root, "1", "plain.1", ".TH PLAIN 1\n.SH NAME\nplain\n.SH DESCRIPTION\ntext\n"))[1]) is None
    assert md.render(write(root, "1", "alias.1", ".so man1/frob.1\n"))[2] == "alias"
    bad = os.path.join(root, "man1", "broken.1.gz")
    with open(bad, "wb") as f:
        f.write(b"not gzip")
    assert md.render(bad)[2].startswith("unreadable")


def test_selection_leaves_out_repeats_generated_and_short_pages_and_caps_a_package(tmp_path):
    root = str(tmp_path)
    paths = {
        "a.1": write(root, "1", "a.1", page("a", "first tool")),
        "b.1": write(root, "1", "b.1", page("b", "second name of the first tool")),  # same document as a.1
        "c.1": write(root, "1", "c.1", page("c", "manual page for c 1.0", "other " + WORDS)),
        "d.1": write(root, "1", "d.1", page("d", "too short", "few words here")),
        "e.1": write(root, "1", "e.1", page("e", "nobody's page", "more " + WORDS)),
    }
    for i in range(4):
        paths["g%d.1" % i] = write(root, "1", "g%d.1" % i, page("g%d" % i, "generated tool %d" % i, "g%d %s" % (i, WORDS)))
    rendered = {p: md.render(p)[:2] for p in paths.values()}
    owner = {p: ("pkg-g" if n.startswith("g") else "pkg-a") for n, p in paths.items() if n != "e.1"}
    sources = {"pkg-a": ("src-a", "1.0"), "pkg-g": ("src-g", "2.0")}
    left = {}
    pages, by_source = md.select_pages(rendered, owner, sources, 3, lambda why: left.__setitem__(why, left.get(why, 0) + 1))
    assert [p["id"] for p in pages if p["source"] == "src-a"] == ["a.1"]
    assert pages[0] == {"id": "a.1", "document": "DESCRIPTION\n" + WORDS, "summary": "first tool", "package": "pkg-a",
                        "source": "src-a", "section": "1"}
    assert left == {"same text as another page": 1, "generated NAME line (help2man's 'manual page for')": 1,
                    "document under 20 words": 1, "no package owns the file": 1,
                    "over the cap of 3 pages per source package": 1}
    assert len(by_source["src-g"]) == 3
    # The cap keeps the pages of smallest keyed hash: the same pages on every machine.
    assert sorted(p["id"] for p in by_source["src-g"]) == sorted(sorted(
        ["g0.1", "g1.1", "g2.1", "g3.1"], key=lambda n: md.keyed("src-g/" + n))[:3])


def test_splits_are_by_source_package_with_the_examples_in_test():
    by_source = {"src%03d" % i: [{"id": "p%d.%d" % (i, j)} for j in range(1 + i % 4)] for i in range(200)}
    by_source["tar"] = [{"id": "tar.1"}]
    by_source["bash"] = [{"id": "bash.1"}, {"id": "bashbug.1"}]
    by_source["big"] = [{"id": "big%d.3" % j} for j in range(20)]  # over 1 % of the pages: train
    split, counts = md.assign_splits(by_source)
    assert set(split) == set(by_source)  # each source in exactly one split
    assert split["tar"] == split["bash"] == "test" and split["big"] == "train"
    total = sum(len(v) for v in by_source.values())
    assert counts == {n: sum(len(by_source[s]) for s in split if split[s] == n) for n in ("train", "validation", "test")}
    assert 0 < counts["test"] <= md.TEST_SHARE * total and 0 < counts["validation"] <= md.VALIDATION_SHARE * total
    assert md.assign_splits(dict(reversed(list(by_source.items()))))[0] == split  # not the dict's order


def test_the_test_split_is_remade_from_a_committed_list(tmp_path, monkeypatch, capsys):
    root = str(tmp_path / "man")
    write(root, "1", "frob.1", FROB)
    write(root, "8", "other.8", page("other", "an admin tool"), compress=False)
    monkeypatch.setattr(md, "MAN_ROOT", root)
    _, description, document = md.split_page(md.render(os.path.join(root, "man1", "frob.1.gz"))[1])
    listing = tmp_path / "test-pages.tsv"
    listing.write_text("# comment\nid\tsection\tpackage\tsource\tdocument_sha256\tsummary_sha256\n"
                       "frob.1\t1\tfrob\tfrob-src\t%s\t%s\n" % (md.sha(document), md.sha(description)) +
                       "other.8\t8\tadm\tadm-src\t%s\t%s\n" % ("0" * 64, "0" * 64) +
                       "gone.1\t1\tgone\tgone\t%s\t%s\n" % ("0" * 64, "0" * 64))
    out = tmp_path / "out"
    out.mkdir()
    assert md.split_from_test_list(str(listing), str(out), 2) == 0
    rows = [json.loads(l) for l in (out / "test.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["frob.1", "other.8"]
    assert rows[0] == {"id": "frob.1", "document": document, "summary": description, "package": "frob", "source": "frob-src",
                       "section": "1"}
    assert ("2 of 3 test pages written to %s (1 the same as the list's, 1 with other text: another version of their "
            "package); 1 not on this machine, 0 without a NAME line here" % (out / "test.jsonl")) in capsys.readouterr().out
