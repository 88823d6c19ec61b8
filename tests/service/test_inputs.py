"""Input checks at the door: every bad upload is a clear 4xx and the server stays up."""

from __future__ import annotations

import io
import logging
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from faceweave.service import ServiceConfig, create_app
from faceweave.service.checks import check_filename, sniff
from faceweave.service.errors import ServiceError
from tests.service.conftest import auth, make_key

MAX_UPLOAD = 1024 * 1024


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, Path]]:
    """A service with a 1 MiB upload limit and no workers (jobs stay queued)."""
    data_dir = tmp_path_factory.mktemp("door")
    key = make_key(data_dir, "door")
    config = ServiceConfig(
        data_dir=data_dir, workers=0, preview_enabled=False, max_upload_bytes=MAX_UPLOAD
    )
    with TestClient(create_app(config)) as client:
        yield client, key, data_dir


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header_only(width: int, height: int, idat: bytes) -> bytes:
    """A PNG with a real IHDR claiming ``width`` x ``height`` (8-bit grey) and the given IDAT."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )


def _small_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 150, 120)).save(buffer, format="PNG")
    return buffer.getvalue()


HEIC_DIR = Path(__file__).resolve().parents[1] / "io" / "data"


def _post_target(client: TestClient, key: str, target: bytes, name: str = "t.png") -> dict:
    response = client.post(
        "/v1/jobs",
        headers=auth(key),
        files={"source": ("s.png", _small_png()), "target": (name, target)},
    )
    body = response.json()
    return {"status": response.status_code, **(body.get("error") or {"code": None, "message": ""})}


def _server_alive(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"


def test_a_good_small_upload_is_accepted(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    assert _post_target(client, key, _small_png())["status"] == 202


def test_empty_file(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    error = _post_target(client, key, b"")
    assert (error["status"], error["code"]) == (422, "empty_file")
    assert "target is empty" in error["message"]
    _server_alive(client)


def test_text_file_named_jpg_is_judged_by_content(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    error = _post_target(client, key, b"hello, this is not a picture\n" * 10, "photo.jpg")
    assert (error["status"], error["code"]) == (415, "unsupported_type")
    assert "judged by its content" in error["message"]
    _server_alive(client)


def test_10000x10000_png_is_refused_on_its_header(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    buffer = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buffer, format="PNG")  # 1-bit: ~12 KB on disk
    assert len(buffer.getvalue()) < MAX_UPLOAD
    error = _post_target(client, key, buffer.getvalue())
    assert (error["status"], error["code"]) == (413, "image_too_large")
    assert "10000x10000" in error["message"]
    _server_alive(client)


def test_decompression_bomb(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    # 60000 x 60000 grey: 3.6 GB of pixels from a few hundred bytes of zlib data.
    bomb = _png_header_only(60_000, 60_000, zlib.compress(bytes(60_001 * 64), 9))
    assert len(bomb) < 10_000
    error = _post_target(client, key, bomb)
    assert error["status"] == 413, error
    assert error["code"] == "image_too_large"
    # The service's own limit is quoted, not Pillow's higher one that tripped first.
    assert "3600000000 pixels, more than the limit of 64000000" in error["message"], error
    _server_alive(client)


def test_truncated_png(door: tuple[TestClient, str, Path], source_png: bytes) -> None:
    client, key, _ = door
    error = _post_target(client, key, source_png[: len(source_png) // 2])
    assert (error["status"], error["code"]) == (422, "bad_input")
    assert "truncated" in error["message"] or "corrupt" in error["message"]
    assert "/" not in error["message"].replace("n/a", "")  # no server path
    _server_alive(client)


def test_path_traversal_in_the_file_name(door: tuple[TestClient, str, Path]) -> None:
    client, key, data_dir = door
    before = sorted(p.name for p in data_dir.parent.iterdir())
    for name in ("../../etc/passwd.png", "..\\..\\evil.png", "/etc/passwd.png"):
        error = _post_target(client, key, _small_png(), name)
        assert (error["status"], error["code"]) == (422, "bad_filename"), (name, error)
    assert sorted(p.name for p in data_dir.parent.iterdir()) == before
    _server_alive(client)


def test_file_names_are_not_paths(door: tuple[TestClient, str, Path]) -> None:
    """An odd but path-free name is kept for display only; files are stored by role."""
    client, key, data_dir = door
    response = client.post(
        "/v1/jobs",
        headers=auth(key),
        files={"source": ("..png", _small_png()), "target": ("holiday photo.gif", _small_png())},
    )
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["inputs"]["target"]["name"] == "holiday photo.gif"
    stored = sorted(p.name for p in (data_dir / "jobs" / job["id"]).iterdir())
    assert stored == ["source.png", "target.png"]


def test_oversized_upload_is_413(door: tuple[TestClient, str, Path]) -> None:
    client, key, data_dir = door
    big = _small_png() + bytes(MAX_UPLOAD + 10)
    error = _post_target(client, key, big)
    assert (error["status"], error["code"]) == (413, "upload_too_large")
    assert str(MAX_UPLOAD) in error["message"]
    # Nothing of the aborted upload is left behind.
    live = {job["id"] for job in client.get("/v1/jobs", headers=auth(key)).json()["jobs"]}
    assert {p.name for p in (data_dir / "jobs").iterdir()} <= live
    _server_alive(client)


def test_not_multipart_and_broken_multipart(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    as_json = client.post("/v1/jobs", headers=auth(key), json={"source": "x"})
    assert as_json.status_code == 415
    assert as_json.json()["error"]["code"] == "expected_multipart"
    broken = client.post(
        "/v1/jobs",
        headers={**auth(key), "Content-Type": "multipart/form-data; boundary=xyz"},
        content=b'--xyz\r\nContent-Disposition: form-data; name="source"; filename="a.png"\r\n'
        b"\r\n\x89PNG",
    )
    assert 400 <= broken.status_code < 500, broken.text
    assert broken.json()["error"]["code"] == "bad_multipart"
    _server_alive(client)


def test_video_target_that_is_garbage(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    fake_mp4 = b"\x00\x00\x00\x18ftypisom" + bytes(2000)
    error = _post_target(client, key, fake_mp4, "clip.mp4")
    assert error["status"] in (415, 422), error
    _server_alive(client)


def test_a_heic_photo_is_sniffed_and_read_not_taken_for_a_video(
    door: tuple[TestClient, str, Path],
) -> None:
    """HEIC (an iPhone's photos) shares MP4's box format: sniffed as a video, it had
    been refused as "cannot read the video". It is an image, read as one; a broken
    one is refused as an image that cannot be read."""
    for brand in (b"heic", b"heix", b"mif1"):
        head = b"\x00\x00\x00\x18ftyp" + brand + b"\x00\x00\x00\x00mif1heic" + bytes(40)
        media = sniff(head)
        assert media is not None and (media.ext, media.mime) == (".heic", "image/heic"), brand
    client, key, _ = door
    photo = (HEIC_DIR / "astronaut.heic").read_bytes()
    assert _post_target(client, key, photo, "IMG_0001.HEIC")["status"] == 202
    broken = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(500)
    error = _post_target(client, key, broken, "IMG_0002.HEIC")
    assert error["status"] == 422 and "corrupt HEIC" in error["message"], error
    _server_alive(client)


def test_an_avif_photo_is_sniffed_and_read(door: tuple[TestClient, str, Path]) -> None:
    """AVIF, by its major brand or a generic HEIF one whose compatible brands name it:
    an image; a broken one is refused as an image that cannot be read."""
    for major, compatible in ((b"avif", b"mif1miaf"), (b"mif1", b"avifmiaf"), (b"avis", b"")):
        size = (16 + len(compatible)).to_bytes(4, "big")
        head = size + b"ftyp" + major + bytes(4) + compatible + bytes(40)
        media = sniff(head)
        assert media is not None and (media.ext, media.mime) == (".avif", "image/avif"), major
    client, key, _ = door
    error = _post_target(client, key, b"\x00\x00\x00\x14ftypavif" + bytes(500), "a.avif")
    assert error["status"] in (415, 422), error
    _server_alive(client)


def test_a_video_with_only_sound_says_so(door: tuple[TestClient, str, Path]) -> None:
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=44100)
        stream.layout = "mono"  # type: ignore[union-attr]
        for index in range(10):
            frame = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts = 44100, index * 1024
            for packet in stream.encode(frame):  # type: ignore[union-attr]
                container.mux(packet)
        for packet in stream.encode(None):  # type: ignore[union-attr]
            container.mux(packet)
    client, key, data_dir = door
    error = _post_target(client, key, buffer.getvalue(), "song.mp4")
    assert (error["status"], error["code"]) == (422, "bad_video"), error
    assert error["message"] == "target: cannot read the video: no video stream (contains audio)"
    assert str(data_dir) not in error["message"]


def test_video_as_source_is_refused(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    response = client.post(
        "/v1/jobs",
        headers=auth(key),
        files={
            "source": ("me.mp4", b"\x00\x00\x00\x18ftypisom" + bytes(100)),
            "target": ("t.png", _small_png()),
        },
    )
    assert response.status_code == 415
    assert "source is not an image" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("head", "ext"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(24), ".png"),
        (b"\xff\xd8\xff\xe0" + bytes(28), ".jpg"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(16), ".webp"),
        (b"BM" + bytes(12) + b"\x28\x00\x00\x00" + bytes(14), ".bmp"),
        (b"II*\x00\x08\x00\x00\x00" + bytes(24), ".tiff"),
        (b"MM\x00*\x00\x00\x00\x08" + bytes(24), ".tiff"),
        (b"\x00\x00\x00\x20ftypisom" + bytes(20), ".mp4"),
        (b"\x00\x00\x00\x14ftypqt  " + bytes(20), ".mov"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm" + bytes(16), ".webm"),
        (b"\x1a\x45\xdf\xa3\xa3\x42\x86\x81\x01\x42\x82\x88matroska" + bytes(16), ".mkv"),
        # Animated images: video jobs.
        (b"GIF89a" + bytes(30), ".gif"),
        (b"GIF87a" + bytes(30), ".gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x02" + bytes(16), ".webp"),
        (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", bytes(13)) + _chunk(b"acTL", bytes(8)), ".apng"),
    ],
)
def test_sniff_known_types(head: bytes, ext: str) -> None:
    media = sniff(head)
    assert media is not None and media.ext == ext
    videos = (".mp4", ".mov", ".webm", ".mkv", ".gif", ".apng")
    animated_webp = b"VP8X" in head
    assert media.kind == ("video" if ext in videos or animated_webp else "image")


def test_an_animated_webp_or_png_target_is_a_video_job(door: tuple[TestClient, str, Path]) -> None:
    """Pillow's animated WebP and APNG are sniffed as animations (they had been swapped
    as their first frame alone); a still WebP stays an image, and a truncated GIF is a
    video that cannot be read."""
    client, key, data_dir = door
    frames = [Image.new("RGB", (64, 64), (30 * i, 90, 120)) for i in range(3)]
    for fmt, name in (("WEBP", "a.webp"), ("PNG", "a.png"), ("GIF", "a.gif")):
        buffer = io.BytesIO()
        frames[0].save(buffer, format=fmt, save_all=True, append_images=frames[1:], duration=50)
        assert sniff(buffer.getvalue()[:64]).kind == "video", fmt  # type: ignore[union-attr]
        response = _post_target(client, key, buffer.getvalue(), name)
        assert response["status"] == 202, response
    still = io.BytesIO()
    frames[0].save(still, format="WEBP")
    assert sniff(still.getvalue()[:64]).kind == "image"  # type: ignore[union-attr]
    gif = io.BytesIO()
    frames[0].save(gif, format="GIF", save_all=True, append_images=frames[1:], duration=50)
    error = _post_target(client, key, gif.getvalue()[:20], "cut.gif")
    assert (error["status"], error["code"]) == (422, "bad_video"), error
    assert str(data_dir) not in error["message"]
    _server_alive(client)


def test_an_animation_too_large_to_hold_is_refused_at_the_door(
    door: tuple[TestClient, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An animated result is held whole until it is written: a target over that (its
    frames within the trim) is a 413 at the door, in the API's words (it had been taken
    and failed in its job with the command line's advice)."""
    import faceweave.io.animation as animation

    monkeypatch.setattr(animation, "ANIMATION_MAX_BYTES", 64 * 64 * 3)  # three frames
    client, key, _ = door
    frames = [Image.new("RGB", (64, 64), (30 * i, 90, 120)) for i in range(6)]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    error = _post_target(client, key, buffer.getvalue(), "long.gif")
    assert (error["status"], error["code"]) == (413, "video_too_large"), error
    assert "6 frames of 64x64" in error["message"] and "trim_start, trim_end" in error["message"]
    response = client.post(
        "/v1/jobs",
        headers=auth(key),
        files={"source": ("s.png", _small_png()), "target": ("long.gif", buffer.getvalue())},
        data={"trim_end": "0.2"},  # two frames of six
    )
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    "head", [b"", b"GIF8" + bytes(30), b"%PDF-1.7" + bytes(30), b"BM" + bytes(40), b"<svg>"]
)
def test_sniff_unknown_types(head: bytes) -> None:
    assert sniff(head) is None


