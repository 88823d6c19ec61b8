"""Tests for faceweave.analysis.analyser on the package-shipped faces."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.analysis.analyser import FaceAnalyser, check_frame, landmarks_5_from_mesh, mesh_bbox
from faceweave.errors import InputError, UsageError
from faceweave.types import Face, Pose


@pytest.fixture(params=["astronaut", "grace_hopper"])
def frame_and_faces(request: pytest.FixtureRequest) -> tuple[np.ndarray, list[Face]]:
    name = request.param
    return request.getfixturevalue(name), request.getfixturevalue(f"{name}_faces")


class TestGetFaces:
    def test_one_face(self, frame_and_faces: tuple[np.ndarray, list[Face]]) -> None:
        _, faces = frame_and_faces
        assert len(faces) == 1
        assert isinstance(faces[0], Face)

    def test_bbox_inside_image(self, frame_and_faces: tuple[np.ndarray, list[Face]]) -> None:
        frame, faces = frame_and_faces
        x0, y0, x1, y1 = faces[0].bbox
        h, w = frame.shape[:2]
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert faces[0].size > 50
        assert faces[0].frame_shape == (h, w)
        assert faces[0].frame is frame

    def test_landmarks(self, frame_and_faces: tuple[np.ndarray, list[Face]]) -> None:
        _, faces = frame_and_faces
        face = faces[0]
        assert face.landmarks_478.shape == (478, 3) and face.landmarks_478.dtype == np.float32
        assert face.landmarks_5.shape == (5, 2) and face.landmarks_5.dtype == np.float32
        assert np.all(np.isfinite(face.landmarks_478))
        x0, y0, x1, y1 = face.bbox
        lm5 = face.landmarks_5
        assert np.all((lm5[:, 0] >= x0) & (lm5[:, 0] <= x1) & (lm5[:, 1] >= y0) & (lm5[:, 1] <= y1))
        assert lm5[0, 0] < lm5[1, 0] and lm5[3, 0] < lm5[4, 0]  # image-left first
        assert lm5[2, 1] > lm5[:2, 1].max() and lm5[3:, 1].min() > lm5[2, 1]  # eyes, nose, mouth

    def test_pose_roughly_frontal(self, frame_and_faces: tuple[np.ndarray, list[Face]]) -> None:
        _, faces = frame_and_faces
        pose = faces[0].pose
        assert isinstance(pose, Pose)
        assert abs(pose.yaw) < 20 and abs(pose.pitch) < 30 and abs(pose.roll) < 20
        assert pose.scale > 10

    def test_embedding(self, frame_and_faces: tuple[np.ndarray, list[Face]]) -> None:
        _, faces = frame_and_faces
        emb = faces[0].embedding
        assert emb.shape == (128,) and emb.dtype == np.float32
        assert np.all(np.isfinite(emb)) and 0.5 < np.linalg.norm(emb) < 3.0  # dlib: not unit length
        assert faces[0].embedding is emb  # cached

    def test_same_person_close(
        self, astronaut_face: Face, astronaut_flipped_faces: list[Face]
    ) -> None:
        assert len(astronaut_flipped_faces) == 1
        assert (
            np.linalg.norm(astronaut_face.embedding - astronaut_flipped_faces[0].embedding) < 0.45
        )

    def test_flipped_mesh_mirrors(
        self, astronaut_face: Face, astronaut_flipped_faces: list[Face]
    ) -> None:
        flipped = astronaut_flipped_faces[0]
        w = astronaut_face.frame_shape[1]
        x0, y0, x1, y1 = astronaut_face.bbox
        assert flipped.bbox == pytest.approx((w - 1 - x1, y0, w - 1 - x0, y1), abs=6)
        assert flipped.pose.roll == pytest.approx(-astronaut_face.pose.roll, abs=4)

    def test_embedding_stable_for_same_pixels(
        self, pair_faces: list[Face], astronaut_face: Face, grace_hopper_face: Face
    ) -> None:
        """The same face pixels pasted into a wider frame must keep their identity descriptor."""
        left, right = sorted(pair_faces, key=lambda f: f.bbox[0])
        d_left = float(np.linalg.norm(left.embedding - astronaut_face.embedding))
        d_right = float(np.linalg.norm(right.embedding - grace_hopper_face.embedding))
        assert d_left < 0.2 and d_right < 0.2, (
            "ENGINE BUG (analyser/dlib_backend): identical face pixels give descriptors "
            f"{d_left:.2f} / {d_right:.2f} apart. The mesh box moves about 1 px and dlib's 5-point "
            "predictor, run on that box, jumps (glasses); landmarks_5 passed to "
            "DlibIdentity.embed is never used for alignment"
        )

    def test_different_people_far(self, astronaut_face: Face, grace_hopper_face: Face) -> None:
        assert np.linalg.norm(astronaut_face.embedding - grace_hopper_face.embedding) > 0.6

    def test_grey_image_has_no_face(self, analyser: FaceAnalyser) -> None:
        assert analyser.get_faces(np.full((240, 320, 3), 127, np.uint8)) == []

    @pytest.mark.parametrize("side", [8, 9, 16])
    def test_a_few_pixels_of_noise_are_no_face(self, analyser: FaceAnalyser, side: int) -> None:
        """BlazeFace and the mesh read a face into some tiny random images (a 5 px
        one into this 8 x 8 noise); a face under MIN_FACE_PX is none."""
        noise = np.random.default_rng(0).integers(0, 255, (side, side, 3), np.uint8)
        assert analyser.get_faces(noise) == []

    def test_two_faces(self, pair_faces: list[Face], pair_frame: np.ndarray) -> None:
        assert len(pair_faces) == 2
        w_left = pair_frame.shape[1] // 2
        centres = sorted((f.bbox[0] + f.bbox[2]) / 2 for f in pair_faces)
        assert centres[0] < w_left < centres[1]
        assert pair_faces[0].size >= pair_faces[1].size  # largest first

    def test_max_faces(self, pair_frame: np.ndarray) -> None:
        faces = FaceAnalyser(max_faces=1, with_embedding=False).get_faces(pair_frame)
        assert len(faces) == 1
        assert not faces[0].has_embedding


class TestInvalidFrames:
    @pytest.mark.parametrize(
        "frame",
        [
            np.zeros((64, 64, 3), np.float32),
            np.zeros((64, 64), np.uint8),
            np.zeros((64, 64, 4), np.uint8),
            np.zeros((4, 4, 3), np.uint8),
            [[0, 0, 0]],
        ],
        ids=["float", "2d", "bgra", "tiny", "list"],
    )
    def test_raise_input_error(self, analyser: FaceAnalyser, frame: object) -> None:
        with pytest.raises(InputError):
            analyser.get_faces(frame)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            check_frame(frame)

    def test_check_frame_passes_valid(self) -> None:
        frame = np.zeros((8, 8, 3), np.uint8)
        assert check_frame(frame) is frame

    def test_unknown_detector(self) -> None:
        with pytest.raises(UsageError):
            FaceAnalyser(detector="nope").detect(np.zeros((32, 32, 3), np.uint8))

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_faces": 0},
            {"max_faces": 2.5},
            {"min_score": float("nan")},
            {"detect_edges": "false"},  # a non-empty string would have switched it on
            {"with_embedding": 0},
        ],
    )
    def test_settings_checked_when_made(self, kwargs: dict) -> None:
        with pytest.raises(UsageError):
            FaceAnalyser(**kwargs)

    def test_numpy_whole_numbers_are_whole_numbers(self) -> None:
        assert FaceAnalyser(max_faces=np.int64(3)).max_faces == 3


class TestHelpers:
    def test_landmarks_5_from_mesh(self, astronaut_face: Face) -> None:
        lm5 = landmarks_5_from_mesh(astronaut_face.landmarks_478)
        np.testing.assert_array_equal(lm5, astronaut_face.landmarks_5)
        np.testing.assert_allclose(lm5[2], astronaut_face.landmarks_478[1, :2])
        # The face's own order: its right eye and mouth corner first, image-left when
        # upright, and still first upside down.
        assert lm5[0, 0] < lm5[1, 0] and lm5[3, 0] < lm5[4, 0]
        turned = landmarks_5_from_mesh(-astronaut_face.landmarks_478)
        np.testing.assert_array_equal(turned, -lm5)

    def test_mesh_bbox(self) -> None:
        pts = np.array([[3.0, 4.0, 1.0], [10.0, -2.0, 0.0], [5.0, 9.0, 2.0]])
        assert mesh_bbox(pts) == (3.0, -2.0, 10.0, 9.0)


class TestReset:
    @staticmethod
    def _sequence(analyser: FaceAnalyser, frames: list[np.ndarray]) -> list[np.ndarray]:
        return [analyser.get_faces(f)[0].landmarks_478 for f in frames]

    def test_reset_makes_a_shared_video_analyser_start_afresh(
        self, astronaut: np.ndarray, grace_hopper: np.ndarray
    ) -> None:
        # Two "clips": a few frames of one face, then a sliding sequence of another.
        clip_a = [np.roll(grace_hopper, 3 * i, axis=1) for i in range(4)]
        clip_b = [np.roll(astronaut, -2 * i, axis=1) for i in range(4)]
        fresh = self._sequence(FaceAnalyser(mode="video"), clip_b)
        shared = FaceAnalyser(mode="video")
        self._sequence(shared, clip_a)
        shared.reset()
        after_reset = self._sequence(shared, clip_b)
        for expected, got in zip(fresh, after_reset, strict=True):
            np.testing.assert_array_equal(got, expected)

    def test_reset_before_any_frame_is_harmless(self, astronaut: np.ndarray) -> None:
        analyser = FaceAnalyser(mode="video")
        analyser.reset()  # nothing built yet: builds nothing
        assert "landmarker" not in analyser.__dict__
        assert len(analyser.get_faces(astronaut)) == 1


class TestLandmarkArray:
    """The face mesh's landmarks are read from their wire bytes, with a safe fallback."""

    @staticmethod
    def _list(points: np.ndarray, visibility: bool = False):  # type: ignore[no-untyped-def]
        from mediapipe.framework.formats import landmark_pb2

        out = landmark_pb2.NormalizedLandmarkList()
        for x, y, z in points:
            lm = out.landmark.add(x=float(x), y=float(y), z=float(z))
            if visibility:
                lm.visibility = 0.5
        return out

    def test_fast_and_slow_paths_agree(self) -> None:
        from faceweave.analysis.mediapipe_backend import _landmark_array

        points = np.random.default_rng(3).uniform(-1, 1, (478, 3)).astype(np.float32)
        fast = _landmark_array(self._list(points))
        slow = _landmark_array(self._list(points, visibility=True))  # other bytes: slow path
        np.testing.assert_array_equal(fast, points.astype(np.float64))
        np.testing.assert_array_equal(slow, fast)

    def test_zero_coordinates_fall_back_safely(self) -> None:
        from faceweave.analysis.mediapipe_backend import _landmark_array

        # protobuf omits fields equal to 0: records change size, the slow path reads them.
        points = np.array([[0.0, 0.5, 0.25], [0.1, 0.0, 0.0], [0.3, 0.2, 0.1]], np.float32)
        np.testing.assert_array_equal(
            _landmark_array(self._list(points)), points.astype(np.float64)
        )


