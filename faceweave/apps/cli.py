"""The ``faceweave`` command: ``swap`` faces in images and ``analyse`` the faces in one.

Thin by design: it parses arguments, reads and writes files through
:mod:`faceweave.io` and calls the engine's public API; no image maths here.

Exit codes (also in the README):

====  =============================================================================
0     success
1     error: unreadable or unsupported input, output not writable, internal error
2     usage: bad or conflicting arguments (argparse or :class:`UsageError`)
3     no face: none in the source, or none (matching) in a target
130   interrupted (Ctrl-C)
====  =============================================================================

A batch (a directory as ``--target``) goes on after a failed file and exits
with the most severe code seen: 1 ranks above 3.

Example:
    $ faceweave swap --source me.jpg --target photo.jpg --output out.png
    $ faceweave swap --source me.jpg --target photos/ --output swapped/ --quiet
    $ faceweave analyse photo.jpg --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faceweave.errors import (
    EXIT_ERROR,
    EXIT_NO_FACE,
    EXIT_OK,
    EXIT_USAGE,
    FaceweaveError,
    InputError,
    NoFaceError,
    UsageError,
)
from faceweave.io import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUALITY,
    IMAGE_EXTENSIONS,
    check_output_path,
    list_images,
    make_output_dir,
    output_path_for,
    read_image,
    write_image,
)

if TYPE_CHECKING:  # pragma: no cover
    import faceweave as fw
    from faceweave.types import Face, Frame

__all__ = ["build_parser", "main"]

PROG = "faceweave"

# --- defaults: the one place the command line's settings are chosen ---------------------------
DEFAULT_FUSION = 1.0
COLOR_CHOICES = ("none", "rct", "lct", "sh")
DEFAULT_COLOR = "lct"
BLEND_CHOICES = ("alpha", "multiband", "poisson")
DEFAULT_BLEND = "multiband"
FACE_SELECTOR_CHOICES = ("one", "many", "reference")
DEFAULT_FACE_SELECTOR = "one"
DEFAULT_REFERENCE_DISTANCE = 0.6
FACE_ORDER_CHOICES = ("large-small", "small-large", "left-right", "right-left", "best-worst")
DEFAULT_FACE_ORDER = "large-small"
DEFAULT_MAX_FACES = 8
DEFAULT_MASK_MOUTH = True
DEFAULT_MASK_EYES = False
# DEFAULT_MAX_PIXELS and DEFAULT_QUALITY come from faceweave.io, which applies them.

DEBUG_ENV = "FACEWEAVE_DEBUG"  # "1": print tracebacks with errors
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

# Batch: how bad an exit code is; the batch exits with the worst one seen.
_SEVERITY = {EXIT_OK: 0, EXIT_NO_FACE: 1, EXIT_ERROR: 2, EXIT_USAGE: 3}


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return the process exit code.

    Args:
        argv: arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        0 on success, else the code of the error (see the module docstring).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        with _native_logs_silenced():
            return command(args)
    except FaceweaveError as err:
        _print_traceback_if_debugging()
        _error(str(err))
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, no traceback
        _print_traceback_if_debugging()
        _internal_error(err)
        return EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``faceweave`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Swap faces in images, or list the faces an image contains.",
        epilog=f"Set {DEBUG_ENV}=1 to print tracebacks with errors.",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_swap_parser(commands)
    _add_analyse_parser(commands)
    return parser


def _add_swap_parser(commands: Any) -> None:
    swap = commands.add_parser(
        "swap",
        help="put the face of --source onto the faces of --target",
        description=(
            "Put the face of SRC onto the faces of TGT. TGT may be a directory of images: "
            "OUT is then a directory (created if needed) and every image is processed; "
            "a failed image is reported on one line and the batch goes on."
        ),
    )
    swap.set_defaults(command=_run_swap)
    swap.add_argument("--source", "-s", required=True, type=Path, metavar="SRC")
    swap.add_argument(
        "--target", "-t", required=True, type=Path, metavar="TGT", help="image or directory"
    )
    swap.add_argument(
        "--output", "-o", required=True, type=Path, metavar="OUT", help="image or directory"
    )
    swap.add_argument(
        "--fusion",
        type=_unit_interval,
        default=DEFAULT_FUSION,
        help="0: keep the target, 1: full swap (default %(default)s)",
    )
    swap.add_argument("--color", choices=COLOR_CHOICES, default=DEFAULT_COLOR)
    swap.add_argument("--blend", choices=BLEND_CHOICES, default=DEFAULT_BLEND)
    swap.add_argument(
        "--face-selector",
        choices=FACE_SELECTOR_CHOICES,
        default=None,
        help=f"which target faces to replace (default {DEFAULT_FACE_SELECTOR}, "
        "or reference when --reference-face is given)",
    )
    swap.add_argument(
        "--reference-face",
        type=Path,
        metavar="IMG",
        help="replace only the target faces that look like the face in IMG",
    )
    swap.add_argument(
        "--reference-distance",
        type=_non_negative_float,
        default=DEFAULT_REFERENCE_DISTANCE,
        help="largest identity distance to the reference face (default %(default)s)",
    )
    swap.add_argument("--face-order", choices=FACE_ORDER_CHOICES, default=DEFAULT_FACE_ORDER)
    swap.add_argument("--max-faces", type=_positive_int, default=DEFAULT_MAX_FACES, metavar="N")
    swap.add_argument(
        "--mask-mouth",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_MASK_MOUTH,
        help="keep the target's open mouth",
    )
    swap.add_argument(
        "--mask-eyes",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_MASK_EYES,
        help="keep the target's eyes",
    )
    swap.add_argument(
        "--skip-no-face",
        action="store_true",
        help="write a target without a face unchanged instead of failing",
    )
    _add_common_options(swap)
    swap.add_argument(
        "--debug",
        type=Path,
        metavar="DEBUG_PNG",
        help="also write an overlay of the detected faces (a directory for a batch)",
    )
    swap.add_argument(
        "--quality",
        type=_quality,
        default=DEFAULT_QUALITY,
        help="JPEG/WebP quality 1..100 (default %(default)s)",
    )
    swap.add_argument("--quiet", "-q", action="store_true", help="no progress bar or notes")


def _add_analyse_parser(commands: Any) -> None:
    analyse = commands.add_parser(
        "analyse",
        aliases=["analyze"],
        help="list the faces in an image",
        description="Print the faces found in IMAGE: box, score, pose and 5 landmarks.",
    )
    analyse.set_defaults(command=_run_analyse)
    analyse.add_argument("image", type=Path, metavar="IMAGE")
    analyse.add_argument("--json", action="store_true", help="print a JSON list")
    analyse.add_argument(
        "--landmarks", action="store_true", help="include the 478 mesh points in --json"
    )
    analyse.add_argument(
        "--debug", type=Path, metavar="OUT.png", help="write an overlay of the faces"
    )
    analyse.add_argument("--max-faces", type=_positive_int, default=DEFAULT_MAX_FACES, metavar="N")
    _add_common_options(analyse)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-pixels",
        type=_positive_int,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="refuse larger images (default %(default)s)",
    )


# --- swap ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SwapJob:
    """What every target image of one ``swap`` run goes through."""

    analyser: fw.FaceAnalyser
    swapper: fw.Swapper
    selector: str
    reference_face: Face | None
    reference_distance: float
    face_order: str
    skip_no_face: bool
    max_pixels: int
    quality: int
    quiet: bool

    def run(self, target_path: Path, output_path: Path, debug_path: Path | None) -> str | None:
        """Swap the faces of one target image and write the result.

        Returns:
            A note for the user when the target was written unchanged, else ``None``.
        """
        import faceweave as fw

        target_frame = read_image(target_path, max_pixels=self.max_pixels)
        faces = self.analyser.get_faces(target_frame)
        target_faces = fw.select_faces(
            faces,
            selector=self.selector,
            reference=self.reference_face,
            max_distance=self.reference_distance,
            order=self.face_order,
        )
        if debug_path is not None:
            write_image(debug_path, fw.draw_debug(target_frame, target_faces))
        if not target_faces:
            what = "no face matching the reference" if faces else "no face"
            if not self.skip_no_face:
                raise NoFaceError(f"{target_path}: {what} found in the target")
            write_image(output_path, target_frame, quality=self.quality)
            return f"{target_path}: {what} found; written unchanged"
        output_frame = self.swapper.swap(target_frame, target_faces)
        write_image(output_path, output_frame, quality=self.quality)
        return None


def _run_swap(args: argparse.Namespace) -> int:
    import faceweave as fw

    selector = _resolve_selector(args.face_selector, args.reference_face)
    target_path: Path = args.target
    output_path: Path = args.output
    batch = target_path.is_dir()
    # Check everything cheap before loading models or decoding anything.
    if batch:
        targets = list_images(target_path)
        if not targets:
            raise InputError(f"{target_path}: no images ({', '.join(IMAGE_EXTENSIONS)})")
        if output_path.resolve() == target_path.resolve():
            raise UsageError("--output must not be the --target directory")
    else:
        if not target_path.exists():
            raise InputError(f"{target_path}: no such file")
        if output_path.is_dir():
            output_path = output_path / target_path.name
        check_output_path(output_path)
        if args.debug is not None:
            check_output_path(args.debug)
    source_frame = read_image(args.source, max_pixels=args.max_pixels)
    reference_frame = (
        read_image(args.reference_face, max_pixels=args.max_pixels)
        if selector == "reference"
        else None
    )

    analyser = fw.FaceAnalyser(max_faces=args.max_faces)
    source_face = _first_face(analyser, source_frame, args.source, "source")
    reference_face = (
        _first_face(analyser, reference_frame, args.reference_face, "reference")
        if reference_frame is not None
        else None
    )
    job = _SwapJob(
        analyser=analyser,
        swapper=fw.Swapper(
            source_face,
            fusion=args.fusion,
            color=args.color,
            blend=args.blend,
            mask_mouth=args.mask_mouth,
            mask_eyes=args.mask_eyes,
        ),
        selector=selector,
        reference_face=reference_face,
        reference_distance=args.reference_distance,
        face_order=args.face_order,
        skip_no_face=args.skip_no_face,
        max_pixels=args.max_pixels,
        quality=args.quality,
        quiet=args.quiet,
    )
    if not batch:
        note = job.run(target_path, output_path, args.debug)
        if note is not None and not args.quiet:
            _note(note)
        return EXIT_OK
    return _run_batch(job, targets, make_output_dir(output_path), args.debug)


def _run_batch(job: _SwapJob, targets: list[Path], output_dir: Path, debug: Path | None) -> int:
    from tqdm import tqdm

    debug_dir = make_output_dir(debug) if debug is not None else None
    worst = EXIT_OK
    with tqdm(targets, desc=PROG, unit="image", file=sys.stderr, disable=job.quiet) as progress:
        for target_path in progress:
            debug_path = debug_dir / f"{target_path.stem}.png" if debug_dir else None
            try:
                note = job.run(target_path, output_path_for(target_path, output_dir), debug_path)
                if note is not None and not job.quiet:
                    _note(note, write=progress.write)
                code = EXIT_OK
            except FaceweaveError as err:
                _print_traceback_if_debugging()
                _error(_naming(target_path, str(err)), write=progress.write)
                code = err.exit_code
            except Exception as err:  # noqa: BLE001 - one bad file must not end the batch
                _print_traceback_if_debugging()
                _internal_error(err, target_path, write=progress.write)
                code = EXIT_ERROR
            worst = max(worst, code, key=lambda c: _SEVERITY.get(c, _SEVERITY[EXIT_ERROR]))
    return worst


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


def _first_face(analyser: fw.FaceAnalyser, frame: Frame, path: Path, role: str) -> Face:
    faces = analyser.get_faces(frame)
    if not faces:
        raise NoFaceError(f"{path}: no face found in the {role} image")
    face: Face = faces[0]
    return face


# --- analyse ---------------------------------------------------------------------------------


def _run_analyse(args: argparse.Namespace) -> int:
    import faceweave as fw

    image_path: Path = args.image
    if args.debug is not None:
        check_output_path(args.debug)
    frame = read_image(image_path, max_pixels=args.max_pixels)
    faces = fw.FaceAnalyser(max_faces=args.max_faces).get_faces(frame)
    if args.json:
        records = [_face_record(face, landmarks=args.landmarks) for face in faces]
        print(json.dumps(records, indent=2))
    else:
        height, width = frame.shape[:2]
        print(f"{image_path}: {width}x{height}, {len(faces)} face(s)")
        for index, face in enumerate(faces):
            print(_face_line(index, face))
    if args.debug is not None:
        write_image(args.debug, fw.draw_debug(frame, faces))
    if not faces:
        raise NoFaceError(f"{image_path}: no face found")
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


def _face_line(index: int, face: Face) -> str:
    x0, y0, x1, y1 = (float(v) for v in face.bbox)
    points = " ".join(f"({float(x):.1f},{float(y):.1f})" for x, y in face.landmarks_5)
    return (
        f"face {index}: box ({x0:.0f},{y0:.0f})-({x1:.0f},{y1:.0f}) score {face.score:.3f} "
        f"yaw {face.pose.yaw:+.1f} pitch {face.pose.pitch:+.1f} roll {face.pose.roll:+.1f} "
        f"landmarks_5 {points}"
    )


# --- argument types --------------------------------------------------------------------------


def _unit_interval(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = _float(text)
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def _quality(text: str) -> int:
    value = _positive_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100, got {text}")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None


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
def _native_logs_silenced() -> Iterator[None]:
    """Send what native libraries write to file descriptor 2 to the null device.

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
        os.dup2(saved_fd, 2)
        sys.stderr.close()  # also closes saved_fd
        sys.stderr = python_stderr
