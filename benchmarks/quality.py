"""Swap quality on real photos, judged by dlib (independent of MediaPipe).

For every ordered pair (source, target) of the face set the largest face of the
source is swapped onto the largest face of the target at fusion 1 with the
default options, and the output is measured with dlib:

* identity: L2 distance of dlib's 128-D descriptor of the output face to the
  source's and to the target's descriptors (same person when < 0.6);
* retrieval: the output's nearest source descriptor, among all sources of the
  set, is its own source;
* geometry: dlib 68-point landmarks of the output against those of the target,
  mean point distance over the target's inter-ocular distance, overall and for
  the mouth (points 48-67);
* fusion: swaps at fusion 0, 0.25, 0.5, 0.75, 1 must move d(out, src) down
  strictly, and fusion 0 must return the target (max abs diff <= 1); the grain
  (below) of the fusions between, over the level between the target's and the
  full swap's as the fusion mixes them (``fusion_mix``): under 1, the
  mix of two faces is smoother than both;
* sharpness at 1:1 on large targets (faces at least ``LARGE_FACE`` pixels wide,
  swapped well below their size): the output's fine grain on the cheeks (the
  luma's difference from a Gaussian blur of 1.5 pixels, its standard deviation)
  over the target's own there; 1 is as sharp as the frame around the face; the
  same on every target, and the pairs under ``GRAIN_LOW`` (a face smoother than
  half its frame's grain reads as pasted);
* skin tone: the median colour (CIE Lab, L in 0..100) on the target face's
  cheeks, output less target: the lightness difference and the distance in
  a and b (the target keeps its skin tone; a dark source's shading or a
  colour cast shows here);
* time of ``Swapper.swap`` alone.

How a face is measured (originals and outputs alike): a square crop around the
face's mesh box is resampled so the face is ``NORM_FACE`` pixels wide; dlib's HOG
detector runs on it (no upsampling) and the detection overlapping the expected
box most is used for the 68 landmarks and the descriptor. When HOG finds no
face there, the mesh box converted to a dlib-like box ``(x0, y0 + 0.22 h, x1,
y1)`` is used instead and the fallback is recorded. Outputs are measured in the
crop of the target's mesh box, so output and target landmarks share a frame. For
a target that needed the fallback, the output's landmarks come from that same
box (its descriptor still from its own detection): else the two landmark sets
would differ by their boxes, as HOG often finds the swapped face.

Example:
    python benchmarks/quality.py                  # package images + ../shared faces
    python benchmarks/quality.py --no-shared      # package images only
    python benchmarks/quality.py --limit 5 --fusion-pairs 10
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_OUT_DIR,
    SHARED_FACES_DIR,
    FaceImage,
    checked_out_dir,
    environment,
    environment_line,
    load_face_set,
    markdown_table,
    peak_rss_mib,
    write_csv,
    write_json,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.dlib_backend import DlibIdentity, DlibLandmarks68  # noqa: E402
from faceweave.core.geometry import bbox_iou
from faceweave.processors.swap import fusion_mix

NORM_FACE = 160.0  # face width (mesh box) in pixels inside the measuring crop
CROP_SCALE = 2.4  # measuring crop side, in face sizes
FUSIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
SAME_PERSON = 0.6  # dlib's usual threshold
LARGE_FACE = 300.0  # targets whose grain at 1:1 is measured (face box width, pixels)
# ... and on every target: a swap under half the frame's grain reads as pasted (plastic).
GRAIN_LOW = 0.5
TONE_OFF = 10.0  # a cheek lightness difference that reads as another skin tone (L, 0..100)
# The mesh's cheek points, one ring per cheek (below the eyes, beside the nose).
CHEEKS = ((50, 101, 118, 117, 123, 147, 187, 205), (280, 330, 347, 346, 352, 376, 411, 425))
MOUTH = slice(48, 68)
LEFT_EYE = slice(36, 42)
RIGHT_EYE = slice(42, 48)

BBox = tuple[float, float, float, float]


@dataclass(frozen=True, eq=False)
class Measure:
    """dlib's view of one face.

    Attributes:
        embedding: (128,) float32 descriptor.
        landmarks: (68, 2) float32 frame pixels.
        box: dlib box used, frame pixels.
        fallback: HOG found no face at the expected place; the mesh box was used.
        n_detections: HOG detections in the measuring crop.
    """

    embedding: NDArray[np.float32]
    landmarks: NDArray[np.float32]
    box: BBox
    fallback: bool
    n_detections: int


def dlib_like_box(mesh_box: BBox) -> BBox:
    """The mesh box as dlib frames faces: from the brows down to the chin."""
    x0, y0, x1, y1 = mesh_box
    return (x0, y0 + 0.22 * (y1 - y0), x1, y1)


class DlibJudge:
    """Measures faces with dlib's HOG detector, 68-point predictor and descriptor."""

    def __init__(self) -> None:
        self.landmarker = DlibLandmarks68()
        self.identity = DlibIdentity()

    def measure(self, frame: NDArray[np.uint8], mesh_box: BBox) -> Measure:
        crop, matrix, s = self._crop(frame, mesh_box)
        expected = _box_to_crop(dlib_like_box(mesh_box), matrix, s)
        detections = self.landmarker.detect(crop, upsample=0)
        best = max(detections, key=lambda d: bbox_iou(d, expected), default=None)
        fallback = best is None or bbox_iou(best, expected) < 0.1
        box = expected if fallback or best is None else best
        landmarks = self.landmarker.landmarks(crop, box)
        embedding = self.identity.embed(crop, box)
        back = (landmarks - matrix[:, 2].astype(np.float32)) / np.float32(s)
        frame_box = tuple(float((v - matrix[i % 2, 2]) / s) for i, v in enumerate(box))
        return Measure(embedding, back.astype(np.float32), frame_box, fallback, len(detections))  # type: ignore[arg-type]

    def landmarks_at(
        self, frame: NDArray[np.uint8], mesh_box: BBox, box: BBox
    ) -> NDArray[np.float32]:
        """The 68 landmarks from a given dlib box (frame pixels), in the crop that
        :meth:`measure` takes around ``mesh_box``: no HOG detection."""
        crop, matrix, s = self._crop(frame, mesh_box)
        landmarks = self.landmarker.landmarks(crop, _box_to_crop(box, matrix, s))
        return ((landmarks - matrix[:, 2].astype(np.float32)) / np.float32(s)).astype(np.float32)

    @staticmethod
    def _crop(
        frame: NDArray[np.uint8], mesh_box: BBox
    ) -> tuple[NDArray[np.uint8], NDArray[np.float64], float]:
        """The square crop around a mesh box with the face NORM_FACE pixels wide, its
        frame-to-crop matrix and scale."""
        x0, y0, x1, y1 = mesh_box
        size = max(x1 - x0, y1 - y0, 1.0)
        s = NORM_FACE / size
        side = int(round(CROP_SCALE * NORM_FACE))
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        matrix = np.array([[s, 0, side / 2 - s * cx], [0, s, side / 2 - s * cy]], np.float64)
        interp = cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR
        crop = cv2.warpAffine(
            frame, matrix, (side, side), flags=interp, borderMode=cv2.BORDER_REPLICATE
        )
        return crop, matrix, s


