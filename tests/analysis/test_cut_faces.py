"""Faces cut by the frame: by a side, found on the frame and its side bands mirrored out
and fitted on a mirrored crop when the usual one gives no mesh (``detect_edges``,
``detect_cut``, ``MeshLandmarker.fit``), then again round their own mesh; by the
bottom, not read upside down."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.analysis import mediapipe_backend
from faceweave.analysis.analyser import (
    CUT_SIDE,
    EDGE_BAND,
    EDGE_PAD,
    FaceAnalyser,
    detect_cut,
    mesh_roll,
)
from faceweave.analysis.base import Detection
from faceweave.analysis.mediapipe_backend import (
    CUT_MESH_REACH,
    _mirrored_out,
    _region_around,
    cut_by_side,
    mesh_cut,
)
from faceweave.processors.swap import Swapper
from faceweave.types import Face, Frame

# The share of the astronaut's face (mesh box width) cut off by the frame's side: at
# this cut neither BlazeFace model finds the rest of it in the frame as it is.
CUT = 0.6


def _cut(frame: Frame, face: Face, side: str) -> tuple[Frame, int]:
    """``frame`` with ``CUT`` of the face cut off on ``side``; and the x offset of the
    cut frame in ``frame``."""
    x0, _, x1, _ = face.bbox
    if side == "right":
        return np.ascontiguousarray(frame[:, : int(x1 - CUT * (x1 - x0))]), 0
    start = int(x0 + CUT * (x1 - x0))
    return np.ascontiguousarray(frame[:, start:]), start


@pytest.fixture(scope="module")
def edge_analyser() -> FaceAnalyser:
    return FaceAnalyser(detect_edges=True)


class _Boxes:
    """A detector that finds fixed boxes in images of one width, and records the
    images it is given."""

    def __init__(self, boxes: list[tuple[float, float, float, float]], width: int = 0) -> None:
        self.boxes = boxes
        self.width = width
        self.seen: list[Frame] = []

    def detect(self, frame: Frame) -> list[Detection]:
        self.seen.append(frame)
        if frame.shape[1] != self.width:
            return []
        return [
            Detection(b, 0.9, np.array([[b[0], b[1]], [b[2], b[1]]], np.float32))
            for b in self.boxes
        ]


class TestDetectCut:
    def test_keeps_boxes_across_a_side_in_frame_pixels(self) -> None:
        frame = np.zeros((100, 200, 3), np.uint8)
        pad = round(EDGE_PAD * 200)
        boxes = [
            (pad - 20, 10, pad + 40, 70),  # across the left edge, two thirds in
            (pad + 170, 10, pad + 230, 70),  # across the right edge, half in
            (pad + 50, 10, pad + 110, 70),  # inside: the frame's own run has it
            (pad - 60, 10, pad - 5, 70),  # outside: a mirror image
            (pad + 190, 10, pad + 250, 70),  # a sixth in: mostly a mirror image
        ]
        found = detect_cut(_Boxes(boxes, 200 + 2 * pad), frame)
        assert [d.bbox for d in found] == [(-20, 10, 40, 70), (170, 10, 230, 70)]
        np.testing.assert_array_equal(found[0].keypoints, [[-20, 10], [40, 10]])

    def test_the_side_bands_in_frame_pixels(self) -> None:
        """A band EDGE_BAND of the frame wide and its mirror image: the right one starts
        at x = w - band, the left one (mirror first) at 1 - band."""
        frame = np.zeros((100, 200, 3), np.uint8)
        band = round(EDGE_BAND * 200)
        # Across the middle of a 2 * band - 1 wide image: the frame's edge.
        box = (band - 21, 10, band + 19, 50)
        found = detect_cut(_Boxes([box], 2 * band - 1), frame)
        assert sorted(d.bbox for d in found) == [(-20, 10, 20, 50), (179, 10, 219, 50)]

    def test_the_views_mirror_the_sides(self) -> None:
        frame = np.random.default_rng(0).integers(0, 255, (40, 60, 3), np.uint8)
        detector = _Boxes([])
        detect_cut(detector, frame)
        padded, left, right = detector.seen
        pad = round(EDGE_PAD * 60)
        assert padded.shape == (40, 60 + 2 * pad, 3)  # mirrored out at the sides only
        np.testing.assert_array_equal(padded[:, pad : pad + 60], frame)
        np.testing.assert_array_equal(padded[:, pad - 1], frame[:, 1])  # the edge not doubled
        np.testing.assert_array_equal(padded[:, pad + 60], frame[:, -2])
        band = round(EDGE_BAND * 60)
        np.testing.assert_array_equal(left[:, band - 1 :], frame[:, :band])
        np.testing.assert_array_equal(left[:, : band - 1], frame[:, band - 1 : 0 : -1])
        np.testing.assert_array_equal(right[:, :band], frame[:, 60 - band :])
        np.testing.assert_array_equal(right[:, band:], frame[:, -2 : 59 - band : -1])

    def test_a_large_frame_is_looked_at_shrunk_and_answered_in_its_pixels(self) -> None:
        """A phone photo's views are cut from a copy CUT_SIDE px long; what they find
        comes back in the photo's own pixels."""
        frame = np.zeros((1500, 3000, 3), np.uint8)
        pad = round(EDGE_PAD * CUT_SIDE)
        detector = _Boxes([(pad - 20, 10, pad + 40, 70)], CUT_SIDE + 2 * pad)
        found = detect_cut(detector, frame)
        assert max(max(v.shape[:2]) for v in detector.seen) <= CUT_SIDE + 2 * pad
        assert detector.seen[0].shape[0] == 640
        fx, fy = 3000 / CUT_SIDE, 1500 / 640
        assert [d.bbox for d in found] == [(-20 * fx, 10 * fy, 40 * fx, 70 * fy)]
        np.testing.assert_allclose(found[0].keypoints, [[-20 * fx, 10 * fy], [40 * fx, 10 * fy]])


