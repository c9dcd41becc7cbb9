"""Every reference the repository makes to its own documentation resolves.

The design reference lives in ``docs/`` and nowhere else: code, tests, manifests and pages cite it
as a page plus a section, decision or failure id (``docs/protocol.md §5.2``,
``docs/decisions.md decision 6``, ``docs/failures.md A-12``; inside ``docs/`` a page links its
neighbours, ``[protocol.md §5.2](protocol.md)``).  Section and decision numbers are stable, so a
citation that names a missing one is a mistake, not drift.  Checked here, over every git-tracked
text file, each finding named ``file:line``:

(a) no file points outside the repository at the background documents it was written from
    (the folder beside a checkout that held them, spelt in ``OUTSIDE``);
(b) each ``docs/<page>.md §N[.M]`` citation (and each ``§N`` of a link to a page) names a page
    that exists and a section that is one of its numbered headings; a bare ``§N`` inside a page is
    a section of that page; outside ``docs/`` a ``§N`` always follows the page it belongs to;
(c) each ``decision N`` has a ``## Decision N`` heading in docs/decisions.md, and outside
    ``docs/`` it is cited as ``docs/decisions.md decision N``;
(d) relative markdown links in the repository's markdown files point at files that exist, and a
    ``#anchor`` matches a GitHub-style heading slug of the target;
(e) the code paths (``vgpu/…``, ``native/…``, …) and dotted names (``vgpu.kube.watchcache.WatchCache``)
    that the pages and the READMEs mention exist in the tree.

Failure ids are checked by ``tests/unit/deploy/test_docs.py``.  Each check is also run on a small
synthetic input, to show that it fires.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SELF = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()

# (a) The background documents this repository was first written from live outside it.
# Its name is assembled here, so that this file does not itself point outside.
_BESIDE = "sha" + "red"
OUTSIDE = re.compile(rf"{_BESIDE}/spec|\.\./{_BESIDE}|{_BESIDE}/fixtures")

SEC = r"§(\d+(?:\.\d+)*)"
# A section list right after a page: "§5.1–§5.2", "§4, §9.2", "§6 and §7", "§5.2/§6", also across
# one line break (a comment leader or indentation in between).
_FIRST = re.compile(rf"[ \t]*(?:\n[ \t#*/]*)?{SEC}(?:\s*[–-]\s*§?(\d+(?:\.\d+)*))?")
# Between two numbers of one list only words, spaces and "," "/" "–" (no sentence or bracket ends).
_NEXT = re.compile(rf"([\w ,/–-]{{0,30}}?){SEC}(?:\s*[–-]\s*§?(\d+(?:\.\d+)*))?")
_PLAIN_PAGE = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(#[\w-]+)?")
_MD_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
_BARE_SEC = re.compile(SEC)
_DECISION = re.compile(r"(?<![\w-])[Dd]ecisions? (\d+)((?:\s*(?:[–-]|,|and)\s*\d+)*)\b")
_DECISION_HEADING = re.compile(r"^## Decision (\d+) — ", re.M)
_TEXT_SUFFIXES = set(".py .pyi .md .yaml .yml .toml .json .c .h .cdef .sh .proto .cfg .ini .txt .j2".split()) | {""}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


# ---------------------------------------------------------------------------------------------
# The pages: headings, section numbers, slugs


def slug(heading: str) -> str:
    """GitHub's anchor for a heading text: lower case, punctuation dropped, spaces → ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _strip_fences(text: str) -> str:
    """Blank out fenced code blocks, keeping line numbers (their ``#`` lines are no headings)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def headings(text: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", _strip_fences(text), re.M)]


def anchors(text: str) -> set[str]:
    """Every heading's slug, with GitHub's ``-1``, ``-2`` suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for h in headings(text):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def section_numbers(text: str) -> set[str]:
    """``{"5", "5.2", …}`` from headings such as ``## 5. Allocate`` and ``### 5.2 Steps``."""
    return {m.group(1) for h in headings(text) if (m := re.match(r"(\d+(?:\.\d+)*)\.?\s", h))}


