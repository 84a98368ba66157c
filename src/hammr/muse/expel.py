"""The ExpeL baseline (Zhao et al. 2024, as MuSEAgent's Table 2 runs it): rules distilled
from an exploration run's successes and failures, and successful trajectories recalled as
worked examples.

**Insight extraction** (:func:`extract_insights`, ``hammr memory insights``) folds the
exploration run into a rule list, one model call at a time. Each call shows the current rules
(numbered, with votes) and either (a) a failed trajectory next to the most similar successful
one of the same task (dataset and sub-task), or (b) a batch of successful trajectories of one
task; the model answers with operations on the list, as ExpeL's:

* ``{"op": "ADD", "text": ...}``: a new rule, starting at 2 votes (the text of an existing
  rule counts as AGREE on it); refused, and recorded, when the list is full (``cap``);
* ``{"op": "EDIT", "rule": N, "text": ...}``: rewrite rule N (+1 vote);
* ``{"op": "AGREE", "rule": N}``: +1 vote;
* ``{"op": "REMOVE", "rule": N}``: a down-vote (-1); a rule at 0 votes is dropped.

Rule numbers refer to the list as the call showed it, however the operations before change
it. The reply is JSON (``{"operations": [...]}``), constrained by a GBNF grammar (rule numbers
limited to the list's) or a JSON schema where the backend takes one, parsed with ``json`` and
validated: a reply that is no such JSON is asked again with the error; an operation that is
malformed (unknown op, no such rule, no text) is skipped and recorded. Every call is committed
with the rule list after it, so a build stopped midway goes on with the calls not yet made.
The successful trajectories are stored with their questions' embeddings.

**Evaluation** (:func:`expel_system`, ``--system expel``): before the first step,
:class:`ExpeLAdvisor` puts the rules (most votes first) and the nearest successful
trajectories (the question's own task first; 2 unless ``memory.k`` is set) into the task
message, and records them (source ``expel``) in the step's ``retrieved``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hammr.advice import Advice, Situation
from hammr.agent import ReActAgent
from hammr.agents.spec import SpecError
from hammr.backends.llm.base import LLM
from hammr.config import Config
from hammr.eval.store import RunStore
from hammr.grammar import int_range_rule
from hammr.memory.experiences import clip_text
from hammr.muse.agent import react_agent
from hammr.muse.reflexion import memory_path
from hammr.muse.trajectories import (
    BaselineError,
    Entry,
    MemoryFile,
    QuestionEmbedder,
    Rule,
    Trajectory,
    ask_strict,
    load_trajectories,
    nearest,
    question_embedder,
    render_trajectory,
)
from hammr.systems import Workbench

OPS = ("ADD", "EDIT", "AGREE", "REMOVE")
START_VOTES = 2
DEFAULT_CAP = 20
RULE_CHARS = 300
DEFAULT_EXAMPLES = 2


@dataclass(frozen=True)
class Operation:
    op: str
    rule: int | None = None
    """1-based, in the list as the call showed it."""
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.rule is not None:
            out["rule"] = self.rule
        if self.text is not None:
            out["text"] = self.text
        return out


# -- the reply format ---------------------------------------------------------------------


def operations_grammar(n_rules: int) -> str:
    """GBNF for ``{"operations": [...]}`` with rule numbers 1..n_rules (ADD only when 0)."""
    ops = ['"{\\"op\\": \\"ADD\\", \\"text\\": " str "}"']
    if n_rules > 0:
        ops += [
            '"{\\"op\\": \\"EDIT\\", \\"rule\\": " num ", \\"text\\": " str "}"',
            '"{\\"op\\": \\"AGREE\\", \\"rule\\": " num "}"',
            '"{\\"op\\": \\"REMOVE\\", \\"rule\\": " num "}"',
        ]
    lines = [
        'root ::= "{\\"operations\\": [" (op (", " op){0,7})? "]}"',
        "op ::= " + " | ".join(ops),
        f'str ::= "\\"" [^"\\\\\\n]{{8,{RULE_CHARS}}} "\\""',
    ]
    if n_rules > 0:
        lines.append(f"num ::= {int_range_rule(n_rules, zero=False)}")
    return "\n".join(lines) + "\n"


def operations_schema(n_rules: int) -> dict[str, Any]:
    op: dict[str, Any] = {
        "type": "object",
        "properties": {
            "op": {"enum": list(OPS) if n_rules else ["ADD"]},
            "rule": {"type": "integer", "minimum": 1, "maximum": max(1, n_rules)},
            "text": {"type": "string"},
        },
        "required": ["op"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": op}},
        "required": ["operations"],
        "additionalProperties": False,
    }


def _json_part(reply: str) -> str:
    text = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    return fenced.group(1).strip() if fenced else text


def parse_operations(reply: str, n_rules: int) -> tuple[list[Operation], list[str]]:
    """The valid operations of a reply and what was wrong with the others. A reply that is
    not a JSON list of operations (or ``{"operations": [...]}``) is a ValueError."""
    try:
        data = json.loads(_json_part(reply))
    except json.JSONDecodeError as e:
        raise ValueError(f"the reply is not JSON ({e.msg} at character {e.pos})") from None
    if isinstance(data, dict) and "operations" in data:
        data = data["operations"]
    if not isinstance(data, list):
        raise ValueError('the reply is not a list of operations ({"operations": [...]})')
    ops: list[Operation] = []
    bad: list[str] = []
    for i, item in enumerate(data, 1):
        try:
            ops.append(_operation(item, n_rules))
        except ValueError as e:
            bad.append(f"operation {i} {json.dumps(item, ensure_ascii=False)[:120]}: {e}")
    return ops, bad


def _operation(item: object, n_rules: int) -> Operation:
    if not isinstance(item, dict):
        raise ValueError("not an object")
    op = str(item.get("op", "")).upper()
    if op not in OPS:
        raise ValueError(f"op is not one of {', '.join(OPS)}")
    rule: int | None = None
    if op != "ADD":
        value = item.get("rule")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("rule is not a rule number")
        if not 1 <= value <= n_rules:
            raise ValueError(f"there is no rule {value} (the list has {n_rules})")
        rule = value
    text: str | None = None
    if op in ("ADD", "EDIT"):
        raw = item.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("no rule text")
        text = clip_text(raw, RULE_CHARS)
    return Operation(op, rule, text)


def apply_operations(rules: list[Rule], ops: Sequence[Operation], cap: int) -> list[str]:
    """Apply ``ops`` to ``rules`` in place (see the module docstring); what was refused."""
    shown = list(rules)
    notes: list[str] = []
    for o in ops:
        target = shown[o.rule - 1] if o.rule is not None else None
        if target is not None and not any(r is target for r in rules):
            notes.append(f"{o.op} {o.rule}: that rule was already dropped")
            continue
        if o.op == "ADD":
            assert o.text is not None
            same = next((r for r in rules if r.text.lower() == o.text.lower()), None)
            if same is not None:
                same.votes += 1
            elif len(rules) >= cap:
                notes.append(f"ADD refused, the list is full ({cap} rules): {o.text[:80]}")
            else:
                rules.append(Rule(o.text, START_VOTES))
        elif target is not None and o.op == "EDIT":
            assert o.text is not None
            target.text = o.text
            target.votes += 1
        elif target is not None and o.op == "AGREE":
            target.votes += 1
        elif target is not None and o.op == "REMOVE":
            target.votes -= 1
            if target.votes <= 0:
                rules[:] = [r for r in rules if r is not target]
    return notes


# -- prompts ------------------------------------------------------------------------------

INTRO = """\
You are distilling general rules that help an agent answer questions about images with
visual tools (detecting objects, zooming in, cropping, reading text, estimating depth)."""

OPERATIONS = """\
Update the rule list with operations, in JSON:
- {{"op": "ADD", "text": "..."}}: a new rule
- {{"op": "EDIT", "rule": N, "text": "..."}}: rewrite rule N to make it better
- {{"op": "AGREE", "rule": N}}: these attempts confirm rule N
- {{"op": "REMOVE", "rule": N}}: rule N is wrong or useless (a vote against it)
Rules are short, general advice on how to look and check, about any image of this kind of
question, never about one particular image or answer. The list holds at most {cap} rules; when
it is full, EDIT or REMOVE rather than ADD. Reply with the JSON only:
{{"operations": [...]}} (an empty list when nothing should change)."""


def rules_text(rules: Sequence[Rule]) -> str:
    if not rules:
        return "(no rules yet)"
    return "\n".join(f"{i}. [{r.votes} votes] {r.text}" for i, r in enumerate(rules, 1))


def _task(t: Trajectory) -> str:
    return f"{t.dataset}{' / ' + t.sub_task if t.sub_task else ''}"


def pair_prompt(rules: Sequence[Rule], failed: Trajectory, success: Trajectory, cap: int) -> str:
    return "\n\n".join(
        [
            INTRO,
            f"Current rules:\n{rules_text(rules)}",
            f"Two attempts at questions of the same task ({_task(failed)}). This one FAILED "
            f"(its answer was judged wrong):\n{render_trajectory(failed)}",
            f"This one SUCCEEDED:\n{render_trajectory(success)}",
            "Compare them: what did the successful attempt do that the failed one did not, "
            "and what should an agent do or avoid on such questions?",
            OPERATIONS.format(cap=cap),
        ]
    )


def batch_prompt(rules: Sequence[Rule], batch: Sequence[Trajectory], cap: int) -> str:
    shown = "\n\n".join(f"Attempt {i}:\n{render_trajectory(t)}" for i, t in enumerate(batch, 1))
    return "\n\n".join(
        [
            INTRO,
            f"Current rules:\n{rules_text(rules)}",
            f"Successful attempts at questions of one task ({_task(batch[0])}):\n{shown}",
            "What do these successes have in common that an agent should repeat?",
            OPERATIONS.format(cap=cap),
        ]
    )


# -- extraction ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    key: str
    kind: str
    """``pair`` or ``batch``."""
    trajectories: tuple[Trajectory, ...]


def plan_calls(
    failed: Sequence[Trajectory],
    succeeded: Sequence[Trajectory],
    vectors: dict[str, np.ndarray],
    batch_size: int,
) -> tuple[list[Call], list[str]]:
    """The insight calls, pairs first, then batches; and the failures left unpaired (no
    success of their task)."""
    by_task: dict[tuple[str, str], list[Trajectory]] = {}
    for t in succeeded:
        by_task.setdefault(t.task, []).append(t)
    calls: list[Call] = []
    unpaired: list[str] = []
    for f in failed:
        options = by_task.get(f.task, [])
        if not options:
            unpaired.append(f.id)
            continue
        best = max(options, key=lambda s: float(vectors[s.id] @ vectors[f.id]))
        calls.append(Call(f"pair {f.id} | {best.id}", "pair", (f, best)))
    for group in by_task.values():
        for i in range(0, len(group), max(1, batch_size)):
            chunk = tuple(group[i : i + max(1, batch_size)])
            calls.append(Call("batch " + " | ".join(t.id for t in chunk), "batch", chunk))
    return calls, unpaired


@dataclass
class InsightReport:
    samples: int = 0
    successes: int = 0
    failures: int = 0
    examples_added: int = 0
    calls: int = 0
    """Insight calls planned."""
    already: int = 0
    """Calls a previous build finished."""
    made: int = 0
    unusable: dict[str, list[str]] = field(default_factory=dict)
    """Call -> why its replies were rejected (no operation applied; retried next build)."""
    malformed_ops: int = 0
    unpaired: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    no_successes: str = ""
    """Why nothing was learned, when no sample was answered correctly ('' otherwise)."""


async def extract_insights(
    store: RunStore,
    runs: list[str],
    memory: MemoryFile,
    llm: LLM,
    embedder: QuestionEmbedder,
    *,
    correct_at: float = 1.0,
    grammar: bool | None = None,
    cap: int = DEFAULT_CAP,
    batch_size: int = 4,
    attempts: int = 3,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[Call, bool], None] | None = None,
) -> InsightReport:
    """Store the successful trajectories and fold the insight calls into the rule list (see
    the module docstring). A run with no successful sample leaves the memory empty and says
    so in the report's ``no_successes``."""
    memory.check_embedder(embedder.name)
    loaded = load_trajectories(store, runs, correct_at=correct_at)
    succeeded, failed = loaded.succeeded(), loaded.failed()
    report = InsightReport(
        len(loaded.trajectories), len(succeeded), len(failed), skipped=loaded.skipped
    )
    if not succeeded:  # nothing to learn from: an empty memory, said (the system answers as
        # ReAct would with it, which is what ExpeL's method gives such a run)
        report.no_successes = (
            f"{', '.join(runs)}: no sample was answered correctly (score >= {correct_at:g}) "
            f"among {len(loaded.trajectories)}; ExpeL learns from successes, so this memory "
            "holds no rule and no worked example"
        )
        if on_start is not None:
            on_start(0)
        return report
    everyone = [*succeeded, *failed]
    rows = await embedder.embed([t.question for t in everyone])
    vectors = {t.id: rows[i] for i, t in enumerate(everyone)}
    for t in succeeded:
        if not memory.has(t.id):
            entry = Entry(
                t.id, t.run, t.dataset, t.sample_id, t.sub_task, t.question,
                render_trajectory(t), "trajectory",
            )  # fmt: skip
            memory.add(entry, vectors[t.id], embedder.name)
            report.examples_added += 1
    calls, report.unpaired = plan_calls(failed, succeeded, vectors, batch_size)
    done = memory.done_calls()
    todo = [c for c in calls if c.key not in done]
    report.calls, report.already = len(calls), len(calls) - len(todo)
    if on_start is not None:
        on_start(len(todo))
    rules = memory.rules()
    for call in todo:
        prompt = (
            pair_prompt(rules, call.trajectories[0], call.trajectories[1], cap)
            if call.kind == "pair"
            else batch_prompt(rules, call.trajectories, cap)
        )
        n = len(rules)
        asked = await ask_strict(
            llm,
            prompt,
            lambda reply, n=n: parse_operations(reply, n),  # type: ignore[misc]
            grammar=operations_grammar(n),
            schema=operations_schema(n),
            setting=grammar,
            max_tokens=700,
            attempts=attempts,
        )
        if asked.ok:
            ops, bad = asked.value
            refused = apply_operations(rules, ops, cap)
            report.malformed_ops += len(bad)
            detail = {
                "operations": [o.to_dict() for o in ops],
                "malformed": bad,
                "refused": refused,
                "rejected_replies": asked.errors,
            }
            memory.record_call(call.key, True, detail, rules)
            report.made += 1
        else:
            report.unusable[call.key] = asked.errors
            memory.record_call(call.key, False, {"errors": asked.errors})
        if on_done is not None:
            on_done(call, asked.ok)
    report.rules = sorted_rules(rules)
    return report


