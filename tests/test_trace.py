from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image as PILImage

from hammr.trace import Step, StepUsage, Trace, encode_value, format_trace
from hammr.values import Box, Entity, Image, Page


def sample_trace() -> Trace:
    root = Image(PILImage.new("RGB", (40, 30), (10, 200, 10)))
    crop = Image(root.pixels.crop((5, 5, 15, 25)), parent=root, crop_box=Box(5, 5, 10, 20))
    t = Trace(agent="Parent", question="q?", model="m")
    t.inputs = {"image": encode_value(root, t.images)}
    child = Trace(agent="Child", question="sub?", answer="x", status="finished")
    child.steps.append(
        Step(
            index=0,
            thought="crop",
            action="c = CropImage(image, [5, 5, 10, 20])",
            tool="CropImage",
            arguments={
                "image": encode_value(root, child.images),
                "boxes": encode_value([Box(5, 5, 10, 20, "car", 0.5)], child.images),
            },
            output_var="c",
            output=encode_value(crop, child.images),
            observation="image 10x20 (stored in 'c')",
            usage=StepUsage(100, 9),
        )
    )
    child.steps.append(Step(index=1, finish="x", usage=StepUsage(120, 4)))
    t.steps.append(
        Step(
            index=0,
            thought="delegate",
            action="Child('sub?', image)",
            tool="Child",
            arguments={
                "question": "sub?",
                "page": encode_value(Page("P", "a b c"), t.images),
                "who": encode_value(Entity("Eiffel Tower", 0.9), t.images),
            },
            output_var="child_1",
            output="x",
            observation="x (stored in 'child_1')",
            child=child,
            usage=StepUsage(50, 7),
            llm_latency_s=0.25,
        )
    )
    t.steps.append(
        Step(
            index=1,
            raw="nonsense",
            error_kind="no_action",
            error="no [Act]",
            observation="#ERROR#: no [Act]",
        )
    )
    t.steps.append(Step(index=2, finish="x"))
    t.answer, t.status = "x", "finished"
    return t


def test_round_trip_with_images_beside_json(tmp_path: Path) -> None:
    t = sample_trace()
    path = t.save(tmp_path / "run" / "trace.json")
    files = sorted(p.name for p in (tmp_path / "run" / "images").iterdir())
    assert len(files) == 2 and all(f.endswith(".png") for f in files)
    loaded = Trace.load(path)
    assert loaded == t
    assert loaded.steps[0].child == t.steps[0].child
    assert set(loaded.all_images()) == set(t.all_images())
    # saving again into the same folder reuses the content-addressed files
    t.save(tmp_path / "run" / "again.json")
    assert len(list((tmp_path / "run" / "images").iterdir())) == 2


def test_totals_include_children() -> None:
    t = sample_trace()
    assert t.llm_calls == 5
    assert t.prompt_tokens == 270 and t.completion_tokens == 20
    assert [(a, s.error_kind) for a, s in t.errors()] == [("Parent", "no_action")]


def test_tree_print_nests_children() -> None:
    text = format_trace(sample_trace())
    lines = text.splitlines()
    assert lines[0] == "Parent: q?"
    child_line = next(i for i, ln in enumerate(lines) if "Child: sub?" in ln)
    act_line = next(i for i, ln in enumerate(lines) if "act: Child('sub?', image)" in ln)
    assert act_line < child_line
    assert lines[child_line].index("Child") > lines[act_line].index("act")
    assert "[no_action]" in text and "model wrote: nonsense" in text
    assert lines[-1].startswith("answer: x")


def test_load_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="trace file not found"):
        Trace.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a trace"):
        Trace.load(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a hammr trace"):
        Trace.load(bad)
