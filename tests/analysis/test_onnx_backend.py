"""The YuNet ONNX detector backend: pre/post-processing on a tiny model with YuNet's
signature built here, and the real model from ../shared when it is there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.base import create_detector
from faceweave.analysis.onnx_backend import YuNetDetector
from faceweave.apps import cli
from faceweave.core.geometry import bbox_iou
from faceweave.errors import EXIT_ERROR, EXIT_USAGE, InputError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

STRIDES = (8, 16, 32)
REAL_YUNET = Path(__file__).resolve().parents[3] / "shared/models/face_detection_yunet_2026may.onnx"


def _tiny_yunet(path: Path, *, drop: str | None = None) -> Path:
    """YuNet's signature; score = mean brightness of the cell's blue channel / 255,
    box and keypoint offsets all zero (box = one cell, centred on the cell's corner)."""
    nodes, outputs = [], []
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [], [1 / 255])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, -1, 1])
    starts = helper.make_tensor("starts", TensorProto.INT64, [1], [0])
    ends = helper.make_tensor("ends", TensorProto.INT64, [1], [1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    for s in STRIDES:
        nodes += [
            helper.make_node(
                "AveragePool", ["input"], [f"pool{s}"], kernel_shape=[s, s], strides=[s, s]
            ),
            helper.make_node("Slice", [f"pool{s}", "starts", "ends", "axes"], [f"blue{s}"]),
            helper.make_node("Mul", [f"blue{s}", "scale"], [f"score{s}"]),
            helper.make_node("Transpose", [f"score{s}"], [f"nhwc{s}"], perm=[0, 2, 3, 1]),
            helper.make_node("Reshape", [f"nhwc{s}", "shape"], [f"cls_{s}"]),
            helper.make_node("Identity", [f"cls_{s}"], [f"obj_{s}"]),
            helper.make_node("Mul", [f"cls_{s}", "zero"], [f"z{s}"]),
            helper.make_node("Concat", [f"z{s}"] * 4, [f"bbox_{s}"], axis=2),
            helper.make_node("Concat", [f"z{s}"] * 10, [f"kps_{s}"], axis=2),
        ]
        for name, last in (("cls", 1), ("obj", 1), ("bbox", 4), ("kps", 10)):
            if f"{name}_{s}" != drop:
                outputs.append(
                    helper.make_tensor_value_info(
                        f"{name}_{s}", TensorProto.FLOAT, [1, f"n{s}", last]
                    )
                )
    graph = helper.make_graph(
        nodes,
        "tiny_yunet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "h", "w"])],
        outputs,
        initializer=[scale, zero, shape, starts, ends, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_yunet(tmp_path_factory.mktemp("onnx") / "tiny_yunet.onnx")


def test_decode_places_boxes_and_keypoints_on_the_grid() -> None:
    detector = YuNetDetector.__new__(YuNetDetector)  # decode needs no model
    h, w = 64, 96
    outputs = {}
    for s in STRIDES:
        n = (h // s) * (w // s)
        outputs[f"cls_{s}"] = np.zeros((1, n, 1), np.float32)
        outputs[f"obj_{s}"] = np.zeros((1, n, 1), np.float32)
        outputs[f"bbox_{s}"] = np.zeros((1, n, 4), np.float32)
        outputs[f"kps_{s}"] = np.zeros((1, n, 10), np.float32)
    # Stride 16: cell (row 2, col 3) = index 2 * 6 + 3, offset by half a cell, twice as big.
    index = 2 * (w // 16) + 3
    outputs["cls_16"][0, index, 0] = 0.81
    outputs["obj_16"][0, index, 0] = 1.0
    outputs["bbox_16"][0, index] = [0.5, 0.5, np.log(2.0), np.log(3.0)]
    outputs["kps_16"][0, index] = [0.25, 0.75] * 5
    boxes, scores, points = detector.decode(outputs, (h, w))
    best = int(np.argmax(scores))
    assert scores[best] == pytest.approx(0.9)  # sqrt(0.81 * 1.0)
    cx, cy = (3 + 0.5) * 16, (2 + 0.5) * 16
    np.testing.assert_allclose(boxes[best], [cx - 16, cy - 24, cx + 16, cy + 24], atol=1e-4)
    np.testing.assert_allclose(points[best], [[(3 + 0.25) * 16, (2 + 0.75) * 16]] * 5, atol=1e-4)
    assert np.count_nonzero(scores) == 1


def test_tiny_model_finds_the_bright_square_in_frame_pixels(tiny_model: Path) -> None:
    detector = YuNetDetector(model_path=tiny_model, min_score=0.9, input_size=640)
    frame = np.zeros((1000, 1280, 3), np.uint8)  # scale 0.5; padded to 640 x 512
    frame[256:320, 512:576, 0] = 255  # blue: one stride-32 cell at model (row 4, col 8)
    found = detector.detect(frame)
    assert found, "the bright cell must be found"
    # Stride 32 cell (4, 8): centre (256, 128) in the model, size 32 -> x2 back in the frame.
    expected = (480.0, 224.0, 544.0, 288.0)
    assert any(bbox_iou(d.bbox, expected) > 0.99 for d in found), [d.bbox for d in found]
    assert all(d.score >= 0.9 for d in found)
    assert all(d.keypoints is not None and d.keypoints.shape == (5, 2) for d in found)
    # A dim square scores under the threshold: nothing.
    frame[256:320, 512:576, 0] = 100
    assert detector.detect(frame) == []


def test_padding_never_shifts_boxes(tiny_model: Path) -> None:
    detector = YuNetDetector(model_path=tiny_model, min_score=0.9, input_size=640)
    frame = np.zeros((300, 640, 3), np.uint8)  # scale 1, padded to 320 rows
    frame[64:96, 128:160, 0] = 255
    expected = (112.0, 48.0, 144.0, 80.0)  # stride-32 cell (2, 4): centre (128, 64)
    assert any(bbox_iou(d.bbox, expected) > 0.99 for d in detector.detect(frame))


def test_model_with_another_signature_is_refused(tmp_path: Path) -> None:
    broken = _tiny_yunet(tmp_path / "broken.onnx", drop="kps_32")
    with pytest.raises(InputError, match="missing kps_32"):
        YuNetDetector(model_path=broken)
    with pytest.raises(InputError, match="needs its model file"):
        YuNetDetector()
    # The analyser loads another detector's model when made, not on its first frame.
    with pytest.raises(InputError, match="needs its model file"):
        FaceAnalyser(detector="yunet")
    with pytest.raises(InputError, match="not found"):
        FaceAnalyser(detector="yunet", detector_model=tmp_path / "absent.onnx")
    with pytest.raises(InputError, match="not found"):
        YuNetDetector(model_path=tmp_path / "absent.onnx")
    text = tmp_path / "text.onnx"
    text.write_text("not a model")
    with pytest.raises(InputError, match="not a loadable ONNX model"):
        YuNetDetector(model_path=text)


def test_registry_and_analyser_options(tiny_model: Path) -> None:
    detector = create_detector("yunet", model_path=tiny_model, min_score=0.7)
    assert isinstance(detector, YuNetDetector) and detector.min_score == 0.7
    analyser = FaceAnalyser(detector="yunet", detector_model=tiny_model)
    assert isinstance(analyser.detector, YuNetDetector)
    assert analyser.get_faces(np.zeros((200, 300, 3), np.uint8)) == []


def test_cli_detector_options_are_checked_first(tmp_path: Path, astronaut: np.ndarray) -> None:
    import cv2

    image = tmp_path / "a.png"
    cv2.imwrite(str(image), astronaut)
    assert cli.main(["analyse", str(image), "--detector", "yunet"]) == EXIT_USAGE
    assert (
        cli.main(["analyse", str(image), "--detector-model", str(tmp_path / "m.onnx")])
        == EXIT_USAGE
    )
    missing = ["--detector", "yunet", "--detector-model", str(tmp_path / "m.onnx")]
    assert cli.main(["analyse", str(image), *missing]) == EXIT_ERROR


requires_real = pytest.mark.skipif(
    not REAL_YUNET.is_file(), reason="../shared/models/face_detection_yunet_2026may.onnx absent"
)


@requires_real
def test_real_yunet_finds_the_astronaut_like_mediapipe(
    astronaut: np.ndarray, astronaut_face: object
) -> None:
    detector = YuNetDetector(model_path=REAL_YUNET)
    found = detector.detect(astronaut)
    assert len(found) == 1
    mediapipe_box = FaceAnalyser(with_embedding=False).detect(astronaut)[0].bbox
    assert bbox_iou(found[0].bbox, mediapipe_box) > 0.5
    kps = found[0].keypoints
    assert kps is not None
    assert kps[0, 0] < kps[1, 0]  # right eye first: the image-left one
    assert kps[0, 1] < kps[2, 1] < kps[3, 1]  # eyes above the nose above the mouth


@requires_real
def test_real_yunet_drives_the_whole_analysis(tmp_path: Path, pair_frame: np.ndarray) -> None:
    analyser = FaceAnalyser(detector="yunet", detector_model=REAL_YUNET, with_embedding=False)
    faces = analyser.get_faces(pair_frame)
    assert len(faces) == 2
    assert all(face.landmarks_478.shape == (478, 3) for face in faces)
