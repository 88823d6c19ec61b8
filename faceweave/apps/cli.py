"""The ``faceweave`` command: ``swap`` faces in images and videos, go ``live``, ``analyse``.

Thin by design: it parses arguments, reads and writes files through
:mod:`faceweave.io` and calls the engine's public API; no image maths here.

Exit codes (also in the README):

====  =============================================================================
0     success
1     error: unreadable or unsupported input, output not writable, internal error
2     usage: bad or conflicting arguments (argparse or :class:`UsageError`)
3     no face: none in the source, or none (matching) in a target
4     verify: the file carries no faceweave watermark
130   interrupted (Ctrl-C)
143   stopped by SIGTERM (129: SIGHUP), cleaned up as after Ctrl-C
====  =============================================================================

A batch (a directory as ``--target``) goes on after a failed file and exits
with the most severe code seen: 1 ranks above 3.

A video (``--target`` with a video extension) is written with its audio, and the
decoder's warnings (a truncated file, damaged data) are one ``faceweave: warning:``
line each; what decodes is processed. A source photo that will show in every swap
(a turned or tilted head, a small face, glasses) gets a ``faceweave: warning:`` line. A
live session ends cleanly on Ctrl-C, ``q`` in its window or after ``--duration``, and
exits 0.

Example:
    $ faceweave swap --source me.jpg --target photo.jpg --output out.png
    $ faceweave swap --source me.jpg --target photos/ --output swapped/ --quiet
    $ faceweave swap --source me.jpg --target clip.mp4 --output out.mp4
    $ faceweave swap --map a.jpg=person_a.jpg --map b.jpg=person_b.jpg -t group.mp4 -o out.mp4
    $ faceweave live --source me.jpg --output udp://127.0.0.1:27000 --stats stats.json
    $ faceweave analyse photo.jpg --json
    $ faceweave verify out.png

Outputs of ``swap`` carry a faint watermark and metadata labels saying they
are synthetic (``--no-watermark`` turns both off).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import math
import os
import secrets
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from faceweave.analysis.analyser import DETECTOR_ANGLES, photo_analyser
from faceweave.analysis.base import create_detector, detector_names
from faceweave.analysis.onnx_backend import EXECUTION_PROVIDERS
from faceweave.analysis.selection import ORDERS, SELECTORS, face_distance
from faceweave.apps.argtypes import (
    OnceAction,
    OnceBooleanAction,
    OnceFalseAction,
    OnceTrueAction,
    SidesAction,
    frame_rate,
    half_interval,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    seconds,
    unit_interval,
    whole_number,
)
from faceweave.apps.engine_args import (
    add_engine_options,
    add_frame_enhancer_options,
    engine_settings,
)
from faceweave.apps.engine_args import frame_enhancer as load_frame_enhancer
from faceweave.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NO_FACE,
    EXIT_OK,
    EXIT_USAGE,
    FaceweaveError,
    InputError,
    NoFaceError,
    OutputError,
    UnsupportedFormatError,
    UsageError,
)
from faceweave.io import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUALITY,
    HEIF_EXTENSIONS,
    READ_IMAGE_EXTENSIONS,
    check_output_path,
    keep_alpha,
    list_images,
    make_output_dir,
    output_path_for,
    read_image,
    read_image_and_alpha,
    same_file,
    write_bytes_atomic,
    write_image,
)
from faceweave.io.animation import (
    ANIMATION_EXTENSIONS,
    clip_extension,
    copy_clip,
    is_animation,
    open_clip,
    probe_clip,
)
from faceweave.io.image import list_files
from faceweave.io.video import VIDEO_EXTENSIONS, VIDEO_PRESETS, list_videos
from faceweave.processors.engines import (
    EngineSettings,
    SwapEngine,
    check_model_file,
    target_advice,
)
from faceweave.processors.frame_enhancer import FrameEnhancer
from faceweave.processors.neural import AnySwapper
from faceweave.processors.swap import (
    BLEND_MODES,
    COLOR_MODES,
    GAZE_MODES,
    STILL_BROW_SHAPE,
    SwapOptions,
)
from faceweave.runtime import STOP_SIGNALS, StopSignal, handling_signals

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from numpy.typing import NDArray

    import faceweave as fw
    from faceweave.pipeline.video_job import VideoJobStats
    from faceweave.types import Face, Frame

__all__ = ["build_parser", "main"]

PROG = "faceweave"

# --- defaults: the one place the command line's settings are chosen ---------------------------
# Swap settings default to the engine's own (SwapOptions), so the two cannot drift apart.
_SWAP_DEFAULTS = SwapOptions()
DEFAULT_FUSION = _SWAP_DEFAULTS.fusion
COLOR_CHOICES = COLOR_MODES
DEFAULT_COLOR = _SWAP_DEFAULTS.color
BLEND_CHOICES = BLEND_MODES
DEFAULT_BLEND = _SWAP_DEFAULTS.blend
GAZE_CHOICES = GAZE_MODES
DEFAULT_GAZE = _SWAP_DEFAULTS.gaze
FACE_SELECTOR_CHOICES = SELECTORS
DEFAULT_FACE_SELECTOR = "one"
DEFAULT_REFERENCE_DISTANCE = 0.6
FACE_ORDER_CHOICES = ORDERS
DEFAULT_FACE_ORDER = "large-small"
DEFAULT_MAX_FACES = 8
DEFAULT_MASK_MOUTH = _SWAP_DEFAULTS.mask_mouth
DEFAULT_MASK_LIPS = _SWAP_DEFAULTS.mask_lips
DEFAULT_MASK_EYES = _SWAP_DEFAULTS.mask_eyes
DEFAULT_MASK_GLASSES = _SWAP_DEFAULTS.mask_glasses
DEFAULT_MASK_HANDS = _SWAP_DEFAULTS.mask_hands
DEFAULT_MASK_PADDING = _SWAP_DEFAULTS.mask_padding
DEFAULT_FEATHER = _SWAP_DEFAULTS.feather
DEFAULT_DETAIL = _SWAP_DEFAULTS.detail
DEFAULT_LIGHT = _SWAP_DEFAULTS.light
DEFAULT_CREASES = _SWAP_DEFAULTS.creases
DEFAULT_SHAPE = _SWAP_DEFAULTS.shape
LIGHT_HELP = (
    "how far the target's light and shade (a side light, a shadowed cheek) replace the "
    f"source's: 0 keeps the source's shading, 1 takes the target's (default {DEFAULT_LIGHT}; "
    "not used with --color sh, whose relight takes the target's light whole)"
)
CREASES_HELP = (
    "how much of the creases the target's expression makes the swapped face takes: in "
    "videos and live its frown lines, crow's feet and a wrinkled nose; in a still image "
    "(no face at rest to tell those from wrinkles) the folds beside a smile wider than the "
    f"source's: 0 none, 1 all (default {DEFAULT_CREASES})"
)
SHAPE_HELP = (
    "how much of the source's face shape (nose, eyes, brows) the swap takes: 0 keeps "
    "the target's geometry, 1 the source's in full (default %(default)s; less on a "
    "target turned past 40 degrees as read, none past 50; a photo's brows take "
    f"{STILL_BROW_SHAPE} of that, the rest of theirs being its expression)"
)
DETAIL_HELP = (
    "match the face's fine detail to the target's: a crisper source's is toned down, "
    "and on a large face a softer source's is made up with a face-locked grain; 0 keeps "
    "the source's as it is, 1 matches the target's (default %(default)s)"
)
# Video (the encoder's own defaults live in faceweave.io.video: libx264, preset auto, CRF 18).
DEFAULT_REDETECT_EVERY = 10
DEFAULT_FRAME_SKIP = 1
DEFAULT_STATIC_THRESHOLD = 0.0  # live: off, a face that barely moves (lips) must not freeze
STATIC_HELP = (
    "reuse the previous frame's face geometry while the face region changes by less "
    "than this mean grey level (0 = off; 0.5-1 suits screen recordings and paused "
    "video); default %s"
)
MAX_FACES_HELP = "analyse at most N faces a frame, the largest (default %(default)s)"
ORDERED_MAX_FACES_HELP = MAX_FACES_HELP + "; --face-order then orders those"
# Live.
DEFAULT_LIVE_OUTPUT = "window"
LIVE_FACE_SELECTOR_CHOICES = ("one", "many", "reference")
DETECTOR_CHOICES = detector_names()
EXECUTION_PROVIDER_CHOICES = tuple(EXECUTION_PROVIDERS)
DEFAULT_LIVE_MAX_FACES = 4
# DEFAULT_MAX_PIXELS and DEFAULT_QUALITY come from faceweave.io, which applies them.


DEBUG_ENV = "FACEWEAVE_DEBUG"  # "1": print tracebacks with errors
EXIT_NOT_MARKED = 4  # verify: no watermark found
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader left

# Batch: how bad an exit code is; the batch exits with the worst one seen.
_SEVERITY = {EXIT_OK: 0, EXIT_NO_FACE: 1, EXIT_ERROR: 2, EXIT_USAGE: 3}


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return the process exit code.

    Args:
        argv: arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        0 on success, else the code of the error (see the module docstring).
    """
    from faceweave.runtime import tune_allocator

    tune_allocator()  # frame-sized buffers stay in the heap: no page faults per frame
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        # Called without argv, this is the process's command line: native logs stay off
        # until it exits (see _native_logs_silenced).
        with (
            _native_logs_silenced(restore=argv is not None),
            _stopped_by_signals(),
            # (the library's warnings, prefixed, once each, in every command but the
            # server's: a damaged video's decoder notes, advice on a poor source photo)
            contextlib.nullcontext()
            if getattr(args, "own_logging", False)
            else _library_warnings(),
        ):
            return command(args)
    except FaceweaveError as err:
        _print_traceback_if_debugging()
        _error(str(err))
        return err.exit_code
    except StopSignal as stop:
        print(f"{PROG}: stopped by {signal.Signals(stop.signum).name}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader left (| head): quiet, as other tools are
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as err:  # the file system's refusal (a name too long, a device error)
        _print_traceback_if_debugging()
        _error(_os_error_line(err))
        return EXIT_ERROR
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, no traceback
        _print_traceback_if_debugging()
        _internal_error(err)
        return EXIT_ERROR


def _stopped_by_signals() -> contextlib.AbstractContextManager[bool]:
    """The stop signals raise :class:`StopSignal` while a command runs (in the main
    thread); the previous handlers come back after it."""

    def stop(signum: int, frame: object) -> None:
        raise StopSignal(signum)

    return handling_signals(STOP_SIGNALS, stop)


def _os_error_line(err: OSError) -> str:
    """An OSError as one line: the file it names and the system's reason."""
    reason = err.strerror or _one_line(str(err)) or type(err).__name__
    return f"{err.filename}: {reason}" if err.filename else reason


LEAF_PROG = "parser_prog"  # the deepest sub-command's ``faceweave ...`` name, when parsed


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (the command's name, what is wrong, and
    where the options are listed) rather than its usage block first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An option that takes one value is a usage error given twice (``--fusion 0.5
        # --fusion 0.7``, ``-o a.mp4 -o b.mp4``), not the last one silently kept.
        self.register("action", None, OnceAction)
        self.register("action", "store", OnceAction)
        self.register("action", "store_true", OnceTrueAction)
        self.register("action", "store_false", OnceFalseAction)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        # The deepest sub-command's parser runs first to the end: it names itself, and
        # the parsers above it (whose namespaces take its values) leave that be.
        if not getattr(parsed, LEAF_PROG, None):
            setattr(parsed, LEAF_PROG, self.prog)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Unknown arguments are left over by the sub-command's parser and reported by
        the top one: name the sub-command's help, where its options are listed."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            leaf = getattr(parsed, LEAF_PROG, None) or self.prog
            self.exit(
                EXIT_USAGE,
                f"{PROG}: error: unrecognized arguments: {' '.join(extras)} (see {leaf} --help)\n",
            )
        return parsed


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``faceweave`` command."""
    parser = _Parser(
        prog=PROG,
        description="Swap faces in images and videos or live, or list the faces in an image.",
        epilog=f"Set {DEBUG_ENV}=1 to print tracebacks with errors.",
    )
    from faceweave import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_swap_parser(commands)
    _add_live_parser(commands)
    _add_analyse_parser(commands)
    _add_verify_parser(commands)
    from faceweave.apps.service_cli import add_service_commands

    add_service_commands(commands)
    return parser


def _add_swap_parser(commands: Any) -> None:
    swap = commands.add_parser(
        "swap",
        help="put the face of --source onto the faces of --target",
        description=(
            "Put the face of SRC onto the faces of TGT. TGT may be a directory: OUT is then "
            "a directory (created if needed), its images are processed, then its videos "
            "(each to a video of its name, with its audio and the video options); a failed "
            "file is reported on one line and the batch goes on. TGT may be a "
            f"video ({', '.join(VIDEO_EXTENSIONS)}): OUT is then a video, with TGT's audio, "
            "or an animated image (.gif, .webp, .apng). An animated GIF, WebP or PNG target "
            "is swapped frame by frame as a video is, and kept animated (or written as a "
            "video). "
            "--map SRC=REF (repeatable) replaces the person who looks like REF with SRC, "
            "so N sources go to N people."
        ),
    )
    swap.set_defaults(command=_run_swap)
    swap.add_argument(
        "--source",
        "-s",
        type=Path,
        nargs="+",
        action=OnceAction,
        again="several photos of one person go after one -s (-s a.jpg b.jpg); several "
        "people, each onto their own face: --map SRC=REF",
        metavar="SRC",
        help="the face to put in; several photos of the same person (-s front.jpg "
        "left.jpg) are merged, each part of the face taken from the photo that showed "
        "it best (the first leads: its light and colours)",
    )
    swap.add_argument(
        "--map",
        action="append",
        type=_mapping,
        default=None,
        metavar="SRC=REF",
        help="put SRC on the person who looks like REF (repeatable; replaces --source)",
    )
    swap.add_argument(
        "--target",
        "-t",
        required=True,
        type=Path,
        action=OnceAction,
        again="one image, video or folder a run (a folder takes many)",
        metavar="TGT",
        help="image, video, or a directory of them",
    )
    swap.add_argument(
        "--output",
        "-o",
        required=True,
        type=Path,
        action=OnceAction,
        metavar="OUT",
        help="image, directory or video",
    )
    _add_look_and_selection_options(swap, FACE_SELECTOR_CHOICES, ordered=True)
    swap.add_argument(
        "--reference-frame",
        type=non_negative_float,
        metavar="SECONDS",
        help="with a video target: the reference face is taken from its frame at SECONDS "
        "(in place of --reference-face IMG)",
    )
    swap.add_argument(
        "--reference-position",
        type=non_negative_int,
        metavar="N",
        help="which face of --reference-frame, counted from 0 in --face-order (default 0)",
    )
    swap.add_argument(
        "--face-order",
        choices=FACE_ORDER_CHOICES,
        default=DEFAULT_FACE_ORDER,
        help="the order of the faces found: --face-selector one swaps the first, "
        "--reference-position counts in it (default %(default)s)",
    )
    swap.add_argument(
        "--max-faces",
        type=positive_int,
        default=DEFAULT_MAX_FACES,
        metavar="N",
        help=ORDERED_MAX_FACES_HELP,
    )
    swap.add_argument(
        "--mask-mouth",
        action=OnceBooleanAction,
        default=DEFAULT_MASK_MOUTH,
        help="keep the target's open mouth",
    )
    swap.add_argument(
        "--mask-eyes",
        action=OnceBooleanAction,
        default=DEFAULT_MASK_EYES,
        help=(
            "always keep the target's eyes (they are kept anyway where the source's "
            "are closed or behind tinted lenses)"
        ),
    )
    swap.add_argument(
        "--mask-glasses",
        action=OnceBooleanAction,
        default=DEFAULT_MASK_GLASSES,
        help="keep the target's glasses frames and tinted lenses in front of the swapped face",
    )
    swap.add_argument(
        "--mask-padding",
        type=unit_interval,
        nargs="+",
        action=SidesAction,
        default=DEFAULT_MASK_PADDING,
        metavar="FRACTION",
        help=(
            "give the target back this much of the face from the top, right, bottom and "
            "left, as fractions of its height and width (1, 2 or 4 values, as in CSS): "
            "'0 0 0.2 0' keeps a bearded chin, '0.15 0 0 0' a fringe (default none)"
        ),
    )
    swap.add_argument(
        "--feather",
        type=half_interval,
        default=DEFAULT_FEATHER,
        help=(
            "width of the face mask's soft edge, as a fraction of the face, 0 to 0.5 "
            "(default %(default)s)"
        ),
    )
    swap.add_argument(
        "--skip-no-face",
        action="store_true",
        help="write a target without a face unchanged instead of failing",
    )
    swap.add_argument(
        "--skip-existing",
        action="store_true",
        help="a folder --target: leave the files whose output exists already (a batch run "
        "again after Ctrl-C goes on where it stopped; outputs are only ever whole). "
        "Without it, outputs are replaced",
    )
    _add_common_options(swap)
    add_engine_options(swap)
    add_frame_enhancer_options(swap, "images and videos")
    _add_watermark_option(swap)
    swap.add_argument(
        "--debug",
        type=Path,
        metavar="DEBUG_PNG",
        help="also write an overlay of the detected faces (a directory for a batch)",
    )
    swap.add_argument(
        "--quality",
        type=_quality,
        default=None,  # None when absent: an image-only option (a video's is --crf)
        help=f"JPEG/WebP/AVIF quality 1..100 (default {DEFAULT_QUALITY}; videos: --crf)",
    )
    swap.add_argument(
        "--quiet", "-q", action="store_true", help="no progress bar or notes (warnings stay)"
    )
    video = swap.add_argument_group("video targets")
    video.add_argument(
        "--encoder", type=_encoder, metavar="NAME", help=f"video encoder (default {_encoders()})"
    )
    video.add_argument(
        "--preset",
        choices=VIDEO_PRESETS,
        metavar="NAME",
        help="x264 speed preset, ultrafast ... veryslow (default auto: superfast up to 720p, "
        "ultrafast above)",
    )
    video.add_argument("--crf", type=_crf, metavar="0..51", help="quality, x264 scale (18)")
    video.add_argument("--fps", type=frame_rate, help="output frame rate (default: keep)")
    video.add_argument("--trim-start", type=non_negative_float, metavar="SECONDS")
    video.add_argument("--trim-end", type=positive_float, metavar="SECONDS")
    video.add_argument(
        "--no-audio",
        action="store_true",
        default=None,  # None when absent: a video-only option (see _VIDEO_OPTIONS)
        help="leave the target's sound out of the output",
    )
    video.add_argument(
        "--frame-skip",
        type=positive_int,
        metavar="N",
        help=f"analyse every N-th frame, track between (default {DEFAULT_FRAME_SKIP})",
    )
    video.add_argument(
        "--static-threshold",
        type=non_negative_float,
        metavar="GREY",
        help=STATIC_HELP
        % "a fraction of a level, which holds only a repeated frame (a 25 fps video "
        "converted to 30 fps repeats every fifth)",
    )
    video.add_argument(
        "--redetect-every",
        type=positive_int,
        metavar="N",
        help=f"run the face detector every N analysed frames (default {DEFAULT_REDETECT_EVERY})",
    )


def _add_live_parser(commands: Any) -> None:
    live = commands.add_parser(
        "live",
        help="swap faces live: camera or file -> window, virtual camera, stream or file",
        description=(
            "Swap the face of SRC onto a camera (or a video file played at its own pace) "
            "and show, send or record the result. Keys, in the window or (for the other "
            "outputs) the terminal: n next source, +/- fusion, e swap on/off, q quit (Esc "
            "too in the window). Ctrl-C stops cleanly."
        ),
    )
    live.set_defaults(command=_run_live)
    live.add_argument(
        "--source",
        "-s",
        required=True,
        action="append",
        nargs="+",
        type=Path,
        metavar="SRC",
        help="source face (repeatable: n switches); several photos after one --source are "
        "the same person, merged",
    )
    where = live.add_mutually_exclusive_group()
    where.add_argument(
        "--camera",
        type=_camera,
        metavar="INDEX|DEVICE|URL",
        help="default 0; a device (/dev/video2) or a network camera's URL",
    )
    where.add_argument(
        "--input", "-i", type=_input_file, metavar="VIDEO", help="a file at real time"
    )
    live.add_argument("--loop", action="store_true", help="play --input in a loop")
    live.add_argument(
        "--mirror",
        action="store_true",
        help="flip the picture left to right, as a mirror (a selfie view), before the swap",
    )
    live.add_argument(
        "--output",
        "-o",
        default=DEFAULT_LIVE_OUTPUT,
        metavar="OUT",
        help="window, virtualcam, udp://HOST:PORT, rtmp://HOST/APP/KEY or FILE (default window)",
    )
    live.add_argument(
        "--audio",
        metavar="DEVICE",
        help="record or stream sound with the picture (a FILE, udp:// or rtmp:// output): "
        "default (the usual microphone), input (the --input video's own sound, kept in "
        "step with its frames), or FORMAT:NAME as FFmpeg names input devices, "
        "e.g. alsa:default, pulse:default, alsa:hw:1,0, avfoundation::0, "
        "'dshow:audio=NAME', lavfi:sine=frequency=440 (a test tone)",
    )
    _add_look_and_selection_options(live, LIVE_FACE_SELECTOR_CHOICES, ordered=False)
    _add_watermark_option(live, "a recording (-o FILE)")
    live.add_argument(
        "--max-faces",
        type=positive_int,
        default=DEFAULT_LIVE_MAX_FACES,
        metavar="N",
        help=MAX_FACES_HELP,
    )
    live.add_argument(
        "--redetect-every", type=positive_int, default=DEFAULT_REDETECT_EVERY, metavar="N"
    )
    live.add_argument("--frame-skip", type=positive_int, default=DEFAULT_FRAME_SKIP, metavar="N")
    live.add_argument(
        "--static-threshold",
        type=non_negative_float,
        default=DEFAULT_STATIC_THRESHOLD,
        metavar="GREY",
        help=STATIC_HELP % "0",
    )
    live.add_argument("--width", type=positive_int, help="camera frame width")
    live.add_argument("--height", type=positive_int, help="camera frame height")
    live.add_argument("--fps", type=frame_rate, help="camera frame rate")
    live.add_argument("--duration", type=seconds, metavar="SECONDS", help="stop after")
    live.add_argument("--stats", type=Path, metavar="FILE.json", help="write the session's stats")
    live.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    _add_common_options(live)
    add_engine_options(live)


def _add_analyse_parser(commands: Any) -> None:
    analyse = commands.add_parser(
        "analyse",
        aliases=["analyze"],
        help="list the faces in an image or a video's frame",
        description="Print the faces found in FILE (an image, or a video's frame at --at): "
        "box, score, pose and 5 landmarks, numbered in --face-order.",
    )
    analyse.set_defaults(command=_run_analyse)
    analyse.add_argument("image", type=Path, metavar="FILE")
    analyse.add_argument(
        "--at",
        type=non_negative_float,
        metavar="SECONDS",
        help="for a video: the frame shown at this second (default 0), as swap's "
        "--reference-frame reads it",
    )
    analyse.add_argument(
        "--face-order",
        choices=FACE_ORDER_CHOICES,
        default=DEFAULT_FACE_ORDER,
        help="number the faces in this order: a face's number is its "
        "--reference-position for swap with the same --face-order (default %(default)s)",
    )
    analyse.add_argument("--json", action="store_true", help="print a JSON list")
    analyse.add_argument(
        "--landmarks", action="store_true", help="include the 478 mesh points in --json"
    )
    analyse.add_argument(
        "--debug", type=Path, metavar="OUT.png", help="write an overlay of the faces"
    )
    analyse.add_argument(
        "--hands",
        action="store_true",
        help="also list the hands round each face, as swap's --mask-hands finds them "
        "(and outline them in --debug)",
    )
    analyse.add_argument(
        "--max-faces",
        type=positive_int,
        default=DEFAULT_MAX_FACES,
        metavar="N",
        help=ORDERED_MAX_FACES_HELP,
    )
    _add_common_options(analyse)


def _add_verify_parser(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="report the provenance marks (watermark, labels) of an image or video",
        description=(
            "Look for faceweave's watermark and its metadata labels. "
            f"Exit 0 when the watermark is found, {EXIT_NOT_MARKED} when it is not."
        ),
    )
    verify.add_argument("file", type=Path)
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--max-pixels",
        type=positive_int,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="refuse larger images (default %(default)s; as swap's --max-pixels)",
    )
    verify.set_defaults(command=_run_verify)


def _run_verify(args: argparse.Namespace) -> int:
    from faceweave.provenance import format_report, verify

    report = verify(args.file, max_pixels=args.max_pixels)
    if args.json:
        w = report.watermark
        print(
            json.dumps(
                {
                    "file": str(args.file),
                    "kind": report.kind,
                    "size": list(report.size),
                    "watermark": {
                        "found": w.found,
                        "statement": w.statement,
                        "payload": w.payload,
                        "confidence": round(float(w.confidence), 4),
                        "bit_errors": w.bit_errors,
                        "coded_bits": w.coded_bits,
                        # (a video's: the frames sampled, and those decoded on their own)
                        **(
                            {"frames": w.frames, "frames_found": w.frames_found}
                            if report.kind == "video"
                            else {}
                        ),
                    },
                    "labels": report.labels,
                    # False: the labels name another job than the watermark (the text
                    # report's warning); None: nothing to compare.
                    "labels_agree": report.labels_agree,
                },
                indent=2,
            )
        )
    else:
        print(format_report(report))
    return EXIT_OK if report.marked else EXIT_NOT_MARKED


def _new_job_id() -> str:
    """A short id for one CLI run, carried by its outputs' watermark and labels."""
    return "c" + secrets.token_hex(3)


def _write_output(
    path: Path,
    frame: Frame,
    quality: int,
    job_id: str | None,
    alpha: NDArray[np.uint8] | None = None,
) -> None:
    """Write a swapped image; with a job id, watermarked and labelled (BMP: watermark
    only). ``alpha``: the target's transparency, kept where the format holds one (PNG,
    WebP, TIFF, AVIF; elsewhere the picture stays over white)."""
    if job_id is not None:
        from faceweave.provenance.labels import mark_for_saving

        frame, kept = mark_for_saving(frame, job_id, path, quality)
        if not kept:  # (a low --quality's artefacts over the mark: checked, made stronger)
            logging.getLogger(__name__).warning(
                "%s: the watermark does not survive --quality %d; a higher one keeps it",
                path,
                quality,
            )
    # (Marked before: shown over white, as a viewer shows it, the mark is whole.)
    frame = keep_alpha(frame, alpha, path)
    if job_id is None or path.suffix.lower() == ".bmp":  # BMP holds no metadata
        write_image(path, frame, quality=quality)
    else:
        from faceweave.provenance import image_labels, write_labeled_image

        write_labeled_image(path, frame, image_labels(job_id), quality=quality)


def _add_watermark_option(parser: argparse.ArgumentParser, what: str = "the output") -> None:
    parser.add_argument(
        "--no-watermark",
        action="store_true",
        help=f"do not mark {what} as synthetic (by default a faint watermark, fainter "
        "still on flat areas, and metadata labels say 'synthetic, faceweave'; see "
        "'faceweave verify')",
    )


def _add_look_and_selection_options(
    parser: argparse.ArgumentParser, selectors: tuple[str, ...], *, ordered: bool
) -> None:
    """What ``swap`` and ``live`` share: how the swap looks and which faces get it
    (``ordered``: the command has ``--face-order``)."""
    parser.add_argument(
        "--fusion",
        type=unit_interval,
        default=DEFAULT_FUSION,
        help="0: keep the target, 1: full swap (default %(default)s)",
    )
    parser.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default=DEFAULT_COLOR,
        help="colour match on skin: lct (linear covariance), rct (Reinhard Lab), sh "
        "(relight to the target's spherical-harmonics light), none (default %(default)s)",
    )
    parser.add_argument(
        "--blend",
        choices=BLEND_CHOICES,
        default=DEFAULT_BLEND,
        help="how the face meets the target at the mask's edge: multiband (Laplacian "
        "pyramid), poisson (seamless, about twice the cost), alpha (feathered) "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--gaze",
        choices=GAZE_CHOICES,
        default=DEFAULT_GAZE,
        help="where the swapped eyes look: target (they follow the target's eyes) or "
        "source (as in the source photo: one looking into the camera keeps eye contact) "
        "(default %(default)s)",
    )
    parser.add_argument("--detail", type=unit_interval, default=DEFAULT_DETAIL, help=DETAIL_HELP)
    # None when absent: given with --color sh it is a usage error (see _settle_defaults)
    parser.add_argument("--light", type=unit_interval, default=None, help=LIGHT_HELP)
    parser.add_argument("--creases", type=unit_interval, default=DEFAULT_CREASES, help=CREASES_HELP)
    parser.add_argument("--shape", type=unit_interval, default=DEFAULT_SHAPE, help=SHAPE_HELP)
    parser.add_argument(
        "--mask-lips",
        action=OnceBooleanAction,
        default=DEFAULT_MASK_LIPS,
        help="keep the target's own lips, as Deep-Live-Cam's mouth mask: the mouth moves "
        "and shapes crisply as the target's (a smiling source's lips, stretched thin, "
        "go soft on a talking mouth), at the cost of part of the source's likeness",
    )
    parser.add_argument(
        "--mask-hands",
        action=OnceBooleanAction,
        default=DEFAULT_MASK_HANDS,
        help="keep the target's hands in front of its faces (a chin on a fist, fingers at "
        "the cheek, a hand round a microphone), found by MediaPipe's hand landmarker round "
        "each face: 10-25 ms a face more",
    )
    parser.add_argument(
        "--face-selector",
        choices=selectors,
        default=None,
        help=f"which faces to replace (default {DEFAULT_FACE_SELECTOR}, "
        "or reference when --reference-face is given). In a video, one follows the "
        "person it chose: lost and found again, it is checked by identity; gone for "
        "half a second, or after a cut, "
        + (
            "the first face in --face-order. In a video file, many and reference also "
            "look for small faces beside a close one (about 1 ms a frame)"
            if ordered
            else "the largest face"
        ),
    )
    parser.add_argument(
        "--reference-face",
        type=Path,
        metavar="IMG",
        help="replace only the faces that look like the face in IMG (e.g. you, not a guest)",
    )
    parser.add_argument(
        "--reference-distance",
        type=non_negative_float,
        default=None,  # None when absent: without a reference it is a usage error
        help="largest identity distance to the reference face (default "
        f"{DEFAULT_REFERENCE_DISTANCE})",
    )


def _make_swappers(
    sources: Sequence[list[Face]], options: SwapOptions, settings: EngineSettings
) -> list[AnySwapper]:
    """One swapper per source (its photos), of the chosen engine, its faces restored by
    the enhancer when one is given; each model loads once, for all of them."""
    return SwapEngine(settings).swappers(sources, options)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--detector",
        choices=DETECTOR_CHOICES,
        default="mediapipe",
        help="face detector: mediapipe (embedded, default) or yunet (an ONNX file you "
        "supply with --detector-model)",
    )
    parser.add_argument(
        "--detector-model", type=Path, metavar="FILE.onnx", help="model file of an ONNX detector"
    )
    parser.add_argument(
        "--detector-angles",
        type=int,
        nargs="+",
        choices=DETECTOR_ANGLES,
        metavar="DEG",
        help="look for faces turned clockwise by these quarter turns (0 90 180 270; each "
        "costs one detector run per frame) in the target (not the source photos). Default: "
        "upright, and for images the other turns too when no clear upright face is found",
    )
    parser.add_argument(
        "--execution-provider",
        choices=EXECUTION_PROVIDER_CHOICES,
        default="cpu",
        help="onnxruntime provider for ONNX models (default cpu)",
    )
    parser.add_argument(
        "--max-pixels",
        type=positive_int,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="refuse larger images (default %(default)s)",
    )


