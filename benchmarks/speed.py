"""Per-stage speed of faceweave on one CPU process: detection, mesh, analysis, swap, end to end.

Test frames are 16:9 (480p, 720p, 1080p) and built from scikit-image's
astronaut photo: the image is scaled so that her face (the mesh box height) is
one third of the frame height, her face is centred, and the parts of the frame
outside the photo are filled by mirroring its edges. The source face is
matplotlib's Grace Hopper (or the mirrored astronaut when matplotlib is missing).

Stages (each timed separately, after warm-up runs, ``--reps`` times):

* ``detect``: ``FaceAnalyser.detect`` (BlazeFace short + full range);
* ``mesh``: ``analyser.landmarker.fit`` for the one face (478-point mesh);
* ``analyse``: ``FaceAnalyser.get_faces`` (detect + mesh + pose; no embedding);
* ``swap``: ``Swapper.swap`` for one face with the analysis done
  (warp + colour + blend, default options);
* ``end_to_end``: ``get_faces`` followed by ``swap``;
* ``analyse (video)`` and ``end_to_end (video)``: the same with the analyser in
  ``video`` mode (full-range detector plus the short-range one every third call,
  mesh in MediaPipe's tracking mode), as on consecutive frames of a video.
  Image mode (the default) runs both detectors and the static mesh on every call.

At 720p it also times ``swap`` per blend mode and per colour mode, and with the
light match or the fine-detail step off (what each costs), and at fusion 0.5, and
it reports the source preparation (``Swapper(...)``) once. Then the neural engine
(``NeuralSwapper``) at pixel boost 1 and 2: with ``--swapper-model`` and
``--embedder-model``, your models; by default a pass-through model with
inswapper's signature, built here, so that those rows are the engine's own cost
around a model (alignment, mask, colour match, paste-back and blend). Last, the
embedded engine's swap with a face occluder (``--occluder-model``, or by default a tiny
model with XSeg's signature built here: the cost around a model), and with a face
parser (``--parser-model``, or by default a tiny model with BiSeNet's signature); and
with face areas (the lower face only, no model).

Example:
    python benchmarks/speed.py
    OMP_NUM_THREADS=1 python benchmarks/speed.py --reps 20 --cv2-threads 1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_OUT_DIR,
    checked_out_dir,
    environment,
    environment_line,
    markdown_table,
    package_images,
    peak_rss_mib,
    place_face,
    stats_ms,
    write_json,
)

import faceweave as fw  # noqa: E402

RESOLUTIONS = {"480p": (854, 480), "720p": (1280, 720), "1080p": (1920, 1080)}
STAGES = (
    "detect",
    "mesh",
    "analyse",
    "swap",
    "end_to_end",
    "analyse (video)",
    "end_to_end (video)",
)
FACE_FRACTION = 1 / 3


def make_frame(
    photo: NDArray[np.uint8], face_box: tuple[float, float, float, float], size: tuple[int, int]
) -> NDArray[np.uint8]:
    """``photo`` scaled so the face is 1/3 of the frame height, face centred, edges mirrored."""
    return place_face(photo, face_box, size, face_fraction=FACE_FRACTION)


def bench(fn: Callable[[], object], warmup: int, reps: int) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return stats_ms(samples)


def fmt(stat: dict[str, float]) -> str:
    return f"{stat['median']:.1f} / {stat['p95']:.1f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reps", type=int, default=50, help="timed repetitions per stage (default: %(default)s)"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=5,
        help="untimed runs before each stage (default: %(default)s)",
    )
    parser.add_argument(
        "--resolutions",
        nargs="+",
        default=list(RESOLUTIONS),
        choices=list(RESOLUTIONS),
        help="frame sizes",
    )
    parser.add_argument(
        "--cv2-threads", type=int, default=None, help="cv2.setNumThreads before timing"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="report folder under out/ (default: %(default)s)",
    )
    parser.add_argument(
        "--save-frames", action="store_true", help="also write the test frames and swaps as PNG"
    )
    parser.add_argument(
        "--swapper-model",
        type=Path,
        metavar="FILE.onnx",
        help="time the neural engine with this inswapper-style model (with --embedder-model); "
        "default: a pass-through model with its signature, built here, so that the rows "
        "give the engine's own cost around a model",
    )
    parser.add_argument("--embedder-model", type=Path, metavar="FILE.onnx")
    parser.add_argument(
        "--occluder-model",
        type=Path,
        metavar="FILE.onnx",
        help="time the embedded engine's swap with this face occluder (XSeg's signature); "
        "default: a tiny model with its signature, built here, so that the row gives the "
        "cost around a model (the aligned crop, its mask warped into the swap; the test frame "
        "shows nothing in front of the face)",
    )
    parser.add_argument(
        "--parser-model",
        type=Path,
        metavar="FILE.onnx",
        help="time the embedded engine's swap with this face parser (BiSeNet's signature); "
        "default: a tiny model with its signature at 512 px, built here (the cost around a "
        "model: the aligned crop, the argmax over its 19 classes, its mask warped into the "
        "swap)",
    )
    return parser.parse_args(argv)


def neural_models(args: argparse.Namespace, folder: Path) -> tuple[Path, Path, str] | None:
    """(swap model, embedder, what they are): the user's files, or tiny pass-through models
    with their signatures (tests/neural_models.py) written to ``folder``; None without
    the onnx package."""
    if (args.swapper_model is None) != (args.embedder_model is None):
        raise SystemExit("--swapper-model and --embedder-model go together")
    if args.swapper_model is not None:
        return args.swapper_model, args.embedder_model, "your models"
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from neural_models import tiny_embedder, tiny_swapper
    except ImportError:
        return None
    swap_model, _, _ = tiny_swapper(folder / "pass_through_inswapper.onnx")
    return swap_model, tiny_embedder(folder / "tiny_arcface.onnx"), "pass-through model"


def mask_model(given: Path | None, kind: str, folder: Path) -> tuple[Path, str] | None:
    """(model, what it is) of a face ``kind`` (``occluder`` or ``parser``): the user's
    file, or a tiny model with its signature (tests/neural_models.py) written to
    ``folder``; None without the onnx package."""
    if given is not None:
        return given, "your model"
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import neural_models
    except ImportError:
        return None
    build = getattr(neural_models, f"tiny_{kind}")
    return build(folder / f"tiny_{kind}.onnx"), "tiny model"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    out_dir = checked_out_dir(args.out)
    if args.cv2_threads is not None:
        cv2.setNumThreads(args.cv2_threads)
    env = environment()
    images = {img.name: img.frame for img, _ in package_images()}
    if "astronaut" not in images:
        print("scikit-image is needed for the astronaut test frame", file=sys.stderr)
        return 2
    photo = images["astronaut"]
    source_frame = images.get("grace_hopper", photo[:, ::-1].copy())
    print(f"speed benchmark: {args.reps} reps after {args.warmup} warm-up runs per stage")
    print(environment_line(env), flush=True)

    analyser = fw.FaceAnalyser()
    video_analyser = fw.FaceAnalyser(mode="video")
    faces = analyser.get_faces(photo)
    src_faces = analyser.get_faces(source_frame)
    if not faces or not src_faces:
        print("no face found in the package images", file=sys.stderr)
        return 2
    prepare = bench(lambda: fw.Swapper(src_faces[0]), 1, min(args.reps, 10))
    swapper = fw.Swapper(src_faces[0])

    results: dict[str, dict[str, dict[str, float]]] = {}
    frames_info: dict[str, Any] = {}
    for res in args.resolutions:
        frame = make_frame(photo, faces[0].bbox, RESOLUTIONS[res])
        found = analyser.get_faces(frame)
        if not found:
            print(f"{res}: no face found in the test frame", file=sys.stderr)
            continue
        face = found[0]
        det = analyser.detect(frame)[0]
        frames_info[res] = {
            "size": RESOLUTIONS[res],
            "face_box": [round(v, 1) for v in face.bbox],
            "face_height_fraction": round((face.bbox[3] - face.bbox[1]) / frame.shape[0], 3),
        }
        if args.save_frames:
            cv2.imwrite(str(out_dir / f"speed_frame_{res}.png"), frame)
            cv2.imwrite(str(out_dir / f"speed_swap_{res}.png"), swapper.swap(frame, [face]))
        stage_fns: dict[str, Callable[[], object]] = {
            "detect": lambda f=frame: analyser.detect(f),
            "mesh": lambda f=frame, b=det.bbox: analyser.landmarker.fit(f, b),
            "analyse": lambda f=frame: analyser.get_faces(f),
            "swap": lambda f=frame, fc=face: swapper.swap(f, [fc]),
            "end_to_end": lambda f=frame: swapper.swap(f, analyser.get_faces(f)),
            "analyse (video)": lambda f=frame: video_analyser.get_faces(f),
            "end_to_end (video)": lambda f=frame: swapper.swap(f, video_analyser.get_faces(f)),
        }
        results[res] = {}
        for stage in STAGES:
            results[res][stage] = bench(stage_fns[stage], args.warmup, args.reps)
            print(f"  {res} {stage:<18} {fmt(results[res][stage])} ms", flush=True)

    variants: dict[str, dict[str, float]] = {}
    frame = make_frame(photo, faces[0].bbox, RESOLUTIONS["720p"])
    found = analyser.get_faces(frame)
    if found:
        for blend in fw.BLEND_MODES:
            s = swapper.with_options(blend=blend)
            variants[f"blend={blend}"] = bench(
                lambda s=s: s.swap(frame, found[:1]), args.warmup, args.reps
            )
            print(f"  720p swap blend={blend:<9} {fmt(variants[f'blend={blend}'])} ms", flush=True)
        for color in fw.COLOR_MODES:
            s = swapper.with_options(color=color)
            variants[f"color={color}"] = bench(
                lambda s=s: s.swap(frame, found[:1]), args.warmup, args.reps
            )
            print(f"  720p swap color={color:<9} {fmt(variants[f'color={color}'])} ms", flush=True)
        # Optional steps off, one at a time: what each costs; and a fusion between 0
        # and 1 (the mix with the target, and its detail kept at the level between).
        for name, change in (
            ("light=0", {"light": 0.0}),
            ("detail=0", {"detail": 0.0}),
            ("fusion=0.5", {"fusion": 0.5}),
            # The hand search round the face (the frame shows none: its usual case).
            ("mask_hands", {"mask_hands": True}),
        ):
            s = swapper.with_options(**change)
            variants[name] = bench(lambda s=s: s.swap(frame, found[:1]), args.warmup, args.reps)
            print(f"  720p swap {name:<15} {fmt(variants[name])} ms", flush=True)

        # The neural engine around a model: align, mask, colour, paste back (and the
        # model itself when it is the user's).
        rss_mesh = peak_rss_mib()  # before onnxruntime loads
        models = neural_models(args, out_dir)
        if models is not None:
            swap_model, embedder, kind = models
            for boost in (1, 2):
                neural = fw.NeuralSwapper(
                    src_faces[0],
                    swapper_model=swap_model,
                    embedder_model=embedder,
                    pixel_boost=boost,
                )
                name = f"neural, {kind}, pixel_boost={boost}"
                variants[name] = bench(
                    lambda s=neural: s.swap(frame, found[:1]), args.warmup, args.reps
                )
                print(f"  720p swap {name:<15} {fmt(variants[name])} ms", flush=True)

        # Face areas (no model): the lower face only.
        lower = swapper.with_occluder(fw.FaceAreas(["lower-face"]))
        variants["mask_areas=lower-face"] = bench(
            lambda s=lower: s.swap(frame, found[:1]), args.warmup, args.reps
        )
        print(f"  720p swap mask_areas=lower-face {fmt(variants['mask_areas=lower-face'])} ms")

        # The embedded engine with a face occluder, and with a face parser: the cost
        # around the model (and the model's own with your file).
        for kind, given, load in (
            ("occluder", args.occluder_model, fw.FaceOccluder),
            ("parser", args.parser_model, fw.FaceParser),
        ):
            model = mask_model(given, kind, out_dir)
            if model is not None:
                occluded = swapper.with_occluder(load(model[0]))
                name = f"{kind}, {model[1]}"
                variants[name] = bench(
                    lambda s=occluded: s.swap(frame, found[:1]), args.warmup, args.reps
                )
                print(f"  720p swap {name:<15} {fmt(variants[name])} ms", flush=True)

    rss = peak_rss_mib()
    if not found:
        rss_mesh = rss
    defaults = fw.SwapOptions()
    stage_rows = [(stage, *(fmt(results[r][stage]) for r in results)) for stage in STAGES]
    stage_rows.append(
        (
            "end_to_end fps (1000 / median)",
            *(f"{1000 / results[r]['end_to_end']['median']:.1f}" for r in results),
        )
    )
    table = markdown_table(("stage (ms, median / p95)", *results), stage_rows)
    variant_rows = [
        (
            name
            + (
                " (default)"
                if name in (f"blend={defaults.blend}", f"color={defaults.color}")
                else ""
            ),
            fmt(stat),
        )
        for name, stat in variants.items()
    ]
    variant_table = markdown_table(("720p swap variant", "ms, median / p95"), variant_rows)
    print()
    print(f"Environment: {environment_line(env)}")
    print()
    print(table)
    print()
    print(variant_table)
    print()
    print(
        f"Source preparation (Swapper init): {fmt(prepare)} ms; peak RSS: {rss_mesh:.0f} MiB "
        f"({rss:.0f} MiB once the neural rows' onnxruntime sessions are loaded)"
    )
    total = time.perf_counter() - t_start
    print(f"runtime: {total:.1f} s")
    json_path = out_dir / "speed.json"
    write_json(
        json_path,
        {
            "benchmark": "speed",
            "args": {k: str(v) for k, v in vars(args).items()},
            "environment": env,
            "frames": frames_info,
            "swap_options": defaults.__dict__,
            "stages_ms": results,
            "swap_variants_720p_ms": variants,
            "prepare_source_ms": prepare,
            "peak_rss_mib": rss_mesh,
            "peak_rss_mib_with_neural": rss,
            "runtime_s": total,
            "markdown": {"stages": table, "variants": variant_table},
        },
    )
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