def _box_to_crop(b: BBox, matrix: NDArray[np.float64], s: float) -> BBox:
    return (
        b[0] * s + matrix[0, 2],
        b[1] * s + matrix[1, 2],
        b[2] * s + matrix[0, 2],
        b[3] * s + matrix[1, 2],
    )


def cheek_masks(
    face: fw.Face, shape: tuple[int, ...]
) -> tuple[tuple[int, int, int, int], list[NDArray[np.bool_]]]:
    """The face's box clipped to the frame, and each of its cheeks (mesh hulls, in
    CHEEKS' order) within it."""
    x0, y0, x1, y1 = (int(round(v)) for v in face.bbox)
    h, w = shape[:2]
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    points = face.landmarks_478[:, :2] - np.array([x0, y0], np.float32)
    cheeks = []
    for ring in CHEEKS:
        cheek = np.zeros((y1 - y0, x1 - x0), np.uint8)
        hull = cv2.convexHull(points[list(ring)].astype(np.float32)).astype(np.int32)
        cv2.fillConvexPoly(cheek, hull, 1)
        cheeks.append(cheek > 0)
    return (x0, y0, x1, y1), cheeks


def cheeks_mask(
    face: fw.Face, shape: tuple[int, ...]
) -> tuple[tuple[int, int, int, int], NDArray[np.bool_]]:
    """The face's box clipped to the frame, and its cheeks (mesh hulls) within it."""
    box, (first, second) = cheek_masks(face, shape)
    return box, first | second


def tone_difference(
    out: NDArray[np.uint8], target: NDArray[np.uint8], face: fw.Face
) -> tuple[float, float]:
    """(lightness, a-b distance): the output's median Lab colour on the target face's
    cheeks less the target's own there (L in 0..100)."""
    (x0, y0, x1, y1), on = cheeks_mask(face, target.shape)
    if not on.any():
        return float("nan"), float("nan")

    def median_lab(image: NDArray[np.uint8]) -> NDArray[np.float64]:
        lab = cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_BGR2Lab)[on].astype(np.float64)
        return np.median(lab, axis=0) * np.array([100.0 / 255.0, 1.0, 1.0])

    diff = median_lab(out) - median_lab(target)
    return float(diff[0]), float(np.hypot(diff[1], diff[2]))


def _cheek_labs(
    out: NDArray[np.uint8], target: NDArray[np.uint8], face: fw.Face
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Each cheek's median Lab (rows in CHEEKS' order), of the output and of the
    target, or None when a cheek lies outside the frame."""
    (x0, y0, x1, y1), cheeks = cheek_masks(face, target.shape)
    if not all(cheek.any() for cheek in cheeks):
        return None

    def medians(image: NDArray[np.uint8]) -> NDArray[np.float64]:
        lab = cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_BGR2Lab).astype(np.float64)
        return np.array([np.median(lab[m], axis=0) for m in cheeks])

    return medians(out), medians(target)


def side_tone_difference(out: NDArray[np.uint8], target: NDArray[np.uint8], face: fw.Face) -> float:
    """How far the change of colour from one cheek to the other differs from the
    target's: the a-b distance between (left less right cheek median Lab) of the
    output and of the target. A face under two lights of different colour (a window
    on one side, a lamp on the other) is bluer on one cheek than the other; a swap
    that keeps its photo's own colour across the face scores that difference."""
    labs = _cheek_labs(out, target, face)
    if labs is None:
        return float("nan")
    (left_out, right_out), (left_target, right_target) = labs
    diff = (left_out - right_out) - (left_target - right_target)
    return float(np.hypot(diff[1], diff[2]))


