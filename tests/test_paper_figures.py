"""The HAMMR paper's Figs. C.4 and C.5, replayed with scripted LLMs and real everything else.

* Fig. C.4: the dispatcher calls the OCR specialist, which detects the license plates,
  crops them and reads them (real crop, real tesseract OCR; the detector is scripted).
* Fig. C.5: the naive generic agent calls a tool that does not exist (``FilterObjects``):
  hammr lets it recover, and under the paper's harness the run ends there.

Figs. 1, 4, C.1, C.2 and C.3 (the dispatcher and the specialists hammr builds from its agent
files) are replayed in test_paper_figures_hammr.py; what both share is in
paper_figures_support.py.
"""

from __future__ import annotations

import re
from typing import Any

from conftest import needs_tesseract
from hammr.agent import ReActAgent
from hammr.backends.llm.base import LLMRequest
from hammr.backends.llm.scripted import ScriptedLLM
from hammr.backends.ocr.tesseract import TesseractOCR
from hammr.tools.base import ToolContext
from hammr.tools.image_tools import CropImage
from hammr.tools.library import builtin_tools
from hammr.tools.ocr import OCR
from hammr.trace import Trace
from hammr.values import Image
from paper_figures_support import last_observation, scripted_detector


@needs_tesseract
async def test_fig_c4_dispatcher_calls_ocr_specialist_with_scripted_llm_real_tools(
    plate: tuple[Image, dict[str, Any]], tmp_path: Any
) -> None:
    image, meta = plate
    detector = scripted_detector(meta["boxes"])

    def specialist_finish(req: LLMRequest) -> str:
        texts = re.findall(r"'([^']*)'", last_observation(req))
        best = max(texts, key=len)
        return f"[Thought]: The first crop is readable.\n[Finish]: {best}"

    specialist_steps = iter(
        [
            "[Thought]: I need to find a license plate in the image.\n"
            "[Act]: plates = DetectObject(image, 'license plate')",
            "[Thought]: I found three potential license plates. I need to crop them.\n"
            "[Act]: crops = CropImage(image, plates)",
            "[Thought]: I need to OCR the content of the license plates.\n[Act]: OCR(crops)",
        ]
    )
    specialist_llm = ScriptedLLM(lambda req: next(specialist_steps, None) or specialist_finish(req))
    specialist = ReActAgent(
        name="OCRReasoningAgent",
        description="Answers questions that need reading text in the image.",
        instructions="Read text in images to answer questions.",
        tools=[detector, CropImage, OCR],
        llm=specialist_llm,
    )
    dispatcher_steps = iter(
        [
            "[Thought]: To answer I need to read the license plate; this is an OCR question.\n"
            "[Act]: **OCRReasoningAgent**('what is the license plate?', image)"
        ]
    )
    dispatcher_llm = ScriptedLLM(
        lambda req: (
            next(dispatcher_steps, None)
            or f"[Thought]: The specialist read it.\n[Finish]: {last_observation(req)}"
        )
    )
    dispatcher = ReActAgent(
        name="QuestionDispatcher",
        description="Routes a question to the right specialist.",
        instructions="Decide which specialist answers the question.",
        tools=[specialist],
        llm=dispatcher_llm,
    )
    ctx = ToolContext(backends={"ocr": TesseractOCR()})
    result = await dispatcher.run(meta["question"], {"image": image}, ctx=ctx)

    assert result.answer == meta["answer"] == "154-JDX"
    trace = result.trace
    assert trace.status == "finished"
    assert [s.tool for s in trace.steps] == ["OCRReasoningAgent", None]
    child = trace.steps[0].child
    assert child is not None and child.agent == "OCRReasoningAgent"
    assert child.question == "what is the license plate?"
    assert [s.tool for s in child.steps] == ["DetectObject", "CropImage", "OCR", None]
    crops = child.steps[1].output
    assert [c["region"] for c in crops] == [[float(v) for v in b] for b in meta["boxes"]]
    ocr_out = child.steps[2].output
    assert ocr_out[0] == "154-JDX" and len(ocr_out) == 3
    assert child.steps[2].output_var == "ocr_1"  # automatic name, stated in the observation
    assert "(stored in 'ocr_1')" in child.steps[2].observation
    assert trace.errors() == []
    assert trace.llm_calls == 6

    path = trace.save(tmp_path / "fig_c4" / "trace.json")
    loaded = Trace.load(path)
    assert loaded == trace
    assert loaded.to_dict() == trace.to_dict()
    # every image the trace references is on disk, content-addressed
    for h in trace.all_images():
        assert (path.parent / "images" / f"{h}.png").exists()
    assert set(loaded.all_images()) == set(trace.all_images())
    crop_hash = crops[0]["$image"]
    assert loaded.all_images()[crop_hash] == trace.all_images()[crop_hash]


