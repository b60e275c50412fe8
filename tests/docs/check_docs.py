#!/usr/bin/env python3
"""Checks that the documentation says what the code does.

  check_docs.py --source-dir DIR --tool PATH --work-dir DIR

1. Error ids. Every id the code throws (a locost::error made in include/, tools/ or python/) must
   have a row in docs/errors.md, and every id docs/errors.md lists must still be thrown, unless its
   row says "kept for compatibility". The ids are found by reading the sources, not by running them:
   see collect_error_ids() for the forms an id takes in the code. A construction whose id this
   script cannot work out fails the check, so a new way of building ids cannot hide ids from it.

2. Commands. Every `locost ...` command in a fenced sh, bash or console block of README.md and
   docs/*.md runs with the built tool standing in for `locost`, and must exit 0. Each page runs in a
   directory of its own under the work dir, in the order the page gives its commands, with
   `examples/` linked to the repository's; a page's examples therefore make the demo checkpoints
   they use themselves (`locost demo-checkpoint --config tiny --out demo`). A command the test
   machine cannot run carries a marker at the end of its line:
       # needs: a real checkpoint     a pretrained checkpoint or the Hugging Face cache holding one
       # needs: a GPU                 a GPU and a tool built with -DLOCOST_CUDA=ON
       # needs: minutes               runs anywhere, but slowly (base-size checkpoints, whole books:
                                      tens of seconds to minutes); run only with LOCOST_LONG_TESTS=1
   Marked commands are skipped, listed with their reason and counted apart, never as passed.
   Lines of those blocks that do not run locost (cmake, pip, sbatch, ...) are not run; their count
   is reported.

3. The tool's options. Every command `locost --help` lists and every option its `locost COMMAND
   --help` names appears in docs/tool.md.

4. Links. Every relative link of README.md and docs/*.md names a file that exists, and a heading of
   it where it has a #fragment (GitHub's anchors).

Exit status 0 only when every check passed. Standard library only (Debian 12's python3).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

ID = r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*"
ID_RE = re.compile(rf"^{ID}$")
SOURCE_DIRS = ("include", "tools", "python")
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}

# Ids that are built rather than written out. Each entry names the file where the construction
# stands and how to read it; any other error(...) whose first argument is not a string literal is
# reported as unknown, so that the list below has to grow with the code.
#
# "<kind> + .suffix": the file throws error(kind + ".suffix", ...) with a kind its callers pass to
# the named functions (parse_json(text, source, "config") gives config.invalid_json, ...).
COMPOSED = {
    "include/locost/io/json.hpp": ("parse_json",),
    "include/locost/io/config.hpp": ("field_reader",),
}
# "helper(..., id, ...)": the file's error(<variable>, ...) throws an id its callers give as the
# argument at this index of the named function.
FORWARDED = {
    ("include/locost/io/pickle.hpp", "id"): ("fail", 0),
    ("include/locost/io/file_access.hpp", "missing_id"): ("require", 1),
}
# error(<expression>, ...) that throws again an id caught from another locost::error (already found
# where it was first thrown).
RETHROWN = {
    ("include/locost/backend/cpu/gemm_provider.hpp", "r.problem_id"),
    ("include/locost/backend/cpu/isa.hpp", "r.problem_id"),  # LOCOST_ISA's error, kept for kernels_isa()
    # locost serve: an error about an option, its message naming the field the client wrote
    ("tools/locost/serve/request.hpp", "rethrown_id"),
}
# The class itself.
DEFINITION = "include/locost/config/error.hpp"


def lex(text: str) -> tuple[str, str]:
    """(code, mask) of C++ text, both as long as the text, newlines kept so line numbers stay. code
    has comments blanked out (raw strings, docstrings here, become empty literals); mask also has the
    contents of string and character literals replaced by '_', so that searching it never finds
    words inside a message."""
    code, mask = [], []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank = " " * (j - i)
            code.append(blank)
            mask.append(blank)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank = re.sub(r"[^\n]", " ", text[i:j])
            code.append(blank)
            mask.append(blank)
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            blank = '""' + re.sub(r"[^\n]", " ", text[i + 2:j])
            code.append(blank)
            mask.append(blank)
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n - 1)
            code.append(text[i:j + 1])
            mask.append(c + "_" * (j - i - 1) + text[j])
            i = j + 1
        else:
            code.append(c)
            mask.append(c)
            i += 1
    return "".join(code), "".join(mask)


class Source:
    def __init__(self, rel: str, text: str):
        self.rel = rel
        self.code, self.mask = lex(text)

    def where(self, offset: int) -> str:
        return f"{self.rel}:{self.code.count(chr(10), 0, offset) + 1}"

    def arguments(self, open_paren: int) -> list[tuple[int, int]]:
        """(start, end) offsets of the top-level arguments of the call whose '(' is at open_paren."""
        depth, args, start = 0, [], open_paren + 1
        for i in range(open_paren, len(self.mask)):
            c = self.mask[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    args.append((start, i))
                    return args
            elif c == "," and depth == 1:
                args.append((start, i))
                start = i + 1
        return args

    def literals(self, start: int, end: int) -> list[str]:
        return [m.group(1) for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', self.code[start:end])]

    def calls(self, function: str):
        """Arguments (start, end) of every call or declaration `function(...)`, `function name(...)`."""
        for m in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(function)}\s*(?:[A-Za-z_]\w*\s*)?\(", self.mask):
            yield m.start(), self.arguments(m.end() - 1)

    def definitions(self, function: str):
        """(start, end) of the body of every definition of `function`."""
        for m in re.finditer(rf"(?<![\w.]){re.escape(function)}\s*\([^()]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{{", self.mask):
            depth = 0
            for i in range(m.end() - 1, len(self.mask)):
                if self.mask[i] == "{":
                    depth += 1
                elif self.mask[i] == "}":
                    depth -= 1
                    if depth == 0:
                        yield m.end(), i
                        break


def collect_error_ids(root: pathlib.Path):
    """(ids: {id: [where, ...]}, problems: [str]) for the code under SOURCE_DIRS.

    An id is the first argument of a locost::error construction, error("family.name", ...), in one
    of these forms: a string literal; an expression holding literals (a ? "a.b" : "c.d"); a call of
    a function that returns literals (bad_value_id()); a kind + ".suffix" in the files COMPOSED
    names; a parameter of a helper FORWARDED names, whose callers pass the literal. Also counted: an
    id printed by hand in what()'s form, "[locost.family.name] ..."."""
    sources = {}
    for d in SOURCE_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and p.suffix in SOURCE_SUFFIXES:
                rel = p.relative_to(root).as_posix()
                sources[rel] = Source(rel, p.read_text(encoding="utf-8", errors="replace"))

    ids: dict[str, list[str]] = {}
    problems: list[str] = []

    def found(i: str, where: str):
        ids.setdefault(i, []).append(where)

    def returned_ids(function: str, seen: set[str]) -> list[str]:
        """The id literals a function's definitions return, following calls to other such functions."""
        if function in seen:
            return []
        seen.add(function)
        out = []
        for src in sources.values():
            for start, end in src.definitions(function):
                out += [l for l in src.literals(start, end) if ID_RE.match(l)]
                for m in re.finditer(r"return\b([^;]*);", src.mask[start:end]):
                    for call in re.finditer(r"([A-Za-z_]\w*)\s*\(", m.group(1)):
                        out += returned_ids(call.group(1), seen)
        return out

    suffixes: dict[str, set[str]] = {f: set() for f in COMPOSED}
    forwarded_seen = set()
    for rel, src in sources.items():
        if rel == DEFINITION:
            continue
        # A construction: error(...) or error{...}, with or without locost::, not a call of
        # some_error(...) or a member x.error(...).
        for m in re.finditer(r"(?<![A-Za-z0-9_.])(?:locost::)?error\s*[({]", src.mask):
            args = src.arguments(m.end() - 1)
            if not args:
                continue
            start, end = args[0]
            expr = src.code[start:end].strip()
            masked = src.mask[start:end]
            where = src.where(m.start())
            if not expr:
                continue
            lits = src.literals(start, end)
            got = [l for l in lits if ID_RE.match(l)]
            composed = re.fullmatch(r'\s*[A-Za-z_]\w*\s*\+\s*"\.([a-z][a-z0-9_]*)"\s*', expr)
            if composed and rel in COMPOSED:
                suffixes[rel].add(composed.group(1))
                continue
            bad = [l for l in lits if not ID_RE.match(l)]
            if bad:
                problems.append(f"{where}: error id {bad[0]!r} is not of the form family.name")
                continue
            # The id comes from what is left of a conditional's condition: every call there must
            # return id literals (cond ? "a.b" : bad_value_id()).
            value = masked[masked.index("?") + 1:] if "?" in masked else masked
            for call in re.finditer(r"([A-Za-z_]\w*)\s*\(", value):
                r = returned_ids(call.group(1), set())
                if not r:
                    problems.append(f"{where}: error({expr}, ...): {call.group(1)}() returns no id literal")
                got += r
            if got:
                for i in got:
                    found(i, where)
                continue
            if (rel, expr) in FORWARDED:
                forwarded_seen.add((rel, expr))
                continue
            if (rel, expr) in RETHROWN:
                continue
            problems.append(f"{where}: cannot tell which id error({expr}, ...) throws; "
                            "teach tests/docs/check_docs.py (COMPOSED, FORWARDED or RETHROWN)")
        # Ids printed by hand in the what() form: "[locost.family.name] ..."
        for m in re.finditer(rf"\[locost\.({ID})\]", src.code):
            found(m.group(1), src.where(m.start()))

    for rel, functions in COMPOSED.items():
        if rel not in sources:
            problems.append(f"{rel}: listed in COMPOSED but missing")
            continue
        if not suffixes[rel]:
            problems.append(f"{rel}: listed in COMPOSED but builds no id there any more")
        kinds = {}
        for src in sources.values():
            for fn in functions:
                for off, args in src.calls(fn):
                    for a, b in args:
                        for k in src.literals(a, b):
                            if re.fullmatch(r"[a-z][a-z0-9_]*", k) and src.code[a:b].strip() == f'"{k}"':
                                kinds.setdefault(k, src.where(off))
        for k, where in kinds.items():
            for s in suffixes[rel]:
                found(f"{k}.{s}", where)
    for (rel, var), (fn, index) in FORWARDED.items():
        if (rel, var) not in forwarded_seen:
            problems.append(f"{rel}: listed in FORWARDED (error({var}, ...)) but no longer there")
        for src in sources.values():
            for off, args in src.calls(fn):
                if len(args) > index:
                    a, b = args[index]
                    lits = src.literals(a, b)
                    if len(lits) == 1 and src.code[a:b].strip() == f'"{lits[0]}"' and ID_RE.match(lits[0]):
                        found(lits[0], src.where(off))
    return ids, problems


