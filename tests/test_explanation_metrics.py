"""Multimodal-explanation metrics: MEAgent's detection score (Eq. 2, FS-MEVQA's official
``vis_eval``), REX's grounding score (Eq. 1) and the pycocoevalcap language metrics.

Known answers are worked out by hand in the comments; the differential tests compare the
library with independent readings of the two official codes written here with numpy."""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from hammr.eval.metrics import language
from hammr.eval.metrics.explanation import (
    BoxRef,
    GroundedExplanation,
    JavaMissingError,
    box_token_positions,
    detection_score,
    detection_score_xyxy,
    grounding_score,
    language_scores,
    score_explanations,
    spice_unavailable,
    tokens_following,
    word_before,
)
from hammr.values import Box

HAS_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(
    not HAS_JAVA, reason="no `java` on PATH (apt-get install -y default-jre-headless)"
)

APPLE = [0, 0, 10, 10]
PEAR = [20, 0, 30, 10]
TREE = [50, 50, 60, 60]


def ge(text: str, *groups: tuple[str, list[list[float]]]) -> GroundedExplanation:
    """An explanation with one BoxRef per (name, [xyxy, ...])."""
    refs = [
        BoxRef(name, tuple(Box(b[0], b[1], b[2] - b[0], b[3] - b[1]) for b in boxes))
        for name, boxes in groups
    ]
    return GroundedExplanation(text, refs)


# --- the shared form ---------------------------------------------------------------------------


def test_token_positions_and_names() -> None:
    text = "The apple [BOX] is left of the white building [box], located here [BOX]."
    assert box_token_positions(text) == [10, 46, 66]
    assert word_before(text, 0) == "apple"
    assert word_before(text, 1) == "building"
    assert tokens_following(text, "apple") == [0]
    assert tokens_following(text, "white building") == [1]
    assert tokens_following(text, "building") == [1]
    assert tokens_following(text, "LOC") == [2]
    # a name must end at a word boundary: 'pineapple' does not follow as 'apple'
    assert tokens_following("the pineapple [BOX]", "apple") == []
    with pytest.raises(IndexError):
        word_before(text, 3)


def test_forms_round_trip() -> None:
    ref = GroundedExplanation.from_named_boxes(
        "The man [BOX] is taller than the other man [BOX].",
        {"man": [[[0, 0, 10, 20]], [[30, 0, 40, 15]]]},
    )
    assert ref.token_count == 2
    assert [r.name for r in ref.boxes] == ["man", "man"]
    assert ref.boxes[1].boxes == (Box(30, 0, 10, 15),)
    assert ref.named_xyxy() == {"man": [[[0, 0, 10, 20]], [[30, 0, 40, 15]]]}
    # BoxRefs are put at their tokens; the names keep the file's order for the metric
    swapped = GroundedExplanation.from_named_boxes(
        "The woman [BOX] holds the umbrella [BOX].",
        {"umbrella": [[[0, 0, 10, 10]]], "woman": [[[5, 5, 20, 40]]]},
    )
    assert [r.name for r in swapped.boxes] == ["woman", "umbrella"]
    assert swapped.name_order == ("umbrella", "woman")
    assert list(swapped.named_groups()) == ["umbrella", "woman"]
    # a group no token follows: BoxRefs stay name by name in the file's order
    unplaced = GroundedExplanation.from_named_boxes(
        "The woman [BOX] holds it.", {"umbrella": [[[0, 0, 10, 10]]], "woman": [[[5, 5, 20, 40]]]}
    )
    assert [r.name for r in unplaced.boxes] == ["umbrella", "woman"]
    # a name with no groups is still scored (and padded) by the official loop
    assert list(GroundedExplanation("x", [], ("cup",)).named_groups()) == ["cup"]
    pred = GroundedExplanation.from_token_boxes(
        "the cup [BOX], near the plate [BOX].", [[[1, 2, 3, 4]], [[5, 6, 7, 8], [0, 0, 1, 1]]]
    )
    assert [r.name for r in pred.boxes] == ["cup", "plate"]
    assert pred.token_xyxy() == [[[1, 2, 3, 4]], [[5, 6, 7, 8], [0, 0, 1, 1]]]
    with pytest.raises(ValueError):
        GroundedExplanation.from_named_boxes("x [BOX]", {"x": [[[5, 5, 4, 9]]]})  # inverted
    with pytest.raises(TypeError):
        BoxRef("x", ([0, 0, 1, 1],))  # type: ignore[arg-type]


