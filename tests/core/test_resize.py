"""downscale: sizes, dtypes, and an area filter's averaging (no aliasing)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.core.resize import downscale, shrink_to_side


@pytest.mark.parametrize(
    ("shape", "size"),
    [
        ((480, 854), (640, 360)),
        ((3000, 4000), (640, 480)),
        ((1081, 1921), (639, 359)),
        ((9, 7), (3, 4)),
    ],
)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_size_and_dtype(shape: tuple[int, int], size: tuple[int, int], dtype: type) -> None:
    image = np.random.default_rng(0).uniform(0, 255, (*shape, 3)).astype(dtype)
    out = downscale(image, size)
    assert out.shape == (size[1], size[0], 3)
    assert out.dtype == dtype


def test_same_size_is_the_image_itself() -> None:
    image = np.zeros((20, 30, 3), np.uint8)
    assert downscale(image, (30, 20)) is image


@pytest.mark.parametrize("size", [(31, 20), (30, 21), (0, 10)])
def test_larger_or_empty_size_is_refused(size: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="cannot downscale"):
        downscale(np.zeros((20, 30), np.uint8), size)


def test_fine_pattern_averages_out() -> None:
    """A one-pixel checkerboard shrunk 6.25x is mid grey, as an area filter gives;
    a bilinear resize straight down picks near-whole pixels (the aliasing it avoids)."""
    yy, xx = np.mgrid[:1000, :1250]
    board = (((xx + yy) % 2) * 255).astype(np.uint8)
    out = downscale(board, (200, 160))
    assert abs(float(out.mean()) - 127.5) < 2.0
    assert float(out.std()) < 3.0
    straight = cv2.resize(board, (200, 160), interpolation=cv2.INTER_LINEAR)
    assert float(straight.std()) > 30.0


def test_smooth_image_matches_an_area_filter() -> None:
    yy, xx = np.mgrid[:720, :1000].astype(np.float32)
    image = (128 + 60 * np.sin(xx / 90.0) * np.cos(yy / 70.0)).astype(np.float32)
    ours = downscale(image, (300, 216))
    area = cv2.resize(image, (300, 216), interpolation=cv2.INTER_AREA)
    assert float(np.abs(ours - area).max()) < 1.5


def test_halving_takes_opencvs_area_filter() -> None:
    """A whole factor of 2 is OpenCV's area filter itself (its fast path), to the bit."""
    image = np.random.default_rng(1).integers(0, 256, (720, 1280, 3), np.uint8)
    expected = cv2.resize(image, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(downscale(image, (640, 360)), expected)


@pytest.mark.parametrize(
    ("shape", "side", "expected"),
    [
        ((480, 854), 640, (360, 640)),
        ((1280, 720), 640, (640, 360)),
        ((3000, 4000), 1280, (960, 1280)),
    ],
)
def test_shrink_to_side_keeps_the_aspect(
    shape: tuple[int, int], side: int, expected: tuple[int, int]
) -> None:
    image = np.zeros((*shape, 3), np.uint8)
    assert shrink_to_side(image, side).shape[:2] == expected


def test_shrink_to_side_leaves_a_small_image_itself() -> None:
    image = np.zeros((300, 640), np.uint8)
    assert shrink_to_side(image, 640) is image
