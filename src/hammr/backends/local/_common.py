"""What the local (transformers) backends share: the install check, device choice, lazy
loading, and running a batch off the event loop.

Nothing here imports torch or transformers at module import time; they are imported inside
the functions that need them, so ``import hammr`` stays light.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Self, TypeVar

from hammr.tools.base import ToolError
from hammr.values import Image

if TYPE_CHECKING:
    from PIL import Image as PILImage

DEVICES = ("auto", "cpu", "cuda", "mps")

INSTALL_HINT = "pip install 'hammr[local]'"

T = TypeVar("T")
R = TypeVar("R")


def missing_packages() -> list[str]:
    """The packages the local backends need that are not installed."""
    return [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]


def require_packages(where: str) -> None:
    """Raise BackendUnavailable (with how to fix it) when torch or transformers is missing."""
    from hammr.backends.registry import BackendUnavailable

    missing = missing_packages()
    if missing:
        raise BackendUnavailable(
            f"{where} needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; install with: {INSTALL_HINT}"
        )


def build(
    cls: Callable[..., T], where: str, options: dict[str, Any], schema: dict[str, type], what: str
) -> T:
    """A ``from_config`` factory's work: ``cls(**options)`` once the options are checked
    against ``schema`` (as ``[where]``) and torch and transformers are installed (else
    BackendUnavailable, saying ``what`` needs them)."""
    from hammr.backends.registry import parse_options

    opts = parse_options(where, options, schema)
    require_packages(what)
    return cls(**opts)


def check_device(device: str) -> str:
    if device not in DEVICES and not device.startswith("cuda:"):
        raise ValueError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")
    return device


def check_counts(**counts: int) -> None:
    """Raise ValueError naming all of ``counts`` ("a, b and c must be at least 1") when any
    of them is below 1."""
    if any(value < 1 for value in counts.values()):
        names = list(counts)
        joined = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        raise ValueError(f"{joined} must be at least 1")


def resolve_device(device: str) -> str:
    """``auto`` -> cuda if available, else mps if available, else cpu; others unchanged."""
    check_device(device)
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def rgb(image: Image) -> PILImage.Image:
    """The image's pixels as RGB (the processors expect three channels)."""
    pixels = image.pixels
    return pixels if pixels.mode == "RGB" else pixels.convert("RGB")


def load_failure(model: str, error: Exception) -> ToolError:
    return ToolError(
        f"could not load local model {model!r}: {type(error).__name__}: {error}. "
        "Download it once with network access (e.g. `huggingface-cli download "
        f"{model}`) or point the option at a local directory"
    )


class Lazy:
    """A (model, processor) pair built on first use, once, under a lock.

    ``loader`` returns the pair; the model is moved to the device and put in eval mode.
    Inference runs under the same lock: one batch at a time per model.
    """

    def __init__(self, name: str, loader: Callable[[], tuple[Any, Any]], device: str) -> None:
        self.name = name
        self._loader: Callable[[], tuple[Any, Any]] | None = loader
        self._device_option = device
        self.device: str | None = None
        self.model: Any = None
        self.processor: Any = None
        self.lock = threading.RLock()

    @classmethod
    def ready(cls, name: str, model: Any, processor: Any, device: str) -> Lazy:
        lazy = cls(name, lambda: (model, processor), device)
        lazy.get()
        return lazy

    @property
    def loaded(self) -> bool:
        return self._loader is None

    def get(self) -> tuple[Any, Any]:
        with self.lock:
            if self._loader is not None:
                try:
                    model, processor = self._loader()
                except (OSError, ValueError) as e:  # not cached / offline / bad name
                    raise load_failure(self.name, e) from e
                self.device = resolve_device(self._device_option)
                self.model = model.to(self.device).eval()
                self.processor = processor
                self._loader = None
            return self.model, self.processor


async def in_thread(lazy: Lazy, fn: Callable[[Any, Any, str], T]) -> T:
    """Run ``fn(model, processor, device)`` in a worker thread under the model's lock and
    ``torch.inference_mode()``."""

    def work() -> T:
        import torch

        with lazy.lock:
            model, processor = lazy.get()
            assert lazy.device is not None
            with torch.inference_mode():
                return fn(model, processor, lazy.device)

    return await asyncio.to_thread(work)


async def run_batches(lazy: Lazy, items: list[T], size: int, fn: Callable[..., list[R]]) -> list[R]:
    """``fn(model, processor, device, chunk=...)`` on each batch of ``size`` items, one after
    the other (see :func:`in_thread`), results concatenated."""
    out: list[R] = []
    for chunk in batches(items, size):
        out.extend(await in_thread(lazy, partial(fn, chunk=chunk)))
    return out


def pairs(images: list[Image], names: list[str], what: str) -> list[list[str]]:
    """The names to look for in each image.

    ``names`` pairs with ``images`` one to one (like questions in ``VisualQA.answer``);
    a single image with several names looks for all of them in it.
    """
    if len(names) == len(images):
        return [[n] for n in names]
    if len(images) == 1:
        return [list(names)]
    raise ValueError(
        f"{what}: got {len(images)} images and {len(names)} names; pass one name per image "
        "or a single image"
    )


def batches(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), max(1, size))]


class LocalModel:
    """A backend around one lazily loaded (model, processor) pair, ``self._lazy``.

    Subclasses take ``model`` (the checkpoint name) and ``device`` in their constructor.
    """

    _lazy: Lazy

    @classmethod
    def from_pretrained_objects(
        cls, model: Any, processor: Any, device: str = "cpu", **options: Any
    ) -> Self:
        """A backend around an already-built model and processor (used as they are: moved
        to ``device``, no dtype conversion), named after the model's class."""
        name = type(model).__name__
        make: Any = cls  # the subclass's constructor, which LocalModel does not declare
        self: Self = make(model=name, device=device, **options)
        self._lazy = Lazy.ready(name, model, processor, device)
        return self