# --- swap ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SwapJob:
    """What every target image of one ``swap`` run goes through.

    ``swappers`` holds one swapper per source; with ``map_references`` (``--map``)
    source ``i`` goes to the face nearest ``map_references[i]``, else source 0 goes
    to the faces the selector picks.
    """

    analyser: fw.FaceAnalyser
    swappers: list[AnySwapper]
    selector: str
    reference_face: Face | None
    reference_distance: float
    face_order: str
    skip_no_face: bool
    max_pixels: int
    quality: int
    quiet: bool
    map_references: list[Face] | None = None
    watermark: str | None = None  # a job id: mark outputs (watermark + labels)
    frame_enhancer: FrameEnhancer | None = None  # --frame-enhancer-model: outputs upscaled

    def run(
        self,
        target_path: Path,
        output_path: Path,
        debug_path: Path | None,
        target: tuple[Frame, NDArray[np.uint8] | None] | None = None,
    ) -> str | None:
        """Swap the faces of one target image (``target``: it and its transparency,
        read already) and write the result; a transparent PNG, WebP, TIFF or AVIF stays so.

        Returns:
            A note for the user (a line each) when the target was written unchanged, a
            face swapped is seen in profile (little of it is swapped) or a --map entry
            matched no face, else ``None``.
        """
        import faceweave as fw
        from faceweave.pipeline.tracking import TrackedFace
        from faceweave.pipeline.video_job import FaceRouter, SwapTarget, swap_targets

        if target is None:
            target = read_image_and_alpha(target_path, max_pixels=self.max_pixels)
        target_frame, alpha = target
        if self.frame_enhancer is not None:  # too large once upscaled: before any work
            _check_enhanced_size(self.frame_enhancer, target_path, target_frame.shape)
        faces = _faces_in(self.analyser, target_frame, target_path)
        targets: list[SwapTarget]
        if self.map_references is not None:
            router = FaceRouter(
                "map", references=self.map_references, max_distance=self.reference_distance
            )
            targets = router.route(
                [TrackedFace(i, face, 0, 0) for i, face in enumerate(faces)], recheck=True
            )
        else:
            selected = fw.select_faces(
                faces,
                selector=self.selector,
                reference=self.reference_face,
                max_distance=self.reference_distance,
                order=self.face_order,
            )
            targets = [SwapTarget(face, 0, i) for i, face in enumerate(selected)]
        # With --mask-hands, the hands round the faces swapped, found once for every
        # source's swapper (and shown on the --debug overlay).
        hands = (
            self.swappers[0].hands_near(target_frame, [t.face for t in targets])
            if targets and any(s.options.mask_hands for s in self.swappers)
            else None
        )
        # With --occluder-model or --parser-model and --debug, what they find in front of
        # (or leave out of) the faces swapped, found once for the overlay and the swap.
        swapped = [t.face for t in targets]
        occlusions = (
            self.swappers[0].occlusions(target_frame, swapped)
            if debug_path is not None and targets and self.swappers[0].occluder is not None
            else None
        )
        if debug_path is not None:
            landmarks = [hand.landmarks for hand in hands or []]
            found = [] if occlusions is None else list(zip(swapped, occlusions, strict=True))
            covers = [
                cover
                for face, occlusion in found
                if occlusion is not None
                and (cover := occlusion.cover(face, target_frame.shape)) is not None
            ]
            write_image(
                debug_path,
                fw.draw_debug(target_frame, swapped, hands=landmarks, covers=covers),
            )
        references = self.map_references or (
            [self.reference_face] if self.reference_face is not None else []
        )
        unmatched = [
            (index, reference)
            for index, reference in enumerate(references)
            if faces and not any(t.source_index == index for t in targets)
        ]
        if not targets:
            what = "no face matching the reference" if faces else "no face"
            if not self.skip_no_face:
                nearest = self._nearest(faces, unmatched)  # (no face was taken)
                raise NoFaceError(f"{target_path}: {what} found in the target{nearest}")
            if self.frame_enhancer is not None:  # every output upscaled alike
                enhanced, alpha = self.frame_enhancer.enhance_with_alpha(target_frame, alpha)
                _write_output(output_path, enhanced, self.quality, self.watermark, alpha)
                return f"{target_path}: {what} found; written upscaled, not swapped"
            unchanged = keep_alpha(target_frame, alpha, output_path)
            write_image(output_path, unchanged, quality=self.quality)
            return f"{target_path}: {what} found; written unchanged"
        output_frame = swap_targets(target_frame, targets, self.swappers, hands, occlusions)
        if self.frame_enhancer is not None:
            output_frame, alpha = self.frame_enhancer.enhance_with_alpha(output_frame, alpha)
        _write_output(output_path, output_frame, self.quality, self.watermark, alpha)
        notes = [
            f"{target_path}: {advice}"
            for t in targets
            if (advice := target_advice(self.swappers[t.source_index], t.face)) is not None
        ]
        if unmatched:  # --map: the entries that found nobody, while others were swapped
            entries = ", ".join(str(index + 1) for index, _ in unmatched)
            taken = {id(t.face) for t in targets}
            nearest = self._nearest([f for f in faces if id(f) not in taken], unmatched)
            notes.append(f"{target_path}: --map entry {entries} matched no face{nearest}")
        return "\n".join(notes) or None

    def _nearest(self, faces: list[Face], unmatched: list[tuple[int, Face]]) -> str:
        """How near the nearest of ``faces`` (those not swapped) came to the references
        that matched none, for the message: a turned face of the right person is often
        just over the threshold."""
        if not faces or not unmatched or not all(f.has_embedding for f in faces):
            return ""
        nearest = min(face_distance(face, ref) for face in faces for _, ref in unmatched)
        return (
            f" (the nearest face is at identity distance {nearest:.2f}, over "
            f"--reference-distance {self.reference_distance:g})"
        )


