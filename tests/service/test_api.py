"""The REST API's happy path: submit, poll, download, list, delete; preview; page; schema."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from faceweave.service.jobs import JobOptions
from tests.service.conftest import AppFactory, auth, make_key, submit, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_image_job_end_to_end(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "alice")
    response = submit(client, key, source_png, target_jpeg, fusion=0.8, color="rct", blend="alpha")
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["state"] in ("queued", "running", "done")
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["inputs"]["target"] == {
        "name": "photo.jpg",
        "type": "image/jpeg",
        "size": len(target_jpeg),
        "sha256": job["inputs"]["target"]["sha256"],
    }
    assert job["options"]["fusion"] == 0.8

    done = wait_for(client, job["id"], key)
    assert done["state"] == "done", done
    assert done["progress"] == 1.0
    assert done["attempts"] == 1
    assert done["result"]["media_type"] == "image/jpeg"
    assert done["notes"] == []  # a frontal source with open eyes and no glasses

    result = client.get(done["result"]["url"], headers=auth(key))
    assert result.status_code == 200
    assert result.headers["content-type"] == "image/jpeg"
    assert "attachment" in result.headers["content-disposition"]
    image = Image.open(io.BytesIO(result.content))
    assert image.format == "JPEG"
    target = Image.open(io.BytesIO(target_jpeg))
    assert image.size == target.size
    # The face changed: the result is not the target.
    difference = np.abs(np.asarray(image, np.int16) - np.asarray(target, np.int16))
    assert difference.mean() > 0.5

    listed = client.get("/v1/jobs", headers=auth(key)).json()["jobs"]
    assert [item["id"] for item in listed] == [job["id"]]
    assert client.get("/v1/jobs?state=done", headers=auth(key)).json()["jobs"]
    assert client.get("/v1/jobs?state=queued", headers=auth(key)).json()["jobs"] == []

    deleted = client.delete(f"/v1/jobs/{job['id']}", headers=auth(key))
    assert deleted.status_code == 204
    assert client.get(f"/v1/jobs/{job['id']}", headers=auth(key)).status_code == 404
    assert client.get(done["result"]["url"], headers=auth(key)).status_code == 404
    assert not (data_dir / "jobs" / job["id"]).exists()
    assert client.get("/v1/jobs", headers=auth(key)).json()["jobs"] == []


def test_done_job_notes_what_the_source_shows(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    """Grace Hopper as the source: the job says, as the command line does, that her
    glasses are part of the face it pastes."""
    client, data_dir = service
    key = make_key(data_dir, "alice")
    response = submit(client, key, target_jpeg, source_png)
    assert response.status_code == 202, response.text
    assert response.json()["notes"] == []  # not known before the job runs
    done = wait_for(client, response.json()["id"], key)
    assert done["state"] == "done", done
    (note,) = done["notes"]
    assert note.startswith("source face wears glasses")


def test_a_group_photo_as_the_source_is_noted(
    service: tuple[TestClient, Path],
    source_png: bytes,
    astronaut_rgb: np.ndarray,
    grace_hopper_rgb: np.ndarray,
) -> None:
    """Two people in the source photo: the larger face is swapped in, and the job's
    notes say so (as the command line's warning does; it had been silent)."""
    height = max(astronaut_rgb.shape[0], grace_hopper_rgb.shape[0])
    pair = np.full((height, astronaut_rgb.shape[1] + grace_hopper_rgb.shape[1], 3), 127, np.uint8)
    pair[: astronaut_rgb.shape[0], : astronaut_rgb.shape[1]] = astronaut_rgb
    pair[: grace_hopper_rgb.shape[0], astronaut_rgb.shape[1] :] = grace_hopper_rgb
    buffer = io.BytesIO()
    Image.fromarray(pair).save(buffer, format="PNG")
    client, data_dir = service
    key = make_key(data_dir, "group")
    response = submit(client, key, buffer.getvalue(), source_png)
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key)
    assert done["state"] == "done", done
    assert "the source image shows 2 faces; the largest is used" in done["notes"], done


def _photos(source: bytes, target: bytes, **more: bytes) -> dict[str, tuple[str, bytes]]:
    """Multipart files: the source, more photos by field name (``source_2``...), the target."""
    extra = {role: (f"{role}.png", data) for role, data in more.items()}
    return {"source": ("me.png", source), **extra, "target": ("photo.jpg", target)}


