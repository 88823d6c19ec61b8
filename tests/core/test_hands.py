"""Tests for faceweave.core.hands: a hand's silhouette and laying hands back over a swap."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from synthetic_hands import open_hand  # tests/synthetic_hands.py: tests/ is on sys.path

from faceweave.core.hands import HAND_BONES, HAND_POINTS, hand_silhouette, hands_area, keep_hands


def test_hand_bones_cover_every_point_but_the_wrist() -> None:
    joined = {i for bone in HAND_BONES for i in bone}
    assert joined == set(range(1, HAND_POINTS))
    assert len(HAND_BONES) == 15  # three bones a finger, the thumb's from its root


def test_silhouette_shape_dtype_range() -> None:
    mask = hand_silhouette(open_hand(), (128, 120))
    assert mask.shape == (128, 120) and mask.dtype == np.float32
    assert 0.0 <= float(mask.min()) and float(mask.max()) <= 1.0


def test_silhouette_covers_the_fingers_and_the_palm() -> None:
    hand = open_hand()
    mask = hand_silhouette(hand, (128, 120))
    for a, b in HAND_BONES:
        x, y = np.round((hand[a] + hand[b]) / 2.0).astype(int)
        assert mask[y, x] == 1.0, (a, b)
    x, y = np.round(hand[[0, 5, 9, 13, 17]].mean(0)).astype(int)
    assert mask[y, x] == 1.0
    # A fingertip reaches past its landmark by about half a finger's width.
    tip_x, tip_y = np.round(hand[12]).astype(int)
    assert mask[tip_y - 4, tip_x] > 0.5


def test_silhouette_stays_near_the_hand() -> None:
    hand = open_hand()
    mask = hand_silhouette(hand, (128, 120))
    palm = float(np.hypot(*(hand[9] - hand[0])))
    hull = np.zeros((128, 120), np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(hand).astype(np.int32)), 1)
    near = cv2.dilate(hull, np.ones((3, 3), np.uint8), iterations=int(np.ceil(palm * 0.3)))
    assert float(mask[near == 0].max()) == 0.0
    # ...and covers most of its own hull: a hand, not a skeleton.
    assert float(mask[hull == 1].mean()) > 0.8


def test_silhouette_in_a_crop_matches_the_frame() -> None:
    hand = open_hand()
    whole = hand_silhouette(hand, (128, 120))
    crop = hand_silhouette(hand, (64, 50), offset=(30.0, 40.0))
    # (OpenCV's anti-aliasing differs by a few edge pixels where a crop cuts a stroke.)
    differs = np.abs(crop - whole[40:104, 30:80])
    assert float(differs.max()) <= 0.5 and int((differs > 0).sum()) < 0.01 * differs.size
    half = hand_silhouette(hand, (64, 60), scale=0.5)
    assert abs(float(half.sum()) * 4.0 - float(whole.sum())) < 0.1 * float(whole.sum())


def test_silhouette_outside_the_image_is_empty() -> None:
    mask = hand_silhouette(open_hand() + 1000.0, (64, 64))
    assert float(mask.max()) == 0.0


@pytest.mark.parametrize(
    "landmarks",
    [np.zeros((20, 2)), np.zeros((21,)), np.full((21, 2), np.nan)],
    ids=["20 points", "flat", "nan"],
)
def test_bad_landmarks_raise(landmarks: np.ndarray) -> None:
    with pytest.raises(ValueError, match="landmarks"):
        hand_silhouette(landmarks, (32, 32))


def test_keep_hands_restores_the_hand_and_nothing_else() -> None:
    rng = np.random.default_rng(0)
    original = rng.integers(0, 256, (128, 120, 3), np.uint8)
    swapped = np.full_like(original, 77)
    out = swapped.copy()
    hand = open_hand()
    keep_hands(out, original, [hand])
    mask = hand_silhouette(hand, (128, 120))
    inside = cv2.erode((mask == 1.0).astype(np.uint8), np.ones((5, 5), np.uint8)) == 1
    outside = cv2.dilate((mask > 0).astype(np.uint8), np.ones((9, 9), np.uint8)) == 0
    np.testing.assert_array_equal(out[inside], original[inside])
    np.testing.assert_array_equal(out[outside], swapped[outside])
    assert inside.sum() > 500 and outside.sum() > 5000


def test_keep_hands_with_no_hands_changes_nothing() -> None:
    original = np.zeros((32, 32, 3), np.uint8)
    out = np.full_like(original, 9)
    keep_hands(out, original, [])
    assert int(out.min()) == 9 == int(out.max())


def test_keep_hands_refuses_frames_of_other_sizes() -> None:
    with pytest.raises(ValueError, match="shape"):
        keep_hands(np.zeros((8, 8, 3), np.uint8), np.zeros((8, 9, 3), np.uint8), [open_hand()])


def test_hands_area_is_their_silhouettes_together() -> None:
    left, right = open_hand((40.0, 100.0), 30.0), open_hand((90.0, 110.0), 35.0)
    area = hands_area([left, right], (128, 120), offset=(5.0, 3.0), scale=0.9)
    both = np.maximum(
        hand_silhouette(left, (128, 120), offset=(5.0, 3.0), scale=0.9),
        hand_silhouette(right, (128, 120), offset=(5.0, 3.0), scale=0.9),
    )
    np.testing.assert_array_equal(area, both)
    assert area.dtype == np.float32
    assert float(hands_area([], (8, 9)).max()) == 0.0 and hands_area([], (8, 9)).shape == (8, 9)
