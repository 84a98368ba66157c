"""The local BLIP-2 backend on tiny random-weight models (nothing is downloaded).

The model is built from a tiny ``Blip2Config`` (vision encoder, Q-Former, OPT or T5 language
model) and the processor from a ``BlipImageProcessor`` with a small size and a byte-level BPE
tokenizer written to tmp_path. Random weights write meaningless text, so the tests check the
contracts: strings, one ``generate`` per batch, the prompt left out of what is returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hammr.backends.local import _common, blip2
from hammr.backends.registry import BackendUnavailable
from hammr.values import Image
from local_models_support import byte_level_chars, photo, torch, transformers

torch.manual_seed(0)
torch.set_num_threads(2)

NUM_QUERY_TOKENS = 4
SPECIAL = ["<pad>", "</s>", "<unk>"]


@pytest.fixture(scope="module")
def photos() -> list[Image]:
    """Three real photos of three sizes: astronaut, coffee, chelsea."""
    return [photo(n) for n in ("astronaut", "coffee", "chelsea")]


def gpt2_tokenizer(tmp: Path) -> Any:
    """An OPT-style byte-level BPE tokenizer (no merges): one token per byte, plus specials."""
    tokens = SPECIAL + sorted(byte_level_chars())
    (tmp / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (tmp / "merges.txt").write_text("#version: 0.2\n")
    # positional: transformers 5 renamed the keyword arguments (vocab_file -> vocab)
    return transformers.GPT2TokenizerFast(
        str(tmp / "vocab.json"),
        str(tmp / "merges.txt"),
        bos_token="</s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=64,
    )


def tiny_blip2(tmp: Path, text_model: str) -> tuple[Any, Any]:
    tok = gpt2_tokenizer(tmp)
    image_processor = transformers.BlipImageProcessor(size={"height": 32, "width": 32})
    # the processor adds the "<image>" token; the model's vocabulary must include it
    processor = transformers.Blip2Processor(
        image_processor=image_processor, tokenizer=tok, num_query_tokens=NUM_QUERY_TOKENS
    )
    ids = {
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
    }
    if text_model == "opt":
        text = {
            "model_type": "opt",
            **ids,
            "bos_token_id": tok.bos_token_id,
            "hidden_size": 32,
            "word_embed_proj_dim": 32,
            "ffn_dim": 37,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 128,
        }
    else:
        text = {
            "model_type": "t5",
            **ids,
            "decoder_start_token_id": tok.pad_token_id,
            "d_model": 32,
            "d_kv": 16,
            "d_ff": 37,
            "num_layers": 1,
            "num_decoder_layers": 1,
            "num_heads": 2,
        }
    small = {"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2}
    config = transformers.Blip2Config(
        vision_config={**small, "num_hidden_layers": 1, "image_size": 32, "patch_size": 8},
        qformer_config={**small, "num_hidden_layers": 1, "vocab_size": 64},
        text_config=text,
        num_query_tokens=NUM_QUERY_TOKENS,
        image_token_index=tok.convert_tokens_to_ids("<image>"),
    )
    return transformers.Blip2ForConditionalGeneration(config).eval(), processor


@pytest.fixture(scope="module")
def opt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return tiny_blip2(tmp_path_factory.mktemp("blip2_opt"), "opt")


def record_generate(model: Any) -> list[tuple[dict[str, Any], Any]]:
    """Wrap ``model.generate`` to record each call's inputs and output."""
    calls: list[tuple[dict[str, Any], Any]] = []
    original = model.generate

    def generate(**kwargs: Any) -> Any:
        out = original(**kwargs)
        calls.append((kwargs, out))
        return out

    model.generate = generate
    return calls