@dataclass(frozen=True)
class _Sources:
    """The faces asked for on the command line: paths, not yet analysed."""

    sources: list[list[Path]]  # per identity: its photos (several with -s a.jpg b.jpg)
    references: list[Path]  # one for --reference-face, one per source for --map
    selector: str  # one, many, reference or map
    # --reference-frame: the reference is the target video's face at this second
    reference_frame: float | None = None

    @property
    def paths(self) -> list[Path]:
        """Every image named: the sources' photos, then the references."""
        return [*(path for photos in self.sources for path in photos), *self.references]


def _resolve_sources(args: argparse.Namespace) -> _Sources:
    frame = getattr(args, "reference_frame", None)
    if getattr(args, "reference_position", None) is not None and frame is None:
        raise UsageError("--reference-position is for --reference-frame")
    if args.map:
        if args.source is not None or args.reference_face is not None or args.face_selector:
            raise UsageError("--map replaces --source, --reference-face and --face-selector")
        if frame is not None:
            raise UsageError("--map takes its references as REF images, not --reference-frame")
        return _Sources([[s] for s, _ in args.map], [r for _, r in args.map], "map")
    if args.source is None:
        raise UsageError("give --source SRC, or --map SRC=REF (repeatable)")
    if frame is not None:
        if args.reference_face is not None:
            raise UsageError("give --reference-face IMG or --reference-frame SECONDS, not both")
        if args.face_selector not in (None, "reference"):
            raise UsageError(
                f"--reference-frame is only used with --face-selector reference, "
                f"not {args.face_selector}"
            )
        return _Sources([list(args.source)], [], "reference", reference_frame=frame)
    selector = _resolve_selector(args.face_selector, args.reference_face)
    references = [args.reference_face] if selector == "reference" else []
    return _Sources([list(args.source)], references, selector)