@dataclass(frozen=True)
class Pages:
    """What a tree's docs/ offers: each page's section numbers and anchors, and the decisions."""

    sections: dict[str, set[str]]
    slugs: dict[str, set[str]]
    decisions: set[int]

    @classmethod
    def load(cls, docs: pathlib.Path) -> Pages:
        texts = {p.name: p.read_text() for p in docs.glob("*.md")}
        decisions = {int(n) for n in _DECISION_HEADING.findall(texts.get("decisions.md", ""))}
        return cls(
            {n: section_numbers(t) for n, t in texts.items()},
            {n: anchors(t) for n, t in texts.items()},
            decisions,
        )


# ---------------------------------------------------------------------------------------------
# The checks, each over (relative path, text)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _sections_after(text: str, pos: int) -> tuple[list[tuple[str, int]], int]:
    """The ``§`` numbers (with offsets) cited right after ``pos``, and where the list ends."""
    m = _FIRST.match(text, pos)
    if not m:
        return [], pos
    found = [(m.group(1), m.start(1))] + ([(m.group(2), m.start(2))] if m.group(2) else [])
    end = m.end()
    while n := _NEXT.match(text, end):
        found.append((n.group(2), n.start(2)))
        if n.group(3):
            found.append((n.group(3), n.start(3)))
        end = n.end()
    return found, end


def check_outside(path: str, text: str) -> Iterator[Finding]:
    for m in OUTSIDE.finditer(text):
        yield Finding(path, _line(text, m.start()), f"points outside the repository: {m.group(0)!r}")


def _check_page(path: str, text: str, pages: Pages, page: str, anchor: str | None, at: int) -> Iterator[Finding]:
    if page not in pages.sections:
        yield Finding(path, _line(text, at), f"docs/{page} does not exist")
    elif anchor and anchor[1:] not in pages.slugs[page]:
        yield Finding(path, _line(text, at), f"docs/{page} has no heading with anchor {anchor}")


def _check_sections(path: str, text: str, pages: Pages, page: str, cited: list[tuple[str, int]]) -> Iterator[Finding]:
    if page not in pages.sections:
        return
    for number, at in cited:
        if number not in pages.sections[page]:
            yield Finding(path, _line(text, at), f"docs/{page} has no section §{number}")


