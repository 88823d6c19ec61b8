"""faceweave: real-time face swap and face fusion on an ordinary CPU.

Frames are numpy ``uint8`` arrays of shape (H, W, 3) in BGR order.

Example:
    >>> import faceweave as fw
    >>> analyser = fw.FaceAnalyser()  # doctest: +SKIP
    >>> faces = analyser.get_faces(frame)  # doctest: +SKIP
    >>> out = fw.Swapper(source_face, fusion=0.7).swap(frame, faces)  # doctest: +SKIP
"""

from faceweave.analysis.analyser import FaceAnalyser
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

__all__ = [
    "BLEND_MODES",
    "COLOR_MODES",
    "EngineSettings",
    "EnhancedSwapper",
    "Face",
    "FaceAnalyser",
    "FaceEnhancer",
    "FacePredictor",
    "FaceweaveError",
    "Frame",
    "ImageTooLargeError",
    "InputError",
    "NeuralSwapper",
    "NoFaceError",
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
