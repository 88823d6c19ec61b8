"""Turned photos: faces found and fitted in images turned by quarter turns.

Every single-face image of the face set (the package images, plus
``../shared/data/faces`` when present) is turned by 90, 180 and 270 degrees, as a
phone photo without its orientation tag would be. For each turn it reports how
many faces the analyser finds, how far their meshes lie from the upright mesh
turned the same way (mean over the 478 points, in inter-ocular distances), and the
analysis time, upright and turned, in image mode (``FaceAnalyser()`` defaults).

    python benchmarks/turned.py
"""

from __future__ import annotations

import sys
import time
from typing import Any

import cv2
import numpy as np
from common import (
    face_set_args,
    face_set_start,
    markdown_table,
    stats_ms,
    write_json,
)
from numpy.typing import NDArray

import faceweave as fw

# cv2.rotate code turning a photo clockwise by the key.
TURNS = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
# A mesh this far from the upright one turned (inter-ocular distances) counts as wrong.
WRONG = 0.1


def turned_points(points: NDArray[np.floating], angle: int, shape: tuple[int, ...]) -> NDArray:
    """Where pixel positions of an upright photo land once it is turned clockwise."""
    h, w = shape[:2]
    x, y = points[:, 0], points[:, 1]
    if angle == 90:
        return np.stack([h - y, x], axis=1)
    if angle == 180:
        return np.stack([w - x, h - y], axis=1)
    return np.stack([y, w - x], axis=1)


def main(argv: list[str] | None = None) -> int:
    args = face_set_args(__doc__, argv)
    out_dir, env, images = face_set_start(args)
    analyser = fw.FaceAnalyser(with_embedding=False)
    rows: list[dict[str, Any]] = []
    times: dict[int, list[float]] = {0: [], **{angle: [] for angle in TURNS}}
    for image in images:
        start = time.perf_counter()
        upright = analyser.get_faces(image.frame)
        times[0].append((time.perf_counter() - start) * 1e3)
        if len(upright) != 1:
            continue  # the reference needs exactly one face
        face = upright[0]
        eyes = float(np.linalg.norm(face.landmarks_478[33, :2] - face.landmarks_478[263, :2]))
        row: dict[str, Any] = {"image": image.name}
        for angle, code in TURNS.items():
            frame = cv2.rotate(image.frame, code)
            start = time.perf_counter()
            faces = analyser.get_faces(frame)
            times[angle].append((time.perf_counter() - start) * 1e3)
            expected = turned_points(face.landmarks_478[:, :2], angle, image.frame.shape)
            errors = [
                float(np.linalg.norm(f.landmarks_478[:, :2] - expected, axis=1).mean()) / eyes
                for f in faces
            ]
            row[angle] = {"faces": len(faces), "error": min(errors) if errors else None}
        rows.append(row)
        cells = [f"{row[a]['error']:.3f}" if row[a]["error"] is not None else "none" for a in TURNS]
        print(f"  {image.name}: {' / '.join(cells)}", flush=True)
    if not rows:
        print("no single-face image to turn", file=sys.stderr)
        return 2
    table_rows = []
    for angle in TURNS:
        found = [r for r in rows if r[angle]["error"] is not None]
        errors = np.array([r[angle]["error"] for r in found])
        right = int((errors <= WRONG).sum())
        extra = sum(r[angle]["faces"] > 1 for r in rows)
        table_rows.append(
            (
                f"{angle} degrees",
                f"{right} / {len(rows)}",
                f"{np.median(errors):.3f} / {errors.max():.3f}" if len(errors) else "-",
                extra,
                f"{stats_ms(times[angle])['median']:.0f}",
            )
        )
    table = markdown_table(
        (
            "turn",
            f"found, mesh within {WRONG} of the upright one",
            "mesh error median / max",
            "images with an extra face",
            "analysis ms, median",
        ),
        table_rows,
    )
    print(
        f"\n{len(rows)} single-face images; upright analysis "
        f"{stats_ms(times[0])['median']:.0f} ms median\n"
    )
    print(table)
    write_json(
        out_dir / "turned.json",
        {
            "benchmark": "turned",
            "environment": env,
            "images": rows,
            "analysis_ms": {str(k): stats_ms(v) for k, v in times.items() if v},
            "markdown": table,
        },
    )
    print(f"wrote {out_dir / 'turned.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