def sorted_rules(rules: Sequence[Rule]) -> list[Rule]:
    """Most votes first; ties keep the list's order."""
    return sorted(rules, key=lambda r: -r.votes)


# -- evaluation ---------------------------------------------------------------------------

RULES_HEADER = "Rules learned from earlier attempts (most agreed first):"
EXAMPLES_HEADER = "Worked examples of similar questions answered correctly:"


@dataclass
class ExpeLAdvisor:
    """Shows the rules and the nearest successful trajectories (step 0 only)."""

    rules: list[Rule]
    entries: list[Entry]
    vectors: np.ndarray
    embedder: QuestionEmbedder
    k: int = DEFAULT_EXAMPLES
    name: str = "expel"

    async def advise(self, situation: Situation) -> Advice | None:
        if situation.step != 0 or not (self.rules or self.entries):
            return None
        task = situation.ctx.task
        found = []
        if self.entries:
            query = (await self.embedder.embed([situation.question]))[0]
            found = nearest(query, self.entries, self.vectors, self.k, task)
        parts = []
        if self.rules:
            parts.append(
                "\n".join([RULES_HEADER, *(f"{i}. {r.text}" for i, r in enumerate(self.rules, 1))])
            )
        if found:
            shown = [f"Example {i}:\n{f.entry.text}" for i, f in enumerate(found, 1)]
            parts.append("\n".join([EXAMPLES_HEADER, *shown]))
        text = "\n\n".join(parts)
        record = {
            "source": "expel",
            "policy": "advisor",
            "text": text,
            "query": situation.question,
            "task": list(task) if task else None,
            "rules": [{"text": r.text, "votes": r.votes} for r in self.rules],
            "examples": [
                {
                    "id": f.entry.id,
                    "source": f.entry.source(),
                    "similarity": f.similarity,
                    "task": list(f.entry.task),
                    "same_task": f.same_task,
                }
                for f in found
            ],
        }
        return Advice(text, record)