# --- detection (Eq. 2): known answers ------------------------------------------------------------


def test_detection_perfect_single_name() -> None:
    ref = ge("The apple [BOX] is red.", ("apple", [APPLE]))
    assert detection_score(ref, ref) == 1.0


def test_detection_perfect_two_names_official_padding() -> None:
    ref = ge("The apple [BOX] is left of the pear [BOX].", ("apple", [APPLE]), ("pear", [PEAR]))
    # official: apple -> [1], padded inside the loop to max(G=1, P=2) = 2 -> [1, 0];
    # pear -> [1, 0, 1], pad to max(2, 2) is a no-op -> 2/3
    assert detection_score(ref, ref) == pytest.approx(2 / 3)
    # Eq. 2 as written (one padding to max(G, P) = 2): [1, 1] -> 1
    assert detection_score(ref, ref, official_padding=False) == 1.0


def test_detection_missing_box() -> None:
    ref = ge("The apple [BOX] is left of the pear [BOX].", ("apple", [APPLE]), ("pear", [PEAR]))
    pred = ge("The apple [BOX] is left of the pear.", ("apple", [APPLE]))
    # apple -> [1], pad to max(1, P=1) -> [1]; pear: no token -> pad to max(2, 1) -> [1, 0]
    assert detection_score(ref, pred) == pytest.approx(0.5)
    assert detection_score(ref, pred, official_padding=False) == pytest.approx(0.5)


def test_detection_redundant_box() -> None:
    ref = ge("The apple [BOX] is red.", ("apple", [APPLE]))
    pred = ge("The apple [BOX] under the tree [BOX] is red.", ("apple", [APPLE]), ("tree", [TREE]))
    # apple -> [1], padded to max(G=1, P=2) -> [1, 0]
    assert detection_score(ref, pred) == pytest.approx(0.5)
    # an extra box inside the token's own group is not punished (max over predicted boxes)
    crowded = ge("The apple [BOX] is red.", ("apple", [APPLE, TREE]))
    assert detection_score(ref, crowded) == 1.0


def test_detection_swapped_names() -> None:
    ref = ge("The apple [BOX] is left of the pear [BOX].", ("apple", [APPLE]), ("pear", [PEAR]))
    # same boxes in the same token order, names swapped: the pear's token holds the apple box
    swapped = ge(
        "The pear [BOX] is right of the apple [BOX].", ("pear", [APPLE]), ("apple", [PEAR])
    )
    assert detection_score(ref, swapped) == 0.0
    assert detection_score(ref, swapped, official_padding=False) == 0.0
    assert grounding_score(ref, swapped) == 1.0


def test_detection_partial_overlap() -> None:
    ref = ge("The apple [BOX].", ("apple", [APPLE]))
    pred = ge("The apple [BOX].", ("apple", [[5, 0, 15, 10]]))
    # intersection 5 x 10 = 50, union 100 + 100 - 50 = 150
    assert detection_score(ref, pred) == pytest.approx(50 / 150)
    # two reference boxes in one group, one found: mean of the best IoUs (1 and 0)
    two = ge("The apples [BOX].", ("apples", [APPLE, PEAR]))
    one = ge("The apples [BOX].", ("apples", [APPLE]))
    assert detection_score(two, one) == pytest.approx(0.5)
    # a token whose box list is empty scores 0 (the official `re['boxes'][id] == []`)
    assert detection_score_xyxy({"apple": [[APPLE]]}, "the apple [BOX]", [[]]) == 0.0
    # ... and so does a token beyond the box list
    assert detection_score_xyxy({"apple": [[APPLE]]}, "the apple [BOX]", []) == 0.0


def test_detection_repeated_name_pairs_in_order() -> None:
    left, right = [0, 0, 10, 40], [30, 0, 40, 40]
    ref = ge("The man [BOX] is taller than the other man [BOX].", ("man", [left]), ("man", [right]))
    assert detection_score(ref, ref) == 1.0
    # groups of one name pair with that name's tokens in order: swapping them scores 0
    flipped = ge(
        "The man [BOX] is taller than the other man [BOX].", ("man", [right]), ("man", [left])
    )
    assert detection_score(ref, flipped) == 0.0


