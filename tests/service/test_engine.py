"""The service on another engine than the embedded one: ``faceweave serve --engine
inswapper`` and ``--enhancer-model``, on tiny ONNX models with the real signatures built
here (tests/neural_models.py). Jobs, previews and live sources swap with the server's
engine; the embedded engine's own options are refused at the door."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

pytest.importorskip("onnx")
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    green_patch,
    tiny_embedder,
    tiny_enhancer,
    tiny_occluder,
    tiny_parser,
    tiny_swapper,
)

from faceweave.analysis.analyser import FaceAnalyser  # noqa: E402
from faceweave.errors import EXIT_ERROR, EXIT_USAGE, InputError, UsageError  # noqa: E402
from faceweave.io.image import read_image  # noqa: E402
from faceweave.processors.engines import EngineSettings, SwapEngine  # noqa: E402
from faceweave.processors.neural import EnhancedSwapper, NeuralSwapper  # noqa: E402
from faceweave.processors.swap import SwapOptions  # noqa: E402
from faceweave.service.errors import ENGINE_ERROR_MESSAGE, ServiceError  # noqa: E402
from faceweave.service.jobs import JobOptions  # noqa: E402
from faceweave.service.live import LiveSessions  # noqa: E402
from faceweave.service.worker import image_analyser  # noqa: E402

from .conftest import AppFactory, auth, make_key, submit, wait_for  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("service-models")
    tinted, _, _ = tiny_swapper(root / "tint.onnx", tint=0.9)
    broken, _, _ = tiny_swapper(root / "nan.onnx", tint=float("nan"))
    return {
        "swapper": tinted,
        "broken": broken,
        "embedder": tiny_embedder(root / "arcface.onnx"),
        "enhancer": tiny_enhancer(root / "darken.onnx", scale=0.6, shift=-0.3),
        "occluder": tiny_occluder(root / "xseg.onnx"),
        "parser": tiny_parser(root / "bisenet.onnx", size=256),
        "root": root,
    }


def decode_image(data: bytes) -> np.ndarray:
    """Bytes to a BGR frame, read as the service reads its inputs."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "image"
        path.write_bytes(data)
        return read_image(path)


def _neural(models: dict[str, Path], **more: object) -> EngineSettings:
    return EngineSettings(
        engine="inswapper",
        swapper_model=models["swapper"],
        embedder_model=models["embedder"],
        **more,  # type: ignore[arg-type]
    )


def _expected(settings: EngineSettings, source: bytes, target: bytes) -> np.ndarray:
    """The swap the job should give: the same engine and options, run here."""
    analyser = image_analyser()  # as the job's engine finds faces
    source_face = analyser.get_faces(decode_image(source))[0]
    frame = decode_image(target)
    options = SwapOptions.from_settings(JobOptions())
    swapper = SwapEngine(settings).swapper([source_face], options)
    return swapper.swap(frame, analyser.get_faces(frame)[:1])


def _finished_job(
    client: TestClient, key: str, source: bytes, target: bytes, **options: object
) -> dict:
    """Submit a job (accepted: 202) and wait for its end; its last JSON."""
    created = submit(client, key, source, target, **options)
    assert created.status_code == 202, created.text
    return wait_for(client, created.json()["id"], key)


def _result(client: TestClient, key: str, job: dict) -> np.ndarray:
    response = client.get(job["result"]["url"], headers=auth(key))
    assert response.status_code == 200, response.text
    return decode_image(response.content)


def _face_box(frame: np.ndarray) -> tuple[slice, slice]:
    face = FaceAnalyser().get_faces(frame)[0]
    x0, y0, x1, y1 = (int(v) for v in face.bbox)
    # The inner half of the box: clear of the mask's feathered edge.
    dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
    return slice(y0 + dy, y1 - dy), slice(x0 + dx, x1 - dx)


def test_a_neural_server_swaps_jobs_and_previews_with_its_models(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
) -> None:
    settings = _neural(models)
    client = make_client(data_dir=tmp_path / "svc", engine=settings, preview_enabled=True)
    health = client.get("/healthz").json()
    assert health["engine"] == "inswapper" and health["enhancer"] is False, health
    key = make_key(tmp_path / "svc", "neural")
    job = _finished_job(client, key, source_png, target_jpeg)
    assert job["state"] == "done", job
    result = _result(client, key, job)
    expected = _expected(settings, source_png, target_jpeg)
    target = decode_image(target_jpeg)
    rows, cols = _face_box(target)
    diff = np.abs(result.astype(float) - expected)[rows, cols].mean()
    changed = np.abs(expected.astype(float) - target)[rows, cols].mean()
    # The model's tint swapped the face (far from the target), and the job's result is
    # that swap up to its watermark and JPEG coding.
    assert changed > 15.0, changed
    assert diff < 3.0, (diff, changed)
    # The embedded engine's swap of the same pair is much further from the result.
    mesh = _expected(EngineSettings(), source_png, target_jpeg)
    assert np.abs(result.astype(float) - mesh)[rows, cols].mean() > 3 * diff + 5.0

    preview = client.post(
        "/v1/preview",
        headers=auth(key),
        files={"source": ("a.png", source_png), "target": ("b.jpg", target_jpeg)},
    )
    assert preview.status_code == 200, preview.text
    shown = np.asarray(Image.open(io.BytesIO(preview.content)).convert("RGB"))[:, :, ::-1]
    assert np.abs(shown.astype(float) - expected)[rows, cols].mean() < 4.0


