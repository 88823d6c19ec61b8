"""Helpers shared by the benchmarks: face images, environment notes, tables, reports.

Nothing here touches the engine's internals; the benchmarks only use the public
API (``faceweave.FaceAnalyser``, ``faceweave.Swapper``) and the dlib backend.

Images from ``../shared/data/faces`` are for internal use only: every output
derived from them is written under the git-ignored ``out/`` folder and nowhere
else (:func:`checked_out_dir` enforces it).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

REPO_ROOT = Path(__file__).resolve().parents[1]
# A benchmark measures the code beside it: the repository's root goes first on the
# import path. Run as a script, only benchmarks/ is there, and an installed faceweave
# was measured instead (from a git worktree: the main checkout's editable install).
if (REPO_ROOT / "faceweave" / "__init__.py").is_file() and sys.path[:1] != [str(REPO_ROOT)]:
    sys.path.insert(0, str(REPO_ROOT))
OUT_ROOT = REPO_ROOT / "out"
DEFAULT_OUT_DIR = OUT_ROOT / "bench"
SHARED_FACES_DIR = REPO_ROOT.parent / "shared" / "data" / "faces"

# MANIFEST.tsv ``content_note`` prefixes that mean exactly one usable face.
SINGLE_FACE_NOTES = ("1 face", "1 main face", "1 small face")

THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


@dataclass(frozen=True)
class FaceImage:
    """One benchmark image.

    Attributes:
        name: short unique name used in tables and file names.
        frame: (H, W, 3) uint8 BGR.
        origin: where it came from (package resource or file path).
        note: the manifest's content note, when there is one.
    """

    name: str
    frame: NDArray[np.uint8]
    origin: str
    note: str = ""


def read_frame(path: Path) -> NDArray[np.uint8]:
    """Read an image as (H, W, 3) uint8 BGR (EXIF orientation and alpha handled by faceweave)."""
    try:
        from faceweave.io.image import read_image
    except ImportError:  # pragma: no cover - io module missing in an old checkout
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if frame is None:
            raise ValueError(f"cannot read {path}") from None
        return frame
    return read_image(path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_images() -> list[tuple[FaceImage, str | None]]:
    """Real face photos shipped inside installed packages, with their file's SHA-256.

    scikit-image's astronaut (Eileen Collins) and matplotlib's Grace Hopper. Both
    packages are optional: a missing one is skipped. (scikit-image's ``camera``
    is a face too, but small and grey, and dlib's HOG detector does not find it.)
    """
    found: list[tuple[FaceImage, str | None]] = []
    try:
        from skimage import data as skdata

        path = Path(skdata.__file__).parent / "astronaut.png"
        rgb = skdata.astronaut()
        frame = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        digest = _sha256(path) if path.exists() else None
        found.append((FaceImage("astronaut", frame, "skimage.data.astronaut()"), digest))
    except ImportError:
        pass
    try:
        from matplotlib import cbook

        path = Path(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
        found.append(
            (
                FaceImage(
                    "grace_hopper", read_frame(path), "matplotlib sample_data/grace_hopper.jpg"
                ),
                _sha256(path),
            )
        )
    except (ImportError, OSError, ValueError):
        pass
    return found


def read_manifest(folder: Path) -> list[dict[str, str]]:
    """Rows of ``MANIFEST.tsv`` in ``folder`` (empty when there is none)."""
    manifest = folder / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    with manifest.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def is_single_face(row: dict[str, str]) -> bool:
    note = (row.get("content_note") or "").strip().lower()
    return row.get("type", "image") == "image" and note.startswith(SINGLE_FACE_NOTES)


# Still images taken from a folder without a MANIFEST.tsv.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".avif")


def folder_images(folder: Path) -> list[tuple[FaceImage, str]]:
    """Single-face still images listed in ``folder/MANIFEST.tsv`` (videos skipped).

    A folder without a manifest (your own face set) gives every still image in it, by
    name; each is taken to show one face (the largest face found is used).
    """
    images: list[tuple[FaceImage, str]] = []
    if not (folder / "MANIFEST.tsv").exists():
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
                frame = read_frame(path)
                images.append((FaceImage(path.stem, frame, str(path)), _sha256(path)))
        return images
    for row in read_manifest(folder):
        if not is_single_face(row):
            continue
        path = folder / row["file"]
        if not path.exists():
            continue
        name = Path(row["file"]).stem.removeprefix("img_")
        frame = read_frame(path)
        images.append(
            (FaceImage(name, frame, str(path), row.get("content_note", "")), _sha256(path))
        )
    return images


def group_images(folder: Path) -> list[FaceImage]:
    """The still images of ``folder/MANIFEST.tsv`` that show several faces (none
    without a manifest)."""
    if not (folder / "MANIFEST.tsv").exists():
        return []
    images = []
    for row in read_manifest(folder):
        path = folder / row["file"]
        if row.get("type", "image") != "image" or is_single_face(row) or not path.exists():
            continue
        name = Path(row["file"]).stem.removeprefix("img_")
        images.append(FaceImage(name, read_frame(path), str(path), row.get("content_note", "")))
    return images


def load_face_set(
    *, faces_dir: Path | None, use_packages: bool = True, limit: int | None = None
) -> list[FaceImage]:
    """Package images plus the folder's single-face images, without duplicates (by file hash)."""
    images: list[FaceImage] = []
    seen: set[str] = set()
    sources: list[tuple[FaceImage, str | None]] = []
    if use_packages:
        sources.extend(package_images())
    if faces_dir is not None and faces_dir.is_dir():
        sources.extend(folder_images(faces_dir))
    for image, digest in sources:
        if digest is not None and digest in seen:
            continue
        if digest is not None:
            seen.add(digest)
        images.append(image)
    return images[:limit] if limit else images


def checked_out_dir(path: Path) -> Path:
    """Create ``path`` and refuse any folder outside the git-ignored ``out/``."""
    resolved = path.resolve()
    if OUT_ROOT.resolve() not in (resolved, *resolved.parents):
        raise SystemExit(f"output folder must be under {OUT_ROOT} (git-ignored), got {resolved}")
    resolved.mkdir(parents=True, exist_ok=True)
    return resolved


def face_set_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser with a face-set benchmark's arguments (``--faces``, ``--no-shared``,
    ``--out``), to add its own to; ``doc``'s first paragraph describes it."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument(
        "--faces", type=Path, default=SHARED_FACES_DIR, help="folder of face photos"
    )
    parser.add_argument("--no-shared", action="store_true", help="package images only")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="report folder under out/ (default: %(default)s)",
    )
    return parser