def test_detection_official_padding_depends_on_name_order() -> None:
    text = "The apple [BOX] and the apple [BOX] are near the pear [BOX]."
    boxes = [[APPLE], [[0, 20, 10, 30]], [PEAR]]
    apples_first = {"apple": [[APPLE], [[0, 20, 10, 30]]], "pear": [[PEAR]]}
    pear_first = {"pear": [[PEAR]], "apple": [[APPLE], [[0, 20, 10, 30]]]}
    # apple, pear: [1, 1] -> pad to 3 -> [1, 1, 0]; pear -> [1, 1, 0, 1] -> 3/4
    assert detection_score_xyxy(apples_first, text, boxes) == pytest.approx(3 / 4)
    # pear, apple: [1] -> pad to 3 -> [1, 0, 0]; apples -> [1, 0, 0, 1, 1] -> 3/5
    assert detection_score_xyxy(pear_first, text, boxes) == pytest.approx(3 / 5)
    for named in (apples_first, pear_first):
        assert detection_score_xyxy(named, text, boxes, official_padding=False) == 1.0


def test_detection_reads_loc_and_punctuation() -> None:
    named = {"LOC": [[APPLE]], "white plate": [[PEAR]]}
    text = "A cup is located here [BOX], on the White Plate [BOX]."
    assert detection_score_xyxy(named, text, [[APPLE], [PEAR]], official_padding=False) == 1.0
    assert detection_score_xyxy({}, text, [[APPLE]]) == 0.0  # no reference names: 0


# --- grounding (REX Eq. 1): known answers --------------------------------------------------------


def test_grounding_known_answers() -> None:
    ref = ge("The apple [BOX].", ("apple", [APPLE]))
    assert grounding_score(ref, ref) == 1.0
    assert grounding_score(ref, ge("the apple [BOX]", ("apple", [[5, 0, 15, 10]]))) == (
        pytest.approx(50 / 150)
    )
    # sets are compared as painted areas: two overlapping halves against their hull
    halves = ge("a [BOX] b [BOX]", ("a", [APPLE]), ("b", [[5, 0, 15, 10]]))
    hull = ge("c [BOX]", ("c", [[0, 0, 15, 10]]))
    assert grounding_score(halves, hull) == 1.0
    # REX truncates coordinates to whole pixels: [0.9, 10.9) paints columns 0..9
    shifted = ge("the apple [BOX]", ("apple", [[0.9, 0, 10.9, 10]]))
    assert grounding_score(ref, shifted) == 1.0
    assert detection_score(ref, shifted) == pytest.approx(91 / 109)
    # clipped to the image when its size is given
    wide = ge("the apple [BOX]", ("apple", [[0, 0, 20, 10]]))
    assert grounding_score(ref, wide) == pytest.approx(0.5)
    assert grounding_score(ref, wide, image_size=(10, 10)) == 1.0
    # nothing predicted: 0; nothing on either side: REX's NaN becomes 0
    assert grounding_score(ref, GroundedExplanation("no boxes", [])) == 0.0
    empty = GroundedExplanation("", [])
    assert grounding_score(empty, empty) == 0.0


def test_grounding_last_reference_box_only() -> None:
    ref = ge("The apple [BOX] and the pear [BOX].", ("apple", [APPLE]), ("pear", [PEAR]))
    pred = ge("The apple [BOX].", ("apple", [APPLE]))
    assert grounding_score(ref, pred) == pytest.approx(100 / 200)
    assert grounding_score(ref, pred, last_reference_box_only=True) == 0.0


def test_shuffled_tokens_keep_grounding_and_lose_detection() -> None:
    ref = ge(
        "The apple [BOX] is to the left of the pear [BOX] under the tree [BOX].",
        ("apple", [APPLE]),
        ("pear", [PEAR]),
        ("tree", [TREE]),
    )
    rng = random.Random(3)
    words = ref.text.split()
    drops = 0
    for _ in range(50):
        rng.shuffle(words)
        shuffled = GroundedExplanation(" ".join(words), ref.boxes)
        assert grounding_score(ref, shuffled) == 1.0
        drops += detection_score(ref, shuffled) < detection_score(ref, ref)
    assert drops >= 40


