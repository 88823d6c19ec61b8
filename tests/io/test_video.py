"""Video io: synthetic clips written with PyAV itself, transcoded and checked packet by packet."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from faceweave.errors import InputError, OutputError, UnsupportedFormatError
from faceweave.io.video import (
    VideoFrame,
    VideoReader,
    VideoWriter,
    check_video_encoder,
    encoder_settings,
    probe_video,
    transcode,
    video_extension,
)

WIDTH, HEIGHT, FPS = 64, 48, 30
SAMPLE_RATE = 44100
VFR_TIME_BASE = Fraction(1, 90000)


def _image(index: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """A frame showing its index as 8 black/white bars on top and a red block bottom-left."""
    image = np.full((height, width, 3), 128, np.uint8)
    bar = width // 8
    for bit in range(8):
        image[: height // 2, bit * bar : (bit + 1) * bar] = 255 if index >> bit & 1 else 0
    image[height // 2 :, : width // 2] = (0, 0, 200)
    return image


def _index_of(image: np.ndarray) -> int:
    height, width = image.shape[:2]
    bar = width // 8
    top = image[: height // 2, :, 1].astype(float)
    bits = [top[:, bit * bar + 2 : (bit + 1) * bar - 2].mean() > 128 for bit in range(8)]
    return sum(1 << bit for bit, on in enumerate(bits) if on)


def make_clip(
    path: Path,
    *,
    frames: int = 30,
    width: int = WIDTH,
    height: int = HEIGHT,
    audio: bool = True,
    video: bool = True,
    pts: list[int] | None = None,
    time_base: Fraction = Fraction(1, FPS),
    rotation: int | None = None,
    options: dict[str, str] | None = None,
) -> Path:
    """Write a clip: x264 frames (given pts, else 0, 1, 2... at 1/FPS) and a 440 Hz AAC sine."""
    with av.open(str(path), "w", options=options or {}) as out:
        if video:
            stream = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.codec_context.time_base = time_base
            if rotation is not None:
                stream.set_display_rotation(rotation)
        if audio:
            audio_stream = out.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        if video:
            for index in range(frames):
                frame = av.VideoFrame.from_ndarray(_image(index, width, height), format="bgr24")
                frame.pts = pts[index] if pts is not None else index
                frame.time_base = time_base
                out.mux(stream.encode(frame))
            out.mux(stream.encode(None))
        if audio:
            total = int(SAMPLE_RATE * frames / FPS)
            for begin in range(0, total, 1024):
                count = min(1024, total - begin)
                t = np.arange(begin, begin + count) / SAMPLE_RATE
                samples = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]
                frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
                frame.sample_rate = SAMPLE_RATE
                frame.pts = begin
                out.mux(audio_stream.encode(frame))
            out.mux(audio_stream.encode(None))
    return path


def audio_packets(path: Path) -> list[tuple[float, bytes]]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        return [
            (float(packet.pts * stream.time_base), bytes(packet))
            for packet in container.demux(stream)
            if packet.size
        ]


def video_times(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        return [float(frame.time) for frame in container.decode(video=0)]


def decoded_indices(path: Path) -> list[int]:
    with VideoReader(path) as reader:
        return [_index_of(frame.image) for frame in reader]


def leftovers(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir() if entry.name.startswith("."))


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1 s, 30 frames of 64x48 at 30 fps with mono AAC audio, mp4."""
    return make_clip(tmp_path_factory.mktemp("clip") / "clip.mp4")


# --- probing and reading ------------------------------------------------------------------------


def test_probe_reports_the_stream(clip: Path) -> None:
    info = probe_video(clip)
    assert (info.width, info.height) == (WIDTH, HEIGHT)
    assert info.fps == pytest.approx(FPS)
    assert info.frame_count == 30
    assert info.duration == pytest.approx(1.0, abs=1 / FPS)
    assert info.codec == "h264"
    assert info.has_audio and info.audio_codec == "aac"
    assert info.rotation == 0


def test_reader_yields_bgr_frames_with_timestamps(clip: Path) -> None:
    with VideoReader(clip) as reader:
        frames = list(reader)
    assert len(frames) == 30
    first = frames[0]
    assert isinstance(first, VideoFrame)
    assert first.image.shape == (HEIGHT, WIDTH, 3) and first.image.dtype == np.uint8
    assert [frame.index for frame in frames] == list(range(30))
    assert [_index_of(frame.image) for frame in frames] == list(range(30))
    times = [frame.time for frame in frames]
    assert times == pytest.approx([i / FPS for i in range(30)], abs=1e-3)
    # the red block is bottom-left: BGR order, not RGB
    assert first.image[-5, 5, 2] > 150 and first.image[-5, 5, 0] < 50
    assert reader.warnings == []


def test_reader_trims(clip: Path) -> None:
    with VideoReader(clip, start=0.3, end=0.6) as reader:
        frames = list(reader)
    assert [_index_of(frame.image) for frame in frames] == list(range(9, 18))
    assert frames[0].index == 0 and frames[0].time == pytest.approx(0.3, abs=1e-3)


# --- transcoding ----------------------------------------------------------------------------


