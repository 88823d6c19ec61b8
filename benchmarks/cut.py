"""Cut faces: faces found and fitted when the frame's edge cuts part of them off.

Every single-face image of the face set (the package images, plus
``../shared/data/faces`` when present) is cropped so that a share of its face
(of the mesh's box) lies beyond the left, right, top or bottom edge, as in a
group selfie's outer faces or a head half out of shot. For each side and share
it reports how many faces the analyser fits right (the mean distance of the
mesh's points still in the frame to the uncut photo's, in inter-ocular
distances, within ``WRONG``), how many it fits wrong and how many of those
upside down. Two analysers: the frame as it is (``FaceAnalyser()``) and the
command line's still-image one (2 x 2 tiles, and faces cut by the sides
looked for on the frame mirrored out: ``detect_edges``).

With ``../shared/data/faces``, the group photos too: every face the still-image
analyser finds in them, cut by 30% and 50% by the left and right side in turn;
a face counts as found when a mesh lies within ``GROUP_FOUND`` of it (their
faces are small: 30-150 px).

    python benchmarks/cut.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FaceImage,
    face_set_args,
    face_set_start,
    group_images,
    markdown_table,
    stats_ms,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.analyser import mesh_roll  # noqa: E402

SIDES = ("left", "right", "top", "bottom")
SHARES = (0.3, 0.45, 0.6)  # of the face's box cut off
# A mesh this far from the uncut one (inter-ocular distances) counts as wrong.
WRONG = 0.1
GROUP_SHARES = (0.3, 0.5)
GROUP_FOUND = 0.3
ANALYSERS = {
    "frame as it is": {},
    "still images (CLI)": {"detect_tiles": 2, "detect_edges": True},
}


def cut_frame(
    frame: NDArray[np.uint8], box: tuple[float, ...], side: str, share: float
) -> tuple[NDArray[np.uint8], tuple[int, int]]:
    """``frame`` cropped so that ``share`` of ``box`` lies past ``side``; and the
    crop's (x, y) offset in ``frame``."""
    x0, y0, x1, y1 = box
    if side == "left":
        start = int(x0 + share * (x1 - x0))
        return np.ascontiguousarray(frame[:, start:]), (start, 0)
    if side == "right":
        return np.ascontiguousarray(frame[:, : int(x1 - share * (x1 - x0))]), (0, 0)
    if side == "top":
        start = int(y0 + share * (y1 - y0))
        return np.ascontiguousarray(frame[start:]), (0, start)
    return np.ascontiguousarray(frame[: int(y1 - share * (y1 - y0))]), (0, 0)


def mesh_error(
    face: fw.Face, expected: NDArray[np.floating], seen: NDArray[np.bool_], eyes: float
) -> float:
    """Mean distance of ``face``'s mesh points in ``seen`` to ``expected``, in ``eyes``."""
    distances = np.linalg.norm(face.landmarks_478[:, :2] - expected, axis=1)
    return float(distances[seen].mean()) / eyes


def group_cuts(
    images: list[FaceImage], analysers: dict[str, fw.FaceAnalyser]
) -> list[dict[str, Any]]:
    """Every face of the group photos cut by each side in turn: per analyser, the
    error of the mesh nearest to it (None: no face)."""
    reference = analysers["still images (CLI)"]
    cases = []
    for image in images:
        for face in reference.get_faces(image.frame):
            whole = face.landmarks_478[:, :2]
            eyes = float(np.linalg.norm(whole[468] - whole[473]))
            for side in ("left", "right"):
                for share in GROUP_SHARES:
                    frame, (dx, _) = cut_frame(image.frame, face.bbox, side, share)
                    if frame.shape[1] < 32:
                        continue
                    expected = whole - np.array([dx, 0], np.float32)
                    seen = (expected[:, 0] >= 0) & (expected[:, 0] < frame.shape[1])
                    case: dict[str, Any] = {
                        "image": image.name,
                        "face_px": round(face.size),
                        "side": side,
                        "share": share,
                    }
                    for name, analyser in analysers.items():
                        errors = [
                            mesh_error(f, expected, seen, eyes) for f in analyser.get_faces(frame)
                        ]
                        case[name] = min(errors) if errors else None
                    cases.append(case)
        print(f"  {image.name} (group)", flush=True)
    return cases