def _load_faces(
    analyser: fw.FaceAnalyser, paths: list[Path], role: str, max_pixels: int
) -> list[Face]:
    """The largest face of each image (each image is read once even when repeated)."""
    by_path: dict[Path, Face] = {}
    for path in paths:
        if path not in by_path:
            frame = read_image(path, max_pixels=max_pixels)
            by_path[path] = _first_face(analyser, frame, path, role)
    return [by_path[path] for path in paths]


def _load_source_photos(
    analyser: fw.FaceAnalyser, sources: list[list[Path]], max_pixels: int
) -> list[list[Face]]:
    """Per identity, the largest face of each of its photos."""
    return [_load_faces(analyser, photos, "source", max_pixels) for photos in sources]


_LOSSY_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".webp", ".avif")


def _check_quality_used(args: argparse.Namespace, outputs: list[Path]) -> None:
    """``--quality`` where no output is JPEG, WebP or AVIF is a usage error: it would do
    nothing."""
    if args.quality is not None and not any(
        path.suffix.lower() in _LOSSY_IMAGE_EXTENSIONS for path in outputs
    ):
        raise UsageError(
            "--quality is for JPEG, WebP and AVIF outputs (PNG, BMP and TIFF are lossless)"
        )


def _check_execution_provider(args: argparse.Namespace, engine: EngineSettings | None) -> None:
    """A GPU provider where no ONNX model runs is a usage error: it would do nothing."""
    runs_onnx = (
        args.detector != "mediapipe"
        or (engine is not None and not engine.embedded_only)
        or getattr(args, "frame_enhancer_model", None) is not None
    )
    if args.execution_provider != "cpu" and not runs_onnx:
        raise UsageError(
            f"--execution-provider {args.execution_provider} runs ONNX models (--engine "
            "inswapper, --enhancer-model, --occluder-model, --parser-model, "
            "--frame-enhancer-model, --detector yunet); the embedded engine and MediaPipe run "
            "on the CPU"
        )


def _detector(args: argparse.Namespace) -> dict[str, Any]:
    """FaceAnalyser arguments for the chosen detector, checked before any image is read
    (an ONNX detector's file is loaded once on the CPU to see that it is one)."""
    angles: dict[str, Any] = (
        {} if args.detector_angles is None else {"detector_angles": tuple(args.detector_angles)}
    )
    if args.detector == "mediapipe":
        if args.detector_model is not None:
            raise UsageError("--detector-model is for an ONNX detector: add --detector yunet")
        return angles
    if args.detector_model is None:
        raise UsageError(f"--detector {args.detector} needs --detector-model FILE.onnx")
    check_model_file(args.detector_model)
    # Loaded once now: a file that is no model of the detector's kind is its own error,
    # not one of the first image the analyser would have loaded it for. (On the CPU: a
    # GPU provider's session, TensorRT's above all, can take long to build.)
    create_detector(args.detector, model_path=args.detector_model, execution_provider="cpu")
    return {
        "detector": args.detector,
        "detector_model": args.detector_model,
        "execution_provider": args.execution_provider,
        **angles,
    }


def _check_enhanced_size(
    enhancer: FrameEnhancer, target_path: Path, shape: tuple[int, ...]
) -> None:
    """An InputError naming the target and --max-pixels when its output, upscaled, would
    be over the limit."""
    try:
        enhancer.check_size(shape[1], shape[0])
    except InputError as exc:
        raise type(exc)(f"{target_path}: {exc} (--max-pixels)") from None