def test_a_neural_server_refuses_the_mesh_engines_options_at_the_door(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
) -> None:
    client = make_client(data_dir=tmp_path / "svc", engine=_neural(models))
    key = make_key(tmp_path / "svc", "door")
    defaults = JobOptions()
    for options, named in (
        ({"light": 0.2}, "light"),
        ({"shape": 0.5, "mask_eyes": "true"}, "shape, mask_eyes"),
        ({"gaze": "source"}, "gaze"),
        ({"color": "sh"}, "color sh"),
    ):
        response = submit(client, key, source_png, target_jpeg, **options)
        assert response.status_code == 422, (options, response.text)
        error = response.json()["error"]
        assert error["code"] == "bad_option", error
        assert named in error["message"] and "inswapper" in error["message"], error
    # Their default values (as a form that sends every field would) are taken.
    accepted = submit(
        client, key, source_png, target_jpeg, light=defaults.light, color="rct", fusion=0.5
    )
    assert accepted.status_code == 202, accepted.text
    assert wait_for(client, accepted.json()["id"], key)["state"] == "done"


def test_a_job_queued_before_a_restart_on_another_engine_is_checked_against_it(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
) -> None:
    """Queued on the embedded engine with one of its options, run after a restart on
    the neural engine: it fails as a request to that server would have, at once."""
    data = tmp_path / "svc"
    queuing = make_client(data_dir=data, workers=0)  # only queues
    key = make_key(data, "restart")
    created = submit(queuing, key, source_png, target_jpeg, light=0.2)
    assert created.status_code == 202, created.text
    queuing.__exit__(None, None, None)
    running = make_client(data_dir=data, engine=_neural(models))
    job = wait_for(running, created.json()["id"], key)
    assert job["state"] == "failed", job
    assert job["error"]["code"] == "bad_option", job
    assert job["error"]["message"] == (
        "light: the mesh engine's option, not used by this server's engine (inswapper)"
    ), job


def test_an_enhancer_on_the_embedded_engine_restores_the_jobs_faces(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
) -> None:
    settings = EngineSettings(enhancer_model=models["enhancer"], enhancer_blend=1.0)
    client = make_client(data_dir=tmp_path / "svc", engine=settings)
    health = client.get("/healthz").json()
    assert health["engine"] == "mesh" and health["enhancer"] is True, health
    key = make_key(tmp_path / "svc", "enhancer")
    job = _finished_job(client, key, source_png, target_jpeg, light=0.3)  # mesh options stay
    assert job["state"] == "done", job
    result = _result(client, key, job)
    rows, cols = _face_box(decode_image(target_jpeg))
    plain = _expected(EngineSettings(), source_png, target_jpeg).astype(float)
    # The darkening "restoration" (0.6 x - 0.3 in -1..1) took the face well below the
    # plain embedded swap; the job's light=0.3 is not the default, so compare in kind.
    assert result[rows, cols].mean() < plain[rows, cols].mean() - 40.0