async def test_captions_are_strings_from_one_generate_per_batch(
    opt: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = opt
    calls = record_generate(model)
    backend = blip2.Blip2Model.from_pretrained_objects(model, processor, max_new_tokens=6)
    captions = await backend.caption(photos)
    assert len(calls) == 1 and len(captions) == 3
    assert all(isinstance(c, str) for c in captions)
    (inputs, out), *_ = calls
    # the processor expanded the image into num_query_tokens image tokens before the text
    image_id = model.config.image_token_index
    assert (inputs["input_ids"][:, :NUM_QUERY_TOKENS] == image_id).all()
    assert inputs["pixel_values"].shape == (3, 3, 32, 32)
    # OPT echoes the prompt: we decode only what comes after it
    width = inputs["input_ids"].shape[1]
    assert torch.equal(out[:, :width], inputs["input_ids"])
    new = processor.batch_decode(out[:, width:], skip_special_tokens=True)
    assert captions == [" ".join(t.split()) for t in new]
    # batch_size splits the work
    calls.clear()
    small = blip2.Blip2Model.from_pretrained_objects(model, processor, batch_size=2)
    assert len(await small.caption(photos)) == 3 and len(calls) == 2


async def test_answers_leave_the_question_prompt_out(
    opt: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = opt
    calls = record_generate(model)
    backend = blip2.Blip2Model.from_pretrained_objects(model, processor, max_new_tokens=5)
    questions = ["what is this?", "is there a cup on the table here?", "what animal?"]
    answers = await backend.answer(photos, questions)
    assert len(calls) == 1 and len(answers) == 3
    assert all(isinstance(a, str) and not a.startswith("Question:") for a in answers)
    (inputs, out), *_ = calls
    # the prompts are in BLIP-2's style, padded on the left so generation continues each one
    prompt = processor.batch_decode(inputs["input_ids"], skip_special_tokens=True)
    assert [p.strip() for p in prompt] == [f"Question: {q} Answer:" for q in questions]
    assert (inputs["input_ids"][:, -1] != processor.tokenizer.pad_token_id).all()
    width = inputs["input_ids"].shape[1]
    full = processor.batch_decode(out, skip_special_tokens=True)
    assert all(t.strip().startswith("Question:") for t in full)  # what we strip
    new = processor.batch_decode(out[:, width:], skip_special_tokens=True)
    assert answers == [blip2._first_line(t) for t in new]
    with pytest.raises(ValueError, match="2 images and 1 questions"):
        await backend.answer(photos[:2], ["why?"])


async def test_an_encoder_decoder_language_model_returns_only_new_ids(
    tmp_path: Path, photos: list[Image]
) -> None:
    model, processor = tiny_blip2(tmp_path, "t5")
    calls = record_generate(model)
    backend = blip2.Blip2Model.from_pretrained_objects(model, processor, max_new_tokens=4)
    answers = await backend.answer(photos[:2], ["what is it?", "why?"])
    assert len(calls) == 1 and all(isinstance(a, str) for a in answers)
    (_, out), *_ = calls
    assert out.shape[1] <= 5  # decoder start + at most 4 new tokens: nothing to strip
    assert len(await backend.caption(photos[:1])) == 1


def test_helpers_and_options() -> None:
    assert blip2._first_line("\n two cats \nQuestion: and?") == "two cats"
    assert blip2._first_line("") == ""
    assert blip2.torch_dtype("auto", "cuda:0") == torch.float16
    assert blip2.torch_dtype("auto", "cpu") == torch.float32
    assert blip2.torch_dtype("bfloat16", "cpu") == torch.bfloat16
    with pytest.raises(ValueError, match="dtype must be one of"):
        blip2.Blip2Model(dtype="int4")
    with pytest.raises(ValueError, match=r"must contain \{question\}"):
        blip2.Blip2Model(vqa_prompt="Q: A:")
    with pytest.raises(ValueError, match="device must be one of"):
        blip2.Blip2Model(device="tpu")


def test_factories_build_without_loading_weights() -> None:
    cap = blip2.from_config({"max_new_tokens": "7", "device": "cpu"})
    assert cap.max_new_tokens == 7 and cap.model == blip2.DEFAULT_MODEL
    assert not cap._lazy.loaded
    vqa = blip2.vqa_from_config({"model": "Salesforce/blip2-flan-t5-xl", "dtype": "float16"})
    assert vqa.model == "Salesforce/blip2-flan-t5-xl" and vqa.dtype == "float16"
    with pytest.raises(ValueError, match=r"unknown setting tools\.vqa\.colour"):
        blip2.vqa_from_config({"colour": "red"})


def test_factories_explain_a_missing_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common.importlib.util, "find_spec", lambda name: None)
    for factory in (blip2.from_config, blip2.vqa_from_config):
        with pytest.raises(BackendUnavailable, match=r"blip2 model needs torch and transformers"):
            factory({})


async def test_an_uncached_model_fails_with_a_clear_tool_error(photos: list[Image]) -> None:
    from hammr.tools.base import ToolError

    backend = blip2.Blip2Model(model="/nonexistent/blip2", device="cpu")
    with pytest.raises(ToolError, match="could not load local model"):
        await backend.caption(photos[:1])


async def test_a_saved_checkpoint_loads_lazily_from_a_directory(
    opt: tuple[Any, Any], tmp_path: Path, photos: list[Image]
) -> None:
    model, processor = opt
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    backend = blip2.Blip2Model(model=str(tmp_path), device="cpu", max_new_tokens=3)
    assert not backend._lazy.loaded
    answers = await backend.answer(photos[:2], ["what is it?", "where?"])
    assert backend._lazy.loaded and len(answers) == 2
    loaded, loaded_processor = backend._lazy.get()
    assert loaded.dtype == torch.float32 and loaded_processor.num_query_tokens == NUM_QUERY_TOKENS
