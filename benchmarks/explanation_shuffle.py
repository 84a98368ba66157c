"""(j) The shuffle experiment of the MEAgent paper (appendix B.2, Fig. 11): shuffle the words of
generated explanations and see which visual metric notices.

References: the MEVQA fixture (tests/fixtures/mevqa, 5 questions in the official schema) and
``SYNTHETIC`` generated explanations with named boxes on a 640x480 image ("The man [BOX] is to
the left of the red bus [BOX], so the answer is yes."), some naming an object twice. Predictions
made from them: ``exact`` (the reference itself, boxes per token), ``jittered`` (every box
corner moved by a normal draw of 10% of the box's side), ``one missing`` (the last [BOX] and its
boxes dropped), ``one redundant`` (a named distractor box added). Each prediction's words are
then shuffled ``TRIALS`` times (seeded), the boxes staying with the [BOX] tokens in order, as
the paper does. Reported: REX's grounding (Eq. 1) and the detection score (Eq. 2) with the
official padding and with Eq. 2's own, before and after shuffling (means over the predictions
and trials). Expected: grounding unchanged, detection dropping.
"""

from __future__ import annotations

import random
from pathlib import Path
from statistics import fmean

from hammr.eval.datasets import load_dataset
from hammr.eval.datasets.mevqa import references
from hammr.eval.metrics.explanation import (
    BoxRef,
    GroundedExplanation,
    detection_score,
    grounding_score,
)
from hammr.values import Box

FIXTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "mevqa" / "MEGQA_test.json"
)
SYNTHETIC = 300
TRIALS = 20
SEED = 0
WIDTH, HEIGHT = 640, 480
OBJECTS = (
    "apple",
    "pear",
    "man",
    "woman",
    "umbrella",
    "cup",
    "table",
    "white plate",
    "dog",
    "car",
    "tree",
    "red bus",
    "clock",
    "window",
)
RELATIONS = ("to the left of", "to the right of", "on", "under", "behind", "in front of", "near")
ANSWERS = ("yes", "no", "left", "right", "red", "wood")
COLUMNS = [
    "predictions",
    "explanations",
    "grounding",
    "shuffled",
    "detection",
    "shuffled",
    "detection (Eq. 2 padding)",
    "shuffled",
]


def random_box(rng: random.Random) -> Box:
    w, h = rng.uniform(30, 200), rng.uniform(30, 200)
    return Box(rng.uniform(0, WIDTH - w), rng.uniform(0, HEIGHT - h), w, h)


def synthetic(rng: random.Random) -> GroundedExplanation:
    """'The <a> [BOX] is <rel> the <b> [BOX][, and the <c> [BOX] is <rel> the <a> [BOX]], so
    the answer is <x>.' with 1-3 boxes per object; a repeated object keeps its boxes."""
    a, b, c = rng.sample(OBJECTS, 3)
    boxes = {o: tuple(random_box(rng) for _ in range(rng.randint(1, 3))) for o in (a, b, c)}
    order = [a, b]
    text = f"The {a} [BOX] is {rng.choice(RELATIONS)} the {b} [BOX]"
    if rng.random() < 0.5:
        text += f", and the {c} [BOX] is {rng.choice(RELATIONS)} the {a} [BOX]"
        order += [c, a]
    text += f", so the answer is {rng.choice(ANSWERS)}."
    refs = [BoxRef(o, boxes[o]) for o in order]
    return GroundedExplanation(text, refs, tuple(dict.fromkeys(order)))


def jitter(box: Box, rng: random.Random) -> Box:
    x1 = box.x + rng.gauss(0, 0.1 * box.w)
    x2 = box.x2 + rng.gauss(0, 0.1 * box.w)
    y1 = box.y + rng.gauss(0, 0.1 * box.h)
    y2 = box.y2 + rng.gauss(0, 0.1 * box.h)
    return Box(min(x1, x2), min(y1, y2), max(abs(x2 - x1), 1.0), max(abs(y2 - y1), 1.0))


def variants(ref: GroundedExplanation, rng: random.Random) -> dict[str, GroundedExplanation]:
    """The predictions made from one reference (plain text and per-token boxes)."""
    plain = GroundedExplanation(ref.text, ref.boxes)
    jittered = GroundedExplanation(
        ref.text, [BoxRef(r.name, tuple(jitter(b, rng) for b in r.boxes)) for r in ref.boxes]
    )
    cut = ref.text.rfind(" [BOX]")
    missing = GroundedExplanation(ref.text[:cut] + ref.text[cut + 6 :], ref.boxes[:-1])
    extra = rng.choice([o for o in OBJECTS if o not in ref.named_groups()])
    redundant = GroundedExplanation(
        ref.text.rstrip(".") + f", near the {extra} [BOX].",
        [*ref.boxes, BoxRef(extra, (random_box(rng),))],
    )
    return {
        "exact": plain,
        "jittered": jittered,
        "one missing": missing,
        "one redundant": redundant,
    }


def shuffled(pred: GroundedExplanation, rng: random.Random) -> GroundedExplanation:
    words = pred.text.split()
    rng.shuffle(words)
    return GroundedExplanation(" ".join(words), pred.boxes)


def run(
    synthetic_n: int = SYNTHETIC, trials: int = TRIALS, seed: int = SEED
) -> list[tuple[str, ...]]:
    rng = random.Random(seed)
    refs = [
        r
        for r in references(load_dataset("mevqa", FIXTURE)).values()
        if r.token_count == len(r.boxes)
    ]
    refs += [synthetic(rng) for _ in range(synthetic_n)]
    scores: dict[str, list[list[float]]] = {}
    for ref in refs:
        for name, pred in variants(ref, rng).items():
            rows = scores.setdefault(name, [[] for _ in range(6)])
            rows[0].append(grounding_score(ref, pred, image_size=(WIDTH, HEIGHT)))
            rows[2].append(detection_score(ref, pred))
            rows[4].append(detection_score(ref, pred, official_padding=False))
            for _ in range(trials):
                mixed = shuffled(pred, rng)
                rows[1].append(grounding_score(ref, mixed, image_size=(WIDTH, HEIGHT)))
                rows[3].append(detection_score(ref, mixed))
                rows[5].append(detection_score(ref, mixed, official_padding=False))
    return [
        (name, str(len(refs)), *(f"{100 * fmean(values):.1f}" for values in rows))
        for name, rows in scores.items()
    ]


if __name__ == "__main__":
    for row in run():
        print(" | ".join(row))