def _docs_page_of_link(path: str, target: str) -> tuple[str | None, str | None]:
    """``(page, anchor)`` when a relative link from ``path`` lands on a page in docs/."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return None, None
    file, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file))
    if os.path.dirname(resolved) == "docs" and resolved.endswith(".md"):
        return os.path.basename(resolved), ("#" + anchor if anchor else None)
    return None, None


def check_citations(path: str, text: str, pages: Pages) -> Iterator[Finding]:
    """(b): pages and sections of every citation; no ``§`` without its page outside docs/."""
    masked = list(text)

    def mask(start: int, end: int) -> None:
        masked[start:end] = " " * (end - start)

    # Links first: "[protocol.md §5.2](protocol.md)" and "[protocol.md](protocol.md) §5.2".
    for m in _MD_LINK.finditer(text):
        page, anchor = _docs_page_of_link(path, m.group(2))
        if page is None:
            continue
        # (a link's anchor is checked with the other links, by check_links, in markdown files)
        yield from _check_page(path, text, pages, page, None if path.endswith(".md") else anchor, m.start())
        inner = [(s.group(1), m.start(1) + s.start(1)) for s in _BARE_SEC.finditer(m.group(1))]
        after, end = _sections_after(text, m.end())
        yield from _check_sections(path, text, pages, page, inner + after)
        mask(m.start(), end)
    # Then plain citations: "docs/protocol.md §5.2" (also inside a link's text: already masked).
    plain = "".join(masked)
    for m in _PLAIN_PAGE.finditer(plain):
        page, anchor = m.group(1), m.group(2)
        yield from _check_page(path, text, pages, page, anchor, m.start())
        cited, end = _sections_after(plain, m.end())
        yield from _check_sections(path, text, pages, page, cited)
        mask(m.start(), end)
    # What is left is a bare "§N": a section of the page itself, or a citation without a page.
    rest = "".join(masked)
    own = pathlib.PurePosixPath(path)
    for m in _BARE_SEC.finditer(rest):
        if own.parent.as_posix() == "docs" and own.suffix == ".md":
            yield from _check_sections(path, text, pages, own.name, [(m.group(1), m.start())])
        else:
            yield Finding(path, _line(text, m.start()), f"§{m.group(1)} without the docs page it belongs to")


def check_decisions(path: str, text: str, pages: Pages) -> Iterator[Finding]:
    """(c): ``decision N`` exists; outside docs/ it is cited as ``docs/decisions.md decision N``."""
    in_docs = path.startswith("docs/")
    for m in _DECISION.finditer(text):
        if path == "docs/decisions.md" and text.startswith("## ", text.rfind("\n", 0, m.start()) + 1):
            continue  # the headings themselves
        first = int(m.group(1))
        numbers = {first}
        for sep, n in re.findall(r"(–|-|,|and)\s*(\d+)", m.group(2)):
            numbers |= set(range(first, int(n) + 1)) if sep in "–-" else {int(n)}
        for n in sorted(numbers - pages.decisions):
            yield Finding(path, _line(text, m.start()), f"decision {n} is not a heading of docs/decisions.md")
        if not in_docs and not text.endswith("docs/decisions.md ", 0, m.start()):
            yield Finding(path, _line(text, m.start()), f"cite {m.group(0)!r} as 'docs/decisions.md {m.group(0)}'")


def _strip_code_spans(text: str) -> str:
    """Blank out inline code (a regex in backticks is no link), keeping offsets."""
    return re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: " " * len(m.group(0)), text)


def check_links(path: str, text: str, root: pathlib.Path) -> Iterator[Finding]:
    """(d): a relative markdown link's file exists; its ``#anchor`` is a heading of the target."""
    body = _strip_code_spans(_strip_fences(text))
    for m in _MD_LINK.finditer(body):
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (root / path).parent / file if file else root / path
        where = _line(body, m.start())
        if not dest.exists():
            yield Finding(path, where, f"link to a missing file: {target}")
        elif anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            yield Finding(path, where, f"link to a missing heading: {target}")


# (e) Code paths and dotted names written in the pages and READMEs.
# (not `rollout restart deploy/x`, a Deployment; not `native/X.cdef`, a placeholder)
_CODE_PATH = re.compile(r"(?<![\w./-])(?<!restart )((?:vgpu|native|tests|benchmarks|hooks|deploy)/[\w./-]*[\w/])")
_PLACEHOLDER = re.compile(r"(?:^|/)X(?:\.|/|$)")
_DOTTED = re.compile(r"`((?:vgpu|tests|benchmarks)(?:\.\w+)+)`|(?<![\w.`/-])(vgpu(?:\.\w+){2,})(?![\w`])")


@functools.cache
def _source(root: pathlib.Path, module: str) -> str | None:
    base = root / pathlib.Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.read_text()
    return None


def _defines(source: str, name: str) -> bool:
    """Whether ``name`` is defined (or imported) somewhere in a module's source."""
    n = re.escape(name)
    return bool(
        re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{n}\b", source, re.M)
        or re.search(rf"^\s*(?:self\.)?{n}\s*(?::[^=\n]+)?=", source, re.M)
        or re.search(rf"^\s*(?:from\s+\S+\s+)?import\s+[^\n]*\b{n}\b", source, re.M)
        or re.search(rf"^\s+{n}\s*:", source, re.M)  # a dataclass or protocol field
        or re.search(rf"^\s*from\s+\S+\s+import\s+\([^)]*\b{n}\b", source, re.M | re.S)
    )