def cheek_tone_distance(out: NDArray[np.uint8], target: NDArray[np.uint8], face: fw.Face) -> float:
    """How far the output's colour is from the target's on its worse cheek: the a-b
    distance between the output's and the target's median Lab over each cheek, the
    larger of the two. A swap that matches the face's colour on average can still
    leave one cheek off (greener, greyer) where the target's light differs from
    side to side; this reads that cheek."""
    labs = _cheek_labs(out, target, face)
    if labs is None:
        return float("nan")
    diff = labs[0] - labs[1]
    return float(np.hypot(diff[:, 1], diff[:, 2]).max())


def grain_ratio(out: NDArray[np.uint8], target: NDArray[np.uint8], face: fw.Face) -> float:
    """The output's fine grain on the target face's cheeks over the target's own."""
    (x0, y0, x1, y1), on = cheeks_mask(face, target.shape)

    def grain(image: NDArray[np.uint8]) -> float:
        grey = cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_BGR2GRAY).astype(np.float32)
        return float((grey - cv2.GaussianBlur(grey, (0, 0), 1.5))[on].std())

    return grain(out) / max(grain(target), 1e-6)


def inter_ocular(landmarks: NDArray[np.float32]) -> float:
    return float(np.linalg.norm(landmarks[LEFT_EYE].mean(0) - landmarks[RIGHT_EYE].mean(0)))


def landmark_errors(out: NDArray[np.float32], target: NDArray[np.float32]) -> tuple[float, float]:
    """(all 68, mouth) mean point distance over the target's inter-ocular distance."""
    iod = max(inter_ocular(target), 1e-6)
    dist = np.linalg.norm(out - target, axis=1)
    return float(dist.mean() / iod), float(dist[MOUTH].mean() / iod)


def dist(a: NDArray[np.float32], b: NDArray[np.float32]) -> float:
    return float(np.linalg.norm(a - b))


@dataclass
class Subject:
    """One image of the set, analysed once and reused as source and target."""

    image: FaceImage
    face: fw.Face | None = None
    measure: Measure | None = None
    error: str = ""
    thumb: NDArray[np.uint8] | None = None
    swappers: dict[float, fw.Swapper] = field(default_factory=dict)


def face_thumb(frame: NDArray[np.uint8], mesh_box: BBox | None, size: int) -> NDArray[np.uint8]:
    """A square crop around the face (1.7 face sizes), ``size`` pixels."""
    if mesh_box is None:
        h, w = frame.shape[:2]
        mesh_box = (0.0, 0.0, float(w), float(h))
        scale = 1.0
    else:
        scale = 1.7
    x0, y0, x1, y1 = mesh_box
    side = scale * max(x1 - x0, y1 - y0, 1.0)
    s = size / side
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    matrix = np.array([[s, 0, size / 2 - s * cx], [0, s, size / 2 - s * cy]], np.float64)
    interp = cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR
    return cv2.warpAffine(frame, matrix, (size, size), flags=interp, borderMode=cv2.BORDER_CONSTANT)


def analyse_subjects(
    images: list[FaceImage], analyser: fw.FaceAnalyser, judge: DlibJudge, thumb: int
) -> list[Subject]:
    subjects = []
    for image in images:
        subject = Subject(image)
        try:
            faces = analyser.get_faces(image.frame)
        except Exception as exc:  # noqa: BLE001 - a benchmark records every failure
            subject.error = f"analyser error: {type(exc).__name__}: {exc}"
            faces = []
        if faces:
            subject.face = faces[0]
            subject.measure = judge.measure(image.frame, faces[0].bbox)
        elif not subject.error:
            subject.error = "no face found by the analyser"
        subject.thumb = face_thumb(image.frame, subject.face.bbox if subject.face else None, thumb)
        subjects.append(subject)
    return subjects


def fusion_pairs(n: int, count: int | None, rng: np.random.Generator) -> set[tuple[int, int]]:
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if count is None or count >= len(pairs):
        return set(pairs)
    picked = rng.choice(len(pairs), size=max(count, 0), replace=False)
    return {pairs[k] for k in picked}


