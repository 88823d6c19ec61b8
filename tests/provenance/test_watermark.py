"""Watermark: round trip, robustness (JPEG q75, half resize, both), no false positives, PSNR.

Frames from 400 px (short side) carry the fine spread-spectrum mark, smaller ones the
coarse quantisation mark; both kinds are exercised, down to 128 px frames.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faceweave.errors import InputError
from faceweave.provenance.watermark import (
    COARSE_BELOW,
    COARSE_GRID,
    CODED_BITS,
    DEFAULT_STRENGTH,
    GRID,
    MASK_RMS_MOST,
    MIN_CONFIDENCE_COARSE,
    STATEMENT,
    WatermarkResult,
    _decide,
    _encode_message,
    _message_bytes,
    _parse_message,
    _viterbi,
    detect_watermark,
    detect_watermark_frames,
    embed_watermark,
    watermark_id,
)

SHARED_FACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "faces"
JOB = "job-42"
LONG_JOB = "2f1c9a1e-5d0b-4c43-9f57-4f3a0b6e2d11"


def _package_images() -> dict[str, np.ndarray]:
    from matplotlib import cbook
    from skimage import data

    images = {}
    for name in ("astronaut", "coffee", "chelsea", "camera"):
        rgb = getattr(data, name)()
        code = cv2.COLOR_GRAY2BGR if rgb.ndim == 2 else cv2.COLOR_RGB2BGR
        images[name] = np.ascontiguousarray(cv2.cvtColor(rgb, code))
    with cbook.get_sample_data("grace_hopper.jpg") as handle:
        buffer = np.frombuffer(handle.read(), np.uint8)
    images["grace_hopper"] = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
    return images


PACKAGE_IMAGES = _package_images()


def _synthetic(height: int, width: int, seed: int) -> np.ndarray:
    """Smooth gradients plus texture: a picture-like test frame."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack(
        [128 + 60 * np.sin(x / (20 + 10 * c) + c) * np.cos(y / 37) for c in range(3)], axis=2
    )
    texture = cv2.GaussianBlur(rng.normal(0, 25, (height, width, 3)).astype(np.float32), (0, 0), 2)
    return np.clip(base + texture, 0, 255).astype(np.uint8)


def _jpeg(frame: np.ndarray, quality: int = 75) -> np.ndarray:
    ok, buffer = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return cv2.imdecode(buffer, cv2.IMREAD_COLOR)


def _reencode(frame: np.ndarray, extension: str) -> np.ndarray:
    ok, buffer = cv2.imencode(extension, frame, [cv2.IMWRITE_WEBP_QUALITY, 80])
    assert ok
    return cv2.imdecode(buffer, cv2.IMREAD_COLOR)


def _half(frame: np.ndarray, interpolation: int = cv2.INTER_AREA) -> np.ndarray:
    height, width = frame.shape[:2]
    return cv2.resize(frame, (round(width / 2), round(height / 2)), interpolation=interpolation)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10.0 * np.log10(255.0**2 / mse)


ATTACKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": lambda f: f,
    "jpeg75": _jpeg,
    "half_area": _half,
    "half_linear": lambda f: _half(f, cv2.INTER_LINEAR),
    "half_then_jpeg75": lambda f: _jpeg(_half(f)),
    "jpeg75_then_half_linear": lambda f: _half(_jpeg(f), cv2.INTER_LINEAR),
    "png": lambda f: _reencode(f, ".png"),
    "webp80": lambda f: _reencode(f, ".webp"),
}


@pytest.fixture(scope="module")
def marked_package() -> dict[str, np.ndarray]:
    return {name: embed_watermark(image, JOB) for name, image in PACKAGE_IMAGES.items()}


# --- message layer -----------------------------------------------------------------------------


def test_watermark_id_short_and_hashed() -> None:
    assert watermark_id("job-42") == "job-42"
    assert watermark_id(b"12345678") == "12345678"
    hashed = watermark_id(LONG_JOB)
    assert hashed.startswith("#") and len(hashed) == 17
    assert watermark_id(LONG_JOB.encode()) == hashed
    assert watermark_id(b"\xff\xfe") != "\xff\xfe"  # not UTF-8: hashed
    with pytest.raises(InputError):
        watermark_id("")