def check_code_names(path: str, text: str, root: pathlib.Path) -> Iterator[Finding]:
    for m in _CODE_PATH.finditer(text):
        ref = m.group(1).rstrip(".")
        if not (root / ref).exists() and not _generated(ref) and not _PLACEHOLDER.search(ref):
            yield Finding(path, _line(text, m.start()), f"no such path: {ref}")
    for m in _DOTTED.finditer(text):
        dotted = m.group(1) or m.group(2)
        if _generated(dotted):
            continue
        parts = dotted.split(".")
        # The longest prefix that is a module, then names defined in it (one level of attribute).
        for cut in range(len(parts), 0, -1):
            source = _source(root, ".".join(parts[:cut]))
            if source is not None:
                break
        else:
            yield Finding(path, _line(text, m.start()), f"no such module: {dotted}")
            continue
        rest = parts[cut:]
        if rest and not _defines(source, rest[0]):
            yield Finding(path, _line(text, m.start()), f"{'.'.join(parts[:cut])} defines no {rest[0]!r}")
        elif len(rest) > 1 and not _defines(source, rest[1]):
            yield Finding(path, _line(text, m.start()), f"{'.'.join(parts[: cut + 1])} has no {rest[1]!r}")


def _generated(ref: str) -> bool:
    """Paths that exist only after a build (the cffi extension)."""
    return ref.startswith(("vgpu/_native", "vgpu._native"))


# ---------------------------------------------------------------------------------------------
# The repository


