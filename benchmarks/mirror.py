"""Mirror images: whether the swap treats a photo and its mirror image alike.

A photo and its mirror image show the same face, and a swap of the two mirrored
back should be the same picture up to the mesh's own small differences (MediaPipe
fits a mirrored face a pixel or two apart). Where the engine decides by a threshold
(is the thing at the chin a microphone to paint out; is an eye clear enough to
draw; is this hair), a photo near it can be decided one way and its mirror image the
other: a user then sees a different face for a small shift of the mesh, and so
does a video from frame to frame.

For every single-face image of the face set (the package images, plus
``../shared/data/faces`` when present):

- its source texture is prepared from the photo and from its mirror image
  (mirrored back): reported are the mean difference over the texels both saw
  (grey levels) and the share of them more than APART apart;
- every ordered pair is swapped twice: the photos, and their mirror images (the
  output mirrored back). Reported: the 99th percentile of the two outputs'
  difference in the target face's box, blurred by a 30th of the box (a patch that
  differs, not the mesh's pixel shifts along every edge), as a median over the
  pairs and for the worst ones, and a sheet of the worst pairs to look at (the
  swap, the mirrored swap mirrored back, their difference; internal use, as the
  quality benchmark's sheets: several shared photos are for internal testing only).

    python benchmarks/mirror.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    face_set_parser,
    face_set_start,
    markdown_table,
    write_json,
)

import faceweave as fw  # noqa: E402

APART = 25.0  # grey levels: texels this far apart count as decided differently
THUMB = 200  # px: the sheet's tiles


def mirrored(frame: NDArray[np.uint8]) -> NDArray[np.uint8]:
    return np.ascontiguousarray(frame[:, ::-1])


def face_box(face: fw.Face, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The face's box (x0, y0, x1, y1) in whole pixels, within a frame of ``shape``."""
    h, w = shape[:2]
    x0, y0, x1, y1 = (int(round(v)) for v in face.bbox)
    return max(0, x0), max(0, y0), min(w, x1), min(h, y1)


def patch_difference(
    first: NDArray[np.uint8], second: NDArray[np.uint8], box: tuple[int, int, int, int]
) -> tuple[float, NDArray[np.float32]]:
    """The 99th percentile of two frames' difference (channels' mean, blurred by a
    30th of the box's width) in ``box`` (x0, y0, x1, y1), and that blurred difference
    there."""
    x0, y0, x1, y1 = box
    diff = np.abs(first.astype(np.float32) - second.astype(np.float32)).mean(2)
    sigma = max(2.0, (x1 - x0) / 30.0)
    blurred = cv2.GaussianBlur(diff, (0, 0), sigma)[y0:y1, x0:x1]
    return float(np.percentile(blurred, 99)), blurred


