"""The engine's command-line options, shared by ``swap``, ``live`` and ``serve``.

:func:`add_engine_options` adds ``--engine``, the neural engine's model files and the
face enhancer's, the face occluder's and the face parser's; :func:`engine_settings`
turns them into an :class:`~faceweave.processors.engines.EngineSettings`, checking the
flags (and the files' presence) before any model loads. :func:`add_frame_enhancer_options`
and :func:`frame_enhancer` do the same for the upscaler of ``swap`` and ``serve``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from faceweave.analysis.areas import AREAS
from faceweave.analysis.parser import REGIONS
from faceweave.apps.argtypes import unit_interval
from faceweave.errors import UsageError
from faceweave.processors.engines import ENGINE_NAMES, EngineSettings
from faceweave.processors.frame_enhancer import FRAME_ENHANCER_BLEND, FrameEnhancer
from faceweave.processors.neural import ENHANCER_BLEND, PIXEL_BOOSTS
from faceweave.processors.swap import SwapOptions

__all__ = [
    "add_engine_options",
    "add_frame_enhancer_options",
    "engine_settings",
    "frame_enhancer",
    "frame_enhancer_blend",
    "option_flag",
]

_DEFAULT = EngineSettings()


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--swapper-model``, ``--embedder-model``, ``--pixel-boost``, the
    ``--enhancer-*`` options, ``--occluder-model``, ``--parser-model``,
    ``--mask-regions`` and ``--mask-areas`` (``--execution-provider`` is the caller's)."""
    engine = parser.add_argument_group(
        "neural engine",
        "ONNX models you bring (faceweave ships no weights); --execution-provider runs them",
    )
    engine.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="mesh",
        help="mesh: the embedded engine (no model files; default); inswapper: "
        "InsightFace's inswapper_128 or a model with its signature, given by "
        "--swapper-model and --embedder-model",
    )
    engine.add_argument(
        "--swapper-model", type=Path, metavar="FILE.onnx", help="the swap model (inswapper_128)"
    )
    engine.add_argument(
        "--embedder-model",
        type=Path,
        metavar="FILE.onnx",
        help="the ArcFace recogniser the swap model was trained with (w600k_r50)",
    )
    engine.add_argument(
        "--pixel-boost",
        type=int,
        choices=PIXEL_BOOSTS,
        default=None,
        metavar="N",
        help="align the face at N times the model's size and run the model on its N*N "
        "interleaved crops: more detail on a large face, N*N model runs (1-4; default 1)",
    )
    enhancer = parser.add_argument_group(
        "face enhancer",
        "an ONNX face restoration model you bring, on the swapped faces of either engine",
    )
    enhancer.add_argument(
        "--enhancer-model",
        type=Path,
        metavar="FILE.onnx",
        help="GFPGAN 1.4, GPEN-BFR-512, RestoreFormer or CodeFormer exported to ONNX",
    )
    enhancer.add_argument(
        "--enhancer-blend",
        type=unit_interval,
        default=None,
        metavar="0..1",
        help=f"how much of the restored face is used (default {ENHANCER_BLEND})",
    )
    enhancer.add_argument(
        "--enhancer-weight",
        type=unit_interval,
        default=None,
        metavar="0..1",
        help="CodeFormer's fidelity (its 'weight' input; default 1); other models have none",
    )
    occluder = parser.add_argument_group(
        "face occluder",
        "an ONNX face occluder you bring, for either engine",
    )
    occluder.add_argument(
        "--occluder-model",
        type=Path,
        metavar="FILE.onnx",
        help="DeepFaceLab's XSeg exported to ONNX (FaceFusion's xseg_1) or a model with its "
        "signature: what it finds in front of a face (a hand, a microphone, hair) stays the "
        "target's",
    )
    face_parser = parser.add_argument_group(
        "face parser",
        "an ONNX face parser you bring, for either engine",
    )
    face_parser.add_argument(
        "--parser-model",
        type=Path,
        metavar="FILE.onnx",
        help="BiSeNet on CelebAMask-HQ exported to ONNX (FaceFusion's bisenet_resnet_34) or a "
        "model with its signature: only --mask-regions of a face are swapped; hair over it, a "
        "hat and the regions left out stay the target's",
    )
    face_parser.add_argument(
        "--mask-regions",
        nargs="+",
        choices=(*REGIONS, "all"),
        default=None,
        metavar="REGION",
        help=f"the regions swapped, from {', '.join(REGIONS)} or all (default: all but glasses)",
    )
    areas = parser.add_argument_group(
        "face areas",
        "parts of each face to swap, from its mesh (no model; either engine)",
    )
    areas.add_argument(
        "--mask-areas",
        nargs="+",
        choices=AREAS,
        default=None,
        metavar="AREA",
        help=f"swap only these parts of each face, from {', '.join(AREAS)} (the rest stays "
        "the target's; default: the whole face)",
    )


