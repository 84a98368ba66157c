"""OCR with the tesseract command-line program (through pytesseract)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hammr.tools.base import ToolError
from hammr.values import Image

if TYPE_CHECKING:  # pytesseract (which imports Pillow and numpy) is imported to read text
    from PIL import Image as PILImage

DEBIAN_PACKAGES = "tesseract-ocr tesseract-ocr-eng"

AUTO_PSMS = (6, 7, 11)
"""psm=None tries these page-segmentation modes in turn until one finds text: a uniform
block (good for signs and pages), a single line (catches plates that block mode misses when
the text nearly fills the crop), then sparse text."""

_EDGE_JUNK = set("|[]{}()_~\u2014\u2013\u2018\u2019\u201c\u201d'\"`")
"""Characters tesseract emits for borders and frame lines at the edges of a crop."""


class TesseractMissing(ToolError):
    """The tesseract program or its language data is not installed."""


def tesseract_available(cmd: str | None = None) -> bool:
    return shutil.which(cmd or "tesseract") is not None


def is_blank(pixels: PILImage.Image, min_contrast: int = 16) -> bool:
    """True for (nearly) uniform images, which cannot show text."""
    low, high = pixels.convert("L").getextrema()  # an (int, int) pair for mode L
    assert isinstance(low, int | float) and isinstance(high, int | float)
    return high - low < min_contrast


def normalise(text: str) -> str:
    """One line, single spaces, without the frame-line junk tesseract reads at crop edges."""
    tokens = text.split()
    while tokens and set(tokens[0]) <= _EDGE_JUNK:
        tokens.pop(0)
    while tokens and set(tokens[-1]) <= _EDGE_JUNK:
        tokens.pop()
    if tokens:
        tokens[0] = tokens[0].lstrip("|")
        tokens[-1] = tokens[-1].rstrip("|")
    return " ".join(t for t in tokens if t)


class TesseractOCR:
    """Reads text from images with tesseract, running each image in a worker thread.

    Images shorter than ``min_height`` pixels are enlarged to ``target_height`` first:
    tesseract misses text whose letters are under ~12 px tall, and rendered text 8-12 px tall
    that it misses at its own size is read correctly once scaled to 32 px or more.
    """

    def __init__(
        self,
        lang: str = "eng",
        psm: int | None = None,
        timeout_s: float = 30.0,
        min_height: int = 32,
        target_height: int = 48,
        max_workers: int = 4,
        cmd: str | None = None,
    ) -> None:
        if psm is not None and not 0 <= psm <= 13:
            raise ValueError(f"tesseract psm must be between 0 and 13, got {psm}")
        if timeout_s <= 0 or max_workers < 1 or min_height < 1 or target_height < 1:
            raise ValueError("timeout_s, min_height, target_height and max_workers must be > 0")
        exe = shutil.which(cmd or "tesseract")
        if exe is None:
            raise TesseractMissing(
                f"OCR needs the tesseract program, which was not found ({cmd or 'tesseract'}); "
                f"install it with: apt-get install {DEBIAN_PACKAGES}"
            )
        self.lang = lang
        self.psm = psm
        self.timeout_s = timeout_s
        self.min_height = min_height
        self.target_height = target_height
        self.max_workers = max_workers
        self.cmd = exe
        self._langs_checked = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TesseractOCR(lang={self.lang!r}, psm={self.psm!r}, timeout_s={self.timeout_s})"

    async def read(self, images: list[Image]) -> list[str]:
        """The text in each image, one line each; "" where no text was found."""
        limit = asyncio.Semaphore(self.max_workers)

        async def one(img: Image) -> str:
            async with limit:
                return await asyncio.to_thread(self.read_one, img)

        return list(await asyncio.gather(*(one(img) for img in images)))

    def read_one(self, image: Image) -> str:
        self._check_languages()
        if is_blank(image.pixels):
            return ""  # tesseract's single-line mode hallucinates letters on blank images
        pixels = self.prepare(image.pixels)
        for psm in AUTO_PSMS if self.psm is None else (self.psm,):
            text = normalise(self._run(pixels, psm))
            if text:
                return text
        return ""

    def prepare(self, pixels: PILImage.Image) -> PILImage.Image:
        from PIL import Image as PILImage

        if pixels.height >= self.min_height:
            return pixels
        scale = min(self.target_height / pixels.height, 8.0)
        size = (max(1, round(pixels.width * scale)), max(1, round(pixels.height * scale)))
        return pixels.resize(size, PILImage.Resampling.LANCZOS)

    def _run(self, pixels: PILImage.Image, psm: int) -> str:
        import pytesseract

        pytesseract.pytesseract.tesseract_cmd = self.cmd
        try:
            text = pytesseract.image_to_string(
                pixels, lang=self.lang, config=f"--psm {psm}", timeout=self.timeout_s
            )
        except RuntimeError as e:
            if "timeout" in str(e).lower():
                raise ToolError(f"OCR timed out after {self.timeout_s:g} s") from None
            raise ToolError(f"OCR failed: {e}") from None
        except pytesseract.TesseractError as e:
            raise ToolError(f"OCR failed: {e.message or e}") from None
        except pytesseract.TesseractNotFoundError:
            raise TesseractMissing(
                f"the tesseract program disappeared ({self.cmd}); "
                f"install it with: apt-get install {DEBIAN_PACKAGES}"
            ) from None
        return str(text)

    def installed_languages(self) -> list[str]:
        """The language codes tesseract has data for; [] when it cannot tell. Asked of the
        program (``tesseract --list-langs``, read as ``pytesseract.get_languages`` reads it)
        without pytesseract, which imports Pillow and numpy: building the backend, as
        `hammr systems` does, checks the languages and must stay quick."""
        try:
            done = subprocess.run(
                [self.cmd, "--list-langs"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=self.timeout_s,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return []
        if done.returncode not in (0, 1):  # tesseract 3.x exits 1
            return []
        lines = (line.strip() for line in done.stdout.decode("utf-8", "replace").splitlines())
        return sorted(line for line in lines if _LISTED_LANG.fullmatch(line))

    def missing_languages(self) -> list[str]:
        """The codes in ``lang`` (``eng+deu``) whose language data tesseract does not have;
        [] when it cannot tell (old builds: the OCR call then reports any problem)."""
        have = set(self.installed_languages())
        return [code for code in self.lang.split("+") if have and code not in have]

    def _check_languages(self) -> None:
        with self._lock:
            if self._langs_checked:
                return
            missing = self.missing_languages()
            if missing:
                raise TesseractMissing(
                    missing_languages_message(missing, self.installed_languages())
                )
            self._langs_checked = True


_LISTED_LANG = re.compile(r"[a-z_]+")
"""A line of ``tesseract --list-langs`` that names a language (the first line is a heading)."""

_LANG_CODE = re.compile(r"[a-z]{3}(_[a-z]+)?")
"""The shape of tesseract's language codes (eng, deu, chi_sim): ISO 639-2, maybe a variant."""


