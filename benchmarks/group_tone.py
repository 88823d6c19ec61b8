"""Skin colour on the faces of group photos: how near each swapped face's cheeks
come to the target's own colour.

The quality benchmark's photos show one face each, mostly in even light; a group
photo's faces are lit by what is around them (a hand to a cheek, a red shirt
beside it, a lamp on one side), and are small. Every face at least
``--min-face`` px wide that the still-image analyser finds in the group photos of
``../shared/data/faces`` (the manifest's images with several faces) is swapped
alone from each of a few sources of the face set; per face it reports the worse
cheek's a-b distance (median CIE Lab over each cheek's mesh hull) from the
target's, and the change of colour from one cheek to the other against the
target's (the quality benchmark's ``tone_side``). Without ``../shared`` there
are no group photos, and nothing is measured.

    python benchmarks/group_tone.py
    python benchmarks/group_tone.py --option light=0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    checked_out_dir,
    environment,
    environment_line,
    face_set_parser,
    group_images,
    load_face_set,
    markdown_table,
    write_csv,
    write_json,
)
from quality import (  # noqa: E402
    add_swap_option_argument,
    cheek_tone_distance,
    side_tone_difference,
    swap_option_overrides,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.analyser import photo_analyser  # noqa: E402

# The sources swapped in: a spread of skin tones and light (the face set's names).
SOURCES = (
    "p06_obama",
    "p08_biden_closeup",
    "p17_aflw_laughing",
    "p21_fairface_black_boy",
    "p23_ffhq_woman512",
    "p30_angelina",
)
# A cheek this far (a-b) from the target's counts as off.
OFF = 6.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = face_set_parser(__doc__)
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), help="face-set names")
    parser.add_argument("--min-face", type=float, default=80.0, help="smallest face (px) measured")
    add_swap_option_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = swap_option_overrides(args.option)
    started = time.perf_counter()
    groups = [] if args.no_shared else group_images(args.faces)
    if not groups:
        print(f"no group photos in {args.faces} (they come with ../shared): nothing measured")
        return 0
    out_dir = checked_out_dir(args.out)
    env = environment()
    print(environment_line(env), flush=True)
    by_name = {image.name: image for image in load_face_set(faces_dir=args.faces)}
    missing = [name for name in args.sources if name not in by_name]
    if missing:
        raise SystemExit(f"--sources: not in the face set: {', '.join(missing)}")
    analyser = photo_analyser(max_faces=32)  # (the command line's)
    targets = [
        (image, index, face)
        for image in groups
        for index, face in enumerate(analyser.get_faces(image.frame))
        if face.size >= args.min_face
    ]
    rows: list[dict[str, Any]] = []
    for name in args.sources:
        source = fw.get_one_face(by_name[name].frame)
        if source is None:
            raise SystemExit(f"no face in the source {name}")
        swapper = fw.Swapper(source, **options)
        for image, index, face in targets:
            out = swapper.swap(image.frame, [face])
            cheek = cheek_tone_distance(out, image.frame, face)
            if np.isnan(cheek):  # (a cheek outside the frame)
                continue
            side = side_tone_difference(out, image.frame, face)
            rows.append(
                {
                    "source": name,
                    "target": image.name,
                    "face": index,
                    "face_px": round(float(face.size)),
                    "cheek_ab": round(cheek, 2),
                    "side_ab": round(side, 2),
                }
            )
        print(f"  {name}: {len(targets)} faces", flush=True)
    cheeks = np.array([r["cheek_ab"] for r in rows])
    sides = np.array([r["side_ab"] for r in rows])
    summary = {
        "n_group_photos": len(groups),
        "n_faces": len(targets),
        "n_measured": len(rows),
        "cheek_ab_mean": float(cheeks.mean()) if len(rows) else float("nan"),
        "cheek_ab_median": float(np.median(cheeks)) if len(rows) else float("nan"),
        "cheek_off": int((cheeks > OFF).sum()),
        "side_ab_mean": float(np.nanmean(sides)) if len(rows) else float("nan"),
    }
    table = markdown_table(
        (
            "faces x sources",
            "worse cheek's a-b from the target's: mean / median",
            f"over {OFF:g}",
            "change from cheek to cheek against the target's: mean a-b",
        ),
        [
            (
                summary["n_measured"],
                f"{summary['cheek_ab_mean']:.2f} / {summary['cheek_ab_median']:.2f}",
                summary["cheek_off"],
                f"{summary['side_ab_mean']:.2f}",
            )
        ],
    )
    print(f"\n{table}")
    write_csv(out_dir / "group_tone.csv", rows)
    write_json(
        out_dir / "group_tone.json",
        {
            "benchmark": "group_tone",
            "environment": env,
            "args": {k: str(v) for k, v in vars(args).items()},
            "swap_options": fw.SwapOptions(**options).__dict__,
            "summary": summary,
            "faces": rows,
            "runtime_s": round(time.perf_counter() - started, 1),
            "markdown": table,
        },
    )
    print(f"wrote {out_dir / 'group_tone.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
