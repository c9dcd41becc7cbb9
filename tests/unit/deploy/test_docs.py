"""deploy/README.md: troubleshooting covers every known failure mode (what you see, what to do),
and the commands it gives point at files that exist.  The failure ids are defined in
docs/failures.md, one ``### <ID> — <title>`` heading each; every id the repository cites must be
one of them."""

from __future__ import annotations

import re

from . import manifests as m

README = m.DEPLOY / "README.md"
FAILURES = m.REPO / "docs" / "failures.md"
# The stable failure ids, in docs/failures.md's order.  Ids are never renumbered or dropped, so
# losing one from the page is an error, not a silent change.
KNOWN_FAILURE_IDS = (
    [f"K-{i}" for i in range(1, 5)]
    + [f"R-{i}" for i in range(1, 8)]
    + [f"A-{i}" for i in range(1, 14)]
    + [f"H-{i}" for i in range(1, 10)]
    + [f"M-{i}" for i in range(1, 13)]
    + [f"G-{i}" for i in range(1, 8)]
    + [f"X-{i}" for i in range(1, 6)]
    + [f"S-{i}" for i in range(1, 10)]
    + [f"C-{i}" for i in range(1, 5)]
)
# Where ids are cited: the repository's own text files (generated and binary files excluded).
_CITING_DIRS = ("vgpu", "tests", "benchmarks", "deploy", "docs", "native", "hooks")
_CITING_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".c", ".h", ".cdef", ".sh", ".toml", ".json"}
_ID_RE = re.compile(r"(?<![\w-])([KRAHMGXSC])-([0-9]+)(?![\w-])")


def _failure_ids() -> list[str]:
    """The ids docs/failures.md defines, in page order."""
    return re.findall(r"^### ([A-Z]-\d+) — ", FAILURES.read_text(), flags=re.M)


def _entries() -> dict[str, str]:
    text = README.read_text().split("## Troubleshooting", 1)[1]
    parts = re.split(r"^\*\*([A-Z]-\d+) — ", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_docs_define_every_stable_failure_id_once():
    ids = _failure_ids()
    assert len(ids) == len(set(ids)), "an id is defined twice in docs/failures.md"
    assert ids == KNOWN_FAILURE_IDS


def test_every_cited_failure_id_is_defined_in_the_docs():
    defined = set(_failure_ids())
    files = [m.REPO / "README.md", m.REPO / "Makefile"]
    for d in _CITING_DIRS:
        files += [p for p in (m.REPO / d).rglob("*") if p.suffix in _CITING_SUFFIXES and p.is_file()]
    undefined = {}
    for path in files:
        if not path.exists() or "_pb2" in path.name:
            continue
        for letter, number in _ID_RE.findall(path.read_text(errors="replace")):
            fid = f"{letter}-{number}"
            if fid not in defined:
                undefined.setdefault(fid, str(path.relative_to(m.REPO)))
    assert not undefined, f"failure ids cited but not defined in docs/failures.md: {undefined}"


def test_troubleshooting_covers_every_known_failure_with_what_to_do():
    entries = _entries()
    assert list(entries) == _failure_ids(), "one entry per known failure, in docs/failures.md's order"
    for fid, body in entries.items():
        assert "*Do:*" in body, f"{fid}: no 'what to do'"
        assert len(body.split()) >= 10, f"{fid}: too short to help"


def test_referenced_deploy_paths_exist():
    text = README.read_text()
    for path in set(re.findall(r"(?<!restart )deploy/[\w./-]+", text)):  # not `rollout restart deploy/x`
        path = path.rstrip(".")
        assert (m.REPO / path).exists(), path
    assert "kubectl create -f deploy/volcano-vgpu-device-plugin.yml" in text


def test_top_level_readme_has_a_deploy_section():
    text = (m.REPO / "README.md").read_text()
    section = text.split("\n## Deploy\n", 1)
    assert len(section) == 2, "README.md needs a '## Deploy' section"
    body = section[1].split("\n## ", 1)[0]
    assert "deploy/README.md" in body and "kubectl create -f deploy/volcano-vgpu-device-plugin.yml" in body