class TestMirroredCrop:
    def test_a_box_inside_the_frame_is_cropped_from_the_frame(self) -> None:
        frame = np.zeros((50, 80, 3), np.uint8)
        matrix = np.array([[2.0, 0.0, -10.0], [0.0, 2.0, -4.0]])
        image, at = _mirrored_out(frame, (-0.0, 5, 80.0, 40), matrix)
        assert image.shape == frame.shape
        np.testing.assert_array_equal(at, matrix)

    def test_the_crop_agrees_with_the_frame_and_its_mirror(self) -> None:
        rng = np.random.default_rng(1)
        frame = rng.integers(0, 255, (60, 90, 3), np.uint8)
        bbox = (70.0, 10.0, 110.0, 50.0)  # 20 px past the right edge
        matrix = np.array([[1.0, 0.0, -60.0], [0.0, 1.0, -5.0]])  # frame x 60.. -> crop 0..
        image, at = _mirrored_out(frame, bbox, matrix)
        crop = cv2.warpAffine(image, at, (60, 50), flags=cv2.INTER_NEAREST)
        mirrored = cv2.warpAffine(
            frame, matrix, (60, 50), flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_REFLECT_101
        )
        reach = 20 + int(np.ceil(0.1 * 40))  # past the box, then black
        np.testing.assert_array_equal(crop[:, : 30 + reach], mirrored[:, : 30 + reach])
        assert not crop[:, 30 + reach :].any()