@needs_tesseract
async def test_fig_c5_unknown_tool_is_recovered_with_scripted_llm(
    plate: tuple[Image, dict[str, Any]],
) -> None:
    image, meta = plate

    def respond(req: LLMRequest) -> str:
        n = sum(1 for m in req.messages if m.role == "assistant")
        if n == 0:
            return (
                "[Thought]: I need to find the yellow plate.\n"
                "[Act]: FilterObjects(image, 'plate', 'color', 'yellow')"
            )
        if n == 1:
            obs = last_observation(req)
            assert obs.startswith("#ERROR#: tool FilterObjects is not registered")
            assert "CropImage" in obs  # the available tools are listed, so the model can recover
            box = meta["boxes"][0]
            return (
                "[Thought]: That tool does not exist; crop the plate.\n"
                f"[Act]: crop = CropImage(image, {box})"
            )
        if n == 2:
            return "[Thought]: Now read it.\n[Act]: text = OCR(crop)"
        return f"[Thought]: Done.\n[Finish]: {last_observation(req)}"

    agent = ReActAgent(
        name="NaiveGeneric",
        description="",
        instructions="Answer the question.",
        tools=builtin_tools(),
        llm=ScriptedLLM(respond),
    )
    result = await agent.run(
        "What does the yellow plate say?",
        {"image": image},
        ctx=ToolContext(backends={"ocr": TesseractOCR()}),
    )
    assert result.answer == "154-JDX"
    kinds = [s.error_kind for s in result.trace.steps]
    assert kinds == ["unknown_tool", None, None, None]
    assert "FilterObjects" in (result.trace.steps[0].error or "")
    assert [(agent, s.error_kind) for agent, s in result.trace.errors()] == [
        ("NaiveGeneric", "unknown_tool")
    ]
    assert result.trace.steps[0].observation.startswith("#ERROR#: tool FilterObjects")


@needs_tesseract
async def test_fig_c5_under_the_papers_harness_the_unknown_tool_ends_the_run_scripted_llm(
    plate: tuple[Image, dict[str, Any]],
) -> None:
    image, _ = plate
    llm = ScriptedLLM(
        [
            "[Thought]: I need to find the yellow plate.\n"
            "[Act]: FilterObjects(image, 'plate', 'color', 'yellow')",
            "[Thought]: never asked.\n[Finish]: 154-JDX",
        ]
    )
    agent = ReActAgent(
        name="NaiveGeneric",
        description="",
        instructions="Answer the question.",
        tools=builtin_tools(),
        llm=llm,
        unknown_tool_ends_run=True,  # agent.unknown_tool = 'end', as the paper's harness
    )
    result = await agent.run(
        "What does the yellow plate say?",
        {"image": image},
        ctx=ToolContext(backends={"ocr": TesseractOCR()}),
    )
    assert llm.calls == 1 and result.answer is None  # it could not recover: no second step
    trace = result.trace
    assert trace.status == "no_answer"  # the model's mistake ended it: a result, not a failure
    assert [s.error_kind for s in trace.steps] == ["unknown_tool"]
    assert (trace.error or "").startswith("step 1: tool FilterObjects is not registered")
