"""Faces turned in the image plane: sideways and upside-down photos, detector angles."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.analysis.analyser import (
    DETECTOR_ANGLES,
    FaceAnalyser,
    detect_turned,
    mesh_roll,
)
from faceweave.analysis.base import Detection, nms, quarter_turns
from faceweave.errors import UsageError
from faceweave.processors.swap import Swapper
from faceweave.types import Face, Frame

# cv2.rotate code turning an upright photo so its face is turned clockwise by the key.
_TURN = {
    90: cv2.ROTATE_90_CLOCKWISE,
    180: cv2.ROTATE_180,
    270: cv2.ROTATE_90_COUNTERCLOCKWISE,
}


def _turned_points(points: np.ndarray, angle: int, shape: tuple[int, ...]) -> np.ndarray:
    """Pixel positions of ``points`` after the photo is turned by ``angle`` (as _TURN)."""
    h, w = shape[:2]
    x, y = points[:, 0], points[:, 1]
    return {
        90: np.stack([h - y, x], 1),
        180: np.stack([w - x, h - y], 1),
        270: np.stack([y, w - x], 1),
    }[angle]


class _FixedDetector:
    """Finds one face in the top-left 20x10 pixels of an upright image (a frame that
    is taller than wide here); records the shapes it was given."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def detect(self, frame: Frame) -> list[Detection]:
        self.shapes.append(frame.shape)
        kps = np.array([[4.0, 5.0], [16.0, 5.0]], np.float32)
        return [Detection((0.0, 0.0, 20.0, 10.0), 0.9, kps)]


class TestDetectTurned:
    @pytest.mark.parametrize("angle", [90, 180, 270])
    def test_boxes_and_keypoints_map_back_to_the_frame(self, angle: int) -> None:
        frame = np.zeros((60, 100, 3), np.uint8)
        detector = _FixedDetector()
        (det,) = detect_turned(detector, frame, angle)
        # The detector saw the frame turned back: a quarter turn swaps its sides.
        assert detector.shapes[0][:2] == ((100, 60) if angle != 180 else (60, 100))
        # The box's corners and keypoints are the turned frame's, mapped back.
        upright = cv2.rotate(frame, {90: 2, 180: 1, 270: 0}[angle])
        corners = np.array([[0.0, 0.0], [20.0, 10.0]])
        back = _turned_points(corners, angle, upright.shape)
        x0, y0 = back.min(0)
        x1, y1 = back.max(0)
        np.testing.assert_allclose(det.bbox, (x0, y0, x1, y1))
        kps = _turned_points(np.array([[4.0, 5.0], [16.0, 5.0]]), angle, upright.shape)
        np.testing.assert_allclose(det.keypoints, kps)
        # ... so the eye line says how far the face is turned.
        assert quarter_turns(det.roll) == angle // 90

    def test_angle_zero_is_the_detector_itself(self) -> None:
        detector = _FixedDetector()
        (det,) = detect_turned(detector, np.zeros((60, 100, 3), np.uint8), 0)
        assert det.bbox == (0.0, 0.0, 20.0, 10.0) and det.roll == 0.0


def test_roll_and_quarter_turns() -> None:
    def det(dx: float, dy: float) -> Detection:
        return Detection((0, 0, 1, 1), 1.0, np.array([[10, 10], [10 + dx, 10 + dy]], np.float32))

    assert det(1, 0).roll == pytest.approx(0.0)
    assert det(0, 1).roll == pytest.approx(90.0)
    assert abs(det(-1, 0).roll) == pytest.approx(180.0)
    assert Detection((0, 0, 1, 1), 1.0).roll == 0.0
    assert [quarter_turns(a) for a in (0, 44, 46, -46, 179, -179, 271)] == [0, 0, 1, 3, 2, 2, 3]


def test_nms_keeps_the_best_of_overlapping_boxes() -> None:
    a = Detection((0, 0, 10, 10), 0.6)
    b = Detection((1, 1, 11, 11), 0.9)
    c = Detection((50, 50, 60, 60), 0.5)
    assert nms([a, b, c], 0.4) == [b, c]


