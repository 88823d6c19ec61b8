"""The MediaPipe backend's own call path gives what MediaPipe's ``process`` gives."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from portraits import SMALL_AT_1080P, portrait_frame, portraits_found  # tests/portraits.py

from faceweave.analysis.mediapipe_backend import _process


def _mesh_points(result) -> np.ndarray:  # type: ignore[no-untyped-def]
    faces = result.multi_face_landmarks
    assert faces, "no face fitted"
    return np.array([[p.x, p.y, p.z] for p in faces[0].landmark], np.float32)


@pytest.mark.parametrize("model_selection", [0, 1])
def test_detection_matches_process(astronaut: np.ndarray, model_selection: int) -> None:
    import mediapipe as mp

    rgb = np.ascontiguousarray(cv2.cvtColor(astronaut, cv2.COLOR_BGR2RGB))
    ours_model = mp.solutions.face_detection.FaceDetection(model_selection=model_selection)
    theirs_model = mp.solutions.face_detection.FaceDetection(model_selection=model_selection)
    try:
        ours, theirs = _process(ours_model, rgb), theirs_model.process(rgb)
    finally:
        ours_model.close()
        theirs_model.close()
    assert ours.detections and len(ours.detections) == len(theirs.detections)
    for a, b in zip(ours.detections, theirs.detections, strict=True):
        assert a.score == b.score
        assert a.location_data == b.location_data


def test_mesh_matches_process_frame_after_frame(grace_hopper: np.ndarray) -> None:
    """The tracking graph too: two frames in a row, same landmarks from both paths."""
    import mediapipe as mp

    rgb = np.ascontiguousarray(cv2.cvtColor(grace_hopper, cv2.COLOR_BGR2RGB))
    shifted = np.ascontiguousarray(np.roll(rgb, 3, axis=1))

    def mesh():  # type: ignore[no-untyped-def]
        return mp.solutions.face_mesh.FaceMesh(
            static_image_mode=False, max_num_faces=1, refine_landmarks=True
        )

    ours_model, theirs_model = mesh(), mesh()
    try:
        for image in (rgb, shifted):
            ours = _mesh_points(_process(ours_model, image))
            theirs = _mesh_points(theirs_model.process(image))
            assert ours.shape == (478, 3)
            np.testing.assert_array_equal(ours, theirs)
    finally:
        ours_model.close()
        theirs_model.close()


def test_no_face_reads_as_none() -> None:
    import mediapipe as mp

    model = mp.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1)
    try:
        result = _process(model, np.zeros((128, 128, 3), np.uint8))
    finally:
        model.close()
    assert result.multi_face_landmarks is None


@pytest.mark.parametrize(
    ("canvas", "side", "at"),
    [
        ((3000, 4000), 2000, (1900, 600)),
        ((480, 854), 200, (500, 150)),
        ((1080, 1920), 400, (100, 500)),
    ],
)
def test_detections_land_where_they_are_in_large_and_odd_frames(
    astronaut: np.ndarray, canvas: tuple[int, int], side: int, at: tuple[int, int]
) -> None:
    """The detector's shrunk copies (whole frame and tiles) map back to the frame: the
    astronaut pasted into a phone-photo-sized, a 480p and a 1080p frame is found where
    her face is."""
    from faceweave.analysis.mediapipe_backend import BlazeFaceDetector
    from faceweave.core.geometry import bbox_iou

    detector = BlazeFaceDetector(adaptive=False, tiles=2)
    try:
        own = max(detector.detect(astronaut), key=lambda d: d.score)
        frame = np.full((*canvas, 3), 90, np.uint8)
        x, y = at
        frame[y : y + side, x : x + side] = cv2.resize(astronaut, (side, side))
        found = detector.detect(frame)
    finally:
        detector.close()
    k = side / astronaut.shape[0]
    x0, y0, x1, y1 = (v * k + o for v, o in zip(own.bbox, (x, y, x, y), strict=True))
    expected = (x0, y0, x1, y1)
    face = max(found, key=lambda d: bbox_iou(d.bbox, expected))
    assert bbox_iou(face.bbox, expected) > 0.6, (face.bbox, expected)
    assert face.keypoints is not None
    assert ((face.keypoints > [x0, y0]) & (face.keypoints < [x1, y1])).all()
    # (BlazeFace reads a few low-score boxes on her suit and the flag, which move with
    # the scale; what it is sure of is her face, where it is.)
    for det in found:
        if det.score >= 0.9:
            assert bbox_iou(det.bbox, expected) > 0.6, (det.bbox, expected)


def _wide_shot(astronaut: np.ndarray, scale: float = 0.45) -> np.ndarray:
    """A 720p frame with the astronaut's face about 45 px wide: too small for BlazeFace
    over the whole frame (it sees it at 640 px, a face of about 22 px)."""
    small = cv2.resize(astronaut, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    frame = np.full((720, 1280, 3), 120, np.uint8)
    frame[300 : 300 + small.shape[0], 700 : 700 + small.shape[1]] = small
    return frame


def test_video_looks_at_tiles_only_on_frames_without_a_face(
    astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faceweave.analysis import mediapipe_backend as mb

    wide = _wide_shot(astronaut)
    assert mb.BlazeFaceDetector(adaptive=True).detect(wide) == []  # no tiles: missed
    detector = mb.BlazeFaceDetector(adaptive=True, tiles=2)
    tiled: list[int] = []
    both = detector._both_models
    monkeypatch.setattr(
        detector,
        "_both_models",
        lambda images, **kw: tiled.append(len(images)) or both(images, **kw),
    )
    found = detector.detect(wide)  # the first frame with no face: tiles
    assert len(found) == 1 and 600 < found[0].bbox[0] < 900 and tiled == [4]
    blank = np.full((720, 1280, 3), 120, np.uint8)
    for _ in range(mb.TILE_EVERY_EMPTY - 1):  # (the wide shot counted as empty)
        detector.detect(blank)
    assert tiled == [4]
    detector.detect(blank)  # the 10th frame with no face after the first
    assert tiled == [4, 4]
    tiled.clear()
    close_up = cv2.resize(astronaut, (1280, 720))
    for _ in range(mb.TILE_EVERY_EMPTY + 1):  # a face over the whole frame: never tiles
        assert detector.detect(close_up)
    assert tiled == []


def test_a_sweep_looks_at_the_tiles_in_turn_on_frames_with_a_face(
    astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``sweep``, each call that finds a face looks at the next SWEEP_TILES tiles,
    so after enough calls every tile has been seen and the small face beside the close
    one is found; without it such frames look at no tile and the small face is missed."""
    from faceweave.analysis import mediapipe_backend as mb

    close_up = cv2.resize(astronaut, (1280, 720))
    frame = close_up.copy()
    small = cv2.resize(astronaut, None, fx=0.45, fy=0.45, interpolation=cv2.INTER_AREA)
    frame[20 : 20 + small.shape[0], 20 : 20 + small.shape[1]] = small  # a face ~45 px

    def small_found(dets: list) -> bool:  # type: ignore[type-arg]
        return any(d.bbox[2] < 260 and d.bbox[3] < 260 for d in dets)

    # Tiles within a still's 480 px, as a video file's analyser has them: 3 x 3 here.
    n = mb.tiles_across(720, 1280, 2, mb.TILE_MOST_PX)
    count = len(mb.tile_grid(720, 1280, *mb.tile_counts(720, 1280, n)))
    calls = -(-count // mb.SWEEP_TILES)
    for sweep in (True, False):
        detector = mb.BlazeFaceDetector(
            adaptive=True, tiles=2, tile_most_px=mb.TILE_MOST_PX, sweep=sweep
        )
        picked: list[int] = []
        parts = detector._parts

        def recording(
            image: np.ndarray,
            n: int,
            side: int,
            picked: list[int] = picked,
            parts: Any = parts,
            **kw: Any,
        ) -> Any:
            picked.extend(kw.get("pick") or [])
            return parts(image, n, side, **kw)

        monkeypatch.setattr(detector, "_parts", recording)
        found = [detector.detect(frame) for _ in range(calls)]
        assert all(any(d.bbox[2] - d.bbox[0] > 150 for d in f) for f in found)  # close face
        if sweep:
            # in turn, round the grid and on (9 tiles here: the 5th call sees 8, then 0)
            assert picked == [i % count for i in range(calls * mb.SWEEP_TILES)]
            assert any(small_found(f) for f in found)
        else:
            assert picked == [] and not any(small_found(f) for f in found)
        detector.reset()
        picked.clear()
        detector.detect(frame)
        assert picked == (list(range(mb.SWEEP_TILES)) if sweep else [])  # afresh


@pytest.mark.parametrize(
    ("size", "n", "counts"),
    [
        ((512, 512), 1, (1, 1)),
        ((512, 512), 2, (2, 2)),
        ((3000, 4000), 2, (2, 2)),  # 4:3, 3:2 and 16:9 frames: n x n, as before
        ((4000, 6000), 2, (2, 2)),
        ((720, 1280), 1, (1, 1)),
        ((720, 1280), 2, (2, 2)),
        ((512, 1100), 2, (3, 2)),  # over 2:1: three tiles across
        ((512, 1100), 1, (1, 1)),  # 2:1 (a phone's screen): whole
        ((512, 1600), 1, (2, 1)),  # over 3:1: in parts too
        ((512, 4096), 1, (4, 1)),
        ((4096, 512), 1, (1, 4)),
        ((512, 4096), 2, (8, 2)),  # at most MAX_TILES_ALONG along
        ((100, 9000), 8, (8, 8)),
    ],
)
def test_tile_counts(size: tuple[int, int], n: int, counts: tuple[int, int]) -> None:
    from faceweave.analysis.mediapipe_backend import tile_counts

    assert tile_counts(*size, n) == counts


@pytest.mark.parametrize("size", [(512, 512), (720, 1280), (1080, 1920), (355, 2844), (2844, 355)])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_tile_grid_covers_the_frame_in_near_square_overlapping_parts(
    size: tuple[int, int], n: int
) -> None:
    from faceweave.analysis import mediapipe_backend as mb

    h, w = size
    across, down = mb.tile_counts(h, w, n)
    parts = mb.tile_grid(h, w, across, down)
    assert len(parts) == across * down
    covered = np.zeros(size, np.int32)
    for x, y, tw, th in parts:
        assert 0 <= x and x + tw <= w and 0 <= y and y + th <= h
        covered[y : y + th, x : x + tw] += 1
        if across * down > 1 and max(across, down) < mb.MAX_TILES_ALONG:
            limit = mb.WHOLE_MAX_ASPECT if n == 1 else mb.TILE_MAX_ASPECT
            assert max(tw, th) / min(tw, th) <= limit + 0.01, (tw, th)
    assert covered.min() >= 1  # every pixel in a part
    if across * down > 1:  # neighbours overlap, so a face on a seam is whole in one
        assert (covered >= 2).mean() > 0.1


def test_tiles_grow_with_a_large_photo() -> None:
    from faceweave.analysis import mediapipe_backend as mb

    assert mb.tiles_across(720, 1280, 1) == 1  # no tiles stays none
    assert mb.tiles_across(480, 854, 2) == 2  # a 480p frame: as asked
    assert mb.tiles_across(1080, 1920, 2) == 4  # a 1080p still: tiles within 480 px
    assert mb.tiles_across(1080, 1920, 2, mb.COARSE_TILE_MOST_PX) == 2  # in a video, 2
    assert mb.tiles_across(3000, 4000, 2) > 2  # a 12-megapixel photo: more
    assert mb.tiles_across(2000, 3000, 2) * mb.TILE_MOST_PX >= 2000 * mb.TILE_OVERLAP  # 6 MP
    assert mb.tiles_across(100_000, 100_000, 2) == mb.MAX_TILES_ALONG
    assert mb.tiles_across(3000, 4000, 8) == 8


def _sure_portraits(frame: np.ndarray, at: list[tuple[int, int]], side: int) -> set[int]:
    """The portraits a still's BlazeFace (2 tiles asked for) finds surely (over 0.7)."""
    from faceweave.analysis import mediapipe_backend as mb

    detector = mb.BlazeFaceDetector(adaptive=False, tiles=2)
    try:
        found = detector.detect(frame)
    finally:
        detector.close()
    return portraits_found([d.bbox for d in found if d.score > 0.7], at, side)


def test_a_1080p_photos_small_faces_are_found(
    astronaut: np.ndarray, grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six portraits in a 1080p frame, the astronaut's face about 50 px wide, Grace
    Hopper's about 90: tiles within TILE_MOST_PX find all six; 2 x 2 tiles (a video's,
    COARSE_TILE_MOST_PX) show the small ones to BlazeFace at 3-4% and find few."""
    from faceweave.analysis import mediapipe_backend as mb

    at = SMALL_AT_1080P
    frame = portrait_frame([astronaut, grace_hopper], (1080, 1920), at, 260)
    assert _sure_portraits(frame, at, 260) == set(range(len(at)))
    monkeypatch.setattr(mb, "TILE_MOST_PX", mb.COARSE_TILE_MOST_PX)
    assert len(_sure_portraits(frame, at, 260)) <= 3


def _strip(faces: list[np.ndarray], side: int = 512) -> np.ndarray:
    return np.hstack([cv2.resize(f, (side, side), interpolation=cv2.INTER_AREA) for f in faces])


def test_a_long_frame_is_looked_at_in_parts(
    astronaut: np.ndarray, grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six portraits side by side (3072 x 512): whole, BlazeFace sees each face about
    8 px wide and finds few; in parts along the strip too, all six, each where it is."""
    from faceweave.analysis import mediapipe_backend as mb

    strip = _strip([astronaut, grace_hopper] * 3)

    def faces_found() -> list[int]:
        detector = mb.BlazeFaceDetector(adaptive=False)
        try:  # which portrait each sure detection is in
            return sorted(
                int(d.bbox[0] + d.bbox[2]) // 2 // 512
                for d in detector.detect(strip)
                if d.score > 0.7
            )
        finally:
            detector.close()

    assert faces_found() == [0, 1, 2, 3, 4, 5]
    monkeypatch.setattr(mb, "WHOLE_MAX_ASPECT", 1e9)  # the whole strip at once
    assert len(faces_found()) < 4


def test_a_large_group_photos_small_faces_are_found(
    astronaut: np.ndarray, grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 12-megapixel photo with faces about 110 px wide: 2 x 2 tiles show them to
    BlazeFace at about 8 px; tiles kept to TILE_MOST_PX of the photo, at about 23."""
    from faceweave.analysis import mediapipe_backend as mb

    at = [(300, 400), (1700, 500), (3100, 1300), (900, 2200), (2500, 2300)]
    photo = portrait_frame([astronaut, grace_hopper], (3000, 4000), at, 300)
    assert _sure_portraits(photo, at, 300) == set(range(len(at)))
    monkeypatch.setattr(mb, "TILE_MOST_PX", 10**6)  # 2 x 2 tiles, whatever the size
    assert len(_sure_portraits(photo, at, 300)) <= 1