def test_score_explanations_means() -> None:
    refs = {
        "a": ge("The apple [BOX].", ("apple", [APPLE])),
        "b": ge("The pear [BOX].", ("pear", [PEAR])),
    }
    preds = {"a": ge("The apple [BOX].", ("apple", [[5, 0, 15, 10]]))}  # 'b' unanswered
    scores = score_explanations(refs, preds)
    assert scores.samples == 2
    assert scores.detection == pytest.approx((1 / 3 + 0) / 2)
    assert scores.grounding == pytest.approx((1 / 3 + 0) / 2)
    assert scores.language is None
    assert scores.as_dict()["samples"] == 2


# --- differential tests against independent readings of the official code ------------------------


def official_vis_eval_reading(
    gt: Mapping[str, Sequence[Sequence[Sequence[float]]]],
    explanation: str,
    boxes: Sequence[Sequence[Sequence[float]]],
    padding_in_loop: bool,
) -> float:
    """FS-MEVQA metrics/visual_metrics.py (c7edea2a) read again, vectorised with numpy: token
    offsets by regex, the IoU matrix of a group pair by broadcasting, the running padding."""
    exp = re.sub(r"[.;,]", "", explanation).lower()
    offsets = [m.start() for m in re.finditer(re.escape("[box]"), exp)]

    def following(obj: str) -> list[int]:
        obj = "located here" if obj == "LOC" else obj
        return [j for j, at in enumerate(offsets) if (" " + exp[: at - 1]).endswith(" " + obj)]

    def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = np.maximum(a[:, None, :2], b[None, :, :2])
        rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
        wh = np.clip(rb - lt, 0, None)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (area_a[:, None] + area_b[None, :] - inter)

    cur: list[float] = []
    n_gt = 0
    for obj, groups in gt.items():
        ids = following(obj)[: len(groups)]
        n_gt += len(groups)
        for i, j in enumerate(ids):
            if j >= len(boxes) or list(boxes[j]) == []:
                cur.append(0.0)
            else:
                m = iou_matrix(np.array(groups[i], float), np.array(boxes[j], float))
                cur.append(float(m.max(axis=1).mean()))
        if padding_in_loop:
            cur += [0.0] * (max(n_gt, len(boxes)) - len(cur))
    if not padding_in_loop:
        cur += [0.0] * (max(n_gt, len(boxes)) - len(cur))
    return sum(cur) / len(cur) if cur else 0.0


NAMES = ["apple", "pear", "white plate", "plate", "man", "LOC", "tree"]


def random_box(rng: random.Random) -> list[float]:
    x, y = rng.randint(0, 80), rng.randint(0, 60)
    return [x, y, x + rng.randint(1, 40), y + rng.randint(1, 40)]


def random_case(
    rng: random.Random,
) -> tuple[dict[str, list[list[list[float]]]], str, list[list[list[float]]]]:
    gt: dict[str, list[list[list[float]]]] = {}
    for name in rng.sample(NAMES, rng.randint(0, 4)):
        gt[name] = [
            [random_box(rng) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 2))
        ]
    words: list[str] = []
    boxes: list[list[list[float]]] = []
    for _ in range(rng.randint(0, 6)):
        name = rng.choice(NAMES)
        phrase = "located here" if name == "LOC" else name
        words += ["the", *phrase.split(), "[BOX]" + rng.choice(["", "", ".", ","])]
        reuse = name in gt and rng.random() < 0.6
        group = rng.choice(gt[name]) if reuse else [random_box(rng)]
        if rng.random() < 0.15:
            group = []
        dx, dy = rng.choice([0, 0, 1, -1, 3]), rng.choice([0, 0, 2, -2])
        boxes.append([[b[0] + dx, b[1] + dy, b[2] + dx, b[3] + dy] for b in group])
    if rng.random() < 0.2 and boxes:
        boxes.pop()  # fewer box lists than tokens
    if rng.random() < 0.2:
        boxes.append([random_box(rng)])  # more box lists than tokens
    return gt, " ".join(words), boxes


