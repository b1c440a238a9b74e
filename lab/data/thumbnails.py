"""Small pictures of images as PNG data URIs, for hovers: the app's and the exported page's alike."""
from __future__ import annotations

import base64
import io

import numpy as np

__all__ = ["png_data_uri"]


def png_data_uri(image: np.ndarray, size: int, *, enlarge: bool = True) -> str:
    """A uint8 image (h, w), (h, w, 1) or (h, w, 3) as a PNG data URI whose longest side is ``size`` px (enlarged
    without smoothing, so that small glyphs stay sharp; reduced with Lanczos). ``enlarge=False``: a smaller
    image keeps its own size."""
    from PIL import Image

    image = np.ascontiguousarray(image)
    img = Image.fromarray(image[..., 0] if image.ndim == 3 and image.shape[-1] == 1 else image)
    scale = size / max(img.size)
    if scale != 1 and (enlarge or scale < 1):
        img = img.resize((max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))),
                         Image.Resampling.NEAREST if scale > 1 else Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
