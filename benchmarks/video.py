"""Video files end to end: throughput, flicker, expression, and reference selection on a
multi-person clip.

1. **Throughput** (always): synthetic clips at 480p, 720p and 1080p (16:9, 30 fps,
   ``--frames`` frames, default 90) are built with PyAV from scikit-image's
   astronaut: the photo is scaled so her face is one third of the frame height,
   centred, edges mirrored (as in ``speed.py``), and slides 3 px per frame; a
   440 Hz AAC tone is the audio track. The source face is matplotlib's Grace
   Hopper (``--source astronaut`` swaps the astronaut in instead, for every part
   of the benchmark). ``faceweave.pipeline.swap_video`` runs the whole job (decode + track +
   swap + watermark + encode, x264 with the CLI's defaults + audio copy); the report gives frames
   per second and the mean milliseconds per frame of each pipeline stage. Stages run
   on their own threads, so the fps is set by the slowest stage, not their sum.
2. **Flicker and expression** (when ``../shared/data/faces`` holds vid_p02..vid_p06;
   the first run of the frame sampling below, with default settings): for each
   clip, the mean absolute frame-to-frame change inside the swapped face's box
   of the output, divided by the same measure on the input. 1.0 means the swap
   adds no temporal noise; above 1 it shimmers; well under 1 the face is held
   still where the target's moved. The expression measure keeps the smoothing
   honest: dlib's 68 landmarks (independent of the MediaPipe mesh the swap
   follows) on each input frame and on its output, in the same box, give the
   eyes' opening (eye aspect ratio, both eyes' mean) and the mouth's (inner lips'
   gap over the mouth's width); reported is the correlation of each between
   output and input over the clip (1: the output blinks and speaks as the target
   does). A strip of every 15th frame's face, input above output, is written
   for each clip under ``out/`` to look at (internal use, as below; with
   ``--creases 0`` against the default, the creases of the target's expression
   on the output's skin; ``--mask-lips`` measures the swap that keeps the
   target's lips).
3. **Dynamic frame sampling** (same clips): ``--frame-skip 2`` and ``3`` and
   ``--static-threshold 1`` against analysing every frame: the tracking analysis's
   milliseconds per frame run alone, the frames actually fitted and the job's
   frames per second (compute saved), and the
   output's difference to the every-frame output in the face box plus its
   flicker (quality cost).
4. **Reference selection** (``vid_p01_hamilton_clip.mp4``): ``--face-selector
   reference`` with a photo of Lin-Manuel Miranda (``img_p10``) as the reference.
   Ground truth, independent of the job's tracker: every ``--gt-every``-th input
   frame is analysed afresh and each face's dlib identity distance to the
   reference decides who he is (< 0.6). Reported: the fraction of frames where he
   is visible in which he was swapped and nobody else was, and the frames where
   someone else was swapped. A contact sheet of every 15th output frame is
   written under ``out/`` (these clips are for internal use only: nothing derived
   from them is written anywhere else).

Example:
    python benchmarks/video.py
    python benchmarks/video.py --resolutions 480p --frames 60 --no-shared
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import av
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
    package_images,
    peak_rss_mib,
    place_face,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.dlib_backend import DlibLandmarks68  # noqa: E402
from faceweave.core.geometry import bbox_iou  # noqa: E402
from faceweave.io import read_image  # noqa: E402
from faceweave.pipeline import Packet, VideoJobStats, swap_video  # noqa: E402
from faceweave.pipeline.tracking import FaceTracker  # noqa: E402
from faceweave.pipeline.video_job import video_analyser  # noqa: E402

RESOLUTIONS = {"480p": (854, 480), "720p": (1280, 720), "1080p": (1920, 1080)}
FLICKER_CLIPS = (
    "vid_p02_woman_expressions.mp4",
    "vid_p03_man_greenscreen.mp4",
    "vid_p04_woman_talking.mp4",
    "vid_p05_man_suit_talking.mp4",
    "vid_p06_man_glasses_vertical.mp4",
)
HAMILTON = "vid_p01_hamilton_clip.mp4"
MIRANDA = "img_p10_lin_manuel_miranda.png"
FPS = 30
SLIDE_PX = 3


def make_clip(
    path: Path, photo: NDArray[np.uint8], face_box: tuple[float, ...], size: tuple[int, int], n: int
) -> Path:
    """The photo scaled so the face is 1/3 of the height, sliding SLIDE_PX a frame, AAC tone."""
    w, h = size
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast", "crf": "16"})
        video.width, video.height, video.pix_fmt = w, h, "yuv420p"
        audio = out.add_stream("aac", rate=48000, layout="stereo")
        for i in range(n):
            dx = (i - n / 2) * SLIDE_PX * h / 480
            image = place_face(photo, face_box, size, dx=dx)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = i
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        total = 48000 * n // FPS
        for begin in range(0, total, 1024):
            t = np.arange(begin, min(total, begin + 1024)) / 48000
            tone = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            chunk = av.AudioFrame.from_ndarray(
                np.stack([tone, tone]).reshape(1, -1), format="flt", layout="stereo"
            )
            chunk.sample_rate, chunk.pts = 48000, begin
            out.mux(audio.encode(chunk))
        out.mux(audio.encode(None))
    return path


def stage_means(stats: VideoJobStats) -> dict[str, float]:
    return {name: round(t.mean, 2) for name, t in stats.stage_ms.items() if t.count}


def throughput(
    args: argparse.Namespace,
    analyser: fw.FaceAnalyser,
    source: fw.Face | fw.Swapper,
    photo: NDArray[np.uint8],
) -> dict[str, Any]:
    face = analyser.get_faces(photo)[0]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for res in args.resolutions:
            clip = make_clip(
                Path(tmp) / f"{res}.mp4", photo, face.bbox, RESOLUTIONS[res], args.frames
            )
            # Marked like the CLI's default output (the provenance watermark on every frame).
            stats = swap_video(
                [source], clip, Path(tmp) / f"{res}_out.mp4", analyser=analyser, watermark="bench"
            )
            results[res] = {
                "fps": round(stats.fps, 2),
                "frames": stats.frames_written,
                "frames_swapped": stats.frames_swapped,
                "seconds": round(stats.seconds, 2),
                "stage_ms": stage_means(stats),
                "tracker": stats.tracker.__dict__,
                "audio": stats.audio,
            }
            print(
                f"  {res}: {stats.fps:.1f} fps ({stats.frames_written} frames, "
                f"{stats.frames_swapped} swapped) stages {stage_means(stats)}",
                flush=True,
            )
    return results


def _decode(path: Path) -> list[NDArray[np.uint8]]:
    return _decode_timed(path)[0]


def _decode_timed(path: Path) -> tuple[list[NDArray[np.uint8]], list[float]]:
    """Every frame (BGR) and its time in seconds."""
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return [f.to_ndarray(format="bgr24") for f in frames], [float(f.time or 0.0) for f in frames]


def _region(box: tuple[float, ...]) -> tuple[slice, slice]:
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    return slice(max(0, y0), y1), slice(max(0, x0), x1)


def _mean_diff(a: NDArray[np.uint8], b: NDArray[np.uint8], box: tuple[float, ...]) -> float:
    region = _region(box)
    return float(np.abs(a[region].astype(np.float32) - b[region]).mean())


def _flicker(
    before: list[NDArray[np.uint8]], after: list[NDArray[np.uint8]], boxes: dict[int, Any]
) -> tuple[float, float | None, float | None]:
    """(output / input ratio, input change, output change): the mean absolute
    frame-to-frame change inside the face box, on frames whose face and previous
    face were both found."""
    pairs = [i for i in range(1, min(len(before), len(after))) if i in boxes and i - 1 in boxes]
    if not pairs:
        return float("nan"), None, None
    change_in = float(np.mean([_mean_diff(before[i], before[i - 1], boxes[i]) for i in pairs]))
    change_out = float(np.mean([_mean_diff(after[i], after[i - 1], boxes[i]) for i in pairs]))
    return change_out / max(change_in, 1e-6), change_in, change_out


def _openings(points: NDArray[np.floating]) -> tuple[float, float]:
    """(eyes, mouth) openings of dlib's 68 points: the eye aspect ratio (both eyes'
    mean) and the inner lips' gap over the mouth's width."""
    p = np.asarray(points, np.float64)

    def eye(a: int) -> float:
        gaps = np.linalg.norm(p[a + 1] - p[a + 5]) + np.linalg.norm(p[a + 2] - p[a + 4])
        return float(gaps / (2.0 * np.linalg.norm(p[a] - p[a + 3])))

    lips = sum(np.linalg.norm(p[61 + k] - p[67 - k]) for k in range(3)) / 3.0
    return (eye(36) + eye(42)) / 2.0, float(lips / np.linalg.norm(p[48] - p[54]))


def _expression_following(
    before: list[NDArray[np.uint8]],
    after: list[NDArray[np.uint8]],
    boxes: dict[int, Any],
    landmarks: DlibLandmarks68,
) -> dict[str, float]:
    """Correlation over the clip of the eyes' and the mouth's openings (dlib's 68
    points, see _openings) between each output frame and its input frame, measured
    in the same box (the swapped face's, as dlib frames faces: brows to chin)."""
    pairs = []
    for i, (x0, y0, x1, y1) in sorted(boxes.items()):
        if i >= min(len(before), len(after)):
            continue
        box = (x0, y0 + 0.22 * (y1 - y0), x1, y1)
        pairs.append(tuple(_openings(landmarks.landmarks(f[i], box)) for f in (before, after)))
    if len(pairs) < 3:
        return {}
    values = np.asarray(pairs)  # (frames, input/output, eyes/mouth)
    return {
        f"{part}_correlation": round(float(np.corrcoef(values[:, 0, k], values[:, 1, k])[0, 1]), 3)
        for k, part in enumerate(("eyes", "mouth"))
    }


def _face_strip(
    before: list[NDArray[np.uint8]],
    after: list[NDArray[np.uint8]],
    boxes: dict[int, Any],
    every: int = 15,
) -> NDArray[np.uint8]:
    """Every ``every``-th frame's face, input above output (160 px squares), side by
    side: blinks, winks and speech to look at."""
    columns = []
    for i in sorted(boxes):
        if i % every or i >= min(len(before), len(after)):
            continue
        x0, y0, x1, y1 = boxes[i]
        grow = 0.2 * max(x1 - x0, y1 - y0)
        crop = _region((x0 - grow, y0 - grow, x1 + grow, y1 + grow))
        pair = [
            cv2.resize(f[i][crop], (160, 160), interpolation=cv2.INTER_AREA)
            for f in (before, after)
        ]
        cv2.putText(pair[0], str(i), (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 255, 255), 1)
        columns.append(np.vstack(pair))
    return np.hstack(columns) if columns else np.zeros((320, 160, 3), np.uint8)


def _swap_clip(
    clip: Path, output: Path, analyser: fw.FaceAnalyser, source: fw.Face | fw.Swapper, **job: Any
) -> tuple[VideoJobStats, dict[int, Any], list[NDArray[np.uint8]]]:
    """Run one job; returns its stats, the first target's box per frame and the output frames."""
    boxes: dict[int, tuple[float, float, float, float]] = {}

    def record(packet: Packet) -> None:
        targets = packet.data.get("targets", [])
        if targets:
            boxes[packet.index] = targets[0].face.bbox

    stats = swap_video([source], clip, output, analyser=analyser, on_frame=record, **job)
    frames = _decode(output)
    output.unlink()
    return stats, boxes, frames


# (label, swap_video arguments) of the dynamic frame sampling runs, full analysis first:
# that first run, with default settings, is also the flicker measurement.
SAMPLING = (
    ("every frame", {}),
    ("--frame-skip 2", {"frame_skip": 2}),
    ("--frame-skip 3", {"frame_skip": 3}),
    ("--static-threshold 1", {"static_threshold": 1.0}),
)


def flicker_and_sampling(
    folder: Path, analyser: fw.FaceAnalyser, source: fw.Face | fw.Swapper, work: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Flicker with default settings, and what --frame-skip and static reuse save and cost.

    Flicker: the every-frame run's output / input change in the face box. Sampling,
    compute: milliseconds per frame of the tracking analysis run alone (one thread),
    the frames the analyser actually fitted, and the whole job's frames per second;
    quality: each output's mean absolute difference to the every-frame output inside
    the face box (grey levels; the carried geometry's error), and its flicker ratio.
    """
    flicker: dict[str, Any] = {}
    sampling: dict[str, Any] = {}
    landmarks = DlibLandmarks68()
    for name in FLICKER_CLIPS:
        clip = folder / name
        if not clip.exists():
            continue
        before, times = _decode_timed(clip)
        reference: list[NDArray[np.uint8]] = []
        rows: dict[str, Any] = {}
        for label, job in SAMPLING:
            # The analysis alone, in one thread: what the setting saves, without the
            # other pipeline stages competing for the two cores.
            tracker = FaceTracker(analyser, **job)
            began = time.perf_counter()
            for image, t in zip(before, times, strict=True):
                tracker.update(image, t)
            tracker_ms = (time.perf_counter() - began) * 1e3 / max(len(before), 1)
            stats, boxes, after = _swap_clip(
                clip, work / f"sampling_{clip.stem}.mp4", analyser, source, **job
            )
            ratio, change_in, change_out = _flicker(before, after, boxes)
            if not reference:
                reference = after
                cv2.imwrite(str(work / f"{clip.stem}_faces.jpg"), _face_strip(before, after, boxes))
                flicker[clip.stem] = {
                    "flicker_ratio": round(ratio, 3),
                    **_expression_following(before, after, boxes, landmarks),
                    "input_change": round(change_in, 3) if change_in is not None else None,
                    "output_change": round(change_out, 3) if change_out is not None else None,
                    "frames": stats.frames_written,
                    "frames_swapped": stats.frames_swapped,
                    "fps": round(stats.fps, 1),
                }
                print(
                    f"  {clip.stem}: flicker x{ratio:.3f}, eyes and mouth following "
                    f"{flicker[clip.stem].get('eyes_correlation')} and "
                    f"{flicker[clip.stem].get('mouth_correlation')} "
                    f"({stats.frames_swapped}/{stats.frames_written} swapped)",
                    flush=True,
                )
            diffs = [
                _mean_diff(after[i], reference[i], box)
                for i, box in boxes.items()
                if i < min(len(after), len(reference))
            ]
            counters = stats.tracker
            analysed = counters.frames - counters.skipped - counters.reused
            rows[label] = {
                "analyse_ms": round(tracker_ms, 2),
                "fps": round(stats.fps, 1),
                "analysed_frames": f"{analysed}/{counters.frames}",
                "diff_vs_every_frame": round(float(np.mean(diffs)), 2) if diffs else None,
                "flicker_ratio": round(ratio, 3) if change_in is not None else None,
            }
            print(f"  {clip.stem} {label}: {rows[label]}", flush=True)
        sampling[clip.stem] = rows
    return flicker, sampling


def reference_selection(
    folder: Path,
    analyser: fw.FaceAnalyser,
    source: fw.Face | fw.Swapper,
    out_dir: Path,
    gt_every: int,
) -> dict[str, Any] | None:
    clip, ref_path = folder / HAMILTON, folder / MIRANDA
    if not clip.exists() or not ref_path.exists():
        return None
    reference = analyser.get_faces(read_image(ref_path))[0]
    swapped: dict[int, list[tuple[float, float, float, float]]] = {}
    sheet: list[NDArray[np.uint8]] = []

    def record(packet: Packet) -> None:
        swapped[packet.index] = [t.face.bbox for t in packet.data.get("targets", [])]
        if packet.index % 15 == 0:
            thumb = cv2.resize(packet.image, (320, 180), interpolation=cv2.INTER_AREA)
            cv2.putText(
                thumb, str(packet.index), (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 255, 255), 2
            )
            sheet.append(thumb)

    output = out_dir / "hamilton_reference.mp4"
    stats = swap_video(
        [source],
        clip,
        output,
        analyser=analyser,
        selector="reference",
        references=[reference],
        on_frame=record,
    )
    truth = fw.FaceAnalyser(max_faces=10)
    visible = hit = wrong = 0
    checked = 0
    for i, image in enumerate(_decode(clip)):
        if i % gt_every:
            continue
        checked += 1
        faces = truth.get_faces(image)
        distances = [fw.face_distance(f, reference) for f in faces]
        him = [f.bbox for f, d in zip(faces, distances, strict=True) if d < 0.6]
        others = [f.bbox for f, d in zip(faces, distances, strict=True) if d >= 0.6]
        boxes = swapped.get(i, [])
        on_him = any(bbox_iou(b, h) > 0.3 for b in boxes for h in him)
        on_others = any(
            bbox_iou(b, o) > 0.3 and not any(bbox_iou(b, h) > 0.3 for h in him)
            for b in boxes
            for o in others
        )
        if him:
            visible += 1
            hit += on_him and not on_others
        wrong += on_others or (bool(boxes) and not him)
    grid = _contact_sheet(sheet)
    sheet_path = out_dir / "hamilton_reference_sheet.jpg"
    cv2.imwrite(str(sheet_path), grid)
    result = {
        "frames": stats.frames_written,
        "frames_checked": checked,
        "frames_with_him": visible,
        "swapped_him_only": hit,
        "rate": round(hit / visible, 3) if visible else None,
        "frames_with_wrong_swap": wrong,
        "fps": round(stats.fps, 1),
        "identity_checks": stats.identity_checks,
        "tracks": stats.tracks,
        "contact_sheet": str(sheet_path),
    }
    print(f"  hamilton: {result}", flush=True)
    return result


def _contact_sheet(thumbs: list[NDArray[np.uint8]], columns: int = 4) -> NDArray[np.uint8]:
    if not thumbs:
        return np.zeros((180, 320, 3), np.uint8)
    while len(thumbs) % columns:
        thumbs.append(np.zeros_like(thumbs[0]))
    rows = [np.hstack(thumbs[i : i + columns]) for i in range(0, len(thumbs), columns)]
    return np.vstack(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--resolutions", nargs="+", default=list(RESOLUTIONS), choices=list(RESOLUTIONS)
    )
    parser.add_argument("--frames", type=int, default=90, help="frames per synthetic clip")
    parser.add_argument("--faces", type=Path, default=SHARED_FACES_DIR, help="shared videos folder")
    parser.add_argument("--no-shared", action="store_true", help="skip flicker and selection")
    parser.add_argument("--gt-every", type=int, default=3, help="ground truth every N-th frame")
    parser.add_argument(
        "--source",
        default="grace_hopper",
        choices=("grace_hopper", "astronaut"),
        help="the package photo swapped in (Grace Hopper's glasses throw dlib's eye points)",
    )
    parser.add_argument(
        "--creases",
        type=float,
        default=fw.SwapOptions().creases,
        help="the swap's --creases (default %(default)s; 0 to measure the swap without)",
    )
    parser.add_argument(
        "--mask-lips",
        action="store_true",
        help="the swap's --mask-lips (the target's own lips kept)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR / "video")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    out_dir = checked_out_dir(args.out)
    env = environment()
    print(environment_line(env), flush=True)
    images = {img.name: img.frame for img, _ in package_images()}
    if "astronaut" not in images or "grace_hopper" not in images:
        print("scikit-image and matplotlib are needed for the test faces", file=sys.stderr)
        return 2
    face = fw.FaceAnalyser().get_faces(images[args.source])[0]
    default = args.creases == fw.SwapOptions().creases and not args.mask_lips
    source = face if default else fw.Swapper(face, creases=args.creases, mask_lips=args.mask_lips)
    # A video file's analysers, as `faceweave swap` builds them: for one face, and for a
    # selector that may swap any face (the reference selection), which also sweeps the
    # tiles for small faces beside a close one.
    analyser = video_analyser()
    report: dict[str, Any] = {"benchmark": "video", "environment": env}
    print("throughput (decode + track + swap + encode + audio copy):", flush=True)
    report["throughput"] = throughput(args, analyser, source, images["astronaut"])
    shared = not args.no_shared and args.faces.is_dir()
    if shared:
        print(
            "flicker (output / input frame-to-frame change in the face box) and dynamic "
            "frame sampling (compute saved, quality cost):",
            flush=True,
        )
        report["flicker"], report["frame_sampling"] = flicker_and_sampling(
            args.faces, analyser, source, out_dir
        )
        print("reference selection on the Hamilton clip:", flush=True)
        report["reference_selection"] = reference_selection(
            args.faces, video_analyser(all_faces=True), source, out_dir, args.gt_every
        )
    else:
        print(f"shared videos skipped ({args.faces} absent or --no-shared)")
    rows = [
        (
            res,
            f"{r['fps']:.1f}",
            *(
                f"{r['stage_ms'].get(s, float('nan')):.1f}"
                for s in ("source", "analyse", "select", "swap", "sink")
            ),
        )
        for res, r in report["throughput"].items()
    ]
    table = markdown_table(
        ("resolution", "fps", "decode ms", "analyse ms", "select ms", "swap ms", "encode ms"), rows
    )
    print()
    print(table)
    if shared and report.get("flicker"):
        print()
        print(
            markdown_table(
                ("clip", "flicker ratio", "eyes following", "mouth following"),
                [
                    (
                        k,
                        v["flicker_ratio"],
                        v.get("eyes_correlation", "-"),
                        v.get("mouth_correlation", "-"),
                    )
                    for k, v in report["flicker"].items()
                ],
            )
        )
    if shared and report.get("frame_sampling"):
        print()
        sampling_rows = []
        for label, _ in SAMPLING:
            per_clip = [r[label] for r in report["frame_sampling"].values()]
            sampling_rows.append(
                (
                    label,
                    f"{np.mean([r['analyse_ms'] for r in per_clip]):.1f}",
                    f"{np.mean([r['fps'] for r in per_clip]):.1f}",
                    f"{np.mean([r['diff_vs_every_frame'] or 0 for r in per_clip]):.2f}",
                    f"{np.mean([r['flicker_ratio'] or 0 for r in per_clip]):.2f}",
                )
            )
        print(
            markdown_table(
                (
                    "sampling (mean over clips)",
                    "analyse ms/frame",
                    "fps",
                    "diff vs every frame",
                    "flicker",
                ),
                sampling_rows,
            )
        )
    report["peak_rss_mib"] = peak_rss_mib()
    report["runtime_s"] = round(time.perf_counter() - began, 1)
    report["markdown"] = table
    write_json(out_dir / "video.json", report)
    print(f"wrote {out_dir / 'video.json'} in {report['runtime_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