def _run_swap(args: argparse.Namespace) -> int:
    wanted = _resolve_sources(args)
    _settle_defaults(args, wanted.selector)
    options = SwapOptions.from_settings(args)  # before any model loads
    engine = engine_settings(args, options)
    _check_execution_provider(args, engine)
    frame_enhancer = load_frame_enhancer(args)
    target_path: Path = args.target
    output_path: Path = args.output
    if _is_clip(target_path):  # a video, or an animated image (GIF, WebP, APNG)
        return _run_swap_video(args, wanted, options, engine, frame_enhancer)
    batch = target_path.is_dir()
    # A folder's videos are swapped after its images, each to a video of its name.
    videos = list_videos(target_path) if batch else []
    if batch:  # and its animated images (GIF, animated WebP or PNG), as videos
        animated = [p for p in list_files(target_path, ANIMATION_EXTENSIONS) if _is_clip(p)]
        videos = sorted([*videos, *animated])
    video_only = [name for name in _VIDEO_OPTIONS if getattr(args, name) is not None]
    if video_only and not videos:
        flag = "--" + video_only[0].replace("_", "-")
        raise UsageError(f"{flag} is for video targets ({', '.join(VIDEO_EXTENSIONS)})")
    named = _named_inputs(wanted)
    # Check everything cheap before loading models or decoding anything.
    video_plan: list[tuple[Path, Path]] = []
    if batch:
        if wanted.reference_frame is not None:
            raise UsageError(
                "--reference-frame takes the face from one video: give a video --target"
            )
        moving = set(videos)
        targets = [path for path in list_images(target_path) if path not in moving]
        if not targets and not videos:
            kinds = ", ".join((*READ_IMAGE_EXTENSIONS, *VIDEO_EXTENSIONS, ".gif"))
            raise InputError(f"{target_path}: no images or videos ({kinds})")
        if same_file(output_path, target_path):
            raise UsageError("--output must not be the --target directory")
        if args.debug is not None:
            if same_file(args.debug, target_path):
                raise UsageError("--debug must not be the --target directory")
            if same_file(args.debug, output_path):
                raise UsageError("--debug must not be the --output directory")
        plan = _batch_plan(targets, output_path, args.debug)
        for _, output, overlay in plan:
            writes = [("--output", output)] + ([("--debug", overlay)] if overlay else [])
            _refuse_overwriting(writes, named)
        if plan or not videos:  # a folder of videos alone says so below
            _check_quality_used(args, [output for _, output, _ in plan])
        video_plan = [(video, output_path / video.name) for video in videos]
        ignored = _not_swapped(target_path, [*targets, *videos])
        if ignored and not args.quiet:
            _note(f"left out, not images or videos: {_listed(ignored)}")
        done_before = 0
        if args.skip_existing:
            total = len(plan) + len(video_plan)
            plan = [entry for entry in plan if not entry[1].exists()]
            video_plan = [entry for entry in video_plan if not entry[1].exists()]
            done_before = total - len(plan) - len(video_plan)
            if done_before and not args.quiet:
                _note(f"{done_before} of {total} outputs exist already: left as they are")
        for _, output in video_plan:
            _refuse_overwriting([("--output", output)], named)
            _check_encoder_fits(output, args)
        _check_trim_order(args)
        # Folders this run makes are removed again if it ends with nothing in them.
        made = [p for p in (output_path, args.debug) if p is not None and not p.exists()]
        make_output_dir(output_path)  # not writable: fail before any model loads
        if args.debug is not None:
            make_output_dir(args.debug)
    else:
        if args.skip_existing:
            raise UsageError("--skip-existing is for a folder --target")
        made = []
        if not target_path.exists():
            raise InputError(f"{target_path}: no such file")
        if output_path.is_dir():
            output_path = output_path / target_path.name
        if output_path.suffix.lower() in VIDEO_EXTENSIONS:
            raise UsageError(
                f"{target_path} is read as an image (videos: {', '.join(VIDEO_EXTENSIONS)}); "
                f"--output {output_path.name} is for a video target"
            )
        if not output_path.suffix and not output_path.exists():
            # ("unsupported image format (no extension)" had said nothing of a folder
            # name with a slash: the folder must exist.)
            raise UsageError(
                f"--output {output_path}: no such folder, and no image extension for a file "
                f"(.png, .jpg, ...)"
            )
        _output_usage(check_output_path, output_path, "--output")
        _check_quality_used(args, [output_path])
        writes = [("--output", output_path)]
        if args.debug is not None:
            _output_usage(check_output_path, args.debug, "--debug")
            writes.append(("--debug", args.debug))
        _refuse_overwriting(writes, [("the --target image", target_path), *named])
    try:
        for path in wanted.paths:  # unreadable inputs fail before models load
            read_image(path, max_pixels=args.max_pixels)
        # The target image too (it had been read after the source's analysis and its
        # advice: a truncated target failed after a warning about the source).
        target = None if batch else read_image_and_alpha(target_path, max_pixels=args.max_pixels)

        analyser, photos = _photo_analysers(args)
        source_faces = _load_source_photos(photos, wanted.sources, args.max_pixels)
        reference_faces = _load_faces(photos, wanted.references, "reference", args.max_pixels)
        swappers = _make_swappers(source_faces, options, engine)  # (advice: before any output)
        job = _SwapJob(
            analyser=analyser,
            swappers=swappers,
            selector=wanted.selector,
            reference_face=reference_faces[0] if wanted.selector == "reference" else None,
            reference_distance=args.reference_distance,
            face_order=args.face_order,
            skip_no_face=args.skip_no_face,
            max_pixels=args.max_pixels,
            quality=DEFAULT_QUALITY if args.quality is None else args.quality,
            quiet=args.quiet,
            map_references=reference_faces if wanted.selector == "map" else None,
            watermark=None if args.no_watermark else _new_job_id(),
            frame_enhancer=frame_enhancer,
        )
        if not batch:
            note = job.run(target_path, output_path, args.debug, target)
            for line in [] if note is None or args.quiet else note.splitlines():
                _note(line)
            return EXIT_OK
        codes = _run_batch(job, plan) if plan else []
        for video, output in video_plan:
            codes.append(_run_batch_video(args, job, video, output))
        if not args.quiet:
            _note(_batch_summary(codes, output_path, done_before))
        worst = EXIT_OK
        for code in codes:
            worst = _worse(worst, code)
        return worst
    finally:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


def _is_clip(path: Path) -> bool:
    """Whether ``path`` is swapped as a video: a video file, or an animated image."""
    if path.is_dir():
        return False
    return path.suffix.lower() in VIDEO_EXTENSIONS or is_animation(path)


def _worse(code: int, other: int) -> int:
    """The exit code that says more of what went wrong (usage > error > no face > ok)."""
    return max(code, other, key=lambda c: _SEVERITY.get(c, _SEVERITY[EXIT_ERROR]))


def _check_trim_order(args: argparse.Namespace) -> None:
    if args.trim_start is not None and args.trim_end is not None:
        if args.trim_end <= args.trim_start:
            raise UsageError("--trim-end must be after --trim-start")


def _check_trim_start(args: argparse.Namespace, target_path: Path, duration: float) -> None:
    if args.trim_start is not None and 0 < duration <= args.trim_start:
        raise UsageError(
            f"--trim-start {args.trim_start:g} s is past the end of {target_path} "
            f"({duration:.2f} s long)"
        )


def _run_batch_video(args: argparse.Namespace, job: _SwapJob, video: Path, output: Path) -> int:
    """One video of a folder batch: its failure is one line, and the batch goes on."""
    try:
        _check_trim_start(args, video, probe_clip(video).duration)
        references = (
            job.map_references
            if job.map_references is not None
            else [job.reference_face]
            if job.reference_face is not None
            else []
        )
        return _video_job(
            args,
            job.swappers,
            references,
            job.selector,
            video,
            output,
            frame_enhancer=job.frame_enhancer,
        )
    except FaceweaveError as err:
        _print_traceback_if_debugging()
        _error(_naming(video, str(err)))
        # The options fit the batch (checked before it began): what one of its videos
        # refuses (a --trim-start past its end) is that file's error, not a usage error.
        return EXIT_ERROR if isinstance(err, UsageError) else err.exit_code
    except OSError as err:
        _print_traceback_if_debugging()
        _error(_naming(video, _os_error_line(err)))
        return EXIT_ERROR
    except Exception as err:  # noqa: BLE001 - one bad file must not end the batch
        _print_traceback_if_debugging()
        _internal_error(err, video)
        return EXIT_ERROR


def _named_inputs(wanted: _Sources) -> list[tuple[str, Path]]:
    """The images named as sources and references, each with what it is."""
    mapped = wanted.selector == "map"
    named = [
        ("a --map source" if mapped else "a --source image", path)
        for photos in wanted.sources
        for path in photos
    ]
    what = "a --map reference" if mapped else "the --reference-face image"
    return named + [(what, path) for path in wanted.references]


def _refuse_overwriting(writes: list[tuple[str, Path]], inputs: list[tuple[str, Path]]) -> None:
    """A usage error, before anything is written, where an output would replace an input
    or another output of the same command.

    Args:
        writes: (option, path) of each file the command writes.
        inputs: (what it is, path) of each file it reads.
    """
    for number, (flag, written) in enumerate(writes):
        for earlier, other in writes[:number]:
            if same_file(written, other):
                raise UsageError(f"{flag} must not be the {earlier} file")
        for what, read in inputs:
            if same_file(written, read):
                raise UsageError(f"{flag} {written} would overwrite {what}, {read}")


def _batch_plan(
    targets: list[Path], output_dir: Path, debug_dir: Path | None
) -> list[tuple[Path, Path, Path | None]]:
    """(target, output, overlay or None) per target of a batch. An overlay is named by
    its target's stem as PNG, or by its whole name as PNG where two targets share a stem
    (``a.jpg`` and ``a.png``), so no overlay replaces another. A HEIC photo's output is
    a JPEG of its stem, or of its whole name where another target's output has that
    name (``IMG_1.HEIC`` beside ``IMG_1.JPG`` gives ``IMG_1.HEIC.jpg``)."""
    stems: dict[str, int] = {}
    for target in targets:
        stems[target.stem] = stems.get(target.stem, 0) + 1
    outputs = [output_path_for(target, output_dir) for target in targets]
    # (Case-blind: on macOS and Windows IMG_1.jpg and IMG_1.JPG are one file.)
    names = collections.Counter(output.name.casefold() for output in outputs)
    outputs = [
        output_dir / f"{target.name}{output.suffix}"
        if target.suffix.lower() in HEIF_EXTENSIONS and names[output.name.casefold()] > 1
        else output
        for target, output in zip(targets, outputs, strict=True)
    ]
    return [
        (
            target,
            output,
            None
            if debug_dir is None
            else debug_dir / f"{target.stem if stems[target.stem] == 1 else target.name}.png",
        )
        for target, output in zip(targets, outputs, strict=True)
    ]


# argparse destinations of the options that only mean something for a video target
_VIDEO_OPTIONS = (
    "reference_frame",
    "no_audio",
    "encoder",
    "preset",
    "crf",
    "fps",
    "trim_start",
    "trim_end",
    "frame_skip",
    "static_threshold",
    "redetect_every",
)


