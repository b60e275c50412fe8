#!/usr/bin/python3
"""A summarization data set from this machine's English manual pages.

Each page's NAME line is a one-line summary a person wrote ("tar - an archiving utility"); the rest
of the page is the document. The pages are rendered to plain text with groff (as man(1) would,
without hyphenation and with paragraphs on one line), and written as JSON lines

    {"id": "tar.1", "document": "...", "summary": "an archiving utility",
     "package": "tar", "source": "tar", "section": "1"}

into OUT/train.jsonl, OUT/validation.jsonl and OUT/test.jsonl. The texts stay on this machine
(each page is under its package's licence); what is committed is the list of the test pages
with checksums (--test-list) and each package's licence as its copyright file states it
(--licences).

Pages left out, each counted in OUT/report.json:
  - aliases: a symbolic link to another page, or a page that is only `.so other-page`;
  - the same text under several names (kept once, under the first name in sort order);
  - pages without a NAME line of the form "name[, name...] - description";
  - generated NAME lines that summarize nothing ("manual page for foo 1.2", help2man's);
  - documents of fewer than 20 words;
  - pages of a source package beyond --max-pages-per-source (2,000; those with the smallest keyed
    hashes of their names stay): google-cloud-cli alone ships 16,625 pages generated from one
    program's help, which share most of their text and would otherwise be 84 % of the data.

Splits are by *source package*, so that no package has pages in two splits: packages are taken
in the order of a keyed hash of their names, and go to test until it holds 5 % of the pages,
then to validation until 5 %, then to train; a package with more than 1 % of all pages goes to
train (one large library's API pages would otherwise make up a split). The packages whose pages
the project shows as examples (tar, grep, openssh, bash, coreutils) are put in test first, so
that no example was seen in training.

    make_dataset.py --out build/manpages [--jobs 2] [--test-list FILE.tsv] [--licences FILE.tsv]
                    [--max-pages-per-source 2000]

Rendering every page takes about 10 minutes on 2 cores; the texts are kept in OUT/render-cache.json.gz
(by path, size and modification time), so a second run only renders pages that changed.
    make_dataset.py --out DIR --check-test-list FILE.tsv   # which committed test pages this machine has
    make_dataset.py --out DIR --from-test-list FILE.tsv    # only the committed test pages: DIR/test.jsonl
"""
import argparse
import concurrent.futures
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time

MAN_ROOT = "/usr/share/man"
SECTIONS = [str(s) for s in range(1, 9)]
SPLIT_KEY = "locost-manpages-1"  # changing it reshuffles the splits
TEST_SHARE, VALIDATION_SHARE, LARGE_PACKAGE_SHARE = 0.05, 0.05, 0.01
EXAMPLE_SOURCES = ["tar", "grep", "openssh", "bash", "coreutils"]
MIN_WORDS = 20

DASHES = (" - ", " \u2212 ", " \u2010 ", " \u2013 ", " \u2014 ", " -- ")
GENERATED = re.compile(r"\bmanual page for\b|^\s*$", re.IGNORECASE)


def page_files():
    """Every regular page file under man1..man8 (the English pages), and the aliases skipped."""
    files, aliases = [], 0
    for s in SECTIONS:
        d = os.path.join(MAN_ROOT, "man" + s)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if os.path.islink(p) or not os.path.isfile(p):
                aliases += 1
                continue
            files.append(p)
    return files, aliases


def page_name(path):
    """'tar.1' for /usr/share/man/man1/tar.1.gz."""
    base = os.path.basename(path)
    return base[:-3] if base.endswith(".gz") else base