def expel_memory(
    cfg: Config, backends: Mapping[str, Any]
) -> tuple[QuestionEmbedder, list[Entry], np.ndarray, list[Rule]]:
    """What ``--system expel`` reads: the solved examples of ``memory.path``, their vectors,
    its rules and the embedder that searches the examples; SpecError (one line) when
    memory.path is unset, is no expel memory (an empty file, a run store, another kind of
    memory) or was embedded otherwise. ``hammr systems`` checks a memory with it too
    (:func:`hammr.system_info.memory_problem`), so both say the same."""
    path = memory_path(cfg, "expel", "hammr memory insights RUN -o expel.db")
    try:
        embedder = question_embedder(dict(backends), "--system expel")
        with MemoryFile(path, "expel", create=False) as memory:
            memory.check_embedder(embedder.name)
            entries, vectors = memory.entries()
            rules = sorted_rules(memory.rules())
    except BaselineError as e:
        raise SpecError(str(e)) from None
    return embedder, entries, vectors, rules


def expel_system(bench: Workbench) -> ReActAgent:
    """The shared tool agent with the rules and examples of ``memory.path`` before its first
    step."""
    embedder, entries, vectors, rules = expel_memory(bench.config, bench.backends)
    explicit = "memory.k" in bench.config.sources
    k = int(bench.config.get("memory.k", 3)) if explicit else DEFAULT_EXAMPLES
    return react_agent(bench, advisors=[ExpeLAdvisor(rules, entries, vectors, embedder, k)])


__all__ = [
    "DEFAULT_CAP",
    "EXAMPLES_HEADER",
    "OPS",
    "RULES_HEADER",
    "Call",
    "ExpeLAdvisor",
    "InsightReport",
    "Operation",
    "apply_operations",
    "batch_prompt",
    "expel_memory",
    "expel_system",
    "extract_insights",
    "operations_grammar",
    "operations_schema",
    "pair_prompt",
    "parse_operations",
    "plan_calls",
    "rules_text",
    "sorted_rules",
]