def run_pairs(
    subjects: list[Subject],
    judge: DlibJudge,
    sweep: set[tuple[int, int]],
    thumb: int,
    verbose: bool,
    options: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[tuple[int, int], NDArray[np.uint8]]]:
    """Swap and measure every ordered pair; returns per-pair records and output thumbnails.

    ``options`` are :class:`~faceweave.SwapOptions` fields that differ from the defaults.
    """
    options = dict(options or {})
    sources = [(k, s.measure.embedding) for k, s in enumerate(subjects) if s.measure is not None]
    source_ids = np.array([k for k, _ in sources])
    source_matrix = np.stack([e for _, e in sources]) if sources else np.zeros((0, 128), np.float32)
    records: list[dict[str, Any]] = []
    thumbs: dict[tuple[int, int], NDArray[np.uint8]] = {}
    n = len(subjects)
    start = time.perf_counter()
    for i, src in enumerate(subjects):
        for j, tgt in enumerate(subjects):
            if i == j:
                continue
            rec: dict[str, Any] = {
                "source": src.image.name,
                "target": tgt.image.name,
                "failure": "",
            }
            records.append(rec)
            if src.face is None:
                rec["failure"] = "no_source_face"
                continue
            if tgt.face is None:
                rec["failure"] = "no_target_face"
                continue
            try:
                swapper = src.swappers.get(1.0)
                if swapper is None:
                    swapper = src.swappers[1.0] = fw.Swapper(src.face, **{**options, "fusion": 1.0})
                t0 = time.perf_counter()
                out = swapper.swap(tgt.image.frame, [tgt.face])
                rec["swap_ms"] = (time.perf_counter() - t0) * 1e3
            except Exception as exc:  # noqa: BLE001
                rec["failure"] = f"engine_error: {type(exc).__name__}: {exc}"
                continue
            assert src.measure is not None and tgt.measure is not None
            m = judge.measure(out, tgt.face.bbox)
            thumbs[(i, j)] = face_thumb(out, tgt.face.bbox, thumb)
            rec["d_src"] = dist(m.embedding, src.measure.embedding)
            rec["d_tgt"] = dist(m.embedding, tgt.measure.embedding)
            rec["d_src_tgt"] = dist(src.measure.embedding, tgt.measure.embedding)
            nearest = np.linalg.norm(source_matrix - m.embedding, axis=1)
            rec["nearest_source"] = subjects[int(source_ids[int(nearest.argmin())])].image.name
            rec["retrieved"] = bool(source_ids[int(nearest.argmin())] == i)
            out_landmarks = m.landmarks
            if tgt.measure.fallback:
                # The target has no HOG face, so its landmarks come from its mesh box's
                # dlib-like box: the output's come from that box too, or the two sets
                # would differ by their boxes (HOG often finds the swapped face).
                out_landmarks = judge.landmarks_at(out, tgt.face.bbox, tgt.measure.box)
            rec["lmk_err"], rec["mouth_err"] = landmark_errors(out_landmarks, tgt.measure.landmarks)
            rec["out_fallback"] = m.fallback
            rec["tgt_fallback"] = tgt.measure.fallback
            rec["src_fallback"] = src.measure.fallback
            rec["out_detections"] = m.n_detections
            rec["tone_dl"], rec["tone_dab"] = tone_difference(out, tgt.image.frame, tgt.face)
            rec["tone_side"] = side_tone_difference(out, tgt.image.frame, tgt.face)
            rec["grain_all"] = grain_ratio(out, tgt.image.frame, tgt.face)
            if tgt.face.size >= LARGE_FACE:
                rec["grain_ratio"] = rec["grain_all"]
            if m.fallback and not tgt.measure.fallback:
                rec["failure"] = "no_dlib_face"
            if (i, j) in sweep:
                sweep_record(rec, src, tgt, out, m, judge)
        if verbose:
            done = (i + 1) * (n - 1)
            took = time.perf_counter() - start
            print(f"  source {i + 1}/{n} {src.image.name}: {done} pairs, {took:.0f} s", flush=True)
    return records, thumbs