def test_more_photos_of_the_source_person(
    service: tuple[TestClient, Path],
    source_png: bytes,
    target_jpeg: bytes,
    astronaut_rgb: np.ndarray,
) -> None:
    """``source_2`` (and ``source_3``) add photos of the same person, merged into one
    source; a photo of someone else is merged too, and the job's notes say so."""
    client, data_dir = service
    key = make_key(data_dir, "alice")
    smaller = io.BytesIO()
    Image.fromarray(astronaut_rgb).resize((384, 384)).save(smaller, format="PNG")
    jobs = {}
    for name, extra in (("same", smaller.getvalue()), ("other", target_jpeg)):
        response = client.post(
            "/v1/jobs", headers=auth(key), files=_photos(source_png, target_jpeg, source_2=extra)
        )
        assert response.status_code == 202, response.text
        assert set(response.json()["inputs"]) == {"source", "source_2", "target"}
        jobs[name] = response.json()["id"]
    same = wait_for(client, jobs["same"], key)
    assert same["state"] == "done", same
    assert same["notes"] == []
    other = wait_for(client, jobs["other"], key)
    assert other["state"] == "done", other
    assert any("looks like another person" in note for note in other["notes"])
    # A photo that is not an image is refused like a bad source.
    bad = client.post(
        "/v1/jobs",
        headers=auth(key),
        files=_photos(source_png, target_jpeg, source_3=b"not an image"),
    )
    assert bad.status_code in (415, 422), bad.text


def test_png_tiff_avif_and_heic_targets_and_output_format_is_honoured(
    service: tuple[TestClient, Path], source_png: bytes, astronaut_rgb: np.ndarray
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "png")
    flipped, tiff, avif = io.BytesIO(), io.BytesIO(), io.BytesIO()
    Image.fromarray(np.ascontiguousarray(astronaut_rgb[:, ::-1])).save(flipped, format="PNG")
    Image.fromarray(astronaut_rgb).save(tiff, format="TIFF", compression="tiff_lzw")
    Image.fromarray(astronaut_rgb).save(avif, format="AVIF", quality=90)
    auto = submit(client, key, source_png, flipped.getvalue(), names=("a.png", "b.png")).json()
    webp = submit(client, key, source_png, flipped.getvalue(), output_format="webp").json()
    from_tiff = submit(client, key, source_png, tiff.getvalue(), names=("a.png", "b.tif")).json()
    assert from_tiff["inputs"]["target"]["type"] == "image/tiff"
    from_avif = submit(client, key, source_png, avif.getvalue(), names=("a.png", "b.avif")).json()
    assert from_avif["inputs"]["target"]["type"] == "image/avif"
    # An iPhone's HEIC photo (read, not written): a JPEG, as from a JPEG.
    heic = (Path(__file__).resolve().parents[1] / "io" / "data" / "astronaut.heic").read_bytes()
    from_heic = submit(client, key, source_png, heic, names=("a.png", "IMG_1.HEIC")).json()
    assert from_heic["inputs"]["target"]["type"] == "image/heic"
    for job, kind in (
        (auto, "PNG"),
        (webp, "WEBP"),
        (from_tiff, "PNG"),
        (from_avif, "PNG"),
        (from_heic, "JPEG"),
    ):
        done = wait_for(client, job["id"], key)
        assert done["state"] == "done", done
        content = client.get(done["result"]["url"], headers=auth(key)).content
        assert Image.open(io.BytesIO(content)).format == kind


