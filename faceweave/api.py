"""The Python API in the shape the product literature shows.

import faceweave as fw
predictor = fw.FacePredictor(model="mesh", execution_provider="cpu")
target_face = fw.get_one_face(frame)
result = predictor.swap(frame, "source.jpg", target_face)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import cast

import numpy as np

from faceweave.analysis.analyser import FaceAnalyser, photo_analyser
from faceweave.analysis.onnx_backend import EXECUTION_PROVIDERS as ONNX_PROVIDERS
from faceweave.analysis.parser import DEFAULT_REGIONS
from faceweave.errors import FaceweaveError, NoFaceError, UsageError
from faceweave.processors.engines import ENGINE_NAMES, EngineSettings, SwapEngine
from faceweave.processors.neural import ENHANCER_BLEND, AnySwapper
from faceweave.processors.swap import SwapOptions
from faceweave.types import Face, Frame, is_whole_number

SourceLike = str | os.PathLike | Frame | Face

# Engine name -> its execution providers. ``mesh`` is the embedded engine (no model
# files, CPU); ``inswapper`` runs ONNX models the user brings (NeuralSwapper).
ENGINES = {name: ("cpu",) if name == "mesh" else tuple(ONNX_PROVIDERS) for name in ENGINE_NAMES}
EXECUTION_PROVIDERS = ENGINES["mesh"]
# FacePredictor keywords that set up the neural engine rather than a swap option.
NEURAL_SETUP = ("swapper_model", "embedder_model", "pixel_boost")
# ... and the face enhancer, for either engine.
ENHANCER_SETUP = ("enhancer_model", "enhancer_blend", "enhancer_weight")
# ... and the face occluder, the face parser and the face areas, for either engine.
OCCLUDER_SETUP = ("occluder_model", "parser_model", "mask_regions", "mask_areas")


def _source_key(photo: object) -> object:
    """What FacePredictor's cache compares a source photo by: a file's path, inode,
    modification and change times and size (None when it cannot be read: no caching,
    the read says what is wrong); a frame's shape and type; a Face's identity."""
    if isinstance(photo, (str, os.PathLike)):
        try:
            stat = os.stat(photo)
        except (OSError, ValueError):
            return None
        return (
            "path",
            os.fspath(photo),
            stat.st_ino,
            stat.st_mtime_ns,
            stat.st_ctime_ns,
            stat.st_size,
        )
    if isinstance(photo, np.ndarray):
        return ("frame", photo.shape, photo.dtype.str)
    return ("object", id(photo))


def _same_source(photo: object, kept: object) -> bool:
    """Whether ``photo`` is the source cached as ``kept`` (beyond their keys): a
    frame's pixels against the copy kept of them, any other object by identity (a
    path's key says all)."""
    if isinstance(photo, (str, os.PathLike)):
        return True
    if isinstance(photo, np.ndarray):
        return isinstance(kept, np.ndarray) and np.array_equal(photo, kept)
    return photo is kept


@functools.lru_cache(maxsize=1)
def default_analyser() -> FaceAnalyser:
    """A shared analyser for the convenience functions (models load once)."""
    return FaceAnalyser()


# The still analyser keeps every face it fits (it fits every face it finds whatever
# its max_faces: that only cuts its list), and each caller takes the largest it wants:
# one analyser for every max_faces, where one per value had held about 200 MiB each.
EVERY_FACE = 1 << 20


@functools.lru_cache(maxsize=1)
def still_analyser() -> FaceAnalyser:
    """A shared analyser that finds all of a photo's faces, as ``faceweave swap`` does:
    a group's small faces and faces cut by the frame's sides too (seven more detector
    runs than :func:`default_analyser`'s), every one of them, largest first."""
    return photo_analyser(max_faces=EVERY_FACE)


def get_one_face(frame: Frame) -> Face | None:
    """The largest face in ``frame``, or None (by the fast default analyser: the
    largest face needs no search of tiles, and a camera loop calls this per frame)."""
    faces = default_analyser().get_faces(frame)
    return faces[0] if faces else None


