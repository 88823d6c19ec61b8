"""Tests of faceweave.core.blend."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faceweave.core.blend import BLEND_MODES, blend, feather
from faceweave.errors import InputError


def _images(height: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    foreground = rng.uniform(0, 255, (height, width, 3)).astype(np.float32)
    background = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return foreground, background


def _disc(shape: tuple[int, int], centre: tuple[int, int], radius: int) -> np.ndarray:
    mask = np.zeros(shape, np.float32)
    cv2.circle(mask, centre, radius, 1.0, -1)
    return mask


def _chebyshev_distance_to_support(mask: np.ndarray) -> np.ndarray:
    outside = (mask <= 0).astype(np.uint8)
    return cv2.distanceTransform(outside, cv2.DIST_C, 3)


# ---------------------------------------------------------------- feather


def test_feather_stays_inside_and_below_the_mask() -> None:
    mask = _disc((80, 90), (45, 40), 25)
    soft = feather(mask, 6)
    assert soft.dtype == np.float32 and soft.shape == mask.shape
    assert soft.min() >= 0.0 and soft.max() <= 1.0
    assert not (soft[mask == 0] > 0).any()
    assert (soft <= mask).all()
    assert soft[40, 45] == pytest.approx(1.0, abs=1e-5)  # deep inside: untouched
    edge_band = (mask > 0) & (soft < 0.99)
    assert edge_band.sum() > 100  # there is a feather at all


def test_feather_radius_zero_is_a_float_copy() -> None:
    mask = (np.arange(20)[None, :] > 9).astype(np.float64) * np.ones((10, 1))
    soft = feather(mask, 0)
    assert soft.dtype == np.float32
    np.testing.assert_array_equal(soft, mask)
    soft[:] = 0.5
    assert mask.max() == 1.0


def test_feather_keeps_edges_on_the_image_border() -> None:
    mask = np.zeros((40, 40), np.float32)
    mask[:, :20] = 1.0
    soft = feather(mask, 4)
    assert soft[20, 0] == pytest.approx(1.0, abs=1e-5)
    assert soft[20, 19] < 0.05


def test_feather_rejects_negative_radius() -> None:
    with pytest.raises(InputError):
        feather(np.ones((4, 4), np.float32), -1)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), radius=st.integers(0, 9))
def test_feather_support_property(seed: int, radius: int) -> None:
    rng = np.random.default_rng(seed)
    mask = cv2.GaussianBlur(rng.random((30, 34)).astype(np.float32), (0, 0), 2.0)
    mask = np.clip((mask - 0.45) * 5, 0, 1)
    soft = feather(mask, radius)
    assert soft.min() >= 0.0 and soft.max() <= 1.0
    assert (soft <= mask + 1e-6).all()


# ---------------------------------------------------------------- blend


@settings(max_examples=20, deadline=None)
@given(
    height=st.integers(4, 48),
    width=st.integers(4, 48),
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(BLEND_MODES),
)
def test_zero_mask_returns_background(height: int, width: int, seed: int, mode: str) -> None:
    foreground, background = _images(height, width, seed)
    out = blend(foreground, background, np.zeros((height, width), np.float32), mode=mode)
    assert out.dtype == np.uint8 and out.shape == background.shape
    np.testing.assert_array_equal(out, background)
    assert out is not background


@settings(max_examples=20, deadline=None)
@given(height=st.integers(2, 40), width=st.integers(2, 40), seed=st.integers(0, 2**31 - 1))
def test_alpha_full_mask_returns_foreground(height: int, width: int, seed: int) -> None:
    foreground, background = _images(height, width, seed)
    out = blend(foreground, background, np.ones((height, width), np.float32), mode="alpha")
    np.testing.assert_array_equal(out, np.rint(foreground).astype(np.uint8))


def test_alpha_is_a_linear_mix() -> None:
    foreground, background = _images(10, 12, seed=1)
    mask = np.full((10, 12), 0.25, np.float32)
    out = blend(foreground, background, mask, mode="alpha")
    expected = np.rint(0.25 * foreground + 0.75 * background.astype(np.float32))
    np.testing.assert_allclose(out, expected, atol=1)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(BLEND_MODES),
    foreground_uint8=st.booleans(),
)
def test_shape_dtype_and_untouched_background(seed: int, mode: str, foreground_uint8: bool) -> None:
    rng = np.random.default_rng(seed)
    height, width = int(rng.integers(24, 90)), int(rng.integers(24, 90))
    foreground, background = _images(height, width, seed)
    if foreground_uint8:
        foreground = foreground.astype(np.uint8)
    centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))  # may touch the border
    mask = feather(_disc((height, width), centre, int(rng.integers(3, 20))), 2)
    out = blend(foreground, background, mask, mode=mode, levels=3)
    assert out.dtype == np.uint8 and out.shape == (height, width, 3)
    if mode == "multiband":
        far = _chebyshev_distance_to_support(mask) > 3 * 2 ** (3 - 1)
    else:
        far = mask == 0
    np.testing.assert_array_equal(out[far], background[far])


def test_multiband_stays_local_but_reaches_past_the_mask() -> None:
    foreground = np.full((128, 128, 3), 250.0, np.float32)
    background = np.full((128, 128, 3), 10, np.uint8)
    mask = _disc((128, 128), (64, 64), 20)
    out = blend(foreground, background, mask, mode="multiband", levels=4)
    distance = _chebyshev_distance_to_support(mask)
    np.testing.assert_array_equal(out[distance > 24], 10)
    assert (out[(distance > 0) & (distance < 4)] > 10).all()  # the seam is smoothed outwards
    assert np.abs(out[64, 64].astype(int) - 250).max() <= 3  # the centre is the foreground


def test_multiband_keeps_foreground_detail_inside() -> None:
    foreground, background = _images(96, 96, seed=2)
    mask = feather(_disc((96, 96), (48, 48), 40), 4)
    out = blend(foreground, background, mask, mode="multiband")
    inside = _disc((96, 96), (48, 48), 25) > 0
    error = np.abs(out[inside].astype(np.float32) - foreground[inside])
    assert error.mean() < 2.0


def test_multiband_with_one_level_is_alpha() -> None:
    foreground, background = _images(20, 30, seed=3)
    mask = np.random.default_rng(3).random((20, 30)).astype(np.float32)
    np.testing.assert_array_equal(
        blend(foreground, background, mask, mode="multiband", levels=1),
        blend(foreground, background, mask, mode="alpha"),
    )


def test_poisson_matches_background_gradients_at_the_seam() -> None:
    yy, xx = np.mgrid[0:96, 0:128]
    background = np.dstack([60 + xx, 80 + yy, 100 + 0.5 * (xx + yy)]).astype(np.uint8)
    foreground = background.astype(np.float32) + 40.0  # same gradients, brighter
    mask = np.zeros((96, 128), np.float32)
    mask[20:70, 30:100] = 1.0
    alpha = blend(foreground, background, mask, mode="alpha")
    poisson = blend(foreground, background, mask, mode="poisson")
    assert np.abs(alpha.astype(int) - background)[mask > 0].mean() == pytest.approx(40, abs=0.5)
    # Cloning keeps the foreground's gradients and the background's level: no offset.
    assert np.abs(poisson.astype(int) - background)[mask > 0].max() <= 2


def test_poisson_reproduces_an_identical_textured_foreground() -> None:
    # Any misplacement of the cloned region would show up on a random texture.
    _, background = _images(64, 80, seed=4)
    mask = np.zeros((64, 80), np.float32)
    mask[10:50, 7:61] = 1.0
    out = blend(background, background, mask, mode="poisson")
    assert np.abs(out.astype(int) - background).max() <= 2


def test_poisson_handles_masks_on_the_border_and_tiny_masks() -> None:
    foreground, background = _images(50, 60, seed=5)
    border = np.zeros((50, 60), np.float32)
    border[:30, :25] = 1.0
    out = blend(foreground, background, border, mode="poisson")
    np.testing.assert_array_equal(out[border == 0], background[border == 0])
    for thin in (np.s_[10:11, 10:30], np.s_[10:30, 40:42]):  # too thin to clone: alpha
        sliver = np.zeros((50, 60), np.float32)
        sliver[thin] = 1.0
        np.testing.assert_array_equal(
            blend(foreground, background, sliver, mode="poisson"),
            blend(foreground, background, sliver, mode="alpha"),
        )
    faint = np.zeros((50, 60), np.float32)
    faint[10:20, 10:20] = 0.4  # nothing above 0.5: falls back to alpha
    np.testing.assert_array_equal(
        blend(foreground, background, faint, mode="poisson"),
        blend(foreground, background, faint, mode="alpha"),
    )


def test_blend_rejects_bad_inputs() -> None:
    foreground, background = _images(10, 10, seed=6)
    mask = np.ones((10, 10), np.float32)
    with pytest.raises(InputError, match="mask"):
        blend(foreground, background, mask[:, :9])
    with pytest.raises(InputError, match="foreground"):
        blend(foreground[:9], background, mask)
    with pytest.raises(InputError, match="unknown blend mode"):
        blend(foreground, background, mask, mode="screen")
    with pytest.raises(InputError, match="uint8"):
        blend(foreground, background.astype(np.float32), mask)
    with pytest.raises(InputError, match="levels"):
        blend(foreground, background, mask, levels=0)


def test_mask_out_of_range_is_clipped() -> None:
    foreground, background = _images(8, 8, seed=7)
    mask = np.full((8, 8), 3.0, np.float32)
    np.testing.assert_array_equal(
        blend(foreground, background, mask, mode="alpha"),
        np.rint(foreground).astype(np.uint8),
    )


@pytest.mark.parametrize("reach", [4, 8, 10, 12, 16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reach_limiter_bounds(reach: int, seed: int) -> None:
    """Exactly 0 past 3 * reach from the support, 1 within reach (also where it is
    worked out on a coarse grid of blocks), never above 1."""
    from faceweave.core.blend import _reach_limiter

    rng = np.random.default_rng(seed)
    height, width = int(rng.integers(60, 240)), int(rng.integers(60, 240))
    centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
    mask = _disc((height, width), centre, int(rng.integers(2, 40)))
    mask[rng.random((height, width)) > 0.9995] = 1.0  # stray support pixels too
    limit = _reach_limiter(mask, reach)
    assert limit.shape == (height, width, 3)
    distance = _chebyshev_distance_to_support(mask)
    assert np.all(limit[distance > 3 * reach] == 0.0)
    assert np.all(limit[distance <= reach] >= 1.0 - 1e-6)
    assert limit.max() <= 1.0 + 1e-6