def test_a_transparent_target_gives_a_transparent_result(
    service: tuple[TestClient, Path], source_png: bytes, grace_hopper_rgb: np.ndarray
) -> None:
    """A cut-out portrait (transparent round it, a soft edge): the PNG result keeps
    its alpha, and its watermark over white, as a viewer shows it."""
    from faceweave.io import read_image
    from faceweave.provenance import detect_watermark, watermark_id

    client, data_dir = service
    key = make_key(data_dir, "transparent")
    h, w = grace_hopper_rgb.shape[:2]
    yy, xx = np.mgrid[:h, :w]
    reach = np.hypot((xx - w / 2) / (0.45 * w), (yy - h / 2) / (0.5 * h))
    alpha = np.clip((1.1 - reach) * 255 / 0.2, 0, 255).astype(np.uint8)
    cut_out = io.BytesIO()
    Image.fromarray(np.dstack([grace_hopper_rgb, alpha]), mode="RGBA").save(cut_out, format="PNG")
    job = submit(client, key, source_png, cut_out.getvalue(), names=("a.png", "b.png")).json()
    done = wait_for(client, job["id"], key)
    assert done["state"] == "done", done
    content = client.get(done["result"]["url"], headers=auth(key)).content
    result = np.asarray(Image.open(io.BytesIO(content)))
    assert result.shape == (h, w, 4)
    np.testing.assert_array_equal(result[:, :, 3], alpha)
    found = detect_watermark(read_image(data_dir / "jobs" / job["id"] / "result.png"))
    assert found.found and found.payload == watermark_id(job["id"]), found


def test_results_carry_provenance(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    from faceweave.provenance import detect_watermark, read_labels, watermark_id

    client, data_dir = service
    key = make_key(data_dir, "provenance")
    job = submit(client, key, source_png, target_jpeg, output_format="png").json()
    done = wait_for(client, job["id"], key)
    path = data_dir / "jobs" / job["id"] / "result.png"
    labels = read_labels(path)
    assert any(value == job["id"] for value in labels.values()), labels
    from faceweave.io import read_image

    found = detect_watermark(read_image(path))
    assert found.found and found.payload == watermark_id(job["id"]), found
    assert done["result"]["sha256"]


def test_no_face_in_source_fails_the_job_with_a_clear_error(
    service: tuple[TestClient, Path], target_jpeg: bytes
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "noface")
    blank = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 90, 160)).save(blank, format="PNG")
    job = submit(client, key, blank.getvalue(), target_jpeg).json()
    done = wait_for(client, job["id"], key)
    assert done["state"] == "failed"
    assert done["error"]["code"] == "no_face"
    assert "source" in done["error"]["message"]
    assert "/" not in done["error"]["message"]  # no server paths leak
    result = client.get(f"/v1/jobs/{job['id']}/result", headers=auth(key))
    assert result.status_code == 409
    assert result.json()["error"]["code"] == "not_done"


