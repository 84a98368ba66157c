"""What the local-model tests (test_local_backends.py, test_local_blip2.py) share.

Importing this module keeps the hub offline (nothing is downloaded) and skips the importing
test module when torch or transformers is not installed.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'hammr[local]')")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install 'hammr[local]')"
)

from PIL import Image as PILImage  # noqa: E402
from skimage import data as skdata  # noqa: E402

from hammr.values import Image  # noqa: E402


def photo(name: str) -> Image:
    """One of scikit-image's sample photos (astronaut, coffee, chelsea, ...) as an RGB Image."""
    return Image(PILImage.fromarray(getattr(skdata, name)()).convert("RGB"))


def byte_level_chars() -> list[str]:
    """The 256 printable stand-ins byte-level BPE tokenizers use for bytes (GPT-2's table,
    written out here because transformers 5 no longer exports its helper)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]
