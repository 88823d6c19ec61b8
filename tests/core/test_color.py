"""Tests of faceweave.core.color."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faceweave.core import color as color_module
from faceweave.core.color import COLOR_MODES, color_transfer, masked_mean_cov
from faceweave.errors import InputError


def _face(shape: tuple[int, int], mean: tuple[float, float, float], std: float, seed: int):
    """A smooth random colour image around ``mean`` (BGR), float32."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(*shape, 3)).astype(np.float32)
    noise = cv2.GaussianBlur(noise, (0, 0), 2.0)
    noise /= noise.std(axis=(0, 1))
    image = np.asarray(mean, np.float32) + std * noise
    return np.clip(image, 0, 255).astype(np.float32)


def _disc(shape: tuple[int, int], radius: int) -> np.ndarray:
    mask = np.zeros(shape, np.float32)
    cv2.circle(mask, (shape[1] // 2, shape[0] // 2), radius, 1.0, -1)
    return mask


def _lab_stats(image: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and spread of the masked pixels in Lab (the median: the transfer's
    location, see color_transfer)."""
    lab = cv2.cvtColor(image.astype(np.float32) / 255, cv2.COLOR_BGR2Lab)[mask >= 0.5]
    return np.median(lab, axis=0), lab.std(axis=0)


def test_masked_mean_cov_matches_numpy_and_ignores_outside() -> None:
    image = _face((40, 50), (90, 120, 160), 15, seed=1)
    mask = np.zeros((40, 50), np.float32)
    mask[5:30, 10:40] = 0.8
    image[mask == 0] = 0  # outside pixels must not dilute the statistics
    mean, cov = masked_mean_cov(image, mask)
    selected = image[mask >= 0.5].astype(np.float64)
    np.testing.assert_allclose(mean, selected.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(cov, np.cov(selected.T, bias=True), rtol=1e-6, atol=1e-6)
    assert mean.dtype == np.float64 and cov.shape == (3, 3)


def test_masked_mean_cov_accepts_pixel_lists_and_min_weight() -> None:
    pixels = np.array([[10, 20, 30]] * 20 + [[200, 200, 200]] * 20, np.uint8)
    weights = np.array([1.0] * 20 + [0.3] * 20)
    mean, cov = masked_mean_cov(pixels, weights)
    np.testing.assert_allclose(mean, [10, 20, 30])
    np.testing.assert_allclose(cov, 0.0, atol=1e-9)
    mean_all, _ = masked_mean_cov(pixels, weights, min_weight=0.2)
    np.testing.assert_allclose(mean_all, [105, 110, 115])


def test_masked_mean_cov_subsamples_large_masks_faithfully() -> None:
    image = _face((400, 400), (80, 110, 150), 20, seed=2)
    mask = np.ones((400, 400), np.float32)
    mean, cov = masked_mean_cov(image, mask)
    full = image.reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(mean, full.mean(axis=0), atol=0.5)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), full.std(axis=0), rtol=0.03)


def test_masked_mean_cov_rejects_tiny_and_mismatched_masks() -> None:
    image = np.zeros((10, 10, 3), np.float32)
    tiny = np.zeros((10, 10), np.float32)
    tiny[0, :5] = 1
    with pytest.raises(InputError, match="at least 16"):
        masked_mean_cov(image, tiny)
    with pytest.raises(ValueError):
        masked_mean_cov(image, np.ones((10, 9), np.float32))


def test_rct_matches_target_lab_statistics() -> None:
    source = _face((64, 64), (70, 100, 150), 12, seed=3)
    target = _face((48, 80), (130, 140, 120), 20, seed=4)
    source_mask, target_mask = _disc((64, 64), 26), _disc((48, 80), 20)
    out = color_transfer(
        source, target, source_mask=source_mask, target_mask=target_mask, mode="rct"
    )
    assert out.shape == source.shape and out.dtype == np.float32
    median_out, std_out = _lab_stats(out, source_mask)
    median_t, std_t = _lab_stats(target, target_mask)
    np.testing.assert_allclose(median_out, median_t, atol=0.3)
    np.testing.assert_allclose(std_out, std_t, rtol=0.03)


def test_lct_matches_target_covariance() -> None:
    source = _face((64, 64), (70, 100, 150), 12, seed=5)
    target = _face((50, 70), (130, 140, 120), 18, seed=6)
    # Correlated target channels: a diagonal (per-channel) transfer could not match these.
    target[..., 2] = 0.5 * target[..., 2] + 0.5 * target[..., 1]
    source_mask, target_mask = _disc((64, 64), 26), _disc((50, 70), 20)
    out = color_transfer(
        source, target, source_mask=source_mask, target_mask=target_mask, mode="lct"
    )
    _, cov_out = masked_mean_cov(out, source_mask)
    _, cov_t = masked_mean_cov(target, target_mask)
    # The ridge adds about one grey level squared per channel.
    np.testing.assert_allclose(cov_out, cov_t, atol=3.0)
    # The source's median colour goes to the target's.
    transform, offset, median_s, _ = color_module._lct_affine(
        source, target, source_mask, target_mask, ridge=0.1
    )
    median_t = np.median(target[target_mask >= 0.5], axis=0)
    np.testing.assert_allclose(median_s, np.median(source[source_mask >= 0.5], axis=0), atol=0.5)
    np.testing.assert_allclose(transform @ median_s + offset, median_t, atol=0.5)


@pytest.mark.parametrize("mode", ["rct", "lct"])
def test_highlights_do_not_lighten_the_skin_tone(mode: str) -> None:
    """A dark target's skin with bright highlights (a sweaty forehead, a flash) on a
    tenth of it: the face takes the skin's own tone, its median, not the mean the
    highlights pull up (p24's face came out 7 L levels lighter than his skin)."""
    source = _face((64, 64), (150, 170, 200), 10, seed=13)
    target = _face((64, 64), (40, 50, 70), 6, seed=14)
    target[:6] = (230, 235, 240)  # the highlights: 6 of 64 rows
    mask = np.ones((64, 64), np.float32)
    out = color_transfer(source, target, source_mask=mask, target_mask=mask, mode=mode)
    luma = np.array([0.114, 0.587, 0.299], np.float32)
    skin = float(np.median(target[6:] @ luma))
    # About 35 levels lighter when the means were matched.
    assert abs(float(np.median(out @ luma)) - skin) < 3.0


def test_rct_keeps_dark_greys_grey() -> None:
    """A source whose skin is yellower than the target's: its dark, near-grey brows and
    stubble take the tint's change only as far as they are light (they had turned blue).
    """
    source = _face((64, 64), (110, 150, 190), 8, seed=15)  # warm skin
    source[:8] = (42, 44, 46)  # a brow: dark and near grey
    target = _face((64, 64), (150, 160, 185), 8, seed=16)  # paler, pinker skin
    mask = np.ones((64, 64), np.float32)
    skin = mask.copy()
    skin[:8] = 0  # the statistics are the skin's, as in a swap
    out = color_transfer(
        source, target, source_mask=skin, target_mask=mask, mode="rct", anchor_black=True
    )
    brow = cv2.cvtColor((out[:8] / 255).astype(np.float32), cv2.COLOR_BGR2Lab)
    assert np.median(brow[..., 2]) > -4.0  # Lab b: about -3 (it was -10, blue)


def test_lct_moves_the_colours_least() -> None:
    # Of the maps that take the source's covariance to the target's, lct is the
    # symmetric one (Monge-Kantorovich): it moves pixels less than any other, such as
    # Ct^1/2 Cs^-1/2 with its rotation. A fold redder than the skin around it (an
    # old face's wrinkle) keeps its place in colour: it stays redder and darker
    # than the mapped skin, and no channel of it ends above the skin's.
    source = _face((64, 64), (90, 110, 170), 10, seed=3)
    source[..., 2] = 0.7 * source[..., 2] + 0.3 * source[..., 1] + 20.0
    target = _face((64, 64), (120, 135, 150), 14, seed=4)
    target[..., 0] = 0.6 * target[..., 0] + 0.4 * target[..., 2] - 10.0
    mask = np.ones((64, 64), np.float32)
    transform, offset, mean_s, _ = color_module._lct_affine(source, target, mask, mask)
    np.testing.assert_allclose(transform, transform.T, atol=1e-9)
    assert np.all(np.linalg.eigvalsh(transform) > 0)
    _, cov_s = masked_mean_cov(source, mask)
    _, cov_t = masked_mean_cov(target, mask)
    root_t = color_module._sqrt_and_inv_sqrt(cov_t)[0]
    rotated = root_t @ color_module._sqrt_and_inv_sqrt(cov_s)[1]
    pixels = source.reshape(-1, 3).astype(np.float64) - mean_s
    moved = np.linalg.norm(pixels @ (transform - np.eye(3)).T, axis=1).mean()
    moved_rotated = np.linalg.norm(pixels @ (rotated - np.eye(3)).T, axis=1).mean()
    assert moved < moved_rotated
    # A fold: darker than the skin mean, most in blue and green.
    fold = transform @ np.array([-30.0, -30.0, -12.0])
    assert np.all(fold < 0) and fold[2] > fold[1]


@pytest.mark.parametrize("mode", ["rct", "lct"])
def test_strength_interpolates(mode: str) -> None:
    source = _face((32, 32), (70, 100, 150), 12, seed=7)
    target = _face((32, 32), (140, 120, 90), 15, seed=8)
    mask = np.ones((32, 32), np.float32)
    kwargs = {"source_mask": mask, "target_mask": mask, "mode": mode}
    zero = color_transfer(source, target, strength=0.0, **kwargs)
    half = color_transfer(source, target, strength=0.5, **kwargs)
    full = color_transfer(source, target, strength=1.0, **kwargs)
    np.testing.assert_array_equal(zero, source)
    np.testing.assert_allclose(half, (source + full) / 2, atol=1e-3)
    assert np.abs(full - source).mean() > 20


@pytest.mark.parametrize("mode", ["none", "sh"])
def test_passthrough_modes_return_source_as_float(mode: str) -> None:
    source = np.random.default_rng(9).integers(0, 256, (20, 24, 3), dtype=np.uint8)
    mask = np.ones((20, 24), np.float32)
    out = color_transfer(source, source, source_mask=mask, target_mask=mask, mode=mode)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, source)


def test_uint8_inputs_and_identity_transfer() -> None:
    image = _face((40, 40), (90, 110, 140), 15, seed=10).round().astype(np.uint8)
    mask = _disc((40, 40), 15)
    for mode in ("rct", "lct"):
        out = color_transfer(image, image, source_mask=mask, target_mask=mask, mode=mode)
        np.testing.assert_allclose(out, image, atol=0.6)


@pytest.mark.parametrize("ridge", [0.0, 0.1])
def test_lct_of_a_skin_like_image_onto_itself_changes_nothing(ridge: float) -> None:
    """Skin varies mostly in lightness and little in colour (its covariance's minor
    directions are a hundredth of the major one): the map of a face onto itself must
    still be the identity there, not scale those minor directions."""
    rng = np.random.default_rng(3)
    light = cv2.GaussianBlur(rng.normal(size=(60, 60)).astype(np.float32), (0, 0), 2)
    tint = cv2.GaussianBlur(rng.normal(size=(60, 60, 2)).astype(np.float32), (0, 0), 2)
    light *= 40 / light.std()
    tint *= 3 / tint.std(axis=(0, 1))
    image = np.dstack([140 + light + tint[..., 0], 150 + light, 170 + light + tint[..., 1]])
    image = np.clip(image, 0, 255).astype(np.float32)
    mask = _disc((60, 60), 25)
    out = color_transfer(image, image, source_mask=mask, target_mask=mask, mode="lct", ridge=ridge)
    np.testing.assert_allclose(out, image, atol=1.0)


def test_grey_source_does_not_explode() -> None:
    grey = np.full((40, 40, 3), 128, np.float32)
    grey += np.random.default_rng(11).normal(0, 0.01, (40, 40, 1)).astype(np.float32)
    target = _face((40, 40), (60, 120, 200), 25, seed=12)
    mask = np.ones((40, 40), np.float32)
    for mode in ("rct", "lct"):
        out = color_transfer(grey, target, source_mask=mask, target_mask=mask, mode=mode)
        assert np.isfinite(out).all() and out.min() >= 0 and out.max() <= 255
        # A flat source is shifted onto the target's mean; its noise is not blown up
        # to the target's spread (std ~25).
        assert out.std(axis=(0, 1)).max() < 4.0
        if mode == "rct":
            np.testing.assert_allclose(
                _lab_stats(out, mask)[0], _lab_stats(target, mask)[0], atol=0.5
            )
        else:
            np.testing.assert_allclose(
                np.median(out, axis=(0, 1)), np.median(target, axis=(0, 1)), atol=0.5
            )


def test_rejects_bad_arguments() -> None:
    image = np.zeros((20, 20, 3), np.float32)
    mask = np.ones((20, 20), np.float32)
    with pytest.raises(InputError, match="unknown colour mode"):
        color_transfer(image, image, source_mask=mask, target_mask=mask, mode="hist")
    with pytest.raises(InputError, match="strength"):
        color_transfer(image, image, source_mask=mask, target_mask=mask, strength=1.5)
    with pytest.raises(InputError, match="target_mask"):
        color_transfer(image, image, source_mask=mask, target_mask=mask[:10])
    with pytest.raises(InputError, match="source"):
        color_transfer(image[..., 0], image, source_mask=mask, target_mask=mask)
    assert set(COLOR_MODES) == {"none", "rct", "lct", "sh"}


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(["rct", "lct"]),
    strength=st.floats(0.0, 1.0),
)
def test_output_is_always_finite_and_in_range(seed: int, mode: str, strength: float) -> None:
    rng = np.random.default_rng(seed)
    source = rng.integers(0, 256, (24, 20, 3)).astype(np.uint8)
    target = (rng.integers(0, 256, (1, 1, 3)) * rng.random((18, 22, 1))).astype(np.float32)
    mask_s = (rng.random((24, 20)) < 0.7).astype(np.float32)
    mask_t = np.ones((18, 22), np.float32)
    out = color_transfer(
        source, target, source_mask=mask_s, target_mask=mask_t, mode=mode, strength=strength
    )
    assert out.shape == (24, 20, 3) and out.dtype == np.float32
    assert np.isfinite(out).all() and out.min() >= 0.0 and out.max() <= 255.0


@pytest.mark.parametrize("mode", ["rct", "lct"])
@pytest.mark.parametrize("ratio", [3.0, 1 / 3.0])
def test_gain_range_limits_the_contrast_change(mode: str, ratio: float) -> None:
    source = _face((64, 64), (90, 110, 150), 12, seed=13)
    target = _face((64, 64), (120, 130, 140), 12 * ratio, seed=14)
    mask = _disc((64, 64), 26)
    kwargs = {"source_mask": mask, "target_mask": mask, "mode": mode}
    free = color_transfer(source, target, **kwargs)
    held = color_transfer(source, target, gain_range=(0.8, 1.25), **kwargs)
    luma = [0.114, 0.587, 0.299]

    def spread(image: np.ndarray) -> float:
        # The contrast each mode limits: rct its L channel, lct its BGR luma.
        if mode == "rct":
            return float(_lab_stats(image, mask)[1][0])
        return float((image[mask >= 0.5] @ luma).std())

    # Unlimited, the source takes the target's contrast; limited, it moves by 1.25.
    assert spread(free) / spread(source) == pytest.approx(ratio, rel=0.15)
    assert spread(held) / spread(source) == pytest.approx(1.25 if ratio > 1 else 0.8, rel=0.05)
    # The mean still goes to the target's.
    np.testing.assert_allclose(
        (held[mask >= 0.5] @ luma).mean(), (target[mask >= 0.5] @ luma).mean(), atol=1.0
    )
    # A gain already inside the limit is left alone.
    inside = _face((64, 64), (120, 130, 140), 12 * 1.1, seed=14)
    np.testing.assert_allclose(
        color_transfer(source, inside, gain_range=(0.8, 1.25), **kwargs),
        color_transfer(source, inside, **kwargs),
        atol=1e-3,
    )


def test_gain_range_must_hold_one() -> None:
    image = np.zeros((20, 20, 3), np.float32)
    mask = np.ones((20, 20), np.float32)
    for bad in ((1.2, 1.5), (0.5, 0.9), (0.0, 1.25)):
        with pytest.raises(InputError, match="gain_range"):
            color_transfer(image, image, source_mask=mask, target_mask=mask, gain_range=bad)


def test_lct_ridge_bounds_the_gain_across_the_sources_colour_line() -> None:
    # A source whose colours lie on a line (skin: light to dark along one hue) and a
    # target that varies in every direction: an exact covariance match amplifies the
    # source's tiny spread across its line by the ratio of the two spreads there.
    rng = np.random.default_rng(15)
    line = np.array([0.4, 0.6, 0.7]) / np.linalg.norm([0.4, 0.6, 0.7])
    across = np.cross(line, [1.0, 0.0, 0.0])
    across /= np.linalg.norm(across)
    n = 4096
    mean = np.array([90.0, 120.0, 170.0])
    source = mean + np.outer(rng.normal(0, 20, n), line) + rng.normal(0, 1.0, (n, 3))
    # Two probe pixels outside the mask: the mean, and the mean moved across the line.
    probes = np.stack([mean, mean + 4.0 * across])
    pixels = np.concatenate([source, probes]).astype(np.float32)[None]
    mask = np.concatenate([np.ones(n), np.zeros(2)]).astype(np.float32)[None]
    target = (np.array([120, 130, 150]) + rng.normal(0, 15, (n, 3))).astype(np.float32)[None]
    target_mask = np.ones((1, n), np.float32)

    def gain_across(ridge: float) -> float:
        out = color_transfer(
            pixels, target, source_mask=mask, target_mask=target_mask, mode="lct", ridge=ridge
        )[0, n:]
        return float(np.linalg.norm(out[1] - out[0])) / 4.0

    assert gain_across(0.0) > 8.0  # about 10
    assert gain_across(0.1) < 5.0  # about 4
    with pytest.raises(InputError, match="ridge"):
        color_transfer(pixels, target, source_mask=mask, target_mask=target_mask, ridge=-1.0)


@pytest.mark.parametrize("tint", [(0.0, 0.0, 0.0), (-12.0, 0.0, 10.0)], ids=["grey", "sepia"])
def test_lct_onto_a_black_and_white_target_gives_no_colour(tint: tuple[float, ...]) -> None:
    """A colour face (with red lips, outside the statistics' mask) matched onto a black
    and white photo, or a toned one, comes out with the target's tint and no colour of
    its own; with the ridge, the lips kept some of their red before."""
    source = _face((48, 48), (80, 110, 170), 14, seed=21)
    source[40:44, 18:30] = (60, 50, 190)  # lips
    mask = np.ones((48, 48), np.float32)
    mask[38:46, 16:32] = 0.0
    grey = _face((48, 48), (120, 120, 120), 18, seed=22)[..., :1]
    target = np.repeat(grey, 3, axis=2) + np.asarray(tint, np.float32)
    out = color_transfer(
        source, target, source_mask=mask, target_mask=np.ones_like(mask), mode="lct", ridge=0.1
    )
    offset = out - out.mean(axis=2, keepdims=True)  # each pixel's departure from grey
    expected = np.asarray(tint) - np.mean(tint)
    assert np.abs(offset - expected).max() < 1.0
    assert np.abs(out.mean(axis=2) - source.mean(axis=2)).mean() > 5.0  # matched, not kept
    # A colour target keeps the lips red.
    colour = color_transfer(
        source,
        _face((48, 48), (90, 120, 160), 15, seed=23),
        source_mask=mask,
        target_mask=np.ones_like(mask),
        mode="lct",
        ridge=0.1,
    )
    lips = colour[40:44, 18:30].reshape(-1, 3).mean(0)
    assert lips[2] - lips[1] > 60


@pytest.mark.parametrize("mode", ["rct", "lct"])
def test_anchor_black_keeps_dark_features_dark(mode: str) -> None:
    """A dark-skinned source on a pale target: the affine map lifts black to grey (the
    pupils of such swaps came out a dull grey); anchored, black keeps
    only half the lift, features darker than the skin keep their order, and the skin
    from its mean up maps as without the anchor."""
    source = _face((48, 48), (45, 65, 95), 12, seed=31)
    mask = np.ones((48, 48), np.float32)
    mask[:, 40:] = 0.0
    # Outside the statistics: a grey ramp from black up to past the skin's mean.
    source[:, 40:] = np.linspace(0.0, 120.0, 48, dtype=np.float32)[:, None, None]
    target = _face((48, 48), (150, 175, 215), 15, seed=32)
    kwargs = {"source_mask": mask, "target_mask": np.ones_like(mask), "mode": mode}
    plain = color_transfer(source, target, gain_range=(1 / 1.5, 1.25), **kwargs)
    anchored = color_transfer(
        source, target, gain_range=(1 / 1.5, 1.25), anchor_black=True, **kwargs
    )
    luma = np.array([0.114, 0.587, 0.299], np.float32)
    ramp_plain, ramp_anchored = plain[:, 44] @ luma, anchored[:, 44] @ luma
    assert ramp_plain[0] > 60.0  # black lifted to grey
    assert abs(ramp_anchored[0] - 0.5 * ramp_plain[0]) < 3.0, (ramp_anchored[0], ramp_plain[0])
    assert np.all(np.diff(ramp_anchored) > 0.0)  # no inversion, no plateau
    assert np.all(ramp_anchored <= ramp_plain + 1e-3)
    # At the skin's mean and above, the anchored map is the plain one.
    mean_luma = float((source[mask >= 0.5] @ luma).mean())
    at_mean = np.abs(source[:, 44] @ luma - mean_luma).argmin()
    np.testing.assert_allclose(ramp_anchored[at_mean], ramp_plain[at_mean], atol=1.5)
    lighter = source[:, 44] @ luma > 1.15 * mean_luma
    assert lighter.sum() > 5
    np.testing.assert_allclose(anchored[lighter, 44], plain[lighter, 44], atol=0.05)
    # The skin's mean still goes (about) to the target's.
    skin = anchored[mask >= 0.5] @ luma
    assert abs(float(skin.mean()) - float((target.reshape(-1, 3) @ luma).mean())) < 6.0


def test_anchor_black_keeps_strength_linear_and_eases_crushing() -> None:
    source = _face((32, 32), (45, 65, 95), 12, seed=33)
    target = _face((32, 32), (120, 140, 170), 12, seed=34)
    mask = np.ones((32, 32), np.float32)
    kwargs = {"source_mask": mask, "target_mask": mask, "mode": "lct", "anchor_black": True}
    zero = color_transfer(source, target, strength=0.0, **kwargs)
    half = color_transfer(source, target, strength=0.5, **kwargs)
    full = color_transfer(source, target, strength=1.0, **kwargs)
    np.testing.assert_array_equal(zero, source)
    np.testing.assert_allclose(half, (source + full) / 2, atol=1e-3)
    # A light source on a dark target: the offset is negative and pushes the source's
    # dark features below black. Anchored, less of it reaches them (the darkest still
    # end at black), and their order stays.
    light = _face((32, 32), (140, 150, 170), 10, seed=35)
    light[:, 28:] = np.linspace(20.0, 140.0, 32, dtype=np.float32)[:, None, None]
    mask[:, 28:] = 0.0
    dark = _face((32, 32), (60, 80, 110), 14, seed=36)
    kwargs = {"source_mask": mask, "target_mask": mask, "mode": "lct"}
    plain = color_transfer(light, dark, **kwargs)[:, 30].sum(-1)
    anchored = color_transfer(light, dark, anchor_black=True, **kwargs)[:, 30].sum(-1)
    assert plain[:16].max() < 1.0  # the darker half crushed to black
    assert np.all(anchored >= plain - 1e-3)
    assert np.all(np.diff(anchored[anchored > 0.5]) > 0.0)
    assert anchored[13:17].mean() > plain[13:17].mean() + 8.0


def test_anchor_black_darkening_keeps_dark_colours_as_an_exposure_change() -> None:
    """A source lighter and less warm than its target (p06 on p27): the map's offset
    darkens, and fading it below the skin's mean still pushed dark features under
    black unevenly: brown brows (30, 36, 52) BGR came out (8, 3, 6), a navy black.
    Now towards black the map gives way to a change of exposure (the skin's mean
    over the source's, per channel): the brows keep their hue and darken like the
    skin. From the mean up it is the plain map; a grey ramp stays in order."""
    source = _face((48, 48), (116, 146, 198), 12, seed=41)
    target = _face((48, 48), (89, 118, 160), 15, seed=42)
    mask = np.ones((48, 48), np.float32)
    mask[:, 36:] = 0.0
    source[:, 36:40] = (30.0, 36.0, 52.0)  # brows, outside the statistics
    source[:, 40:] = np.linspace(0.0, 220.0, 48, dtype=np.float32)[:, None, None]
    kwargs = {
        "source_mask": mask,
        "target_mask": np.ones_like(mask),
        "mode": "lct",
        "gain_range": (1 / 1.5, 1.25),
        "ridge": 0.1,
    }
    plain = color_transfer(source, target, **kwargs)
    anchored = color_transfer(source, target, anchor_black=True, **kwargs)
    brows = anchored[:, 36:40].reshape(-1, 3).mean(0)
    exposure = target.reshape(-1, 3).mean(0) / source[mask >= 0.5].mean(0)
    np.testing.assert_allclose(brows, exposure * (30.0, 36.0, 52.0), atol=4.0)
    assert brows[2] > brows[1] > brows[0]  # still brown: (8, 3, 6) before
    luma = np.array([0.114, 0.587, 0.299], np.float32)
    ramp = anchored[:, 44] @ luma
    assert np.all(np.diff(ramp) > 0.0)
    mean_luma = float((source[mask >= 0.5] @ luma).mean())
    lighter = source[:, 44] @ luma > mean_luma
    assert lighter.sum() > 5
    np.testing.assert_allclose(anchored[lighter, 44], plain[lighter, 44], atol=0.05)


def test_anchor_black_lightening_keeps_the_offsets_colour_off_dark_features() -> None:
    """An orange-lit source on a grey-beige target (p17 on p10, whose measured map
    this is): the map lightens and its offset is blue, and lifting the darks by half
    of it or more gave blue-grey rings round the eyes: a shadow (30, 45, 70) BGR came
    out (71, 67, 75), nearly grey. Now the darks take the colour of a change of
    exposure and are lifted along the target skin's colour: the shadow stays warm;
    black is lifted by half the offset's lightness, as before; from the mean up it
    is the plain map."""
    transform = np.array([[0.567, -0.059, 0.076], [-0.124, 0.628, 0.141], [-0.131, -0.001, 0.907]])
    mean_s, mean_t = np.array([84.5, 122.8, 170.0]), np.array([117.0, 131.1, 162.4])
    offset = mean_t - transform @ mean_s
    exposure = np.diag(mean_t / mean_s)
    luma = np.array([0.114, 0.587, 0.299])
    pixels = np.zeros((4, 1, 3), np.float32)
    pixels[:, 0] = [(30.0, 45.0, 70.0), (0.0, 0.0, 0.0), tuple(mean_s), tuple(1.3 * mean_s)]
    ratio = (pixels @ luma.astype(np.float32)) / np.float32(luma @ mean_s)
    out = color_module._anchored(pixels, transform, offset, ratio[..., 0], exposure, mean_s)
    plain = pixels @ transform.T.astype(np.float32) + offset.astype(np.float32)
    shadow, black, at_mean, lighter = out[:, 0]
    r = float(luma @ (30.0, 45.0, 70.0) / (luma @ mean_s))
    old = transform @ (30.0, 45.0, 70.0) + (1.0 - 0.5 * (1.0 - r) ** 2) * offset
    assert old[2] - old[0] < 7.0  # the premise: nearly grey before
    assert shadow[2] - shadow[0] > 12.0, shadow  # a warm shadow now
    assert abs(float(black @ luma) - 0.5 * float(offset @ luma)) < 1.0
    np.testing.assert_allclose(at_mean, mean_t, atol=0.05)
    np.testing.assert_allclose(lighter, plain[3, 0], atol=0.05)


@pytest.mark.parametrize("anchor_black", [False, True])
def test_lct_onto_a_darker_target_scales_colours_not_shifts_them(anchor_black: bool) -> None:
    """A bright, rosy source onto a dim target (Biden on p19, 3x darker): taken down by
    the map's offset alone, the skin's colour differences kept their size on a base a
    third as bright, and its redder cheeks came out purple blotches (the chromaticity's
    spread 2.3-3x the source's and the target's). The map first scales the source down
    to the target's luma, as a change of exposure: the spread stays the source's."""

    def field(seed: int, sigma: float) -> np.ndarray:
        noise = np.random.default_rng(seed).normal(size=(64, 64)).astype(np.float32)
        smooth = cv2.GaussianBlur(noise, (0, 0), sigma)
        return smooth / smooth.std()

    def skin(base: tuple[float, float, float], seed: int) -> np.ndarray:
        # Redder patches are darker in blue and green, and a little in red.
        tint = np.array([-1.0, -0.8, -0.1], np.float32)
        return np.asarray(base, np.float32) * (1.0 + 0.1 * field(seed, 3.0)[..., None] * tint)

    # Both lit unevenly: the skins' spreads, in grey levels, are of a size.
    source = skin((140.0, 155.0, 220.0), 7) * np.exp(0.15 * field(10, 6.0))[..., None]
    target = skin((47.0, 56.0, 72.0), 8) * np.exp(0.4 * field(9, 8.0))[..., None]
    mask = np.ones((64, 64), np.float32)

    def spread(image: np.ndarray) -> float:
        pixels = image.reshape(-1, 3).astype(np.float64)
        chroma = pixels / np.maximum(pixels.sum(1, keepdims=True), 1.0)
        return float(chroma.std(0).mean())

    out = color_transfer(
        source,
        target,
        source_mask=mask,
        target_mask=mask,
        mode="lct",
        gain_range=(1 / 1.5, 1.25),
        ridge=0.1,
        anchor_black=anchor_black,
    )
    assert spread(out) < 1.3 * max(spread(source), spread(target)), (
        spread(out),
        spread(source),
        spread(target),
    )
    # The skin's median still goes to the target's.
    np.testing.assert_allclose(
        np.median(out.reshape(-1, 3), 0), np.median(target.reshape(-1, 3), 0), atol=3.0
    )
