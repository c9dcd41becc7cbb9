from __future__ import annotations

import pathlib

import pytest

from tests.unit.hamicore import scenario


@pytest.fixture(scope="module")
def real_fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    return scenario.fixture_paths(tmp_path_factory.mktemp("hami-fixtures"))
