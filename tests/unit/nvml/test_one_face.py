"""nvidia-ml-py stays behind vgpu.nvml: no other package of vgpu imports pynvml."""

from __future__ import annotations

import ast
import pathlib

VGPU = pathlib.Path(__file__).resolve().parents[3] / "vgpu"


def _imports_pynvml(path: pathlib.Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "pynvml" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pynvml":
            return True
    return False


def test_pynvml_is_imported_only_inside_vgpu_nvml():
    offenders = [
        str(p.relative_to(VGPU.parent))
        for p in sorted(VGPU.rglob("*.py"))
        if VGPU / "nvml" not in p.parents and _imports_pynvml(p)
    ]
    assert offenders == [], "import NVML through vgpu.nvml (NvmlError, init_nvml, ...), not pynvml"
