from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image as PILImage

from hammr.trace import Step, StepUsage, Trace, TraceFormatError, encode_value, format_trace
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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": "x"}, 'steps should be a list, got "x"'),
        ({"answer": 3}, "answer should be a string or null, got 3"),
        ({"latency_s": "fast"}, 'latency_s should be a number, got "fast"'),
        ({"inputs": []}, "inputs should be an object, got []"),
        ({"agent": None}, "agent should be a string, got null"),
        ({"steps": [{"index": True}]}, "steps[0].index should be an integer, got true"),
        ({"steps": [{"index": 0, "cached": "no"}]}, "steps[0].cached should be true or false"),
        ({"steps": [{"index": 0}, {"thought": "?"}]}, "steps[1].index is missing"),
        ({"steps": [{"index": 0, "usage": []}]}, "steps[0].usage should be an object, got []"),
        ({"steps": [{"index": 0, "child": "C"}]}, "steps[0].child should be an object or null"),
        (
            {"steps": [{"index": 0, "child": {"agent": "C", "question": "s", "status": "ok"}}]},
            "steps[0].child.status should be one of running, finished, step_limit, llm_failure",
        ),
    ],
)  # fmt: skip
def test_from_dict_names_the_bad_field(change: dict[str, object], message: str) -> None:
    from hammr.trace import TraceFormatError

    doc = {**sample_trace().to_dict(), **change}
    with pytest.raises(TraceFormatError) as e:
        Trace.from_dict(doc)
    assert str(e.value).startswith(message), str(e.value)


def test_from_dict_refuses_missing_and_unknown_fields() -> None:
    from hammr.trace import TraceFormatError

    doc = sample_trace().to_dict()
    del doc["question"]
    with pytest.raises(TraceFormatError, match=r"^question is missing$"):
        Trace.from_dict(doc)
    doc = {**sample_trace().to_dict(), "colour": "red"}
    with pytest.raises(TraceFormatError, match=r"^unknown field colour \(known: format, "):
        Trace.from_dict(doc)
    with pytest.raises(TraceFormatError, match=r"^the document should be an object, got \[\]$"):
        Trace.from_dict([])  # type: ignore[arg-type]


def test_load_names_the_file_and_the_field(tmp_path: Path) -> None:
    from hammr.trace import TraceFormatError

    path = sample_trace().save(tmp_path / "t.json")
    doc = json.loads(path.read_text())
    doc["steps"][0]["child"]["steps"][0]["usage"]["prompt_tokens"] = "100"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as e:
        Trace.load(path)
    assert str(e.value) == (
        f"{path} is not a valid hammr trace: "
        'steps[0].child.steps[0].usage.prompt_tokens should be an integer, got "100"'
    )
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(TraceFormatError, match="not UTF-8 text"):
        Trace.load(path)
    path.write_text(json.dumps({**doc, "format": "hammr-trace/2"}))
    with pytest.raises(TraceFormatError, match='trace format "hammr-trace/2" is not hammr-trace/1'):
        Trace.load(path)


def avis_step() -> Step:
    return Step(
        index=3,
        tool="web_search",
        arguments={"query": "Eiffel Tower completed"},
        observation="Title: Eiffel Tower ...",
        state="identical_image_search",
        candidates=["web_search", "llm_qa"],
        verdict="answerable",
        extracted="1889",
        reasoner="Why: the page says so.\nVerdict: answerable\nAnswer: 1889",
        backtrack=False,
        calls=2,
        finish="1889",
    )


def test_avis_fields_round_trip_and_count_calls(tmp_path: Path) -> None:
    trace = Trace(agent="AVIS", question="q", steps=[avis_step()], status="finished")
    trace.steps.append(Step(index=4, tool="CONTEXT", router="code"))
    again = Trace.load(trace.save(tmp_path / "t.json"))
    assert again.steps == trace.steps
    assert again.llm_calls == 2  # the step's own count; a router's step makes none
    text = format_trace(again)
    assert "[at identical_image_search; could do: web_search, llm_qa]" in text
    assert "reasoner: answerable: 1889" in text


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("verdict", "maybe", "steps[0].verdict should be null or one of not_informative"),
        ("candidates", "vqa", "steps[0].candidates should be a list"),
        ("backtrack", 1, "steps[0].backtrack should be true or false"),
        ("calls", "2", "steps[0].calls should be an integer or null"),
    ],
)
def test_avis_fields_are_checked_on_load(field: str, value: object, message: str) -> None:
    doc = Trace(agent="AVIS", question="q", steps=[avis_step()]).to_dict()
    doc["steps"][0][field] = value
    with pytest.raises(TraceFormatError, match=re.escape(message)):
        Trace.from_dict(doc)