def test_preview_returns_a_jpeg(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "preview")
    response = client.post(
        "/v1/preview",
        headers=auth(key),
        files={"source": ("a.png", source_png), "target": ("b.jpg", target_jpeg)},
        data={"fusion": "0.5"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/jpeg"
    assert Image.open(io.BytesIO(response.content)).size == (512, 600)
    # Nothing left in this server's previews folder (its only one).
    (own,) = (data_dir / "previews").iterdir()
    assert list(own.iterdir()) == []
    # With a second photo of the source person: the same photo twice previews alike.
    twice = client.post(
        "/v1/preview",
        headers=auth(key),
        files=_photos(source_png, target_jpeg, source_2=source_png),
        data={"fusion": "0.5"},
    )
    assert twice.status_code == 200, twice.text
    once = np.asarray(Image.open(io.BytesIO(response.content)), np.int16)
    assert np.abs(np.asarray(Image.open(io.BytesIO(twice.content)), np.int16) - once).mean() < 1.0
    # Hands kept: the service's own hand finder looks round Grace Hopper's face and
    # finds none (her tie's knot is no hand), so the preview is the same.
    hands = client.post(
        "/v1/preview",
        headers=auth(key),
        files={"source": ("a.png", source_png), "target": ("b.jpg", target_jpeg)},
        data={"fusion": "0.5", "mask_hands": "true"},
    )
    assert hands.status_code == 200, hands.text
    assert hands.content == response.content


def test_bad_options_are_422(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "options")
    for options, word in (
        ({"fusion": "2"}, "fusion"),
        ({"fusion": "nan"}, "fusion"),
        ({"color": "purple"}, "colo"),
        ({"blend": "smudge"}, "blend"),
        ({"face_selector": "reference"}, "reference"),
        ({"wat": "1"}, "wat"),
        ({"mask_eyes": "maybe"}, "mask_eyes"),
        ({"mask_hands": "maybe"}, "mask_hands"),
        ({"gaze": "camera"}, "gaze"),
    ):
        response = submit(client, key, source_png, target_jpeg, **options)
        assert response.status_code == 422, (options, response.text)
        assert word in response.json()["error"]["message"], response.json()
    missing = client.post("/v1/jobs", headers=auth(key), files={"source": ("a.png", source_png)})
    assert missing.status_code == 422
    assert missing.json()["error"]["code"] == "missing_file"
    assert client.get("/v1/jobs", headers=auth(key)).json()["jobs"] == []


def test_page_static_files_health_and_schema(service: tuple[TestClient, Path]) -> None:
    client, _ = service
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'src="/static/app.js"' in page.text and 'href="/live"' in page.text
    for name in ("app.js", "style.css", "live.js", "live-worker.js", "live.html"):
        assert client.get(f"/static/{name}").status_code == 200, name
    worker = client.get("/static/live-worker.js")
    assert "javascript" in worker.headers["content-type"] and "onrtctransform" in worker.text
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["workers"] == 1 and health["provenance"]
    schema = client.get("/openapi.json").json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/result", "/v1/preview"} <= set(
        schema["paths"]
    )
    body = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert body["schema"]["required"] == ["source", "target"]
    # Every option a job takes is in the form's schema (a generated client can set it).
    assert set(JobOptions.__dataclass_fields__) <= set(body["schema"]["properties"])
    unknown = client.get("/nope")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


def test_video_job_end_to_end(
    service: tuple[TestClient, Path], source_png: bytes, astronaut_rgb: np.ndarray, tmp_path: Path
) -> None:
    import cv2

    from faceweave.io.video import VideoWriter, probe_video
    from faceweave.provenance import detect_watermark_frames, watermark_id

    client, data_dir = service
    key = make_key(data_dir, "video")
    clip = tmp_path / "clip.mp4"
    frame = np.ascontiguousarray(cv2.cvtColor(astronaut_rgb[:, ::-1], cv2.COLOR_RGB2BGR))
    frame = cv2.resize(frame, (256, 256))
    with VideoWriter(clip, width=256, height=256, fps=10) as writer:
        for index in range(10):
            writer.write(frame, pts=index)
    response = submit(
        client, key, source_png, clip.read_bytes(), names=("me.png", "clip.mp4"), fusion=0.9
    )
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key, timeout=120)
    assert done["state"] == "done", done
    assert done["kind"] == "video" and done["result"]["media_type"] == "video/mp4"
    result = tmp_path / "result.mp4"
    result.write_bytes(client.get(done["result"]["url"], headers=auth(key)).content)
    info = probe_video(result)
    assert (info.width, info.height) == (256, 256)
    from faceweave.io.video import VideoReader

    with VideoReader(result) as reader:
        found = detect_watermark_frames(f.image for f in reader)
    assert found.found and found.payload == watermark_id(done["id"])
    # No intermediate file left beside the result.
    assert sorted(p.name for p in (data_dir / "jobs" / done["id"]).iterdir()) == [
        "result.mp4",
        "source.png",
        "target.mp4",
    ]


def test_an_animated_gif_job_comes_back_animated(
    service: tuple[TestClient, Path], source_png: bytes, astronaut_rgb: np.ndarray, tmp_path: Path
) -> None:
    """An animated GIF target (it had been refused as no image or video) is a video job:
    each frame swapped, the result a GIF with the target's timing and loop count."""
    import cv2
    from PIL import Image

    from faceweave.io.animation import AnimationReader

    client, data_dir = service
    key = make_key(data_dir, "gif")
    small = cv2.resize(astronaut_rgb, (256, 256))
    frames = [Image.fromarray(np.roll(small, 3 * i, axis=1)) for i in range(4)]
    buffer = io.BytesIO()
    frames[0].save(
        buffer, format="GIF", save_all=True, append_images=frames[1:], duration=[80, 80, 160, 80]
    )
    response = submit(client, key, source_png, buffer.getvalue(), names=("me.png", "loop.gif"))
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key, timeout=120)
    assert done["state"] == "done", done
    assert done["kind"] == "video" and done["result"]["media_type"] == "image/gif"
    result = tmp_path / "result.gif"
    result.write_bytes(client.get(done["result"]["url"], headers=auth(key)).content)
    with AnimationReader(result) as reader:
        assert reader.durations_ms == (80, 80, 160, 80) and reader.plays == 1
        images = [f.image for f in reader]
    before = cv2.cvtColor(small, cv2.COLOR_RGB2BGR).astype(int)
    assert np.abs(images[0].astype(int) - before).max(axis=2).mean() > 2  # swapped


