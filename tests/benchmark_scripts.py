"""The benchmarks are scripts, not a package: their modules loaded by file name."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def benchmark_module(name: str) -> ModuleType:
    """benchmarks/<name>.py, loaded once as ``bench_<name>``."""
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