def missing_languages_message(missing: list[str], installed: Sequence[str] = ()) -> str:
    """Why ``lang`` cannot be read: a package to install for a code tesseract knows the shape
    of, else that the setting is not a tesseract language code (``lang = "klingon"`` has no
    package to install)."""
    text = f"tesseract has no language data for {', '.join(missing)}"
    if installed:
        text += f" (installed: {', '.join(installed)})"
    codes = [code for code in missing if _LANG_CODE.fullmatch(code)]
    if len(codes) < len(missing):
        text += (
            "; tools.ocr.lang takes tesseract's language codes joined by '+', "
            "e.g. 'eng' or 'eng+deu'"
        )
    if codes:
        packages = " ".join(f"tesseract-ocr-{code.replace('_', '-')}" for code in codes)
        text += f"; install {'them' if len(codes) > 1 else 'it'} with: apt-get install {packages}"
    return text


OPTIONS: dict[str, type] = {
    "lang": str,
    "psm": int,
    "timeout_s": float,
    "min_height": int,
    "target_height": int,
    "max_workers": int,
    "cmd": str,
}


def from_config(options: dict[str, Any]) -> TesseractOCR:
    """The ``[tools.ocr] backend = "tesseract"`` factory."""
    from hammr.backends.registry import BackendUnavailable, parse_options

    opts = parse_options("tools.ocr", options, OPTIONS)
    if not tesseract_available(opts.get("cmd")):
        if opts.get("cmd"):
            raise BackendUnavailable(
                f"tools.ocr.cmd = {opts['cmd']!r} is not an executable program; point it at "
                f"the tesseract program (or remove it to use tesseract from PATH)"
            )
        raise BackendUnavailable(f"tesseract is not installed; apt-get install {DEBIAN_PACKAGES}")
    ocr = TesseractOCR(**opts)
    missing = ocr.missing_languages()
    if missing:
        raise BackendUnavailable(missing_languages_message(missing, ocr.installed_languages()))
    return ocr
