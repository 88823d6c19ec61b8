"""A server with a frame enhancer (``faceweave serve --frame-enhancer-model``): every
job's result is upscaled by it unless the job asks ``upscale=false``; previews are
not; a target whose result would be over the pixel limit is refused at the door.
On a tiny ONNX model with Real-ESRGAN's signature built here (nearest neighbour x2)."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

pytest.importorskip("onnx")
from neural_models import tiny_frame_enhancer  # noqa: E402  (tests/ is on sys.path)

from faceweave.errors import UsageError  # noqa: E402
from faceweave.service import ServiceConfig, create_app  # noqa: E402
from faceweave.service.jobs import JobOptions  # noqa: E402

from .conftest import AppFactory, auth, make_key, submit, wait_for  # noqa: E402


@pytest.fixture(scope="module")
def upscaler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_frame_enhancer(tmp_path_factory.mktemp("frame-enhancer") / "x2.onnx", scale=2)


def _result(client: TestClient, key: str, job: dict) -> np.ndarray:
    response = client.get(job["result"]["url"], headers=auth(key))
    assert response.status_code == 200, response.text
    return np.asarray(Image.open(io.BytesIO(response.content)))


def _done(client: TestClient, key: str, source: bytes, target: bytes, **options: object) -> dict:
    created = submit(client, key, source, target, **options)
    assert created.status_code == 202, created.text
    job = wait_for(client, created.json()["id"], key)
    assert job["state"] == "done", job
    return job


def test_jobs_are_upscaled_unless_they_ask_not_to(
    make_client: AppFactory,
    upscaler: Path,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    client = make_client(
        data_dir=tmp_path / "svc", frame_enhancer_model=upscaler, frame_enhancer_blend=1.0
    )
    health = client.get("/healthz").json()
    assert health["frame_enhancer_scale"] == 2, health
    key = make_key(tmp_path / "svc", "upscale")
    h, w = grace_hopper_rgb.shape[:2]
    bigger = _result(client, key, _done(client, key, source_png, target_jpeg, output_format="png"))
    plain = _result(
        client,
        key,
        _done(client, key, source_png, target_jpeg, output_format="png", upscale="false"),
    )
    assert plain.shape == (h, w, 3) and bigger.shape == (2 * h, 2 * w, 3)
    # A nearest-neighbour model at blend 1: each pixel of the swap, repeated (each
    # result carries its own job's watermark: a few grey levels). The swap changed the
    # face far more than that.
    diff = np.abs(bigger[::2, ::2].astype(float) - plain.astype(float))
    assert diff.mean() < 3.0 and np.percentile(diff, 99) < 10.0, (diff.mean(), diff.max())
    face = (slice(h // 4, h // 2), slice(w // 3, 2 * w // 3))
    swapped = np.abs(plain[face].astype(float) - grace_hopper_rgb[face])
    assert swapped.mean() > 15.0 > diff[face].mean(), (swapped.mean(), diff[face].mean())


def test_a_transparent_target_is_upscaled_with_its_transparency(
    make_client: AppFactory,
    upscaler: Path,
    tmp_path: Path,
    source_png: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    client = make_client(data_dir=tmp_path / "svc", frame_enhancer_model=upscaler)
    key = make_key(tmp_path / "svc", "alpha")
    h, w = grace_hopper_rgb.shape[:2]
    alpha = np.zeros((h, w), np.uint8)
    alpha[20:-20, 30:-30] = 255
    cut_out = io.BytesIO()
    Image.fromarray(np.dstack([grace_hopper_rgb, alpha]), mode="RGBA").save(cut_out, format="PNG")
    job = _done(client, key, source_png, cut_out.getvalue())
    result = _result(client, key, job)
    assert result.shape == (2 * h, 2 * w, 4)
    big_alpha = cv2.resize(alpha, (2 * w, 2 * h), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(result[:, :, 3], big_alpha)


def test_a_target_too_large_once_upscaled_is_refused_at_the_door(
    make_client: AppFactory,
    upscaler: Path,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    h, w = grace_hopper_rgb.shape[:2]
    # The target fits; twice its size each way does not.
    client = make_client(
        data_dir=tmp_path / "svc",
        frame_enhancer_model=upscaler,
        max_pixels=2 * h * w,
        preview_enabled=True,
    )
    key = make_key(tmp_path / "svc", "large")
    refused = submit(client, key, source_png, target_jpeg)
    assert refused.status_code == 413, refused.text
    error = refused.json()["error"]
    assert error["code"] == "image_too_large", error
    assert error["message"] == (
        f"target is {w}x{h}: upscaled x2 by the server's frame enhancer, {2 * w}x{2 * h} is "
        f"more than {2 * h * w} pixels (upscale=false keeps the target's size)"
    )
    # At its own size it is taken, and a preview (never upscaled) is made.
    job = _done(client, key, source_png, target_jpeg, upscale="false")
    assert _result(client, key, job).shape == (h, w, 3)
    preview = client.post(
        "/v1/preview",
        headers=auth(key),
        files={"source": ("me.png", source_png), "target": ("photo.jpg", target_jpeg)},
    )
    assert preview.status_code == 200, preview.text
    shown = np.asarray(Image.open(io.BytesIO(preview.content)))
    assert shown.shape[:2] == (h, w)


def test_a_video_job_is_upscaled_frame_by_frame(
    make_client: AppFactory,
    upscaler: Path,
    tmp_path: Path,
    source_png: bytes,
    astronaut_rgb: np.ndarray,
) -> None:
    from faceweave.io.video import VideoWriter, probe_video

    client = make_client(data_dir=tmp_path / "svc", frame_enhancer_model=upscaler)
    key = make_key(tmp_path / "svc", "video")
    clip = tmp_path / "clip.mp4"
    frame = cv2.resize(np.ascontiguousarray(astronaut_rgb[:, ::-1, ::-1]), (160, 160))
    with VideoWriter(clip, width=160, height=160, fps=10) as writer:
        for index in range(5):
            writer.write(frame, pts=index)
    created = submit(client, key, source_png, clip.read_bytes(), names=("me.png", "clip.mp4"))
    assert created.status_code == 202, created.text
    job = wait_for(client, created.json()["id"], key, timeout=120)
    assert job["state"] == "done", job
    result = tmp_path / "result.mp4"
    result.write_bytes(client.get(job["result"]["url"], headers=auth(key)).content)
    info = probe_video(result)
    assert (info.width, info.height, info.frame_count) == (320, 320, 5)


def test_a_server_without_one_says_so_and_takes_the_option(
    make_client: AppFactory, tmp_path: Path, source_png: bytes, target_jpeg: bytes
) -> None:
    client = make_client(data_dir=tmp_path / "svc")
    assert client.get("/healthz").json()["frame_enhancer_scale"] is None
    key = make_key(tmp_path / "svc", "none")
    created = submit(client, key, source_png, target_jpeg, upscale="maybe")
    assert created.status_code == 422, created.text
    assert created.json()["error"]["message"] == "upscale must be true or false, got 'maybe'"
    schema = client.get("/openapi.json").json()
    body = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert body["schema"]["properties"]["upscale"]["default"] is True


def test_the_config_checks_its_frame_enhancer(tmp_path: Path, upscaler: Path) -> None:
    with pytest.raises(UsageError, match="frame enhancer blend must be within"):
        ServiceConfig(data_dir=tmp_path, frame_enhancer_blend=1.5).validated()
    with pytest.raises(UsageError, match="frame enhancer blend must be a number"):
        ServiceConfig(data_dir=tmp_path, frame_enhancer_blend="0.5").validated()  # type: ignore[arg-type]
    assert ServiceConfig(data_dir=tmp_path).load_frame_enhancer() is None
    loaded = ServiceConfig(data_dir=tmp_path, frame_enhancer_model=upscaler).load_frame_enhancer()
    assert loaded is not None and loaded.scale == 2
    # A model loaded for a config that names none is refused when the service starts.
    app = create_app(ServiceConfig(data_dir=tmp_path / "svc", workers=0), frame_enhancer=loaded)
    with pytest.raises(UsageError, match="names none"), TestClient(app):
        pass
    assert JobOptions().upscale is True


def test_a_job_queued_before_the_server_had_one_is_checked_before_its_swap(
    make_client: AppFactory,
    upscaler: Path,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    """A job taken at the door of a server without a frame enhancer, run by one whose
    upscaled result would be too large: it fails as image_too_large before its swap
    (it had failed as bad_input, after the swap)."""
    h, w = grace_hopper_rgb.shape[:2]
    data_dir = tmp_path / "svc"
    front = make_client(data_dir=data_dir, workers=0)
    key = make_key(data_dir, "queued")
    created = submit(front, key, source_png, target_jpeg)
    assert created.status_code == 202, created.text
    runner = make_client(data_dir=data_dir, frame_enhancer_model=upscaler, max_pixels=2 * h * w)
    job = wait_for(runner, created.json()["id"], key)
    assert job["state"] == "failed", job
    assert job["error"]["code"] == "image_too_large", job
    assert "upscaled x2" in job["error"]["message"] and job["progress"] < 0.3
