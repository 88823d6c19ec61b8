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