def add_frame_enhancer_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--frame-enhancer-model`` and ``--frame-enhancer-blend``; ``what`` says which
    outputs the model upscales (the group's description)."""
    group = parser.add_argument_group(
        "frame enhancer", f"an ONNX super-resolution model you bring, on the whole output ({what})"
    )
    group.add_argument(
        "--frame-enhancer-model",
        type=Path,
        metavar="FILE.onnx",
        help="Real-ESRGAN x2/x4 exported to ONNX (FaceFusion's real_esrgan_x4) or a model with "
        "its signature: the output is upscaled by its scale",
    )
    group.add_argument(
        "--frame-enhancer-blend",
        type=unit_interval,
        default=None,
        metavar="0..1",
        help="how much of the model's frame is used; the rest is the frame resized by "
        f"Lanczos (default {FRAME_ENHANCER_BLEND:g})",
    )


def frame_enhancer_blend(args: argparse.Namespace) -> float:
    """The --frame-enhancer-blend asked for, or its default; a UsageError when it is
    given without --frame-enhancer-model."""
    if args.frame_enhancer_blend is None:
        return FRAME_ENHANCER_BLEND
    if args.frame_enhancer_model is None:
        raise UsageError("--frame-enhancer-blend is for --frame-enhancer-model FILE.onnx")
    return float(args.frame_enhancer_blend)


def frame_enhancer(args: argparse.Namespace) -> FrameEnhancer | None:
    """The --frame-enhancer-model, loaded (its file and signature checked before any
    image is read; its output size limit is --max-pixels), or None."""
    blend = frame_enhancer_blend(args)
    if args.frame_enhancer_model is None:
        return None
    return FrameEnhancer(
        args.frame_enhancer_model,
        blend=blend,
        execution_provider=args.execution_provider,
        max_megapixels=args.max_pixels / 1e6,
    )


def option_flag(name: str) -> str:
    """The command-line flag of a swap option (``mask_glasses`` is set off by one)."""
    return "--no-mask-glasses" if name == "mask_glasses" else "--" + name.replace("_", "-")


def engine_settings(args: argparse.Namespace, options: SwapOptions | None = None) -> EngineSettings:
    """The engine the flags ask for, checked (flags that go together, the model files
    present, and ``options`` used by that engine) before any model loads."""
    for flag, value in (
        ("--enhancer-blend", args.enhancer_blend),
        ("--enhancer-weight", args.enhancer_weight),
    ):
        if value is not None and args.enhancer_model is None:
            raise UsageError(f"{flag} is for --enhancer-model FILE.onnx")
    if args.mask_regions is not None and args.parser_model is None:
        raise UsageError("--mask-regions is for --parser-model FILE.onnx (a face parser)")
    neural = (
        ("--swapper-model", args.swapper_model),
        ("--embedder-model", args.embedder_model),
        ("--pixel-boost", args.pixel_boost),
    )
    if args.engine == "mesh":
        given = [flag for flag, value in neural if value is not None]
        if given:
            raise UsageError(f"{given[0]} is for the neural engine: add --engine inswapper")
    else:
        missing = [flag for flag, value in neural[:2] if value is None]
        if missing:
            raise UsageError(f"--engine {args.engine} needs {' and '.join(missing)} FILE.onnx")
    settings = EngineSettings(
        engine=args.engine,
        swapper_model=args.swapper_model,
        embedder_model=args.embedder_model,
        pixel_boost=args.pixel_boost or 1,
        enhancer_model=args.enhancer_model,
        enhancer_blend=(
            _DEFAULT.enhancer_blend if args.enhancer_blend is None else args.enhancer_blend
        ),
        enhancer_weight=(
            _DEFAULT.enhancer_weight if args.enhancer_weight is None else args.enhancer_weight
        ),
        occluder_model=args.occluder_model,
        parser_model=args.parser_model,
        mask_regions=_DEFAULT.mask_regions if args.mask_regions is None else args.mask_regions,
        mask_areas=() if args.mask_areas is None else tuple(args.mask_areas),
        execution_provider=args.execution_provider,
    ).validated()
    if options is not None:
        settings.check_options(options, name=option_flag, sep=" ", engine=f"--engine {args.engine}")
    return settings
