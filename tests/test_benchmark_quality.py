"""The quality benchmark's own measurements."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np

from faceweave.types import Face

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _quality() -> ModuleType:
    """benchmarks/quality.py (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "bench_quality", ROOT / "benchmarks" / "quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_grain_ratio_is_the_outputs_fine_grain_over_the_targets(
    grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    grain_ratio = _quality().grain_ratio
    assert grain_ratio(grace_hopper, grace_hopper, grace_hopper_face) == 1.0
    soft = cv2.GaussianBlur(grace_hopper, (0, 0), 2.0)
    assert grain_ratio(soft, grace_hopper, grace_hopper_face) < 0.5
    noisy = np.clip(
        grace_hopper + np.random.default_rng(1).normal(0, 12, grace_hopper.shape[:2])[..., None],
        0,
        255,
    )
    assert grain_ratio(noisy.astype(np.uint8), grace_hopper, grace_hopper_face) > 1.5
