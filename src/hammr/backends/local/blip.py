"""Captions and visual question answering with BLIP (transformers
``BlipForConditionalGeneration`` and ``BlipForQuestionAnswering``).

The two checkpoints are separate models; each loads on its first use, so a config that only
uses BLIP for captions never loads the VQA model. (Florence-2 would serve both with one
model, but its checkpoints need ``trust_remote_code`` code from the hub, which we do not
run.)
"""

from __future__ import annotations

from typing import Any

from hammr.backends.local._common import (
    Lazy,
    build,
    check_counts,
    check_device,
    run_batches,
)
from hammr.backends.local._common import rgb as _rgb
from hammr.tools.base import ToolError
from hammr.values import Image

DEFAULT_CAPTION_MODEL = "Salesforce/blip-image-captioning-base"
DEFAULT_VQA_MODEL = "Salesforce/blip-vqa-base"


def _clean(text: str) -> str:
    return " ".join(text.split())


class BlipModel:
    """The 'caption' (``caption``) and 'vqa' (``answer``) capabilities with BLIP.

    ``caption_prompt`` (default none) starts every caption with that text (BLIP's
    conditional captioning, e.g. "a picture of"); the prompt is kept in the caption.
    """

    def __init__(
        self,
        caption_model: str = DEFAULT_CAPTION_MODEL,
        vqa_model: str = DEFAULT_VQA_MODEL,
        device: str = "auto",
        max_new_tokens: int = 30,
        num_beams: int = 1,
        caption_prompt: str = "",
        batch_size: int = 8,
    ) -> None:
        check_device(device)
        check_counts(max_new_tokens=max_new_tokens, num_beams=num_beams, batch_size=batch_size)
        self.caption_model = caption_model
        self.vqa_model = vqa_model
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        self.caption_prompt = caption_prompt
        self.batch_size = batch_size
        self._caption: Lazy | None = Lazy(
            caption_model, lambda: _load(caption_model, "caption"), device
        )
        self._vqa: Lazy | None = Lazy(vqa_model, lambda: _load(vqa_model, "vqa"), device)

    @classmethod
    def from_pretrained_objects(
        cls,
        caption: tuple[Any, Any] | None = None,
        vqa: tuple[Any, Any] | None = None,
        device: str = "cpu",
        **options: Any,
    ) -> BlipModel:
        """A BLIP backend around already-built ``(model, processor)`` pairs; a part left out
        fails when used."""
        self = cls(device=device, **options)
        self._caption = self._vqa = None
        if caption is not None:
            self.caption_model = type(caption[0]).__name__
            self._caption = Lazy.ready(self.caption_model, caption[0], caption[1], device)
        if vqa is not None:
            self.vqa_model = type(vqa[0]).__name__
            self._vqa = Lazy.ready(self.vqa_model, vqa[0], vqa[1], device)
        return self

    def __repr__(self) -> str:
        return f"BlipModel(caption_model={self.caption_model!r}, vqa_model={self.vqa_model!r})"

    async def caption(self, images: list[Image]) -> list[str]:
        if self._caption is None:
            raise ToolError("this BLIP backend has no captioning model")
        return await run_batches(self._caption, images, self.batch_size, self._captions)

    async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
        if len(images) != len(questions):
            raise ValueError(f"vqa: got {len(images)} images and {len(questions)} questions")
        if self._vqa is None:
            raise ToolError("this BLIP backend has no question-answering model")
        chunks = list(zip(images, questions, strict=True))
        return await run_batches(self._vqa, chunks, self.batch_size, self._answers)

    def _generate_kwargs(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "num_beams": self.num_beams}

    def _captions(self, model: Any, processor: Any, device: str, chunk: list[Image]) -> list[str]:
        pixels = [_rgb(img) for img in chunk]
        if self.caption_prompt:
            inputs = processor(
                images=pixels, text=[self.caption_prompt] * len(pixels), return_tensors="pt"
            )
        else:
            inputs = processor(images=pixels, return_tensors="pt")
        ids = model.generate(**inputs.to(device), **self._generate_kwargs())
        return [_clean(t) for t in processor.batch_decode(ids, skip_special_tokens=True)]

    def _answers(
        self, model: Any, processor: Any, device: str, chunk: list[tuple[Image, str]]
    ) -> list[str]:
        inputs = processor(
            images=[_rgb(img) for img, _ in chunk],
            text=[q for _, q in chunk],
            padding=True,
            truncation=True,
            return_tensors="pt",
        )
        ids = model.generate(**inputs.to(device), **self._generate_kwargs())
        return [_clean(t) for t in processor.batch_decode(ids, skip_special_tokens=True)]


def _load(model: str, part: str) -> tuple[Any, Any]:
    import transformers

    tf: Any = transformers
    processor = tf.BlipProcessor.from_pretrained(model)
    cls = tf.BlipForConditionalGeneration if part == "caption" else tf.BlipForQuestionAnswering
    return cls.from_pretrained(model), processor


OPTIONS: dict[str, type] = {
    "caption_model": str,
    "vqa_model": str,
    "device": str,
    "max_new_tokens": int,
    "num_beams": int,
    "caption_prompt": str,
    "batch_size": int,
}


def from_config(options: dict[str, Any]) -> BlipModel:
    """The ``[tools.caption] backend = "blip"`` factory (weights load on first use)."""
    return build(BlipModel, "tools.caption", options, OPTIONS, "the blip model")


def vqa_from_config(options: dict[str, Any]) -> BlipModel:
    """The ``[tools.vqa] backend = "blip"`` factory (weights load on first use)."""
    return build(BlipModel, "tools.vqa", options, OPTIONS, "the blip model")
