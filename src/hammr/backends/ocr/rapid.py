"""OCR with RapidOCR (PaddleOCR's PP-OCRv4 detection and recognition models on onnxruntime).

Install (no GUI OpenCV; the models ship inside the wheel, nothing is downloaded at run time)::

    pip install --no-deps rapidocr-onnxruntime==1.4.4
    pip install 'opencv-python-headless<5' onnxruntime pyclipper shapely six PyYAML

Reading a list of images is batched: crops that look like a single text line (at most
``line_height`` pixels tall, at least as wide as tall) skip text detection, and the text
lines of every image in the list -- those crops plus the lines that detection found in the
larger images -- go through the direction classifier and the recogniser together, in
batches of ``rec_batch_num``. Tesseract has no such path (one process per image).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image as PILImage

from hammr.backends.ocr.tesseract import is_blank, normalise
from hammr.tools.base import ToolError
from hammr.values import Box, Image

PACKAGE = "rapidocr-onnxruntime==1.4.4"
RUNTIME_DEPS = "'opencv-python-headless<5' onnxruntime pyclipper shapely six PyYAML"
INSTALL = f"pip install --no-deps {PACKAGE} && pip install {RUNTIME_DEPS}"
"""The install command named in errors (plain ``pip install rapidocr-onnxruntime`` would pull
GUI OpenCV, which needs libGL)."""


class RapidOCRMissing(ToolError):
    """The rapidocr-onnxruntime package or one of its runtime dependencies is missing."""


_import_error: str | None = None
_import_checked = False
_import_lock = threading.Lock()


def rapidocr_import_error() -> str | None:
    """None when ``rapidocr_onnxruntime`` imports (with OpenCV and onnxruntime), else why not.

    Importing loads OpenCV and onnxruntime (~0.3 s) but no model; the answer is cached.
    """
    global _import_error, _import_checked
    with _import_lock:
        if not _import_checked:
            try:
                import rapidocr_onnxruntime  # noqa: F401
            except Exception as e:  # ImportError, or OSError for a missing libGL
                _import_error = f"{type(e).__name__}: {e}"
            _import_checked = True
        return _import_error


def rapidocr_available() -> bool:
    return rapidocr_import_error() is None


@dataclass
class _Job:
    """One image of a read() call: either a single line or the lines detection found."""

    lines: list[np.ndarray[Any, Any]]
    boxes: list[Box] | None  # None: the whole image is one line (no detection)


def _bgr(pixels: PILImage.Image) -> np.ndarray[Any, Any]:
    """PIL RGB/L pixels as the contiguous BGR uint8 array RapidOCR expects."""
    rgb = np.asarray(pixels.convert("RGB"), dtype=np.uint8)
    return np.ascontiguousarray(rgb[:, :, ::-1])


def _quad_box(quad: Any, width: int, height: int) -> Box | None:
    """The axis-aligned hull of a detected quadrilateral, clipped to the image."""
    pts = np.asarray(quad, dtype=np.float64).reshape(-1, 2)
    x0 = float(np.clip(pts[:, 0].min(), 0, width))
    y0 = float(np.clip(pts[:, 1].min(), 0, height))
    x1 = float(np.clip(pts[:, 0].max(), 0, width))
    y1 = float(np.clip(pts[:, 1].max(), 0, height))
    if x1 - x0 < 1 or y1 - y0 < 1:
        return None
    return Box(x0, y0, x1 - x0, y1 - y0)


def order_lines(items: list[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Reading order: rows top to bottom, then left to right within a row.

    A box joins the current row when its vertical centre lies inside the row's span, so
    words of one line at slightly different heights stay together.
    """
    rows: list[list[tuple[Box, str, float]]] = []
    top = bottom = 0.0
    for item in sorted(items, key=lambda it: (it[0].y, it[0].x)):
        cy = item[0].center[1]
        if rows and top <= cy <= bottom:
            rows[-1].append(item)
            bottom = max(bottom, item[0].y2)
        else:
            rows.append([item])
            top, bottom = item[0].y, item[0].y2
    return [it for row in rows for it in sorted(row, key=lambda it: it[0].x)]


