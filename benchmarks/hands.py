"""Hands in front of faces (``mask_hands``): what is found, what it keeps, what it costs.

Stills: every image of the face set (the package images, plus
``../shared/data/faces`` and its group photos when present), analysed as the
command line does (2 x 2 tiles, faces cut by the sides). For each face, the hands
MediaPipe's hand landmarker finds on the crop round it (``MediaPipeHands``, the
still-image finder): faces, hands near them, hands over a face (their silhouette
covering over HAND_OVER of the face mesh's outline), and the finder's ms a face.
For each hand over a face, the share of its pixels (the silhouette's inner part)
the swap repaints (changed by over REPAINTED grey levels; the astronaut as the
source, or Grace Hopper onto her): the plain swap's, and with ``mask_hands``. A
contact sheet shows those faces, and a few frames of each clip with a hand over
its face: target | swap | swap with ``mask_hands``.

Video (with ``../shared/data/faces``): each clip's frames in order, its largest face
found by a video analyser, the hands round it by the still-image finder on each
frame and by the video finder (the whole frame in MediaPipe's tracking mode, as a
video job runs it): frames with a hand over the face, gaps of 1-3 frames between
frames with a hand (a hand kept, then painted over, then kept: a flicker), and
each finder's ms a frame.

    python benchmarks/hands.py
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FaceImage,
    face_set_args,
    face_set_start,
    group_images,
    markdown_table,
    package_images,
    stats_ms,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.hands import Hand, MediaPipeHands  # noqa: E402
from faceweave.core.hands import hand_silhouette  # noqa: E402
from faceweave.io.video import VideoReader  # noqa: E402

# A hand is over a face when its silhouette covers over this share of the face mesh's
# outline.
HAND_OVER = 0.02
# A hand's pixel counts as repainted by a swap when changed by over this (grey levels).
REPAINTED = 10
STILL_ANALYSER = {"detect_tiles": 2, "detect_edges": True}
SHEET_ROW = 240  # px: each face's strip on the contact sheet


def face_outline(face: fw.Face, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """The face mesh's outline (its points' hull), filled."""
    mask = np.zeros(shape[:2], np.uint8)
    hull = cv2.convexHull(np.round(face.landmarks_478[:, :2]).astype(np.int32))
    cv2.fillConvexPoly(mask, hull, 1)
    return mask > 0


def hand_inside(hand: Hand, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """The inner part of a hand's silhouette (its soft edge and two pixels in left out)."""
    full = (hand_silhouette(hand.landmarks, shape[:2]) == 1.0).astype(np.uint8)
    return cv2.erode(full, np.ones((5, 5), np.uint8)) > 0


def over_face(hand: Hand, face: fw.Face, shape: tuple[int, ...]) -> bool:
    outline = face_outline(face, shape)
    covered = hand_silhouette(hand.landmarks, shape[:2]) > 0.5
    return float((covered & outline).sum()) > HAND_OVER * float(outline.sum())


def repainted(out: NDArray[np.uint8], frame: NDArray[np.uint8], where: NDArray[np.bool_]) -> float:
    """The share of ``where``'s pixels ``out`` changed by over REPAINTED."""
    if not where.any():
        return float("nan")
    changed = np.abs(out.astype(np.int16) - frame.astype(np.int16)).max(axis=2) > REPAINTED
    return float(changed[where].mean())


def strip(frames: list[NDArray[np.uint8]], face: fw.Face, label: str) -> NDArray[np.uint8]:
    """The face's neighbourhood in each frame side by side, SHEET_ROW px high, labelled."""
    x0, y0, x1, y1 = face.bbox
    side = 1.2 * max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 + 0.25 * side
    h, w = frames[0].shape[:2]
    box = (
        int(max(0, cx - side)),
        int(max(0, cy - side)),
        int(min(w, cx + side)),
        int(min(h, cy + side)),
    )
    tiles = [
        cv2.resize(f[box[1] : box[3], box[0] : box[2]], (SHEET_ROW, SHEET_ROW)) for f in frames
    ]
    row = np.hstack(tiles)
    cv2.putText(row, label, (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 255, 0), 1, cv2.LINE_AA)
    return row


