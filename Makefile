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

.PHONY: all install fakenvml test bench bench-quick clean proto

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

fakenvml: $(FAKENVML)

$(FAKENVML): $(FAKENVML_SRC)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -std=gnu11 -Wall -Wextra -Inative -Wl,-soname,libnvidia-ml.so.1 \
	    -o $@ $(filter %.c,$(FAKENVML_SRC)) -lpthread -lm

test: install fakenvml
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install fakenvml
	$(PY) -m pytest benchmarks -p no:cacheprovider $(PYTEST_ARGS)

# CI mode: fewer rounds, same ratio gates.
bench-quick: install fakenvml
	VGPU_BENCH_QUICK=1 $(PY) -m pytest benchmarks -p no:cacheprovider -q $(PYTEST_ARGS)

clean:
	rm -rf build vgpu/_native*.so vgpu/_native.c *.egg-info