def sweep_record(
    rec: dict[str, Any],
    src: Subject,
    tgt: Subject,
    out_full: NDArray[np.uint8],
    m_full: Measure,
    judge: DlibJudge,
) -> None:
    """Fusion 0..1: d(out, src) per step, strict monotonicity, fusion-0 identity, and
    the grain of the fusions between over the level between the ends' grain."""
    assert src.face is not None and tgt.face is not None and src.measure is not None
    base = src.swappers[1.0]
    d_by_fusion: list[float] = []
    grains: list[float] = []
    for f in FUSIONS:
        if f == 1.0:
            d_by_fusion.append(rec["d_src"])
            continue
        swapper = src.swappers.get(f)
        if swapper is None:
            swapper = src.swappers[f] = base.with_options(fusion=f)
        out = swapper.swap(tgt.image.frame, [tgt.face])
        if f == 0.0:
            diff = np.abs(out.astype(np.int16) - tgt.image.frame.astype(np.int16))
            rec["fusion0_max_diff"] = int(diff.max())
        elif np.isfinite(rec.get("grain_all", np.nan)):
            # The grain between the target's (1) and the full swap's, as the fusion
            # mixes the two faces.
            mix = fusion_mix(f)
            between = (1.0 - mix) + mix * rec["grain_all"]
            grains.append(grain_ratio(out, tgt.image.frame, tgt.face) / max(between, 1e-6))
        d_by_fusion.append(dist(judge.measure(out, tgt.face.bbox).embedding, src.measure.embedding))
    steps = np.diff(d_by_fusion)
    rec["d_src_by_fusion"] = [round(d, 4) for d in d_by_fusion]
    rec["monotonic"] = bool(np.all(steps < 0))
    rec["worst_rise"] = float(max(steps.max(), 0.0))
    rec["rises"] = [
        f"{FUSIONS[k]}->{FUSIONS[k + 1]}:+{steps[k]:.3f}"
        for k in range(len(steps))
        if steps[k] >= 0
    ]
    if grains:
        rec["fusion_grain"] = float(np.mean(grains))


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def summarise(subjects: list[Subject], records: list[dict[str, Any]]) -> dict[str, Any]:
    measured = [r for r in records if "d_src" in r]
    swept = [r for r in measured if "monotonic" in r]
    toned = [r for r in measured if np.isfinite(r.get("tone_dl", np.nan))]
    failures: dict[str, int] = {}
    for r in records:
        if r["failure"]:
            key = r["failure"].split(":")[0]
            failures[key] = failures.get(key, 0) + 1
    return {
        "n_images": len(subjects),
        "n_images_no_face": sum(s.face is None for s in subjects),
        "n_images_no_dlib_face": sum(
            s.measure is not None and s.measure.fallback for s in subjects
        ),
        "n_pairs": len(records),
        "n_measured": len(measured),
        "retrieval_rate": _mean([float(r["retrieved"]) for r in measured]),
        "same_person_rate": _mean([float(r["d_src"] < SAME_PERSON) for r in measured]),
        "closer_to_src_rate": _mean([float(r["d_src"] < r["d_tgt"]) for r in measured]),
        "d_src_mean": _mean([r["d_src"] for r in measured]),
        "d_src_median": _median([r["d_src"] for r in measured]),
        "d_tgt_mean": _mean([r["d_tgt"] for r in measured]),
        "d_src_tgt_mean": _mean([r["d_src_tgt"] for r in measured]),
        "lmk_err_mean": _mean([r["lmk_err"] for r in measured]),
        "mouth_err_mean": _mean([r["mouth_err"] for r in measured]),
        "lmk_err_median": _median([r["lmk_err"] for r in measured]),
        "failures": failures,
        "n_failures": sum(failures.values()),
        "out_fallbacks": sum(bool(r.get("out_fallback")) for r in measured),
        "n_fusion_pairs": len(swept),
        "monotonic_pairs": sum(r["monotonic"] for r in swept),
        "fusion0_max_diff": max((r["fusion0_max_diff"] for r in swept), default=None),
        "fusion_grain_mean": _mean([r["fusion_grain"] for r in swept if "fusion_grain" in r]),
        "tone_dl_abs_mean": _mean([abs(r["tone_dl"]) for r in toned]),
        "tone_dl_mean": _mean([r["tone_dl"] for r in toned]),
        "tone_dab_mean": _mean([r["tone_dab"] for r in toned]),
        "tone_off_pairs": sum(abs(r["tone_dl"]) > TONE_OFF for r in toned),
        "tone_side_mean": _mean(
            [r["tone_side"] for r in measured if np.isfinite(r.get("tone_side", np.nan))]
        ),
        "n_large_target_pairs": sum("grain_ratio" in r for r in measured),
        "grain_ratio_large_mean": _mean([r["grain_ratio"] for r in measured if "grain_ratio" in r]),
        "grain_ratio_mean": _mean([r["grain_all"] for r in measured if "grain_all" in r]),
        "grain_low_pairs": sum(r["grain_all"] < GRAIN_LOW for r in measured if "grain_all" in r),
        "swap_ms_median": _median([r["swap_ms"] for r in measured]),
        "swap_ms_p95": float(np.percentile([r["swap_ms"] for r in measured], 95))
        if measured
        else float("nan"),
    }


def summary_table(s: dict[str, Any]) -> str:
    fails = ", ".join(f"{k} {v}" for k, v in sorted(s["failures"].items())) or "none"
    rows = [
        (
            "images (no analyser face / no dlib face)",
            f"{s['n_images']} ({s['n_images_no_face']} / {s['n_images_no_dlib_face']})",
        ),
        ("ordered pairs (measured)", f"{s['n_pairs']} ({s['n_measured']})"),
        ("identity retrieval rate (nearest source is own source)", f"{s['retrieval_rate']:.1%}"),
        ("d(out, src) < 0.6 (dlib 'same person')", f"{s['same_person_rate']:.1%}"),
        ("d(out, src) < d(out, tgt)", f"{s['closer_to_src_rate']:.1%}"),
        ("d(out, src) mean / median", f"{s['d_src_mean']:.3f} / {s['d_src_median']:.3f}"),
        ("d(out, tgt) mean", f"{s['d_tgt_mean']:.3f}"),
        ("d(src, tgt) mean (originals, for scale)", f"{s['d_src_tgt_mean']:.3f}"),
        (
            "landmark error mean / median (x inter-ocular)",
            f"{s['lmk_err_mean']:.3f} / {s['lmk_err_median']:.3f}",
        ),
        ("mouth landmark error mean (x inter-ocular)", f"{s['mouth_err_mean']:.3f}"),
        ("failures", f"{s['n_failures']} ({fails})"),
        ("outputs measured with the mesh-box fallback", str(s["out_fallbacks"])),
        (
            "fusion sweep: strictly monotonic pairs",
            f"{s['monotonic_pairs']} / {s['n_fusion_pairs']}",
        ),
        (
            "fusion 0: max abs diff to target (grey levels)",
            "-" if s["fusion0_max_diff"] is None else str(s["fusion0_max_diff"]),
        ),
        (
            "fusion .25, .5, .75: grain over the level between fusion 0's and 1's, mean",
            f"{s['fusion_grain_mean']:.2f}" if np.isfinite(s["fusion_grain_mean"]) else "-",
        ),
        (
            "skin tone on the cheeks, output - target: mean |dL| (mean dL) / mean d(a, b)",
            f"{s['tone_dl_abs_mean']:.1f} ({s['tone_dl_mean']:+.1f}) / {s['tone_dab_mean']:.1f}",
        ),
        (
            f"pairs whose cheeks' lightness is off by over {TONE_OFF:.0f} L",
            str(s["tone_off_pairs"]),
        ),
        (
            "cheek-to-cheek colour change, output against target: mean d(a, b)",
            f"{s['tone_side_mean']:.1f}",
        ),
        (
            f"grain at 1:1 on targets >= {LARGE_FACE:.0f} px, output / target (pairs)",
            f"{s['grain_ratio_large_mean']:.2f} ({s['n_large_target_pairs']})",
        ),
        (
            f"grain at 1:1 on every target, output / target: mean; pairs under {GRAIN_LOW}",
            f"{s['grain_ratio_mean']:.2f}; {s['grain_low_pairs']}",
        ),
        ("Swapper.swap ms median / p95", f"{s['swap_ms_median']:.1f} / {s['swap_ms_p95']:.1f}"),
    ]
    return markdown_table(("metric", "value"), rows)


