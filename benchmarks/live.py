"""Live session: a simulated 720p30 camera for N seconds; latency, drops, queues and memory.

The "camera" is a 10 s synthetic clip (scikit-image's astronaut, face one third of
the frame height, swaying left and right, 1280x720 at 30 fps) played in a loop at
real time by ``faceweave.io.camera.FilePacer``: like a camera it never waits
for the pipeline, and a frame more than one period late is dropped at capture.
The session is ``faceweave.pipeline.run_live`` (queues of one frame, oldest
dropped) with Grace Hopper as the source. The output is ``--output``: ``null``
(default: frames are discarded, so the numbers are the engine's), or any live
output spec (``out/bench/live/rec.mp4``, ``udp://127.0.0.1:27000``...).

With ``--reference`` only the face matching a reference photo (the astronaut's
own) is swapped, as ``faceweave live --reference-face`` does: its identity is
checked when its track starts and again at most once a second, in a child
process (``--identity-inline``: in the session's own, as before the forty-fourth
landing). ``--guest`` adds Grace Hopper's photo at the frame's right halfway
through each loop of the clip: a new face beside the person, whose first check
the child process makes too.

Reported: capture-to-output latency p50/p95/p99, output fps, the gaps between
output frames (p99, the longest, how many over three frame periods: a stall),
frames captured / processed / dropped (by place), per-stage ms, and once a
second the queue sizes and the resident memory, with the memory growth between
the first and the last quarter of the run (it should be ~0: no leak, no queue
build-up).

Example:
    python benchmarks/live.py --seconds 60
    python benchmarks/live.py --seconds 60 --reference
    python benchmarks/live.py --seconds 60 --reference --guest
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
    checked_out_dir,
    environment,
    environment_line,
    markdown_table,
    package_images,
    place_face,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.io.camera import FilePacer  # noqa: E402
from faceweave.io.outputs import open_output  # noqa: E402
from faceweave.pipeline import Packet, run_live  # noqa: E402

SIZE = (1280, 720)
FPS = 30
CLIP_SECONDS = 10


class NullOutput:
    """Discards frames: measures the engine without an encoder or a display. Keeps
    each frame's arrival time (a stall shows as a long gap between two)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def write(self, packet: Packet) -> None:
        self.times.append(time.perf_counter())

    def close(self) -> None:
        pass