@pytest.mark.parametrize("official_padding", [True, False])
def test_detection_matches_an_independent_reading(official_padding: bool) -> None:
    rng = random.Random(20240611)
    nonzero = 0
    for _ in range(600):
        gt, text, boxes = random_case(rng)
        expected = official_vis_eval_reading(gt, text, boxes, official_padding)
        got = detection_score_xyxy(gt, text, boxes, official_padding=official_padding)
        assert got == pytest.approx(expected, abs=1e-12), (gt, text, boxes)
        nonzero += expected > 0
    assert nonzero > 100  # the cases exercise real overlaps, not only zeros


def rex_reading(
    gt: Sequence[Sequence[float]], pred: Sequence[Sequence[float]], size: tuple[int, int]
) -> float:
    """szzexpoi/rex model/util/evaluation.py (3dbb66b5) read again: paint image-sized masks,
    IoU = and / or, NaN -> 0 (every reference box painted, as Eq. 1 reads)."""
    width, height = size
    mask_gt = np.zeros([height, width])
    for x1, y1, x2, y2 in gt:
        mask_gt[int(y1) : int(y2), int(x1) : int(x2)] = 1
    mask_pred = np.zeros([height, width])
    for x1, y1, x2, y2 in pred:
        mask_pred[int(y1) : int(y2), int(x1) : int(x2)] = 1
    with np.errstate(invalid="ignore"):
        iou = np.logical_and(mask_pred, mask_gt).sum() / np.logical_or(mask_pred, mask_gt).sum()
    return 0.0 if np.isnan(iou) else float(iou)


def test_grounding_matches_an_independent_reading() -> None:
    rng = random.Random(7)
    size = (120, 90)
    for _ in range(300):

        def boxes(n: int) -> list[list[float]]:
            out = []
            for _ in range(n):
                x, y = rng.uniform(0, 110), rng.uniform(0, 80)
                out.append([x, y, x + rng.uniform(0.5, 60), y + rng.uniform(0.5, 60)])
            return out

        gt, pred = boxes(rng.randint(0, 4)), boxes(rng.randint(0, 4))
        ref = GroundedExplanation.from_named_boxes("", {"g": [gt]} if gt else {})
        hyp = GroundedExplanation.from_token_boxes("", [pred] if pred else [])
        got = grounding_score(ref, hyp, image_size=size)
        assert got == pytest.approx(rex_reading(gt, pred, size), abs=1e-12)
        # without the size, boxes running off the image are not clipped; inside it, the same
        inside = [b for b in gt + pred if b[2] <= size[0] and b[3] <= size[1]]
        if len(inside) == len(gt) + len(pred):
            assert grounding_score(ref, hyp) == pytest.approx(got, abs=1e-12)


# --- language metrics through pycocoevalcap ------------------------------------------------------

REFS = {
    "1": ["The apple [BOX] is to the left of the pear [BOX]."],
    "2": ["The man [BOX] is holding a red umbrella [BOX]."],
    "3": ["There is a cat [BOX] sleeping on the sofa [BOX]."],
    "4": ["The cars [BOX] are parked in front of the white building [BOX]."],
}


@needs_java
def test_language_metrics_in_range_and_ordered() -> None:
    same = {k: v[0] for k, v in REFS.items()}
    close = {
        "1": "The apple [BOX] is on the left of the pear [BOX].",
        "2": "A man [BOX] holds a red umbrella [BOX].",
        "3": "A cat [BOX] is sleeping on the sofa [BOX].",
        "4": "Cars [BOX] are parked in front of a building [BOX].",
    }
    far = {
        "1": "Two dogs run across a field.",
        "2": "It is sunny.",
        "3": "A bus drives down the road.",
        "4": "",
    }
    metrics = ("BLEU", "METEOR", "ROUGE_L", "CIDEr")
    scores = [language_scores(REFS, p, metrics).values for p in (same, close, far)]
    keys = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
    for values in scores:
        assert sorted(values) == sorted(keys)
        for k in keys:
            top = 10.0 if k == "CIDEr" else 1.0
            assert 0.0 <= values[k] <= top + 1e-9, (k, values[k])
    for k in keys:
        assert scores[0][k] > scores[1][k] > scores[2][k], k
    assert scores[0]["Bleu_4"] == pytest.approx(1.0, abs=1e-6)
    assert scores[0]["ROUGE_L"] == pytest.approx(1.0)


