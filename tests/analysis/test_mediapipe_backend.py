"""The MediaPipe backend's own call path gives what MediaPipe's ``process`` gives."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

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


def _static_calls(monkeypatch: pytest.MonkeyPatch, landmarker) -> list[int]:  # type: ignore[no-untyped-def]
    """Counts the fits that ran FaceMesh's static graph (its own face search)."""
    from faceweave.analysis import mediapipe_backend

    calls: list[int] = []
    real = mediapipe_backend._process

    def counted(solution, rgb):  # type: ignore[no-untyped-def]
        if solution is landmarker._static:
            calls.append(1)
        return real(solution, rgb)

    monkeypatch.setattr(mediapipe_backend, "_process", counted)
    return calls


def _turned(frame: np.ndarray, degrees: float) -> tuple[np.ndarray, np.ndarray]:
    """``frame`` turned ``degrees`` clockwise about its centre on a larger canvas, and
    the frame -> canvas affine matrix."""
    h, w = frame.shape[:2]
    side = int(np.hypot(h, w)) + 2
    matrix = cv2.getRotationMatrix2D((w / 2, h / 2), -degrees, 1.0)
    matrix[:, 2] += (side - w) / 2, (side - h) / 2
    return cv2.warpAffine(frame, matrix, (side, side), borderValue=(90, 90, 90)), matrix


@pytest.mark.parametrize("degrees", [0, 30, -25, 110])
def test_region_mesh_fits_without_a_second_search(
    grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch, degrees: float
) -> None:
    """A still image's mesh is fitted on the region the detection gives, turned by the
    detection's roll, without FaceMesh's own face search: upright and tilted faces
    alike (a region turned the wrong way finds no face or a skewed one), and a quarter
    turn plus some (110 degrees) on the crop turned by the quarter turn."""
    from faceweave.analysis.analyser import mesh_roll
    from faceweave.analysis.mediapipe_backend import BlazeFaceDetector, MeshLandmarker

    frame, matrix = _turned(grace_hopper, degrees)
    detector, landmarker = BlazeFaceDetector(adaptive=False), MeshLandmarker()
    try:
        upright = max(detector.detect(grace_hopper), key=lambda d: d.score)
        expected = landmarker.fit(grace_hopper, upright.bbox, upright.roll)
        det = max(detector.detect(frame), key=lambda d: d.score)
        roll = det.roll if degrees < 90 else degrees  # BlazeFace's keypoints fail past 90
        calls = _static_calls(monkeypatch, landmarker)
        points = landmarker.fit(frame, det.bbox, roll)
    finally:
        detector.close()
        landmarker.close()
    assert expected is not None and points is not None
    assert not calls, "the static graph searched for the face again"
    assert abs((mesh_roll(points) - degrees + 180) % 360 - 180) < 3
    moved = expected[:, :2] @ matrix[:, :2].T + matrix[:, 2]
    width = np.ptp(moved[:, 0])
    assert np.linalg.norm(points[:, :2] - moved, axis=1).mean() < 0.02 * width


def test_region_without_a_face_falls_back_to_the_search(
    grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the landmark model finds no face in the region, the static graph looks for
    one in the crop; on a blank frame neither finds one."""
    from faceweave.analysis.mediapipe_backend import MeshLandmarker

    landmarker = MeshLandmarker()
    try:
        calls = _static_calls(monkeypatch, landmarker)
        blank = np.full((400, 400, 3), 128, np.uint8)
        assert landmarker.fit(blank, (100.0, 100.0, 300.0, 300.0)) is None
        assert calls == [1]
    finally:
        landmarker.close()