@settings(max_examples=60, deadline=None)
@given(payload=st.one_of(st.text(min_size=1, max_size=40), st.binary(min_size=1, max_size=40)))
def test_message_round_trip_random_payloads(payload: str | bytes) -> None:
    message = _message_bytes(payload)
    codeword = _encode_message(message)
    assert codeword.shape == (CODED_BITS,)
    soft = 1.0 - 2.0 * codeword.astype(np.float64)
    assert _viterbi(soft) == message
    assert _parse_message(message) == watermark_id(payload)


def test_code_corrects_errors() -> None:
    message = _message_bytes(JOB)
    soft = 1.0 - 2.0 * _encode_message(message).astype(np.float64)
    rng = np.random.default_rng(0)
    flips = rng.choice(CODED_BITS, CODED_BITS // 10, replace=False)
    soft[flips] *= -1.0
    soft += rng.normal(0.0, 0.3, soft.shape)
    result = _decide(soft)
    assert result.found and result.payload == JOB
    assert result.bit_errors >= len(flips) - 5


def test_corrupted_message_fails_crc() -> None:
    message = bytearray(_message_bytes(JOB))
    message[5] ^= 0x01
    assert _parse_message(bytes(message)) is None


# --- embedding ---------------------------------------------------------------------------------


def test_embed_returns_new_frame_same_shape(astronaut: np.ndarray) -> None:
    marked = embed_watermark(astronaut, JOB)
    assert marked.shape == astronaut.shape and marked.dtype == np.uint8
    assert marked is not astronaut
    assert not np.array_equal(marked, astronaut)


def test_embed_is_deterministic(astronaut: np.ndarray) -> None:
    assert np.array_equal(embed_watermark(astronaut, JOB), embed_watermark(astronaut, JOB))


@pytest.mark.parametrize("name", sorted(PACKAGE_IMAGES))
def test_invisible_psnr_at_least_40db(name: str, marked_package: dict[str, np.ndarray]) -> None:
    assert _psnr(PACKAGE_IMAGES[name], marked_package[name]) >= 40.0


def test_luma_only_change(astronaut: np.ndarray) -> None:
    marked = embed_watermark(astronaut, JOB).astype(np.int16)
    delta = marked - astronaut.astype(np.int16)
    # (The mark reaches 5 grey levels in texture: pixels that far from black and white.)
    unclipped = (astronaut > 8).all(axis=2) & (astronaut < 247).all(axis=2)
    assert int(np.abs(delta).max()) <= 8
    assert np.array_equal(delta[unclipped, 0], delta[unclipped, 1])
    assert np.array_equal(delta[unclipped, 1], delta[unclipped, 2])


def _half_flat_half_textured(seed: int = 3) -> np.ndarray:
    """720p: a smooth gradient on the left, the same under grain (std 12) on the right."""
    rng = np.random.default_rng(seed)
    height, width = 720, 1280
    ramp = np.linspace(70.0, 190.0, width)[None, :, None] * np.ones((height, 1, 3))
    grain = rng.normal(0.0, 12.0, (height, width // 2, 3)).mean(axis=2, keepdims=True)
    ramp[:, width // 2 :] += grain
    return np.clip(ramp, 0, 255).astype(np.uint8)


def test_fine_mark_hides_in_texture() -> None:
    # Texture masking: fainter where the picture is flat (where a grey level shows),
    # stronger in grain; still found after JPEG q75 and a half resize.
    frame = _half_flat_half_textured()
    marked = embed_watermark(frame, JOB)
    delta = marked.astype(np.float64) - frame
    width = frame.shape[1]
    flat = float(np.sqrt(np.mean(delta[:, 16 : width // 2 - 16] ** 2)))
    textured = float(np.sqrt(np.mean(delta[:, width // 2 + 16 : -16] ** 2)))
    assert flat < 0.5 * DEFAULT_STRENGTH
    assert textured > DEFAULT_STRENGTH
    assert detect_watermark(_jpeg(_half(marked))).payload == JOB


def test_fine_mark_rms_bounded_on_texture() -> None:
    # All grain: the frame's RMS is held to MASK_RMS_MOST times the strength.
    rng = np.random.default_rng(5)
    frame = np.clip(rng.normal(128.0, 20.0, (480, 640, 1)), 0, 255).astype(np.uint8)
    frame = np.repeat(frame, 3, axis=2)
    delta = embed_watermark(frame, JOB).astype(np.float64) - frame
    rms = float(np.sqrt(np.mean(delta**2)))
    assert DEFAULT_STRENGTH <= rms <= 1.05 * MASK_RMS_MOST * DEFAULT_STRENGTH


@pytest.mark.parametrize("bad", [np.zeros((64, 64), np.uint8), np.zeros((64, 64, 3), np.float32)])
def test_embed_rejects_bad_frames(bad: np.ndarray) -> None:
    with pytest.raises(InputError):
        embed_watermark(bad, JOB)


def test_embed_rejects_bad_strength_and_payload(astronaut: np.ndarray) -> None:
    for strength in (0.0, float("inf"), float("nan"), "2", True):
        with pytest.raises(InputError, match="strength"):
            embed_watermark(astronaut, JOB, strength=strength)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        embed_watermark(astronaut, "")
    # A number is no job id: bytes(7) is seven NUL bytes, whose mark read as a hash.
    for payload in (7, 0, None, 1.5):
        with pytest.raises(InputError, match="str or bytes"):
            embed_watermark(astronaut, payload)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="str or bytes"):
            watermark_id(payload)  # type: ignore[arg-type]


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("name", sorted(PACKAGE_IMAGES))
def test_survives_attacks_on_package_images(
    name: str, attack: str, marked_package: dict[str, np.ndarray]
) -> None:
    result = detect_watermark(ATTACKS[attack](marked_package[name]))
    assert result.found, result
    assert result.payload == JOB
    assert result.statement == STATEMENT


@pytest.mark.parametrize(
    ("height", "width"), [(256, 256), (480, 640), (720, 1280), (1080, 1920), (300, 1200)]
)
def test_survives_jpeg_and_half_on_synthetic_sizes(height: int, width: int) -> None:
    frame = _synthetic(height, width, seed=height + width)
    marked = embed_watermark(frame, LONG_JOB)
    assert _psnr(frame, marked) >= 40.0
    for attack in ("jpeg75", "half_area", "half_then_jpeg75"):
        result = detect_watermark(ATTACKS[attack](marked))
        assert result.found and result.payload == watermark_id(LONG_JOB), (attack, result)


def test_survives_4k() -> None:
    frame = cv2.resize(PACKAGE_IMAGES["coffee"], (3840, 2160), interpolation=cv2.INTER_CUBIC)
    result = detect_watermark(_jpeg(_half(embed_watermark(frame, JOB))))
    assert result.found and result.payload == JOB


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(payload=st.text(min_size=1, max_size=24))
def test_random_payloads_survive_jpeg_and_half(payload: str, astronaut: np.ndarray) -> None:
    result = detect_watermark(_jpeg(_half(embed_watermark(astronaut, payload))))
    assert result.found and result.payload == watermark_id(payload)


@pytest.mark.parametrize("payload", ["\U00063c18\U0010b722ç", "e90449a3a36ab1f4854bd338"])
def test_a_best_path_a_few_bits_off_is_mended_by_its_crc(
    payload: str, astronaut: np.ndarray
) -> None:
    """JPEG 75 and a half resize left these ids' marks (about 1 in 150 on the
    astronaut) a decoded path 2 to 4 message bits off the true one, which scored a
    little higher and failed its CRC: the mark was lost. The CRC-valid message a short
    burst off it is taken (and still held to the confidence floor)."""
    result = detect_watermark(_jpeg(_half(embed_watermark(astronaut, payload))))
    assert result.found and result.payload == watermark_id(payload)


def test_the_search_near_a_path_finds_nothing_in_noise() -> None:
    """Unmarked soft bits: no burst off their best path passes the CRC (a false
    mark)."""
    from faceweave.provenance.watermark import _near_valid_message

    rng = np.random.default_rng(7)
    for _ in range(200):
        soft = rng.normal(size=CODED_BITS)
        assert _near_valid_message(soft, _viterbi(soft)) is None


def _unmarked_images() -> list[tuple[str, np.ndarray]]:
    images = list(PACKAGE_IMAGES.items())
    rng = np.random.default_rng(3)
    for i in range(4):
        noise = rng.integers(0, 256, (200 + 90 * i, 260 + 70 * i, 3), dtype=np.uint8)
        images.append((f"noise{i}", noise))
        images.append((f"smooth_noise{i}", cv2.GaussianBlur(noise, (0, 0), 2.0 + i)))
    images.append(("flat", np.full((300, 300, 3), 128, np.uint8)))
    images.append(("synthetic", _synthetic(480, 640, seed=1)))
    return images


@pytest.mark.parametrize(("name", "image"), _unmarked_images(), ids=lambda v: str(v)[:16])
def test_no_false_positive_on_unmarked(name: str, image: np.ndarray) -> None:
    for attack in ("none", "jpeg75", "half_area"):
        result = detect_watermark(ATTACKS[attack](image))
        assert not result.found, (name, attack, result)
        assert result.payload is None and result.statement is None


def _shared_faces() -> list[Path]:
    if not SHARED_FACES.is_dir():
        return []
    return sorted(p for p in SHARED_FACES.iterdir() if p.suffix.lower() in (".jpg", ".png"))


@pytest.mark.skipif(not _shared_faces(), reason="../shared/data/faces not present")
def test_no_false_positive_on_development_set() -> None:
    from faceweave.io.image import read_image

    for path in _shared_faces():
        result = detect_watermark(read_image(path))
        assert not result.found, (path.name, result)


@pytest.mark.skipif(not _shared_faces(), reason="../shared/data/faces not present")
def test_development_set_rate_at_least_95_percent() -> None:
    from faceweave.io.image import read_image

    sizes = {p: min(read_image(p).shape[:2]) for p in _shared_faces()}
    paths = [p for p, side in sizes.items() if side < 256]  # the 128 px ones: all
    paths += [p for p, side in sizes.items() if side >= 256][::3]
    hits = 0
    for path in paths:
        marked = embed_watermark(read_image(path), JOB)
        result = detect_watermark(_jpeg(_half(marked)))
        hits += result.found and result.payload == JOB
    assert hits >= 0.95 * len(paths)


def test_detect_rejects_bad_frames() -> None:
    with pytest.raises(InputError):
        detect_watermark(np.zeros((64, 64), np.uint8))


def test_video_frames_soft_combining(astronaut: np.ndarray) -> None:
    marked = embed_watermark(astronaut, JOB)
    rng = np.random.default_rng(5)
    # Heavy noise: single frames are unreliable, the combination is not.
    frames = [
        np.clip(marked + rng.normal(0, 12, marked.shape), 0, 255).astype(np.uint8) for _ in range(6)
    ]
    frames = [_jpeg(_half(f), 60) for f in frames]
    result = detect_watermark_frames(frames)
    assert isinstance(result, WatermarkResult)
    assert result.found and result.payload == JOB
    assert result.frames == 6 and 0 <= result.frames_found <= 6
    unmarked = detect_watermark_frames([astronaut, _jpeg(astronaut)])
    assert not unmarked.found and unmarked.frames == 2
    with pytest.raises(InputError):
        detect_watermark_frames([])


# --- small frames: the coarse carrier ----------------------------------------------------------


def _short_side(frame: np.ndarray, side: int) -> np.ndarray:
    height, width = frame.shape[:2]
    scale = side / min(height, width)
    size = (max(side, round(width * scale)), max(side, round(height * scale)))
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


SMALL_IMAGES = {
    **{f"{name}128": _short_side(image, 128) for name, image in PACKAGE_IMAGES.items()},
    "synthetic128": _synthetic(128, 128, seed=128),
}


@pytest.fixture(scope="module")
def marked_small() -> dict[str, np.ndarray]:
    return {name: embed_watermark(image, LONG_JOB) for name, image in SMALL_IMAGES.items()}


@pytest.mark.parametrize("attack", ["none", "jpeg75", "half_area", "half_then_jpeg75"])
@pytest.mark.parametrize("name", sorted(SMALL_IMAGES))
def test_128px_frames_survive_jpeg_and_half(
    name: str, attack: str, marked_small: dict[str, np.ndarray]
) -> None:
    """128 px frames: 64 px after the half resize, then JPEG q75: the mark is still read."""
    attacked = ATTACKS[attack](marked_small[name])
    result = detect_watermark(attacked)
    assert result.found and result.payload == watermark_id(LONG_JOB), (attacked.shape, result)
    assert result.grid == COARSE_GRID
    assert result.confidence >= MIN_CONFIDENCE_COARSE


@pytest.mark.parametrize("name", sorted(SMALL_IMAGES))
def test_128px_frames_psnr(name: str, marked_small: dict[str, np.ndarray]) -> None:
    # The coarse mark is a little stronger than the fine one's ~41.5 dB: ~39.5 dB here.
    assert _psnr(SMALL_IMAGES[name], marked_small[name]) >= 38.0


@pytest.mark.parametrize(
    ("height", "width"),
    [(128, 128), (144, 200), (200, 136), (256, 256), (300, 451), (399, 600), (400, 600)],
)
def test_carrier_follows_frame_size(height: int, width: int) -> None:
    frame = _synthetic(height, width, seed=height * width)
    marked = embed_watermark(frame, JOB)
    expected_grid = COARSE_GRID if min(height, width) < COARSE_BELOW else GRID
    assert _psnr(frame, marked) >= (38.0 if min(height, width) < 160 else 40.0)
    for attack in ("none", "half_then_jpeg75", "jpeg75_then_half_linear"):
        result = detect_watermark(ATTACKS[attack](marked))
        assert result.found and result.payload == JOB, (attack, result)
        assert result.grid == expected_grid, (attack, result)


def test_coarse_mark_found_after_upscaling() -> None:
    """The grid is normalised: a small marked frame blown up to 1080p still reads."""
    marked = embed_watermark(SMALL_IMAGES["coffee128"], JOB)
    result = detect_watermark(
        _jpeg(cv2.resize(marked, (1920, 1080), interpolation=cv2.INTER_CUBIC))
    )
    assert result.found and result.payload == JOB and result.grid == COARSE_GRID


def test_coarse_mark_survives_brightness_shift() -> None:
    marked = embed_watermark(SMALL_IMAGES["chelsea128"], JOB)
    brighter = cv2.add(marked, np.full_like(marked, 6))
    result = detect_watermark(_jpeg(_half(brighter)))
    assert result.found and result.payload == JOB


def test_coarse_mark_strength() -> None:
    frame = SMALL_IMAGES["grace_hopper128"]
    default = embed_watermark(frame, JOB)
    stronger = embed_watermark(frame, JOB, strength=2.8)
    assert _psnr(frame, stronger) < _psnr(frame, default)
    result = detect_watermark(_jpeg(_half(stronger)))
    assert result.found and result.payload == JOB


def test_coarse_mark_luma_only() -> None:
    frame = SMALL_IMAGES["astronaut128"]
    delta = embed_watermark(frame, JOB).astype(np.int16) - frame.astype(np.int16)
    unclipped = (frame > 12).all(axis=2) & (frame < 243).all(axis=2)
    assert np.array_equal(delta[unclipped, 0], delta[unclipped, 1])
    assert np.array_equal(delta[unclipped, 1], delta[unclipped, 2])


def _unmarked_small_images() -> list[tuple[str, np.ndarray]]:
    images = [(name, image) for name, image in SMALL_IMAGES.items()]
    images += [(f"{name}200", _short_side(image, 200)) for name, image in PACKAGE_IMAGES.items()]
    rng = np.random.default_rng(17)
    for i, (height, width) in enumerate([(128, 128), (64, 64), (96, 150), (200, 133), (33, 40)]):
        noise = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        images.append((f"noise{height}x{width}", noise))
        images.append((f"smooth{height}x{width}", cv2.GaussianBlur(noise, (0, 0), 1.0 + i)))
    for value in (0, 128, 255):
        images.append((f"flat{value}", np.full((128, 128, 3), value, np.uint8)))
    return images


@pytest.mark.parametrize(("name", "image"), _unmarked_small_images(), ids=lambda v: str(v)[:16])
def test_no_false_positive_on_unmarked_small(name: str, image: np.ndarray) -> None:
    for attack in ("none", "jpeg75", "half_area", "half_then_jpeg75"):
        attacked = ATTACKS[attack](image)
        if min(attacked.shape[:2]) < 8:
            continue
        result = detect_watermark(attacked)
        assert not result.found and result.payload is None, (name, attack, result)


def test_random_coarse_soft_bits_fail_the_checks() -> None:
    """Unmarked, the coarse soft bits are cosines of uniform phases: no decode passes."""
    rng = np.random.default_rng(23)
    for _ in range(40):
        soft = np.cos(2.0 * np.pi * rng.random(CODED_BITS))
        result = _decide(soft, grid=COARSE_GRID)
        assert not result.found and result.grid == COARSE_GRID
        assert 0.5 < result.confidence < 0.66


def test_video_frames_soft_combining_small() -> None:
    frame = SMALL_IMAGES["camera128"]
    rng = np.random.default_rng(9)
    frames = []
    for i in range(4):
        moved = np.roll(frame, 2 * i, axis=0)  # content changes, the mark does not move
        noisy = embed_watermark(moved, JOB) + rng.normal(0, 3, frame.shape)
        frames.append(_jpeg(_half(np.clip(noisy, 0, 255).astype(np.uint8))))
    result = detect_watermark_frames(frames)
    assert result.found and result.payload == JOB
    assert result.grid == COARSE_GRID and result.frames == 4
    assert not detect_watermark_frames([frame, _jpeg(frame)]).found