def main(argv: list[str] | None = None) -> int:
    args = face_set_args(__doc__, argv)
    out_dir, env, images = face_set_start(args)
    analysers = {
        name: fw.FaceAnalyser(with_embedding=False, **options)
        for name, options in ANALYSERS.items()
    }
    reference = analysers["frame as it is"]
    cases: list[dict[str, Any]] = []
    times: dict[str, list[float]] = {name: [] for name in analysers}
    for image in images:
        upright = reference.get_faces(image.frame)
        if len(upright) != 1:
            continue  # the reference needs exactly one face
        whole = upright[0].landmarks_478[:, :2]
        eyes = float(np.linalg.norm(whole[468] - whole[473]))
        for side in SIDES:
            for share in SHARES:
                frame, (dx, dy) = cut_frame(image.frame, upright[0].bbox, side, share)
                h, w = frame.shape[:2]
                expected = whole - np.array([dx, dy], np.float32)
                seen = (
                    (expected[:, 0] >= 0)
                    & (expected[:, 0] < w)
                    & (expected[:, 1] >= 0)
                    & (expected[:, 1] < h)
                )
                case: dict[str, Any] = {"image": image.name, "side": side, "share": share}
                for name, analyser in analysers.items():
                    start = time.perf_counter()
                    faces = analyser.get_faces(frame)
                    times[name].append((time.perf_counter() - start) * 1e3)
                    # The fit nearest where the face is (a crop may hold other faces).
                    errors = [
                        (
                            mesh_error(f, expected, seen, eyes),
                            abs(mesh_roll(f.landmarks_478)) > 90,
                        )
                        for f in faces
                    ]
                    error, upside_down = min(errors) if errors else (None, False)
                    case[name] = {"error": error, "upside_down": upside_down}
                cases.append(case)
        print(f"  {image.name}", flush=True)
    if not cases:
        print("no single-face image to cut", file=sys.stderr)
        return 2
    table_rows = []
    for side in SIDES:
        for share in SHARES:
            here = [c for c in cases if c["side"] == side and c["share"] == share]
            cells = []
            for name in analysers:
                errors = [c[name]["error"] for c in here if c[name]["error"] is not None]
                right = sum(e <= WRONG for e in errors)
                flipped = sum(c[name]["upside_down"] for c in here)
                cells.append(f"{right} / {len(errors) - right} / {flipped}")
            table_rows.append((side, f"{share:.0%}", *cells))
    table = markdown_table(
        (
            "side cut",
            "share of the face out",
            *(f"{name}: right / wrong / upside down" for name in analysers),
        ),
        table_rows,
    )
    per_side = len(cases) // len(SIDES) // len(SHARES)
    print(f"\n{per_side} single-face images, each cut {len(SIDES) * len(SHARES)} ways\n")
    print(table)
    groups = [] if args.no_shared else group_cuts(group_images(args.faces), analysers)
    group_table = ""
    if groups:
        group_rows = []
        for share in GROUP_SHARES:
            here = [c for c in groups if c["share"] == share]
            cells = [
                f"{sum(c[n] is not None and c[n] <= GROUP_FOUND for c in here)} / {len(here)}"
                for n in analysers
            ]
            group_rows.append((f"{share:.0%}", *cells))
        group_table = markdown_table(
            ("group photos: share of a face out by a side", *(f"{n}: found" for n in analysers)),
            group_rows,
        )
        print(f"\n{group_table}")
    timing = ", ".join(f"{k} {stats_ms(v)['median']:.0f}" for k, v in times.items())
    print(f"\nanalysis ms, median: {timing}")
    write_json(
        out_dir / "cut.json",
        {
            "benchmark": "cut",
            "environment": env,
            "cases": cases,
            "group_cases": groups,
            "analysis_ms": {k: stats_ms(v) for k, v in times.items()},
            "markdown": table,
            "group_markdown": group_table,
        },
    )
    print(f"wrote {out_dir / 'cut.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
