"""The demo: swap two faces that ship inside packages, write a side-by-side sheet.

Source: matplotlib's grace_hopper.jpg; target: scikit-image's astronaut.
Run with ``make demo`` (or ``python examples/demo.py --output out/demo.png``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import cv2
import matplotlib.cbook
import numpy as np
import skimage.data

import faceweave as fw
from faceweave.io.image import write_image


def package_faces() -> tuple[np.ndarray, np.ndarray]:
    """(grace_hopper, astronaut) as uint8 BGR frames, from matplotlib and scikit-image."""
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = cv2.imdecode(np.frombuffer(fh.read(), np.uint8), cv2.IMREAD_COLOR)
    astronaut = cv2.cvtColor(skimage.data.astronaut(), cv2.COLOR_RGB2BGR)
    return hopper, astronaut


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default="out/demo.png")
    parser.add_argument("--fusion", type=float, default=1.0)
    args = parser.parse_args()
    # faceweave's advice on the source photo (Grace Hopper wears glasses) as one line.
    logging.basicConfig(format="demo: note: %(message)s", level=logging.WARNING)
    source, target = package_faces()
    analyser = fw.FaceAnalyser()
    source_face = analyser.get_faces(source)[0]
    target_faces = analyser.get_faces(target)
    swapper = fw.Swapper(source_face, fusion=args.fusion)
    start = time.perf_counter()
    swapped = swapper.swap(target, target_faces[:1])
    ms = (time.perf_counter() - start) * 1000
    half = swapper.with_options(fusion=0.5).swap(target, target_faces[:1])
    h = 360
    tiles = [
        cv2.resize(im, (round(im.shape[1] * h / im.shape[0]), h))
        for im in (source, target, half, swapped)
    ]
    sheet = np.concatenate(tiles, axis=1)
    for x, label in zip(
        np.cumsum([0] + [t.shape[1] for t in tiles[:-1]]),
        ("source", "target", "fusion 0.5", "swap"),
        strict=True,
    ):
        cv2.putText(
            sheet,
            label,
            (int(x) + 8, 24),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.7,
            (255, 255, 255),
            2,
            cv2.LINE_AA,
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_image(args.output, sheet)
    write_image(str(Path(args.output).with_name("demo_swap.png")), swapped)
    print(f"wrote {args.output} (swap took {ms:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