def tile(image: NDArray[np.uint8], label: str = "") -> NDArray[np.uint8]:
    h, w = image.shape[:2]
    scale = THUMB / max(h, w)
    out = cv2.resize(image, (max(1, round(w * scale)), max(1, round(h * scale))))
    out = cv2.copyMakeBorder(
        out, 0, THUMB - out.shape[0], 0, THUMB - out.shape[1], cv2.BORDER_CONSTANT
    )
    if label:
        cv2.putText(out, label, (4, THUMB - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 255, 255), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = face_set_parser(__doc__)
    parser.add_argument("--sheet", type=int, default=8, help="worst pairs on the sheet")
    args = parser.parse_args(argv)
    out_dir, env, images = face_set_start(args)
    analyser = fw.FaceAnalyser()
    began = time.perf_counter()
    # (name, photo, its face, the mirror image, its face)
    subjects: list[tuple[str, NDArray[np.uint8], fw.Face, NDArray[np.uint8], fw.Face]] = []
    one_way: list[str] = []  # a face found in the photo or its mirror image, not both
    for image in images:
        flipped = mirrored(image.frame)
        faces, faces_m = analyser.get_faces(image.frame), analyser.get_faces(flipped)
        if not faces or not faces_m:
            if faces or faces_m:
                one_way.append(image.name)
            continue
        face = max(faces, key=lambda f: f.size)
        face_m = max(faces_m, key=lambda f: f.size)
        subjects.append((image.name, image.frame, face, flipped, face_m))
    if len(subjects) < 2:
        print("fewer than two images with a face", file=sys.stderr)
        return 2
    swappers = []
    textures: list[dict[str, Any]] = []
    for name, _, face, _, face_m in subjects:
        pair = (fw.Swapper(face), fw.Swapper(face_m))
        swappers.append(pair)
        a, b = pair[0].source, pair[1].source
        seen = (a.valid > 0.5) & (b.valid[:, ::-1] > 0.5)
        apart = np.abs(a.texture - b.texture[:, ::-1]).mean(-1)[seen]
        textures.append(
            {
                "source": name,
                "mean": round(float(apart.mean()), 2),
                "share_apart": round(float((apart > APART).mean()), 4),
            }
        )
        print(f"  {name}: texture {apart.mean():.1f} apart, {100 * (apart > APART).mean():.1f}%")
    pairs: list[dict[str, Any]] = []
    for i, (source_name, *_) in enumerate(subjects):
        swapper, swapper_m = swappers[i]
        for j, (target_name, frame, face, flipped, face_m) in enumerate(subjects):
            if i == j:
                continue
            out = swapper.swap(frame, [face])
            out_m = mirrored(swapper_m.swap(flipped, [face_m]))
            p99, _ = patch_difference(out, out_m, face_box(face, frame.shape))
            pairs.append({"source": source_name, "target": target_name, "p99": round(p99, 2)})
        print(f"  {source_name}: swapped both ways onto {len(subjects) - 1} targets", flush=True)
    p99s = np.array([p["p99"] for p in pairs])
    ranked = sorted(pairs, key=lambda p: -p["p99"])
    # The sheet: the worst pairs again (swaps are cheap beside keeping them all).
    index = {name: k for k, (name, *_) in enumerate(subjects)}
    rows = []
    for p in ranked[: args.sheet]:
        i, j = index[p["source"]], index[p["target"]]
        _, frame, face, flipped, face_m = subjects[j]
        out = swappers[i][0].swap(frame, [face])
        out_m = mirrored(swappers[i][1].swap(flipped, [face_m]))
        box = face_box(face, frame.shape)
        _, blurred = patch_difference(out, out_m, box)
        heat = cv2.applyColorMap(np.clip(blurred * 4.0, 0, 255).astype(np.uint8), cv2.COLORMAP_JET)
        crop = (slice(box[1], box[3]), slice(box[0], box[2]))
        label = f"{p['source'][:12]} > {p['target'][:12]}"
        rows.append(np.hstack([tile(out[crop], label), tile(out_m[crop]), tile(heat)]))
    if rows:
        cv2.imwrite(str(out_dir / "mirror_worst.jpg"), np.vstack(rows))
    means = np.array([t["mean"] for t in textures])
    shares = np.array([t["share_apart"] for t in textures])
    table = markdown_table(
        ("measure", "median", "worst"),
        (
            (
                "source texture, photo against its mirror image: mean grey levels apart",
                f"{np.median(means):.1f}",
                f"{means.max():.1f} ({textures[int(means.argmax())]['source']})",
            ),
            (
                f"source texture: share of texels over {APART:.0f} apart",
                f"{100 * np.median(shares):.1f}%",
                f"{100 * shares.max():.1f}% ({textures[int(shares.argmax())]['source']})",
            ),
            (
                "swap against the mirror images' swap: 99th percentile in the face box",
                f"{np.median(p99s):.1f}",
                f"{p99s.max():.1f} ({ranked[0]['source']} > {ranked[0]['target']})",
            ),
        ),
    )
    print(f"\n{len(subjects)} images, {len(pairs)} ordered pairs\n")
    if one_way:
        print("a face found in the photo or its mirror image only: " + ", ".join(one_way))
    print(table)
    listed = (f"{p['source']} > {p['target']} {p['p99']}" for p in ranked[:5])
    print("\nworst pairs: " + ", ".join(listed))
    write_json(
        out_dir / "mirror.json",
        {
            "benchmark": "mirror",
            "environment": env,
            "one_way": one_way,
            "textures": textures,
            "pairs": pairs,
            "summary": {
                "n_images": len(subjects),
                "n_pairs": len(pairs),
                "texture_mean_median": float(np.median(means)),
                "texture_share_apart_median": float(np.median(shares)),
                "pair_p99_median": float(np.median(p99s)),
                "pair_p99_max": float(p99s.max()),
                "runtime_s": round(time.perf_counter() - began, 1),
            },
            "markdown": table,
        },
    )
    print(f"wrote {out_dir / 'mirror.json'}" + (", mirror_worst.jpg" if rows else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