class TestTurnedPhotos:
    """The astronaut's photo turned by quarter turns: her face is found, with a mesh
    that matches the upright one turned, and a swap onto her reads the same."""

    @pytest.mark.parametrize("angle", [90, 180, 270])
    def test_mesh_matches_the_upright_one(
        self, analyser: FaceAnalyser, astronaut: np.ndarray, astronaut_face: Face, angle: int
    ) -> None:
        turned = cv2.rotate(astronaut, _TURN[angle])
        faces = analyser.get_faces(turned)
        assert len(faces) == 1
        expected = _turned_points(astronaut_face.landmarks_478[:, :2], angle, astronaut.shape)
        eyes = np.linalg.norm(astronaut_face.landmarks_5[0] - astronaut_face.landmarks_5[1])
        error = np.linalg.norm(faces[0].landmarks_478[:, :2] - expected, axis=1).mean() / eyes
        assert error < 0.05
        assert quarter_turns(mesh_roll(faces[0].landmarks_478)) == angle // 90

    def test_upright_only_gets_an_upside_down_face_wrong(
        self, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        """Why the other turns are tried: upright only, BlazeFace finds the upside-down
        face weakly and the mesh is fitted the wrong way up (or not at all)."""
        turned = cv2.rotate(astronaut, cv2.ROTATE_180)
        faces = FaceAnalyser(detector_angles=(0,), with_embedding=False).get_faces(turned)
        assert all(quarter_turns(mesh_roll(f.landmarks_478)) != 2 for f in faces)

    def test_swap_onto_an_upside_down_face(
        self, grace_hopper_face: Face, analyser: FaceAnalyser, astronaut: np.ndarray
    ) -> None:
        swapper = Swapper(grace_hopper_face)
        upright = swapper.swap(astronaut, analyser.get_faces(astronaut))
        turned = cv2.rotate(astronaut, cv2.ROTATE_180)
        out = cv2.rotate(swapper.swap(turned, analyser.get_faces(turned)), cv2.ROTATE_180)
        changed = np.abs(upright.astype(int) - astronaut).max(2) > 20
        assert changed.sum() > 2000  # the swap did something
        diff = np.abs(out.astype(int) - upright)[changed].mean()
        flipped_face = np.abs(cv2.flip(upright, 0).astype(int) - upright)[changed].mean()
        assert diff < 6.0 < flipped_face


class TestUpsideDownInVideo:
    """A video's frames are not searched turned as a still's are: a weak upright
    detection is looked at half a turn round on its own crop, so an upside-down face
    is fitted the right way up (it had been fitted upright: a garbled swap on every
    frame), and a weak face found upright is not looked at again while it stays."""

    @pytest.mark.parametrize("size", [512, 256])
    def test_an_upside_down_face_is_fitted_the_right_way_up(
        self, astronaut: np.ndarray, astronaut_face: Face, size: int
    ) -> None:
        scale = size / astronaut.shape[1]
        frame = cv2.rotate(cv2.resize(astronaut, (size, size)), cv2.ROTATE_180)
        analyser = FaceAnalyser(mode="video", with_embedding=False)
        for _ in range(3):  # a clip's frames, tracked
            (face,) = analyser.get_faces(frame)
            assert quarter_turns(mesh_roll(face.landmarks_478)) == 2
            expected = _turned_points(astronaut_face.landmarks_478[:, :2] * scale, 180, frame.shape)
            eyes = np.linalg.norm(astronaut_face.landmarks_5[0] - astronaut_face.landmarks_5[1])
            error = np.linalg.norm(face.landmarks_478[:, :2] - expected, axis=1).mean()
            assert error / (eyes * scale) < 0.08

    def test_a_weak_upright_face_is_looked_at_once_while_it_stays(
        self, astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import faceweave.analysis.analyser as analyser_module

        looks: list[Detection] = []

        def found_upright(
            detector: object, frame: Frame, det: Detection, turned_before: bool = False
        ) -> tuple[Detection, bool]:
            looks.append(det)
            return det, True  # surely upright

        monkeypatch.setattr(analyser_module, "_upside_down", found_upright)
        frame = cv2.rotate(astronaut, cv2.ROTATE_180)  # weak upright (about 0.65)
        analyser = FaceAnalyser(mode="video", with_embedding=False)
        for _ in range(5):
            analyser.detect(frame)
        assert len(looks) == 1
        analyser.reset()  # a new clip: looked at afresh
        analyser.detect(frame)
        assert len(looks) == 2
        # A still's analyser searches the whole frame turned instead.
        FaceAnalyser(with_embedding=False).detect(frame)
        assert len(looks) == 2


class TestDetectorAngles:
    def test_explicit_angles_find_a_sideways_face(
        self, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        turned = cv2.rotate(astronaut, cv2.ROTATE_90_CLOCKWISE)
        analyser = FaceAnalyser(detector_angles=(0, 90), with_embedding=False, mode="video")
        faces = analyser.get_faces(turned)
        assert len(faces) == 1
        expected = _turned_points(astronaut_face.landmarks_478[:1, :2], 90, astronaut.shape)
        assert np.linalg.norm(faces[0].landmarks_478[1, :2] - expected[0]) < 10

    @pytest.mark.parametrize("angles", [(45,), (), (0, 360)])
    def test_bad_angles_are_usage_errors(self, angles: tuple[int, ...]) -> None:
        with pytest.raises(UsageError, match="detector angles"):
            FaceAnalyser(detector_angles=angles)

    def test_duplicates_are_dropped(self) -> None:
        assert FaceAnalyser(detector_angles=(90, 0, 90)).detector_angles == (90, 0)
        assert set(DETECTOR_ANGLES) == {0, 90, 180, 270}

    def test_clear_upright_faces_cost_one_detector_run(self, astronaut: np.ndarray) -> None:
        analyser = FaceAnalyser(with_embedding=False)
        calls: list[tuple[int, ...]] = []
        real = analyser.detector.detect
        analyser.detector.detect = lambda frame, **kw: (
            calls.append(frame.shape) or real(frame, **kw)
        )  # type: ignore[method-assign]
        assert len(analyser.get_faces(astronaut)) == 1
        assert len(calls) == 1
        calls.clear()
        assert analyser.get_faces(np.full((240, 320, 3), 127, np.uint8)) == []
        assert len(calls) == 4  # nothing upright: every turn was looked at


class TestLooseBoxes:
    """get_faces keeps a mesh only near its own detection box."""

    @staticmethod
    def _faces_from(analyser: FaceAnalyser, frame: Frame, box: tuple[float, ...]) -> list[Face]:
        analyser._candidates = lambda f, **kw: [Detection(box, 0.9)]  # type: ignore[method-assign]
        return analyser.get_faces(frame)

    def test_a_nose_just_outside_the_box_is_kept(
        self, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        """A profile's nose tip can stand out of the detector's box."""
        x0, y0, x1, y1 = astronaut_face.bbox
        nose_x = float(astronaut_face.landmarks_478[1, 0])
        # The box stops short of the nose by a tenth of its width.
        box = (nose_x + 0.1 * (x1 - x0), y0, x1 + 0.4 * (x1 - x0), y1)
        faces = self._faces_from(FaceAnalyser(with_embedding=False), astronaut, box)
        assert len(faces) == 1

    def test_a_mesh_on_a_neighbouring_face_is_dropped(
        self, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        """A loose box whose crop holds a face next to it: the mesh fitted there is that
        face's, and is not taken as a face of the box (nor does it replace the face's
        own mesh). The mesh model is a stand-in that always finds the astronaut."""

        class FindsTheAstronaut:
            def fit(
                self,
                frame: Frame,
                bbox: object,
                roll: float = 0.0,
                *,
                mirror: bool = True,
                strict: bool = False,
            ) -> np.ndarray:
                return astronaut_face.landmarks_478.copy()

        x0, y0, x1, y1 = astronaut_face.bbox
        width = x1 - x0
        analyser = FaceAnalyser(with_embedding=False)
        analyser.__dict__["landmarker"] = FindsTheAstronaut()
        beside = (x1 + 0.5 * width, y0, x1 + 1.5 * width, y1)
        assert self._faces_from(analyser, astronaut, beside) == []
        assert len(self._faces_from(analyser, astronaut, astronaut_face.bbox)) == 1


def test_a_stills_turned_passes_look_at_coarser_tiles() -> None:
    """The three turns every faceless photo gets look at tiles within 768 px (a 1080p
    photo 2 x 2), the upright pass within 480 (4 x 4): a faceless 1080p photo had taken
    2.5x as long with the finer tiles in every turn. Without tiles, one detector."""
    from faceweave.analysis import mediapipe_backend as mb

    analyser = FaceAnalyser(detect_tiles=2)
    upright, turned = analyser.detector, analyser._turned_detector
    assert upright is not turned
    assert upright.tile_most_px == mb.TILE_MOST_PX  # type: ignore[attr-defined]
    assert turned.tile_most_px == mb.COARSE_TILE_MOST_PX  # type: ignore[attr-defined]
    assert mb.tiles_across(1080, 1920, 2, turned.tile_most_px) == 2  # type: ignore[attr-defined]
    plain = FaceAnalyser()
    assert plain._turned_detector is plain.detector
    video = FaceAnalyser(detect_tiles=2, mode="video")
    assert video.detector.tile_most_px == mb.COARSE_TILE_MOST_PX  # type: ignore[attr-defined]
