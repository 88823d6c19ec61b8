"""Memory over many rounds: what a long-running program or server builds and drops.

Each scenario is repeated ``--rounds`` times in this one process; after every round
the garbage is collected, the heap trimmed (glibc's ``malloc_trim``) and the process's
resident memory, threads and open file descriptors read. A leak shows as growth that
goes on round after round; the first rounds' growth (caches, the allocator's arenas)
levels off. The table gives each scenario's values after its first round and its
last, and the growth per round over the second half of its rounds (a straight line
fitted to them).

Scenarios (package photos only: scikit-image's astronaut, matplotlib's Grace Hopper):

* ``analyser``: an analyser built, a photo analysed, the analyser dropped (a request
  handler that builds its own);
* ``analyser_closed``: the same, closed with ``with``;
* ``swapper``: a source prepared (``fw.Swapper``), one swap, the swapper dropped;
* ``live_session``: a service live session's frame processor (its own analyser, as
  every WebRTC session has) over ``--frames`` frames, then closed;
* ``video_job``: ``swap_video`` over a short clip made from the astronaut, with sound.

Prints a markdown table; writes ``out/bench/soak.json``.

Usage:
    python benchmarks/soak.py [--rounds 30] [--frames 10] [--only analyser,...]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_OUT_DIR,
    checked_out_dir,
    environment,
    environment_line,
    markdown_table,
    package_images,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.runtime import release_heap  # noqa: E402

SCENARIOS = ("analyser", "analyser_closed", "swapper", "live_session", "video_job")
CLIP_FRAMES = 12
CLIP_FPS = 12


def sample() -> dict[str, float]:
    """This process's resident memory (MiB), threads and open descriptors, after a
    full collection and a heap trim."""
    gc.collect()
    release_heap()
    rss_kib = 0
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return {
        "rss_mib": rss_kib / 1024,
        "threads": len(os.listdir("/proc/self/task")),
        "fds": len(os.listdir("/proc/self/fd")),
    }


def slope(values: list[float]) -> float:
    """Growth per round over the second half of ``values`` (least squares)."""
    half = values[len(values) // 2 :]
    if len(half) < 2:
        return 0.0
    return float(np.polyfit(np.arange(len(half), dtype=np.float64), half, 1)[0])


def make_clip(path: Path, frame: np.ndarray) -> None:
    """A short clip of ``frame`` slowly zoomed, with a tone on its sound track."""
    import av

    h, w = frame.shape[:2]
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=CLIP_FPS)
        video.width, video.height, video.pix_fmt = w - w % 2, h - h % 2, "yuv420p"
        audio = container.add_stream("aac", rate=16000)
        for i in range(CLIP_FRAMES):
            zoom = 1.0 + 0.01 * i
            grown = cv2.resize(frame, None, fx=zoom, fy=zoom)
            y0, x0 = (grown.shape[0] - h) // 2, (grown.shape[1] - w) // 2
            crop = np.ascontiguousarray(grown[y0 : y0 + video.height, x0 : x0 + video.width])
            out = av.VideoFrame.from_ndarray(crop, format="bgr24")
            out.pts = i
            out.time_base = Fraction(1, CLIP_FPS)
            for packet in video.encode(out):
                container.mux(packet)
        samples = 16000 * CLIP_FRAMES // CLIP_FPS
        tone = (0.2 * np.sin(np.arange(samples) * 2 * np.pi * 440 / 16000)).astype(np.float32)
        for start in range(0, samples, 1024):
            chunk = av.AudioFrame.from_ndarray(tone[None, start : start + 1024], "fltp", "mono")
            chunk.sample_rate, chunk.pts = 16000, start
            for packet in audio.encode(chunk):
                container.mux(packet)
        for stream in (video, audio):
            for packet in stream.encode(None):
                container.mux(packet)


def scenarios(
    target: np.ndarray, source: np.ndarray, frames: int, work: Path
) -> dict[str, Callable[[], None]]:
    from av import VideoFrame

    from faceweave.pipeline.video_job import swap_video
    from faceweave.service.live import FrameProcessor, default_analyser

    source_face = fw.get_one_face(source)
    target_faces = fw.FaceAnalyser().get_faces(target)
    assert source_face is not None and target_faces, "the package photos' faces"
    clip = work / "soak_clip.mp4"
    make_clip(clip, target)
    video_frame = VideoFrame.from_ndarray(np.ascontiguousarray(target), format="bgr24")
    video_frame.time_base = Fraction(1, 90000)
    live_swapper = fw.Swapper(source_face)

    def analyser() -> None:
        assert fw.FaceAnalyser().get_faces(target)

    def analyser_closed() -> None:
        with fw.FaceAnalyser() as built:
            assert built.get_faces(target)

    def swapper() -> None:
        fw.Swapper(source_face).swap(target, target_faces)

    def live_session() -> None:
        processor = FrameProcessor(default_analyser)
        processor.swapper = live_swapper
        for i in range(frames):
            video_frame.pts = i * 3000
            processor.process(video_frame)
        processor.close()

    def video_job() -> None:
        swap_video(live_swapper, clip, work / "soak_out.mp4")

    return {
        "analyser": analyser,
        "analyser_closed": analyser_closed,
        "swapper": swapper,
        "live_session": live_session,
        "video_job": video_job,
    }


def run(rounds: int, frames: int, only: list[str], out_dir: Path) -> dict[str, Any]:
    images = {image.name: image.frame for image, _ in package_images()}
    if {"astronaut", "grace_hopper"} - images.keys():
        raise SystemExit("soak: needs scikit-image's astronaut and matplotlib's grace_hopper")
    todo = scenarios(images["astronaut"], images["grace_hopper"], frames, out_dir)
    results: dict[str, Any] = {}
    for name in only:
        samples = []
        began = time.perf_counter()
        for _ in range(rounds):
            todo[name]()
            samples.append(sample())
        results[name] = {
            "rounds": rounds,
            "seconds_per_round": (time.perf_counter() - began) / rounds,
            "samples": samples,
            "rss_mib_per_round": slope([s["rss_mib"] for s in samples]),
            "threads_per_round": slope([s["threads"] for s in samples]),
            "fds_per_round": slope([s["fds"] for s in samples]),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--frames", type=int, default=10, help="frames of a live session")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios, comma-separated")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown or not only:
        parser.error(f"--only takes {', '.join(SCENARIOS)}; got {args.only!r}")
    if args.rounds < 2 or args.frames < 1:
        parser.error("--rounds must be 2 or more and --frames 1 or more")
    out_dir = checked_out_dir(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("faceweave").setLevel(logging.ERROR)  # a source's advice, every round
    env = environment()
    results = run(args.rounds, args.frames, only, out_dir)
    print(environment_line(env))
    rows = []
    for name, result in results.items():
        first, last = result["samples"][0], result["samples"][-1]
        rows.append(
            [
                name,
                result["rounds"],
                f"{result['seconds_per_round']:.2f}",
                f"{first['rss_mib']:.0f} / {last['rss_mib']:.0f}",
                f"{result['rss_mib_per_round']:+.2f}",
                f"{first['threads']} / {last['threads']}",
                f"{first['fds']} / {last['fds']}",
            ]
        )
    headers = [
        "scenario",
        "rounds",
        "s / round",
        "RSS MiB after round 1 / last",
        "MiB / round (2nd half)",
        "threads 1 / last",
        "fds 1 / last",
    ]
    print(markdown_table(headers, rows))
    write_json(out_dir / "soak.json", {"environment": env, "scenarios": results})
    print(f"\nwrote {out_dir / 'soak.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
