"""faceweave: real-time face swap and face fusion on an ordinary CPU.

Frames are numpy ``uint8`` arrays of shape (H, W, 3) in BGR order.

Example:
    >>> import faceweave as fw
    >>> analyser = fw.FaceAnalyser()  # doctest: +SKIP
    >>> faces = analyser.get_faces(frame)  # doctest: +SKIP
    >>> out = fw.Swapper(source_face, fusion=0.7).swap(frame, faces)  # doctest: +SKIP
"""

# The names below load on first use (PEP 562), so that ``import faceweave`` and the
# command's start stay light: the command line installs its Ctrl-C handling before
# numpy, OpenCV and MediaPipe load (see ``faceweave.__main__``).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faceweave.analysis.analyser import FaceAnalyser
    from faceweave.analysis.areas import FaceAreas
    from faceweave.analysis.hands import Hand, MediaPipeHands
    from faceweave.analysis.occluder import FaceOccluder, Occluder, Occluders, Occlusion
    from faceweave.analysis.parser import FaceParser
    from faceweave.analysis.selection import face_distance, order_faces, select_faces
    from faceweave.api import FacePredictor, get_many_faces, get_one_face
    from faceweave.errors import (
        FaceweaveError,
        ImageTooLargeError,
        InputError,
        NoFaceError,
        OutputError,
        UnknownOptionError,
        UnsupportedFormatError,
        UsageError,
    )
    from faceweave.processors.debug import draw_debug
    from faceweave.processors.engines import EngineSettings, SwapEngine
    from faceweave.processors.frame_enhancer import FrameEnhancer
    from faceweave.processors.neural import EnhancedSwapper, FaceEnhancer, NeuralSwapper
    from faceweave.processors.swap import (
        BLEND_MODES,
        COLOR_MODES,
        SourceModel,
        SwapOptions,
        Swapper,
        merge_sources,
        prepare_source,
        source_advice,
    )
    from faceweave.runtime import tune_allocator
    from faceweave.types import Face, Frame, Pose

__version__ = "0.1.0"

_EXPORTS = {
    "FaceAnalyser": "faceweave.analysis.analyser",
    "FaceAreas": "faceweave.analysis.areas",
    "Hand": "faceweave.analysis.hands",
    "MediaPipeHands": "faceweave.analysis.hands",
    "FaceOccluder": "faceweave.analysis.occluder",
    "Occluder": "faceweave.analysis.occluder",
    "Occluders": "faceweave.analysis.occluder",
    "Occlusion": "faceweave.analysis.occluder",
    "FaceParser": "faceweave.analysis.parser",
    "face_distance": "faceweave.analysis.selection",
    "order_faces": "faceweave.analysis.selection",
    "select_faces": "faceweave.analysis.selection",
    "FacePredictor": "faceweave.api",
    "get_many_faces": "faceweave.api",
    "get_one_face": "faceweave.api",
    "FaceweaveError": "faceweave.errors",
    "ImageTooLargeError": "faceweave.errors",
    "InputError": "faceweave.errors",
    "NoFaceError": "faceweave.errors",
    "OutputError": "faceweave.errors",
    "UnknownOptionError": "faceweave.errors",
    "UnsupportedFormatError": "faceweave.errors",
    "UsageError": "faceweave.errors",
    "draw_debug": "faceweave.processors.debug",
    "EngineSettings": "faceweave.processors.engines",
    "SwapEngine": "faceweave.processors.engines",
    "FrameEnhancer": "faceweave.processors.frame_enhancer",
    "EnhancedSwapper": "faceweave.processors.neural",
    "FaceEnhancer": "faceweave.processors.neural",
    "NeuralSwapper": "faceweave.processors.neural",
    "BLEND_MODES": "faceweave.processors.swap",
    "COLOR_MODES": "faceweave.processors.swap",
    "SourceModel": "faceweave.processors.swap",
    "SwapOptions": "faceweave.processors.swap",
    "Swapper": "faceweave.processors.swap",
    "merge_sources": "faceweave.processors.swap",
    "prepare_source": "faceweave.processors.swap",
    "source_advice": "faceweave.processors.swap",
    "tune_allocator": "faceweave.runtime",
    "Face": "faceweave.types",
    "Frame": "faceweave.types",
    "Pose": "faceweave.types",
}

__all__ = [
    "BLEND_MODES",
    "COLOR_MODES",
    "EngineSettings",
    "EnhancedSwapper",
    "Face",
    "FaceAnalyser",
    "FaceAreas",
    "FaceEnhancer",
    "FaceOccluder",
    "FaceParser",
    "FacePredictor",
    "FaceweaveError",
    "Frame",
    "FrameEnhancer",
    "Hand",
    "ImageTooLargeError",
    "InputError",
    "MediaPipeHands",
    "NeuralSwapper",
    "NoFaceError",
    "Occluder",
    "Occluders",
    "Occlusion",
    "OutputError",
    "Pose",
    "SourceModel",
    "SwapEngine",
    "SwapOptions",
    "Swapper",
    "UnsupportedFormatError",
    "UnknownOptionError",
    "UsageError",
    "draw_debug",
    "face_distance",
    "get_many_faces",
    "get_one_face",
    "merge_sources",
    "order_faces",
    "prepare_source",
    "select_faces",
    "source_advice",
    "tune_allocator",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use and keep the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
