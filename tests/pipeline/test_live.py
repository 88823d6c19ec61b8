"""run_live with a paced file as the camera: outputs, stats, stop conditions, keys."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
from clips import make_clip  # tests/clips.py: tests/ is on sys.path under pytest
from portraits import small_source_photo  # tests/portraits.py: tests/ is on sys.path
from synthetic_hands import FakeHands, fake_hands_class  # tests/synthetic_hands.py

import faceweave.pipeline.video_job as video_job
from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.dlib_backend import DlibIdentity
from faceweave.analysis.identity_worker import IdentityWorker
from faceweave.apps import cli
from faceweave.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, UsageError
from faceweave.io.camera import FilePacer, Mirrored
from faceweave.io.image import write_image
from faceweave.io.outputs import FileOutput
from faceweave.pipeline.live import LiveControls, run_live
from faceweave.types import Face

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live_clip(tmp_path_factory: pytest.TempPathFactory, astronaut: np.ndarray) -> Path:
    """2 s of the sliding astronaut at 320x240, 30 fps."""
    return make_clip(
        tmp_path_factory.mktemp("live") / "talk.mp4", astronaut, frames=60, size=(320, 240)
    )


def test_mirrored_source_flips_each_frame_and_keeps_the_counters(live_clip: Path) -> None:
    plain = [p.image for p in FilePacer(live_clip, realtime=False)]
    mirrored = Mirrored(FilePacer(live_clip, realtime=False))
    assert (mirrored.width, mirrored.height, mirrored.fps) == (320, 240, 30.0)
    flipped = [p.image for p in mirrored]
    assert len(flipped) == len(plain) == mirrored.captured == 60
    for a, b in zip(plain, flipped, strict=True):
        np.testing.assert_array_equal(a[:, ::-1], b)
    assert np.abs(plain[0].astype(int) - flipped[0]).mean() > 5  # the clip is not symmetric
    mirrored.close()
    mirrored.close()  # twice is safe, as for the sources it wraps


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_a_phone_video_plays_upright(
    rotation: int, live_clip: Path, tmp_path: Path, astronaut: np.ndarray
) -> None:
    """Stored sideways with a display rotation: played as a player shows it."""
    turned = make_clip(
        tmp_path / "phone.mp4", astronaut, frames=60, size=(320, 240), display_rotation=rotation
    )
    pacer = FilePacer(turned, realtime=False)
    assert (pacer.width, pacer.height) == (320, 240)
    upright = [p.image for p in pacer]
    plain = [p.image for p in FilePacer(live_clip, realtime=False)]
    assert upright[0].shape == plain[0].shape == (240, 320, 3)
    assert np.abs(upright[30].astype(int) - plain[30]).mean() < 4.0


def test_a_looped_file_with_no_frame_ends(tmp_path: Path, astronaut: np.ndarray) -> None:
    """Its header opens, no frame decodes: looping it had reopened it forever."""
    whole = make_clip(tmp_path / "whole.mkv", astronaut, frames=10, size=(64, 48), audio=False)
    head = tmp_path / "head.mkv"
    head.write_bytes(whole.read_bytes()[:600])
    pacer = FilePacer(head, loop=True, realtime=False)
    packets: list[object] = []
    errors: list[BaseException] = []

    def play() -> None:
        try:
            packets.extend(pacer)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    reader = threading.Thread(target=play, daemon=True)
    reader.start()
    reader.join(20.0)
    alive = reader.is_alive()
    pacer.close()
    assert not alive and packets == [] and errors == []


def test_a_file_played_in_real_time_is_stamped_when_each_frame_is_due(
    astronaut: np.ndarray, tmp_path: Path
) -> None:
    """As a camera stamps a frame when it is exposed: a frame read a little late (the
    models loading) had been stamped when read, and recorded 8 ms after the one before
    it; kept frames are a whole number of frame periods apart."""
    clip = make_clip(tmp_path / "c.mkv", astronaut, frames=8, size=(64, 48), audio=False)
    stamps = []
    for packet in FilePacer(clip):
        stamps.append(packet.captured_at)
        if len(stamps) == 1:
            time.sleep(0.045)  # (the next frame is read 12 ms late: still kept)
    gaps = np.diff(stamps) * 30.0
    assert len(stamps) >= 7
    np.testing.assert_allclose(gaps, np.round(gaps), atol=0.05)  # (the clip: 33 or 34 ms)


def test_controls_follow_the_keys() -> None:
    controls = LiveControls(fusion=0.95)
    for key in "n+-e?":
        controls.on_key(key)
    assert controls.source_index == 1
    assert controls.fusion == pytest.approx(0.9)  # +0.1 capped at 1, then -0.1
    assert controls.enabled is False
    # Caps Lock on: the letters still work.
    for key in "NEQ":
        controls.on_key(key)
    assert controls.source_index == 2 and controls.enabled and controls.quit_requested


def test_run_live_takes_one_source_and_options_as_a_mapping(
    live_clip: Path, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """As swap_video does: one source on its own, and options as a mapping (checked as
    Swapper's keywords; the fusion starts there)."""
    capture = FilePacer(live_clip)
    output = FileOutput(tmp_path / "one.mkv", capture.width, capture.height, capture.fps)
    stats = run_live(
        capture,
        output,
        grace_hopper_face,
        analyser=analyser,
        options={"fusion": 0.6, "blend": "alpha"},
        handle_sigint=False,
    )
    assert stats.frames_processed > 0
    with pytest.raises(UsageError, match="fuzion"):
        run_live(capture, output, grace_hopper_face, options={"fuzion": 1}, handle_sigint=False)


def test_a_live_session_tracks_hands_only_with_mask_hands(
    live_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With mask_hands one tracking hand finder follows the session's frames (looked at
    where a face is swapped) and is closed at its end; without it none is made."""
    made: list[FakeHands] = []

    def none_round(frame: np.ndarray, boxes: list[Any]) -> list[Any]:
        assert boxes
        return []

    monkeypatch.setattr(video_job, "MediaPipeHands", fake_hands_class(made, none_round))
    for options in ({}, {"mask_hands": True}):
        capture = FilePacer(live_clip)
        output = FileOutput(tmp_path / "hands.mkv", capture.width, capture.height, capture.fps)
        stats = run_live(
            capture,
            output,
            grace_hopper_face,
            analyser=analyser,
            options=options,
            handle_sigint=False,
        )
        assert stats.frames_processed > 0
    assert len(made) == 1 and made[0].kwargs == {"tracking": True}
    # (+1: the first frame warms the models up, hands too, and is not shown.)
    assert 0 < made[0].calls <= stats.frames_processed + 1
    assert stats.dropped_by["warm_up"] == 1
    assert made[0].closed is True


def test_a_live_recording_is_marked_as_synthetic(
    live_clip: Path, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """A recording (``live -o FILE``) carries the watermark and the labels a swapped
    video file does (it had neither); without a job id it carries none."""
    from faceweave.provenance import verify, watermark_id

    marked, plain = tmp_path / "marked.mkv", tmp_path / "plain.mkv"
    for path, job in ((marked, "live-1"), (plain, None)):
        capture = FilePacer(live_clip)
        output = FileOutput(path, capture.width, capture.height, capture.fps, watermark=job)
        run_live(capture, output, [grace_hopper_face], analyser=analyser, handle_sigint=False)
    report = verify(marked)
    assert report.marked and report.watermark.payload == watermark_id("live-1")
    assert report.labels
    assert not verify(plain).marked and not verify(plain).labels


def test_run_live_records_a_file_with_stats(
    live_clip: Path, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    capture = FilePacer(live_clip)
    output = FileOutput(tmp_path / "rec.mp4", capture.width, capture.height, capture.fps)
    stats = run_live(
        capture,
        output,
        [grace_hopper_face],
        analyser=analyser,
        sample_every=0.5,
        handle_sigint=False,
    )
    assert stats.stopped_by == "end"
    assert stats.frames_captured == 60
    assert stats.frames_processed + stats.frames_dropped == stats.frames_captured
    assert stats.frames_processed >= 30
    lat = stats.latency_ms
    assert 0 < lat.p50 <= lat.p95 <= lat.p99 < 1000
    assert {"source", "analyse", "swap", "sink"} <= set(stats.stage_ms)
    assert stats.samples and all(s["rss_mib"] > 0 for s in stats.samples)
    with av.open(str(tmp_path / "rec.mp4")) as container:
        frames = list(container.decode(video=0))
    assert len(frames) == stats.frames_processed
    assert 1.6 < frames[-1].time < 2.2  # real-time pacing kept in the timestamps
    json.dumps(stats.as_dict())


def _flash_clip(path: Path) -> Path:
    """1 s at 30 fps, black but for a white flash at 0.5 s, with a 1 kHz beep at
    0.5 s and silence elsewhere: its picture and sound mark the same moment. The
    sound runs 0.2 s past the picture, as sound tracks often do."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=30, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 160, 120, "yuv420p"
        sound = out.add_stream("aac", rate=48000, layout="mono")
        for index in range(30):
            image = np.full((120, 160, 3), 255 if 15 <= index < 18 else 0, np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        for begin in range(0, 57600, 1024):
            t = np.arange(begin, begin + 1024) / 48000
            beep = np.where((t >= 0.5) & (t < 0.6), 0.5 * np.sin(2 * np.pi * 1000 * t), 0.0)
            chunk = av.AudioFrame.from_ndarray(
                beep.astype(np.float32)[None], format="fltp", layout="mono"
            )
            chunk.sample_rate, chunk.pts = 48000, begin
            out.mux(sound.encode(chunk))
        out.mux(sound.encode(None))
    return path


def _flashes_and_beeps(path: Path) -> tuple[list[float], list[float]]:
    """Seconds where the white flashes and the beeps begin in a recording."""
    with av.open(str(path)) as container:
        bright = [
            (f.time, f.to_ndarray(format="gray").mean() > 128) for f in container.decode(video=0)
        ]
    flashes = [
        t for (t, on), (_, before) in zip(bright[1:], bright, strict=False) if on and not before
    ]
    with av.open(str(path)) as container:
        frames = list(container.decode(audio=0))
    rate, start = frames[0].sample_rate, float(frames[0].time)
    samples = np.concatenate([f.to_ndarray()[0] for f in frames])
    window = rate // 200  # 5 ms
    loud = np.abs(samples[: samples.size // window * window]).reshape(-1, window).max(1) > 0.2
    edges = np.flatnonzero(loud[1:] & ~loud[:-1]) + 1
    return flashes, [start + edge * window / rate for edge in edges]


def test_the_input_videos_own_sound_stays_with_its_frames(
    tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """live --audio input: the file's sound played as its frames are, loop after loop
    (each pass's sound cut where the next pass's picture starts: laid end to end, the
    second pass's had come 0.2 s late)."""
    from faceweave.io.microphone import AudioCapture

    clip = _flash_clip(tmp_path / "flash.mp4")
    capture = FilePacer(clip, loop=True)
    sound = AudioCapture.of_file(clip, capture)
    output = FileOutput(tmp_path / "rec.mp4", 160, 120, capture.fps, audio=sound)
    run_live(
        capture, output, [grace_hopper_face], analyser=analyser, duration=2.3, handle_sigint=False
    )
    flashes, beeps = _flashes_and_beeps(tmp_path / "rec.mp4")
    # Each pass's flash and beep where the file has them: a pass apart, together (the
    # flash a frame or two later where a loaded machine dropped its first frames).
    # The recording starts at the first frame shown: the one after the frame that
    # warmed the models up (and any the pacer dropped meanwhile).
    assert len(beeps) == 2 and beeps[1] - beeps[0] == pytest.approx(1.0, abs=0.02), beeps
    assert 0.3 <= beeps[0] <= 0.52, (flashes, beeps)
    assert flashes == pytest.approx(beeps, abs=0.07), (flashes, beeps)


def test_run_live_stops_after_duration(
    live_clip: Path, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    capture = FilePacer(live_clip, loop=True)
    output = FileOutput(tmp_path / "rec.mkv", capture.width, capture.height, capture.fps)
    controls = LiveControls(enabled=False)
    stats = run_live(
        capture,
        output,
        [grace_hopper_face],
        analyser=analyser,
        duration=0.7,
        controls=controls,
        handle_sigint=False,
    )
    assert stats.stopped_by == "duration"
    assert 0.6 < stats.wall_s < 2.0
    assert (tmp_path / "rec.mkv").exists()
    # Every frame read is counted: shown, or dropped (the frames in the stages' hands
    # at the stop too, which had been counted nowhere).
    assert stats.frames_captured == stats.frames_processed + stats.frames_dropped, stats
    with pytest.raises(UsageError):
        run_live(capture, output, [grace_hopper_face], selector="reference")


def test_a_session_stopped_while_it_warms_up_keeps_that_frame(
    live_clip: Path, tmp_path: Path, grace_hopper_face: Face
) -> None:
    """Stopped (Ctrl-C, q, --duration) during the first frame's warm-up: that frame is
    the recording (it had been an error, "no frames were written")."""
    capture = FilePacer(live_clip, loop=True)
    output = FileOutput(tmp_path / "rec.mkv", capture.width, capture.height, capture.fps)
    # A fresh analyser: its first frame takes long enough for the stop to come first.
    stats = run_live(capture, output, [grace_hopper_face], duration=0.001, handle_sigint=False)
    assert stats.stopped_by == "duration" and stats.frames_processed == 1
    assert "warm_up" not in stats.dropped_by
    assert stats.frames_captured == stats.frames_processed + stats.frames_dropped, stats
    with av.open(str(tmp_path / "rec.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_stop_signals_end_a_session_as_q_does(
    signum: int,
    live_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
) -> None:
    """``docker stop`` or a closed terminal: the session ends, its recording kept."""
    before = signal.getsignal(signum)
    capture = FilePacer(live_clip, loop=True)
    output = FileOutput(tmp_path / "rec.mp4", capture.width, capture.height, capture.fps)
    timer = threading.Timer(0.7, os.kill, args=(os.getpid(), signum))
    timer.start()
    try:
        stats = run_live(
            capture,
            output,
            [grace_hopper_face],
            analyser=analyser,
            duration=20.0,
            controls=LiveControls(enabled=False),
        )
    finally:
        timer.cancel()
    assert stats.stopped_by == "interrupt" and stats.wall_s < 10.0
    with av.open(str(tmp_path / "rec.mp4")) as container:
        assert len(list(container.decode(video=0))) == stats.frames_processed > 0
    assert signal.getsignal(signum) == before


def _still_clip(path: Path, picture: np.ndarray, frames: int = 30) -> Path:
    """A clip of one unchanging picture (so any output frame compares with it)."""
    height, width = picture.shape[:2]
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"preset": "ultrafast", "crf": "12"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for _ in range(frames):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="bgr24")))
        out.mux(stream.encode())
    return path


def test_run_live_reference_swaps_only_that_person(
    tmp_path: Path,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    astronaut_face: Face,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the reference's face is swapped; a known face's rechecks ran in a child
    process, which ends with the session."""
    workers: list[IdentityWorker] = []
    start = IdentityWorker.start

    def recorded(identity: DlibIdentity) -> IdentityWorker | None:
        worker = start(identity)
        assert worker is not None
        workers.append(worker)
        return worker

    monkeypatch.setattr(IdentityWorker, "start", staticmethod(recorded))
    height = 300
    left = cv2.resize(astronaut, (height, height))
    right = cv2.resize(
        grace_hopper, (round(grace_hopper.shape[1] * height / grace_hopper.shape[0]), height)
    )
    scene = np.ascontiguousarray(np.hstack([left, right]))
    scene = scene[:, : scene.shape[1] // 2 * 2]
    clip = _still_clip(tmp_path / "pair.mp4", scene, frames=60)
    # The models load before the clip plays: it is paced in real time (2 s), and loading
    # them on its first frames had left two of them processed on a slow run.
    analyser = FaceAnalyser(mode="video")
    assert all(face.embedding.shape == (128,) for face in analyser.get_faces(scene))
    analyser.reset()
    capture = FilePacer(clip)
    output = FileOutput(tmp_path / "rec.mkv", capture.width, capture.height, capture.fps)
    stats = run_live(
        capture,
        output,
        [astronaut_face],  # the astronaut's face goes onto ...
        analyser=analyser,
        selector="reference",
        references=[grace_hopper_face],  # ... Grace Hopper only
        handle_sigint=False,
    )
    assert stats.frames_processed >= 5
    assert 1 <= stats.frames_swapped <= stats.frames_processed
    assert "no face swapped" not in stats.summary()
    with av.open(str(tmp_path / "rec.mkv")) as container:
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    with av.open(str(clip)) as container:
        original = next(container.decode(video=0)).to_ndarray(format="bgr24")
    faces = sorted(FaceAnalyser().get_faces(scene), key=lambda f: f.bbox[0])
    assert len(faces) == 2

    def change(frame: np.ndarray, face: Face) -> float:
        x0, y0, x1, y1 = (int(v) for v in face.bbox)
        region = (slice(y0, y1), slice(x0, x1))
        return float(np.abs(frame[region].astype(np.float32) - original[region]).mean())

    last = frames[-1]
    kept, swapped = change(last, faces[0]), change(last, faces[1])
    assert kept < 3.0, (kept, swapped)  # the astronaut (not the reference) is left alone
    assert swapped > 8.0, (kept, swapped)  # Grace Hopper is swapped
    (worker,) = workers
    assert not worker.alive and worker._process.returncode == 0


def test_live_window_without_display_is_one_line(
    live_clip: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    source = tmp_path / "src.png"
    write_image(source, np.zeros((64, 64, 3), np.uint8))
    code = cli.main(["live", "--source", str(source), "--input", str(live_clip)])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "faceweave: error: no display: use --output FILE|udp://|rtmp://|virtualcam\n"


def test_live_finds_a_small_source_face_as_faceweave_swap_does(
    live_clip: Path, tmp_path: Path, astronaut: np.ndarray
) -> None:
    """A source photo whose face is small in a large frame (the astronaut's, 55 px
    wide in 1080p) is found as `faceweave swap` finds it (tiles): `faceweave live`
    had said it showed no face (exit 3)."""
    source = tmp_path / "small.png"
    write_image(source, small_source_photo(astronaut))
    recording = tmp_path / "rec.mp4"
    argv = ["live", "--source", str(source), "--input", str(live_clip)]
    assert cli.main([*argv, "--output", str(recording)]) == EXIT_OK
    with av.open(str(recording)) as container:
        assert sum(1 for _ in container.decode(video=0)) > 0


def _blank_source_no_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A source photo (blank: never analysed), and models that fail if loaded: the
    checks under test come before them."""

    def no_models(*args: object, **kwargs: object) -> None:
        raise AssertionError("the models were loaded")

    monkeypatch.setattr("faceweave.FaceAnalyser", no_models)
    monkeypatch.setattr("faceweave.analysis.analyser.FaceAnalyser", no_models)  # photo_analyser's
    source = tmp_path / "src.png"
    write_image(source, np.zeros((64, 64, 3), np.uint8))
    return source


@pytest.mark.parametrize(
    ("output", "audio", "code", "message"),
    [
        ("virtualcam", "lavfi:sine", EXIT_USAGE, "live sound goes into a recording or a stream"),
        ("out.mp4", "microphone", EXIT_USAGE, "audio device 'microphone': expected FORMAT:NAME"),
        ("out.mp4", "lavfi:nosuch", EXIT_ERROR, "cannot open audio device lavfi:nosuch"),
    ],
)
def test_live_audio_errors_are_one_line_before_the_models_load(
    output: str,
    audio: str,
    code: int,
    message: str,
    live_clip: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = _blank_source_no_models(tmp_path, monkeypatch)
    argv = ["live", "-s", str(source), "--input", str(live_clip), "--audio", audio]
    target = output if output == "virtualcam" else str(tmp_path / output)
    assert cli.main([*argv, "--output", target]) == code
    err = capsys.readouterr().err
    assert err.startswith(f"faceweave: error: {message}"), err
    assert err.count("\n") == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["src.png"]


@pytest.mark.slow
def test_live_cli_file_to_file_with_stats(
    live_clip: Path, tmp_path: Path, grace_hopper: np.ndarray
) -> None:
    source = tmp_path / "me.png"
    write_image(source, grace_hopper)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("FACEWEAVE_DEBUG", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "faceweave",
            "live",
            "--source",
            str(source),
            "--input",
            str(live_clip),
            "--output",
            str(tmp_path / "out.mp4"),
            "--duration",
            "2",
            "--stats",
            str(tmp_path / "s.json"),
            "--mirror",
            "--audio",
            "lavfi:sine=frequency=440",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == EXIT_OK, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    # Grace Hopper wears glasses: one line of advice on the source, then the summary.
    assert len(lines) == 2, completed.stderr
    assert lines[0].startswith("faceweave: warning: source face wears glasses"), lines[0]
    assert "latency p50" in lines[1], completed.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    for key in ("p50", "p95", "p99"):
        assert stats["latency_ms"][key] > 0
    assert stats["frames_captured"] >= 50 and stats["frames_processed"] > 0
    assert {"analyse", "swap"} <= set(stats["stage_ms"])
    with av.open(str(tmp_path / "out.mp4")) as container:
        assert container.streams.video[0].frames == stats["frames_processed"]
        video, audio = container.streams.video[0], container.streams.audio[0]
        # --audio: the sound heard from the first frame to the end of the last.
        assert audio.codec_context.name == "aac"
        assert float(audio.duration * audio.time_base) == pytest.approx(
            float(video.duration * video.time_base), abs=0.1
        )
        first = next(container.decode(video=0)).to_ndarray(format="bgr24").astype(int)
    with av.open(str(live_clip)) as container:
        camera = [
            f.to_ndarray(format="bgr24").astype(int)
            for f, _ in zip(container.decode(video=0), range(20), strict=False)
        ]
    # --mirror: the output is the camera's picture flipped left to right (the camera's
    # frame it shows: the first one warms the models up and is not shown, and the
    # pacer may drop some meanwhile).
    shown = min(camera, key=lambda frame: np.abs(first - frame[:, ::-1]).mean())
    assert np.abs(first - shown[:, ::-1]).mean() < 0.5 * np.abs(first - shown).mean()


def test_a_session_that_showed_no_frame_says_so_not_nan() -> None:
    from faceweave.pipeline.live import LiveStats
    from faceweave.pipeline.stages import Timing
    from faceweave.pipeline.tracking import TrackerCounters

    stats = LiveStats(3, 0, 3, {"capture": 3}, Timing.of([]), 0.0, 0.1, {}, TrackerCounters())
    assert stats.summary() == "0 frames in 0.1 s (0.0 fps), no frame shown, 3 captured, 3 dropped"
    # Frames shown, none swapped (no face, or none matching the reference): it says so.
    shown = LiveStats(3, 3, 0, {}, Timing.of([20.0, 30.0, 40.0]), 30.0, 0.1, {}, TrackerCounters())
    assert shown.summary().endswith("3 captured, 0 dropped, no face swapped")


def test_audio_input_needs_an_input_video_with_sound(
    tmp_path: Path,
    astronaut: np.ndarray,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = _blank_source_no_models(tmp_path, monkeypatch)
    argv = ["live", "-s", str(source), "--output", str(tmp_path / "o.mp4"), "--audio", "input"]
    assert cli.main([*argv, "--camera", "0"]) == EXIT_USAGE
    assert "--audio input is the --input video's own sound" in capsys.readouterr().err
    silent = make_clip(tmp_path / "silent.mp4", astronaut, frames=5, size=(64, 48), audio=False)
    assert cli.main([*argv, "--input", str(silent)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err == f"faceweave: error: {silent}: no sound to play\n", err


def test_a_second_stop_signal_is_named_not_a_ctrl_c() -> None:
    """The first SIGTERM ends a live session as ``q`` does; a second one during the
    clean-up raised a plain KeyboardInterrupt, and the command line exited 130
    ("interrupted") instead of 143. It is now a StopSignal with its number; a second
    Ctrl-C stays a KeyboardInterrupt."""
    from faceweave.pipeline.live import _sigint_stops
    from faceweave.runtime import StopSignal

    for signum, raised in ((signal.SIGTERM, StopSignal), (signal.SIGINT, KeyboardInterrupt)):
        stops: list[int] = []
        with (
            pytest.raises(raised) as caught,
            _sigint_stops(functools.partial(stops.append, 1), enabled=True),
        ):
            os.kill(os.getpid(), signum)
            assert stops == [1]
            os.kill(os.getpid(), signum)
        assert (getattr(caught.value, "signum", None) == signum) == (raised is StopSignal)


def test_a_still_image_as_the_input_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It had played as a one-frame video: a 0.2 s session, exit 0, and no word why."""
    source = _blank_source_no_models(tmp_path, monkeypatch)
    argv = ["live", "--source", str(source), "--input", str(source), "-o", "out.mp4"]
    assert cli.main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("faceweave: error: --input plays a video as the camera;"), err