def stills(
    images: list[FaceImage], finder: MediaPipeHands, sheet: list[NDArray[np.uint8]]
) -> tuple[dict[str, Any], list[dict[str, Any]], fw.Swapper]:
    """The still images' counts and hands over faces (their strips added to ``sheet``),
    and the astronaut's swapper."""
    analyser = fw.FaceAnalyser(**STILL_ANALYSER)
    sources = {image.name: image.frame for image, _ in package_images()}
    source_faces = {
        name: analyser.get_faces(frame)[0] for name, frame in sources.items() if frame is not None
    }
    plain_swappers = {name: fw.Swapper(face) for name, face in source_faces.items()}
    kept_swappers = {name: s.with_options(mask_hands=True) for name, s in plain_swappers.items()}
    counts = {"images": 0, "faces": 0, "hands near faces": 0, "hands over a face": 0}
    ms: list[float] = []
    rows: list[dict[str, Any]] = []
    for image in images:
        counts["images"] += 1
        faces = analyser.get_faces(image.frame)
        counts["faces"] += len(faces)
        for index, face in enumerate(faces):
            began = time.perf_counter()
            hands = finder.find(image.frame, [face.bbox])
            ms.append((time.perf_counter() - began) * 1e3)
            counts["hands near faces"] += len(hands)
            over = [hand for hand in hands if over_face(hand, face, image.frame.shape)]
            if not over:
                continue
            counts["hands over a face"] += len(over)
            source = "grace_hopper" if image.name == "astronaut" else "astronaut"
            plain = plain_swappers[source].swap(image.frame, face)
            kept = kept_swappers[source].swap(image.frame, face, hands=over)
            where = np.zeros(image.frame.shape[:2], bool)
            for hand in over:
                where |= hand_inside(hand, image.frame.shape)
            row = {
                "image": image.name,
                "face": index,
                "hands": len(over),
                "repainted plain": repainted(plain, image.frame, where),
                "repainted kept": repainted(kept, image.frame, where),
            }
            rows.append(row)
            label = f"{image.name} face {index}: target | swap | --mask-hands"
            sheet.append(strip([image.frame, plain, kept], face, label))
            print(
                f"  {image.name} face {index}: {len(over)} hand(s) over it, repainted "
                f"{row['repainted plain']:.2f} -> {row['repainted kept']:.2f}",
                flush=True,
            )
    summary: dict[str, Any] = dict(counts)
    summary["finder ms a face"] = stats_ms(ms)
    return summary, rows, plain_swappers["astronaut"]


def hand_runs(marks: str) -> dict[str, int]:
    """Frames with a hand over the face ('1'), elsewhere ('o'), none ('.'), no face
    ('-'): how many over the face, and the gaps of 1-3 frames with none between
    frames with one."""
    return {
        "hand over the face": marks.count("1"),
        "a hand anywhere": len(re.findall("[1o]", marks)),
        "gaps of 1-3 frames": len(re.findall(r"(?<=[1o])\.{1,3}(?=[1o])", marks)),
    }


# Frames of a clip shown on the contact sheet (those with a hand over the face, evenly).
SHEET_FRAMES = 4


