"""Live WebRTC round trip on loopback: an aiortc client sends a face camera to /v1/live.

Runs the in-process loopback of ``tests/service/test_live.py`` (same bar-coded frames,
same service router behind the service's API-key check) for longer, and prints the
frame round trip (sent -> swapped frame received and decoded) and the data-channel
ping round trip: median, p95, max.

Example:
    python benchmarks/webrtc.py            # 30 s of swapped frames
    python benchmarks/webrtc.py --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_loopback() -> Any:
    spec = importlib.util.spec_from_file_location(
        "live_loopback", ROOT / "tests/service/test_live.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _faces() -> tuple[np.ndarray, np.ndarray]:
    from matplotlib import cbook
    from PIL import Image
    from skimage import data

    astronaut = cv2.cvtColor(np.asarray(data.astronaut()), cv2.COLOR_RGB2BGR)
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = cv2.cvtColor(np.asarray(Image.open(fh).convert("RGB")), cv2.COLOR_RGB2BGR)
    return astronaut, hopper


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": round(float(np.median(values)), 1),
        "p95_ms": round(float(np.percentile(values, 95)), 1),
        "max_ms": round(float(np.max(values)), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="swapped seconds measured")
    args = parser.parse_args(argv)
    loop_mod = _load_loopback()
    from faceweave.service.live import LiveSessions

    astronaut, hopper = _faces()
    picture = loop_mod.camera_frame(astronaut)
    with tempfile.TemporaryDirectory() as tmp:
        app, key = loop_mod.live_app(Path(tmp) / "data", LiveSessions())
        start = time.perf_counter()
        result = asyncio.run(
            loop_mod.run_session(
                app,
                key,
                picture,
                loop_mod.png_bytes(hopper),
                swapped_frames=int(args.seconds * loop_mod.FPS),
            )
        )
        app.state.service.db.close()
    frames = [rtt * 1000 for _, rtt, _ in result["swapped"]]
    pings = [p * 1000 for p in result["pongs"]]
    server = [s["wait_ms"] + s["process_ms"] for s in result["stats"] if s["type"] == "frame"]
    report = {
        "frame_round_trip": _summary(frames),
        "ping_round_trip": _summary(pings),
        "server_per_frame": _summary(server),
        "dropped_by_server": max(
            (s["dropped"] for s in result["stats"] if s["type"] == "frame"), default=0
        ),
        "resolution": f"{loop_mod.W}x{loop_mod.H}@{loop_mod.FPS}",
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print("| measure | n | median ms | p95 ms | max ms |\n|---|---|---|---|---|")
    for name in ("frame_round_trip", "ping_round_trip", "server_per_frame"):
        r = report[name]
        print(f"| {name} | {r['n']} | {r['median_ms']} | {r['p95_ms']} | {r['max_ms']} |")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
