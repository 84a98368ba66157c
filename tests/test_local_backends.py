"""The local transformers backends (hammr[local]) on tiny random-weight models.

Nothing is downloaded: every model is built from a tiny config with random weights and every
processor from its parts (image processors with explicit sizes, tokenizers from vocab files
written to tmp_path). The real pre- and post-processing runs on real photos; the outputs of
random weights are meaningless, so the tests check contracts (shapes, coordinates, norms,
types, one forward pass per batch) and feed known values through the post-processing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

from hammr.backends.local import _common, blip, clip, depth, owlv2
from hammr.backends.registry import BackendUnavailable
from hammr.values import Box, Image
from local_models_support import byte_level_chars, photo, torch, transformers

torch.manual_seed(0)
torch.set_num_threads(2)


# -- real photos ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def photos() -> list[Image]:
    """Three real photos: astronaut (512x512), coffee (600x400), chelsea (451x300)."""
    return [photo("astronaut"), photo("coffee"), photo("chelsea")]


@pytest.fixture(scope="module")
def same_size(photos: list[Image]) -> list[Image]:
    """Three photos of one (non-square) size, so aspect-preserving processors batch them."""
    base = photos[1].pixels
    return [
        Image(base),
        Image(base.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)),
        Image(photos[2].pixels.resize(base.size)),
    ]


# -- offline tokenizers -----------------------------------------------------------------


def clip_tokenizer(tmp: Path, max_length: int) -> Any:
    """A CLIP BPE tokenizer with byte-level characters only (no merges): 514 tokens."""
    chars = byte_level_chars()
    tokens = chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]
    (tmp / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (tmp / "merges.txt").write_text("#version: 0.2\n")
    return transformers.CLIPTokenizer(
        str(tmp / "vocab.json"), str(tmp / "merges.txt"), model_max_length=max_length
    )


BERT_WORDS = ["what", "is", "the", "color", "of", "a", "photo", "cat", "dog", "there", "no"]


def bert_tokenizer(tmp: Path) -> Any:
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["?", ".", ","]
    (tmp / "vocab.txt").write_text("\n".join(special + BERT_WORDS + letters) + "\n")
    tok = transformers.BertTokenizer(str(tmp / "vocab.txt"), model_max_length=32)
    tok.add_special_tokens({"bos_token": "[DEC]"})
    return tok


TINY_TEXT = {
    "hidden_size": 32,
    "intermediate_size": 37,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}
TINY_VISION = {**TINY_TEXT, "image_size": 32, "patch_size": 8}


def _count_forward(module: Any) -> list[int]:
    calls = [0]

    def hook(*_: Any) -> None:
        calls[0] += 1

    module.register_forward_hook(hook)
    return calls


# -- common -----------------------------------------------------------------------------


def test_device_choice() -> None:
    assert _common.resolve_device("cpu") == "cpu"
    expected = "cuda" if torch.cuda.is_available() else None
    got = _common.resolve_device("auto")
    assert got in ("cuda", "mps", "cpu")
    if expected:
        assert got == expected
    with pytest.raises(ValueError, match="device must be one of"):
        owlv2.OWLv2Detector(device="tpu")


def test_factories_build_without_loading_weights() -> None:
    det = owlv2.from_config({"threshold": "0.2", "device": "cpu"})
    assert det.threshold == 0.2 and not det._lazy.loaded
    assert not depth.from_config({"kind": "relative"})._lazy.loaded
    emb = clip.presence_from_config({"background": "a photo | a thing"})
    assert emb.background == ("a photo", "a thing")
    # similarity and object_in_image on one checkpoint share one loaded model
    assert clip.from_config({})._lazy is clip.presence_from_config({})._lazy
    model = blip.vqa_from_config({"max_new_tokens": "5"})
    assert model.max_new_tokens == 5
    with pytest.raises(ValueError, match=r"unknown setting tools\.detect\.colour"):
        owlv2.from_config({"colour": "red"})


def test_factories_explain_a_missing_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common.importlib.util, "find_spec", lambda name: None)
    for factory in (owlv2.from_config, depth.from_config, clip.from_config, blip.from_config):
        with pytest.raises(BackendUnavailable, match=r"pip install 'hammr\[local\]'"):
            factory({})


def test_an_uncached_model_fails_with_a_clear_tool_error(photos: list[Image]) -> None:
    from hammr.tools.base import ToolError

    det = owlv2.OWLv2Detector(model=str(Path("/nonexistent/owlv2")), device="cpu")
    with pytest.raises(ToolError, match="could not load local model"):
        import asyncio

        asyncio.run(det.detect(photos[:1], ["cat"]))


# -- OWLv2 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def owl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    tok = clip_tokenizer(tmp_path_factory.mktemp("owl"), max_length=16)
    text = {
        **TINY_TEXT,
        "vocab_size": len(tok),
        "max_position_embeddings": 16,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    # the class head compares image features with text embeddings: projection = text width
    config = transformers.Owlv2Config(
        text_config=text, vision_config=TINY_VISION, projection_dim=TINY_TEXT["hidden_size"]
    )
    model = transformers.Owlv2ForObjectDetection(config).eval()
    image_processor = transformers.Owlv2ImageProcessor(size={"height": 32, "width": 32})
    return model, transformers.Owlv2Processor(image_processor=image_processor, tokenizer=tok)


def test_owlv2_box_mapping_undoes_the_square_padding() -> None:
    # A 600x400 image is padded to 600x600: a box covering the image's lower half in the
    # padded square's fractions is y 200..400 of the image, not 2/3 of the height scaled.
    cxcywh = np.array([[0.5, 0.5, 1.0, 1 / 3], [0.25, 0.25, 0.1, 0.1], [0.5, 0.9, 0.2, 0.1]])
    xyxy = owlv2.boxes_to_pixels(cxcywh, width=600, height=400)
    np.testing.assert_allclose(xyxy[0], [0, 200, 600, 400])
    np.testing.assert_allclose(xyxy[1], [120, 120, 180, 180])
    assert xyxy[2][1] == xyxy[2][3] == 400  # entirely in the padding: clipped to nothing
    # a tall image pads on the right
    np.testing.assert_allclose(
        owlv2.boxes_to_pixels(np.array([[0.25, 0.5, 0.5, 1.0]]), width=300, height=600)[0],
        [0, 0, 300, 600],
    )


def test_owlv2_select_boxes_labels_scores_and_drops_padding_boxes() -> None:
    logits = np.array([[4.0, -9.0], [-9.0, 3.0], [5.0, -9.0], [-9.0, -9.0], [6.0, 0.0]])
    boxes = np.array(
        [
            [0.25, 0.25, 0.2, 0.2],
            [0.6, 0.3, 0.2, 0.2],
            [0.26, 0.25, 0.2, 0.2],  # overlaps the first: suppressed
            [0.5, 0.5, 0.5, 0.5],  # below threshold
            [0.5, 0.9, 0.2, 0.1],  # lies in the padding of a 600x400 image
        ]
    )
    found = owlv2.select_boxes(logits, boxes, ["cat", "dog"], 600, 400, threshold=0.1)
    assert [(b.label, round(b.score or 0, 3)) for b in found] == [("cat", 0.993), ("dog", 0.953)]
    cat = found[0]
    assert (cat.x, cat.y, cat.w, cat.h) == pytest.approx((96, 90, 120, 120))
    no_nms = owlv2.select_boxes(logits, boxes, ["cat", "dog"], 600, 400, 0.1, nms_iou=1.0)
    assert len(no_nms) == 3


def test_owlv2_agrees_with_the_processors_post_processing(
    owl: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = owl
    img = photos[1].pixels  # 600x400
    inputs = processor(text=[["a photo of a cat"]], images=[img], return_tensors="pt")
    with torch.inference_mode():
        out = model(**inputs)
    theirs = processor.image_processor.post_process_object_detection(
        out, threshold=0.0, target_sizes=[(img.height, img.width)]
    )[0]["boxes"].numpy()
    ours = owlv2.boxes_to_pixels(out.pred_boxes[0].numpy(), img.width, img.height)
    theirs[:, [0, 2]] = theirs[:, [0, 2]].clip(0, img.width)  # theirs are not clipped
    theirs[:, [1, 3]] = theirs[:, [1, 3]].clip(0, img.height)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3)


async def test_owlv2_detects_in_image_pixels_with_one_forward_pass(
    owl: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = owl
    calls = _count_forward(model)
    det = owlv2.OWLv2Detector.from_pretrained_objects(model, processor, threshold=0.0)
    found = await det.detect(photos, ["person", "cup", "cat"])
    assert calls[0] == 1 and len(found) == 3
    for img, boxes, name in zip(photos, found, ["person", "cup", "cat"], strict=True):
        assert boxes, "threshold 0 keeps some box"
        for b in boxes:
            assert isinstance(b, Box) and b.label == name and b.score is not None
            assert b.x >= 0 and b.x2 <= img.pixels.width + 1e-6
            assert b.y >= 0 and b.y2 <= img.pixels.height + 1e-6
        scores = [b.score or 0 for b in boxes]
        assert scores == sorted(scores, reverse=True)
    # one image, several names
    (several,) = await det.detect(photos[2:], ["cat", "dog"])
    assert {b.label for b in several} <= {"cat", "dog"}
    with pytest.raises(ValueError, match="one name per image"):
        await det.detect(photos[:2], ["a", "b", "c"])


# -- depth ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def depth_anything() -> tuple[Any, Any]:
    backbone = transformers.Dinov2Config(
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=4,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
        out_features=["stage1", "stage2", "stage3", "stage4"],
        reshape_hidden_states=False,
    )
    config = transformers.DepthAnythingConfig(
        backbone_config=backbone,
        patch_size=14,
        reassemble_hidden_size=32,
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        head_hidden_size=8,
    )
    model = transformers.DepthAnythingForDepthEstimation(config).eval()
    processor = transformers.DPTImageProcessor(
        size={"height": 42, "width": 42},
        keep_aspect_ratio=True,
        ensure_multiple_of=14,
        do_pad=False,
    )
    return model, processor


def test_disparity_becomes_depth_larger_is_farther() -> None:
    disparity = np.array([[4.0, 2.0], [1.0, 0.0]], dtype=np.float32)
    d = depth.disparity_to_depth(disparity)
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, [[0.0, 0.5], [0.75, 1.0]])
    assert not depth.disparity_to_depth(np.ones((2, 2))).any()


async def test_depth_maps_are_image_sized_float32_and_flipped(
    depth_anything: tuple[Any, Any], photos: list[Image], same_size: list[Image]
) -> None:
    model, processor = depth_anything
    calls = _count_forward(model)
    dm = depth.DepthModel.from_pretrained_objects(model, processor)
    maps = await dm.depth(same_size)
    assert calls[0] == 1 and len(maps) == 3
    maps = await dm.depth(photos)  # three shapes: three groups, in order
    assert len(maps) == 3
    for img, m in zip(photos, maps, strict=True):
        assert m.dtype == np.float32
        assert m.shape == (img.pixels.height, img.pixels.width)
        assert m.min() >= 0.0 and m.max() <= 1.0
    # larger = farther: where the raw (inverse-depth) prediction is largest, ours is 0
    inputs = processor(images=photos[2].pixels, return_tensors="pt")
    with torch.inference_mode():
        raw = model(**inputs).predicted_depth[0]
    raw = torch.nn.functional.interpolate(
        raw[None, None], size=maps[2].shape, mode="bicubic", align_corners=False
    )[0, 0].numpy()
    np.testing.assert_allclose(maps[2], depth.disparity_to_depth(raw), atol=1e-5)
    assert maps[2].flat[raw.argmax()] == 0.0 and maps[2].flat[raw.argmin()] == 1.0


async def test_metric_depth_is_returned_as_is(
    depth_anything: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = depth_anything
    assert depth.model_kind(model.config) == "relative"
    metric = transformers.DepthAnythingConfig(depth_estimation_type="metric", max_depth=20)
    assert depth.model_kind(metric) == "metric"
    dm = depth.DepthModel.from_pretrained_objects(model, processor, kind="metric")
    (m,) = await dm.depth(photos[1:2])
    assert m.shape == (400, 600) and m.dtype == np.float32 and m.min() >= 0


# -- CLIP / SigLIP ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clip_parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    tok = clip_tokenizer(tmp_path_factory.mktemp("clip"), max_length=24)
    text = {
        **TINY_TEXT,
        "vocab_size": len(tok),
        "max_position_embeddings": 24,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    config = transformers.CLIPConfig(text_config=text, vision_config=TINY_VISION, projection_dim=12)
    model = transformers.CLIPModel(config).eval()
    image_processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    return model, transformers.CLIPProcessor(image_processor=image_processor, tokenizer=tok)


async def test_clip_embeddings_are_normalised_rows_of_the_projection_dim(
    clip_parts: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = clip_parts
    calls = _count_forward(model.vision_model)
    emb = clip.ClipEmbedder.from_pretrained_objects(model, processor)
    imgs = await emb.embed_images(photos)
    assert calls[0] == 1
    assert imgs.shape == (3, 12) and imgs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(imgs, axis=1), 1.0, atol=1e-5)
    texts = await emb.embed_texts(["a cat", "a photo of a dog on the grass", "x"])
    assert texts.shape == (3, 12)
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    # batching does not change a row
    (alone,) = await emb.embed_texts(["a cat"])
    np.testing.assert_allclose(alone, texts[0], atol=1e-5)


def test_presence_rule() -> None:
    assert clip.presence(np.array([0.30, 0.20, 0.21]), 100.0, 0.5)[0]
    present, p = clip.presence(np.array([0.20, 0.20, 0.20]), 100.0, 0.5)
    assert not present and p == pytest.approx(1 / 3)


async def test_clip_contains_returns_one_bool_per_pair(
    clip_parts: tuple[Any, Any], photos: list[Image]
) -> None:
    model, processor = clip_parts
    emb = clip.ClipEmbedder.from_pretrained_objects(model, processor, threshold=0.2)
    got = await emb.contains(photos, ["person", "cup", "cat"])
    assert len(got) == 3 and all(isinstance(g, bool) for g in got)
    scores = await emb.presence_scores(photos[:1], ["person", "rocket"])
    assert len(scores) == 2 and all(0 < p < 1 for _, p in scores)


async def test_siglip_path(clip_parts: tuple[Any, Any], photos: list[Image]) -> None:
    _, clip_processor = clip_parts
    tok = clip_processor.tokenizer
    text = {**TINY_TEXT, "vocab_size": len(tok), "max_position_embeddings": 24}
    config = transformers.SiglipConfig(text_config=text, vision_config=TINY_VISION)
    model = transformers.SiglipModel(config).eval()
    emb = clip.ClipEmbedder.from_pretrained_objects(model, clip_processor)
    imgs = await emb.embed_images(photos)
    texts = await emb.embed_texts(["a cat", "a much longer text about a dog"])
    assert imgs.shape == (3, 32) and texts.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)


# -- BLIP -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blip_parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Any]:
    tok = bert_tokenizer(tmp_path_factory.mktemp("blip"))
    text = {
        **TINY_TEXT,
        "vocab_size": len(tok),
        "encoder_hidden_size": 32,
        "max_position_embeddings": 64,
        "bos_token_id": tok.bos_token_id,
        "sep_token_id": tok.sep_token_id,
        "eos_token_id": tok.sep_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    config = transformers.BlipConfig(text_config=text, vision_config=TINY_VISION, projection_dim=16)
    image_processor = transformers.BlipImageProcessor(size={"height": 32, "width": 32})
    processor = transformers.BlipProcessor(image_processor=image_processor, tokenizer=tok)
    captioner = transformers.BlipForConditionalGeneration(config).eval()
    vqa = transformers.BlipForQuestionAnswering(config).eval()
    return captioner, vqa, processor


async def test_blip_captions_and_answers_strings(
    blip_parts: tuple[Any, Any, Any], photos: list[Image]
) -> None:
    captioner, vqa, processor = blip_parts
    vision_calls = _count_forward(captioner.vision_model)
    model = blip.BlipModel.from_pretrained_objects(
        caption=(captioner, processor), vqa=(vqa, processor), max_new_tokens=4
    )
    captions = await model.caption(photos)
    assert vision_calls[0] == 1
    assert len(captions) == 3 and all(isinstance(c, str) for c in captions)
    vqa_calls = _count_forward(vqa.vision_model)
    answers = await model.answer(photos, ["what is the color of the cat?", "is there a dog?", "no"])
    assert vqa_calls[0] == 1
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers)
    with pytest.raises(ValueError, match="2 images and 1 questions"):
        await model.answer(photos[:2], ["what?"])


async def test_blip_part_left_out_fails_clearly(
    blip_parts: tuple[Any, Any, Any], photos: list[Image]
) -> None:
    from hammr.tools.base import ToolError

    captioner, _, processor = blip_parts
    model = blip.BlipModel.from_pretrained_objects(caption=(captioner, processor))
    with pytest.raises(ToolError, match="no question-answering model"):
        await model.answer(photos[:1], ["what?"])