def video(clip: Path, swapper: fw.Swapper, sheet: list[NDArray[np.uint8]]) -> dict[str, Any]:
    analyser = fw.FaceAnalyser(mode="video")
    finders = {
        "crops (still)": MediaPipeHands(),
        "whole frame tracked (video)": MediaPipeHands(tracking=True),
    }
    marks = {name: [] for name in finders}
    ms: dict[str, list[float]] = {name: [] for name in finders}
    frames = 0
    shown: list[tuple[NDArray[np.uint8], fw.Face, list[Hand], int]] = []
    for frame in VideoReader(clip):
        frames += 1
        faces = analyser.get_faces(frame.image)
        if not faces:
            for name in finders:
                marks[name].append("-")
            continue
        face = max(faces, key=lambda f: f.size)
        for name, finder in finders.items():
            began = time.perf_counter()
            hands = finder.find(frame.image, [face.bbox])
            ms[name].append((time.perf_counter() - began) * 1e3)
            if any(over_face(hand, face, frame.image.shape) for hand in hands):
                marks[name].append("1")
                if finder.tracking:
                    shown.append((frame.image, face, hands, frames - 1))
            else:
                marks[name].append("o" if hands else ".")
    for finder in finders.values():
        finder.close()
    kept = swapper.with_options(mask_hands=True)
    for at in np.linspace(0, len(shown) - 1, min(SHEET_FRAMES, len(shown))).round().astype(int):
        image, face, hands, index = shown[at]
        frames_shown = [image, swapper.swap(image, face), kept.swap(image, face, hands=hands)]
        sheet.append(strip(frames_shown, face, f"{clip.stem} frame {index}"))
    return {
        "frames": frames,
        "finders": {
            name: {**hand_runs("".join(marks[name])), "ms": stats_ms(ms[name])} for name in finders
        },
        "marks": {name: "".join(marks[name]) for name in finders},
    }


def main(argv: list[str] | None = None) -> int:
    args = face_set_args(__doc__, argv)
    out_dir, env, images = face_set_start(args)
    faces_dir = None if args.no_shared else args.faces
    if faces_dir is not None and faces_dir.is_dir():
        images = images + group_images(faces_dir)
    finder = MediaPipeHands()
    print(f"stills: {len(images)} images", flush=True)
    sheet: list[NDArray[np.uint8]] = []
    still, rows, swapper = stills(images, finder, sheet)
    finder.close()
    clips = (
        sorted(faces_dir.glob("vid_*.mp4")) if faces_dir is not None and faces_dir.is_dir() else []
    )
    videos = {}
    for clip in clips:
        print(f"  video {clip.name}", flush=True)
        videos[clip.stem] = video(clip, swapper, sheet)
    if sheet:
        cv2.imwrite(str(out_dir / "hands_sheet.jpg"), np.vstack(sheet))
    per_face = still["finder ms a face"]
    still_table = markdown_table(
        ("stills", "value"),
        [
            *(
                (name, still[name])
                for name in ("images", "faces", "hands near faces", "hands over a face")
            ),
            ("finder ms a face, median / p95", f"{per_face['median']:.1f} / {per_face['p95']:.1f}"),
        ],
    )
    hand_table = markdown_table(
        ("face with a hand over it", "hands", "its pixels repainted: swap", "with mask_hands"),
        [
            (
                f"{r['image']} face {r['face']}",
                r["hands"],
                f"{r['repainted plain']:.2f}",
                f"{r['repainted kept']:.2f}",
            )
            for r in rows
        ],
    )
    video_rows = []
    for name, result in videos.items():
        for finder_name, found in result["finders"].items():
            video_rows.append(
                (
                    name,
                    finder_name,
                    result["frames"],
                    found["hand over the face"],
                    found["a hand anywhere"],
                    found["gaps of 1-3 frames"],
                    f"{found['ms']['median']:.1f} / {found['ms']['p95']:.1f}",
                )
            )
    video_table = markdown_table(
        (
            "clip",
            "finder",
            "frames",
            "hand over the face",
            "a hand anywhere",
            "gaps of 1-3 frames",
            "ms a frame, median / p95",
        ),
        video_rows,
    )
    print()
    for table in (still_table, hand_table, *([video_table] if video_rows else [])):
        print(table)
        print()
    write_json(
        out_dir / "hands.json",
        {
            "benchmark": "hands",
            "environment": env,
            "stills": still,
            "hands_over_faces": rows,
            "videos": videos,
            "markdown": {"stills": still_table, "hands": hand_table, "videos": video_table},
        },
    )
    print(f"wrote {out_dir / 'hands.json'}" + (f", {out_dir / 'hands_sheet.jpg'}" if sheet else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
