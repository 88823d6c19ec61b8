"""Debug overlay (like FaceFusion's face_debugger): boxes, mesh, mask outline, pose."""

from __future__ import annotations

import cv2
import numpy as np

from faceweave.core.facemodel import load_face_model
from faceweave.types import Face, Frame


def draw_debug(frame: Frame, faces: list[Face], *, mesh: bool = True, mask: bool = True) -> Frame:
    """Return a copy of ``frame`` with each face's box, score, pose, mesh and mask outline drawn."""
    model = load_face_model()
    out = frame.copy()
    thickness = max(1, round(max(frame.shape[:2]) / 600))
    for index, face in enumerate(faces):
        pts = face.landmarks_478[:, :2]
        if mesh:
            tris = model.triangles
            edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
            lines = np.round(pts[edges] * 16).astype(np.int32)  # 4 fractional bits
            cv2.polylines(out, list(lines), False, (80, 200, 80), 1, cv2.LINE_AA, shift=4)
        if mask:
            ring = np.round(model.face_oval_polygon(face.landmarks_478) * 16).astype(np.int32)
            cv2.polylines(out, [ring], True, (255, 160, 0), thickness, cv2.LINE_AA, shift=4)
            mouth = np.round(pts[model.loops[2]] * 16).astype(np.int32)
            cv2.polylines(out, [mouth], True, (0, 0, 255), thickness, cv2.LINE_AA, shift=4)
        x0, y0, x1, y1 = (int(round(v)) for v in face.bbox)
        cv2.rectangle(out, (x0, y0), (x1, y1), (0, 255, 255), thickness)
        for p in face.landmarks_5:
            cv2.circle(out, (int(round(p[0])), int(round(p[1]))), thickness + 1, (0, 0, 255), -1)
        label = (
            f"#{index} {face.score:.2f} yaw {face.pose.yaw:+.0f} pitch {face.pose.pitch:+.0f} "
            f"roll {face.pose.roll:+.0f}"
        )
        cv2.putText(
            out,
            label,
            (x0, max(12, y0 - 6)),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.4 * thickness,
            (0, 255, 255),
            thickness,
            cv2.LINE_AA,
        )
    return out
