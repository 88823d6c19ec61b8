"""Small faces in large and long frames: how many the still-image analyser finds.

Every single-face image of the face set (the package images, plus
``../shared/data/faces`` when present) gives its face, cut out with some of its
head and shoulders, for a crowd: faces of a given width (their mesh's box) are
placed apart on a plain backdrop (scikit-image's coffee photo, stretched) in
frames of the sizes a user brings: a 1080p frame, a 12-megapixel photo either
way up and a long strip (a panorama, portraits side by side). A placed face
counts as found when a face's box holds its centre; a face found where none was
placed is a false one. Two analysers: the frame as it is (``FaceAnalyser()``)
and the command line's still-image one (tiles, and faces cut by the sides).

Then a video file's case: a 1080p shot held for BESIDE_FRAMES frames, a close face
(about 300 px wide) in the middle and six small ones beside it (40, 60 and 80 px,
twice each), through the tracker as ``faceweave swap`` runs it, with the analyser
of a one-face swap and with that of a swap of every face (``all_faces``: tiles
swept in turn on frames with a face). Reported: the small faces tracked at the end,
the frame each was first tracked in, false faces, and the tracker's ms a frame.

    python benchmarks/small_faces.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    face_set_args,
    face_set_start,
    markdown_table,
    stats_ms,
    write_json,
)

import faceweave as fw  # noqa: E402

# (name, width, height, face widths in px)
FRAMES = (
    ("1080p", 1920, 1080, (40, 60, 80, 100, 130)),
    ("12 MP", 4000, 3000, (60, 80, 100, 130, 160)),
    ("12 MP upright", 3000, 4000, (60, 80, 100, 130, 160)),
    ("strip 8:1", 4096, 512, (60, 80, 100, 130, 160)),
)
CELL = 420  # px: one face with its head in each cell of the frame's grid
BESIDE_FRAMES = 90  # frames of the video case (3 s at 30 fps)
BESIDE_WIDTHS = (40, 60, 80)
ROUNDS = 3  # frames of each size, faces shuffled
ANALYSERS: dict[str, dict[str, Any]] = {
    "frame as it is": {},
    "still images (CLI)": {"detect_tiles": 2, "detect_edges": True},
}


def head_crop(frame: NDArray[np.uint8], face: fw.Face) -> tuple[NDArray[np.uint8], float]:
    """The face with some of its head and shoulders, and the face's width as a share
    of the crop's."""
    x0, y0, x1, y1 = face.bbox
    w = x1 - x0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    top, left = max(0, int(cy - 1.1 * w)), max(0, int(cx - w))
    crop = frame[top : int(cy + 1.3 * w), left : int(cx + w)]
    return crop, w / crop.shape[1]


def crowd(
    backdrop: NDArray[np.uint8],
    heads: list[tuple[NDArray[np.uint8], float]],
    size: tuple[int, int],
    widths: tuple[int, ...],
    rng: np.random.Generator,
) -> tuple[NDArray[np.uint8], list[tuple[float, float, int]]]:
    """A frame of ``size`` with heads of the ``widths`` (twice each) in random cells:
    the frame and each face's (centre x, centre y, width)."""
    w, h = size
    frame = cv2.resize(backdrop, size, interpolation=cv2.INTER_AREA)
    cells = [(x, y) for y in range(0, h - CELL + 1, CELL) for x in range(0, w - CELL + 1, CELL)]
    order = rng.permutation(len(cells))
    placed = []
    for (gx, gy), width in zip((cells[i] for i in order), list(widths) * 2, strict=False):
        crop, share = heads[int(rng.integers(len(heads)))]
        scale = width / (share * crop.shape[1])
        head = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        hh, hw = head.shape[:2]
        x = gx + int(rng.integers(0, max(1, CELL - hw)))
        y = gy + int(rng.integers(0, max(1, CELL - hh)))
        frame[y : y + hh, x : x + hw] = head[: h - y, : w - x]
        placed.append((x + hw / 2, y + hh * 1.1 / 2.4, width))
    return frame, placed