@needs_java
def test_box_token_is_three_ptb_tokens_and_counts() -> None:
    tokens = language.tokenized({"a": ["The apple [BOX] is red."]})
    assert tokens == {"a": ["the apple -lsb- box -rsb- is red"]}
    with_box = {"1": "The apple [BOX] is to the left of the pear [BOX]."}
    without = {"1": "The apple is to the left of the pear."}
    refs = {"1": REFS["1"]}
    a = language_scores(refs, with_box, ("BLEU", "ROUGE_L")).values
    b = language_scores(refs, without, ("BLEU", "ROUGE_L")).values
    assert a["Bleu_1"] > b["Bleu_1"] and a["ROUGE_L"] > b["ROUGE_L"]


@needs_java
def test_language_several_references_and_percent() -> None:
    refs = {"1": ["A red apple [BOX].", "The apple [BOX] is red."], "2": ["A pear [BOX]."]}
    preds = {"1": "The apple [BOX] is red.", "2": "A pear [BOX]."}
    scores = language_scores(refs, preds, ("BLEU", "ROUGE_L"))
    assert scores.values["ROUGE_L"] == pytest.approx(1.0)
    assert scores.percent()["ROUGE_L"] == pytest.approx(100.0)


def test_language_rejects_mismatched_ids_and_unknown_metrics() -> None:
    with pytest.raises(ValueError, match="different ids"):
        language_scores({"a": ["x"]}, {"b": "x"})
    with pytest.raises(ValueError, match="unknown language metric"):
        language_scores({"a": ["x"]}, {"a": "x"}, ("BLEURT",))


def test_java_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(language.shutil, "which", lambda _name: None)
    with pytest.raises(JavaMissingError, match="default-jre-headless"):
        language_scores({"a": ["x"]}, {"a": "x"}, ("BLEU",))
    reason = spice_unavailable()
    assert reason is not None and "default-jre-headless" in reason


@needs_java
def test_spice_reported_unavailable_offline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # pycocoevalcap's own spice/lib without CoreNLP, and no download allowed
    (tmp_path / "spice" / "lib").mkdir(parents=True)
    monkeypatch.setattr(language, "package_dir", lambda: tmp_path)
    monkeypatch.delenv(language.CORENLP_ENV, raising=False)
    import pycocoevalcap.spice.get_stanford_models as fetch

    def no_download(*_args: object, **_kw: object) -> None:
        raise AssertionError("SPICE tried to download CoreNLP")

    monkeypatch.setattr(fetch, "urlretrieve", no_download)
    scores = language_scores(REFS, {k: v[0] for k, v in REFS.items()}, ("ROUGE_L", "SPICE"))
    assert "SPICE" not in scores.values
    assert scores.values["ROUGE_L"] == pytest.approx(1.0)
    reason = scores.unavailable["SPICE"]
    assert "stanford-corenlp-3.6.0.jar" in reason and str(tmp_path / "spice" / "lib") in reason
    assert "\n" not in reason
    # a folder holding both jars (named by the option or the variable) makes it runnable
    jars = tmp_path / "corenlp"
    jars.mkdir()
    for jar in language.CORENLP_JARS:
        (jars / jar).write_bytes(b"")
    assert spice_unavailable(jars) is None
    monkeypatch.setenv(language.CORENLP_ENV, str(jars))
    assert spice_unavailable() is None


def test_spice_state_of_this_install() -> None:
    root = language.package_dir()
    if root is None:
        pytest.skip("pycocoevalcap is not installed")
    lib = root / "spice" / "lib"
    if all((lib / jar).is_file() for jar in language.CORENLP_JARS):
        pytest.skip("Stanford CoreNLP is installed here; SPICE can run")
    if language.corenlp_folder() is not None:
        pytest.skip(f"${language.CORENLP_ENV} names the CoreNLP jars")
    reason = spice_unavailable()
    assert reason is not None
    assert ("Java" in reason) if not HAS_JAVA else (str(lib) in reason)
