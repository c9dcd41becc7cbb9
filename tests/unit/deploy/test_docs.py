"""deploy/README.md: troubleshooting covers every known failure mode (what you see, what to do),
and the commands it gives point at files that exist."""
from __future__ import annotations

import re

import pytest

from . import manifests as m

README = m.DEPLOY / "README.md"
# The stable IDs of shared/spec/known-failures.md.
KNOWN_FAILURE_IDS = (
    [f"K-{i}" for i in range(1, 5)] + [f"R-{i}" for i in range(1, 8)] + [f"A-{i}" for i in range(1, 14)]
    + [f"H-{i}" for i in range(1, 10)] + [f"M-{i}" for i in range(1, 13)] + [f"G-{i}" for i in range(1, 8)]
    + [f"X-{i}" for i in range(1, 6)] + [f"S-{i}" for i in range(1, 9)] + [f"C-{i}" for i in range(1, 5)]
)


def _spec_file():
    for base in (m.REPO.parent / "shared", m.REPO / "shared"):
        path = base / "spec" / "known-failures.md"
        if path.exists():
            return path
    return None


def _entries() -> dict[str, str]:
    text = README.read_text().split("## Troubleshooting", 1)[1]
    parts = re.split(r"^\*\*([A-Z]-\d+) — ", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_id_list_matches_the_spec_when_it_is_available():
    spec = _spec_file()
    if spec is None:
        pytest.skip("shared/spec is not beside this checkout; the committed ID list is used")
    text = spec.read_text()
    ids = re.findall(r"^(?:\*\*|\| )([A-Z]-\d+) ", text, flags=re.M)
    assert ids == KNOWN_FAILURE_IDS


def test_troubleshooting_covers_every_known_failure_with_what_to_do():
    entries = _entries()
    assert list(entries) == KNOWN_FAILURE_IDS, "one entry per known failure, in the spec's order"
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
