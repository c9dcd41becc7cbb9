"""deploy/Dockerfile, checked structurally: no Docker engine runs on these machines.

What is checked: three stages (wheel build with the cffi extension, HAMi-core build from its
upstream source at a pinned commit, runtime); the pin is one global ARG that every stage
inherits and the build verifies; the runtime stage installs only the pre-built wheels and
copies only runtime files; every file the build copies from the context exists and is not
excluded by .dockerignore, and nothing else of the repository (tests, virtualenv, build
output) is sent; no HAMi-core source is vendored in the repository; the paths the image puts
the hook files at are the ones the DaemonSet's postStart hook uses.
"""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from . import dockerfile as dockerfile_mod
from . import manifests as m

DOCKERIGNORE = m.REPO / ".dockerignore"
HAMI_CORE_URL = "https://github.com/Project-HAMi/HAMi-core.git"
BUILD_TOOLS = ("gcc", "g++", "cmake", "git", "build-essential", "make", "libffi-dev", "nvcc")


@pytest.fixture(scope="module")
def df() -> dockerfile_mod.Dockerfile:
    return dockerfile_mod.parse(m.DOCKERFILE.read_text())


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=m.REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line]


def test_buildkit_syntax_for_bind_mounts(df):
    assert df.directives.get("syntax", "").startswith("docker/dockerfile:1")


def test_three_stages_wheel_hamicore_runtime(df):
    assert [s.name for s in df.stages] == ["wheel", "hamicore", None]
    # The runtime is the same slim Python as the wheel stage (ABI of the compiled extension).
    assert df.stage("wheel").base == df.final.base == "${PYTHON_IMAGE}"
    assert df.global_args["PYTHON_IMAGE"].startswith("python:3.11-slim")


def test_hami_core_is_fetched_at_a_pinned_commit_and_verified(df):
    pin = df.global_args.get("HAMI_CORE_COMMIT")
    assert pin and re.fullmatch(r"[0-9a-f]{7,40}", pin), f"HAMI_CORE_COMMIT must be a commit id, got {pin!r}"
    stage = df.stage("hamicore")
    args = stage.args()
    assert "HAMI_CORE_COMMIT" in args and args["HAMI_CORE_COMMIT"] is None, (
        "the stage must inherit the one global pin, not repeat a default"
    )
    assert args["HAMI_CORE_REPO"] == HAMI_CORE_URL
    run = stage.run_text()
    assert "git clone" in run and '"${HAMI_CORE_REPO}"' in run
    assert 'git checkout --detach "${HAMI_CORE_COMMIT}"' in run
    assert "git rev-parse HEAD" in run, "the checked-out commit must be verified against the pin"
    assert "./build.sh" in run and "test -f build/libvgpu.so" in run
    # Nothing from the build context enters the HAMi-core stage: it is built from upstream only.
    assert not stage.of("COPY") and not stage.of("ADD")


def test_wheel_stage_builds_the_package_with_its_native_extension(df):
    stage = df.stage("wheel")
    copied = [src for ins in stage.of("COPY") for src in dockerfile_mod.copy_parts(ins)[1]]
    project = tomllib.loads((m.REPO / "pyproject.toml").read_text())
    setup_py = (m.REPO / "setup.py").read_text()
    cffi_script = re.search(r'cffi_modules=\["([^:"]+):', setup_py).group(1)
    needed = {"pyproject.toml", "setup.py", project["project"]["readme"]}
    assert needed <= set(copied)
    assert any(cffi_script.startswith(c.rstrip("/") + "/") for c in copied), f"{cffi_script} not copied"
    assert "vgpu/" in copied
    assert re.search(r"pip wheel .*--wheel-dir /wheels \.", stage.run_text())
    assert "ls /wheels/vgpu-*.whl" in stage.run_text()