class RapidOCRBackend:
    """Reads text with RapidOCR, in a worker thread.

    The three ONNX models (detection, direction classifier, recognition) are loaded lazily,
    once, on first use (~0.7 s; thread-safe), and inference is serialised on one engine
    (onnxruntime already uses every core). Memory: about 660-700 MB resident once loaded
    and warmed up (measured max RSS 706 MB on the bundled examples), versus a few MB for
    tesseract's per-call processes.

    Args:
        text_score: recognised lines scoring below this are dropped.
        use_cls: run the 0/180 degree direction classifier (reads upside-down text).
        line_height: crops at most this many pixels tall (and at least as wide as tall)
            are read as one text line without detection, in one batch; 0 sends every image
            through detection.
        box_thresh, unclip_ratio: detection settings (RapidOCR's ``det_*``).
        det_limit_side_len, det_limit_type: "min" (RapidOCR's default) scales an image's
            shorter side up to det_limit_side_len before detection, which splits words well
            but costs seconds on small crops (a 150x44 crop becomes 2509x736); "max" only
            shrinks images whose longer side exceeds it: 5-10x faster on crops, but words
            of one line may come back unspaced ("OPEN24HOURS").
        rec_batch_num: lines recognised per onnxruntime call (larger batches pad every line
            to the widest one, which costs more than it saves on CPU).
        threads: onnxruntime intra-op threads (-1: all cores).
    """

    def __init__(
        self,
        text_score: float = 0.5,
        use_cls: bool = True,
        line_height: int = 64,
        box_thresh: float = 0.5,
        unclip_ratio: float = 1.6,
        det_limit_side_len: int = 736,
        det_limit_type: str = "min",
        rec_batch_num: int = 6,
        threads: int = -1,
    ) -> None:
        if not 0.0 <= text_score <= 1.0 or not 0.0 <= box_thresh <= 1.0:
            raise ValueError("text_score and box_thresh must be between 0 and 1")
        if line_height < 0 or unclip_ratio <= 0 or det_limit_side_len < 32 or rec_batch_num < 1:
            raise ValueError(
                "line_height must be >= 0, unclip_ratio > 0, det_limit_side_len >= 32 "
                "and rec_batch_num >= 1"
            )
        if det_limit_type not in ("min", "max"):
            raise ValueError(f"det_limit_type must be 'min' or 'max', got {det_limit_type!r}")
        if threads == 0 or threads < -1:
            raise ValueError("threads must be -1 (all cores) or a positive number")
        why = rapidocr_import_error()
        if why is not None:
            raise RapidOCRMissing(
                f"OCR needs rapidocr-onnxruntime ({why}); install it with: {INSTALL}"
            )
        self.text_score = text_score
        self.use_cls = use_cls
        self.line_height = line_height
        self.box_thresh = box_thresh
        self.unclip_ratio = unclip_ratio
        self.det_limit_side_len = det_limit_side_len
        self.det_limit_type = det_limit_type
        self.rec_batch_num = rec_batch_num
        self.threads = threads
        self._engine: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"RapidOCRBackend(text_score={self.text_score}, use_cls={self.use_cls}, "
            f"line_height={self.line_height})"
        )

    # -- public API ---------------------------------------------------------------------------

    async def read(self, images: list[Image]) -> list[str]:
        """The text in each image, one line each ("" where none was found), in one batch."""
        if not images:
            return []
        return await asyncio.to_thread(self.read_sync, images)

    async def read_boxes(self, image: Image) -> list[tuple[Box, str, float]]:
        """The text lines detected in ``image``: (box in this image's pixels, text, score)."""
        return await asyncio.to_thread(self.read_boxes_sync, image)

    def read_sync(self, images: list[Image]) -> list[str]:
        """Blocking :meth:`read`."""
        jobs = [self._job(img, detect=not self._is_line(img)) for img in images]
        results = self._recognise(jobs)
        out: list[str] = []
        for job, res in zip(jobs, results, strict=True):
            if job.boxes is None:
                out.append(" ".join(t for _, t, _ in res))
            else:
                out.append(normalise(" ".join(t for _, t, _ in order_lines(res))))
        return out

    def read_boxes_sync(self, image: Image) -> list[tuple[Box, str, float]]:
        """Blocking :meth:`read_boxes` (always runs detection)."""
        job = self._job(image, detect=True)
        return order_lines(self._recognise([job])[0])

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def engine(self) -> Any:
        """The RapidOCR engine, built on first use."""
        if self._engine is None:
            with self._load_lock:
                if self._engine is None:
                    try:
                        from rapidocr_onnxruntime import RapidOCR
                    except Exception as e:
                        raise RapidOCRMissing(
                            f"OCR needs rapidocr-onnxruntime ({type(e).__name__}: {e}); "
                            f"install it with: {INSTALL}"
                        ) from None
                    try:
                        self._engine = RapidOCR(
                            text_score=self.text_score,
                            use_cls=self.use_cls,
                            intra_op_num_threads=self.threads,
                            det_box_thresh=self.box_thresh,
                            det_unclip_ratio=self.unclip_ratio,
                            det_limit_side_len=self.det_limit_side_len,
                            det_limit_type=self.det_limit_type,
                            rec_batch_num=self.rec_batch_num,
                            cls_batch_num=self.rec_batch_num,
                        )
                    except Exception as e:
                        raise ToolError(f"RapidOCR failed to load its models: {e}") from None
        return self._engine

    # -- internals ----------------------------------------------------------------------------

    def _is_line(self, image: Image) -> bool:
        return image.height <= self.line_height and image.width >= image.height

    def _job(self, image: Image, detect: bool) -> _Job:
        if image.width < 2 or image.height < 2 or is_blank(image.pixels):
            return _Job([], [])  # nothing to read; the recogniser hallucinates on blanks
        bgr = _bgr(image.pixels)
        if not detect:
            return _Job([bgr], None)
        engine = self.engine()
        try:
            with self._run_lock:
                quads, _ = engine(bgr, use_det=True, use_cls=False, use_rec=False)
        except Exception as e:
            raise ToolError(f"OCR failed: {type(e).__name__}: {e}") from None
        boxes: list[Box] = []
        kept: list[np.ndarray[Any, Any]] = []
        for quad in quads or []:
            box = _quad_box(quad, image.width, image.height)
            if box is not None:
                boxes.append(box)
                kept.append(np.asarray(quad, dtype=np.float32).reshape(4, 2))
        crops = engine.get_crop_img_list(bgr, kept) if kept else []
        pairs = [(c, b) for c, b in zip(crops, boxes, strict=True) if min(c.shape[:2]) >= 2]
        return _Job([c for c, _ in pairs], [b for _, b in pairs])

    def _recognise(self, jobs: list[_Job]) -> list[list[tuple[Box, str, float]]]:
        """Classify and recognise the lines of all jobs in one batch; per job, the kept
        (box, text, score) triples (box is the whole image for single-line jobs)."""
        flat = [line for job in jobs for line in job.lines]
        recs: list[tuple[str, float]] = []
        if flat:
            engine = self.engine()
            try:
                with self._run_lock:
                    if self.use_cls:
                        flat, _, _ = engine.text_cls(flat)
                    raw, _ = engine.text_rec(flat)
            except Exception as e:
                raise ToolError(f"OCR failed: {type(e).__name__}: {e}") from None
            recs = [(str(r[0]), float(r[1])) for r in raw]
        out: list[list[tuple[Box, str, float]]] = []
        i = 0
        for job in jobs:
            kept: list[tuple[Box, str, float]] = []
            for k, line in enumerate(job.lines):
                text, score = recs[i]
                i += 1
                text = normalise(text)
                if not text or score < self.text_score:
                    continue
                if job.boxes is None:
                    h, w = line.shape[:2]
                    box = Box(0, 0, w, h, text, score)
                else:
                    b = job.boxes[k]
                    box = Box(b.x, b.y, b.w, b.h, text, score)
                kept.append((box, text, score))
            out.append(kept)
        return out


OPTIONS: dict[str, type] = {
    "text_score": float,
    "use_cls": bool,
    "line_height": int,
    "box_thresh": float,
    "unclip_ratio": float,
    "det_limit_side_len": int,
    "det_limit_type": str,
    "rec_batch_num": int,
    "threads": int,
}


def from_config(options: dict[str, Any]) -> RapidOCRBackend:
    """The ``[tools.ocr] backend = "rapidocr"`` factory (models load on first use)."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.ocr", options, OPTIONS)
    why = rapidocr_import_error()
    if why is not None:
        raise BackendUnavailable(f"rapidocr-onnxruntime is not installed ({why}); {INSTALL}")
    return RapidOCRBackend(**opts)
