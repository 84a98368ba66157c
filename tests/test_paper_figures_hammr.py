"""The HAMMR paper's Figs. 1, 4, C.1, C.2 and C.3, replayed with a scripted LLM over hammr's
own agents and real tools (Figs. C.4 and C.5 are in test_paper_figures.py).

* Fig. 1: the dispatcher calls the two-hop encyclopedic agent, which calls the single-hop
  agent for the first hop (three levels).
* Fig. 4: PointQA look-twice: crop around the point, VQA names a part (a clock's hands), the
  agent infers the clock and counts clocks in the whole image.
* Fig. C.1: an NLVR2 statement about two images, judged claim by claim: false.
* Fig. C.2: two dispatcher mistakes: a number printed on cans taken for a counting question,
  a bottle's label taken for an encyclopedic question.
* Fig. C.3: the naive generic agent asks VQA an encyclopedic question and is wrong; HAMMR
  recognises the cathedral and reads the answer in its article.

Each builds HAMMR as hammr does (:class:`~hammr.agents.AgentSystems`, from its agent files)
with the paper's settings: the LLM dispatcher (router 'llm') offered every specialist (Table
B.1), tools only. One scripted LLM plays every agent, as the paper's one orchestrator model
does, in our own words. Real: the dispatcher and the specialists and
their calls of each other, the ReAct loop and its variables, CropImage, CropAroundPoint,
DecomposeQuestion and AnswerWithContext (their prompts built and their replies parsed by
hammr; the scripted LLM answers them), WikipediaArticle over a real SQLite knowledge base
built from a few articles. Scripted (they need a model or the web): RecognizeEntity (Google
Lens), VQA (PaLI-X), DetectObject and ObjectInImage.

The figures are images; our copy of the paper has their captions and the text about them,
not the words inside them. What those fix is followed (which agent calls which, the tools,
"minute hand, big hand" for the clock, C.1's "false", a cathedral found by Lens); the
pictures, entities and the other answers are ours, marked as such below.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageDraw

from hammr.agent import ReActAgent
from hammr.tools.base import ToolContext
from hammr.trace import Trace
from hammr.values import Image
from paper_figures_support import (
    call_tree,
    knowledge_base,
    last_observation,
    orchestrator,
    paper_systems,
    scripted_detector,
    scripted_lens,
    scripted_object_in_image,
    scripted_vqa,
    speakers,
)


def picture(size: tuple[int, int], background: str, shapes: list[tuple[str, list, str]]) -> Image:
    """A synthetic photo: ``(kind, xy, colour)`` shapes (rectangle, ellipse, polygon, line,
    text) drawn on a plain background."""
    img = PILImage.new("RGB", size, background)
    draw = ImageDraw.Draw(img)
    for kind, xy, colour in shapes:
        if kind == "text":
            draw.text(xy[0], xy[1], fill=colour)
        elif kind == "line":
            draw.line(xy, fill=colour, width=6)
        else:
            getattr(draw, kind)(xy, fill=colour)
    return Image(img)


# -- Fig. 1 ----------------------------------------------------------------------------------


async def test_fig_1_dispatcher_two_hop_agent_calls_single_hop_agent_scripted_llm_real_tools(
    tmp_path: Path,
) -> None:
    # ours: the tower, the engineer and the year (the figure's own question is not in our copy)
    question = "In what year was the engineer whose company built this tower born?"
    image = picture(
        (320, 480), "lightblue", [("polygon", [(160, 40), (60, 440), (260, 440)], "sienna")]
    )
    kb = knowledge_base(
        tmp_path,
        {
            "Eiffel Tower": "The Eiffel Tower is a wrought-iron lattice tower in Paris. The "
            "engineering company of Gustave Eiffel designed and built it for the World's Fair "
            "of 1889.",
            "Gustave Eiffel": "Gustave Eiffel was a French civil engineer, born in Dijon on 15 "
            "December 1832. His company built bridges, and the tower that bears his name.",
        },
    )
    llm = orchestrator(
        {
            "QuestionDispatcherAgent": [
                "[Thought]: The tower leads to a second thing to look up, its engineer: a "
                "two-hop encyclopedic question.\n"
                "[Act]: answer = TwoHopEncyclopedicAgent(question, image)"
            ],
            "TwoHopEncyclopedicAgent": [
                "[Thought]: First who built the tower, then when that person was born.\n"
                f"[Act]: parts = DecomposeQuestion('{question}')",
                "[Thought]: The single-hop agent answers the first part from the image.\n"
                "[Act]: engineer = SingleHopEncyclopedicAgent(parts[0], image)",
                lambda req: (
                    "[Thought]: Now the article about that engineer.\n"
                    f"[Act]: page = WikipediaArticle('{last_observation(req)}')"
                ),
                "[Thought]: I ask the second part with his name filled in.\n"
                "[Act]: year = AnswerWithContext('In what year was Gustave Eiffel born?', page)",
                lambda req: f"[Thought]: That is the year.\n[Finish]: {last_observation(req)}",
            ],
            "SingleHopEncyclopedicAgent": [
                "[Thought]: I recognise the tower.\n[Act]: entity = RecognizeEntity(image)",
                "[Thought]: I fetch its article.\n[Act]: page = WikipediaArticle(entity)",
                "[Thought]: I ask the article, naming the tower.\n[Act]: answer = "
                "AnswerWithContext('Whose engineering company built the Eiffel Tower?', page)",
                lambda req: f"[Thought]: The article says.\n[Finish]: {last_observation(req)}",
            ],
        },
        texts={
            question: "1. Whose engineering company built this tower?\n"
            "2. In what year was the answer to question 1 born?",
            "Whose engineering company built the Eiffel Tower?": "Gustave Eiffel",
            "In what year was Gustave Eiffel born?": "1832",
        },
    )
    systems = paper_systems(scripted_lens("Eiffel Tower"), llm=llm)
    two_hop = systems.agents["TwoHopEncyclopedicAgent"]
    # hammr's catalogue gives the two-hop agent the single-hop agent as a tool (Table B.1)
    assert (
        two_hop.tools["SingleHopEncyclopedicAgent"] is systems.agents["SingleHopEncyclopedicAgent"]
    )

    result = await systems.system("hammr").run(
        question, {"image": image}, ctx=ToolContext(backends={"kb": kb})
    )

    assert result.answer == "1832"
    trace = result.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> TwoHopEncyclopedicAgent",
        "  TwoHopEncyclopedicAgent -> DecomposeQuestion",
        "  TwoHopEncyclopedicAgent -> SingleHopEncyclopedicAgent",
        "    SingleHopEncyclopedicAgent -> RecognizeEntity",
        "    SingleHopEncyclopedicAgent -> WikipediaArticle",
        "    SingleHopEncyclopedicAgent -> AnswerWithContext",
        "    SingleHopEncyclopedicAgent -> [Finish] Gustave Eiffel",
        "  TwoHopEncyclopedicAgent -> WikipediaArticle",
        "  TwoHopEncyclopedicAgent -> AnswerWithContext",
        "  TwoHopEncyclopedicAgent -> [Finish] 1832",
    ]
    two_hop_trace = trace.steps[0].child
    assert two_hop_trace is not None and two_hop_trace.question == question  # relayed as asked
    decompose, single_step, page_step, answer_step, _ = two_hop_trace.steps
    first_hop = "Whose engineering company built this tower?"
    assert decompose.output == [first_hop, "In what year was the answer to question 1 born?"]
    single = single_step.child
    assert single is not None and single.question == first_hop  # parts[0], word for word
    assert single.steps[1].output["$page"] == "Eiffel Tower"  # from the knowledge base
    assert single_step.output == "Gustave Eiffel"
    assert page_step.arguments == {"entity": {"$entity": "Gustave Eiffel", "score": None}}
    assert page_step.output["$page"] == "Gustave Eiffel"
    assert answer_step.output == "1832"
    # one model for every level, each call in the trace once (text tools' calls included)
    assert speakers(llm) == [
        "QuestionDispatcherAgent",
        "TwoHopEncyclopedicAgent",
        "DecomposeQuestion",
        "TwoHopEncyclopedicAgent",
        "SingleHopEncyclopedicAgent",
        "SingleHopEncyclopedicAgent",
        "SingleHopEncyclopedicAgent",
        "AnswerWithContext",
        "SingleHopEncyclopedicAgent",
        "TwoHopEncyclopedicAgent",
        "TwoHopEncyclopedicAgent",
        "AnswerWithContext",
        "TwoHopEncyclopedicAgent",
    ]
    assert trace.llm_calls == llm.calls == 13
    saved = Trace.load(trace.save(tmp_path / "fig_1" / "trace.json"))
    assert saved == trace and call_tree(saved) == call_tree(trace)


# -- Fig. 4 ----------------------------------------------------------------------------------


async def test_fig_4_dispatcher_calls_pointqa_look_twice_agent_scripted_llm_real_tools() -> None:
    # ours: two clocks on a wall, the point on the left one's minute hand, the count 2
    question = "How many of these are in the picture?"
    image = picture(
        (640, 480),
        "beige",
        [
            ("ellipse", [(100, 100), (240, 240)], "white"),
            ("line", [(170, 170), (170, 110)], "black"),
            ("line", [(170, 170), (210, 170)], "black"),
            ("ellipse", [(410, 140), (530, 260)], "white"),
            ("line", [(470, 200), (470, 150)], "black"),
        ],
    )
    point = (170.0, 130.0)
    llm = orchestrator(
        {
            "QuestionDispatcherAgent": [
                "[Thought]: A point is given and the question counts objects like the pointed "
                "one in the whole picture: look twice.\n"
                "[Act]: answer = PointQALookTwiceAgent(question, image, point)"
            ],
            "PointQALookTwiceAgent": [
                "[Thought]: I look closely at the pointed object first.\n"
                "[Act]: crop = CropAroundPoint(image, point)",
                "[Thought]: I ask what the object in the crop is.\n"
                "[Act]: thing = VQA(crop, 'What is this object?')",
                "[Thought]: Minute and big hands belong to a clock, so the pointed object is a "
                "clock. I count the clocks in the whole image.\n"
                "[Act]: count = VQA(image, 'How many clocks are in the picture?')",
                lambda req: f"[Thought]: That is the count.\n[Finish]: {last_observation(req)}",
            ],
        }
    )
    vqa = scripted_vqa(
        {
            "What is this object?": "minute hand, big hand",  # the caption's imperfect reply
            "How many clocks are in the picture?": "2",
        }
    )
    systems = paper_systems(vqa, llm=llm)
    result = await systems.system("hammr").run(question, {"image": image, "point": point})

    assert result.answer == "2"
    trace = result.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> PointQALookTwiceAgent",
        "  PointQALookTwiceAgent -> CropAroundPoint",
        "  PointQALookTwiceAgent -> VQA",
        "  PointQALookTwiceAgent -> VQA",
        "  PointQALookTwiceAgent -> [Finish] 2",
    ]
    look_twice = trace.steps[0].child
    assert look_twice is not None and look_twice.inputs["point"] == [170.0, 130.0]
    crop_step, part_step, count_step, _ = look_twice.steps
    crop = crop_step.output  # the real crop: 224 px square centred on the point
    assert (crop["size"], crop["region"]) == ([224, 224], [58.0, 18.0, 224.0, 224.0])
    pixels = look_twice.images[crop["$image"]].pixels
    assert pixels.tobytes() == image.pixels.crop((58, 18, 282, 242)).tobytes()
    assert part_step.arguments["image"] == crop  # VQA looked at the crop...
    assert part_step.output == "minute hand, big hand"
    assert "clock" in count_step.thought  # ...and the third thought names the clock
    assert count_step.arguments["image"]["size"] == [640, 480]  # counted in the whole image
    assert trace.llm_calls == llm.calls == 5


# -- Fig. C.1 --------------------------------------------------------------------------------


async def test_fig_c1_dispatcher_calls_two_image_agent_scripted_llm_real_tools() -> None:
    # the caption's claims and verdict; the two rooms are ours
    statement = (
        "One image shows a sofa and pillows in only neutral brownish shades, and the other "
        "image includes some blue element."
    )
    left = picture(
        (500, 375),
        "wheat",
        [
            ("rectangle", [(60, 180), (440, 320)], "saddlebrown"),
            ("rectangle", [(100, 140), (200, 200)], "tan"),
            ("rectangle", [(300, 140), (400, 200)], "burlywood"),
        ],
    )
    right = picture(
        (640, 427),
        "whitesmoke",
        [
            ("rectangle", [(80, 200), (300, 380)], "gray"),
            ("ellipse", [(450, 100), (560, 380)], "green"),
        ],
    )
    llm = orchestrator(
        {
            "QuestionDispatcherAgent": [
                "[Thought]: Two images and a statement about them to verify: the two-image "
                "agent.\n[Act]: answer = TwoImageVQAAgent(question, image, image2)"
            ],
            "TwoImageVQAAgent": [
                "[Thought]: First claim: a sofa and pillows only in neutral brown shades. I "
                "check the left image.\n[Act]: neutral = VQA(image, "
                "'Are the sofa and the pillows only in neutral brown shades?')",
                "[Thought]: The left image holds the first claim, so the other one must have "
                "something blue. I check both images.\n"
                "[Act]: blue = VQA([image, image2], 'Is there anything blue?')",
                "[Thought]: Neither image has anything blue, so the second claim fails and the "
                "statement cannot be true.\n[Finish]: false",
            ],
        }
    )
    vqa = scripted_vqa(
        {
            "Are the sofa and the pillows only in neutral brown shades?": "yes",
            "Is there anything blue?": "no",
        }
    )
    systems = paper_systems(vqa, llm=llm)
    result = await systems.system("hammr").run(statement, {"image": left, "image2": right})

    assert result.answer == "false"
    trace = result.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> TwoImageVQAAgent",
        "  TwoImageVQAAgent -> VQA",
        "  TwoImageVQAAgent -> VQA",
        "  TwoImageVQAAgent -> [Finish] false",
    ]
    judge = trace.steps[0].child
    assert judge is not None and set(judge.inputs) == {"image", "image2"}
    first, both, _ = judge.steps
    assert (first.arguments["image"]["size"], first.output) == ([500, 375], "yes")
    # one call over the pair: hammr hands the list to the batched tool, one answer per image
    assert [im["size"] for im in both.arguments["image"]] == [[500, 375], [640, 427]]
    assert both.output == ["no", "no"]
    assert trace.llm_calls == llm.calls == 4


# -- Fig. C.2 --------------------------------------------------------------------------------


async def test_fig_c2_printed_number_misrouted_to_counting_agent_scripted_llm_real_tools() -> None:
    # the caption's mistake; the cans, the printed "COLLECT 6" and the count 3 are ours
    question = "How many cans can be collected?"
    cans = [[60, 120, 120, 220], [240, 120, 120, 220], [420, 120, 120, 220]]
    shapes: list[tuple[str, list, str]] = []
    for x, y, w, h in cans:
        shapes.append(("rectangle", [(x, y), (x + w, y + h)], "firebrick"))
        shapes.append(("text", [(x + 20, y + 100), "COLLECT 6"], "white"))
    image = picture((600, 400), "lightgray", shapes)
    llm = orchestrator(
        {
            "QuestionDispatcherAgent": [
                "[Thought]: The question asks how many cans: a counting question.\n"
                "[Act]: answer = ComplexCountingAgent(question, image)"
            ],
            "ComplexCountingAgent": [
                "[Thought]: I find all the cans.\n[Act]: found = DetectObject(image, 'can')",
                "[Thought]: I crop every can to look at each.\n"
                "[Act]: crops = CropImage(image, found)",
                "[Thought]: I check each crop shows a can.\n"
                "[Act]: seen = ObjectInImage(crops, 'can')",
                "[Thought]: All three are cans.\n[Finish]: 3",
            ],
        }
    )
    systems = paper_systems(
        scripted_detector(cans), scripted_object_in_image([True, True, True]), llm=llm
    )
    dispatcher = systems.agents["QuestionDispatcherAgent"]
    result = await systems.system("hammr").run(question, {"image": image})

    assert result.answer == "3"  # the dispatcher relays the wrong specialist's count
    trace = result.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> ComplexCountingAgent",
        "  ComplexCountingAgent -> DetectObject",
        "  ComplexCountingAgent -> CropImage",
        "  ComplexCountingAgent -> ObjectInImage",
        "  ComplexCountingAgent -> [Finish] 3",
    ]
    counting = trace.steps[0].child
    assert counting is not None
    crops = counting.steps[1].output  # real crops, one per detected can
    assert [(c["size"], c["region"]) for c in crops] == [
        ([w, h], [float(x), float(y), float(w), float(h)]) for x, y, w, h in cans
    ]
    assert counting.steps[2].output == [True, True, True]
    # a reasoning error, and only the dispatcher's: its prompt offered the OCR agent and said
    # a number printed in the image is its question
    assert isinstance(dispatcher.tools["OCRReasoningAgent"], ReActAgent)
    assert "OCRReasoningAgent, even if it asks for a number" in llm.requests[0].messages[0].text()


async def test_fig_c2_bottle_label_misrouted_to_single_hop_agent_scripted_llm_real_tools(
    tmp_path: Path,
) -> None:
    # the caption's mistake; the wine, its label and the article are ours
    question = "Where was this wine made?"
    image = picture(
        (300, 600),
        "white",
        [
            ("rectangle", [(110, 60), (190, 560)], "darkred"),
            ("rectangle", [(110, 300), (190, 420)], "ivory"),
            ("text", [(115, 350), "NAPA VALLEY"], "black"),
        ],
    )
    kb = knowledge_base(
        tmp_path,
        {
            "Cabernet Sauvignon": "Cabernet Sauvignon is a red wine grape variety. It arose in "
            "the Bordeaux region of France in the 17th century, as a cross of Cabernet Franc "
            "and Sauvignon blanc, and is now grown in most wine regions."
        },
    )
    llm = orchestrator(
        {
            "QuestionDispatcherAgent": [
                "[Thought]: Where a wine comes from is a fact about the specific thing shown, "
                "found in an encyclopedia.\n"
                "[Act]: answer = SingleHopEncyclopedicAgent(question, image)"
            ],
            "SingleHopEncyclopedicAgent": [
                "[Thought]: I recognise the wine.\n[Act]: entity = RecognizeEntity(image)",
                "[Thought]: I fetch its article.\n[Act]: page = WikipediaArticle(entity)",
                "[Thought]: I ask the article, naming the wine.\n[Act]: answer = "
                "AnswerWithContext('Where was Cabernet Sauvignon wine first made?', page)",
                lambda req: f"[Thought]: The article says.\n[Finish]: {last_observation(req)}",
            ],
        },
        texts={"Where was Cabernet Sauvignon wine first made?": "Bordeaux"},
    )
    systems = paper_systems(scripted_lens("Cabernet Sauvignon"), llm=llm)
    result = await systems.system("hammr").run(
        question, {"image": image}, ctx=ToolContext(backends={"kb": kb})
    )

    assert result.answer == "Bordeaux"  # the article's answer, not the label's Napa Valley
    trace = result.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> SingleHopEncyclopedicAgent",
        "  SingleHopEncyclopedicAgent -> RecognizeEntity",
        "  SingleHopEncyclopedicAgent -> WikipediaArticle",
        "  SingleHopEncyclopedicAgent -> AnswerWithContext",
        "  SingleHopEncyclopedicAgent -> [Finish] Bordeaux",
    ]
    single = trace.steps[0].child
    assert single is not None
    assert single.steps[0].output == {"$entity": "Cabernet Sauvignon", "score": 0.9}
    assert single.steps[1].output["$page"] == "Cabernet Sauvignon"
    assert "OCR" not in systems.agents["SingleHopEncyclopedicAgent"].tools  # it cannot read it
    # the dispatcher's prompt sends labels to the OCR agent: its reasoning went wrong
    assert "text printed in the image (a sign, plate, label" in llm.requests[0].messages[0].text()
    assert trace.llm_calls == llm.calls == 6


# -- Fig. C.3 --------------------------------------------------------------------------------


async def test_fig_c3_naive_agent_asks_vqa_hammr_reads_the_article_scripted_llm_real_tools(
    tmp_path: Path,
) -> None:
    # the caption's two paths; the cathedral, its spire and the VQA's wrong reply are ours
    question = "How tall is the spire of this cathedral?"
    image = picture(
        (400, 600),
        "skyblue",
        [
            ("rectangle", [(80, 380), (320, 580)], "lightgray"),
            ("polygon", [(200, 40), (160, 380), (240, 380)], "gray"),
        ],
    )
    kb = knowledge_base(
        tmp_path,
        {
            "Salisbury Cathedral": "Salisbury Cathedral is an Anglican cathedral in Salisbury, "
            "England, built in the 13th century. Its spire, 123 metres tall, is the tallest "
            "church spire in the United Kingdom."
        },
    )
    llm = orchestrator(
        {
            "NaiveGenericAgent": [
                "[Thought]: I ask the VQA model how tall the spire is.\n"
                "[Act]: height = VQA(image, 'How tall is the spire of this cathedral?')",
                lambda req: f"[Thought]: VQA says.\n[Finish]: {last_observation(req)}",
            ],
            "QuestionDispatcherAgent": [
                "[Thought]: The height of this specific cathedral's spire is in its "
                "encyclopedia article: single-hop encyclopedic.\n"
                "[Act]: answer = SingleHopEncyclopedicAgent(question, image)"
            ],
            "SingleHopEncyclopedicAgent": [
                "[Thought]: I recognise the cathedral.\n[Act]: entity = RecognizeEntity(image)",
                "[Thought]: I fetch its article.\n[Act]: page = WikipediaArticle(entity)",
                "[Thought]: I ask the article, naming the cathedral.\n[Act]: answer = "
                "AnswerWithContext('How tall is the spire of Salisbury Cathedral?', page)",
                lambda req: f"[Thought]: The article says.\n[Finish]: {last_observation(req)}",
            ],
        },
        texts={"How tall is the spire of Salisbury Cathedral?": "123 metres"},
    )
    vqa = scripted_vqa({"How tall is the spire of this cathedral?": "100 feet"})
    systems = paper_systems(vqa, scripted_lens("Salisbury Cathedral"), llm=llm)
    ctx = ToolContext(backends={"kb": kb})

    naive = await systems.system("naive").run(question, {"image": image}, ctx=ctx)
    assert naive.answer == "100 feet"  # wrong: the VLM does not know the building
    assert call_tree(naive.trace) == [
        "NaiveGenericAgent -> VQA",
        "NaiveGenericAgent -> [Finish] 100 feet",
    ]
    # a reasoning mistake: the naive agent had Lens and Wikipedia among its tools
    assert {"RecognizeEntity", "WikipediaArticle", "VQA"} <= set(systems.naive().tools)

    hammr = await systems.system("hammr").run(question, {"image": image}, ctx=ctx)
    assert hammr.answer == "123 metres"
    trace = hammr.trace
    assert (trace.status, trace.errors()) == ("finished", [])
    assert call_tree(trace) == [
        "QuestionDispatcherAgent -> SingleHopEncyclopedicAgent",
        "  SingleHopEncyclopedicAgent -> RecognizeEntity",
        "  SingleHopEncyclopedicAgent -> WikipediaArticle",
        "  SingleHopEncyclopedicAgent -> AnswerWithContext",
        "  SingleHopEncyclopedicAgent -> [Finish] 123 metres",
    ]
    single = trace.steps[0].child
    assert single is not None
    assert single.steps[1].output["$page"] == "Salisbury Cathedral"
    assert single.steps[2].arguments["context"]["$page"] == "Salisbury Cathedral"
    assert naive.trace.llm_calls + trace.llm_calls == llm.calls == 2 + 6
