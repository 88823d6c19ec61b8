"""/live in real headless chromium, its fake camera playing a video of the package face."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

STATE = """() => JSON.stringify({
  status: document.getElementById('status').textContent, offset: faceweaveLive.offset,
  shown: faceweaveLive.framesShown, samples: faceweaveLive.frameRtts.length,
  remoteTs: faceweaveLive.remoteTs, serverTs: faceweaveLive.serverTs})"""
# Loopback on a 2-core machine: the server's share (swap, VP8) is ~20 ms and the data
# channel's round trip ~1 ms; most of the rest is chromium's own send and receive path.
# The target is a median of 100 ms; the test records the number and
# benchmarks/webrtc.py measures it.

GRAB = """([id, x0, y0, x1, y1]) => {
  const video = document.getElementById(id);
  const canvas = document.createElement('canvas');
  canvas.width = 320; canvas.height = 240;
  const ctx = canvas.getContext('2d');
  ctx.drawImage(video, 0, 0, 320, 240);
  return Array.from(ctx.getImageData(x0, y0, x1 - x0, y1 - y0).data);
}"""


def grab(page: Any, video_id: str, box: tuple[int, int, int, int]) -> np.ndarray:
    x0, y0, x1, y1 = box
    rgba = np.array(page.evaluate(GRAB, [video_id, *box]), np.uint8)
    return rgba.reshape(y1 - y0, x1 - x0, 4)[..., :3].astype(np.float32)


def _start_live(
    launch: Callable[..., Any], video: Path, url: str, key: str, source: Path
) -> tuple[Any, list[str]]:
    """/live on the fake camera with the key and a source photo, Start pressed; the page
    and the list its script errors go to."""
    page = launch(f"--use-file-for-fake-video-capture={video}")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url + "/live")
    page.get_by_label("API key (kept in this browser only)").fill(key)
    page.get_by_label("Source face (image)").set_input_files(str(source))
    page.get_by_role("button", name="Start").click()
    return page, errors


@pytest.mark.slow
def test_live_fake_camera_is_swapped_with_low_latency(
    service: tuple[str, str],
    launch: Callable[..., Any],
    tmp_path: Path,
    fake_camera: tuple[Path, np.ndarray],
    grace_hopper: np.ndarray,
    record_property: Any,
) -> None:
    from faceweave.analysis.analyser import FaceAnalyser

    url, key = service
    video, camera = fake_camera
    faces = FaceAnalyser(max_faces=1, with_embedding=False).get_faces(camera)
    assert faces
    fx0, fy0, fx1, fy1 = faces[0].bbox
    box = (int(fx0) + 4, int(fy0) + 4, int(fx1) - 4, int(fy1) - 4)
    source = tmp_path / "source.png"
    cv2.imwrite(str(source), np.asarray(grace_hopper))

    page, errors = _start_live(launch, video, url, key, source)
    page.wait_for_function(
        "() => document.getElementById('status').textContent === 'Swapping live.'"
    )
    # What the source photo shows in the swap (Grace Hopper's glasses) is said.
    assert "glasses" in page.inner_text("#source-notes"), page.inner_text("#source-notes")
    try:
        page.wait_for_function(
            "() => Number(document.getElementById('frame-rtt').dataset.samples) >= 60",
            timeout=40_000,
        )
    except Exception:  # say what the page saw, for whoever reads the failure
        print("page state:", page.evaluate(STATE))
        raise
    # Chromium pauses muted videos scrolled out of view: keep both on screen.
    page.locator("#remote").scroll_into_view_if_needed()
    time.sleep(1.0)  # a second more of swapped frames

    local, remote = grab(page, "local", box), grab(page, "remote", box)
    diff = float(np.abs(local - remote).mean())
    median = float(page.locator("#frame-rtt").get_attribute("data-median") or "nan")
    p95 = float(page.locator("#frame-rtt").get_attribute("data-p95") or "nan")
    ping = float(page.locator("#ping-rtt").get_attribute("data-median") or "nan")
    shown = page.locator("#frame-rtt").inner_text()
    server = page.locator("#server-ms").inner_text()
    record_property("browser_frame_rtt_median_ms", round(median, 1))
    record_property("browser_frame_rtt_p95_ms", round(p95, 1))
    record_property("browser_ping_rtt_median_ms", round(ping, 1))
    print(
        f"browser: frame round trip {shown!r} (median {median:.1f}, p95 {p95:.1f}); "
        f"ping {ping:.2f} ms; server {server}; face-region difference {diff:.1f}"
    )
    assert diff > 10.0, diff  # the face that comes back is not the camera's
    # Frames were matched to their send times exactly (the server's out_ts), not guessed.
    assert page.evaluate("() => faceweaveLive.outToIn.size") > 0
    assert shown.startswith("median"), shown
    # The round trip is recorded (record_property, printed), not asserted: speed is
    # measured by benchmarks/webrtc.py, never by timed assertions in tests.

    # Fusion 0: the camera's own face comes back.
    page.get_by_label("Fusion").fill("0")
    deadline = time.monotonic() + 15
    while True:
        time.sleep(0.5)
        back = float(np.abs(grab(page, "local", box) - grab(page, "remote", box)).mean())
        if back < diff / 2 or time.monotonic() > deadline:
            break
    assert back < diff / 2, (back, diff)

    # Eye contact: the page asks for the source photo's gaze.
    with page.expect_response(lambda r: r.url.endswith("/gaze")) as gaze:
        page.get_by_label("Eye contact", exact=False).check()
    assert gaze.value.status == 200 and gaze.value.json()["gaze"] == "source"

    # Two photos of the source person go as one multipart request and are merged.
    second = tmp_path / "source_2.png"
    cv2.imwrite(str(second), np.asarray(grace_hopper)[:, ::-1])
    page.evaluate("() => { document.getElementById('status').textContent = ''; }")
    page.get_by_label("Source face (image)").set_input_files([str(source), str(second)])
    page.wait_for_function(
        "() => document.getElementById('status').textContent === 'Swapping live.'",
        timeout=30_000,
    )

    page.get_by_role("button", name="Stop").click()
    page.wait_for_function("() => document.getElementById('status').textContent === 'Stopped.'")
    assert not errors, errors


@pytest.mark.slow
def test_a_source_without_a_face_leaves_the_session_running(
    service: tuple[str, str],
    launch: Callable[..., Any],
    tmp_path: Path,
    fake_camera: tuple[Path, np.ndarray],
    grace_hopper: np.ndarray,
) -> None:
    """The server's reason stays on screen and the camera keeps coming back: another
    photo then swaps. Stop ends the session on the server (its DELETE answers 204)."""
    url, key = service
    video, _ = fake_camera
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((240, 320, 3), 128, np.uint8))
    source = tmp_path / "source.png"
    cv2.imwrite(str(source), np.asarray(grace_hopper))

    page, errors = _start_live(launch, video, url, key, blank)
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('choose another photo')",
        timeout=30_000,
    )
    status = page.locator("#status")
    assert "(no_face)" in status.inner_text() and "error" in (status.get_attribute("class") or "")
    time.sleep(1.0)  # were the session torn down, "Stopped." would show by now
    assert "choose another photo" in status.inner_text()
    assert page.get_by_role("button", name="Stop").is_enabled()

    page.get_by_label("Source face (image)").set_input_files(str(source))
    page.wait_for_function(
        "() => document.getElementById('status').textContent === 'Swapping live.'",
        timeout=30_000,
    )
    with page.expect_response(lambda r: r.request.method == "DELETE") as closed:
        page.get_by_role("button", name="Stop").click()
    assert closed.value.status == 204
    page.wait_for_function("() => document.getElementById('status').textContent === 'Stopped.'")
    assert not errors, errors