def beside_shot(
    backdrop: NDArray[np.uint8], heads: list[tuple[NDArray[np.uint8], float]]
) -> tuple[NDArray[np.uint8], list[tuple[float, float, int]]]:
    """A 1080p frame with a close face (300 px wide) in the middle and the small faces
    of BESIDE_WIDTHS (twice each) in columns at both sides: the frame and each small
    face's (centre x, centre y, width)."""
    w, h = 1920, 1080
    frame = cv2.resize(backdrop, (w, h), interpolation=cv2.INTER_AREA)

    def put(index: int, width: int, cx: int, top: int) -> tuple[float, float, int]:
        crop, share = heads[index % len(heads)]
        scale = width / (share * crop.shape[1])
        head = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        hh, hw = head.shape[:2]
        x = max(0, min(w - hw, cx - hw // 2))
        frame[top : top + hh, x : x + hw] = head[: h - top]
        return (x + hw / 2, top + hh * 1.1 / 2.4, width)

    put(0, 300, w // 2, 150)
    at = [(200, 60), (200, 420), (200, 780), (1720, 60), (1720, 420), (1720, 780)]
    placed = [
        put(i + 1, width, cx, top)
        for i, ((cx, top), width) in enumerate(zip(at, list(BESIDE_WIDTHS) * 2, strict=True))
    ]
    return frame, placed


def beside(
    backdrop: NDArray[np.uint8], heads: list[tuple[NDArray[np.uint8], float]]
) -> tuple[dict[str, Any], list[tuple[str, str, str, int, str, str]]]:
    """The video case (see the module's doc): results and table rows."""
    from faceweave.pipeline.tracking import FaceTracker
    from faceweave.pipeline.video_job import video_analyser

    frame, placed = beside_shot(backdrop, heads)
    results: dict[str, Any] = {}
    rows = []
    for name, all_faces in (("one face swapped", False), ("every face (all_faces)", True)):
        tracker = FaceTracker(video_analyser(with_embedding=False, all_faces=all_faces))
        first: dict[int, int] = {}
        false, times = 0, []
        for i in range(BESIDE_FRAMES):
            start = time.perf_counter()
            tracked = tracker.update(frame, i / 30)
            times.append((time.perf_counter() - start) * 1e3)
            for k, (x, y, _) in enumerate(placed):
                if k not in first and any(
                    t.face.bbox[0] < x < t.face.bbox[2] and t.face.bbox[1] < y < t.face.bbox[3]
                    for t in tracked
                ):
                    first[k] = i
        for t in tracked:
            x0, y0, x1, y1 = t.face.bbox
            small = any(x0 < x < x1 and y0 < y < y1 for x, y, _ in placed)
            false += not small and (x1 - x0) < 200
        by_width = {
            width: [k for k, (_, _, wd) in enumerate(placed) if wd == width]
            for width in BESIDE_WIDTHS
        }
        found = {str(wd): [sum(k in first for k in ks), len(ks)] for wd, ks in by_width.items()}
        results[name] = {
            "found": found,
            "first_frame": {str(k): v for k, v in sorted(first.items())},
            "false": false,
            "tracker_ms": stats_ms(times),
            "tracker_ms_mean": float(np.mean(times)),
        }
        cells = ", ".join(f"{wd}: {f[0]}/{f[1]}" for wd, f in found.items())
        last = max(first.values()) if first else None
        rows.append(
            (
                "1080p video, close face",
                name,
                cells,
                false,
                "-" if last is None else str(last),
                f"{stats_ms(times)['median']:.1f} / {np.mean(times):.1f}",
            )
        )
        print(f"  video / {name}: {cells}; all by frame {last}; false {false}", flush=True)
    return results, rows


def main(argv: list[str] | None = None) -> int:
    args = face_set_args(__doc__, argv)
    out_dir, env, images = face_set_start(args)
    analysers = {
        name: fw.FaceAnalyser(max_faces=40, with_embedding=False, **options)
        for name, options in ANALYSERS.items()
    }
    reference = analysers["frame as it is"]
    heads = []
    for image in images:
        faces = reference.get_faces(image.frame)
        if len(faces) == 1:
            heads.append(head_crop(image.frame, faces[0]))
    if not heads:
        print("no single-face image to place", file=sys.stderr)
        return 2
    import skimage.data

    backdrop = cv2.cvtColor(skimage.data.coffee(), cv2.COLOR_RGB2BGR)
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {}
    rows = []
    for frame_name, w, h, widths in FRAMES:
        frames = [crowd(backdrop, heads, (w, h), widths, rng) for _ in range(ROUNDS)]
        for name, analyser in analysers.items():
            found = {width: 0 for width in widths}
            total = {width: 0 for width in widths}
            false, times = 0, []
            for frame, placed in frames:
                start = time.perf_counter()
                faces = analyser.get_faces(frame)
                times.append((time.perf_counter() - start) * 1e3)

                def holds(face: fw.Face, x: float, y: float) -> bool:
                    x0, y0, x1, y1 = face.bbox
                    return x0 < x < x1 and y0 < y < y1

                for x, y, width in placed:
                    total[width] += 1
                    found[width] += any(holds(f, x, y) for f in faces)
                false += sum(not any(holds(f, x, y) for x, y, _ in placed) for f in faces)
            key = f"{frame_name} / {name}"
            results[key] = {
                "found": {str(k): [found[k], total[k]] for k in widths},
                "false": false,
                "analysis_ms": stats_ms(times),
            }
            cells = ", ".join(f"{k}: {found[k]}/{total[k]}" for k in widths)
            rows.append((frame_name, name, cells, false, f"{stats_ms(times)['median']:.0f}"))
            print(f"  {key}: {cells}; false {false}", flush=True)
    table = markdown_table(
        ("frame", "analyser", "found, by face width (px)", "false faces", "analysis ms, median"),
        rows,
    )
    video_results, video_rows = beside(backdrop, heads)
    video_table = markdown_table(
        (
            "clip",
            "analyser",
            "small faces tracked, by width (px)",
            "false faces",
            "last found at frame",
            "tracker ms a frame, median / mean",
        ),
        video_rows,
    )
    print(f"\n{len(heads)} faces placed\n")
    print(table)
    print()
    print(video_table)
    write_json(
        out_dir / "small_faces.json",
        {
            "benchmark": "small_faces",
            "environment": env,
            "heads": len(heads),
            "results": results,
            "video": video_results,
            "markdown": table + "\n\n" + video_table,
        },
    )
    print(f"wrote {out_dir / 'small_faces.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
