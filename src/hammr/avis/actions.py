"""AVIS's actions, each over the library's tools and capabilities (none re-implemented).

* ``object_select``: the object selector (one model call) picks an object of the visual
  context; later visual actions look at that object's crop. Objects already selected in the
  run are not offered again (as the paper's selector excludes them); with none left the
  action fails with an observation and the planner backtracks.
* ``vqa``: the library's VQA tool on the object in focus.
* ``identical_image_search`` / ``image_search``: the local image index (``[avis]
  image_index``) searched with the object in focus: identical copies by perceptual hash (and
  embedding when a 'similarity' backend is configured), similar images by embedding.
* ``web_search``: the library's WebSearch when a 'web' backend is configured, else a search
  of the knowledge base (the local KB is the offline web).
* ``llm_qa``: the model answers the query from what was found so far.
* a graph's own ``[actions.NAME]``: its library tool, the object in focus on its image
  parameters and the query on its text parameters.

A tool's failure (no backend, bad input) is an :class:`ActionOutcome` with the error: the
run records it and the planner backtracks, as it does on a not-informative output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hammr.avis.context import VisualContext, VisualObject
from hammr.avis.graph import ActionSpec
from hammr.avis.prompts import llm_qa_prompt, object_select_prompt
from hammr.avis.replies import (
    ReplyError,
    constrained_request,
    object_grammar,
    object_schema,
    parse_object,
)
from hammr.backends.llm.base import LLM, LLMResponse
from hammr.backends.llm.meter import unmetered
from hammr.tools.base import CapabilityMissing, Tool, ToolContext, ToolError
from hammr.tools.vision_tools import VQA
from hammr.tools.web_tools import WebSearch
from hammr.trace import encode_value
from hammr.values import Image, Page, render_value

SEARCH_RESULTS = 3
SNIPPET_CHARS = 400
IMAGE_HITS = 5


class ImageSearch(Protocol):
    """What the image-search actions need of an image index (see :mod:`.image_index`)."""

    async def search_identical(
        self, image: Image, ctx: ToolContext, k: int
    ) -> tuple[str, dict[str, Any]]:
        """The hits as the reasoner reads them, and as the trace keeps them."""
        ...

    async def search_similar(
        self, image: Image, ctx: ToolContext, k: int
    ) -> tuple[str, dict[str, Any]]: ...


@dataclass
class ActionOutcome:
    observation: str
    output: Any = None
    """The encoded value the trace keeps (images by hash)."""
    focus: VisualObject | None = None
    """object_select: the object later visual actions look at."""
    reason: str = ""
    """object_select: why the selector chose it."""
    error_kind: str | None = None
    error: str | None = None
    responses: list[LLMResponse] = field(default_factory=list)
    """Model calls the action made (object_select, llm_qa): the system adds them to the step's
    own (``calls``, ``usage``); the calls of a tool it runs are metered into the step's
    ``tool_*`` fields instead (see :mod:`hammr.backends.llm.meter`)."""


@dataclass
class ActionInput:
    query: str
    focus: VisualObject
    context: VisualContext
    notes: str
    """What the run has found so far (llm_qa's notes)."""
    images: dict[str, Image]
    """The trace's image table (outputs are encoded into it)."""
    selected: frozenset[int] = frozenset()
    """Ids of the objects object_select already chose in this run (not offered again)."""


def _failed(e: Exception, kind: str | None = None) -> ActionOutcome:
    err_kind = kind or getattr(e, "kind", "tool_failure")
    return ActionOutcome(f"#ERROR#: {e}", error_kind=err_kind, error=str(e))


class ActionRunner:
    """Runs one action of a graph for the system."""

    def __init__(
        self,
        actions: Mapping[str, ActionSpec],
        tools: Mapping[str, Tool],
        index: ImageSearch | None,
        *,
        grammar: bool | None = None,
    ) -> None:
        self.actions = dict(actions)
        self.tools = dict(tools)
        self.index = index
        self.grammar = grammar

    async def run(
        self, action: str, given: ActionInput, model: LLM, ctx: ToolContext
    ) -> ActionOutcome:
        spec = self.actions[action]
        try:
            if spec.tool is not None:
                return await self._library_tool(spec, given, ctx)
            if action == "object_select":
                return await self._object_select(given, model)
            if action == "vqa":
                result = await VQA.invoke(
                    {"image": given.focus.image, "question": given.query}, ctx
                )
                answer = str(result.value)
                return ActionOutcome(f"VQA answer: {answer}", answer)
            if action in ("identical_image_search", "image_search"):
                return await self._image_search(action, given, ctx)
            if action == "web_search":
                return await self._web_search(given.query, ctx)
            if action == "llm_qa":
                return await self._llm_qa(given, model)
        except ReplyError as e:
            return _failed(e, e.kind)
        except ToolError as e:
            return _failed(e)
        raise ValueError(f"no way to run the action {action!r}")

    async def _object_select(self, given: ActionInput, model: LLM) -> ActionOutcome:
        objects = [o for o in given.context.objects if o.id not in given.selected]
        if not objects:
            taken = ", ".join(f"#{i}" for i in sorted(given.selected))
            return _failed(
                ToolError(f"every object was already selected ({taken}); choose another action")
            )
        ids = [o.id for o in objects]
        listing = "\n".join(o.render() for o in objects)
        request = constrained_request(
            object_select_prompt(given.query, listing),
            model,
            grammar=object_grammar(ids),
            schema=object_schema(ids),
            setting=self.grammar,
            max_tokens=120,
        )
        with unmetered():  # in the step's own calls (ActionOutcome.responses), not its tools'
            response = await model.complete(request)
        try:
            choice = parse_object(response.text, ids)
        except ReplyError as e:
            out = _failed(e, e.kind)
            out.responses.append(response)
            return out
        chosen = objects[ids.index(choice.object_id)]
        output = {
            "object": chosen.id,
            "region": chosen.region,
            "box": encode_value(chosen.box, given.images),
            "image": encode_value(chosen.image, given.images),
        }
        return ActionOutcome(
            chosen.render(), output, focus=chosen, reason=choice.reason, responses=[response]
        )

    async def _image_search(
        self, action: str, given: ActionInput, ctx: ToolContext
    ) -> ActionOutcome:
        if self.index is None:
            raise CapabilityMissing("image_index")
        image = given.focus.image
        if action == "identical_image_search":
            text, output = await self.index.search_identical(image, ctx, IMAGE_HITS)
        else:
            text, output = await self.index.search_similar(image, ctx, IMAGE_HITS)
            text = f"Object: [{given.focus.render()}]\n{text}"
        return ActionOutcome(text, output)

    async def _web_search(self, query: str, ctx: ToolContext) -> ActionOutcome:
        query = " ".join(query.split())
        if ctx.backends.get("web") is not None:
            result = await WebSearch.invoke({"query": query, "k": SEARCH_RESULTS}, ctx)
            pages = [p for p in result.value if isinstance(p, Page)]
        else:
            kb = ctx.backend("kb")
            pages = list(await kb.search(query, SEARCH_RESULTS))
        if not pages:
            return ActionOutcome(f"no search results for {query!r}", [])
        text = "\n\n".join(_page_text(p) for p in pages)
        return ActionOutcome(text, [p.title for p in pages])

    async def _llm_qa(self, given: ActionInput, model: LLM) -> ActionOutcome:
        request = constrained_request(
            llm_qa_prompt(given.query, given.notes),
            model,
            grammar=None,
            schema=None,
            setting=self.grammar,
            max_tokens=64,
        )
        with unmetered():  # in the step's own calls (ActionOutcome.responses), not its tools'
            response = await model.complete(request)
        answer = " ".join(response.text.strip().split("\n\n")[0].split())
        answer = re.sub(r"^answer\s*:\s*", "", answer, flags=re.I)
        out = ActionOutcome(f"LLM answer: {answer or '(empty)'}", answer)
        out.responses.append(response)
        return out

    async def _library_tool(
        self, spec: ActionSpec, given: ActionInput, ctx: ToolContext
    ) -> ActionOutcome:
        tool = self.tools.get(spec.tool or "")
        if tool is None:
            raise ToolError(
                f"the action {spec.name} calls the tool {spec.tool!r}, which is not loaded"
            )
        args: dict[str, Any] = {}
        for p in tool.params:
            if p.kind in ("image", "images"):
                args[p.name] = given.focus.image if p.kind == "image" else [given.focus.image]
            elif p.required and ("text" in p.kinds or p.kind == "any"):
                args[p.name] = given.query
            elif p.required:
                raise ToolError(
                    f"the action {spec.name} cannot fill {tool.name}'s parameter {p.name!r} "
                    f"({p.kind}); an action's tool takes images and a text query"
                )
        result = await tool.invoke(args, ctx)
        text = result.observation or render_value(result.value)
        return ActionOutcome(f"{tool.name}: {text}", encode_value(result.value, given.images))


def _page_text(page: Page) -> str:
    text = " ".join(page.text.split())
    if len(text) > SNIPPET_CHARS:
        text = text[: SNIPPET_CHARS - 3] + "..."
    return f"Title: {page.title}\nContent: {text}"
