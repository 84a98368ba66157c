"""Captions and visual question answering with BLIP-2 (transformers
``Blip2ForConditionalGeneration`` and ``Blip2Processor``).

One checkpoint serves both capabilities: a caption is what the language model writes after
the image alone, an answer what it writes after the image and ``"Question: {question}
Answer:"`` (the prompt style of the BLIP-2 model cards and transformers' examples). The
default checkpoint is ``Salesforce/blip2-opt-2.7b`` (OPT, a decoder-only language model);
the flan-t5 checkpoints (``Salesforce/blip2-flan-t5-xl``, an encoder-decoder) work the same
way.

Decoder-only language models return the prompt's token ids (the image tokens, BOS and the
question) followed by the generated ones; only the generated part is decoded.
Encoder-decoder models return the generated ids alone.
"""

from __future__ import annotations

from typing import Any

from hammr.backends.local._common import (
    Lazy,
    LocalModel,
    build,
    check_counts,
    check_device,
    resolve_device,
    run_batches,
)
from hammr.backends.local._common import rgb as _rgb
from hammr.tools.base import ToolError
from hammr.values import Image

DEFAULT_MODEL = "Salesforce/blip2-opt-2.7b"
VQA_PROMPT = "Question: {question} Answer:"
DTYPES = ("auto", "float32", "float16", "bfloat16")


def _clean(text: str) -> str:
    return " ".join(text.split())


def _first_line(text: str) -> str:
    """The first non-empty line (language models go on past the answer: "two\\nQuestion:")."""
    for line in text.splitlines():
        if line.strip():
            return _clean(line)
    return ""


def torch_dtype(dtype: str, device: str) -> Any:
    """The torch dtype for the ``dtype`` option: "auto" is float16 on cuda, else float32."""
    import torch

    if dtype == "auto":
        return torch.float16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


class Blip2Model(LocalModel):
    """The 'caption' (``caption``) and 'vqa' (``answer``) capabilities with BLIP-2.

    ``vqa_prompt`` is the text the language model continues for a question; it must
    contain ``{question}``. Answers keep their first line only.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        max_new_tokens: int = 30,
        batch_size: int = 8,
        dtype: str = "auto",
        vqa_prompt: str = VQA_PROMPT,
    ) -> None:
        check_device(device)
        check_counts(max_new_tokens=max_new_tokens, batch_size=batch_size)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if "{question}" not in vqa_prompt:
            raise ValueError(f"vqa_prompt must contain {{question}}, got {vqa_prompt!r}")
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.dtype = dtype
        self.vqa_prompt = vqa_prompt
        self._lazy = Lazy(
            model, lambda: _load(model, torch_dtype(dtype, resolve_device(device))), device
        )

    def __repr__(self) -> str:
        return f"Blip2Model(model={self.model!r})"

    async def caption(self, images: list[Image]) -> list[str]:
        chunks = [(img, "") for img in images]
        out = await run_batches(self._lazy, chunks, self.batch_size, self._generate)
        return [_clean(t) for t in out]

    async def answer(self, images: list[Image], questions: list[str]) -> list[str]:
        if len(images) != len(questions):
            raise ValueError(f"vqa: got {len(images)} images and {len(questions)} questions")
        prompts = [self.vqa_prompt.format(question=_clean(q)) for q in questions]
        chunks = list(zip(images, prompts, strict=True))
        out = await run_batches(self._lazy, chunks, self.batch_size, self._generate)
        return [_first_line(t) for t in out]

    def _generate(
        self, model: Any, processor: Any, device: str, chunk: list[tuple[Image, str]]
    ) -> list[str]:
        """The text generated after each (image, prompt), prompt left out; one ``generate``."""
        decoder_only = not model.config.text_config.is_encoder_decoder
        prepare(processor, model, decoder_only)
        inputs = processor(
            images=[_rgb(img) for img, _ in chunk],
            text=[prompt for _, prompt in chunk],
            padding=True,
            return_tensors="pt",
        ).to(device)
        vision = getattr(model, "vision_model", model)
        inputs["pixel_values"] = inputs["pixel_values"].to(vision.dtype)
        ids = model.generate(**inputs, max_new_tokens=self.max_new_tokens)
        if decoder_only:  # the prompt's ids come first; the same width for every row
            ids = ids[:, inputs["input_ids"].shape[1] :]
        return [str(t) for t in processor.batch_decode(ids, skip_special_tokens=True)]


def prepare(processor: Any, model: Any, decoder_only: bool) -> None:
    """Make the processor expand each prompt with the model's image tokens and, for a
    decoder-only model, pad on the left (generation continues from the last position)."""
    if model.config.image_token_index is None:
        raise ToolError(
            f"{type(model).__name__}: this BLIP-2 checkpoint has no image_token_index in its "
            "config (saved by an old transformers); re-save it with a current one"
        )
    if getattr(processor, "num_query_tokens", None) is None:
        processor.num_query_tokens = model.config.num_query_tokens
    if decoder_only:
        processor.tokenizer.padding_side = "left"


def _load(model: str, dtype: Any) -> tuple[Any, Any]:
    import transformers

    tf: Any = transformers
    processor = tf.Blip2Processor.from_pretrained(model)
    return tf.Blip2ForConditionalGeneration.from_pretrained(model, dtype=dtype), processor


OPTIONS: dict[str, type] = {
    "model": str,
    "device": str,
    "max_new_tokens": int,
    "batch_size": int,
    "dtype": str,
    "vqa_prompt": str,
}


def from_config(options: dict[str, Any]) -> Blip2Model:
    """The ``[tools.caption] backend = "blip2"`` factory (weights load on first use)."""
    return build(Blip2Model, "tools.caption", options, OPTIONS, "the blip2 model")


def vqa_from_config(options: dict[str, Any]) -> Blip2Model:
    """The ``[tools.vqa] backend = "blip2"`` factory (weights load on first use)."""
    return build(Blip2Model, "tools.vqa", options, OPTIONS, "the blip2 model")