class TestCutFaces:
    # (Scale 4: a frame over CUT_SIDE, looked at shrunk.)
    @pytest.mark.parametrize(("side", "scale"), [("left", 1), ("right", 1), ("left", 4)])
    def test_found_and_fitted(
        self,
        astronaut: np.ndarray,
        astronaut_face: Face,
        analyser: FaceAnalyser,
        edge_analyser: FaceAnalyser,
        side: str,
        scale: int,
    ) -> None:
        frame, start = _cut(astronaut, astronaut_face, side)
        assert analyser.get_faces(frame) == []  # what the frame as it is gives
        frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        (face,) = edge_analyser.get_faces(frame)
        x0, _, x1, _ = face.bbox
        assert x0 < 0 if side == "left" else x1 > frame.shape[1]  # the box reaches out
        # Where the face is in the frame, its mesh is the uncut photo's.
        whole = (astronaut_face.landmarks_478[:, :2] - np.float32([start, 0])) * scale
        seen = (whole[:, 0] >= 0) & (whole[:, 0] < frame.shape[1])
        inter_ocular = np.linalg.norm(whole[468] - whole[473])
        error = np.linalg.norm(face.landmarks_478[:, :2] - whole, axis=1)[seen].mean()
        assert error < 0.12 * inter_ocular

    @pytest.mark.parametrize("side", ["left", "right"])
    def test_fitted_again_round_its_mesh(
        self,
        astronaut: np.ndarray,
        astronaut_face: Face,
        edge_analyser: FaceAnalyser,
        side: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # The first fit, where the mesh's face search put the half face, is too small;
        # fitted again on the region round its own mesh it comes closer to the uncut one.
        frame, start = _cut(astronaut, astronaut_face, side)
        whole = astronaut_face.landmarks_478[:, :2] - np.float32([start, 0])
        seen = (whole[:, 0] >= 0) & (whole[:, 0] < frame.shape[1])
        inter_ocular = np.linalg.norm(whole[468] - whole[473])
        errors = []
        for refits in (0, mediapipe_backend.CUT_REFITS):
            monkeypatch.setattr(mediapipe_backend, "CUT_REFITS", refits)
            (face,) = edge_analyser.get_faces(frame)
            distance = np.linalg.norm(face.landmarks_478[:, :2] - whole, axis=1)
            errors.append(distance[seen].mean() / inter_ocular)
        assert errors[1] < 0.06 < errors[0]

    def test_a_tracked_face_fitted_again_once_a_frame(
        self, astronaut: np.ndarray, astronaut_face: Face, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A video's analyser (tracking mode) finds the astronaut cut by 45% on the right
        # without looking at the sides; one refit a frame brings its mesh closer.
        x0, _, x1, _ = astronaut_face.bbox
        frame = np.ascontiguousarray(astronaut[:, : int(x1 - 0.45 * (x1 - x0))])
        whole = astronaut_face.landmarks_478[:, :2]
        seen = whole[:, 0] < frame.shape[1]
        inter_ocular = np.linalg.norm(whole[468] - whole[473])
        asked: list[int] = []
        refit = mediapipe_backend.MeshLandmarker._refit

        def counted(self, frame, points, roll, refits):  # type: ignore[no-untyped-def]
            asked.append(refits)
            return refit(self, frame, points, roll, refits)

        monkeypatch.setattr(mediapipe_backend.MeshLandmarker, "_refit", counted)
        errors = []
        for refits in (0, mediapipe_backend.CUT_REFITS_TRACKED):
            monkeypatch.setattr(mediapipe_backend, "CUT_REFITS_TRACKED", refits)
            analyser = FaceAnalyser(mode="video")
            for _ in range(3):  # (the tracking graph's fits from the second frame on)
                (face,) = analyser.get_faces(frame)
            distance = np.linalg.norm(face.landmarks_478[:, :2] - whole, axis=1)
            errors.append(distance[seen].mean() / inter_ocular)
        assert asked == [0, 0, 0, 1, 1, 1]
        assert errors[1] < errors[0] - 0.005

    def test_swapped(
        self,
        astronaut: np.ndarray,
        astronaut_face: Face,
        grace_hopper_face: Face,
        edge_analyser: FaceAnalyser,
    ) -> None:
        frame, _ = _cut(astronaut, astronaut_face, "right")
        faces = edge_analyser.get_faces(frame)
        out = Swapper(grace_hopper_face).swap(frame, faces)
        assert out.shape == frame.shape
        changed = np.abs(out.astype(np.int16) - frame).max(axis=2) > 8
        ys, xs = np.nonzero(changed)
        x0, y0, x1, y1 = faces[0].bbox
        assert changed.sum() > 0.15 * (x1 - x0) * (y1 - y0)  # the half face in the frame
        assert xs.min() >= x0 - 5 and ys.min() >= y0 - 5 and ys.max() <= y1 + 5

    def test_whole_faces_are_as_without(
        self, astronaut: np.ndarray, astronaut_face: Face, edge_analyser: FaceAnalyser
    ) -> None:
        (face,) = edge_analyser.get_faces(astronaut)
        np.testing.assert_array_equal(face.landmarks_478, astronaut_face.landmarks_478)


def test_a_face_cut_at_the_bottom_is_not_read_upside_down(
    astronaut: np.ndarray, astronaut_face: Face, analyser: FaceAnalyser
) -> None:
    """The astronaut's brows and eyes, her mouth out of the frame: upright it scores
    low, and half a turn round it reads as an upside-down face with a box reaching
    out of the frame (TURNED_MAX_OUT). It is fitted upright."""
    _, y0, _, y1 = astronaut_face.bbox
    frame = np.ascontiguousarray(astronaut[: int(y1 - 0.55 * (y1 - y0))])
    (face,) = analyser.get_faces(frame)
    assert abs(mesh_roll(face.landmarks_478)) < 20
    eyes = list(range(468, 478))  # the irises, in the frame
    inter_ocular = np.linalg.norm(
        astronaut_face.landmarks_478[468] - astronaut_face.landmarks_478[473]
    )
    error = np.linalg.norm(
        face.landmarks_478[eyes, :2] - astronaut_face.landmarks_478[eyes, :2], axis=1
    )
    assert error.max() < 0.15 * inter_ocular


def test_clothing_below_a_face_cut_at_its_nose_is_no_upside_down_face(
    astronaut: np.ndarray, astronaut_face: Face, analyser: FaceAnalyser
) -> None:
    """The astronaut cut below her nose: upright no face scores high, and half a turn
    round BlazeFace reads her suit as an upside-down face (0.52), which was swapped;
    a face found only turned needs TURNED_MIN_SCORE."""
    nose_y = int(astronaut_face.landmarks_478[1, 1])
    assert analyser.get_faces(np.ascontiguousarray(astronaut[nose_y:])) == []


def test_a_box_just_over_a_side_or_a_sideways_face_is_not_mirrored() -> None:
    """Mirrored fits are for half faces: a loose box a little past the edge (it had a
    face fitted in Biden's background) or a face lying on its side (the mirror across
    the frame's side would turn it upside down) gets none."""
    frame = np.zeros((100, 200, 3), np.uint8)
    assert cut_by_side(frame, (-20.0, 10.0, 40.0, 70.0))  # a third past the left edge
    assert cut_by_side(frame, (170.0, 10.0, 230.0, 70.0), roll=180.0)
    assert not cut_by_side(frame, (-5.0, 10.0, 55.0, 70.0))  # a twelfth past
    assert not cut_by_side(frame, (-20.0, 10.0, 40.0, 70.0), roll=90.0)
    assert not cut_by_side(frame, (50.0, -30.0, 110.0, 30.0))  # the top edge


def test_every_box_is_fitted_as_it_is_before_any_is_mirrored(astronaut_face: Face) -> None:
    """A face with two boxes: the better-scoring one reaches past the side and gives a
    mesh only mirrored, the other gives one as it is. The face keeps the unmirrored
    mesh (fitted from the frame's own pixels), not the mirrored one."""
    frame = np.zeros((400, 300, 3), np.uint8)
    unmirrored = astronaut_face.landmarks_478.copy()
    mirrored = unmirrored + np.float32([3.0, 0.0, 0.0])
    x0, y0, x1, y1 = astronaut_face.bbox
    cut_box = (x0, y0, x1 + 0.8 * (x1 - x0), y1)  # past the frame's right edge
    calls: list[bool] = []

    class Fits:
        def fit(
            self,
            frame: Frame,
            bbox: object,
            roll: float = 0.0,
            *,
            mirror: bool = True,
            strict: bool = False,
        ) -> np.ndarray | None:
            calls.append(mirror)
            if bbox == cut_box:
                return mirrored.copy() if mirror else None
            return unmirrored.copy()

    assert cut_by_side(frame, cut_box)
    analyser = FaceAnalyser(with_embedding=False)
    analyser.__dict__["landmarker"] = Fits()
    analyser._candidates = lambda f, **kw: [  # type: ignore[method-assign]
        Detection(cut_box, 0.9),
        Detection(astronaut_face.bbox, 0.6),
    ]
    (face,) = analyser.get_faces(frame)
    np.testing.assert_array_equal(face.landmarks_478, unmirrored)
    assert calls == [False, False]  # the cut box's mirrored fit was not needed


def test_a_mesh_reaching_past_an_edge_is_cut() -> None:
    frame = np.zeros((100, 200, 3), np.uint8)
    square = np.float32([[0, 0], [50, 0], [50, 50], [0, 50]])
    reach = CUT_MESH_REACH * 50
    for shift, cut in (
        ((10, 10), False),
        ((-reach + 0.5, 10), False),  # just within the share
        ((-reach - 0.5, 10), True),
        ((10, -reach - 0.5), True),
        ((150 + reach + 0.5, 10), True),
        ((10, 50 + reach + 0.5), True),
    ):
        assert mesh_cut(frame, square + np.float32(shift)) is cut


def test_the_refit_region_is_the_meshs_box_grown_and_turned_with_its_eyes() -> None:
    points = np.zeros((478, 2))
    points[:, 0] = np.linspace(40, 100, 478)
    points[:, 1] = np.linspace(60, 80, 478)
    points[33], points[263] = (50, 70), (90, 70 + 40 * np.tan(np.radians(10)))
    region = _region_around(points, 200)
    assert (region.x_center, region.y_center) == pytest.approx((0.35, 0.35))
    assert region.width == region.height == pytest.approx(1.5 * 60 / 200)
    assert np.degrees(region.rotation) == pytest.approx(10)