def read_source(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw


def render(path):
    """(name, text, None) of one page rendered by groff, or (name, None, why)."""
    name = page_name(path)
    try:
        raw = read_source(path)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        return name, None, "unreadable: %s" % e
    head = raw.lstrip()[:200]
    if head.startswith(b".so ") and raw.count(b"\n") <= 2:
        return name, None, "alias"
    try:
        out = subprocess.run(
            ["groff", "-k", "-t", "-mandoc", "-Tutf8", "-rLL=1000n", "-rHY=0", "-P-cbou"],
            input=raw, capture_output=True, timeout=60, cwd=MAN_ROOT,
            env=dict(os.environ, LC_ALL="C.UTF-8"))
    except subprocess.TimeoutExpired:
        return name, None, "groff timed out"
    if out.returncode != 0:
        return name, None, "groff failed"
    return name, out.stdout.decode("utf-8", "replace"), None


def split_page(text):
    """(names, description, document) of a rendered page, or None without a usable NAME line."""
    lines = [l.rstrip() for l in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) < 3:
        return None
    lines = lines[1:-1]  # the running header and footer
    sections, current = [], None
    for l in lines:
        if l and not l[0].isspace():
            current = [l.strip(), []]
            sections.append(current)
        elif current is not None:
            current[1].append(l.strip())
    name_at = next((i for i, s in enumerate(sections) if s[0].upper() in ("NAME", "NOM", "NOMBRE")), None)
    if name_at is None:
        return None
    name_line = " ".join(x for x in sections[name_at][1] if x)
    for dash in DASHES:
        if dash in name_line:
            names, description = name_line.split(dash, 1)
            break
    else:
        return None
    description = " ".join(description.split())
    rest = sections[:name_at] + sections[name_at + 1:]
    body = []
    for title, content in rest:
        body.append(title)
        para = []
        for x in content + [""]:
            if x:
                para.append(" ".join(x.split()))
            elif para:
                body.append("\n".join(para))
                para = []
    document = "\n".join(body)
    return names.strip(), description, document


def package_of_files():
    """path -> binary package, from dpkg's file lists."""
    owner = {}
    info = "/var/lib/dpkg/info"
    for f in os.listdir(info):
        if not f.endswith(".list"):
            continue
        pkg = f[:-5].split(":")[0]
        with open(os.path.join(info, f), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                p = line.rstrip("\n")
                if p.startswith(MAN_ROOT + "/man"):
                    owner[p] = pkg
    return owner


def source_of_packages():
    out = subprocess.run(["dpkg-query", "-W", "-f=${binary:Package}\t${source:Package}\t${Version}\n"],
                         capture_output=True, text=True, check=True).stdout
    src = {}
    for line in out.splitlines():
        pkg, source, version = line.split("\t")
        src[pkg.split(":")[0]] = (source or pkg, version)
    return src


def licence_of(pkg):
    """The licence names a package's copyright file states (DEP-5 'License:' fields), or a note."""
    path = "/usr/share/doc/%s/copyright" % pkg
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return "no copyright file"
    names = []
    for m in re.finditer(r"^License:[ \t]*(\S[^\n]*)$", text, re.MULTILINE):
        n = m.group(1).strip()
        if n not in names:
            names.append(n)
    if names:
        return "; ".join(names)
    return "not machine-readable (see %s)" % path


def keyed(name):
    return hashlib.sha256((SPLIT_KEY + "\0" + name).encode()).hexdigest()


def assign_splits(pages_by_source):
    total = sum(len(v) for v in pages_by_source.values())
    split, counts = {}, {"train": 0, "validation": 0, "test": 0}
    order = [s for s in EXAMPLE_SOURCES if s in pages_by_source]
    order += sorted((s for s in pages_by_source if s not in EXAMPLE_SOURCES), key=keyed)
    for s in order:
        n = len(pages_by_source[s])
        if s in EXAMPLE_SOURCES:
            where = "test"
        elif n > LARGE_PACKAGE_SHARE * total:
            where = "train"
        elif counts["test"] + n <= TEST_SHARE * total:
            where = "test"
        elif counts["validation"] + n <= VALIDATION_SHARE * total:
            where = "validation"
        else:
            where = "train"
        split[s] = where
        counts[where] += n
    return split, counts


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def select_pages(rendered, owner, sources, max_per_source, leave):
    """The pages of the data set from the rendered ones ({path: (name, text)}), in name order, and
    the same grouped by source package: pages without a usable NAME line, with a generated one,
    under MIN_WORDS words, repeating an earlier page's text, owned by no package, or beyond a source
    package's cap are left out, each counted by leave(why)."""
    pages, seen_text = [], {}
    for path in sorted(rendered, key=lambda p: (page_name(p), p)):
        name, text = rendered[path]
        parts = split_page(text)
        if parts is None:
            leave("no NAME line 'name - description'")
            continue
        names, description, document = parts
        if GENERATED.search(description):
            leave("generated NAME line (help2man's 'manual page for')")
            continue
        if len(document.split()) < MIN_WORDS:
            leave("document under %d words" % MIN_WORDS)
            continue
        key = sha(document)
        if key in seen_text:
            leave("same text as another page")
            continue
        seen_text[key] = name
        pkg = owner.get(path, "")
        if not pkg:
            leave("no package owns the file")
            continue
        source = sources.get(pkg, (pkg, ""))[0]
        pages.append({"id": name, "document": document, "summary": description, "package": pkg, "source": source,
                      "section": os.path.basename(os.path.dirname(path))[len("man"):]})

    by_source = {}
    for p in pages:
        by_source.setdefault(p["source"], []).append(p)
    for source, mine in by_source.items():
        if len(mine) > max_per_source:
            keep = set(p["id"] for p in sorted(mine, key=lambda p: keyed(source + "/" + p["id"]))[: max_per_source])
            for p in mine:
                if p["id"] not in keep:
                    leave("over the cap of %d pages per source package" % max_per_source)
            by_source[source] = [p for p in mine if p["id"] in keep]
    kept = set(id(p) for mine in by_source.values() for p in mine)
    pages = [p for p in pages if id(p) in kept]
    return pages, by_source


def split_from_test_list(list_path, out_dir, jobs):
    """OUT/test.jsonl from the pages a committed test list names, rendered here as the full run
    renders them. A page this machine lacks is left out and counted; a page whose text or NAME line
    differs from the list's checksums (another version of its package) is kept and counted."""
    wanted = []
    with open(list_path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("id\t") or not line.strip():
                continue
            pid, section, pkg, source, dsha, ssha = line.rstrip("\n").split("\t")
            wanted.append((pid, section, pkg, source, dsha, ssha))
    paths = []
    for pid, section, *_ in wanted:
        d = os.path.join(MAN_ROOT, "man" + section)
        found = next((os.path.join(d, pid + ext) for ext in (".gz", "") if os.path.isfile(os.path.join(d, pid + ext))), None)
        paths.append(found)
    present = [p for p in paths if p]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rendered = dict(zip(present, pool.map(render, present)))
    same = differ = missing = unusable = 0
    tmp = os.path.join(out_dir, "test.jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for (pid, section, pkg, source, dsha, ssha), path in zip(wanted, paths):
            if path is None:
                missing += 1
                continue
            _, text, why = rendered[path]
            parts = split_page(text) if text is not None else None
            if parts is None:
                unusable += 1
                continue
            _, description, document = parts
            if sha(document) == dsha and sha(description) == ssha:
                same += 1
            else:
                differ += 1
            f.write(json.dumps({"id": pid, "document": document, "summary": description, "package": pkg, "source": source,
                                "section": section}, ensure_ascii=False) + "\n")
    os.replace(tmp, os.path.join(out_dir, "test.jsonl"))
    print("make_dataset: %s: %d of %d test pages written to %s (%d the same as the list's, %d with other text: another "
          "version of their package); %d not on this machine, %d without a NAME line here"
          % (list_path, same + differ, len(wanted), os.path.join(out_dir, "test.jsonl"), same, differ, missing, unusable))
    return 0 if same + differ else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for train/validation/test.jsonl and report.json")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="groff processes at once")
    ap.add_argument("--test-list", help="write the test pages (name, package, checksums) to this TSV file")
    ap.add_argument("--licences", help="write each package's licence (from its copyright file) to this TSV file")
    ap.add_argument("--check-test-list", help="compare this machine's test pages with a committed list")
    ap.add_argument("--limit", type=int, default=0, help="render only the first N page files (a quick look)")
    ap.add_argument("--max-pages-per-source", type=int, default=2000, help="pages kept of one source package, at most")
    ap.add_argument("--from-test-list", metavar="FILE.tsv",
                    help="render only the pages a committed test list names, into OUT/test.jsonl (seconds, not minutes)")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    if a.from_test_list:
        return split_from_test_list(a.from_test_list, a.out, a.jobs)
    files, aliases = page_files()
    if a.limit:
        files = files[: a.limit]
    owner = package_of_files()
    sources = source_of_packages()
    report = {"page_files": len(files) + aliases, "aliases": aliases, "left_out": {}}

    def leave(why):
        report["left_out"][why] = report["left_out"].get(why, 0) + 1

    rendered = {}
    t0 = time.time()
    cache_path = os.path.join(a.out, "render-cache.json.gz")
    cache = {}
    if os.path.exists(cache_path):
        with gzip.open(cache_path, "rt", encoding="utf-8") as f:
            cache = json.load(f)

    def stamp(path):
        st = os.stat(path)
        return "%d:%d" % (st.st_size, st.st_mtime_ns)

    def cached_render(path):
        hit = cache.get(path)
        if hit and hit[0] == stamp(path):
            return tuple(hit[1])
        return render(path)

    fresh = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for i, (path, r) in enumerate(zip(files, pool.map(cached_render, files)), 1):
            fresh[path] = [stamp(path), list(r)]
            name, text, why = r
            if why:
                leave("alias (.so)" if why == "alias" else why)
            else:
                rendered[path] = (name, text)
            if i % 1000 == 0 or i == len(files):
                print("make_dataset: rendered %d/%d pages (%.0f s)" % (i, len(files), time.time() - t0), file=sys.stderr)

    with gzip.open(cache_path + ".tmp", "wt", encoding="utf-8") as f:
        json.dump(fresh, f)
    os.replace(cache_path + ".tmp", cache_path)

    pages, by_source = select_pages(rendered, owner, sources, a.max_pages_per_source, leave)
    split, counts = assign_splits(by_source)
    for name in ("train", "validation", "test"):
        tmp = os.path.join(a.out, name + ".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for p in pages:
                if split[p["source"]] == name:
                    f.write(json.dumps(p, ensure_ascii=False) + "\n")
        os.replace(tmp, os.path.join(a.out, name + ".jsonl"))
    report.update(pages=len(pages), source_packages=len(by_source), split_pages=counts,
                  split_packages={n: sum(1 for s in split.values() if s == n) for n in counts},
                  words={n: sum(len(p["document"].split()) for p in pages if split[p["source"]] == n) for n in counts})
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))

    test = [p for p in pages if split[p["source"]] == "test"]
    if a.test_list:
        with open(a.test_list + ".tmp", "w") as f:
            f.write("# The test split of train/manpages/make_dataset.py (its split key: %s): page, section, binary package,\n"
                    "# source package, sha256 of the document text, sha256 of the NAME description. The texts are not\n"
                    "# committed; each page is under its package's licence (licences.tsv).\n" % SPLIT_KEY)
            f.write("id\tsection\tpackage\tsource\tdocument_sha256\tsummary_sha256\n")
            for p in test:
                f.write("\t".join([p["id"], p["section"], p["package"], p["source"], sha(p["document"]), sha(p["summary"])]) + "\n")
        os.replace(a.test_list + ".tmp", a.test_list)
    if a.licences:
        with open(a.licences + ".tmp", "w") as f:
            f.write("# Each binary package whose pages are in the data set, its source package, the split, and the\n"
                    "# licence names its /usr/share/doc/PACKAGE/copyright states ('License:' fields, in order).\n")
            f.write("package\tsource\tversion\tsplit\tpages\tlicence\n")
            per_pkg = {}
            for p in pages:
                per_pkg.setdefault(p["package"], []).append(p)
            for pkg in sorted(per_pkg):
                src, version = sources.get(pkg, (pkg, ""))
                f.write("\t".join([pkg, src, version, split[src], str(len(per_pkg[pkg])), licence_of(pkg)]) + "\n")
        os.replace(a.licences + ".tmp", a.licences)
    if a.check_test_list:
        have = {p["id"]: p for p in test}
        same = differ = missing = 0
        with open(a.check_test_list) as f:
            for line in f:
                if line.startswith("#") or line.startswith("id\t"):
                    continue
                pid, _, _, _, dsha, ssha = line.rstrip("\n").split("\t")
                p = have.get(pid)
                if p is None:
                    missing += 1
                elif sha(p["document"]) == dsha and sha(p["summary"]) == ssha:
                    same += 1
                else:
                    differ += 1
        print("make_dataset: test list %s: %d pages the same here, %d with other text (another version), %d not on this machine"
              % (a.check_test_list, same, differ, missing))


if __name__ == "__main__":
    sys.exit(main())
