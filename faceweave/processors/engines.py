"""Which swap engine a front end runs, with its models loaded once for every swapper.

The command line (``swap``, ``live``), the Python API and the service
(``faceweave serve``) take the same settings: the embedded ``mesh`` engine (no model
files), or ``inswapper`` on ONNX models the user brings, either of them optionally
followed by a face enhancer (see :mod:`faceweave.processors.neural`), and either of them
optionally with a face occluder (see :mod:`faceweave.analysis.occluder`), a face
parser (see :mod:`faceweave.analysis.parser`) and face areas (see
:mod:`faceweave.analysis.areas`), each alone or together::

    engine = SwapEngine(EngineSettings(engine="inswapper",
                                       swapper_model=Path("inswapper_128.onnx"),
                                       embedder_model=Path("w600k_r50.onnx")))
    swapper = engine.swapper(source_faces, SwapOptions(fusion=0.8))
    out = swapper.swap(frame, faces)

A :class:`SwapEngine` loads each model once; every swapper it builds shares them
(onnxruntime sessions run one call at a time, see
:class:`~faceweave.analysis.onnx_backend.OnnxModel`), so a service's worker threads
hold one copy of the weights, not one each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from faceweave.analysis.areas import FaceAreas, checked_areas
from faceweave.analysis.occluder import FaceOccluder, Occluder, Occluders
from faceweave.analysis.onnx_backend import EXECUTION_PROVIDERS, check_model_file
from faceweave.analysis.parser import DEFAULT_REGIONS, FaceParser, checked_regions
from faceweave.errors import InputError, UsageError
from faceweave.processors.neural import (
    ENHANCER_BLEND,
    NEURAL_COLOR_MODES,
    AnySwapper,
    EnhancedSwapper,
    FaceEnhancer,
    NeuralSwapper,
    checked_enhancer_number,
    checked_pixel_boost,
    load_models,
    mesh_only_options,
)
from faceweave.processors.swap import PROFILE_KEEP_YAW, SwapOptions, Swapper
from faceweave.types import Face

__all__ = [
    "ENGINE_NAMES",
    "EngineSettings",
    "SwapEngine",
    "check_model_file",
    "swapper_advice",
    "target_advice",
]

# mesh: the embedded engine; inswapper: InsightFace's inswapper_128 or a model with its
# signature, on files the user brings.
ENGINE_NAMES = ("mesh", "inswapper")
# The settings that name model files.
_MODEL_FILES = (
    "swapper_model",
    "embedder_model",
    "enhancer_model",
    "occluder_model",
    "parser_model",
)


@dataclass(frozen=True)
class EngineSettings:
    """The swap engine and face enhancer a front end uses.

    Attributes:
        engine: ``mesh`` (embedded, no files) or ``inswapper``.
        swapper_model, embedder_model: the inswapper engine's ``.onnx`` files.
        pixel_boost: the inswapper engine's pixel boost, 1..4.
        enhancer_model: a face restoration model's ``.onnx`` file, for either engine.
        enhancer_blend: how much of the restored face is used, 0..1.
        enhancer_weight: CodeFormer's fidelity input, 0..1.
        occluder_model: a face occluder's ``.onnx`` file (XSeg), for either engine:
            what it finds in front of a face stays the target's.
        parser_model: a face parser's ``.onnx`` file (BiSeNet), for either engine:
            only ``mask_regions`` of a face are swapped, the rest (hair over it, a
            hat, glasses, regions left out) stays the target's.
        mask_regions: the regions the face parser keeps to swap (see
            :data:`~faceweave.analysis.parser.REGIONS`).
        mask_areas: the parts of each face swapped, from its mesh (no model; see
            :data:`~faceweave.analysis.areas.AREAS`); empty: the whole face.
        execution_provider: onnxruntime provider of the models (``cpu``, ``cuda``...).
    """

    engine: str = "mesh"
    swapper_model: Path | None = None
    embedder_model: Path | None = None
    pixel_boost: int = 1
    enhancer_model: Path | None = None
    enhancer_blend: float = ENHANCER_BLEND
    enhancer_weight: float = 1.0
    occluder_model: Path | None = None
    parser_model: Path | None = None
    mask_regions: tuple[str, ...] = DEFAULT_REGIONS
    mask_areas: tuple[str, ...] = ()
    execution_provider: str = "cpu"

    def __post_init__(self) -> None:
        # Paths may be given as strings (or any path-like), as the models' own classes take them.
        for name in _MODEL_FILES:
            value = getattr(self, name)
            if isinstance(value, (str, os.PathLike)) and not isinstance(value, Path):
                object.__setattr__(self, name, Path(os.fspath(value)))
        # The regions as they run: known names each once, in REGIONS' order, "all"
        # spelled out (what /healthz reports, and what settings compare by); others are
        # left for validated() to refuse.
        try:
            object.__setattr__(self, "mask_regions", checked_regions(self.mask_regions))
        except InputError:
            pass
        areas = self.mask_areas
        if areas is None or (isinstance(areas, (list, tuple)) and not areas):
            object.__setattr__(self, "mask_areas", ())  # the whole face
        else:
            try:
                object.__setattr__(self, "mask_areas", checked_areas(areas))
            except InputError:
                pass

    @property
    def neural(self) -> bool:
        """Whether the swap itself runs a model (not the embedded engine)."""
        return self.engine != "mesh"

    @property
    def embedded_only(self) -> bool:
        """The embedded engine with no enhancer, occluder or parser: no model file at all."""
        return not self.neural and all(
            getattr(self, name) is None
            for name in ("enhancer_model", "occluder_model", "parser_model")
        )

    @property
    def plain(self) -> bool:
        """The embedded engine as it comes (no model file, no face areas): sources may
        be handed on as faces, each front end's swapper built from them as it likes."""
        return self.embedded_only and not self.mask_areas

    def validated(self) -> EngineSettings:
        """``self`` when the settings are usable and the named files exist; else a
        :class:`UsageError` (or :class:`InputError` for a missing file)."""
        if self.engine not in ENGINE_NAMES:
            raise UsageError(
                f"unknown engine {self.engine!r}; available: {', '.join(ENGINE_NAMES)}"
            )
        if not isinstance(self.execution_provider, str) or (
            self.execution_provider not in EXECUTION_PROVIDERS
        ):
            raise UsageError(
                f"unknown execution provider {self.execution_provider!r}; available: "
                f"{', '.join(EXECUTION_PROVIDERS)}"
            )
        checked_pixel_boost(self.pixel_boost)
        checked_enhancer_number("blend", self.enhancer_blend, 1.0)  # numpy numbers too; refuses NaN
        checked_enhancer_number("weight", self.enhancer_weight, 1.0)
        for name in _MODEL_FILES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                raise InputError(f"{name} is a .onnx file's path, got {type(value).__name__}")
        if self.neural:
            for path in (self.swapper_model, self.embedder_model):
                if path is None:
                    raise UsageError(
                        f"the {self.engine} engine needs a swapper model and an embedder model"
                    )
                check_model_file(path)
        elif self.swapper_model or self.embedder_model or self.pixel_boost != 1:
            raise UsageError(
                "swapper model, embedder model and pixel boost are for the inswapper engine"
            )
        for path in (self.enhancer_model, self.occluder_model, self.parser_model):
            if path is not None:
                check_model_file(path)
        try:
            regions = checked_regions(self.mask_regions)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        if self.parser_model is None and set(regions) != set(DEFAULT_REGIONS):
            raise UsageError("mask regions are a face parser's: give its model too")
        if self.mask_areas:
            try:
                checked_areas(self.mask_areas)
            except InputError as exc:
                raise UsageError(str(exc)) from None
        elif not isinstance(self.mask_areas, tuple):
            raise UsageError(f"mask areas are a list of names, got {self.mask_areas!r}")
        return self

    def check_options(
        self,
        options: SwapOptions,
        *,
        name: Callable[[str], str] = str,
        sep: str = ", ",
        engine: str | None = None,
    ) -> None:
        """Raise :class:`UsageError` when ``options`` set something this engine does not
        use: a colour mode or an option of the embedded engine, for a neural engine.

        Args:
            name: how an option is named to the user (a command-line flag...).
            sep: between several names.
            engine: how the engine is named to the user (default "the inswapper engine").
        """
        if not self.neural:
            return
        label = engine or f"the {self.engine} engine"
        if options.color not in NEURAL_COLOR_MODES:
            given = name("color")  # a flag, an option's name, or a keyword ("color=")
            given += repr(options.color) if given.endswith("=") else f" {options.color}"
            raise UsageError(
                f"{given} is the mesh engine's; {label} takes {', '.join(NEURAL_COLOR_MODES)}"
            )
        unused = [name(option) for option in mesh_only_options(options)]
        if unused:
            kind = "option" if len(unused) == 1 else "options"
            raise UsageError(f"{sep.join(unused)}: the mesh engine's {kind}, not used by {label}")


