"""The HAMi-core pin and the CUDA build image that the operator docs state are the Dockerfile's
defaults (docs/hami-core.md §10), so a pin bump cannot leave deploy/README.md behind."""

from __future__ import annotations

import pytest

from . import dockerfile as dockerfile_mod
from . import manifests as m

DOCS = [m.DEPLOY / "README.md", m.REPO / "docs" / "operations.md"]


def _build_args() -> dict[str, str | None]:
    return dockerfile_mod.parse(m.DOCKERFILE.read_text()).global_args


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_name_the_dockerfile_pin_and_build_image(doc):
    args = _build_args()
    pin, image = args["HAMI_CORE_COMMIT"], args["CUDA_DEVEL_IMAGE"]
    assert pin and image
    text = doc.read_text()
    assert f"`{pin[:7]}`" in text, f"{doc.name} must name the HAMi-core pin {pin[:7]}"
    assert f"`{image}`" in text, f"{doc.name} must name the build image {image}"


def test_deploy_readme_states_the_full_pin_as_the_default():
    pin = _build_args()["HAMI_CORE_COMMIT"]
    text = (m.DEPLOY / "README.md").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("- The default pin is ")]
    assert f"`{pin[:7]}`" in line and f"`{pin}`" in line, line
