"""Error analysis of evaluation runs: what the traces show by themselves, and what a person labels.

HAMMR's section 4.3 and Table 4 sort the mistakes of a system into three kinds that follow
the ReAct steps, and count the correct answers as a fourth row:

* **Reasoning** - the orchestrator LLM thinks wrongly ([Thought]): logic, spatial relations,
  choosing the wrong tool, and (for HAMMR) the dispatcher choosing the wrong specialist;
* **Tool call formulation** - the [Act] is malformed: syntax errors, wrong arguments,
  variables or tools that do not exist;
* **Tool failure** - a tool gets good input and returns a wrong result ([Observe]);
* **No error**.

Two parts. The *automatic* part reads the traces: :func:`error_counts` (in
:mod:`.trace_errors`, which also says how the recorded error kinds are grouped) counts every
error kind the agents recorded, per agent and per question type, and
:func:`dispatcher_confusion` (:mod:`.confusion`) tabulates which specialist the dispatcher
sent each question type to (the paper's dispatcher is right 87% of the time);
:func:`errors_report` (:mod:`.report`) prints both. Only formulation errors can be read off
a trace with certainty; a wrong answer after a clean trace is a reasoning error or a silent
tool failure, and only a person can tell which. So the *labelled* part samples wrong answers
(:func:`sample_wrong`), writes them for a person to label (:func:`export_for_labelling`,
both in :mod:`.labelling`), and turns the labels into Table 4 (:func:`tabulate_labels`, in
:mod:`.table4`, which explains the table's denominators).
"""

from __future__ import annotations

from hammr.eval.analysis.confusion import (
    LLM_DECIDED,
    NONE_CHOSEN,
    Confusion,
    dispatched,
    dispatcher_confusion,
)
from hammr.eval.analysis.labelling import (
    ERROR_LABELS,
    EXPORT_COLUMNS,
    LABELS,
    WRONG_BELOW,
    export_for_labelling,
    is_wrong,
    run_accuracy,
    sample_wrong,
    trace_summary,
)
from hammr.eval.analysis.report import errors_report
from hammr.eval.analysis.table4 import (
    TABLE4_ROWS,
    LabelFileError,
    LabelTable,
    RunLabels,
    tabulate_labels,
)
from hammr.eval.analysis.trace_errors import (
    COLUMNS,
    FORMULATION_KINDS,
    TOOL_FAILURE_KINDS,
    ErrorRow,
    ErrorTable,
    error_counts,
)

__all__ = [
    "COLUMNS",
    "ERROR_LABELS",
    "EXPORT_COLUMNS",
    "FORMULATION_KINDS",
    "LABELS",
    "LLM_DECIDED",
    "NONE_CHOSEN",
    "TABLE4_ROWS",
    "TOOL_FAILURE_KINDS",
    "WRONG_BELOW",
    "Confusion",
    "ErrorRow",
    "ErrorTable",
    "LabelFileError",
    "LabelTable",
    "RunLabels",
    "dispatched",
    "dispatcher_confusion",
    "error_counts",
    "errors_report",
    "export_for_labelling",
    "is_wrong",
    "run_accuracy",
    "sample_wrong",
    "tabulate_labels",
    "trace_summary",
]