class SwapEngine:
    """The models of some :class:`EngineSettings`, loaded once (now), and the swappers
    built on them.

    Raises:
        UsageError, InputError: unusable settings, a missing file.
        InputError: a model file that is not a model with the expected signature.
    """

    def __init__(self, settings: EngineSettings | None = None) -> None:
        if settings is not None and not isinstance(settings, EngineSettings):
            raise UsageError(
                f"SwapEngine takes EngineSettings (e.g. EngineSettings(engine=...)), "
                f"got {type(settings).__name__}"
            )
        self.settings = (settings or EngineSettings()).validated()
        s = self.settings
        self._models = (
            load_models(s.swapper_model, s.embedder_model, execution_provider=s.execution_provider)
            if s.neural and s.swapper_model is not None and s.embedder_model is not None
            else None
        )
        self.enhancer = (
            FaceEnhancer(
                s.enhancer_model,
                execution_provider=s.execution_provider,
                blend=s.enhancer_blend,
                weight=s.enhancer_weight,
            )
            if s.enhancer_model is not None
            else None
        )
        # What covers a face: an occluder's finds, a parser's regions left out, or both.
        found: list[Occluder] = []
        if s.occluder_model is not None:
            found.append(FaceOccluder(s.occluder_model, execution_provider=s.execution_provider))
        if s.parser_model is not None:
            found.append(
                FaceParser(
                    s.parser_model,
                    regions=s.mask_regions,
                    execution_provider=s.execution_provider,
                )
            )
        if s.mask_areas:
            found.append(FaceAreas(s.mask_areas))
        self.occluder: Occluder | None = (
            None if not found else found[0] if len(found) == 1 else Occluders(found)
        )

    @property
    def name(self) -> str:
        return self.settings.engine

    def swapper(
        self,
        source: Face | Sequence[Face],
        options: SwapOptions | Mapping[str, object] | None = None,
    ) -> AnySwapper:
        """A swapper for one source face (or several photos of one person) with these
        options (a mapping of them is checked as Swapper's keywords; None: the
        defaults), on the loaded models."""
        options = swap_options(options)
        base: Swapper | NeuralSwapper
        if self._models is None:
            # (Given at once: the source's photos are prepared with it, once.)
            base = Swapper(source, occluder=self.occluder, **options.__dict__)
        else:
            swap_model, embedder = self._models
            base = NeuralSwapper(
                source,
                swapper_model=swap_model,
                embedder_model=embedder,
                pixel_boost=self.settings.pixel_boost,
                **options.__dict__,
            )
            if self.occluder is not None:
                base = base.with_occluder(self.occluder)
        if self.enhancer is None:
            return base
        return EnhancedSwapper(base, self.enhancer.with_feather(options.feather))

    def swappers(
        self,
        sources: Sequence[Sequence[Face]],
        options: SwapOptions | Mapping[str, object] | None = None,
    ) -> list[AnySwapper]:
        """One swapper per source (each its photos of one person)."""
        options = swap_options(options)
        return [self.swapper(list(photos), options) for photos in sources]