def get_many_faces(frame: Frame, max_faces: int = 8) -> list[Face]:
    """The faces in ``frame``, largest first, as ``faceweave swap`` finds them: small
    faces of a group and faces cut by the frame's sides too (see still_analyser); at
    most ``max_faces``, the largest (as ``faceweave swap --max-faces``: each face
    found costs a mesh fit, about 5 ms).

    Raises:
        UsageError: ``max_faces`` is not a whole number of at least 1.
    """
    if not is_whole_number(max_faces) or max_faces < 1:
        raise UsageError(f"max_faces must be a whole number of at least 1, got {max_faces!r}")
    return still_analyser().get_faces(frame)[: int(max_faces)]


class FacePredictor:
    """Swap faces with the embedded engine, or with ONNX models you bring.

    Args:
        model: engine name: ``mesh``, the embedded geometric/photometric engine (no
            model files); ``inswapper``, InsightFace's inswapper_128 or a model with its
            signature (see :class:`~faceweave.NeuralSwapper`), which needs
            ``swapper_model=`` and ``embedder_model=`` (the ``.onnx`` files) and takes
            ``pixel_boost=``. Either engine takes ``enhancer_model=`` (a face
            restoration model's ``.onnx`` file, see :class:`~faceweave.FaceEnhancer`)
            and ``enhancer_blend=`` (0..1, default 0.8) and ``enhancer_weight=``
            (CodeFormer's fidelity, 0..1, default 1), and ``occluder_model=`` (a face
            occluder's ``.onnx`` file, see :class:`~faceweave.FaceOccluder`: what it
            finds in front of a face stays the target's), and ``parser_model=`` (a face
            parser's ``.onnx`` file, see :class:`~faceweave.FaceParser`) with
            ``mask_regions=`` (the regions swapped; default all but glasses), and
            ``mask_areas=`` (parts of each face swapped, from its mesh: ``upper-face``,
            ``lower-face``, ``mouth``; no model).
        execution_provider: ``cpu`` (the embedded engine runs on the CPU); for
            ``inswapper`` any onnxruntime provider this machine has (``cuda``...).
        **options: swap options (fusion, color, blend, ...), see :class:`~faceweave.SwapOptions`.
    """

    def __init__(
        self, model: str = "mesh", execution_provider: str = "cpu", **options: object
    ) -> None:
        if model not in ENGINES:
            raise UsageError(f"unknown model {model!r}; available: {', '.join(ENGINES)}")
        # The embedded engine runs on the CPU; an enhancer's, occluder's or parser's
        # model may run elsewhere.
        runs_onnx = any(
            options.get(name) is not None
            for name in ("enhancer_model", "occluder_model", "parser_model")
        )
        providers = ENGINES["inswapper"] if runs_onnx else ENGINES[model]
        if execution_provider not in providers:
            raise UsageError(
                f"execution provider {execution_provider!r} is not available for the "
                f"{model!r} engine; available: {', '.join(providers)}"
            )
        setup = {name: options.pop(name) for name in NEURAL_SETUP if name in options}
        restore = {name: options.pop(name) for name in ENHANCER_SETUP if name in options}
        occlude = {name: options.pop(name) for name in OCCLUDER_SETUP if name in options}
        if restore and "enhancer_model" not in restore:
            given = ", ".join(f"{name}=" for name in restore)
            raise UsageError(f"{given} is for enhancer_model= (an .onnx file)")
        if model == "inswapper":
            missing = [n for n in ("swapper_model", "embedder_model") if n not in setup]
            if missing:
                raise UsageError(
                    f"the inswapper engine needs {' and '.join(missing)}= (.onnx files)"
                )
        elif setup:
            raise UsageError(f"{', '.join(setup)} is for model='inswapper'")
        checked = SwapOptions.from_kwargs(options)  # a wrong option fails here, not at a swap
        # The keywords as given: EngineSettings takes string paths and checks every
        # value's type and range when SwapEngine loads it.
        settings = EngineSettings(
            engine=model,
            swapper_model=setup.get("swapper_model"),  # type: ignore[arg-type]
            embedder_model=setup.get("embedder_model"),  # type: ignore[arg-type]
            pixel_boost=setup.get("pixel_boost", 1),  # type: ignore[arg-type]
            enhancer_model=restore.get("enhancer_model"),  # type: ignore[arg-type]
            enhancer_blend=restore.get("enhancer_blend", ENHANCER_BLEND),  # type: ignore[arg-type]
            enhancer_weight=restore.get("enhancer_weight", 1.0),  # type: ignore[arg-type]
            occluder_model=occlude.get("occluder_model"),  # type: ignore[arg-type]
            parser_model=occlude.get("parser_model"),  # type: ignore[arg-type]
            mask_regions=occlude.get("mask_regions", DEFAULT_REGIONS),  # type: ignore[arg-type]
            mask_areas=occlude.get("mask_areas", ()),  # type: ignore[arg-type]
            execution_provider=execution_provider,
        )
        settings.check_options(checked, name=lambda n: f"{n}=")
        self.engine = SwapEngine(settings)
        self.swap_options = checked
        self.analyser = default_analyser()
        self._cached: tuple[tuple[object, ...], list[SourceLike], AnySwapper] | None = None

    def source_face(self, source: SourceLike) -> Face:
        """Resolve a source given as a path, a frame or a Face to a Face: the largest
        face the fast default analyser finds in a photo or frame, or where it finds
        none, the largest that ``faceweave swap`` finds there (:func:`still_analyser`:
        a small face in a large photo too, which BlazeFace sees whole at a few
        pixels: the astronaut's face 55 px wide in a 1080p frame)."""
        if isinstance(source, Face):
            return source
        if isinstance(source, (str, os.PathLike)):
            from faceweave.io.image import read_image

            frame = read_image(source)
            name = os.fspath(source)
        else:
            frame = source
            name = "source image"
        faces = self.analyser.get_faces(frame) or still_analyser().get_faces(frame)
        if not faces:
            raise NoFaceError(f"{name}: no face found in the source")
        return faces[0]

    def swapper(self, source: SourceLike | Sequence[SourceLike]) -> AnySwapper:
        """The swapper for ``source``, reused while the same source is asked for: the
        same file, unchanged since (its modification time and size), the same Face, or
        a frame with the same pixels (a camera loop's reused buffer holding another
        photo is another source).

        A list or tuple is several photos of the same person, merged (see
        :func:`~faceweave.merge_sources`).
        """
        photos: list[SourceLike] = (
            list(source) if isinstance(source, (list, tuple)) else [cast(SourceLike, source)]
        )
        key = tuple(_source_key(p) for p in photos)
        cached = self._cached
        if cached is not None and None not in key and cached[0] == key:
            if all(_same_source(p, kept) for p, kept in zip(photos, cached[1], strict=True)):
                return cached[2]
        if not photos:
            raise NoFaceError("no source given: an empty list")
        # The frames' pixels as they are analysed (copied first: another thread may be
        # refilling the buffer).
        kept: list[SourceLike] = [p.copy() if isinstance(p, np.ndarray) else p for p in photos]
        faces = []
        for number, photo in enumerate(kept, start=1):
            try:
                faces.append(self.source_face(photo))
            except FaceweaveError as err:
                if len(photos) == 1 or isinstance(photo, (str, os.PathLike)):
                    raise  # the message names the file already
                raise type(err)(f"source photo {number}: {err}") from err
        swapper = self.engine.swapper(faces, self.swap_options)
        self._cached = (key, kept, swapper)
        return swapper

    def swap(
        self,
        frame: Frame,
        source: SourceLike | Sequence[SourceLike],
        target_face: Face | list[Face] | None = None,
    ) -> Frame:
        """Swap ``source`` onto ``target_face`` (the largest face when None) in ``frame``.

        ``source``: a path, a frame or a Face; or a list of them, several photos of
        the same person.
        """
        if target_face is None:
            target_face = get_one_face(frame)
            if target_face is None:
                raise NoFaceError("no face found in the target")
        return self.swapper(source).swap(frame, target_face)