def test_an_occluder_keeps_what_covers_the_jobs_faces(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    settings = EngineSettings(occluder_model=models["occluder"])
    client = make_client(data_dir=tmp_path / "svc", engine=settings)
    health = client.get("/healthz").json()
    assert health["engine"] == "mesh" and health["occluder"] is True, health
    assert health["enhancer"] is False
    target = np.ascontiguousarray(grace_hopper_rgb[:, :, ::-1])
    face = FaceAnalyser().get_faces(target)[0]
    covered, disc = green_patch(target, face)
    buffer = io.BytesIO()
    Image.fromarray(covered[:, :, ::-1]).save(buffer, format="PNG")
    key = make_key(tmp_path / "svc", "occluder")
    job = _finished_job(client, key, source_png, buffer.getvalue())
    assert job["state"] == "done", job
    result = _result(client, key, job)
    inner = cv2.erode(disc.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    # Kept (the service's invisible watermark moves a few grey levels); a swap without
    # the occluder paints it over by over 60.
    kept = np.abs(result[inner].astype(int) - covered[inner])
    assert kept.max() <= 8 and kept.mean() < 2
    rows, cols = _face_box(target)
    assert np.abs(result[rows, cols].astype(int) - covered[rows, cols]).mean() > 10  # swapped


def test_a_parser_swaps_only_the_servers_regions_of_the_jobs_faces(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    grace_hopper_rgb: np.ndarray,
) -> None:
    """A server started with a face parser and --mask-regions nose: the tiny parser reads
    the whole face as skin, so the job's face stays the target's (to the watermark)."""
    settings = EngineSettings(parser_model=models["parser"], mask_regions=("nose",))
    client = make_client(data_dir=tmp_path / "svc", engine=settings)
    health = client.get("/healthz").json()
    assert health["parser"] is True and health["mask_regions"] == ["nose"], health
    assert health["occluder"] is False and health["mask_areas"] == []
    key = make_key(tmp_path / "svc", "parser")
    target = np.ascontiguousarray(grace_hopper_rgb[:, :, ::-1])
    buffer = io.BytesIO()
    Image.fromarray(grace_hopper_rgb).save(buffer, format="PNG")
    job = _finished_job(client, key, source_png, buffer.getvalue())
    assert job["state"] == "done", job
    rows, cols = _face_box(target)
    kept = np.abs(_result(client, key, job)[rows, cols].astype(int) - target[rows, cols])
    assert np.median(kept) <= 2, np.median(kept)  # a swap changes it by over 10
    plain = make_client(data_dir=tmp_path / "plain").get("/healthz").json()
    assert plain["parser"] is False and plain["mask_regions"] is None
    areas = EngineSettings(mask_areas=("mouth", "lower-face"))
    parts = make_client(data_dir=tmp_path / "parts", engine=areas).get("/healthz").json()
    assert parts["mask_areas"] == ["lower-face", "mouth"] and parts["parser"] is False


def test_live_sources_take_the_servers_engine_and_it_refuses_a_source_gaze(
    make_client: AppFactory, models: dict[str, Path], source_png: bytes, tmp_path: Path
) -> None:
    settings = _neural(models, enhancer_model=models["enhancer"])
    client = make_client(data_dir=tmp_path / "svc", engine=settings)
    key = make_key(tmp_path / "svc", "live")
    # The offer is refused for its gaze before its SDP is read.
    response = client.post(
        "/v1/live/offer", headers=auth(key), json={"sdp": "v=0", "gaze": "source"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "bad_option"
    assert "gaze" in response.json()["error"]["message"]
    unchecked = client.post("/v1/live/offer", headers=auth(key), json={"sdp": "v=0"})
    assert unchecked.json()["error"]["code"] == "bad_offer", unchecked.text

    sessions = LiveSessions()
    sessions.swap_engine = SwapEngine(settings)
    prepared = sessions.prepare_source(source_png)
    assert isinstance(prepared, EnhancedSwapper)
    assert isinstance(prepared.swapper, NeuralSwapper)
    assert prepared.with_options(fusion=0.4).options.fusion == 0.4
    sessions.check_gaze("target")
    with pytest.raises(ServiceError, match="gaze is the mesh engine's option"):
        sessions.check_gaze("source")
    LiveSessions().check_gaze("source")  # the embedded engine takes it


def test_a_model_that_fails_when_run_is_the_servers_error_not_the_clients(
    make_client: AppFactory,
    models: dict[str, Path],
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model that loads but gives NaN: jobs fail and previews answer with
    engine_error (5xx), a message without the server's paths or the runtime's words;
    the server's log has the detail."""
    settings = EngineSettings(
        engine="inswapper", swapper_model=models["broken"], embedder_model=models["embedder"]
    )
    client = make_client(data_dir=tmp_path / "svc", engine=settings, preview_enabled=True)
    key = make_key(tmp_path / "svc", "broken")
    job = _finished_job(client, key, source_png, target_jpeg)
    assert job["state"] == "failed", job
    assert job["error"] == {"code": "engine_error", "message": ENGINE_ERROR_MESSAGE}, job
    preview = client.post(
        "/v1/preview",
        headers=auth(key),
        files={"source": ("a.png", source_png), "target": ("b.jpg", target_jpeg)},
    )
    assert preview.status_code == 500, preview.text
    assert preview.json()["error"] == {"code": "engine_error", "message": ENGINE_ERROR_MESSAGE}
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "nan.onnx" in logged and "not finite" in logged, logged


def test_a_live_frame_whose_swap_fails_goes_out_unswapped_and_says_why(
    models: dict[str, Path], astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    """The live stream must not stop on a model that fails: the frame goes out as it
    came, its report says why, and the next good swap clears it."""
    from av import VideoFrame

    from faceweave.service.live import FrameProcessor, default_analyser

    source = FaceAnalyser().get_faces(grace_hopper)[0]
    processor = FrameProcessor(default_analyser)
    broken = EngineSettings(
        engine="inswapper", swapper_model=models["broken"], embedder_model=models["embedder"]
    )
    processor.swapper = SwapEngine(broken).swapper(source, SwapOptions())
    frame = VideoFrame.from_ndarray(np.ascontiguousarray(astronaut), format="bgr24")
    frame.pts, frame.time_base = 0, Fraction(1, 90000)
    out, faces = processor.process(frame)
    assert faces == 1
    np.testing.assert_array_equal(out.to_ndarray(format="bgr24"), astronaut)
    assert processor.error == ENGINE_ERROR_MESSAGE
    # A frame without a face tries no swap: no failure to report.
    blank = VideoFrame.from_ndarray(np.zeros((240, 320, 3), np.uint8), format="bgr24")
    blank.pts, blank.time_base = 1, Fraction(1, 90000)
    assert processor.process(blank)[1] == 0 and processor.error is None
    processor.process(frame)
    assert processor.error == ENGINE_ERROR_MESSAGE
    processor.swapper = SwapEngine(_neural(models)).swapper(source, SwapOptions())
    out, faces = processor.process(frame)
    assert processor.error is None
    rows, cols = _face_box(astronaut)
    swapped = out.to_ndarray(format="bgr24").astype(float)
    assert np.abs(swapped - astronaut)[rows, cols].mean() > 15.0


def test_engine_settings_take_string_paths_and_refuse_other_types(
    models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings = EngineSettings(
        engine="inswapper",
        swapper_model=str(models["swapper"]),  # type: ignore[arg-type]
        embedder_model=str(models["embedder"]),  # type: ignore[arg-type]
    )
    assert settings.swapper_model == models["swapper"]
    assert SwapEngine(settings).name == "inswapper"
    with pytest.raises(InputError, match="enhancer_model is a .onnx file's path, got bytes"):
        EngineSettings(enhancer_model=b"g.onnx").validated()  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="enhancer blend must be a number"):
        EngineSettings(enhancer_blend="0.5").validated()  # type: ignore[arg-type]
    assert EngineSettings(enhancer_blend=np.float32(0.5)).validated()  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown execution provider"):
        EngineSettings(execution_provider=["cuda"]).validated()  # type: ignore[arg-type]
    # A fidelity weight for a model without that input: said, not silently dropped.
    with caplog.at_level("WARNING"):
        SwapEngine(EngineSettings(enhancer_model=models["enhancer"], enhancer_weight=0.5))
    assert "has no 'weight' input" in caplog.text


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faceweave", "serve", "--data", str(tmp_path / "data")]
        + ["--port", str(_free_port()), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_serve_checks_its_engine_before_it_starts(tmp_path: Path, models: dict[str, Path]) -> None:
    """Wrong flags are a usage line; an unusable model file is one error line, before the
    server listens (its models load first)."""
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model at all")
    embedder = str(models["embedder"])
    neural = ["--engine", "inswapper", "--embedder-model", embedder]
    cases = [
        (["--engine", "inswapper"], EXIT_USAGE, "needs --swapper-model and --embedder-model"),
        (["--pixel-boost", "2"], EXIT_USAGE, "--pixel-boost is for the neural engine"),
        (["--enhancer-blend", "0.5"], EXIT_USAGE, "--enhancer-blend is for --enhancer-model"),
        (
            ["--frame-enhancer-blend", "0.5"],
            EXIT_USAGE,
            "--frame-enhancer-blend is for --frame-enhancer-model",
        ),
        (
            [
                "--engine",
                "inswapper",
                "--swapper-model",
                str(tmp_path),
                "--embedder-model",
                embedder,
            ],
            EXIT_ERROR,
            "a folder, not a model file",
        ),
        (
            [*neural, "--swapper-model", str(junk)],
            EXIT_ERROR,
            "junk.onnx",
        ),
        (["--enhancer-model", str(junk)], EXIT_ERROR, "junk.onnx"),
        (["--frame-enhancer-model", str(junk)], EXIT_ERROR, "junk.onnx"),
    ]
    for args, code, message in cases:
        run = _serve(tmp_path, *args)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == code, (args, run.stderr)
        assert len(lines) == 1 and message in lines[0], (args, run.stderr)
        assert "Traceback" not in run.stderr
        if "junk.onnx" not in message:  # the flags and files are checked before --data is made
            assert not (tmp_path / "data").exists(), args
    # The server without the rest of the command line: a usage error is one line too.
    module = subprocess.run(
        [sys.executable, "-m", "faceweave.service", "--pixel-boots", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert module.returncode == EXIT_USAGE
    assert module.stderr.splitlines() == [
        "python -m faceweave.service: error: unrecognized arguments: --pixel-boots 2 "
        "(see python -m faceweave.service --help)"
    ], module.stderr