def _run_swap_video(
    args: argparse.Namespace,
    wanted: _Sources,
    options: SwapOptions,
    engine: EngineSettings,
    frame_enhancer: FrameEnhancer | None = None,
) -> int:
    target_path: Path = args.target
    output_path: Path = args.output
    if args.debug is not None:
        raise UsageError("--debug is for image targets")
    if output_path.is_dir():
        output_path = output_path / target_path.name
    if args.quality is not None and output_path.suffix.lower() != ".webp":
        # (An animated WebP's is its --quality, as a still WebP's.)
        raise UsageError(
            "--quality is for image targets and animated WebP outputs (a video's is --crf)"
        )
    _output_usage(clip_extension, output_path, "--output")
    _check_encoder_fits(output_path, args)
    if not output_path.parent.is_dir():
        raise OutputError(f"{output_path}: directory {output_path.parent} does not exist")
    if same_file(output_path, target_path):
        raise UsageError("--output must not be the --target video")
    _refuse_overwriting([("--output", output_path)], _named_inputs(wanted))
    _check_trim_order(args)
    # Missing file, no video stream, unknown codec: before models load.
    probed = probe_clip(target_path)
    duration = probed.duration
    if frame_enhancer is not None:
        _check_enhanced_size(frame_enhancer, target_path, (probed.height, probed.width))
    _check_trim_start(args, target_path, duration)
    if wanted.reference_frame is not None and 0 < duration <= wanted.reference_frame:
        raise UsageError(
            f"--reference-frame {wanted.reference_frame:g} s is past the end of {target_path} "
            f"({duration:.2f} s long)"
        )
    for path in wanted.paths:
        read_image(path, max_pixels=args.max_pixels)

    # Stills (sources, references, the reference frame) as an image target's faces are
    # found, small and cut ones too; the frames in video mode.
    analyser, photos = _photo_analysers(args)
    source_faces = _load_source_photos(photos, wanted.sources, args.max_pixels)
    reference_faces = _load_faces(photos, wanted.references, "reference", args.max_pixels)
    if wanted.reference_frame is not None:
        reference_faces = [
            _face_in_video(
                analyser,
                target_path,
                wanted.reference_frame,
                args.reference_position or 0,
                args.face_order,
            )
        ]
    sources: Sequence[Any] = source_faces
    if not engine.plain:
        sources = _make_swappers(source_faces, options, engine)
    return _video_job(
        args,
        sources,
        reference_faces,
        wanted.selector,
        target_path,
        output_path,
        options,
        frame_enhancer,
    )


def _video_job(
    args: argparse.Namespace,
    sources: Sequence[Any],
    references: Sequence[Face],
    selector: str,
    target_path: Path,
    output_path: Path,
    options: SwapOptions | None = None,
    frame_enhancer: FrameEnhancer | None = None,
) -> int:
    """Swap one video with a progress bar (frames, fps, ETA); its exit code."""
    from faceweave.pipeline.video_job import swap_video, video_analyser

    # A video's own analyser: its tracking mode follows one clip's frames.
    frame_analyser = video_analyser(
        max_faces=args.max_faces, all_faces=selector != "one", **_detector(args)
    )
    from tqdm import tqdm

    desc = PROG if args.target == target_path else f"{PROG} {target_path.name}"
    bar = tqdm(total=None, desc=desc, unit="frame", file=sys.stderr, disable=args.quiet, delay=0.5)
    watermark = None if args.no_watermark else _new_job_id()
    with bar as progress, _library_warnings(progress.write):

        def advance(done: int, expected: int) -> None:
            if expected and progress.total != expected:
                progress.total = max(expected, done)
            progress.update(done - progress.n)

        stats = swap_video(
            sources,
            target_path,
            output_path,
            analyser=frame_analyser,
            options=options,
            selector=selector,
            references=references,
            reference_distance=args.reference_distance,
            face_order=args.face_order,
            codec=args.encoder,
            preset=args.preset or _default_preset(),
            crf=args.crf if args.crf is not None else _default_crf(output_path, args.encoder),
            fps=args.fps,
            trim_start=args.trim_start,
            trim_end=args.trim_end,
            keep_audio=not args.no_audio,
            frame_skip=args.frame_skip or DEFAULT_FRAME_SKIP,
            **(  # swap_video's default when not given: it holds repeated frames
                {"static_threshold": args.static_threshold}
                if args.static_threshold is not None
                else {}
            ),
            redetect_every=args.redetect_every or DEFAULT_REDETECT_EVERY,
            max_faces=args.max_faces,
            progress=advance,
            watermark=watermark,
            keep_faceless=args.skip_no_face,
            frame_enhancer=frame_enhancer,
            **({"quality": args.quality} if args.quality is not None else {}),
        )
        if (
            stats.frames_swapped == 0
            and args.skip_no_face
            and watermark
            and args.fps is None
            and frame_enhancer is None  # (upscaled: processed, so kept marked)
        ):
            # Nothing swapped: the output is the target's frames, not synthetic media,
            # so it is written again without the mark and labels (as an image would be;
            # a copy at another --fps keeps them).
            progress.reset()
            _unmarked_copy(args, target_path, output_path, advance)
    return _report_video(stats, target_path, output_path, args)


def _unmarked_copy(
    args: argparse.Namespace,
    target_path: Path,
    output_path: Path,
    progress: Callable[[int, int], None],
) -> None:
    """The target's frames over the job's range, encoded as the job's, unmarked."""
    from faceweave.io.video import transcode

    crf = args.crf if args.crf is not None else _default_crf(output_path, args.encoder)
    encoding = {"codec": args.encoder, "preset": args.preset or _default_preset(), "crf": crf}
    span = {"start": args.trim_start, "end": args.trim_end, "progress": progress}
    if output_path.suffix.lower() in ANIMATION_EXTENSIONS:
        copy_clip(target_path, output_path, **span)
    elif is_animation(target_path):  # (FFmpeg decodes no animated WebP: Pillow does)
        copy_clip(target_path, output_path, **span, **encoding)
    else:
        transcode(target_path, output_path, keep_audio=not args.no_audio, **span, **encoding)


def _report_video(
    stats: VideoJobStats, target_path: Path, output_path: Path, args: argparse.Namespace
) -> int:
    written = stats.frames_swapped > 0 or args.skip_no_face
    if not args.quiet and written:
        for line in stats.warnings:
            if any(word in line for word in ("audio", "crf", "rotation", "subtitle")):
                # (the writer's notes)
                _note(line)
        _note(
            f"{output_path}: {stats.frames_written} frames, {stats.faces_swapped} faces swapped "
            f"in {stats.frames_swapped} frames, {stats.fps:.1f} fps, audio {stats.audio}"
        )
    if stats.frames_swapped == 0:
        matching = (
            args.reference_face is not None
            or bool(args.map)
            or getattr(args, "reference_frame", None) is not None
        )
        what = "no face matching the reference" if matching else "no face"
        if not args.skip_no_face:
            # As for an image: nothing written (the video job left no file).
            _error(f"{target_path}: {what} found in any frame; nothing written")
            return EXIT_NO_FACE
        if not args.quiet:
            how = (
                "written upscaled, not swapped"
                if getattr(args, "frame_enhancer_model", None) is not None
                else "written unchanged"
                if args.no_watermark or args.fps is None
                else "written with no face changed, at --fps, marked as every output is"
            )
            _note(f"{target_path}: {what} found in any frame; {how}")
    return EXIT_OK


def _encoders() -> str:
    """Each container's default encoder, for the help: ``libx264 for .mp4, ...``."""
    from faceweave.io.video import DEFAULT_VIDEO_ENCODERS

    by_codec: dict[str, list[str]] = {}
    for extension, codec in DEFAULT_VIDEO_ENCODERS.items():
        by_codec.setdefault(codec, []).append(extension)
    return ", ".join(f"{codec} for {' '.join(exts)}" for codec, exts in by_codec.items())


def _default_preset() -> str:
    from faceweave.io.video import DEFAULT_PRESET

    return DEFAULT_PRESET


def _default_crf(output_path: Path, encoder: str | None) -> int | None:
    """The writer's default quality, or None for an encoder that takes none (whose
    writer would note that it is not used)."""
    from faceweave.io.video import DEFAULT_CRF, check_video_encoder, encoder_settings

    if output_path.suffix.lower() in ANIMATION_EXTENSIONS:
        return None  # (an animated image's writer has no such setting)
    used = encoder_settings(check_video_encoder(output_path, encoder))
    return DEFAULT_CRF if "crf" in used else None


class _LineHandler(logging.Handler):
    """faceweave's library warnings as ``faceweave: warning: ...`` lines, each once."""

    def __init__(self, write: Callable[..., None] | None) -> None:
        super().__init__(logging.WARNING)
        self.write = write
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{PROG}: warning: {_one_line(record.getMessage())}"
        if line not in self.seen:
            self.seen.add(line)
            _say(line, self.write)


@contextlib.contextmanager
def _library_warnings(write: Callable[..., None] | None = None) -> Iterator[None]:
    logger = logging.getLogger("faceweave")
    handler = _LineHandler(write)
    propagate = logger.propagate
    # The innermost is the one that writes (a progress bar's writes round its bar);
    # what one said is not said again by the other.
    outer = [h for h in logger.handlers if isinstance(h, _LineHandler)]
    for other in outer:
        logger.removeHandler(other)
        handler.seen |= other.seen
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        for other in outer:
            other.seen |= handler.seen
            logger.addHandler(other)
        logger.propagate = propagate


# --- live ------------------------------------------------------------------------------------


AUDIO_OF_INPUT = "input"  # live --audio input: the --input video's own sound


