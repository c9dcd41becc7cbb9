"""The region reader under ASan/UBSan over mutated files: the short run of ``make sanitize``.

Builds ``native/fuzz/region_fuzz.c`` with ``native/region.c`` and ``-fsanitize=address,undefined``
and runs 2,000 mutations of the real and writer-made region files (``make sanitize`` runs 20,000).
A sanitizer report, a broken invariant or a missing sanitizer runtime fails the test: CI installs
the runtimes (.ci/run), so nothing here is skipped.
"""

from __future__ import annotations

import pathlib

from tests.unit.hamicore import sanitize

SHORT_ITERATIONS = 2000


def test_the_reader_survives_mutated_files_under_asan_and_ubsan(tmp_path: pathlib.Path) -> None:
    exe = sanitize.build(tmp_path / "bin")
    seeds = sanitize.write_seeds(tmp_path / "seeds")
    result = sanitize.run(exe, seeds, tmp_path / "work", iterations=SHORT_ITERATIONS, seconds=60, seed=15)
    print(result.output)
    assert result.returncode == 0, result.output[-6000:]
    assert "AddressSanitizer" not in result.output and "runtime error" not in result.output, result.output[-6000:]
    assert result.mutations == SHORT_ITERATIONS, result.output[-2000:]
