"""Write the small HEIC files the tests read (``tests/io/data/*.heic``).

faceweave reads HEIC with pi-heif, which decodes only: no package the project
installs can write one, so the test files are committed, made here from
scikit-image's astronaut photo (NASA, public domain) with pillow-heif's x265
encoder:

* ``astronaut.heic``: her face, 256 x 256, quality 60;
* ``astronaut_rotated.heic``: the same photo stored a quarter turn clockwise with
  a rotation (``irot``) that turns it back, as a phone held sideways writes it;
* ``astronaut_alpha.heic``: 96 x 96 with an alpha plane, transparent outside a disc;
* ``astronaut_10bit.heic``: 10-bit samples, as an iPhone's HDR photos hold them.

Run: ``pip install pillow-heif && python tools/make_heic_fixtures.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pillow_heif
import skimage.data
from PIL import Image

OUT = Path(__file__).resolve().parents[1] / "tests" / "io" / "data"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    photo = Image.fromarray(skimage.data.astronaut()).crop((100, 0, 356, 256))
    photo.save(OUT / "astronaut.heic", format="HEIF", quality=60)
    # Stored turned a quarter clockwise; EXIF orientation 8 says how to turn it back,
    # which pillow-heif writes as the container's irot transform.
    turned = photo.transpose(Image.Transpose.ROTATE_270)
    exif = Image.Exif()
    exif[0x0112] = 8
    turned.save(OUT / "astronaut_rotated.heic", format="HEIF", quality=60, exif=exif.tobytes())
    small = np.asarray(photo.resize((96, 96), Image.Resampling.LANCZOS))
    yy, xx = np.mgrid[:96, :96]
    alpha = np.where((yy - 47.5) ** 2 + (xx - 47.5) ** 2 <= 40**2, 255, 0).astype(np.uint8)
    Image.fromarray(np.dstack([small, alpha]), "RGBA").save(
        OUT / "astronaut_alpha.heic", format="HEIF", quality=90
    )
    deep = (np.asarray(photo.resize((96, 96)), np.uint16) << 8) | 0x80
    heif = pillow_heif.from_bytes(mode="RGB;16", size=(96, 96), data=deep.tobytes())
    heif.save(OUT / "astronaut_10bit.heic", quality=90)
    for path in sorted(OUT.glob("*.heic")):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    pillow_heif.register_heif_opener()
    main()