def tracked_text_files(root: pathlib.Path = ROOT) -> dict[str, str]:
    """``{relative path: text}`` of every git-tracked text file (this test excepted)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = {}
    for name in names:
        p = root / name
        if name == SELF or pathlib.PurePosixPath(name).suffix not in _TEXT_SUFFIXES or not p.is_file():
            continue
        try:
            files[name] = p.read_text()
        except UnicodeDecodeError:
            continue
    return files


def _markdown_with_code_names(name: str) -> bool:
    return name.endswith(".md") and (name.startswith("docs/") or name in {"README.md", "deploy/README.md"})


def all_findings(files: dict[str, str], root: pathlib.Path, pages: Pages) -> list[Finding]:
    found: list[Finding] = []
    for name, text in sorted(files.items()):
        found += check_outside(name, text)
        if "_pb2" in name:
            continue
        found += check_citations(name, text, pages)
        found += check_decisions(name, text, pages)
        if name.endswith(".md"):
            found += check_links(name, text, root)
        if _markdown_with_code_names(name):
            found += check_code_names(name, text, root)
    return found


def test_every_reference_to_the_docs_resolves():
    files = tracked_text_files()
    assert "docs/protocol.md" in files and "vgpu/plugin/allocator.py" in files
    found = all_findings(files, ROOT, Pages.load(DOCS))
    assert not found, "unresolved references:\n" + "\n".join(map(str, found))


# ---------------------------------------------------------------------------------------------
# Each check fires: a tiny tree with one page


@pytest.fixture
def tiny(tmp_path: pathlib.Path) -> tuple[pathlib.Path, Pages]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "protocol.md").write_text("# Protocol\n\n## 5. Allocate\n\n### 5.2 Steps\n\n## Keys at a glance\n")
    (docs / "decisions.md").write_text("# Decisions\n\n## Decision 6 — Allocate mapping\n")
    (tmp_path / "vgpu" / "kube").mkdir(parents=True)
    (tmp_path / "vgpu" / "kube" / "watchcache.py").write_text(
        "class WatchCache:\n    def resync(self):\n        pass\n"
    )
    return tmp_path, Pages.load(docs)


def _run(files: dict[str, str], root: pathlib.Path, pages: Pages) -> list[str]:
    return [str(f) for f in all_findings(files, root, pages)]


def test_a_outside_documents_are_refused(tiny):
    root, pages = tiny
    bad = {"vgpu/x.py": f"# see ../{_BESIDE}/spec/mig.md\n", "tests/t.py": f"FIX = '{_BESIDE}/fixtures/a'\n"}
    found = _run(bad, root, pages)
    assert any(f.startswith("vgpu/x.py:1: points outside") for f in found), found
    assert any(f.startswith("tests/t.py:1: points outside") for f in found), found


def test_b_unknown_pages_and_sections_are_refused(tiny):
    root, pages = tiny
    good = {"vgpu/x.py": "# docs/protocol.md §5.2 step 3, §5\n# docs/protocol.md §5–§5.2; docs/protocol.md\n# §5\n"}
    assert _run(good, root, pages) == []
    bad = {
        "vgpu/a.py": "\n# docs/mig.md §3\n",  # no such page
        "vgpu/b.py": "# docs/protocol.md §5.2, §5.3\n",  # §5.3 is not a heading
        "vgpu/c.py": "# the lock (§2.4)\n",  # a section without its page
        "vgpu/d.py": "# docs/protocol.md#no-such-heading\n",
        "docs/protocol.md": pathlib.Path(root / "docs/protocol.md").read_text() + "See §7 and [p](protocol.md) §6.\n",
    }
    found = _run(bad, root, pages)
    assert "vgpu/a.py:2: docs/mig.md does not exist" in found, found
    assert "vgpu/b.py:1: docs/protocol.md has no section §5.3" in found, found
    assert "vgpu/c.py:1: §2.4 without the docs page it belongs to" in found, found
    assert "vgpu/d.py:1: docs/protocol.md has no heading with anchor #no-such-heading" in found, found
    assert "docs/protocol.md:8: docs/protocol.md has no section §7" in found, found
    assert "docs/protocol.md:8: docs/protocol.md has no section §6" in found, found
    assert len(found) == 6, found


def test_c_unknown_decisions_and_bare_decisions_are_refused(tiny):
    root, pages = tiny
    assert _run({"vgpu/x.py": "# docs/decisions.md decision 6\n", "docs/p.md": "(decision 6)\n"}, root, pages) == []
    found = _run({"vgpu/x.py": "# docs/decisions.md decisions 5–6\n# (decision 6)\n"}, root, pages)
    assert found == [
        "vgpu/x.py:1: decision 5 is not a heading of docs/decisions.md",
        "vgpu/x.py:2: cite 'decision 6' as 'docs/decisions.md decision 6'",
    ], found


def test_d_broken_relative_links_are_refused(tiny):
    root, pages = tiny
    ok = "[p](docs/protocol.md#5-allocate) [k](docs/protocol.md#keys-at-a-glance) [w](https://x.org/nope)\n"
    assert _run({"README.md": ok}, root, pages) == []
    bad = "[p](docs/nope.md)\n\n[q](docs/protocol.md#6-missing)\n```\n[in a fence](ignored.md)\n```\n"
    found = _run({"README.md": bad}, root, pages)
    assert found == [
        "README.md:1: docs/nope.md does not exist",
        "README.md:1: link to a missing file: docs/nope.md",
        "README.md:3: link to a missing heading: docs/protocol.md#6-missing",
    ], found


def test_e_stale_code_names_in_pages_are_refused(tiny):
    root, pages = tiny
    ok = "`vgpu/kube/watchcache.py`: `vgpu.kube.watchcache.WatchCache.resync`\n"
    assert _run({"docs/p.md": ok}, root, pages) == []
    bad = "`vgpu/plugin/allocate.py`\n`vgpu.kube.watchcache.Informer`\n`vgpu.kube.watchcache.WatchCache.relist`\n"
    found = _run({"docs/p.md": bad}, root, pages)
    assert found == [
        "docs/p.md:1: no such path: vgpu/plugin/allocate.py",
        "docs/p.md:2: vgpu.kube.watchcache defines no 'Informer'",
        "docs/p.md:3: vgpu.kube.watchcache.WatchCache has no 'relist'",
    ], found


def test_github_slugs():
    assert slug("Decision 6 — Allocate mapping and pod matching") == "decision-6--allocate-mapping-and-pod-matching"
    assert slug("2.1 `volcano.sh/node-vgpu-register`") == "21-volcanoshnode-vgpu-register"
    assert slug("HAMi-core shared-region layouts (read by the monitor)") == (
        "hami-core-shared-region-layouts-read-by-the-monitor"
    )
    assert anchors("# A\n## A\n") == {"a", "a-1"}