def test_transcode_identity_keeps_frames_duration_and_audio_packets(
    clip: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.mp4"
    calls: list[tuple[int, int]] = []
    stats = transcode(clip, out, lambda f: f.image, progress=lambda d, t: calls.append((d, t)))
    assert stats["frames"] == 30 and stats["audio"] == "copy"
    assert stats["decode_warnings"] == [] and stats["decode_errors"] == 0
    assert calls[-1] == (30, 30)
    source, result = probe_video(clip), probe_video(out)
    assert result.frame_count == source.frame_count
    assert result.duration == pytest.approx(source.duration, abs=1 / FPS)
    assert decoded_indices(out) == list(range(30))
    assert audio_packets(out) == audio_packets(clip)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("extension", [".mkv", ".mov", ".avi"])
def test_transcode_copies_audio_into_other_containers(
    clip: Path, tmp_path: Path, extension: str
) -> None:
    out = tmp_path / f"out{extension}"
    stats = transcode(clip, out)
    assert stats["audio"] == "copy"
    assert decoded_indices(out) == list(range(30))
    source = audio_packets(clip)
    copied = audio_packets(out)
    assert [data for _, data in copied] == [data for _, data in source]
    # Matroska and AVI shift the AAC priming packet (-23 ms) to 0 and store coarser
    # timestamps: compare the spacing, and the audio/video offset where it is kept.
    source_times = np.array([t for t, _ in source])
    copied_times = np.array([t for t, _ in copied])
    np.testing.assert_allclose(
        copied_times - copied_times[0], source_times - source_times[0], atol=1.5e-3
    )
    if extension != ".avi":  # AVI has no timestamps finer than a frame
        offset = copied_times[0] - video_times(out)[0]
        assert offset == pytest.approx(source_times[0] - video_times(clip)[0], abs=1.5e-3)


def test_webm_encodes_vp9_and_reencodes_aac_to_opus(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.webm"
    stats = transcode(clip, out)
    assert stats["audio"] == "encode"
    assert any("re-encoded" in line for line in stats["writer_warnings"])
    info = probe_video(out)
    assert info.codec == "vp9" and info.audio_codec == "opus"
    assert info.duration == pytest.approx(1.0, abs=0.05)
    assert len(decoded_indices(out)) == 30


def _clip_with_audio(path: Path, codec: str, layout: str, rate: int | None = None) -> Path:
    """1 s of 64x48 video at 30 fps and a 440 Hz tone in ``codec`` with ``layout``."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        rate = rate or (48000 if codec == "libopus" else SAMPLE_RATE)
        sound = out.add_stream(codec, rate=rate)
        sound.layout = layout
        # An encoder takes its own sample format: resample the float tone into it.
        resampler = av.AudioResampler(
            format=sound.codec_context.codec.audio_formats[0].name, layout=layout, rate=rate
        )
        for index in range(FPS):
            frame = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        channels = len(av.AudioLayout(layout).channels)
        for begin in range(0, rate, 960):
            t = np.arange(begin, begin + 960) / rate
            tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            chunk = av.AudioFrame.from_ndarray(
                np.repeat(tone[None], channels, axis=0), format="fltp", layout=layout
            )
            chunk.sample_rate, chunk.pts = rate, begin
            for ready in resampler.resample(chunk):
                out.mux(sound.encode(ready))
        for ready in resampler.resample(None):
            out.mux(sound.encode(ready))
        out.mux(sound.encode(None))
    return path


def _audio_seconds(path: Path) -> float:
    with av.open(str(path)) as container:
        return sum(frame.samples / frame.sample_rate for frame in container.decode(audio=0))


@pytest.mark.parametrize(
    ("codec", "layout", "source_ext", "out_ext", "mode", "out_codec"),
    [
        # Listed by FFmpeg's MP4 and MOV muxers but refused when written: re-encoded.
        ("libopus", "stereo", ".mkv", ".mov", "encode", "aac"),
        ("flac", "stereo", ".mkv", ".mov", "encode", "aac"),
        ("pcm_s16le", "stereo", ".mkv", ".mp4", "encode", "aac"),
        # Samples the AAC encoder cannot take as they are (8-bit, 16-bit integers).
        ("pcm_u8", "mono", ".avi", ".mp4", "encode", "aac"),
        ("adpcm_ima_wav", "stereo", ".avi", ".mkv", "encode", "aac"),
        ("adpcm_ima_wav", "stereo", ".avi", ".mov", "encode", "aac"),
        # MP3 is copied into MP4 (its decoder is called mp3float, its codec mp3).
        ("libmp3lame", "stereo", ".mkv", ".mp4", "copy", "mp3"),
    ],
)
def test_audio_the_container_cannot_hold_is_reencoded(
    codec: str,
    layout: str,
    source_ext: str,
    out_ext: str,
    mode: str,
    out_codec: str,
    tmp_path: Path,
) -> None:
    source = _clip_with_audio(tmp_path / f"in{source_ext}", codec, layout)
    out = tmp_path / f"out{out_ext}"
    stats = transcode(source, out)
    assert stats["audio"] == mode
    with av.open(str(out)) as container:
        assert container.streams.audio[0].codec_context.codec.canonical_name == out_codec
    assert _audio_seconds(out) == pytest.approx(_audio_seconds(source), abs=0.06)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("codec", "layout", "rate", "out_ext", "out_rate", "out_layout"),
    [
        # Sample rates AAC has no table for: the next one up, or its highest.
        ("pcm_s16le", "stereo", 192000, ".mp4", 96000, "stereo"),
        ("pcm_s16le", "mono", 50000, ".mp4", 64000, "mono"),
        # A layout Opus refuses (2.1): the usual one of its channel count.
        ("flac", "2.1", 44100, ".webm", 48000, "3.0"),
        # AAC takes 2.1 as it is.
        ("flac", "2.1", 44100, ".mp4", 44100, "2.1"),
    ],
)
def test_audio_is_reencoded_at_a_rate_and_layout_the_encoder_takes(
    codec: str,
    layout: str,
    rate: int,
    out_ext: str,
    out_rate: int,
    out_layout: str,
    tmp_path: Path,
) -> None:
    """These had failed the whole job ('avcodec_open2 returned 22')."""
    source = _clip_with_audio(tmp_path / "in.mkv", codec, layout, rate)
    out = tmp_path / f"out{out_ext}"
    assert transcode(source, out)["audio"] == "encode"
    with av.open(str(out)) as container:
        context = container.streams.audio[0].codec_context
        assert (context.sample_rate, context.layout.name) == (out_rate, out_layout)
    assert _audio_seconds(out) == pytest.approx(1.0, abs=0.06)


def _late_tone_clip(path: Path, codec: str, start: float) -> Path:
    """1 s of video; a 440 Hz tone in ``codec`` from ``start`` s to 1 s (nothing before)."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        sound = out.add_stream(codec, rate=SAMPLE_RATE, layout="mono")
        resampler = av.AudioResampler(
            format=sound.codec_context.codec.audio_formats[0].name, layout="mono"
        )
        for index in range(FPS):
            frame = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        first = round(start * SAMPLE_RATE)
        for begin in range(first, SAMPLE_RATE, 1024):
            t = np.arange(begin, begin + 1024) / SAMPLE_RATE
            tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]
            chunk = av.AudioFrame.from_ndarray(tone, format="fltp", layout="mono")
            chunk.sample_rate, chunk.pts = SAMPLE_RATE, begin
            for ready in resampler.resample(chunk):
                out.mux(sound.encode(ready))
        out.mux(sound.encode(None))
    return path


def _first_sound(path: Path) -> float:
    """Seconds from the first video frame to the first loud sample, as a player plays
    it (AVI: end to end from 0)."""
    with av.open(str(path)) as container:
        frames = list(container.decode(audio=0))
    with av.open(str(path)) as container:
        video_start = float(next(container.decode(video=0)).time or 0.0)
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.float64)
    rate = frames[0].sample_rate
    if path.suffix == ".avi":  # no audio timestamps: sound plays from 0
        start = 0.0
    else:
        start = float(frames[0].time or 0.0)
    loud = np.flatnonzero(np.abs(samples) > 0.2 * np.abs(samples).max())
    return start + loud[0] / rate - video_start