def _run_live(args: argparse.Namespace) -> int:
    import faceweave as fw
    from faceweave.io.camera import Camera, FilePacer, LiveSource, Mirrored
    from faceweave.io.keys import open_terminal_keys
    from faceweave.io.microphone import AudioCapture, parse_device
    from faceweave.io.outputs import AUDIO_OUTPUTS, check_output_spec, open_output
    from faceweave.pipeline.live import LiveControls, run_live

    # Cheap checks first: no display, unknown URL scheme, bad file extension, bad paths.
    try:
        kind = check_output_spec(args.output)
    except UnsupportedFormatError as exc:  # (a usage error, as swap's --output)
        raise UsageError(f"--output {exc}") from None
    if args.input is not None and (args.width or args.height or args.fps):
        raise UsageError("--width, --height and --fps set the camera; not used with --input")
    if args.loop and args.input is None:
        raise UsageError("--loop is for --input")
    if args.input is not None and args.input.suffix.lower() in READ_IMAGE_EXTENSIONS:
        # (It had played as a one-frame video: a 0.2 s session, and no word why.)
        raise UsageError(
            f"--input plays a video as the camera; {args.input} is an image (swap it with "
            "faceweave swap, or make a video of it to stream a still)"
        )
    if args.no_watermark and kind != "file":
        raise UsageError(
            "--no-watermark is for a recording (-o FILE): a window, a virtual camera or a "
            "stream is never marked"
        )
    if args.audio is not None:
        if kind not in ("file", "stream"):
            raise UsageError(AUDIO_OUTPUTS)
        if args.audio == AUDIO_OF_INPUT:
            if args.input is None:
                raise UsageError("--audio input is the --input video's own sound: give --input")
        else:
            parse_device(args.audio)
    if args.stats is not None:
        check_output_path(args.stats, image=False)
    selector = _resolve_selector(args.face_selector, args.reference_face)
    _settle_defaults(args, selector)
    detector = _detector(args)
    photos = [path for group in args.source for path in group]
    reads = [("a --source image", path) for path in photos]
    if args.reference_face is not None:
        reads.append(("the --reference-face image", args.reference_face))
    writes = [("--output", Path(args.output))] if kind == "file" else []
    if kind == "file":  # a missing or read-only folder: before any model loads
        check_output_path(Path(args.output), image=False)
    if args.stats is not None:
        writes.append(("--stats", args.stats))
    _refuse_overwriting(
        writes, [*reads, *([("the --input video", args.input)] if args.input else [])]
    )
    for _, path in reads:
        read_image(path, max_pixels=args.max_pixels)
    # live has --mask-lips and --mask-hands; the other masks: defaults
    options = SwapOptions.from_settings(args)
    engine = engine_settings(args, options)
    _check_execution_provider(args, engine)

    pacer = FilePacer(args.input, loop=args.loop) if args.input is not None else None
    capture: LiveSource = (
        pacer
        if pacer is not None
        else Camera(
            args.camera if args.camera is not None else 0,
            width=args.width,
            height=args.height,
            fps=args.fps,
        )
    )
    if args.mirror:
        capture = Mirrored(capture)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(capture.close)  # run_live closes it too; twice is safe
        # Opened before the models load, so a missing device is said at once; it starts
        # listening when the output opens.
        microphone = (
            None
            if args.audio is None
            else AudioCapture.of_file(args.input, pacer)
            if args.audio == AUDIO_OF_INPUT and pacer is not None
            else AudioCapture(args.audio)
        )
        if microphone is not None:
            cleanup.callback(microphone.close)  # the output closes it too
        # Source photos and the reference photo as `faceweave swap` finds them (a small
        # face in a large photo too); the camera's frames in video mode, below.
        analyser = photo_analyser(
            max_faces=args.max_faces, with_embedding=True, **_without_angles(detector)
        )
        source_faces = _load_source_photos(analyser, args.source, args.max_pixels)
        # Swappers at fusion 1; run_live makes the other fusions from them (the keys).
        sources: Sequence[Any] = (
            source_faces
            if engine.plain
            else _make_swappers(source_faces, replace(options, fusion=1.0), engine)
        )
        references = (
            _load_faces(analyser, [args.reference_face], "reference", args.max_pixels)
            if selector == "reference"
            else []
        )
        analyser = fw.FaceAnalyser(
            max_faces=args.max_faces,
            with_embedding=selector == "reference",
            mode="video",
            **detector,
        )
        controls = LiveControls(fusion=args.fusion)
        output = open_output(
            args.output,
            capture.width,
            capture.height,
            capture.fps,
            on_key=controls.on_key,
            audio=microphone,
            watermark=None if args.no_watermark else _new_job_id(),
        )
        # Without a window of its own (a virtual camera, a stream, a recording) the
        # keys come from the terminal, when the session runs in one.
        keys = None if kind == "window" else open_terminal_keys(controls.on_key)
        if keys is not None:
            cleanup.callback(keys.close)
            if not args.quiet:
                _note(
                    f"keys: n next source (of {len(sources)}), + and - fusion, e swap on "
                    "and off, q quit"
                )
        stats = run_live(
            capture,
            output,
            sources,
            analyser=analyser,
            options=options,
            selector=selector,
            references=references,
            reference_distance=args.reference_distance,
            controls=controls,
            redetect_every=args.redetect_every,
            frame_skip=args.frame_skip,
            static_threshold=args.static_threshold,
            max_faces=args.max_faces,
            duration=args.duration,
        )
    if args.stats is not None:
        _write_stats(args.stats, stats.as_dict())
    if not args.quiet:
        _note(stats.summary())
        if args.reference_face is not None and stats.frames_processed and not stats.frames_swapped:
            _note(
                f"no face within --reference-distance {args.reference_distance:g} of "
                f"{args.reference_face} was seen"
            )
    if stats.stopped_by == "camera_lost":
        # Not a normal end: a supervisor (a script, systemd) must tell it from one.
        device = args.camera if args.camera is not None else 0
        name = f"camera {device}" if isinstance(device, int) else str(device)
        kept = "; the recording is kept" if kind == "file" else ""
        raise InputError(
            f"{name}: lost after {stats.frames_captured} frame(s): it stopped sending "
            f"frames (unplugged, closed, or its stream stalled){kept}"
        )
    return EXIT_OK


def _write_stats(path: Path, payload: dict[str, Any]) -> None:
    def clean(value: Any) -> Any:  # JSON has no NaN: a timing without samples is null
        if isinstance(value, float):
            return None if math.isnan(value) else round(value, 3)
        if isinstance(value, dict):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [clean(item) for item in value]
        return value

    write_bytes_atomic(path, (json.dumps(clean(payload), indent=2) + "\n").encode("utf-8"))


def _not_swapped(folder: Path, swapped: list[Path]) -> list[str]:
    """The names in a batch's folder that it leaves out (other files, sub-folders with a
    slash); hidden ones are not named."""
    taken = {path.name for path in swapped}
    return sorted(
        entry.name + ("/" if entry.is_dir() else "")
        for entry in folder.iterdir()
        if not entry.name.startswith(".") and entry.name not in taken
    )