def face_set_args(doc: str | None, argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments of a benchmark over the face set (see face_set_parser)."""
    return face_set_parser(doc).parse_args(argv)


def face_set_start(
    args: argparse.Namespace,
) -> tuple[Path, dict[str, Any], list[FaceImage]]:
    """A face-set benchmark's report folder, environment (printed) and images."""
    out_dir = checked_out_dir(args.out)
    env = environment()
    print(environment_line(env), flush=True)
    return out_dir, env, load_face_set(faces_dir=None if args.no_shared else args.faces)


def environment() -> dict[str, Any]:
    """Machine, library versions and thread settings, for the report.

    Also tunes the allocator like the ``faceweave`` program does at start
    (:func:`faceweave.tune_allocator`), so the numbers are the program's.
    """
    from faceweave.runtime import tune_allocator

    info: dict[str, Any] = {
        "allocator_tuned": tune_allocator(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cv2": cv2.__version__,
        "cv2_threads": cv2.getNumThreads(),
        "numpy": np.__version__,
        "thread_env": {k: os.environ.get(k) for k in THREAD_ENV_VARS},
    }
    for module in ("mediapipe", "dlib", "faceweave"):
        try:
            info[module] = getattr(__import__(module), "__version__", "?")
        except ImportError:
            info[module] = None
    # Which code was measured.
    info["faceweave_path"] = str(Path(__import__("faceweave").__file__).resolve().parent)
    return info


def environment_line(env: dict[str, Any]) -> str:
    threads = (
        ", ".join(f"{k}={v}" for k, v in env["thread_env"].items() if v is not None) or "none set"
    )
    return (
        f"python {env['python']} on {env['machine']}, {env['affinity_cpus']} usable CPUs; "
        f"cv2 {env['cv2']} (getNumThreads={env['cv2_threads']}); thread env: {threads}"
    )


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def time_ms(fn: Callable[[], object]) -> tuple[float, object]:
    """Run ``fn`` once; (milliseconds, result)."""
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1e3, result


def stats_ms(samples: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(samples, np.float64)
    if arr.size == 0:
        return {"n": 0, "median": float("nan"), "p95": float("nan"), "mean": float("nan")}
    return {
        "n": int(arr.size),
        "median": float(np.median(arr)),
        "p95": float(np.percentile(arr, 95)),
        "mean": float(arr.mean()),
        "min": float(arr.min()),
    }


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table; floats are printed as given (format them before)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_json(path: Path, payload: object) -> None:
    path.write_text(json.dumps(payload, indent=2, default=_json_default, allow_nan=True) + "\n")


def write_csv(path: Path, rows: Sequence[dict[str, object]]) -> None:
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in row.items()}
            )


def place_face(
    photo: NDArray[np.uint8],
    face_box: Sequence[float],
    size: tuple[int, int],
    *,
    face_fraction: float = 1 / 3,
    dx: float = 0.0,
) -> NDArray[np.uint8]:
    """``photo`` scaled so its face is ``face_fraction`` of the frame height, centred and
    shifted ``dx`` pixels right, with the frame's edges filled by mirroring."""
    w, h = size
    x0, y0, x1, y1 = face_box
    s = face_fraction * h / (y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    matrix = np.array([[s, 0, w / 2 - s * cx + dx], [0, s, h / 2 - s * cy]], np.float64)
    return cv2.warpAffine(
        photo, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101
    )