def test_runtime_stage_holds_only_runtime_needs(df):
    final = df.final
    run = final.run_text()
    for tool in BUILD_TOOLS:
        assert not re.search(rf"apt-get install[^&]*\b{re.escape(tool)}\b", run), f"{tool} in the runtime stage"
    assert "--mount=type=bind,from=wheel" in run, "wheels are bind-mounted, not copied into a layer"
    assert re.search(r"pip install .*--no-index --find-links=/wheels vgpu", run)
    for ins in final.of("COPY"):
        flags, sources, _ = dockerfile_mod.copy_parts(ins)
        if "from" in flags:
            assert flags["from"] == "hamicore" and sources == ["/hami-core/build/libvgpu.so"]
        else:
            assert all(s.startswith("hooks/") for s in sources), f"line {ins.line}: source code in the runtime"
    assert not final.of("ADD")


def test_image_paths_match_the_poststart_hook(df):
    dests = {}
    for ins in df.final.of("COPY"):
        _, sources, dest = dockerfile_mod.copy_parts(ins)
        (src,) = sources
        dests[src.rsplit("/", 1)[-1]] = dest
    ds = m.daemonset(m.single_file_docs())
    hook = m.container(ds, "plugin")["lifecycle"]["postStart"]["exec"]["command"]
    assert hook[:2] == ["/bin/sh", dests["install.sh"]]
    source_dir = hook[2]
    assert dests["libvgpu.so"] == f"{source_dir}/libvgpu.so"
    assert dests["ld.so.preload"] == f"{source_dir}/ld.so.preload"


def test_every_copied_context_file_exists_and_is_not_dockerignored(df):
    ignore = DOCKERIGNORE.read_text()
    files = _tracked_files()
    for stage in df.stages:
        for ins in stage.of("COPY"):
            flags, sources, _ = dockerfile_mod.copy_parts(ins)
            if "from" in flags:
                continue
            for src in sources:
                src = src.rstrip("/")
                matched = [f for f in files if f == src or f.startswith(src + "/")]
                assert matched, f"COPY {src}: not in the repository"
                sent = [f for f in matched if not dockerfile_mod.dockerignore_excludes(ignore, f)]
                assert sent, f"COPY {src}: everything is excluded by .dockerignore"
    # The native sources the cffi build compiles are all sent.
    for f in files:
        if re.fullmatch(r"native/[^/]+\.(c|h|cdef|py)", f):
            assert not dockerfile_mod.dockerignore_excludes(ignore, f), f


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        "build/fakenvml/libnvidia-ml.so.1",
        "vgpu/_native.abi3.so",
        "vgpu/_native.c",
        "tests/conftest.py",
        "benchmarks/conftest.py",
        ".git/HEAD",
        "vgpu/__pycache__/cli.cpython-311.pyc",
        "native/fakenvml/fakenvml.c",
        "deploy/volcano-vgpu-device-plugin.yml",
    ],
)
def test_dockerignore_keeps_local_artefacts_out(path):
    assert dockerfile_mod.dockerignore_excludes(DOCKERIGNORE.read_text(), path)


def test_dockerignore_matcher_follows_docker_rules():
    rules = "*\n!keep/\nkeep/drop/\n**/*.so\n"
    assert dockerfile_mod.dockerignore_excludes(rules, "x.txt")
    assert not dockerfile_mod.dockerignore_excludes(rules, "keep/a/b.py")
    assert dockerfile_mod.dockerignore_excludes(rules, "keep/drop/c.py")
    assert dockerfile_mod.dockerignore_excludes(rules, "keep/lib.so")


def test_no_hami_core_source_is_vendored():
    assert not (m.REPO / ".gitmodules").exists(), "no submodules: HAMi-core is fetched at image build time"
    hami_markers = ("multiprocess_memory_limit", "libvgpu.c", "shrreg_tool", "libvgpu.so")
    offenders = [f for f in _tracked_files() if any(k in f.rsplit("/", 1)[-1] for k in hami_markers)]
    assert not offenders, offenders