def test_a_profile_target_is_noted(
    service: tuple[TestClient, Path], source_png: bytes, shared_faces: Path
) -> None:
    """As the command line's note: little of a profile is swapped, and the job says so."""
    client, data_dir = service
    key = make_key(data_dir, "profile")
    target = (shared_faces / "img_p15_aflw_profile_man.jpg").read_bytes()
    response = submit(client, key, source_png, target, names=("me.png", "profile.jpg"))
    done = wait_for(client, response.json()["id"], key)
    assert done["state"] == "done", done
    (note,) = [n for n in done["notes"] if "profile" in n]
    assert note.startswith("target: the face at (") and "seen in profile" in note


def test_a_video_cut_short_keeps_what_decodes_and_says_so(
    service: tuple[TestClient, Path],
    source_png: bytes,
    astronaut_rgb: np.ndarray,
    tmp_path: Path,
) -> None:
    """A target cut short (its header announces more than its frames hold) is swapped
    as far as it decodes, and the job's notes say so (the command line warns)."""
    import cv2
    from clips import make_clip  # tests/clips.py: 1 s at 30 fps with an AAC tone

    client, data_dir = service
    key = make_key(data_dir, "cut")
    scene = np.ascontiguousarray(cv2.cvtColor(astronaut_rgb, cv2.COLOR_RGB2BGR))
    whole = make_clip(tmp_path / "clip.mkv", scene, frames=30, size=(256, 256)).read_bytes()
    cut = whole[: len(whole) * 6 // 10]
    response = submit(client, key, source_png, cut, names=("me.png", "clip.mkv"))
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key, timeout=120)
    assert done["state"] == "done", done
    (note,) = [n for n in done["notes"] if "truncated" in n]
    assert note.startswith("target.mkv: video ends at ") and "kept the frames that decode" in note
    assert str(data_dir) not in " ".join(done["notes"])


def test_a_video_job_trims_and_leaves_the_sound_out_when_asked(
    service: tuple[TestClient, Path],
    source_png: bytes,
    target_jpeg: bytes,
    astronaut_rgb: np.ndarray,
    tmp_path: Path,
) -> None:
    """keep_audio, trim_start and trim_end, as the command line's --no-audio,
    --trim-start and --trim-end; for an image target they are a bad option."""
    import av
    import cv2
    from clips import make_clip  # tests/clips.py: 1 s at 30 fps with an AAC tone

    client, data_dir = service
    key = make_key(data_dir, "trim")
    scene = np.ascontiguousarray(cv2.cvtColor(astronaut_rgb, cv2.COLOR_RGB2BGR))
    clip = make_clip(tmp_path / "clip.mp4", scene, frames=30, size=(256, 256)).read_bytes()
    names = ("me.png", "clip.mp4")
    response = submit(
        client, key, source_png, clip, names=names, trim_start=0.2, trim_end=0.6, keep_audio=False
    )
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key, timeout=120)
    assert done["state"] == "done", done
    result = tmp_path / "result.mp4"
    result.write_bytes(client.get(done["result"]["url"], headers=auth(key)).content)
    with av.open(str(result)) as container:
        assert not container.streams.audio
        frames = sum(1 for _ in container.decode(video=0))
    assert 11 <= frames <= 13  # 0.4 s at 30 fps
    for options, message in (
        ({"trim_start": 0.5, "trim_end": 0.5}, "must come after trim_start"),
        ({"trim_start": -1}, "trim_start must be 0 or more"),
        ({"trim_start": 5}, "trim_start 5 s is past the end of the target (1.00 s long)"),
    ):
        refused = submit(client, key, source_png, clip, names=names, **options)
        assert refused.status_code == 422 and message in refused.json()["error"]["message"]
    # The preview shows the video's frame at trim_start: the scene slides 2 px a frame.
    previews = [
        client.post(
            "/v1/preview",
            headers=auth(key),
            files={"source": ("me.png", source_png), "target": ("clip.mp4", clip)},
            data={"trim_start": str(start)},
        )
        for start in (0, 0.5)
    ]
    assert all(p.status_code == 200 for p in previews), [p.text for p in previews]
    first, later = (np.asarray(Image.open(io.BytesIO(p.content)), np.int16) for p in previews)
    shift = np.abs(np.roll(first, 30, axis=1)[:, 40:-40] - later[:, 40:-40]).mean()
    assert shift < 0.5 * np.abs(first - later)[:, 40:-40].mean()
    refused = submit(client, key, source_png, target_jpeg, trim_end=2, keep_audio=False)
    assert refused.status_code == 422
    assert refused.json()["error"] == {
        "code": "bad_option",
        "message": "keep_audio and trim_end apply to video targets only",
    }
    for options, message in (
        ({"quality": 50}, "quality applies to image targets only"),
        ({"output_format": "png"}, "output_format applies to image targets only"),
    ):
        refused = submit(client, key, source_png, clip, names=names, **options)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == {"code": "bad_option", "message": message}