def documented_error_ids(errors_md: str):
    """({id: row text}) from the tables of docs/errors.md: the backticked ids in a row's first cell.
    `.name` after `family.other` in the same cell is short for `family.name`."""
    ids: dict[str, str] = {}
    for line in errors_md.splitlines():
        if not line.startswith("|") or re.match(r"^\|\s*-", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        family = None
        for tok in re.findall(r"`([^`]+)`", cells[0]):
            if ID_RE.match(tok):
                family = tok.split(".")[0]
                ids[tok] = line
            elif family and re.fullmatch(r"\.[a-z][a-z0-9_]*", tok):
                ids[family + tok] = line
    return ids


def check_error_ids(root: pathlib.Path) -> tuple[bool, int, list[str]]:
    ids, problems = collect_error_ids(root)
    errors_md = root / "docs" / "errors.md"
    if not errors_md.is_file():
        return False, 0, problems + ["docs/errors.md is missing"]
    documented = documented_error_ids(errors_md.read_text(encoding="utf-8"))
    for i in sorted(set(ids) - set(documented)):
        problems.append(f"error id {i} is thrown ({ids[i][0]}) but not listed in docs/errors.md")
    for i in sorted(set(documented) - set(ids)):
        if "kept for compatibility" not in documented[i]:
            problems.append(f"docs/errors.md lists {i}, which the code no longer throws "
                            "(remove it, or say in its row that it is kept for compatibility)")
    print(f"docs: found {len(ids)} error ids in {', '.join(SOURCE_DIRS)}; docs/errors.md lists {len(documented)}")
    return not problems, len(ids), problems


# ---------------------------------------------------------------------------------------- commands

FENCE = re.compile(r"^(\s*)```+\s*([A-Za-z0-9_+-]*)")
NEEDS = re.compile(r"\s+#\s*needs:\s*(.+?)\s*$")
KNOWN_NEEDS = {"a real checkpoint", "a GPU", "minutes"}


def shell_commands(page: str):
    """(line number, language, command) for each command of the page's sh/bash/console blocks, with
    continuation lines joined. In console blocks only lines after a `$ ` prompt are commands."""
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang = m.group(2).lower()
        i += 1
        body_start = i
        while i < len(lines) and not lines[i].lstrip().startswith("```"):
            i += 1
        body = lines[body_start:i]
        i += 1
        if lang not in ("sh", "bash", "console", "shell"):
            continue
        k = 0
        while k < len(body):
            number = body_start + k + 1
            line = body[k]
            if lang == "console":
                if not line.startswith("$ "):
                    k += 1
                    continue
                line = line[2:]
            while line.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                line = line.rstrip()[:-1].rstrip() + " " + body[k].strip()
            k += 1
            if line.strip() and not line.lstrip().startswith("#"):
                yield number, lang, line.strip()


def runs_locost(command: str) -> bool:
    """Whether a shell command runs the locost tool: `locost ...`, `path/to/locost ...`, after
    environment assignments, or in any stage of a pipeline or && list."""
    for stage in re.split(r"\|\||&&|\||;", command):
        try:
            words = shlex.split(stage, comments=True)
        except ValueError:
            words = stage.split()
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if words and (words[0] == "locost" or words[0].endswith("/locost")):
            return True
    return False


def prepare_page_dir(root: pathlib.Path, pages_dir: pathlib.Path, name: str) -> pathlib.Path:
    d = pages_dir / name
    d.mkdir(parents=True)
    # The docs' paths are relative to the repository root.
    (d / "examples").symlink_to(root / "examples")
    return d


def check_commands(root: pathlib.Path, tool: pathlib.Path, work: pathlib.Path):
    long_tests = os.environ.get("LOCOST_LONG_TESTS") == "1"
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    pages_dir = work / "pages"
    if pages_dir.exists():
        shutil.rmtree(pages_dir)
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / "locost"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(tool.resolve())
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"

    ran = passed = 0
    skipped: list[tuple[str, str]] = []
    failed: list[str] = []
    ignored = 0
    for page in pages:
        rel = page.relative_to(root).as_posix()
        text = page.read_text(encoding="utf-8")
        cwd = None
        for number, _lang, command in shell_commands(text):
            if not runs_locost(command):
                ignored += 1
                continue
            needs = NEEDS.search(command)
            reason = needs.group(1) if needs else None
            if reason is not None and reason not in KNOWN_NEEDS:
                failed.append(f"{rel}:{number}: unknown marker '# needs: {reason}' (known: {', '.join(sorted(KNOWN_NEEDS))})")
                continue
            if reason is not None and not (reason == "minutes" and long_tests):
                skipped.append((f"{rel}:{number}", reason))
                print(f"  skipped ({reason}): {rel}:{number}: {command}")
                continue
            if cwd is None:
                cwd = prepare_page_dir(root, pages_dir, page.stem)
            # A path to the tool (build/release/bin/locost) stands for the tool too.
            run = re.sub(r"(?<![\w/.-])(?:[\w.-]+/)+locost(?=\s)", "locost", command)
            ran += 1
            t0 = time.monotonic()
            # A hung command fails on its own, naming itself, before CTest's timeout ends the whole check.
            limit = 600 if reason == "minutes" else 120
            # (Its own process group, so that every stage of a pipeline goes with it.)
            p = subprocess.Popen(["bash", "-o", "pipefail", "-c", run], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                 start_new_session=True)
            try:
                stdout, stderr = p.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                failed.append(f"{rel}:{number}: still running after {limit} s: {command}")
                print(f"  FAILED (over {limit} s) {rel}:{number}: {command}")
                continue
            dt = time.monotonic() - t0
            if p.returncode == 0:
                passed += 1
                print(f"  ok {dt:5.1f} s  {rel}:{number}: {command}")
            else:
                tail = "\n      ".join((stderr or stdout).strip().splitlines()[-5:])
                failed.append(f"{rel}:{number}: exit {p.returncode}: {command}\n      {tail}")
                print(f"  FAILED (exit {p.returncode}) {rel}:{number}: {command}\n      {tail}")
    return ran, passed, skipped, failed, ignored



# ------------------------------------------------------------------------------------ tool options

def check_tool_options(root: pathlib.Path, tool: pathlib.Path) -> tuple[int, list[str]]:
    """Every command `locost --help` lists, and every option its `--help` names, is in docs/tool.md."""
    doc = (root / "docs" / "tool.md").read_text(encoding="utf-8")
    top = subprocess.run([str(tool), "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    section = top.split("commands:", 1)[1].split("options:", 1)[0] if "commands:" in top else ""
    commands = re.findall(r"^  ([a-z][a-z0-9-]*)\s", section, flags=re.M)
    problems, options = [], set()
    if not commands:
        problems.append("`locost --help` lists no commands")
    for c in commands:
        if not re.search(rf"locost {re.escape(c)}\b", doc):
            problems.append(f"command {c} is not in docs/tool.md")
        text = subprocess.run([str(tool), c, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text):
            if o not in options and not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", doc):
                problems.append(f"option {o} (locost {c} --help) is not in docs/tool.md")
            options.add(o)
    return len(options), problems


# ------------------------------------------------------------------------------------------- links

def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = "".join(ch for ch in text.lower() if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: str) -> set[str]:
    out, seen, fenced = set(), {}, False
    for line in page.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            a = github_anchor(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
    return out


def check_links(root: pathlib.Path, pages: list[pathlib.Path]) -> tuple[int, list[str]]:
    """Relative links of the pages: the file must exist, and the heading a #fragment names."""
    problems, count = [], 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", prose):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            count += 1
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root).as_posix()}:{prose.count(chr(10), 0, m.start()) + 1}"
            if not file.exists():
                problems.append(f"{where}: link to {target}: no such file")
            elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text(encoding="utf-8")):
                problems.append(f"{where}: link to {target}: {file.name} has no heading #{fragment}")
    return count, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source-dir", required=True, type=pathlib.Path)
    ap.add_argument("--tool", required=True, type=pathlib.Path)
    ap.add_argument("--work-dir", required=True, type=pathlib.Path)
    a = ap.parse_args()
    root = a.source_dir.resolve()
    work = a.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)

    ids_ok, n_ids, id_problems = check_error_ids(root)
    for p in id_problems:
        print(f"  error ids: {p}")

    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    n_links, link_problems = check_links(root, pages)
    for p in link_problems:
        print(f"  links: {p}")

    if not a.tool.is_file() or not os.access(a.tool, os.X_OK):
        print(f"docs: the tool {a.tool} is not an executable file")
        return 1
    n_options, option_problems = check_tool_options(root, a.tool)
    for p in option_problems:
        print(f"  tool options: {p}")
    ran, passed, skipped, failed, ignored = check_commands(root, a.tool, work)

    reasons: dict[str, int] = {}
    for _, r in skipped:
        reasons[r] = reasons.get(r, 0) + 1
    skipped_text = ", ".join(f"{n} needs: {r}" for r, n in sorted(reasons.items())) or "none"
    documented = f"{n_ids} error ids documented" if ids_ok else f"{len(id_problems)} error id problems"
    print(f"docs: {documented}; {n_options} tool options, {len(option_problems)} undocumented; "
          f"{n_links} links, {len(link_problems)} broken; {ran} commands ran, {passed} passed, "
          f"{len(skipped)} skipped ({skipped_text}), {len(failed)} failed; {ignored} other shell lines not run")
    for f in failed:
        print(f"  failed: {f}")
    return 0 if ids_ok and not option_problems and not link_problems and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