def test_check_filename_strips_control_characters() -> None:
    assert check_filename("a\x07b\u202e.png") == "ab.png"
    assert len(check_filename("x" * 1000)) == 255


def test_a_file_name_too_long_for_a_part_header_is_named(
    door: tuple[TestClient, str, Path],
) -> None:
    """A name of thousands of characters overflows the multipart parser's header line
    (4224 bytes): said so, not "malformed multipart"; a long one below that is cut to
    255 characters for display."""
    client, key, _ = door
    files = {"source": ("a" * 8000 + ".png", _small_png()), "target": ("t.png", _small_png())}
    response = client.post("/v1/jobs", headers=auth(key), files=files)
    assert response.status_code == 400
    assert "headers are too large (a file name over 4000" in response.json()["error"]["message"]
    files["source"] = ("a" * 3000 + ".png", _small_png())
    assert client.post("/v1/jobs", headers=auth(key), files=files).status_code == 202
    _server_alive(client)


def test_a_charset_that_is_not_ascii_at_heart_is_not_used_for_part_names(
    door: tuple[TestClient, str, Path],
) -> None:
    """``charset=utf-16`` on the form: its ASCII part names had been decoded as UTF-16
    (garbage, the files unknown); only a charset that keeps ASCII is honoured."""
    client, key, _ = door
    body = b""
    for name in (b"source", b"target"):
        body += (
            b'--XX\r\nContent-Disposition: form-data; name="' + name + b'"; '
            b'filename="'
            + name
            + b'.png"\r\nContent-Type: image/png\r\n\r\n'
            + _small_png()
            + b"\r\n"
        )
    body += b"--XX--\r\n"
    for charset in ("utf-16", "utf-32", "latin-1"):
        headers = {
            **auth(key),
            "content-type": f"multipart/form-data; boundary=XX; charset={charset}",
        }
        response = client.post("/v1/jobs", content=body, headers=headers)
        assert response.status_code == 202, (charset, response.text)