def test_an_image_job_swaps_a_face_cut_by_the_frame(
    service: tuple[TestClient, Path], astronaut_rgb: np.ndarray, target_jpeg: bytes
) -> None:
    """Image jobs look for faces cut by the frame's sides, as the command line does:
    the astronaut with three fifths of her face out of the frame is found and swapped."""
    client, data_dir = service
    key = make_key(data_dir, "alice")
    cut = np.ascontiguousarray(astronaut_rgb[:, :216])  # her face spans x 179-271
    buffer = io.BytesIO()
    Image.fromarray(cut).save(buffer, format="PNG")
    response = submit(client, key, target_jpeg, buffer.getvalue(), names=("me.jpg", "cut.png"))
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key)
    assert done["state"] == "done", done
    result = client.get(done["result"]["url"], headers=auth(key))
    image = np.asarray(Image.open(io.BytesIO(result.content)).convert("RGB"), np.int16)
    assert image.shape == cut.shape
    face = np.abs(image - cut)[80:170, 180:216]  # the half face in the frame
    assert face.mean() > 8


def test_a_range_outside_the_result_is_a_json_error(
    make_client: AppFactory, tmp_path: Path, source_png: bytes, target_jpeg: bytes
) -> None:
    """Starlette answers a bad Range in plain text (a 416 with an empty body); the
    service's errors are all JSON, and the 416 keeps its Content-Range."""
    data_dir = tmp_path / "d"
    key = make_key(data_dir, "ranges")
    client = make_client(workers=0, data_dir=data_dir)  # the test finishes the job itself
    job_id = submit(client, key, source_png, target_jpeg).json()["id"]
    store = client.app.state.service.store
    job = store.claim("test")
    assert job is not None and job.id == job_id
    store.result_path(job_id, ".jpg").write_bytes(bytes(1000))
    assert store.complete(job, ".jpg", "0" * 64)
    url = f"/v1/jobs/{job_id}/result"
    part = client.get(url, headers={**auth(key), "Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == bytes(10)
    # Several ranges at once come as one multipart/byteranges answer, as documented.
    parts = client.get(url, headers={**auth(key), "Range": "bytes=0-9,500-509"})
    assert parts.status_code == 206
    assert parts.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert b"Content-Range: bytes 0-9/1000" in parts.content
    assert b"Content-Range: bytes 500-509/1000" in parts.content
    outside = client.get(url, headers={**auth(key), "Range": "bytes=999999999-"})
    assert outside.status_code == 416
    assert outside.headers["content-range"] == "bytes */1000"
    assert outside.json()["error"] == {
        "code": "range_not_satisfiable",
        "message": "the range asked for is outside the result (1000 bytes)",
    }
    for malformed in ("items=0-9", "bytes=9-2"):
        response = client.get(url, headers={**auth(key), "Range": malformed})
        assert response.status_code == 400, malformed
        assert response.json()["error"]["code"] == "bad_range", malformed
    # A client that has the result (its ETag) gets a 304 and no body; another tag, the file.
    etag = part.headers["etag"]
    for tags in (etag, f'"x", W/{etag}', "*"):
        cached = client.get(url, headers={**auth(key), "If-None-Match": tags})
        assert cached.status_code == 304 and not cached.content, tags
        assert cached.headers["etag"] == etag
    fresh = client.get(url, headers={**auth(key), "If-None-Match": '"other"'})
    assert fresh.status_code == 200 and fresh.content == bytes(1000)


def test_a_deleted_job_is_gone_and_never_listed_as_cancelled(
    make_client: AppFactory, tmp_path: Path, source_png: bytes, target_jpeg: bytes
) -> None:
    """DELETE cancels a queued or running job and deletes it at once: no client ever
    sees the state cancelled, so it is no state to filter on either."""
    data_dir = tmp_path / "d"
    key = make_key(data_dir, "cancel")
    client = make_client(workers=0, data_dir=data_dir)  # the job stays queued
    job_id = submit(client, key, source_png, target_jpeg).json()["id"]
    assert client.delete(f"/v1/jobs/{job_id}", headers=auth(key)).status_code == 204
    assert client.get(f"/v1/jobs/{job_id}", headers=auth(key)).status_code == 404
    listed = client.get("/v1/jobs?state=cancelled", headers=auth(key))
    assert listed.status_code == 422
    assert listed.json()["error"] == {
        "code": "bad_option",
        "message": "state must be one of queued, running, done, failed",
    }
    schema = client.get("/openapi.json").json()["components"]["schemas"]["JobOut"]
    assert "cancelled" not in schema["properties"]["state"]["description"]


def test_every_error_code_is_in_the_docs_table() -> None:
    """Each 4xx code the service answers with is listed under its status in
    docs/service.md (405 method_not_allowed and 422 bad_offer were missing)."""
    source = "\n".join(path.read_text() for path in (ROOT / "faceweave/service").glob("*.py"))
    # ServiceError(422, "bad_option", ...), return 413, "image_too_large", {405: "method_..."}
    answered = set(re.findall(r"\b(4\d\d)[,:]\s*\"([a-z_]+)\"", source))
    assert ("405", "method_not_allowed") in answered and ("422", "bad_offer") in answered
    docs = (ROOT / "docs/service.md").read_text()
    table = {
        status: set(re.findall(r"`([a-z_]+)`", codes))
        for status, codes in re.findall(r"^\| (\d{3}) \| (.*) \|$", docs, re.MULTILINE)
    }
    missing = sorted(
        (status, code) for status, code in answered if code not in table.get(status, ())
    )
    assert missing == []


def test_a_misspelt_live_offer_field_is_refused(service: tuple[TestClient, Path]) -> None:
    """{"fusoin": 0.5} would otherwise start a session at the default fusion of 1."""
    client, data_dir = service
    key = make_key(data_dir, "live")
    offer = {"sdp": "v=0", "fusoin": 0.5}
    response = client.post("/v1/live/offer", json=offer, headers=auth(key))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "bad_request" and "fusoin" in error["message"], error


def test_a_live_fusion_of_nan_is_no_finite_number(service: tuple[TestClient, Path]) -> None:
    """NaN (which Python's JSON reads) had been told "should be less than or equal to 1"."""
    client, data_dir = service
    key = make_key(data_dir, "live")
    headers = {**auth(key), "content-type": "application/json"}
    for path, body in (
        ("/v1/live/" + "0" * 32 + "/fusion", b'{"fusion": NaN}'),
        ("/v1/live/offer", b'{"sdp": "v=0", "fusion": NaN}'),
    ):
        response = client.post(path, content=body, headers=headers)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["message"].endswith(": Input should be a finite number")


def test_a_malformed_live_offer_is_a_bad_offer(service: tuple[TestClient, Path]) -> None:
    """SDP that aiortc's parser cannot read is a 422 bad_offer, never a server error: a
    connection line "c=6`/" (found by the schema fuzzing) failed one of its asserts."""
    client, data_dir = service
    key = make_key(data_dir, "live")
    for sdp in ("c=6`/", "v=0\r\nc=IN IP4\r\n", "m=", "a=rtpmap:", "v=0\r\no=- 1\r\n"):
        response = client.post("/v1/live/offer", json={"sdp": sdp}, headers=auth(key))
        assert response.status_code == 422, (sdp, response.text)
        error = response.json()["error"]
        assert error["code"] == "bad_offer" and error["message"], (sdp, error)


def test_an_image_job_swaps_a_groups_small_faces(
    service: tuple[TestClient, Path],
    astronaut_rgb: np.ndarray,
    grace_hopper_rgb: np.ndarray,
    target_jpeg: bytes,
) -> None:
    """Image jobs look at a photo in tiles, as the command line does: in a 1080p
    frame of six portraits the astronaut's faces, about 50 px wide, are swapped (a
    look at the whole frame alone found no face, not even Grace Hopper's 90 px)."""
    from portraits import SMALL_AT_1080P, portrait_frame  # tests/portraits.py

    client, data_dir = service
    key = make_key(data_dir, "group")
    at = SMALL_AT_1080P
    frame = portrait_frame([astronaut_rgb, grace_hopper_rgb], (1080, 1920), at, 260)
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    response = submit(
        client, key, target_jpeg, buffer.getvalue(), names=("me.jpg", "group.png"),
        face_selector="many",
    )  # fmt: skip
    assert response.status_code == 202, response.text
    done = wait_for(client, response.json()["id"], key)
    assert done["state"] == "done", done
    result = client.get(done["result"]["url"], headers=auth(key))
    image = np.asarray(Image.open(io.BytesIO(result.content)).convert("RGB"), np.int16)
    # The astronaut's face sits at about (0.35-0.53, 0.14-0.35) of her portrait.
    for x, y in at[0::2]:
        box = (slice(y + 40, y + 90), slice(x + 95, x + 135))
        assert np.abs(image[box] - frame[box]).mean() > 4, (x, y)


def test_video_jobs_analyse_frames_as_the_command_line() -> None:
    """A video job's analyser is the video mode's (tracking mesh, tiles only on frames
    with no face, no search for faces cut by the sides), one per worker, reset for
    each clip, sharing the identity model with the photos' analyser."""
    from faceweave.service.worker import Engine

    engine = Engine(preload_identity=False)
    assert engine.analyser.detect_tiles > 1 and engine.analyser.detect_edges
    first = engine.video_analyser()
    assert first.mode == "video" and not first.detect_edges
    assert first.identity is engine.analyser.identity
    frame = np.zeros((64, 64, 3), np.uint8)
    first.get_faces(frame)
    calls = first.detector._calls  # type: ignore[attr-defined]
    assert calls > 0
    assert engine.video_analyser() is first
    assert first.detector._calls == 0  # type: ignore[attr-defined]  # reset: a new clip
    # A job that swaps every face has its own, which sweeps the tiles (small faces
    # beside a close one); a one-face job's does not.
    every = engine.video_analyser(all_faces=True)
    assert every is not first and every.sweep_tiles and not first.sweep_tiles
    assert every.identity is engine.analyser.identity
    assert engine.video_analyser(all_faces=True) is every


def test_a_wrong_method_is_told_every_method_the_path_takes(
    service: tuple[TestClient, Path],
) -> None:
    """RFC 9110: a 405's Allow lists every method the resource takes (Starlette named
    the first route's alone: PUT /v1/jobs had been told "Allow: POST")."""
    client, data_dir = service
    key = make_key(data_dir, "allow")
    jobs = client.put("/v1/jobs", headers=auth(key))
    assert jobs.status_code == 405 and jobs.json()["error"]["code"] == "method_not_allowed"
    assert jobs.headers["allow"] == "GET, HEAD, POST"
    job = client.put("/v1/jobs/abc", headers=auth(key))
    assert job.status_code == 405 and job.headers["allow"] == "DELETE, GET, HEAD"
    # The page's static files (their mount names no methods: the header had been empty).
    static = client.put("/static/app.js")
    assert static.status_code == 405 and static.headers["allow"] == "GET, HEAD"


def test_a_mark_that_does_not_survive_the_quality_is_noted(
    service: tuple[TestClient, Path],
    source_png: bytes,
    target_jpeg: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A low quality's mark is checked as saved and made stronger (see
    mark_for_saving); when none is found, the job's notes say so (the command line
    warns)."""
    import faceweave.provenance.labels as labels_module

    client, data_dir = service
    key = make_key(data_dir, "weak")

    def never_found(frame: np.ndarray, job_id: str, path: object, quality: int) -> tuple:
        return labels_module.embed_watermark(frame, job_id), False

    monkeypatch.setattr(labels_module, "mark_for_saving", never_found)
    job = submit(client, key, source_png, target_jpeg, output_format="jpg", quality=20).json()
    done = wait_for(client, job["id"], key)
    assert done["state"] == "done"
    assert any("does not survive quality 20" in note for note in done["notes"]), done["notes"]
