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


def test_tone_difference_is_the_cheeks_lab_shift_from_the_target(
    grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    tone_difference = _quality().tone_difference
    assert tone_difference(grace_hopper, grace_hopper, grace_hopper_face) == (0.0, 0.0)
    # Darker by a fifth: lower L.
    darker = (grace_hopper.astype(np.float32) * 0.8).astype(np.uint8)
    d_l, d_ab = tone_difference(darker, grace_hopper, grace_hopper_face)
    assert -15.0 < d_l < -5.0
    # A green cast: a and b move, L hardly.
    cast = np.clip(grace_hopper.astype(np.int16) + np.array([0, 25, -10]), 0, 255)
    d_l, d_ab = tone_difference(cast.astype(np.uint8), grace_hopper, grace_hopper_face)
    assert abs(d_l) < 6.0 and d_ab > 15.0
    # Only the cheeks count: the frame outside the face changes nothing.
    framed = grace_hopper.copy()
    x0, y0, _, _ = (int(v) for v in grace_hopper_face.bbox)
    framed[: max(y0 - 2, 0)] = 0
    assert tone_difference(framed, grace_hopper, grace_hopper_face) == (0.0, 0.0)


def test_side_tone_difference_is_the_change_of_colour_across_the_face(
    grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    side_tone_difference = _quality().side_tone_difference
    assert side_tone_difference(grace_hopper, grace_hopper, grace_hopper_face) == 0.0
    # The same cast over the whole face: no change across it.
    cast = np.clip(grace_hopper.astype(np.int16) + np.array([0, 25, -10]), 0, 255)
    assert side_tone_difference(cast.astype(np.uint8), grace_hopper, grace_hopper_face) < 1.0
    # Bluer on the image's left, yellower on its right: a change across the face.
    x0, _, x1, _ = grace_hopper_face.bbox
    t = np.clip((np.arange(grace_hopper.shape[1]) - x0) / (x1 - x0), 0.0, 1.0) - 0.5
    tint = np.exp(np.outer(t, [-0.5, 0.0, 0.35]))[None, :, :]
    tinted = np.clip(grace_hopper * tint, 0, 255).astype(np.uint8)
    assert side_tone_difference(tinted, grace_hopper, grace_hopper_face) > 8.0


def test_cheek_tone_distance_is_the_worse_cheeks_colour_off_the_target(
    grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    cheek_tone_distance = _quality().cheek_tone_distance
    assert cheek_tone_distance(grace_hopper, grace_hopper, grace_hopper_face) == 0.0
    # Greener on the image's left half only: that cheek is read, not the mean.
    x0, _, x1, _ = grace_hopper_face.bbox
    middle = int(round((x0 + x1) / 2))
    half = grace_hopper.astype(np.int16)
    half[:, :middle] += np.array([0, 20, -10], np.int16)
    half = np.clip(half, 0, 255).astype(np.uint8)
    both = np.clip(grace_hopper.astype(np.int16) + np.array([0, 20, -10]), 0, 255)
    one_side = cheek_tone_distance(half, grace_hopper, grace_hopper_face)
    assert one_side > 10.0
    assert (
        abs(one_side - cheek_tone_distance(both.astype(np.uint8), grace_hopper, grace_hopper_face))
        < 2.0
    )
    # Only the cheeks count: the frame above the face changes nothing.
    framed = grace_hopper.copy()
    framed[: max(int(grace_hopper_face.bbox[1]) - 2, 0)] = 0
    assert cheek_tone_distance(framed, grace_hopper, grace_hopper_face) == 0.0