@pytest.mark.parametrize("codec", ["flac", "pcm_s16le"])
def test_avi_keeps_a_late_track_and_a_trim_on_time(codec: str, tmp_path: Path) -> None:
    """AVI has no audio timestamps: a track starting 0.5 s in had played from 0, and a
    trim's first packet early or late. Such tracks are now re-encoded, cut to the
    sample and led by silence (AAC's priming made up for)."""
    source = _late_tone_clip(tmp_path / "late.mkv", codec, 0.5)
    assert _first_sound(source) == pytest.approx(0.5, abs=0.005)
    stats = transcode(source, tmp_path / "late.avi")
    assert any("AVI keeps no audio timestamps" in line for line in stats["writer_warnings"])
    assert _first_sound(tmp_path / "late.avi") == pytest.approx(0.5, abs=0.005)
    transcode(source, tmp_path / "trim.avi", start=0.3)
    assert _first_sound(tmp_path / "trim.avi") == pytest.approx(0.2, abs=0.005)
    transcode(source, tmp_path / "trim.mp4", start=0.3)  # with timestamps, as before
    assert _first_sound(tmp_path / "trim.mp4") == pytest.approx(0.2, abs=0.005)
    # The picture keeps one frame a slot: AAC's priming before 0 had made the muxer move
    # every stream later, the frames after the first by one (0, 2, 3...: video late).
    for name in ("late.avi", "trim.avi"):
        with av.open(str(tmp_path / name)) as container:
            stream = container.streams.video[0]
            slots = [packet.pts for packet in container.demux(stream) if packet.size]
        assert slots == list(range(len(slots))), (name, slots[:5])


def test_a_track_with_no_sound_in_the_trimmed_range_is_said(tmp_path: Path) -> None:
    """MP4 leaves such a track out (the tracks after it renumbered), Matroska keeps it
    empty; either had been silent about it."""
    source = _late_tone_clip(tmp_path / "late.mkv", "flac", 0.5)
    stats = transcode(source, tmp_path / "early.mp4", end=0.4)
    assert f"{source}: audio has no sound in the trimmed range" in stats["writer_warnings"]
    assert stats["audio"] == "none"  # (the summary had said "copy")
    stats = transcode(source, tmp_path / "all.mp4")
    assert not [line for line in stats["writer_warnings"] if "no sound" in line]
    assert stats["audio"] != "none"


def test_sound_running_on_past_the_picture_is_no_truncated_video(tmp_path: Path) -> None:
    """Matroska's file duration is its longest track's: 2 s of sound under 1 s of
    video had read as a video cut off at half its length."""
    path = tmp_path / "long_sound.mkv"
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        sound = out.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        for index in range(FPS):
            frame = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        for begin in range(0, 2 * SAMPLE_RATE, 1024):
            chunk = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            chunk.sample_rate, chunk.pts = SAMPLE_RATE, begin
            out.mux(sound.encode(chunk))
        out.mux(sound.encode(None))
    assert probe_video(path).duration == pytest.approx(1.0, abs=0.05)
    with VideoReader(path) as reader:
        assert len(list(reader)) == FPS
        assert reader.warnings == []


