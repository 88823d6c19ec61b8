"""ONNX detector backends (onnxruntime): models a user brings, not shipped with faceweave.

``yunet``: OpenCV Zoo's YuNet face detector (MIT). faceweave ships no weights; point
it at the ``.onnx`` file::

    analyser = FaceAnalyser(detector="yunet", detector_model="face_detection_yunet.onnx")
    faceweave analyse group.jpg --detector yunet --detector-model face_detection_yunet.onnx

The model's contract, checked when it loads (a file with another signature is refused
with one clear line):

* input ``input``: float32 ``[1, 3, H, W]``, BGR, raw 0..255, H and W multiples of 32;
* outputs ``cls_s``, ``obj_s`` (``[1, N_s, 1]``), ``bbox_s`` (``[1, N_s, 4]``) and
  ``kps_s`` (``[1, N_s, 10]``) for the strides s = 8, 16, 32, one anchor per cell
  (``N_s = H/s * W/s``, row-major).

Decoding, per cell (row r, column c) of stride s: score = sqrt(cls * obj) (both
clipped to [0, 1]); centre = ((c + dx) s, (r + dy) s); size = (exp(dw) s,
exp(dh) s); keypoint k = ((c + kx_k) s, (r + ky_k) s). Boxes above ``min_score``
go through non-maximum suppression, then back to frame pixels.

The frame is scaled so its longer side is ``input_size`` (default 640) and padded
right and bottom to multiples of 32; the model sees every face at that scale, so
faces under ~10 px there (1.5% of the longer side) are missed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.base import Detection, register_detector
from faceweave.core.resize import downscale
from faceweave.errors import BackendError, InputError
from faceweave.runtime import signals_deferred
from faceweave.types import Frame

__all__ = ["EXECUTION_PROVIDERS", "OnnxModel", "YuNetDetector", "check_model_file"]

# faceweave name -> onnxruntime provider.
EXECUTION_PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "directml": "DmlExecutionProvider",
}
_STRIDES = (8, 16, 32)


def check_model_file(path: Path) -> Path:
    """``path`` when it is a file; an :class:`InputError` naming it otherwise."""
    if path.is_dir():
        raise InputError(f"{path}: a folder, not a model file")
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    return path


class OnnxModel:
    """An onnxruntime session whose signature was checked against what the caller needs.

    Args:
        path: the ``.onnx`` file.
        inputs: required input names.
        outputs: required output names with the size of their last axis (None: any
            size); None takes every output the model has, in its order.
        execution_provider: ``cpu``, ``cuda``, ... (see :data:`EXECUTION_PROVIDERS`).
        threads: intra-op threads (0: onnxruntime's default).

    Raises:
        InputError: missing or unreadable file, or a model with another signature.
        BackendError: onnxruntime is missing or the provider is not available.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        inputs: tuple[str, ...],
        outputs: dict[str, int | None] | None,
        execution_provider: str = "cpu",
        threads: int = 0,
    ) -> None:
        try:
            with signals_deferred():  # Ctrl-C inside its import reads as a broken install
                import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - install problem
            raise BackendError(f"onnxruntime is not installed: {exc}") from exc
        self.path = check_model_file(Path(path))
        provider = (
            EXECUTION_PROVIDERS.get(execution_provider)
            if isinstance(execution_provider, str)
            else None
        )
        if provider is None:
            raise InputError(
                f"unknown execution provider {execution_provider!r}; "
                f"choose from {', '.join(EXECUTION_PROVIDERS)}"
            )
        if provider not in ort.get_available_providers():
            raise BackendError(
                f"execution provider {execution_provider!r} is not available in this "
                f"onnxruntime build (available: {', '.join(ort.get_available_providers())})"
            )
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(
                str(self.path), sess_options=options, providers=[provider]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{self.path}: not a loadable ONNX model ({first})") from exc
        have_in = {i.name for i in self.session.get_inputs()}
        have_out = {o.name: o.shape for o in self.session.get_outputs()}
        if outputs is None:
            outputs = dict.fromkeys(have_out)
        # Each input's shape as the file declares it (a dimension left open is a str or None).
        self.input_shapes: dict[str, list[Any]] = {
            i.name: list(i.shape) for i in self.session.get_inputs()
        }
        missing = [n for n in inputs if n not in have_in]
        missing += [n for n in outputs if n not in have_out]
        if missing:
            raise InputError(
                f"{self.path}: not the expected model: missing {', '.join(sorted(missing))}"
            )
        for name, last in outputs.items():
            shape = have_out[name]
            if last is not None and shape and isinstance(shape[-1], int) and shape[-1] != last:
                raise InputError(
                    f"{self.path}: output {name} has {shape[-1]} values per anchor, expected {last}"
                )
        self.output_names = list(outputs)
        self._lock = threading.Lock()  # one run at a time per session: results stay in order

    def single_input(self, kind: str) -> tuple[str, list[Any]]:
        """The name and declared shape of the model's one image input, where it has one
        input and one output; else an InputError saying it is not a ``kind``."""
        if len(self.input_shapes) != 1 or len(self.output_names) != 1:
            raise InputError(
                f"{self.path}: not a {kind}: expected one image input and one output, got "
                f"inputs {list(self.input_shapes)} and outputs {self.output_names}"
            )
        ((name, shape),) = self.input_shapes.items()
        return name, shape

    def run(
        self, feeds: dict[str, NDArray[Any]], names: list[str] | None = None
    ) -> dict[str, NDArray[np.float32]]:
        """The outputs ``names`` (None: :attr:`output_names`) for ``feeds``."""
        names = self.output_names if names is None else names
        with self._lock:
            try:
                values = self.session.run(names, feeds)
            except Exception as exc:
                raise BackendError(f"{self.path.name}: inference failed: {exc}") from exc
        pairs = zip(names, values, strict=True)
        return {name: np.asarray(value, np.float32) for name, value in pairs}


@register_detector("yunet")
class YuNetDetector:
    """Face boxes and 5 keypoints from a YuNet ONNX model (see the module docs).

    Args:
        model_path: the YuNet ``.onnx`` file (not shipped with faceweave).
        min_score: detection confidence threshold.
        nms_iou: boxes overlapping a better one by more than this are dropped.
        input_size: the frame's longer side as the model sees it (multiple of 32).
        execution_provider: onnxruntime provider (``cpu`` by default).
        max_faces: keep at most this many boxes, best first.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        min_score: float = 0.6,
        nms_iou: float = 0.3,
        input_size: int = 640,
        execution_provider: str = "cpu",
        max_faces: int = 100,
        **_ignored: object,
    ) -> None:
        if model_path is None:
            raise InputError(
                "the yunet detector needs its model file, OpenCV Zoo's face_detection_yunet "
                "(--detector-model PATH.onnx; in Python, detector_model=)"
            )
        if input_size < 32 or input_size % 32:
            raise InputError(f"input_size must be a positive multiple of 32, got {input_size}")
        outputs: dict[str, int | None] = {}
        for s in _STRIDES:
            outputs.update({f"cls_{s}": 1, f"obj_{s}": 1, f"bbox_{s}": 4, f"kps_{s}": 10})
        self.model = OnnxModel(
            model_path, inputs=("input",), outputs=outputs, execution_provider=execution_provider
        )
        self.min_score = min_score
        self.nms_iou = nms_iou
        self.input_size = input_size
        self.max_faces = max_faces

    def preprocess(self, frame: Frame) -> tuple[NDArray[np.float32], float]:
        """(1, 3, H, W) float32 BGR 0..255 padded to multiples of 32, and the scale used."""
        h, w = frame.shape[:2]
        scale = self.input_size / max(h, w)
        sw, sh = max(1, round(w * scale)), max(1, round(h * scale))
        resized = (
            downscale(frame, (sw, sh))
            if scale < 1
            else cv2.resize(frame, (sw, sh), interpolation=cv2.INTER_LINEAR)
        )
        pw, ph = -(-sw // 32) * 32, -(-sh // 32) * 32
        padded = np.zeros((ph, pw, 3), np.float32)
        padded[:sh, :sw] = resized
        return np.ascontiguousarray(padded.transpose(2, 0, 1)[None]), scale

    def decode(
        self, outputs: dict[str, NDArray[np.float32]], size: tuple[int, int]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        """Boxes (N, 4: x0 y0 x1 y1), scores (N,) and keypoints (N, 5, 2) in model pixels,
        before thresholding and NMS. ``size`` is the model input's (height, width)."""
        height, width = size
        boxes, scores, points = [], [], []
        for s in _STRIDES:
            rows, cols = height // s, width // s
            cls = np.clip(outputs[f"cls_{s}"].reshape(-1), 0.0, 1.0)
            obj = np.clip(outputs[f"obj_{s}"].reshape(-1), 0.0, 1.0)
            if cls.size != rows * cols:
                raise BackendError(
                    f"{self.model.path.name}: {cls.size} anchors at stride {s}, "
                    f"expected {rows * cols} for a {width}x{height} input"
                )
            r, c = np.divmod(np.arange(rows * cols, dtype=np.float32), np.float32(cols))
            bbox = outputs[f"bbox_{s}"].reshape(-1, 4)
            kps = outputs[f"kps_{s}"].reshape(-1, 5, 2)
            cx, cy = (c + bbox[:, 0]) * s, (r + bbox[:, 1]) * s
            bw = np.exp(np.clip(bbox[:, 2], -10, 10)) * s
            bh = np.exp(np.clip(bbox[:, 3], -10, 10)) * s
            boxes.append(np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1))
            scores.append(np.sqrt(cls * obj))
            points.append(
                np.stack([(c[:, None] + kps[..., 0]) * s, (r[:, None] + kps[..., 1]) * s], -1)
            )
        return (
            np.concatenate(boxes).astype(np.float32),
            np.concatenate(scores).astype(np.float32),
            np.concatenate(points).astype(np.float32),
        )

    def detect(self, frame: Frame) -> list[Detection]:
        h, w = frame.shape[:2]
        blob, scale = self.preprocess(frame)
        outputs = self.model.run({"input": blob})
        boxes, scores, points = self.decode(outputs, (blob.shape[2], blob.shape[3]))
        keep = np.flatnonzero(scores >= self.min_score)
        if keep.size == 0:
            return []
        xywh = [
            [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])] for b in boxes[keep]
        ]
        chosen = cv2.dnn.NMSBoxes(xywh, scores[keep].tolist(), self.min_score, self.nms_iou)
        order = keep[np.asarray(chosen, np.int64).reshape(-1)]
        order = order[np.argsort(-scores[order], kind="stable")][: self.max_faces]
        found: list[Detection] = []
        for i in order:
            x0, y0, x1, y1 = (boxes[i] / scale).tolist()
            box = (max(0.0, x0), max(0.0, y0), min(float(w), x1), min(float(h), y1))
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                continue
            found.append(Detection(box, float(scores[i]), (points[i] / scale).astype(np.float32)))
        return found