def swap_options(options: SwapOptions | Mapping[str, object] | None) -> SwapOptions:
    """Swap options given as SwapOptions, a mapping of them (checked as Swapper's
    keywords) or None (the defaults).

    Raises:
        UsageError: a mapping's unknown name or bad value, or options of another type.
    """
    if options is None:
        return SwapOptions()
    if isinstance(options, SwapOptions):
        return options
    if isinstance(options, Mapping):
        return SwapOptions.from_kwargs(options)
    raise UsageError(f"options must be SwapOptions or a mapping, got {type(options).__name__}")


def _embedded(swapper: AnySwapper) -> Swapper | None:
    """The embedded engine's swapper behind ``swapper`` (under a face enhancer too), or
    None for a neural engine's."""
    plain = swapper.swapper if isinstance(swapper, EnhancedSwapper) else swapper
    return plain if isinstance(plain, Swapper) else None


def target_advice(swapper: AnySwapper, face: Face) -> str | None:
    """What a target face will keep of its own whatever the source (the embedded
    engine's note on a profile: see PROFILE_KEEP_YAW), or None."""
    if _embedded(swapper) is None or not isinstance(face, Face):
        return None
    yaw = abs(float(face.pose.yaw))
    if yaw < PROFILE_KEEP_YAW[0]:
        return None
    x0, y0, x1, y1 = (round(v) for v in face.bbox)
    return (
        f"the face at ({x0}, {y0})-({x1}, {y1}) is seen in profile (read as turned "
        f"{yaw:.0f} degrees): its far side, lower face and near eye stay its own, and only "
        "its near brow, temple and cheek take the source"
    )


def swapper_advice(swapper: AnySwapper) -> tuple[str, ...]:
    """What the source will show in the swaps (the embedded engine's notes on its photo:
    glasses carried, a turned face...); none for a neural engine."""
    plain = _embedded(swapper)
    return () if plain is None else tuple(plain.source.advice)