@pytest.mark.parametrize("extension", [".mkv", ".mp4"])
def test_a_whole_file_starting_late_is_not_called_truncated(extension: str, tmp_path: Path) -> None:
    """Frames from 5 s on: Matroska's duration runs from 0, MP4's from the first frame."""
    source = make_clip(tmp_path / f"late{extension}", audio=False, pts=[150 + i for i in range(30)])
    with VideoReader(source) as reader:
        assert len(list(reader)) == 30
        assert reader.warnings == []


def test_the_main_video_stream_is_read_not_a_thumbnail_before_it(tmp_path: Path) -> None:
    """A small preview track first, the picture second: the picture is the video."""
    path = tmp_path / "two.mkv"
    with av.open(str(path), "w") as out:
        thumb = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        thumb.width, thumb.height, thumb.pix_fmt = 32, 24, "yuv420p"
        main = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        main.width, main.height, main.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for index in range(10):
            small = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 90, np.uint8), format="bgr24")
            big = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            small.pts = big.pts = index
            out.mux(thumb.encode(small))
            out.mux(main.encode(big))
        out.mux(thumb.encode(None))
        out.mux(main.encode(None))
    assert probe_video(path).width == WIDTH
    assert decoded_indices(path) == list(range(10))


def test_avi_frames_half_a_slot_off_the_grid_keep_one_slot_each(tmp_path: Path) -> None:
    """A trim half a frame off the grid (0.5 s into 25 fps): each frame at a tie goes
    to the earlier slot (ties to the even slot had given 0, 2, 3, 4, 5...: a gap, the
    picture late by turns)."""
    path = tmp_path / "ties.avi"
    with VideoWriter(path, width=WIDTH, height=HEIGHT, fps=25, time_base=Fraction(1, 1000)) as w:
        for index in range(10):
            w.write(_image(index), pts=20 + 40 * index)
    with av.open(str(path)) as container:
        slots = [p.pts for p in container.demux(container.streams.video[0]) if p.size]
    assert slots == list(range(10))


def test_a_variable_frame_rate_in_avi_keeps_each_frame_near_its_time(tmp_path: Path) -> None:
    """AVI stores one frame each 1 / fps: frames closer than that (a variable rate's
    faster stretch) are left out rather than each moved on a slot, which had run the
    picture late of its sound (by 227 ms within a second)."""
    path = tmp_path / "vfr.avi"
    times = [0.02 * i for i in range(20)] + [0.4 + 0.08 * i for i in range(1, 8)]
    with VideoWriter(path, width=WIDTH, height=HEIGHT, fps=25, time_base=Fraction(1, 1000)) as w:
        for index, second in enumerate(times):
            w.write(_image(index), time=second)
        dropped = w.frames_dropped
    assert dropped >= 5 and w.frames_written == len(times) - dropped
    with av.open(str(path)) as container:
        shown = [(frame.time, frame) for frame in container.decode(video=0)]
    indices = decoded_indices(path)
    assert indices == sorted(indices) and indices[-1] == len(times) - 1
    for (second, _), index in zip(shown, indices, strict=True):
        assert abs(second - times[index]) <= 0.5 / 25 + 1e-6, (index, second, times[index])


def test_h264_with_b_frames_in_avi_keeps_even_times(tmp_path: Path) -> None:
    """AVI stores decode times; B-frames sent them back and forth, and the frames after
    them were pushed late (up to two frames against the audio)."""
    path = tmp_path / "bframes.avi"
    with av.open(str(path), "w") as out:
        stream = out.add_stream(
            "libx264", rate=FPS, options={"preset": "ultrafast", "x264-params": "bframes=2"}
        )
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for index in range(30):
            frame = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            frame.pts = index
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    with VideoReader(path) as reader:
        frames = list(reader)
    assert [_index_of(f.image) for f in frames] == list(range(30))
    assert [f.time for f in frames] == pytest.approx([i / FPS for i in range(30)], abs=1e-6)
    # Trimmed: counted from where the seek lands (every frame had been counted as the
    # first, before the start: none came out).
    with VideoReader(path, start=0.5) as reader:
        trimmed = list(reader)
    assert [_index_of(f.image) for f in trimmed] == list(range(15, 30))
    assert trimmed[0].time == pytest.approx(0.5, abs=1e-6)