def per_image_table(
    subjects: list[Subject], records: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    rows = []
    out = []
    for s in subjects:
        as_src = [r for r in records if r["source"] == s.image.name and "d_src" in r]
        as_tgt = [r for r in records if r["target"] == s.image.name and "d_src" in r]
        pose = s.face.pose if s.face else None
        item = {
            "image": s.image.name,
            "yaw": round(pose.yaw, 1) if pose else None,
            "dlib_fallback": bool(s.measure.fallback) if s.measure else None,
            "src_d_src": _mean([r["d_src"] for r in as_src]),
            "src_retrieval": _mean([float(r["retrieved"]) for r in as_src]),
            "src_tone_dl": _mean([r["tone_dl"] for r in as_src if np.isfinite(r["tone_dl"])]),
            "tgt_d_src": _mean([r["d_src"] for r in as_tgt]),
            "tgt_lmk_err": _mean([r["lmk_err"] for r in as_tgt]),
            "tgt_mouth_err": _mean([r["mouth_err"] for r in as_tgt]),
            "note": s.error,
        }
        out.append(item)
        rows.append(
            (
                item["image"],
                "-" if pose is None else f"{pose.yaw:+.0f}",
                "-" if s.measure is None else ("yes" if s.measure.fallback else "no"),
                f"{item['src_d_src']:.3f}",
                f"{item['src_retrieval']:.0%}" if as_src else "-",
                f"{item['src_tone_dl']:+.1f}",
                f"{item['tgt_d_src']:.3f}",
                f"{item['tgt_lmk_err']:.3f}",
                f"{item['tgt_mouth_err']:.3f}",
            )
        )
    headers = (
        "image",
        "yaw",
        "dlib fallback",
        "as source: d(out,src)",
        "as source: retrieval",
        "as source: cheeks' dL",
        "as target: d(out,src)",
        "as target: lmk err",
        "as target: mouth err",
    )
    return markdown_table(headers, rows), out


def worst_table(
    records: list[dict[str, Any]], key: str, n: int = 10, absolute: bool = False
) -> str:
    """The ``n`` pairs with the largest ``key`` (its absolute value with ``absolute``)."""
    measured = sorted(
        (r for r in records if key in r and np.isfinite(r[key])),
        key=lambda r: -abs(r[key]) if absolute else -r[key],
    )[:n]
    rows = [
        (
            r["source"],
            r["target"],
            f"{r['d_src']:.3f}",
            f"{r['d_tgt']:.3f}",
            f"{r['lmk_err']:.3f}",
            f"{r['mouth_err']:.3f}",
            f"{r['tone_dl']:+.1f}",
            "yes" if r["retrieved"] else f"no ({r['nearest_source']})",
            "yes" if r["out_fallback"] else "no",
        )
        for r in measured
    ]
    headers = (
        "source",
        "target",
        "d(out,src)",
        "d(out,tgt)",
        "lmk err",
        "mouth err",
        "cheeks' dL",
        "retrieved",
        "fallback",
    )
    return markdown_table(headers, rows)


# --- contact sheets -----------------------------------------------------------------------------


def _label(tile: NDArray[np.uint8], text: str) -> NDArray[np.uint8]:
    strip = np.full((18, tile.shape[1], 3), 24, np.uint8)
    cv2.putText(
        strip, text, (4, 13), cv2.FONT_HERSHEY_SIMPLEX, 0.38, (235, 235, 235), 1, cv2.LINE_AA
    )
    return np.vstack([tile, strip])


def contact_sheet(
    subjects: list[Subject],
    thumbs: dict[tuple[int, int], NDArray[np.uint8]],
    pairs: list[tuple[int, int]],
    records_by_pair: dict[tuple[int, int], dict[str, Any]],
    *,
    per_row: int,
    thumb: int,
    title: str,
) -> NDArray[np.uint8]:
    """Rows of (source | target | output) triplets, each labelled under it."""
    blank = np.full((thumb, thumb, 3), 64, np.uint8)
    cells = []
    for i, j in pairs:
        out = thumbs.get((i, j), blank)
        triplet = np.hstack([subjects[i].thumb, subjects[j].thumb, out])
        rec = records_by_pair.get((i, j), {})
        text = f"{subjects[i].image.name[:18]} > {subjects[j].image.name[:18]}"
        if "d_src" in rec:
            text += f"  ds {rec['d_src']:.2f} dt {rec['d_tgt']:.2f} lm {rec['lmk_err']:.2f}"
        elif rec.get("failure"):
            text += f"  {rec['failure'][:30]}"
        cells.append(_label(triplet, text))
    if not cells:
        cells = [_label(np.hstack([blank] * 3), "no pairs")]
    gap = 6
    cell_h, cell_w = cells[0].shape[:2]
    rows = math.ceil(len(cells) / per_row)
    head = 28
    sheet = np.full(
        (head + rows * (cell_h + gap), per_row * (cell_w + gap) - gap, 3), 255, np.uint8
    )
    cv2.putText(sheet, title, (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1, cv2.LINE_AA)
    for k, cell in enumerate(cells):
        r, c = divmod(k, per_row)
        y, x = head + r * (cell_h + gap), c * (cell_w + gap)
        sheet[y : y + cell_h, x : x + cell_w] = cell
    return sheet


def stratified_pairs(n: int, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """About ``count`` pairs where every image is a source and a target equally often."""
    if n < 2:
        return []
    offsets = rng.permutation(np.arange(1, n))
    pairs: list[tuple[int, int]] = []
    for offset in offsets:
        for i in range(n):
            pairs.append((i, int((i + offset) % n)))
            if len(pairs) >= count:
                return pairs
    return pairs


def write_sheets(
    out_dir: Path,
    subjects: list[Subject],
    thumbs: dict[tuple[int, int], NDArray[np.uint8]],
    records: list[dict[str, Any]],
    *,
    sheet_pairs: int,
    sheet_source: str | None,
    per_row: int,
    thumb: int,
    rng: np.random.Generator,
) -> list[Path]:
    n = len(subjects)
    index = {s.image.name: k for k, s in enumerate(subjects)}
    by_pair = {(index[r["source"]], index[r["target"]]): r for r in records}
    all_pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    written = []

    def save(name: str, pairs: list[tuple[int, int]], title: str) -> None:
        sheet = contact_sheet(
            subjects, thumbs, pairs, by_pair, per_row=per_row, thumb=thumb, title=title
        )
        path = out_dir / name
        cv2.imwrite(str(path), sheet, [cv2.IMWRITE_JPEG_QUALITY, 88])
        written.append(path)

    if len(all_pairs) <= sheet_pairs:
        save(
            "contact_sheet.jpg",
            all_pairs,
            f"all {len(all_pairs)} pairs: source | target | output (fusion 1)",
        )
    else:
        pairs = stratified_pairs(n, sheet_pairs, rng)
        save(
            "contact_sheet.jpg",
            pairs,
            f"{len(pairs)} of {len(all_pairs)} pairs, stratified: source | target | output",
        )
    fixed = index.get(sheet_source, 0) if sheet_source else 0
    if n > 1:
        pairs = [(fixed, j) for j in range(n) if j != fixed]
        save(
            "contact_sheet_fixed_source.jpg",
            pairs,
            f"every target from source {subjects[fixed].image.name}",
        )
        worst = sorted((r for r in records if "d_src" in r), key=lambda r: -r["d_src"])[
            : 4 * per_row
        ]
        save(
            "contact_sheet_worst.jpg",
            [(index[r["source"]], index[r["target"]]) for r in worst],
            "worst pairs by d(out, src)",
        )
    return written


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--faces",
        type=Path,
        default=SHARED_FACES_DIR,
        help="face images: the single-face ones a MANIFEST.tsv lists, or every image "
        "of a folder without one (default: %(default)s)",
    )
    parser.add_argument(
        "--no-shared", action="store_true", help="package images only (ignore --faces)"
    )
    parser.add_argument(
        "--no-packages", action="store_true", help="skip the images shipped in packages"
    )
    parser.add_argument("--limit", type=int, default=None, help="use only the first N images")
    parser.add_argument(
        "--fusion-pairs",
        type=int,
        default=None,
        help="fusion sweep on N random pairs (default: all, 0: none)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="report folder under out/ (default: %(default)s)",
    )
    parser.add_argument(
        "--sheet-pairs", type=int, default=60, help="pairs on the main contact sheet"
    )
    parser.add_argument(
        "--sheet-source", default=None, help="image name of the fixed source sheet (default: first)"
    )
    parser.add_argument("--per-row", type=int, default=4, help="triplets per contact-sheet row")
    parser.add_argument("--thumb", type=int, default=160, help="thumbnail side in pixels")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    add_swap_option_argument(parser)
    return parser.parse_args(argv)


def add_swap_option_argument(parser: argparse.ArgumentParser) -> None:
    """``--option KEY=VALUE``, repeatable: SwapOptions fields to change (read them with
    swap_option_overrides)."""
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a SwapOptions field to change, e.g. --option shape=0.3 --option color=rct",
    )


def swap_option_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as typed :class:`~faceweave.SwapOptions` overrides."""
    defaults = fw.SwapOptions()
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in defaults.__dataclass_fields__ or key == "fusion":
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE with a SwapOptions field")
        kind = type(getattr(defaults, key))
        overrides[key] = text.lower() in ("1", "true", "yes") if kind is bool else kind(text)
    fw.SwapOptions(**overrides).validated()
    return overrides


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = swap_option_overrides(args.option)
    t_start = time.perf_counter()
    out_dir = checked_out_dir(args.out)
    rng = np.random.default_rng(args.seed)
    faces_dir = None if args.no_shared else args.faces
    images = load_face_set(faces_dir=faces_dir, use_packages=not args.no_packages, limit=args.limit)
    if len(images) < 2:
        print("need at least two face images", file=sys.stderr)
        return 2
    env = environment()
    print(
        f"quality benchmark: {len(images)} images, {len(images) * (len(images) - 1)} ordered pairs"
    )
    print(environment_line(env), flush=True)

    analyser = fw.FaceAnalyser()
    judge = DlibJudge()
    t0 = time.perf_counter()
    subjects = analyse_subjects(images, analyser, judge, args.thumb)
    t_analyse = time.perf_counter() - t0
    for s in subjects:
        if s.error:
            print(f"  {s.image.name}: {s.error}")
    # Warm-up: the first swap of a process pays one-off costs that are not the engine's speed.
    ready = [s for s in subjects if s.face is not None]
    if len(ready) >= 2:
        fw.Swapper(ready[0].face).swap(ready[1].image.frame, [ready[1].face])  # type: ignore[arg-type]

    sweep = fusion_pairs(len(subjects), args.fusion_pairs, rng)
    t0 = time.perf_counter()
    records, thumbs = run_pairs(
        subjects, judge, sweep, args.thumb, verbose=not args.quiet, options=options
    )
    t_pairs = time.perf_counter() - t0

    summary = summarise(subjects, records)
    t0 = time.perf_counter()
    sheets = write_sheets(
        out_dir,
        subjects,
        thumbs,
        records,
        sheet_pairs=args.sheet_pairs,
        sheet_source=args.sheet_source,
        per_row=args.per_row,
        thumb=args.thumb,
        rng=rng,
    )
    t_sheets = time.perf_counter() - t0
    runtime = {
        "analyse_originals_s": t_analyse,
        "pairs_s": t_pairs,
        "sheets_s": t_sheets,
        "total_s": time.perf_counter() - t_start,
    }
    summary["runtime_s"] = runtime["total_s"]
    summary["peak_rss_mib"] = peak_rss_mib()

    per_image_md, per_image = per_image_table(subjects, records)
    violations = [
        {k: r[k] for k in ("source", "target", "d_src_by_fusion", "rises", "worst_rise")}
        for r in records
        if r.get("monotonic") is False
    ]
    print()
    print(summary_table(summary))
    print()
    print("Per image (means over the pairs it takes part in):")
    print(per_image_md)
    print()
    print("Worst 10 pairs by d(out, src):")
    print(worst_table(records, "d_src"))
    print()
    print("Worst 10 pairs by landmark error:")
    print(worst_table(records, "lmk_err"))
    print()
    print("Worst 10 pairs by skin tone (the cheeks' lightness, output less target):")
    print(worst_table(records, "tone_dl", absolute=True))
    if violations:
        print(f"\nFusion monotonicity violations ({len(violations)}):")
        for v in violations[:30]:
            print(
                f"  {v['source']} > {v['target']}: d_src {v['d_src_by_fusion']}"
                f"  rises {', '.join(v['rises'])}"
            )
        if len(violations) > 30:
            print(f"  ... {len(violations) - 30} more in the JSON report")

    csv_path = out_dir / "quality_pairs.csv"
    flat = [{k: v for k, v in r.items() if k not in ("d_src_by_fusion", "rises")} for r in records]
    keys: list[str] = []
    for r in flat:
        keys.extend(k for k in r if k not in keys)
    write_csv(csv_path, [{k: r.get(k, "") for k in keys} for r in flat])
    json_path = out_dir / "quality.json"
    write_json(
        json_path,
        {
            "benchmark": "quality",
            "args": {k: str(v) for k, v in vars(args).items()},
            "environment": env,
            "method": {
                "norm_face_px": NORM_FACE,
                "crop_scale": CROP_SCALE,
                "fusions": FUSIONS,
                "same_person_threshold": SAME_PERSON,
                "swap_options": fw.SwapOptions(**options).__dict__,
            },
            "images": [
                {
                    "name": s.image.name,
                    "origin": s.image.origin,
                    "note": s.image.note,
                    "error": s.error,
                }
                for s in subjects
            ],
            "summary": summary,
            "runtime_s": runtime,
            "per_image": per_image,
            "fusion_violations": violations,
            "pairs": records,
        },
    )
    print(
        f"\nruntime: {runtime['total_s']:.1f} s total (analyse {t_analyse:.1f} s, "
        f"pairs {t_pairs:.1f} s, sheets {t_sheets:.1f} s); "
        f"peak RSS {summary['peak_rss_mib']:.0f} MiB"
    )
    print(f"wrote {json_path}, {csv_path}")
    for path in sheets:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