def test_head_is_answered_as_get_without_a_body(door: tuple[TestClient, str, Path]) -> None:
    client, key, _ = door
    for path, headers in (("/healthz", {}), ("/", {}), ("/v1/jobs", auth(key))):
        got, head = client.get(path, headers=headers), client.head(path, headers=headers)
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
    assert client.head("/v1/jobs").status_code == 401  # the same key check as GET


def test_a_client_hanging_up_mid_upload_is_not_a_server_error(
    door: tuple[TestClient, str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """curl --max-time, a closed tab: the body stops and the server hears a disconnect."""
    client, key, data_dir = door
    before = sorted(p.name for p in (data_dir / "jobs").iterdir())
    part = (
        b'--xyz\r\nContent-Disposition: form-data; name="source"; filename="a.png"\r\n'
        b"Content-Type: image/png\r\n\r\n" + _small_png()[:60]
    )
    incoming = [
        {"type": "http.request", "body": part, "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"content-type", b"multipart/form-data; boundary=xyz"),
        (b"content-length", b"100000"),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/jobs",
        "raw_path": b"/v1/jobs",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    with caplog.at_level(logging.INFO, logger="faceweave"):
        client.portal.call(client.app, scope, receive, send)  # type: ignore[union-attr]
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 400
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert "client hung up during POST /v1/jobs" in caplog.text
    assert sorted(p.name for p in (data_dir / "jobs").iterdir()) == before
    _server_alive(client)


def test_a_busy_answer_keeps_its_message(door: tuple[TestClient, str, Path]) -> None:
    client, _, _ = door

    def busy() -> None:
        raise ServiceError(
            503, "busy", "the previewer is busy; try again", headers={"Retry-After": "1"}
        )

    client.app.add_api_route("/test-busy", busy)  # type: ignore[attr-defined]
    response = client.get("/test-busy")
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert response.json()["error"] == {
        "code": "busy",
        "message": "the previewer is busy; try again",
    }


def test_a_video_too_small_for_a_face_is_refused_at_the_door(
    door: tuple[TestClient, str, Path], tmp_path: Path
) -> None:
    from clips import make_clip  # tests/clips.py: tests/ is on sys.path under pytest

    client, key, _ = door
    clip = make_clip(tmp_path / "tiny.mp4", None, frames=3, size=(4, 4), audio=False)
    error = _post_target(client, key, clip.read_bytes(), "tiny.mp4")
    assert (error["status"], error["code"]) == (422, "image_too_small"), error
    assert "4x4" in error["message"]


def test_a_trim_range_without_a_frame_is_refused_at_the_door(
    door: tuple[TestClient, str, Path], tmp_path: Path
) -> None:
    """1 s at 30 fps: the last frame starts at 0.967 s, so a trim_start of 0.99 s (before
    the end) leaves no frame; it is a bad_option at upload, not a failed job later."""
    from clips import make_clip  # tests/clips.py: tests/ is on sys.path under pytest

    client, key, _ = door
    clip = make_clip(tmp_path / "clip.mp4", None, frames=30, size=(64, 64), audio=False)
    files = {"source": ("s.png", _small_png()), "target": ("clip.mp4", clip.read_bytes())}
    for fields, span in (
        ({"trim_start": "0.99"}, "trim_start 0.99 s to its end"),
        ({"trim_start": "0.51", "trim_end": "0.52"}, "trim_start 0.51 s to trim_end 0.52 s"),
    ):
        response = client.post("/v1/jobs", headers=auth(key), files=files, data=fields)
        assert response.json()["error"] == {
            "code": "bad_option",
            "message": f"the target (1.00 s long) has no frame from {span}",
        }, fields
        assert response.status_code == 422
    for fields in ({"trim_start": "0.96"}, {"trim_start": "0.5", "trim_end": "0.51"}):
        response = client.post("/v1/jobs", headers=auth(key), files=files, data=fields)
        assert response.status_code == 202, (fields, response.text)


def test_a_live_source_over_the_upload_limit_is_refused_up_front(
    door: tuple[TestClient, str, Path],
) -> None:
    """The live source takes the service's --max-upload-mb, as jobs do (it had a fixed
    20 MiB), and a body declared too large is refused before it is read."""
    client, key, _ = door
    response = client.post(
        "/v1/live/" + "0" * 32 + "/source",
        headers={**auth(key), "Content-Type": "image/png"},
        content=bytes(MAX_UPLOAD + 1),
    )
    assert response.status_code == 413, response.text
    assert str(MAX_UPLOAD) in response.json()["error"]["message"]


def test_uploads_are_checked_a_few_at_a_time(
    door: tuple[TestClient, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each upload is decoded whole at the door (a 64-megapixel image takes about half
    a gigabyte): with no bound, a burst of large uploads had taken the server's memory
    (4 at once: 5.3 GB). At most ServiceState.door's checks run at once."""
    import asyncio
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from faceweave.service import app as app_module

    client, key, _ = door
    state = client.app.state.service  # type: ignore[attr-defined]
    running, most = [0], [0]
    lock = threading.Lock()
    check = app_module._check_files

    def counted(*args: object, **kwargs: object) -> object:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        try:
            return check(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(app_module, "_check_files", counted)
    monkeypatch.setattr(state, "door", asyncio.Semaphore(2))
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: _post_target(client, key, _small_png()), range(5)))
    assert [answer["status"] for answer in answers] == [202] * 5
    assert most[0] == 2
    assert app_module.DOOR_CHECKS >= 1
