"""How long a run will take (hammr.eval.duration): the median of the same system's stored
answers on the same model, whatever the configuration's values are (a replica list too)."""

from __future__ import annotations

from pathlib import Path

from hammr.eval.duration import expected, model_keys
from hammr.eval.store import RunStore
from hammr.eval.types import RunRecord

REPLICAS = {
    "llm.backend": "openai",
    "llm.model": "m",
    "llm.base_url": ["http://a/v1", "http://b/v1"],
}


def _run(
    store: RunStore,
    name: str,
    system: str,
    config: dict[str, object],
    seconds: list[float],
    status: str = "finished",
) -> None:
    store.open_run(name, "suite", system, config=config)
    for i, s in enumerate(seconds):
        store.add(
            RunRecord(
                run=name,
                dataset="d",
                sample_id=f"{name}-{i}",
                question_type="t",
                question="q",
                answers=("a",),
                prediction="a",
                score=1.0,
                status=status,
                latency_s=s,
            )
        )


def test_the_median_of_the_same_system_on_the_same_model(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        _run(store, "a", "naive", REPLICAS, [10.0, 30.0, 20.0])
        _run(store, "b", "naive", {**REPLICAS, "llm.model": "other"}, [500.0])  # another model
        _run(store, "c", "hammr", REPLICAS, [900.0])  # another system
        _run(store, "d", "naive", REPLICAS, [700.0], status="timeout")  # not an answer
        got = expected(store, "naive", REPLICAS, todo=6, in_flight=2)
        assert got is not None
        assert (got.median_s, got.answers, got.seconds) == (20.0, 3, 60.0)
        assert got.line() == (
            "expected: about 60 s (6 to ask, a median 20.0 s each, 2 at a time; naive on this "
            "model in 3 stored answers)"
        )
        assert expected(store, "naive", REPLICAS, todo=0, in_flight=1) is None
        assert expected(store, "avis", REPLICAS, todo=3, in_flight=1) is None
        embedded = {"llm.backend": "embedded", "llm.model": "", "llm.model_path": None}
        assert expected(store, "naive", embedded, todo=3, in_flight=1) is None
        # fewer questions than in flight: one round
        one = expected(store, "naive", REPLICAS, todo=1, in_flight=8)
        assert one is not None and one.seconds == 20.0


def test_the_model_is_named_by_its_settings() -> None:
    config = {**REPLICAS, "agent.system": "hammr", "llm.model_path": None}
    assert model_keys(config) == {**REPLICAS, "llm.model_path": None}
