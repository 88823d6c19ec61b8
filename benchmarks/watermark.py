"""Watermark robustness, false positives, invisibility and speed.

For every image of the face set (package images, the same downscaled to a 128 px
short side, plus the still images of ``../shared/data/faces`` when present; read only),
marks it with a job id and checks that :func:`faceweave.provenance.detect_watermark`
recovers exactly that id after: JPEG quality 75, a 0.5x resize (INTER_AREA and
INTER_LINEAR), both together (in both orders), WebP quality 80, and a PNG round trip.
Rates are given over all images and by short side (< 256, 256-399: coarse mark; >= 400:
fine mark). Also: detections on the unmarked originals (and their JPEG / half-size
versions, and random-noise images from 48 px to 1000 px), which must be zero, the PSNR
of the mark by size, its RMS on the pictures' flat pixels (where a faint pattern
shows), and embed / detect times at 1080p and at 128 px.

Prints markdown tables; writes ``out/bench/watermark.json`` (nothing else, nothing
outside ``out/``).

Usage:
    python benchmarks/watermark.py [--faces DIR | --no-shared] [--strength 2.2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_OUT_DIR,
    SHARED_FACES_DIR,
    checked_out_dir,
    environment,
    environment_line,
    markdown_table,
    read_frame,
    write_json,
)

from faceweave.provenance.watermark import (  # noqa: E402
    COARSE_BELOW,
    COARSE_GRID,
    DEFAULT_STRENGTH,
    GRID,
    MIN_CONFIDENCE,
    MIN_CONFIDENCE_COARSE,
    detect_watermark,
    embed_watermark,
    watermark_id,
)

Image = NDArray[np.uint8]
Attack = Callable[[Image], Image]
JOB_ID = "bench-2f1c9a1e-5d0b-4c43-9f57-4f3a0b6e2d11"  # long: exercises the hashed id


def _encode(image: Image, extension: str, params: list[int]) -> Image:
    ok, buffer = cv2.imencode(extension, image, params)
    assert ok
    decoded = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
    assert decoded is not None
    return decoded


def jpeg(image: Image, quality: int = 75) -> Image:
    return _encode(image, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, quality])


def half(image: Image, interpolation: int = cv2.INTER_AREA) -> Image:
    height, width = image.shape[:2]
    size = (max(1, round(width * 0.5)), max(1, round(height * 0.5)))
    return cv2.resize(image, size, interpolation=interpolation)


ATTACKS: dict[str, Attack] = {
    "none": lambda f: f,
    "png": lambda f: _encode(f, ".png", []),
    "jpeg75": jpeg,
    "half_area": half,
    "half_linear": lambda f: half(f, cv2.INTER_LINEAR),
    "half+jpeg75": lambda f: jpeg(half(f)),
    "jpeg75+half_linear": lambda f: half(jpeg(f), cv2.INTER_LINEAR),
    "webp80": lambda f: _encode(f, ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80]),
}
HEADLINE = ("jpeg75", "half_area", "half+jpeg75")
SMALL_SIDE = 128  # package images are also run at this short side (64 px after a half resize)
FLAT_STD = 1.5  # grey levels: "flat" pixels for the mark's visibility (see flat_rms)
SIZE_BANDS = (
    ("short side < 256", 0, 256),
    (f"256 <= short side < {COARSE_BELOW}", 256, COARSE_BELOW),
    (f"short side >= {COARSE_BELOW}", COARSE_BELOW, 1 << 30),
)


def package_images() -> list[tuple[str, Image]]:
    """skimage astronaut, coffee, chelsea, camera and matplotlib's grace_hopper (if installed)."""
    images: list[tuple[str, Image]] = []
    try:
        from skimage import data as skdata

        for name in ("astronaut", "coffee", "chelsea", "camera"):
            rgb = getattr(skdata, name)()
            code = cv2.COLOR_GRAY2BGR if rgb.ndim == 2 else cv2.COLOR_RGB2BGR
            images.append((name, cv2.cvtColor(rgb, code)))
    except ImportError:
        pass
    try:
        from matplotlib import cbook

        path = Path(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
        images.append(("grace_hopper", read_frame(path)))
    except (ImportError, OSError, ValueError):
        pass
    return images


def downscaled(images: list[tuple[str, Image]], side: int) -> list[tuple[str, Image]]:
    """Each image with its short side brought down to ``side`` px (INTER_AREA)."""
    out = []
    for name, image in images:
        height, width = image.shape[:2]
        scale = side / min(height, width)
        size = (max(side, round(width * scale)), max(side, round(height * scale)))
        out.append((f"{name}@{side}", cv2.resize(image, size, interpolation=cv2.INTER_AREA)))
    return out


def folder_images(folder: Path) -> list[tuple[str, Image]]:
    if not folder.is_dir():
        return []
    paths = sorted(
        p for p in folder.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp")
    )
    return [(p.stem.removeprefix("img_"), read_frame(p)) for p in paths]


def noise_images(count: int) -> list[tuple[str, Image]]:
    """Uniform and smoothed noise, 240 x 320 upwards, plus as many from 48 px upwards."""
    rng = np.random.default_rng(7)
    images = []
    for i in range(count):
        for height, width in ((240 + 97 * i, 320 + 61 * i), (48 + 23 * i, 64 + 41 * i)):
            noise = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            if i % 2:  # smooth noise looks more like a picture to the detector
                noise = cv2.GaussianBlur(noise, (0, 0), 1.5 + i)
            images.append((f"noise{i}_{width}x{height}", noise))
    return images


def psnr(a: Image, b: Image) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def flat_rms(image: Image, marked: Image) -> float:
    """The mark's luma RMS (grey levels) on the picture's flat pixels, where its luma's
    standard deviation over 7 x 7 pixels is under FLAT_STD (where a faint pattern
    shows); nan when there are none."""
    luma = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    mean = cv2.blur(luma, (7, 7))
    spread = np.sqrt(np.maximum(cv2.blur(luma * luma, (7, 7)) - mean * mean, 0.0))
    flat = spread < FLAT_STD
    if not flat.any():
        return float("nan")
    delta = cv2.cvtColor(marked, cv2.COLOR_BGR2GRAY).astype(np.float32) - luma
    return float(np.sqrt(np.mean(delta[flat] ** 2)))


def timings(image: Image, size: tuple[int, int], repeats: int) -> dict[str, float]:
    """Median embed / detect ms for ``image`` resized to ``size`` (width, height)."""
    shrink = size[0] * size[1] < image.shape[0] * image.shape[1]
    frame = cv2.resize(image, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    embed_watermark(frame, JOB_ID)  # warm-up: layouts and trellis are built once
    embed_ms, detect_ms = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        marked = embed_watermark(frame, JOB_ID)
        middle = time.perf_counter()
        detect_watermark(marked)
        end = time.perf_counter()
        embed_ms.append((middle - start) * 1e3)
        detect_ms.append((end - middle) * 1e3)
    return {"embed_ms": float(np.median(embed_ms)), "detect_ms": float(np.median(detect_ms))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=SHARED_FACES_DIR)
    parser.add_argument("--no-shared", action="store_true", help="package images only")
    parser.add_argument("--strength", type=float, default=DEFAULT_STRENGTH)
    parser.add_argument("--repeats", type=int, default=20, help="timing repeats (1080p, 128 px)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args(argv)
    out_dir = checked_out_dir(args.out)

    package = package_images()
    images = package + downscaled(package, SMALL_SIDE)
    images += [] if args.no_shared else folder_images(args.faces)
    expected = watermark_id(JOB_ID)
    rows: list[dict[str, Any]] = []
    for name, image in images:
        marked = embed_watermark(image, JOB_ID, strength=args.strength)
        row: dict[str, Any] = {
            "image": name,
            "size": f"{image.shape[1]}x{image.shape[0]}",
            "short_side": min(image.shape[:2]),
            "psnr": psnr(image, marked),
            "flat_rms": flat_rms(image, marked),
            "carrier": COARSE_GRID if min(image.shape[:2]) < COARSE_BELOW else GRID,
        }
        for attack, fn in ATTACKS.items():
            result = detect_watermark(fn(marked))
            row[attack] = result.found and result.payload == expected
            row[f"{attack}_confidence"] = result.confidence
            row[f"{attack}_grid"] = result.grid
        rows.append(row)

    false_positives: list[dict[str, Any]] = []
    null_confidence: list[float] = []
    for name, image in images + noise_images(8):
        for attack in ("none", "jpeg75", "half_area"):
            result = detect_watermark(ATTACKS[attack](image))
            null_confidence.append(result.confidence)
            if result.found:
                false_positives.append({"image": name, "attack": attack, "payload": result.payload})
    null_checks = len(null_confidence)

    def rate(subset: list[dict[str, Any]], attack: str) -> str:
        hits = sum(bool(r[attack]) for r in subset)
        return f"{hits}/{len(subset)} ({100.0 * hits / max(1, len(subset)):.1f}%)"

    bands = [
        (label, [r for r in rows if low <= r["short_side"] < high])
        for label, low, high in SIZE_BANDS
    ]
    env = environment()
    timing = timings(images[0][1], (1920, 1080), args.repeats) if images else {}
    timing_small = timings(images[0][1], (SMALL_SIDE, SMALL_SIDE), args.repeats) if images else {}
    print(environment_line(env))
    print(
        f"\nstrength {args.strength}, job id {JOB_ID!r} -> {expected!r}; "
        f"coarse mark (grid {COARSE_GRID}) below {COARSE_BELOW} px, fine (grid {GRID}) above\n"
    )
    table = [
        [attack, rate(rows, attack)] + [rate(b, attack) for _, b in bands] for attack in ATTACKS
    ]
    headers = [f"all images (n={len(rows)})"] + [f"{label} (n={len(b)})" for label, b in bands]
    print(markdown_table(["attack", *headers], table))

    def band_psnr(subset: list[dict[str, Any]]) -> str:
        if not subset:
            return "-"
        values = np.array([r["psnr"] for r in subset])
        return f"{values.min():.2f} / {np.median(values):.2f}"

    print()
    print(
        markdown_table(
            ["PSNR dB min / median", "all", *(label for label, _ in bands)],
            [["", band_psnr(rows), *(band_psnr(b) for _, b in bands)]],
        )
    )

    def band_flat(subset: list[dict[str, Any]]) -> str:
        values = np.array([r["flat_rms"] for r in subset], np.float64)
        values = values[np.isfinite(values)]
        if not values.size:
            return "-"
        return f"{np.median(values):.2f} / {values.max():.2f}"

    print()
    print(
        markdown_table(
            [
                f"mark on flat pixels (7 x 7 std < {FLAT_STD}), RMS grey levels, median / max",
                "all",
                *(label for label, _ in bands),
            ],
            [["", band_flat(rows), *(band_flat(b) for _, b in bands)]],
        )
    )

    def confidences(grid: int) -> list[float]:
        return [
            r[f"{a}_confidence"] for r in rows for a in ATTACKS if r[a] and r[f"{a}_grid"] == grid
        ]

    def min_confidence(grid: int) -> float:
        return min(confidences(grid), default=float("nan"))

    print()
    summary = [
        [
            "false positives (unmarked, incl. JPEG/half, noise)",
            f"{len(false_positives)}/{null_checks}",
        ],
        [
            f"confidence, found fine marks: min (floor {MIN_CONFIDENCE})",
            f"{min_confidence(GRID):.3f}",
        ],
        [
            "confidence, found fine marks: 5th percentile",
            f"{np.percentile(confidences(GRID), 5) if confidences(GRID) else float('nan'):.3f}",
        ],
        [
            f"confidence, found coarse marks: min (floor {MIN_CONFIDENCE_COARSE})",
            f"{min_confidence(COARSE_GRID):.3f}",
        ],
        [
            "confidence, unmarked: max (either carrier)",
            f"{max(null_confidence, default=float('nan')):.3f}",
        ],
        ["embed ms @1080p (median)", f"{timing.get('embed_ms', float('nan')):.1f}"],
        ["detect ms @1080p (median)", f"{timing.get('detect_ms', float('nan')):.1f}"],
        [f"embed ms @{SMALL_SIDE}px (median)", f"{timing_small.get('embed_ms', float('nan')):.1f}"],
        [
            f"detect ms @{SMALL_SIDE}px (median)",
            f"{timing_small.get('detect_ms', float('nan')):.1f}",
        ],
    ]
    print(markdown_table(["measure", "value"], summary))
    misses = [
        f"{r['image']} ({r['size']}): " + ", ".join(a for a in ATTACKS if not r[a])
        for r in rows
        if not all(r[a] for a in ATTACKS)
    ]
    if misses:
        print("\nmissed:\n" + "\n".join(f"- {m}" for m in misses))
    write_json(
        out_dir / "watermark.json",
        {
            "environment": env,
            "strength": args.strength,
            "rows": rows,
            "false_positives": false_positives,
            "null_checks": null_checks,
            "null_confidence_max": max(null_confidence, default=None),
            "timing_1080p": timing,
            f"timing_{SMALL_SIDE}px": timing_small,
        },
    )
    headline_ok = all(sum(bool(r[a]) for r in rows) >= 0.95 * len(rows) for a in HEADLINE)
    return 0 if headline_ok and not false_positives else 1


if __name__ == "__main__":
    raise SystemExit(main())
