"""The face's regions, from an ONNX face parser a user brings (faceweave ships no weights).

A face parser labels every pixel of an aligned face crop: skin, brows, eyes, glasses,
nose, mouth, lips, and what is no part of the face (hair, a hat, ears, the neck,
clothes, the background). FaceFusion runs BiSeNet (trained on CelebAMask-HQ) for its
``region`` face mask. faceweave swaps the regions asked for (``--mask-regions``) and
keeps the rest of the target as it is: a fringe or a hat brim over the forehead, the
target's glasses, or whole parts of the face left out by choice (its own eyes, its
own mouth). On a source photo what is no region asked for is hidden, as a hand is.

The model's contract (BiSeNet's, as exported for FaceFusion), checked when it loads;
another signature is one clear line:

* one image input, float32 (or float16), ``[1, 3, S, S]``; S = 512 where the file
  leaves it open. The face is aligned by its five points to FFHQ's template at S px
  (the whole head, as CelebAMask-HQ's photos show it), RGB, normalised by ImageNet's
  mean and deviation.
* its first output ``[1, 19, S', S']``: a score per class and pixel, in
  CelebAMask-HQ's order (:data:`PARSER_CLASSES`); each pixel takes its highest.
  (BiSeNet's training exports add two auxiliary outputs; they are not used.)

Around the model, the kept regions' mask is smoothed and ramped as a face occluder's
(see :mod:`faceweave.analysis.occluder`), so what a parser drops and what an occluder
finds combine (:class:`~faceweave.analysis.occluder.Occluders`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.occluder import (
    OCCLUDER_MAX_SIZE,
    Occluder,
    Occlusion,
    checked_names,
    checked_target,
    ramped,
)
from faceweave.analysis.onnx_backend import OnnxModel
from faceweave.core.align import aligned_crop, ffhq_alignment
from faceweave.errors import BackendError, InputError
from faceweave.types import Face, Frame, check_frame

__all__ = [
    "DEFAULT_REGIONS",
    "PARSER_CLASSES",
    "PARSER_SIZE",
    "REGIONS",
    "FaceParser",
    "checked_regions",
]

# CelebAMask-HQ's classes, in the order a BiSeNet face parser scores them.
PARSER_CLASSES = (
    "background",
    "skin",
    "left-eyebrow",
    "right-eyebrow",
    "left-eye",
    "right-eye",
    "glasses",
    "left-ear",
    "right-ear",
    "earring",
    "nose",
    "mouth",
    "upper-lip",
    "lower-lip",
    "neck",
    "necklace",
    "cloth",
    "hair",
    "hat",
)
# The regions a swap may take (FaceFusion's face mask regions, by the same names).
REGIONS = (
    "skin",
    "left-eyebrow",
    "right-eyebrow",
    "left-eye",
    "right-eye",
    "glasses",
    "nose",
    "mouth",
    "upper-lip",
    "lower-lip",
)
# Swapped by default: the face without glasses (the embedded engine keeps a target's
# glasses and the eyes behind them too; a parser that finds them agrees).
DEFAULT_REGIONS = tuple(r for r in REGIONS if r != "glasses")
# The crop's side where the model's file leaves it open (BiSeNet's).
PARSER_SIZE = 512
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)
_MEAN_255 = tuple(float(v) for v in 255.0 * _MEAN)
_FLOAT_TYPES = ("tensor(float)", "tensor(float16)")


def checked_regions(regions: object) -> tuple[str, ...]:
    """``regions`` as a tuple of names from :data:`REGIONS`, each once, in that order
    (one or more; ``"all"`` alone: all of them).

    Raises:
        InputError: not a list of known region names.
    """
    names = checked_names(regions, (*REGIONS, "all"), "region")
    if "all" in names:
        if len(names) > 1:
            raise InputError("the face region 'all' is every region: give it alone")
        return REGIONS
    return tuple(r for r in REGIONS if r in names)


class FaceParser(Occluder):
    """Keeps the face's ``regions`` to swap, with an ONNX face parser (see the module):
    everything else in a face's area counts as covered, so it stays the target's.

    Args:
        model_path: the ``.onnx`` file (BiSeNet trained on CelebAMask-HQ, as
            FaceFusion's ``bisenet_resnet_34``, or a model with its signature).
        regions: the regions swapped, names from :data:`REGIONS` (default
            :data:`DEFAULT_REGIONS`: all but glasses).
        execution_provider: onnxruntime provider (``cpu``, ``cuda``...).

    Example:
        >>> parser = FaceParser("bisenet.onnx", regions=["skin", "nose"])  # doctest: +SKIP
        >>> swapper = fw.Swapper(source_face).with_occluder(parser)  # doctest: +SKIP
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        regions: Iterable[str] = DEFAULT_REGIONS,
        execution_provider: str = "cpu",
    ) -> None:
        if not isinstance(model_path, (str, Path)):
            raise InputError(f"the face parser model is a .onnx file's path, got {model_path!r}")
        self.regions = checked_regions(regions)
        self.model = OnnxModel(
            model_path, inputs=(), outputs=None, execution_provider=execution_provider
        )
        path = self.model.path
        if len(self.model.input_shapes) != 1 or not self.model.output_names:
            raise InputError(
                f"{path}: not a face parser: expected one image input, got "
                f"{list(self.model.input_shapes)}"
            )
        ((self.input_name, shape),) = self.model.input_shapes.items()
        self.size = _side(list(shape), path) or PARSER_SIZE
        output = self.model.session.get_outputs()[0]
        self.output_name = output.name
        kinds = {i.name: i.type for i in self.model.session.get_inputs()}
        kinds["its first output"] = output.type
        for name, kind in kinds.items():
            if kind not in _FLOAT_TYPES:
                raise InputError(f"{path}: {name} is {kind}, expected float32 or float16")
        self._half = kinds[self.input_name] == "tensor(float16)"
        declared = [d if isinstance(d, int) and d > 0 else None for d in output.shape]
        if (
            len(declared) != 4
            or declared[0] not in (1, None)
            or declared[1] not in (len(PARSER_CLASSES), None)
            or (None not in declared[2:] and declared[2] != declared[3])
        ):
            raise InputError(
                f"{path}: output {list(output.shape)}, expected [1, {len(PARSER_CLASSES)}, "
                "size, size] (a score for each of CelebAMask-HQ's classes)"
            )
        if any(d is not None and not 2 <= d <= OCCLUDER_MAX_SIZE for d in declared[2:]):
            raise InputError(
                f"{path}: output {list(output.shape)}: a face's labels are 2 to "
                f"{OCCLUDER_MAX_SIZE} px a side"
            )

    def with_regions(self, regions: Iterable[str]) -> FaceParser:
        """The same model keeping other regions."""
        other = object.__new__(FaceParser)
        other.__dict__.update(self.__dict__)
        other.regions = checked_regions(regions)
        return other

    def for_source(self) -> FaceParser:
        """On a source photo every region of the face is kept (those asked for and the
        default ones): only what is no part of it (hair, a hat) is hidden there."""
        wanted = checked_regions([*self.regions, *DEFAULT_REGIONS])
        return self if wanted == self.regions else self.with_regions(wanted)

    def blob(self, crop: Frame) -> NDArray[np.float32]:
        """The model's input for one aligned BGR crop: RGB, ImageNet-normalised,
        [1, 3, S, S] (OpenCV's blob, its mean taken off and its scale the deviations'
        mean, then each channel set to its own deviation).

        Raises:
            InputError: ``crop`` is no uint8 (S, S, 3) image.
        """
        crop = check_frame(crop)
        if crop.shape[:2] != (self.size, self.size):
            raise InputError(
                f"the face parser takes {self.size} x {self.size} crops, got "
                f"{crop.shape[1]} x {crop.shape[0]}"
            )
        # (With swapRB the mean is given in RGB order, as the blob's channels.)
        blob = cv2.dnn.blobFromImage(
            crop, float(1.0 / (255.0 * _STD.mean())), mean=_MEAN_255, swapRB=True
        )
        blob *= (_STD.mean() / _STD)[None, :, None, None]
        return blob.astype(np.float16) if self._half else blob

    def _raw(self, crop: Frame) -> NDArray[np.float32]:
        """The model's (19, S', S') scores of one crop, their shape checked."""
        value = self.model.run({self.input_name: self.blob(crop)}, [self.output_name])
        scores = value[self.output_name]
        if scores.ndim != 4 or scores.shape[:2] != (1, len(PARSER_CLASSES)):
            raise BackendError(
                f"{self.model.path.name}: output {list(scores.shape)}, expected "
                f"[1, {len(PARSER_CLASSES)}, size, size]"
            )
        side = scores.shape[2]
        if side != scores.shape[3] or not 2 <= side <= OCCLUDER_MAX_SIZE:
            raise BackendError(
                f"{self.model.path.name}: output {list(scores.shape)} is no face's labels "
                "(expected a square of 2 to 2048 px)"
            )
        return np.asarray(scores[0], np.float32)

    def _not_finite(self) -> BackendError:
        return BackendError(
            f"{self.model.path.name}: the model's output is not finite (NaN or infinity)"
        )

    def scores(self, crop: Frame) -> NDArray[np.float32]:
        """The model's (19, S', S') scores of one aligned ``size`` px BGR crop, one plane
        per class of :data:`PARSER_CLASSES`, at the model's output side (a score of
        -infinity is a class that never wins; NaN and +infinity are errors)."""
        scores = self._raw(crop)
        if np.isnan(scores).any() or np.isposinf(scores).any():
            raise self._not_finite()
        return scores

    def run(self, crop: Frame) -> NDArray[np.int64]:
        """The class of every pixel of one aligned ``size`` px BGR crop, (S', S') indices
        into :data:`PARSER_CLASSES` at the model's output side."""
        return np.asarray(self.scores(crop).argmax(axis=0), np.int64)

    def kept(self, crop: Frame) -> NDArray[np.bool_]:
        """Where one aligned crop shows a region kept, (S', S'): its best kept class
        scores above every other (the argmax's regions, in a twentieth of its time; a
        tie is not kept, so the target's pixel stays)."""
        scores = self._raw(crop)
        kept = np.array([PARSER_CLASSES.index(r) for r in self.regions], np.int64)
        others = np.setdiff1d(np.arange(len(PARSER_CLASSES)), kept)

        def best(classes: NDArray[np.int64]) -> NDArray[np.float32]:
            top = scores[classes[0]].copy()
            for c in classes[1:]:
                np.maximum(top, scores[c], out=top)
            # A NaN or a +infinity anywhere in these planes is in their maximum too (a
            # -infinity is a class that never wins: no harm).
            if np.isnan(top).any() or np.isposinf(top).any():
                raise self._not_finite()
            return top

        return best(kept) > best(others)

    def occlusion(self, frame: Frame, face: Face) -> Occlusion:
        """The regions not kept in ``face``'s area of ``frame``, as what covers it (see
        :class:`~faceweave.analysis.occluder.Occlusion`).

        Raises:
            InputError: ``frame`` is no uint8 (H, W, 3) image or ``face`` no Face.
            BackendError: the model fails or gives values that are not finite.
        """
        frame = checked_target(frame, face)
        matrix = ffhq_alignment(face.landmarks_5, self.size)
        kept = self.kept(aligned_crop(frame, matrix, self.size)).astype(np.float32)
        if kept.shape != (self.size, self.size):
            kept = cv2.resize(kept, (self.size, self.size), interpolation=cv2.INTER_LINEAR)
        return ramped(kept, matrix)


def _side(shape: list[Any], path: Path) -> int:
    """The square side S of a ``[1, 3, S, S]`` input (0 where the file leaves it open)."""
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if len(dims) == 4 and dims[0] in (1, None) and dims[1] == 3:
        sides = dims[2:4]
        if None not in sides and sides[0] != sides[1]:
            raise InputError(f"{path}: input {shape} is not square")
        side = sides[0] or sides[1] or 0
        if 0 < side < 16:
            raise InputError(f"{path}: input {shape} is too small for a face")
        if side > OCCLUDER_MAX_SIZE:
            raise InputError(
                f"{path}: input {shape} is over {OCCLUDER_MAX_SIZE} px a side: not a face parser"
            )
        return side
    raise InputError(f"{path}: input {shape}, expected [1, 3, size, size] (an RGB face)")