class TestFitsDuringDetection:
    """A still image's first meshes are fitted while BlazeFace's full-range model runs."""

    def test_the_short_range_faces_come_early_in_frame_pixels(
        self, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        import threading

        from faceweave.analysis.mediapipe_backend import BlazeFaceDetector

        # Her head at 4x in a 1400 px frame (shrunk for the detector by 0.46): a face
        # large enough for the short-range model.
        frame = np.zeros((1000, 1400, 3), np.uint8)
        frame[50:930, 400:1240] = cv2.resize(astronaut[20:240, 120:330], (840, 880))
        detector = BlazeFaceDetector(adaptive=False)
        handed: list[tuple[list, str]] = []
        try:
            found = detector.detect(
                frame, early=lambda dets: handed.append((dets, threading.current_thread().name))
            )
        finally:
            detector.close()
        assert len(handed) == 1
        dets, thread = handed[0]
        assert thread != threading.current_thread().name
        assert dets and all(any(d.bbox == f.bbox for f in found) for d in dets)
        nose = (astronaut_face.landmarks_478[1, :2] - (120, 20)) * 4 + (400, 50)
        best = max(dets, key=lambda d: d.score)
        assert best.bbox[0] < nose[0] < best.bbox[2] and best.bbox[1] < nose[1] < best.bbox[3]

    def test_the_mesh_is_fitted_in_the_detectors_second_thread(
        self, astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """get_faces fits the face the short-range model found in the detector's thread
        (overlapping the full-range model) and does not fit it again; a video analyser
        does not (its detector runs the models one after the other)."""
        import threading

        for mode, fitted_early in (("image", True), ("video", False)):
            analyser = FaceAnalyser(mode=mode, with_embedding=False)
            threads: list[str] = []
            real = analyser.landmarker.fit

            def counted(*args, threads=threads, real=real, **kwargs):  # type: ignore[no-untyped-def]
                threads.append(threading.current_thread().name)
                return real(*args, **kwargs)

            monkeypatch.setattr(analyser.landmarker, "fit", counted)
            faces = analyser.get_faces(astronaut)
            assert len(faces) == 1
            main = threading.current_thread().name
            assert threads == (["blazeface-short-range_0"] if fitted_early else [main]), threads

    def test_a_face_seen_lying_on_its_side_is_not_fitted_early(
        self, astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A photo turned a quarter: what the short-range model finds of the face is a
        loose box; the face is fitted on the turned frame's detection, in this thread."""
        import threading

        analyser = FaceAnalyser(with_embedding=False)
        threads: list[str] = []
        real = analyser.landmarker.fit

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            threads.append(threading.current_thread().name)
            return real(*args, **kwargs)

        monkeypatch.setattr(analyser.landmarker, "fit", counted)
        assert len(analyser.get_faces(cv2.rotate(astronaut, cv2.ROTATE_90_CLOCKWISE))) == 1
        assert threads and set(threads) == {threading.current_thread().name}, threads

    def test_a_detection_takes_the_face_fitted_on_the_box_it_merged(
        self, astronaut_face: Face
    ) -> None:
        from faceweave.analysis.analyser import _prefitted
        from faceweave.analysis.base import Detection

        x0, y0, x1, y1 = astronaut_face.bbox
        w = x1 - x0
        prefit = [(Detection((x0, y0, x1, y1), 0.9), astronaut_face)]
        shifted = Detection((x0 + 0.1 * w, y0, x1 + 0.1 * w, y1), 0.5)
        face = _prefitted(shifted, prefit)
        assert face is not None and face.score == 0.5
        assert face.landmarks_478 is astronaut_face.landmarks_478
        assert astronaut_face.score != 0.5  # the prefit face itself is not changed
        beside = Detection((x1, y0, x1 + w, y1), 0.9)
        assert _prefitted(beside, prefit) is None
        assert _prefitted(shifted, []) is None
        # Not from a detection turned another way up (keypoints upside down).
        upside_down = Detection(
            astronaut_face.bbox, 0.9, np.array([[x1, y0], [x0, y0]], np.float32)
        )
        assert _prefitted(shifted, [(upside_down, astronaut_face)]) is None


class TestWiderSearchesNeedSureMeshes:
    """A still's weak detections from tiles or turned passes (``Detection.searched``)
    need a mesh the model is sure of (SURE_FACE_SCORE, STRICT_PRESENCE)."""

    def test_searched_rides_along_and_a_plain_detection_clears_it(self) -> None:
        from faceweave.analysis.base import Detection, nms

        wide = Detection((0.0, 0.0, 10.0, 10.0), 0.9).found_searching()
        assert wide.searched and wide.scaled(2.0, 2.0).searched
        assert not Detection((0.0, 0.0, 10.0, 10.0), 0.9).scaled(2.0, 2.0).searched
        plain = Detection((1.0, 0.0, 11.0, 10.0), 0.6)
        (merged,) = nms([wide, plain], 0.4)  # the tile's box wins, the upright pass saw it
        assert merged.score == 0.9 and not merged.searched
        alone = nms([wide, Detection((50.0, 50.0, 60.0, 60.0), 0.6)], 0.4)
        assert [d.searched for d in alone] == [True, False]
        assert nms([plain, wide], 0.4)[0] is not wide  # whichever order they come in

    def test_tiles_and_turns_mark_what_they_find(self, astronaut: np.ndarray) -> None:
        from faceweave.analysis import mediapipe_backend as mb
        from faceweave.analysis.analyser import detect_turned

        small = cv2.resize(astronaut, None, fx=0.45, fy=0.45, interpolation=cv2.INTER_AREA)
        wide = np.full((720, 1280, 3), 120, np.uint8)
        wide[300 : 300 + small.shape[0], 700 : 700 + small.shape[1]] = small
        (tiled,) = mb.BlazeFaceDetector(adaptive=False, tiles=2).detect(wide)
        assert tiled.searched  # only the tiles see a face of 45 px
        detector = mb.BlazeFaceDetector(adaptive=False)
        assert detector.detect(astronaut) and not any(
            d.searched for d in detector.detect(astronaut)
        )
        lying = cv2.rotate(astronaut, cv2.ROTATE_90_CLOCKWISE)
        turned = detect_turned(detector, lying, 90)
        assert turned and all(d.searched for d in turned)

    def test_a_spoon_the_tiles_take_for_a_face_is_none(
        self, astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """scikit-image's coffee photo at 1080p: the still analyser's tiles find its
        spoon at a score under SURE_FACE_SCORE; the mesh model is not sure of it."""
        import skimage.data

        from faceweave.analysis import analyser as module

        coffee = cv2.resize(
            cv2.cvtColor(skimage.data.coffee(), cv2.COLOR_RGB2BGR), (1920, 1080), cv2.INTER_AREA
        )
        still = module.photo_analyser(with_embedding=False)
        assert still.get_faces(coffee) == []
        sure = module.SURE_FACE_SCORE
        monkeypatch.setattr(module, "SURE_FACE_SCORE", 0.0)  # as before: any mesh counts
        (spoon,) = still.get_faces(coffee)
        assert spoon.score < sure
        # A real face's mesh is sure, and the same strict or not.
        landmarker = still.landmarker
        face = module.FaceAnalyser(with_embedding=False).get_faces(astronaut)[0]
        loose = landmarker.fit(astronaut, face.bbox)
        certain = landmarker.fit(astronaut, face.bbox, strict=True)
        assert loose is not None and certain is not None
        assert float(np.abs(loose - certain).max()) < 1e-3

    @pytest.mark.parametrize(
        ("mode", "searched", "score", "strict"),
        [
            ("image", True, 0.6, True),
            ("image", True, 0.8, False),  # a sure detection
            ("image", False, 0.6, False),  # the upright pass's own
            ("video", True, 0.6, True),  # a video's too, when its tracker detects
        ],
    )
    def test_which_fits_are_strict(
        self,
        astronaut: np.ndarray,
        monkeypatch: pytest.MonkeyPatch,
        mode: str,
        searched: bool,
        score: float,
        strict: bool,
    ) -> None:
        from faceweave.analysis.base import Detection

        analyser = FaceAnalyser(with_embedding=False, mode=mode)
        asked: list[bool] = []
        monkeypatch.setattr(
            analyser, "_face_from_box", lambda *a, **kw: asked.append(kw["strict"]) or None
        )
        det = Detection((100.0, 100.0, 300.0, 300.0), score, None, searched)
        assert analyser._fitted(astronaut, [det], [], mirror=False) == []
        assert asked == [strict]