def _listed(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _batch_summary(codes: list[int], output_dir: Path, done_before: int) -> str:
    """One line at a batch's end: how many files were swapped, failed, had no face."""
    swapped = codes.count(EXIT_OK)
    no_face = codes.count(EXIT_NO_FACE)
    failed = len(codes) - swapped - no_face
    line = f"{swapped} of {len(codes)} file(s) swapped into {output_dir}"
    extra = [f"{failed} failed"] if failed else []
    extra += [f"{no_face} without a face"] if no_face else []
    extra += [f"{done_before} done before"] if done_before else []
    return line + (f" ({', '.join(extra)})" if extra else "")


def _run_batch(job: _SwapJob, plan: list[tuple[Path, Path, Path | None]]) -> list[int]:
    """Run a batch's plan (see _batch_plan): each file on its own, the batch goes on.
    Returns each file's exit code."""
    from tqdm import tqdm

    codes: list[int] = []
    with tqdm(plan, desc=PROG, unit="image", file=sys.stderr, disable=job.quiet) as progress:
        for target_path, output_path, debug_path in progress:
            try:
                note = job.run(target_path, output_path, debug_path)
                for line in [] if note is None or job.quiet else note.splitlines():
                    _note(line, write=progress.write)
                code = EXIT_OK
            except FaceweaveError as err:
                _print_traceback_if_debugging()
                _error(_naming(target_path, str(err)), write=progress.write)
                code = err.exit_code
            except OSError as err:
                _print_traceback_if_debugging()
                _error(_naming(target_path, _os_error_line(err)), write=progress.write)
                code = EXIT_ERROR
            except Exception as err:  # noqa: BLE001 - one bad file must not end the batch
                _print_traceback_if_debugging()
                _internal_error(err, target_path, write=progress.write)
                code = EXIT_ERROR
            codes.append(code)
    return codes


def _settle_defaults(args: argparse.Namespace, selector: str) -> None:
    """Refuse options given where they would do nothing, then give the absent ones
    their defaults (both options default to None to tell the two apart)."""
    if args.light is not None and args.color == "sh":
        raise UsageError(
            "--light is not used with --color sh (its relight takes the target's light whole)"
        )
    if args.reference_distance is not None and selector not in ("reference", "map"):
        # (live has --reference-face alone)
        which = "--reference-frame or --map" if hasattr(args, "map") else None
        raise UsageError(
            "--reference-distance is for a reference face (--reference-face"
            + (f", {which})" if which else ")")
        )
    if args.light is None:
        args.light = DEFAULT_LIGHT
    if args.reference_distance is None:
        args.reference_distance = DEFAULT_REFERENCE_DISTANCE


def _resolve_selector(selector: str | None, reference_face: Path | None) -> str:
    if selector is None:
        return "reference" if reference_face is not None else DEFAULT_FACE_SELECTOR
    if selector == "reference" and reference_face is None:
        raise UsageError("--face-selector reference needs --reference-face IMG")
    if selector != "reference" and reference_face is not None:
        raise UsageError(
            f"--reference-face is only used with --face-selector reference, not {selector}"
        )
    return selector


# How far before --reference-frame's second the frame on screen then is looked for.
_REFERENCE_LOOKBACK_S = 1.0


def _output_usage(check: Callable[[Path], object], path: Path, flag: str) -> None:
    """``check(path)``, an extension no image is written in being a usage error (exit 2:
    the command line asked for it), as any bad argument is."""
    try:
        check(path)
    except UnsupportedFormatError as exc:
        raise UsageError(f"{flag} {exc}") from None


def _still_analyser(args: argparse.Namespace) -> fw.FaceAnalyser:
    """The analyser of photos and single frames: a group's small faces and faces cut by
    the frame's sides are found too (as :func:`faceweave.api.still_analyser`)."""
    return photo_analyser(max_faces=args.max_faces, **_detector(args))


def _photo_analysers(args: argparse.Namespace) -> tuple[fw.FaceAnalyser, fw.FaceAnalyser]:
    """(the targets' still analyser, the source and reference photos' one): the same
    but where --detector-angles are given, which are the targets' alone. A photo's own
    search finds it turned (see FaceAnalyser); an upright source had been "no face"
    under --detector-angles 180."""
    detector = _detector(args)  # (once: an ONNX detector's file is loaded to check it)
    targets = photo_analyser(max_faces=args.max_faces, **detector)
    if "detector_angles" not in detector:
        return targets, targets
    return targets, photo_analyser(max_faces=args.max_faces, **_without_angles(detector))


def _without_angles(detector: dict[str, Any]) -> dict[str, Any]:
    """:func:`_detector`'s arguments for photos a user gives (sources, references): not
    at --detector-angles, the target's; a photo's own search finds it turned."""
    return {k: v for k, v in detector.items() if k != "detector_angles"}


def _face_in_video(
    analyser: fw.FaceAnalyser, path: Path, second: float, position: int, order: str
) -> Face:
    """The face at ``position`` (in ``order``) of a video's frame at ``second``, as a
    player shows the frame (a display rotation applied)."""
    from faceweave.analysis.selection import order_faces

    image, shown_at = _video_frame_at(path, second, "--reference-frame")
    faces = order_faces(_faces_in(analyser, image, path), order)
    at = f"{path} at {shown_at:.2f} s"
    if not faces:
        raise NoFaceError(f"{at}: no face found for --reference-frame")
    if position >= len(faces):
        raise NoFaceError(
            f"{at}: no face at --reference-position {position} ({len(faces)} found, "
            f"counted from 0 in --face-order {order})"
        )
    return faces[position]


def _video_frame_at(path: Path, second: float, option: str | None) -> tuple[Frame, float]:
    """The frame a player shows at ``second`` (a display rotation applied), and its time:
    the last one shown by then (a second inside the last frame's time, or before a
    keyframe's, is shown by an earlier frame)."""
    from faceweave.io.video import upright

    frame = None
    with open_clip(path, start=max(0.0, second - _REFERENCE_LOOKBACK_S)) as reader:
        for candidate in reader:
            if frame is not None and candidate.time > second + 1e-6:
                break
            frame = candidate
        rotation = reader.rotation
    if frame is None:
        if option is None:  # (no second was asked for: it had named --at, not given)
            raise InputError(f"{path}: no video frame could be decoded")
        raise InputError(f"{path}: no frame at {second:g} s for {option}")
    return upright(frame.image, rotation), frame.time


def _first_face(analyser: fw.FaceAnalyser, frame: Frame, path: Path, role: str) -> Face:
    faces = _faces_in(analyser, frame, path)
    if not faces:
        raise NoFaceError(f"{path}: no face found in the {role} image")
    if len(faces) > 1:  # (a group photo as the source: it had been used without a word)
        _say(
            f"{PROG}: warning: {path}: {len(faces)} faces in the {role} image; the "
            "largest is used (crop the photo to use another)",
            None,
        )
    face: Face = faces[0]
    return face


def _faces_in(analyser: fw.FaceAnalyser, frame: Frame, path: Path) -> list[Face]:
    """The faces of an image read from ``path``; an error names the file (the analysis's
    own frame check, "image too small: 6000x4", does not know where the frame came from)."""
    try:
        return analyser.get_faces(frame)
    except InputError as err:
        raise type(err)(_naming(path, str(err))) from err


# --- analyse ---------------------------------------------------------------------------------


def _run_analyse(args: argparse.Namespace) -> int:
    import faceweave as fw
    from faceweave.analysis.selection import order_faces

    image_path: Path = args.image
    is_video = _is_clip(image_path)
    if args.landmarks and not args.json:
        raise UsageError("--landmarks adds the mesh points to --json's output: add --json")
    if args.at is not None and not is_video:
        raise UsageError(f"--at picks a video's frame; {image_path} is read as an image")
    if is_video and getattr(args, "_max_pixels_given", False):  # (it had been ignored)
        raise UsageError(f"--max-pixels limits images; {image_path} is read as a video")
    _check_execution_provider(args, None)
    if args.debug is not None:
        _output_usage(check_output_path, args.debug, "--debug")
        analysed = f"the {'video' if is_video else 'image'} analysed"
        _refuse_overwriting([("--debug", args.debug)], [(analysed, image_path)])
    where = str(image_path)
    if is_video:
        if args.at:  # (as swap's --reference-frame: past the end is a usage error)
            duration = probe_clip(image_path).duration
            if 0 < duration <= args.at:
                raise UsageError(
                    f"--at {args.at:g} s is past the end of {image_path} ({duration:.2f} s long)"
                )
        at = None if args.at is None else "--at"
        frame, shown_at = _video_frame_at(image_path, args.at or 0.0, at)
        where = f"{image_path} at {shown_at:.2f} s"
    else:
        frame = read_image(image_path, max_pixels=args.max_pixels)
    faces = order_faces(_faces_in(_still_analyser(args), frame, image_path), args.face_order)
    # Each face's hands, as swap --mask-hands finds them for a still (a crop round it).
    near: list[list[Any]] = [[] for _ in faces]
    if args.hands and faces:
        finder = fw.MediaPipeHands()
        try:
            near = [finder.find(frame, [face.bbox]) for face in faces]
        finally:
            finder.close()
    if args.json:
        records = [_face_record(face, landmarks=args.landmarks) for face in faces]
        if args.hands:
            for record, hands in zip(records, near, strict=True):
                record["hands"] = [_hand_record(hand) for hand in hands]
        print(json.dumps(records, indent=2))
    else:
        height, width = frame.shape[:2]
        print(f"{where}: {width}x{height}, {len(faces)} face(s)")
        for index, face in enumerate(faces):
            print(_face_line(index, face))
            for hand in near[index]:
                print(_hand_line(hand))
    if args.debug is not None:
        from faceweave.analysis.hands import distinct_hands

        shown = distinct_hands([hand for hands in near for hand in hands])  # (two faces' crops)
        write_image(args.debug, fw.draw_debug(frame, faces, hands=[h.landmarks for h in shown]))
    if not faces:
        raise NoFaceError(f"{where}: no face found")
    return EXIT_OK


def _face_record(face: Face, *, landmarks: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "bbox": [round(float(v), 2) for v in face.bbox],
        "score": round(float(face.score), 4),
        "pose": {
            "yaw": round(float(face.pose.yaw), 2),
            "pitch": round(float(face.pose.pitch), 2),
            "roll": round(float(face.pose.roll), 2),
        },
        "landmarks_5": [[round(float(v), 2) for v in point] for point in face.landmarks_5],
    }
    if landmarks:
        record["landmarks_478"] = [
            [round(float(v), 2) for v in point] for point in face.landmarks_478
        ]
    return record


def _hand_record(hand: Any) -> dict[str, Any]:
    """A hand (see faceweave.analysis.hands.Hand) as JSON: its 21 points, score, side."""
    return {
        "side": hand.side,
        "score": round(float(hand.score), 4),
        "landmarks": [[round(float(v), 2) for v in point] for point in hand.landmarks],
    }


def _hand_line(hand: Any) -> str:
    x0, y0 = (round(float(v)) for v in hand.landmarks.min(axis=0))
    x1, y1 = (round(float(v)) for v in hand.landmarks.max(axis=0))
    return f"  hand ({hand.side}, {hand.score:.2f}): points within ({x0},{y0})-({x1},{y1})"


def _tenths(value: object) -> str:
    text = f"{float(value):.1f}"  # type: ignore[arg-type]
    return "0.0" if text == "-0.0" else text


def _face_line(index: int, face: Face) -> str:
    # (whole pixels as integers: a box just past the edge had read "-0")
    x0, y0, x1, y1 = (round(float(v)) for v in face.bbox)
    points = " ".join(f"({_tenths(x)},{_tenths(y)})" for x, y in face.landmarks_5)
    return (
        f"face {index}: box ({x0},{y0})-({x1},{y1}) score {face.score:.3f} "
        f"yaw {face.pose.yaw:+.1f} pitch {face.pose.pitch:+.1f} roll {face.pose.roll:+.1f} "
        f"landmarks_5 {points}"
    )


# --- argument types --------------------------------------------------------------------------


def _check_encoder_fits(path: Path, args: argparse.Namespace) -> None:
    """A usage error (before any work) when ``--encoder`` does not fit the output's
    container (libx264 into WebM), or ``--preset`` or ``--crf`` is given to an encoder
    that does not use it (AVI's mpeg4 has no speed preset)."""
    from faceweave.io.video import check_video_encoder, encoder_settings

    if path.suffix.lower() in ANIMATION_EXTENSIONS:
        for name in ("encoder", "preset", "crf"):
            if getattr(args, name) is not None:
                raise UsageError(
                    f"--{name} is for a video output; {path.name} is an animated image"
                )
        return
    try:
        codec = check_video_encoder(path, args.encoder)
    except UnsupportedFormatError as err:
        if args.encoder is None:
            raise
        raise UsageError(f"--encoder {args.encoder}: {err}") from None
    used = encoder_settings(codec)
    for name in ("preset", "crf"):
        if getattr(args, name) is not None and name not in used:
            which = f"the {path.suffix} default, " if args.encoder is None else ""
            takes = f"it takes --{next(iter(used))} only" if used else "it takes neither"
            raise UsageError(
                f"--{name} is not used by the {codec} encoder ({which}{takes} of "
                "--preset and --crf)"
            )


def _encoder(text: str) -> str:
    from faceweave.io.video import video_encoder_problem

    problem = video_encoder_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _crf(text: str) -> int:
    value = whole_number(text)
    if not 0 <= value <= 51:
        raise argparse.ArgumentTypeError(f"must be between 0 and 51, got {text}")
    return value


def _mapping(text: str) -> tuple[Path, Path]:
    """SRC=REF. A file name holding "=" too: the split whose source file exists (the
    first "=" had been taken: "a=b.png=ref.jpg" was "a: no such file")."""
    cuts = [i for i, char in enumerate(text) if char == "="]
    if not cuts:
        raise argparse.ArgumentTypeError(f"expected SRC=REF (two image paths), got {text!r}")
    splits = [(text[:i], text[i + 1 :]) for i in cuts if 0 < i < len(text) - 1]
    if not splits:
        raise argparse.ArgumentTypeError(f"expected SRC=REF (two image paths), got {text!r}")
    found = [(a, b) for a, b in splits if Path(a).is_file() and Path(b).is_file()]
    source, reference = (found or [s for s in splits if Path(s[0]).is_file()] or splits)[0]
    return Path(source), Path(reference)


def _camera(text: str) -> int | str:
    if text.isdigit():
        return int(text)
    path = Path(text)
    if "://" not in text and path.suffix.lower() in VIDEO_EXTENSIONS and path.is_file():
        # (A camera is read as fast as it delivers: a file had been read at full speed,
        # most of its frames dropped.)
        raise argparse.ArgumentTypeError(f"{text} is a video file: play it with --input")
    return text


def _input_file(text: str) -> Path:
    if "://" in text:
        # (As a path its // had been folded: "http:/host/...: no such file".)
        raise argparse.ArgumentTypeError(
            f"{text}: --input plays a file; a network camera or stream goes to --camera"
        )
    return Path(text)


def _quality(text: str) -> int:
    value = positive_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100, got {text}")
    return value


# --- messages --------------------------------------------------------------------------------


def _error(message: str, *, write: Callable[..., None] | None = None) -> None:
    _say(f"{PROG}: error: {_one_line(message)}", write)


def _internal_error(
    err: BaseException, path: Path | None = None, *, write: Callable[..., None] | None = None
) -> None:
    where = f"{path}: " if path is not None else ""
    _say(f"{PROG}: internal error: {where}{type(err).__name__}: {_one_line(str(err))}", write)


def _note(message: str, *, write: Callable[..., None] | None = None) -> None:
    _say(f"{PROG}: {_one_line(message)}", write)


def _say(line: str, write: Callable[..., None] | None) -> None:
    """Print one line on stderr; through tqdm's ``write`` while a progress bar is shown."""
    if write is not None:
        write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr)


def _naming(path: Path, message: str) -> str:
    """Prefix ``message`` with the file name unless it already names it."""
    return message if str(path) in message else f"{path}: {message}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _print_traceback_if_debugging() -> None:
    if _debugging():
        traceback.print_exc(file=sys.stderr)


@contextlib.contextmanager
def _native_logs_silenced(*, restore: bool = True) -> Iterator[None]:
    """Send what native libraries write to file descriptor 2 to the null device.

    With ``restore`` off (the process's own command line, which exits next), fd 2 stays
    on the null device afterwards, and ``sys.stderr`` on the real one: a MediaPipe graph
    opens its models in threads of its own and can still write its notes after the
    command has returned (seen once in a few hundred runs, as a second line under a
    one-line warning).

    MediaPipe, TFLite and absl print several INFO/WARNING lines straight to fd 2
    when a model loads, and no environment variable turns them off in MediaPipe
    0.10. The command promises one line per error, so while it runs fd 2 points
    at the null device and Python's ``sys.stderr`` (our messages, the progress
    bar, warnings, tracebacks) writes to a duplicate of the real stderr. Left
    alone when ``FACEWEAVE_DEBUG`` is set, or when ``sys.stderr`` is not fd 2
    (``main`` called under a capturing test runner, for example).
    """
    try:
        real_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: no descriptor
        real_fd = -1
    if real_fd != 2 or _debugging():
        yield
        return
    python_stderr = sys.stderr
    python_stderr.flush()
    saved_fd = os.dup(2)
    null_fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null_fd, 2)
    os.close(null_fd)
    sys.stderr = open(  # noqa: SIM115 - closed in the finally below
        saved_fd,
        "w",
        encoding=python_stderr.encoding,
        errors="backslashreplace",
        buffering=1,
    )
    try:
        yield
    finally:
        sys.stderr.flush()
        if restore:
            os.dup2(saved_fd, 2)
            sys.stderr.close()  # also closes saved_fd
            sys.stderr = python_stderr
