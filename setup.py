"""setuptools entry point: only here because cffi's setuptools integration needs `cffi_modules`."""

from setuptools import setup

setup(cffi_modules=["native/build_native.py:ffibuilder"])