def _clip_with_tracks(path: Path, tracks: int = 2) -> Path:
    """1 s of video with ``tracks`` mono AAC tracks: track n a sine at n x 440 Hz, its
    language and title set, the second one not the default."""
    languages = ["eng", "fre", "deu"]  # (QuickTime knows French and German as fra, ger)
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        streams = [out.add_stream("aac", rate=SAMPLE_RATE, layout="mono") for _ in range(tracks)]
        for number, stream in enumerate(streams):
            stream.metadata["language"] = languages[number]
            stream.metadata["title"] = f"track {number + 1}"
        for index in range(FPS):
            frame = av.VideoFrame.from_ndarray(_image(index, WIDTH, HEIGHT), format="bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        for number, stream in enumerate(streams):
            for begin in range(0, SAMPLE_RATE, 1024):
                t = np.arange(begin, begin + 1024) / SAMPLE_RATE
                tone = (0.3 * np.sin(2 * np.pi * 440 * (number + 1) * t)).astype(np.float32)
                chunk = av.AudioFrame.from_ndarray(tone[None], format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = SAMPLE_RATE, begin
                out.mux(stream.encode(chunk))
            out.mux(stream.encode(None))
    return path


def _track_packets(path: Path) -> list[list[tuple[float, bytes]]]:
    """Each audio track's packets (time, bytes), in order."""
    with av.open(str(path)) as container:
        tracks: dict[int, list[tuple[float, bytes]]] = {
            stream.index: [] for stream in container.streams.audio
        }
        for packet in container.demux(container.streams.audio):
            if packet.size:
                tracks[packet.stream.index].append(
                    (float(packet.pts * packet.stream.time_base), bytes(packet))
                )
    return list(tracks.values())


def _pitch(path: Path, track: int) -> float:
    """The loudest frequency of one audio track, in Hz."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[track]
        samples = np.concatenate(
            [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        )
        rate = stream.codec_context.sample_rate
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.argmax(spectrum) * rate / samples.size)


def test_every_audio_track_is_kept_with_its_language_and_title(tmp_path: Path) -> None:
    """A recording's second track (a commentary, a separate microphone) had been dropped
    with a warning; now each is copied, in order, with what names it."""
    source = _clip_with_tracks(tmp_path / "tracks.mkv")
    stats = transcode(source, tmp_path / "out.mp4")
    assert stats["audio"] == "copy"
    assert not [line for line in stats["writer_warnings"] if "audio" in line]
    with av.open(str(tmp_path / "out.mp4")) as container:
        audio = container.streams.audio
        assert [stream.metadata.get("language") for stream in audio] == ["eng", "fre"]
        # MP4 keeps a track's title in its user data, which FFmpeg reads back as "name".
        titles = [stream.metadata.get("title", stream.metadata.get("name")) for stream in audio]
        assert titles == ["track 1", "track 2"]
    kept, original = _track_packets(tmp_path / "out.mp4"), _track_packets(source)
    assert [[data for _, data in track] for track in kept] == [
        [data for _, data in track] for track in original
    ]
    # From an MP4 (its titles read as "name") into Matroska: the titles stay (lost before).
    transcode(tmp_path / "out.mp4", tmp_path / "again.mkv")
    with av.open(str(tmp_path / "again.mkv")) as container:
        titles = [stream.metadata.get("title") for stream in container.streams.audio]
    assert titles == ["track 1", "track 2"]
    assert [_pitch(tmp_path / "out.mp4", n) for n in (0, 1)] == pytest.approx([440, 880], abs=5)


def test_every_audio_track_is_reencoded_where_the_container_needs_it(tmp_path: Path) -> None:
    source = _clip_with_tracks(tmp_path / "tracks.mkv", tracks=3)
    stats = transcode(source, tmp_path / "out.webm", start=0.2, end=0.8)
    assert stats["audio"] == "encode"
    assert [line.split(": ")[1] for line in stats["writer_warnings"]] == [
        "audio track 1",
        "audio track 2",
        "audio track 3",
    ]
    with av.open(str(tmp_path / "out.webm")) as container:
        audio = container.streams.audio
        assert [stream.codec_context.name for stream in audio] == ["opus"] * 3
        assert [stream.metadata.get("language") for stream in audio] == ["eng", "fre", "deu"]
    transcode(source, tmp_path / "out.mov")
    with av.open(str(tmp_path / "out.mov")) as container:
        languages = [stream.metadata.get("language") for stream in container.streams.audio]
    assert languages == ["eng", "fra", "ger"]
    assert [_pitch(tmp_path / "out.webm", n) for n in (0, 1, 2)] == pytest.approx(
        [440, 880, 1320], abs=5
    )
    # Each track trimmed like the picture: 0.6 s of it, from 0.
    for track in _track_packets(tmp_path / "out.webm"):
        assert track[0][0] == pytest.approx(0.0, abs=0.01)
        assert track[-1][0] == pytest.approx(0.6, abs=0.05)


def test_vfr_timestamps_preserved(tmp_path: Path) -> None:
    # irregular gaps: 33, 44, 22, 33... ms
    pts = [i * 3000 + (i % 3) * 1000 for i in range(30)]
    source = make_clip(tmp_path / "vfr.mp4", pts=pts, time_base=VFR_TIME_BASE)
    out = tmp_path / "vfr_out.mp4"
    transcode(source, out)
    expected = video_times(source)
    assert expected == pytest.approx([p / 90000 for p in pts], abs=1e-4)
    assert video_times(out) == pytest.approx(expected, abs=1e-4)
    assert audio_packets(out) == audio_packets(source)


@pytest.mark.parametrize("extension", [".mp4", ".mov", ".mkv"])
def test_a_variable_frame_rate_file_lasts_as_long_as_its_frames(
    tmp_path: Path, extension: str
) -> None:
    """MP4 and MOV measure a track by its decode times, which B-frames put behind the
    presentation times by a delay that changes with the frame rate: a clip whose frames
    sped up and slowed down (a GIF's 100, 300, 100, 500, 100 ms) read as ending 0.2 s
    early."""
    pts = [0, 100, 400, 500, 1000, 1100]
    rate = Fraction(6000, 1117)  # the clip's mean rate: its last frame lasts 186 ms
    out = tmp_path / f"vfr{extension}"
    with VideoWriter(out, width=WIDTH, height=HEIGHT, fps=rate, time_base=Fraction(1, 1000)) as w:
        for index, stamp in enumerate(pts):
            w.write(_image(index), pts=stamp)
    with av.open(str(out)) as container:
        assert container.duration is not None
        assert container.duration / 1e6 == pytest.approx(1.1 + 1117 / 6000, abs=0.002)
    assert video_times(out) == pytest.approx([p / 1000 for p in pts], abs=1e-3)
    assert decoded_indices(out) == list(range(6))


def test_trim_gives_the_right_frames_and_audio(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "trim.mp4"
    stats = transcode(clip, out, start=0.3, end=0.7)
    assert stats["frames"] == 12
    assert decoded_indices(out) == list(range(9, 21))
    assert video_times(out)[0] == pytest.approx(0.0, abs=1e-3)
    source = audio_packets(clip)
    kept = audio_packets(out)
    # packets overlapping [0.3, 0.7), unchanged bytes, shifted by 0.3 s
    frame_s = 1024 / SAMPLE_RATE
    wanted = [(t - 0.3, data) for t, data in source if t + frame_s > 0.3 and t < 0.7]
    assert [data for _, data in kept] == [data for _, data in wanted]
    assert [t for t, _ in kept] == pytest.approx([t for t, _ in wanted], abs=1 / SAMPLE_RATE)


def test_odd_dimensions_are_padded(tmp_path: Path) -> None:
    out = tmp_path / "odd.mp4"
    with VideoWriter(out, width=63, height=47, fps=FPS) as writer:
        for index in range(5):
            writer.write(_image(index, 63, 47))
    info = probe_video(out)
    assert (info.width, info.height) == (64, 48)
    with VideoReader(out) as reader:
        images = [frame.image for frame in reader]
    assert len(images) == 5
    # the padding repeats the last column and row
    np.testing.assert_allclose(images[0][:, 63].astype(float), images[0][:, 62], atol=12)
    np.testing.assert_allclose(images[0][47].astype(float), images[0][46], atol=12)


@pytest.mark.parametrize(
    ("size", "expected"),
    [((1280, 720), "superfast"), ((1920, 1080), "ultrafast"), ((64, 48), "superfast")],
)
def test_auto_preset_follows_the_frame_size(
    tmp_path: Path, size: tuple[int, int], expected: str
) -> None:
    width, height = size
    with VideoWriter(tmp_path / "auto.mp4", width=width, height=height, fps=FPS) as writer:
        assert writer.preset == expected
        writer.write(_image(0, width, height))
    with VideoWriter(
        tmp_path / "fixed.mp4", width=width, height=height, fps=FPS, preset="veryfast"
    ) as writer:
        assert writer.preset == "veryfast"
        writer.write(_image(0, width, height))
    with pytest.raises(InputError, match="unknown preset"):
        VideoWriter(tmp_path / "bad.mp4", width=width, height=height, fps=FPS, preset="warp")


def test_an_encoder_named_by_its_codec_takes_preset_and_crf(tmp_path: Path) -> None:
    """``h264`` is libx264: its crf and preset are mapped (they had been dropped with a
    note that they were not, for any name but the encoder's own)."""
    noise = np.random.default_rng(0).integers(0, 256, (5, 96, 128, 3), np.uint8)
    sizes = []
    for crf in (0, 51):
        out = tmp_path / f"crf{crf}.mp4"
        with VideoWriter(out, width=128, height=96, fps=FPS, codec="h264", crf=crf) as writer:
            for image in noise:
                writer.write(image)
        assert writer.warnings == []
        sizes.append(out.stat().st_size)
    assert sizes[0] > 4 * sizes[1], sizes
    assert check_video_encoder(tmp_path / "a.mp4", "h264") == "libx264"
    assert check_video_encoder(tmp_path / "a.avi") == "mpeg4"


def test_an_avi_at_the_default_crf_is_about_as_faithful_as_an_mp4(
    tmp_path: Path, astronaut: np.ndarray
) -> None:
    """AVI's MPEG-4 quantiser is x264's CRF step for step (CRF 18 had been qscale 12:
    blocky, 7 dB below libx264 on a talking head's background)."""
    picture = cv2.resize(astronaut, (256, 256))
    frames = [np.roll(picture, 2 * i, axis=1) for i in range(6)]
    psnr = {}
    for extension in (".mp4", ".avi"):
        out = tmp_path / f"clip{extension}"
        with VideoWriter(out, width=256, height=256, fps=FPS, crf=18) as writer:
            for image in frames:
                writer.write(image)
        with VideoReader(out) as reader:
            back = [frame.image.astype(np.float64) for frame in reader]
        mse = np.mean([np.mean((a - b) ** 2) for a, b in zip(frames, back, strict=True)])
        psnr[extension] = 10 * np.log10(255**2 / mse)
    assert psnr[".avi"] > psnr[".mp4"] - 2.0, psnr


@pytest.mark.parametrize(("codec", "extension"), [("prores_ks", ".mov"), ("libx264rgb", ".mkv")])
def test_an_encoder_without_yuv420p_encodes_in_its_own_format(
    codec: str, extension: str, tmp_path: Path
) -> None:
    """ProRes takes 10-bit 4:2:2 and x264's RGB encoder RGB: they had failed with
    FFmpeg's "avcodec_open2() returned 22" on the fixed yuv420p."""
    out = tmp_path / f"clip{extension}"
    with VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS, codec=codec) as writer:
        for index in range(3):
            writer.write(_image(index))
    with VideoReader(out) as reader:
        back = [frame.image for frame in reader]
    assert len(back) == 3
    assert np.abs(back[1].astype(int) - _image(1)).mean() < 3
    with pytest.raises(UnsupportedFormatError, match=f"{codec} does not take pixel format"):
        VideoWriter(
            tmp_path / f"b{extension}", width=8, height=8, fps=FPS, codec=codec, pix_fmt="nv12"
        )


def test_encoder_settings_tell_which_of_preset_and_crf_are_used() -> None:
    assert encoder_settings("libx264") == {"preset", "crf"}
    assert encoder_settings("libvpx-vp9") == {"preset", "crf"}
    assert encoder_settings("mpeg4") == {"crf"}  # a quantiser; no speed setting
    assert encoder_settings("ffv1") == set()


def test_yuv_frames_match_the_bgr_written(tmp_path: Path) -> None:
    # The writer converts BGR to yuv420p itself (OpenCV): colours must survive the trip.
    out = tmp_path / "colour.mkv"
    blocks = np.zeros((64, 96, 3), np.uint8)
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (40, 120, 200), (230, 230, 230), (20, 20, 20)]
    for i, colour in enumerate(colours):
        blocks[:, i * 16 : (i + 1) * 16] = colour
    with VideoWriter(out, width=96, height=64, fps=FPS, crf=0) as writer:
        for _ in range(3):
            writer.write(blocks)
    with VideoReader(out) as reader:
        back = next(iter(reader)).image
    inner = (slice(8, 56), slice(None))
    for i in range(len(colours)):
        cell = back[inner][:, i * 16 + 4 : (i + 1) * 16 - 4].reshape(-1, 3).mean(0)
        assert np.abs(cell - np.array(colours[i])).max() < 6, (i, cell)


def test_rotation_metadata_is_kept(tmp_path: Path) -> None:
    source = make_clip(tmp_path / "rot.mp4", frames=5, audio=False, rotation=-90)
    if probe_video(source).rotation != 90:
        pytest.skip("this PyAV/FFmpeg build does not round-trip the display matrix")
    out = tmp_path / "rot_out.mp4"
    transcode(source, out)
    info = probe_video(out)
    assert info.rotation == 90
    assert (info.width, info.height) == (WIDTH, HEIGHT)  # pixels are not rotated


def test_writer_keeps_container_metadata(tmp_path: Path) -> None:
    out = tmp_path / "meta.mkv"
    with VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS, metadata={"title": "t1"}) as w:
        w.write(_image(0))
    with av.open(str(out)) as container:
        assert container.metadata.get("title") == "t1"


# --- damaged and wrong input ----------------------------------------------------------------


def test_truncated_input_gives_a_valid_file_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = make_clip(tmp_path / "full.mkv", frames=60)
    data = source.read_bytes()
    truncated = tmp_path / "cut.mkv"
    truncated.write_bytes(data[: len(data) * 6 // 10])
    out = tmp_path / "cut_out.mp4"
    with caplog.at_level(logging.WARNING, logger="faceweave"):
        stats = transcode(truncated, out)
    assert 10 < stats["frames"] < 60
    indices = decoded_indices(out)
    assert indices == list(range(len(indices)))
    assert len(indices) == stats["frames"]
    assert stats["decode_warnings"]
    assert len([r for r in caplog.records if r.name == "faceweave"]) == 1


def test_truncated_faststart_mp4_keeps_the_decodable_frames(tmp_path: Path) -> None:
    source = make_clip(tmp_path / "full.mp4", frames=60, options={"movflags": "+faststart"})
    data = source.read_bytes()
    truncated = tmp_path / "cut.mp4"
    truncated.write_bytes(data[: len(data) // 2])
    out = tmp_path / "cut_out.mp4"
    stats = transcode(truncated, out)
    assert 0 < stats["frames"] < 60
    assert len(decoded_indices(out)) == stats["frames"]


def test_mp4_without_its_index_is_one_clear_error(clip: Path, tmp_path: Path) -> None:
    # the moov atom is at the end of a plain mp4: cutting it leaves nothing playable
    truncated = tmp_path / "cut.mp4"
    truncated.write_bytes(clip.read_bytes()[:2000])
    with pytest.raises(InputError) as info:
        transcode(truncated, tmp_path / "out.mp4")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out.mp4").exists() and leftovers(tmp_path) == []


def test_audio_only_file_is_an_input_error(tmp_path: Path) -> None:
    source = make_clip(tmp_path / "audio.m4a", video=False)
    with pytest.raises(InputError, match="no video stream"):
        probe_video(source)
    with pytest.raises(InputError, match="no video stream"):
        transcode(source, tmp_path / "out.mp4")
    assert not (tmp_path / "out.mp4").exists()


def test_random_bytes_are_not_a_video(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(InputError) as info:  # UnsupportedFormatError is an InputError
        VideoReader(junk)
    assert "\n" not in str(info.value)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        VideoReader(tmp_path / "nope.mp4")
    empty = tmp_path / "empty.mp4"
    empty.touch()
    with pytest.raises(UnsupportedFormatError, match="empty"):
        VideoReader(empty)


def test_unknown_output_extension(clip: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match="unsupported video format"):
        video_extension("a.flv")
    with pytest.raises(UnsupportedFormatError):
        VideoWriter(tmp_path / "out.xyz", width=WIDTH, height=HEIGHT, fps=FPS)
    with pytest.raises(UnsupportedFormatError):
        transcode(clip, tmp_path / "out.gif")
    assert list(tmp_path.iterdir()) == []


def test_unavailable_encoder(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match="not available"):
        VideoWriter(tmp_path / "out.mp4", width=WIDTH, height=HEIGHT, fps=FPS, codec="nope264")
    with pytest.raises(UnsupportedFormatError, match="cannot hold"):
        VideoWriter(tmp_path / "out.webm", width=WIDTH, height=HEIGHT, fps=FPS, codec="libx264")
    assert list(tmp_path.iterdir()) == []


# --- atomic output --------------------------------------------------------------------------


def test_failure_mid_write_leaves_nothing(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"

    def explode(frame: VideoFrame) -> np.ndarray:
        if frame.index == 10:
            raise RuntimeError("model crashed")
        return frame.image

    with pytest.raises(RuntimeError, match="model crashed"):
        transcode(clip, out, explode)
    assert list(tmp_path.iterdir()) == []


def test_interrupt_leaves_old_file_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    out.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS) as writer:
            writer.write(_image(0))
            raise KeyboardInterrupt
    assert out.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("where", ["os.open", "enter_context"])
def test_interrupt_while_the_writer_starts_leaves_nothing(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal landing as the temporary file is made, or before the writer's
    clean-up of it is registered: the writer still removes it."""
    from faceweave.io import image as image_io

    if where == "os.open":
        real_open = os.open

        def made_then_interrupted(*args: object) -> int:
            os.close(real_open(*args))  # type: ignore[arg-type]
            raise KeyboardInterrupt

        monkeypatch.setattr(image_io.os, "open", made_then_interrupted)
    else:
        real_enter = contextlib.ExitStack.enter_context
        entered: list[object] = []  # kept alive: no finaliser cleans up behind the writer

        def entered_then_interrupted(self: contextlib.ExitStack, cm: object) -> object:
            real_enter(contextlib.ExitStack(), cm)  # entered; its exit is not kept
            entered.append(cm)
            raise KeyboardInterrupt

        monkeypatch.setattr(contextlib.ExitStack, "enter_context", entered_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        VideoWriter(tmp_path / "out.mp4", width=WIDTH, height=HEIGHT, fps=FPS)
    assert leftovers(tmp_path) == []


def test_writer_checks_frames_and_needs_one(tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    writer = VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS)
    with pytest.raises(InputError, match="must be"):
        writer.write(np.zeros((10, 10, 3), np.uint8))
    with pytest.raises(OutputError, match="no frames"):
        writer.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_writer_that_cannot_create_its_file_names_the_output() -> None:
    """Where no file can be made (here /proc, even for root), the error names the
    output the user gave, not the hidden temporary file beside it."""
    out = Path("/proc/out.mp4")
    with pytest.raises(OutputError) as error:
        VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS)
    assert str(error.value).startswith("/proc/out.mp4: cannot write"), error.value
    assert ".tmp" not in str(error.value)


def test_a_full_disk_at_the_end_names_the_output_not_its_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails as the video is finished (a full disk) says why in the
    output's name; the system's message had named the hidden temporary file."""
    out = tmp_path / "out.mp4"
    writer = VideoWriter(out, width=WIDTH, height=HEIGHT, fps=FPS)
    writer.write(np.zeros((HEIGHT, WIDTH, 3), np.uint8))

    def full(source: object, destination: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(source))

    monkeypatch.setattr("faceweave.io.video.os.replace", full)
    with pytest.raises(OutputError) as error:
        writer.close()
    message = str(error.value)
    assert message == f"{out}: cannot finish video: {os.strerror(errno.ENOSPC)}", message
    assert list(tmp_path.iterdir()) == []


def test_writer_timestamps_from_seconds(tmp_path: Path) -> None:
    out = tmp_path / "times.mp4"
    times = [0.0, 0.05, 0.07, 0.2, 0.21]
    with VideoWriter(out, width=WIDTH, height=HEIGHT, time_base=Fraction(1, 1000)) as writer:
        for index, t in enumerate(times):
            writer.write(_image(index), time=t)
    assert video_times(out) == pytest.approx(times, abs=1e-3)


def test_subtitle_tracks_left_out_are_said(tmp_path: Path) -> None:
    """A film's subtitles are not carried into the output: said in the writer's warnings
    (they had gone missing without a word), the picture and sound kept."""
    (tmp_path / "s.srt").write_text("1\n00:00:00,000 --> 00:00:00,300\nhello\n\n")
    source = tmp_path / "subs.mkv"
    with av.open(str(tmp_path / "s.srt")) as srt, av.open(str(source), "w") as out:
        video = out.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        sound = out.add_stream("aac", rate=SAMPLE_RATE)
        sound.layout = "mono"  # type: ignore[union-attr]
        text = out.add_stream_from_template(srt.streams.subtitles[0])
        for index in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((HEIGHT, WIDTH, 3), np.uint8), "bgr24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        for start in range(0, SAMPLE_RATE // 4, 1024):
            chunk = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            chunk.sample_rate, chunk.pts = SAMPLE_RATE, start
            out.mux(sound.encode(chunk))  # type: ignore[union-attr]
        out.mux(sound.encode(None))  # type: ignore[union-attr]
        for packet in srt.demux(srt.streams.subtitles[0]):
            if packet.size:
                packet.stream = text
                out.mux(packet)
    output = tmp_path / "out.mkv"
    writer = VideoWriter(output, width=WIDTH, height=HEIGHT, fps=FPS, audio_from=source)
    for index in range(5):
        writer.write(np.zeros((HEIGHT, WIDTH, 3), np.uint8), pts=index)
    writer.close()
    assert writer.warnings == [
        f"{source}: a subtitle track left out (the picture and sound are kept)"
    ]
    with av.open(str(output)) as container:
        assert [s.type for s in container.streams] == ["video", "audio"]
