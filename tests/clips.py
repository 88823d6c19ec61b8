"""Synthetic test clips: a package face sliding across the frame, x264, with an AAC tone."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np

FPS = 30
STEP = 2  # pixels the scene moves per frame
# How an upright picture is stored under a clockwise display rotation.
_STORED = {
    90: cv2.ROTATE_90_COUNTERCLOCKWISE,
    180: cv2.ROTATE_180,
    270: cv2.ROTATE_90_CLOCKWISE,
}


def make_clip(
    path: Path,
    scene: np.ndarray | None,
    *,
    frames: int = 30,
    size: tuple[int, int] = (480, 360),
    audio: bool = True,
    video: bool = True,
    display_rotation: int = 0,
) -> Path:
    """Write ``scene`` (None: plain grey) sliding right by STEP px a frame, with an AAC tone.

    ``display_rotation`` (0, 90, 180, 270): the frames are stored turned that far
    counterclockwise, with a display rotation that tells players to turn them back
    clockwise (a phone video filmed in portrait or upside down).
    """
    width, height = size
    if scene is not None:
        wide = cv2.resize(scene, (round(scene.shape[1] * height / scene.shape[0]), height))
    with av.open(str(path), "w") as out:
        if video:
            stream = out.add_stream(
                "libx264", rate=FPS, options={"preset": "ultrafast", "crf": "18"}
            )
            sideways = display_rotation in (90, 270)
            stream.width, stream.height = (height, width) if sideways else (width, height)
            stream.pix_fmt = "yuv420p"
            if display_rotation:
                # PyAV takes the angle counterclockwise, as FFmpeg's display matrix.
                stream.set_display_rotation(-display_rotation)
        if audio:
            tone = out.add_stream("aac", rate=44100, layout="mono")
        for index in range(frames if video else 0):
            canvas = np.full((height, width, 3), 90, np.uint8)
            if scene is not None:
                x = (width - wide.shape[1]) // 2 - frames * STEP // 2 + index * STEP
                x0, x1 = max(0, x), min(width, x + wide.shape[1])
                canvas[:, x0:x1] = wide[:, x0 - x : x1 - x]
            if display_rotation:
                canvas = cv2.rotate(canvas, _STORED[display_rotation])
            frame = av.VideoFrame.from_ndarray(canvas, format="bgr24")
            frame.pts = index
            out.mux(stream.encode(frame))
        if video:
            out.mux(stream.encode(None))
        if audio:
            total = 44100 * frames // FPS
            for begin in range(0, total, 1024):
                t = np.arange(begin, min(total, begin + 1024)) / 44100
                samples = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]
                chunk = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
                chunk.sample_rate, chunk.pts = 44100, begin
                out.mux(tone.encode(chunk))
            out.mux(tone.encode(None))
    return path