def make_camera_clip(
    path: Path,
    photo: NDArray[np.uint8],
    face_box: tuple[float, ...],
    guest: NDArray[np.uint8] | None = None,
) -> Path:
    """The swaying face; with ``guest`` (a face crop), that face at the frame's right
    from the middle of the clip on (someone walking in)."""
    w, h = SIZE
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast", "crf": "18"})
        video.width, video.height, video.pix_fmt = w, h, "yuv420p"
        for i in range(CLIP_SECONDS * FPS):
            dx = 120 * np.sin(2 * np.pi * i / (4 * FPS))  # sway, period 4 s
            image = place_face(photo, face_box, SIZE, dx=dx)
            if guest is not None and i >= CLIP_SECONDS * FPS // 2:
                gh, gw = guest.shape[:2]
                image[(h - gh) // 2 : (h - gh) // 2 + gh, w - gw - 20 : w - 20] = guest
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = i
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="session length")
    parser.add_argument("--output", default="null", help="null or a live output spec")
    parser.add_argument("--redetect-every", type=int, default=10)
    parser.add_argument("--frame-skip", type=int, default=1)
    parser.add_argument(
        "--creases",
        type=float,
        default=fw.SwapOptions().creases,
        help="the swap's --creases (default %(default)s; 0 to time the swap without)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="swap only the face that matches a reference (the clip's own face): "
        "identity checks at each re-detection, a known face's at most once a second",
    )
    parser.add_argument(
        "--guest",
        action="store_true",
        help="with --reference: Grace Hopper walks in beside the astronaut halfway "
        "through each loop of the clip (a new face beside the person)",
    )
    parser.add_argument(
        "--identity-inline",
        action="store_true",
        help="with --reference: check identities in the session's own process",
    )
    parser.add_argument(
        "--mask-hands",
        action="store_true",
        help="keep hands in front of the face (the swap's --mask-hands: MediaPipe's hand "
        "tracking over the frames; the clip shows none, so this times the search)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR / "live")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = checked_out_dir(args.out)
    env = environment()
    print(environment_line(env), flush=True)
    images = {img.name: img.frame for img, _ in package_images()}
    if "astronaut" not in images or "grace_hopper" not in images:
        print("scikit-image and matplotlib are needed for the test faces", file=sys.stderr)
        return 2
    analyser = fw.FaceAnalyser(with_embedding=False)
    face = analyser.get_faces(images["grace_hopper"])[0]
    default = args.creases == fw.SwapOptions().creases
    source = face if default else fw.Swapper(face, creases=args.creases)
    target = analyser.get_faces(images["astronaut"])[0]
    target_box = target.bbox
    selection: dict[str, Any] = {}
    if args.reference:
        # The astronaut's own photo is the reference: every look at the clip's face matches.
        analyser = fw.FaceAnalyser(with_embedding=True, mode="video")
        reference = fw.FaceAnalyser(with_embedding=True).get_faces(images["astronaut"])[0]
        selection = {
            "selector": "reference",
            "references": [reference],
            "identity_process": not args.identity_inline,
        }
    with tempfile.TemporaryDirectory() as tmp:
        guest = None
        if args.guest:
            # Her face and some of her head, her face 200 px tall (the astronaut's 240),
            # clear of the astronaut's sway.
            x0, y0, x1, y1 = (int(v) for v in face.bbox)
            side = int(1.4 * max(x1 - x0, y1 - y0))
            cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
            crop = images["grace_hopper"][
                max(0, cy - side // 2) : cy + side // 2, max(0, cx - side // 2) : cx + side // 2
            ]
            scale = 200 / (y1 - y0)
            guest = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        clip = make_camera_clip(
            Path(tmp) / "camera.mp4", images["astronaut"], target_box, guest=guest
        )
        capture = FilePacer(clip, loop=True)
        output: Any = (
            NullOutput()
            if args.output == "null"
            # As `faceweave live -o FILE` records: watermarked (a window or stream is not).
            else open_output(
                args.output, capture.width, capture.height, capture.fps, watermark="bench"
            )
        )
        print(f"live: {SIZE[0]}x{SIZE[1]}@{FPS} for {args.seconds:.0f} s -> {args.output}")
        began = time.perf_counter()
        stats = run_live(
            capture,
            output,
            [source],
            analyser=analyser,
            redetect_every=args.redetect_every,
            frame_skip=args.frame_skip,
            duration=args.seconds,
            options={"mask_hands": True} if args.mask_hands else None,
            **selection,
        )
        print(f"  {stats.summary()} ({time.perf_counter() - began:.1f} s)")
    samples = stats.samples
    quarter = max(1, len(samples) // 4)
    rss_first = float(np.mean([s["rss_mib"] for s in samples[:quarter]])) if samples else 0.0
    rss_last = float(np.mean([s["rss_mib"] for s in samples[-quarter:]])) if samples else 0.0
    max_queue = (
        [max(q) for q in zip(*(s["queues"] for s in samples), strict=True)] if samples else []
    )
    lat = stats.latency_ms
    gaps = np.diff(output.times) * 1e3 if isinstance(output, NullOutput) else np.zeros(0)
    gaps_row = (
        f"{np.percentile(gaps, 99):.0f} / {gaps.max():.0f} / {int((gaps > 3000 / FPS).sum())}"
        if gaps.size
        else "-"
    )
    rows = [
        ("latency p50 / p95 / p99 ms", f"{lat.p50:.0f} / {lat.p95:.0f} / {lat.p99:.0f}"),
        ("output fps", f"{stats.fps:.1f}"),
        ("gap between output frames p99 / max ms / gaps over 3 frames", gaps_row),
        ("frames captured / processed / dropped",
         f"{stats.frames_captured} / {stats.frames_processed} / {stats.frames_dropped}"),
        ("dropped by", ", ".join(f"{k} {v}" for k, v in stats.dropped_by.items())),
        ("stage mean ms", ", ".join(
            f"{k} {t.mean:.1f}" for k, t in stats.stage_ms.items() if t.count)),
        ("max queue sizes (analyse, swap, sink)", str(max_queue)),
        ("RSS first / last quarter MiB", f"{rss_first:.0f} / {rss_last:.0f}"),
        ("tracker", str(stats.tracker.__dict__)),
    ]  # fmt: skip
    table = markdown_table(("live " + f"{SIZE[1]}p{FPS}", "value"), rows)
    print()
    print(table)
    report = {
        "benchmark": "live",
        "args": {k: str(v) for k, v in vars(args).items()},
        "environment": env,
        "stats": stats.as_dict(),
        "rss_growth_mib": rss_last - rss_first,
        "output_gaps_ms": {
            "p99": float(np.percentile(gaps, 99)) if gaps.size else None,
            "max": float(gaps.max()) if gaps.size else None,
            "over_3_frames": int((gaps > 3000 / FPS).sum()),
        },
        "max_queue_sizes": max_queue,
        "markdown": table,
    }
    write_json(out_dir / "live.json", report)
    print(f"wrote {out_dir / 'live.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
