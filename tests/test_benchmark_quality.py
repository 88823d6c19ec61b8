"""The quality benchmark's own measurements."""

from __future__ import annotations

from types import ModuleType

import cv2
import numpy as np
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path

from faceweave.types import Face


def _quality() -> ModuleType:
    return benchmark_module("quality")


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


def test_landmarks_at_a_measured_box_are_the_measured_landmarks(
    grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    judge = _quality().DlibJudge()
    measured = judge.measure(grace_hopper, grace_hopper_face.bbox)
    assert not measured.fallback
    again = judge.landmarks_at(grace_hopper, grace_hopper_face.bbox, measured.box)
    np.testing.assert_allclose(again, measured.landmarks, atol=0.05)
    # Another box gives other landmarks: the box is what decides, not a cache.
    x0, y0, x1, y1 = measured.box
    shift = 0.15 * (x1 - x0)
    moved = judge.landmarks_at(
        grace_hopper, grace_hopper_face.bbox, (x0 + shift, y0, x1 + shift, y1)
    )
    assert np.abs(moved - measured.landmarks).mean() > 1.0
