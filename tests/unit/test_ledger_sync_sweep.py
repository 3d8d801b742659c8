"""The sweep driver against a fake cluster: one experiment per box at a time, and an entry for every
experiment (the box's, or the driver's failure when the box returns none)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.scaleout.onbox import BoxJob, BoxReport, NewEntry
from recipe_ledger.scaleout.sweep import Lost, SweepItem, check_boxes, plan_sweep, run_sweep

from helpers.sweep_project import study_spec


@dataclass
class FakeCluster:
    """Boxes that answer from a script: ``answers[spec]`` is a BoxReport or a Lost."""

    live: set[str]
    answers: dict[str, BoxReport | Lost]
    dies_after: dict[str, str] = field(default_factory=dict)  # spec -> box that is gone once it ends
    running: dict[int, tuple[str, str]] = field(default_factory=dict)
    busy_log: list[set[str]] = field(default_factory=list)
    counter: int = 0

    def boxes(self) -> set[str]:
        return set(self.live)

    def submit(self, box: str, job: BoxJob) -> int:
        self.counter += 1
        self.running[self.counter] = (box, job.spec)
        self.busy_log.append({b for b, _ in self.running.values()})
        assert len(self.running) == len({b for b, _ in self.running.values()}), "two runs on one box"
        return self.counter

    def next_done(self, handles):
        handle = min(handles)
        box, spec = self.running.pop(handle)
        if spec in self.dies_after:
            self.live.discard(self.dies_after[spec])
        return handle, self.answers[spec]


def report(
    kind: str = "result", run_exit: int = 0, sync_exit: int | None = 0, writer: str = "w"
) -> BoxReport:
    entries = (NewEntry("ab" * 32, kind),) if kind else ()
    return BoxReport("host", writer, "/co", run_exit, entries, sync_exit, "last line")


@pytest.fixture
def root(tmp_path):
    Ledger.init(tmp_path)
    return tmp_path


def items(*pairs: tuple[str, str]) -> list[SweepItem]:
    return [SweepItem(f"experiments/{name}.yaml", name, box) for name, box in pairs]


def sweep(root, plan, cluster):
    events = []
    summary = run_sweep(
        root,
        plan,
        cluster,
        writer="driver",
        job=lambda item: BoxJob(item.spec, str(root)),
        events=events.append,
    )
    return summary, events


def test_boxes_run_in_parallel_and_each_box_one_experiment_at_a_time(root):
    plan = items(("a1", "a"), ("a2", "a"), ("b1", "b"))
    cluster = FakeCluster({"a", "b"}, {i.spec: report() for i in plan})
    summary, events = sweep(root, plan, cluster)
    assert cluster.busy_log[:2] == [{"a"}, {"a", "b"}]  # both boxes busy at once, never one twice
    assert [o.ok for o in summary.outcomes] == [True, True, True] and not summary.failed
    finished = [(e.box, e.done, e.total) for e in events if e.state == "finished"]
    assert sorted(finished) == [("a", 1, 2), ("a", 2, 2), ("b", 1, 1)]
    assert Ledger.open(root).entries() == []  # the boxes wrote the entries, not the driver


def test_a_box_that_dies_gets_a_failure_entry_from_the_driver(root):
    plan = items(("a1", "a"), ("a2", "a"), ("b1", "b"))
    cluster = FakeCluster(
        {"a", "b"},
        {"experiments/a1.yaml": Lost("NodeDiedError: node gone"), "experiments/b1.yaml": report()},
        dies_after={"experiments/a1.yaml": "a"},
    )
    summary, _ = sweep(root, plan, cluster)
    lost = {o.item.name: o for o in summary.outcomes if o.by_driver}
    assert set(lost) == {"a1", "a2"}  # a2 never started: its box had no live node left
    written = {e["payload"]["subject"]: e for e in Ledger.open(root).entries()}
    assert set(written) == {"a1", "a2"} and all(e["writer"] == "driver" for e in written.values())
    assert "NodeDiedError: node gone" in written["a1"]["payload"]["cause"]
    assert "no live node labelled box=a" in written["a2"]["payload"]["cause"]
    assert written["a1"]["payload"]["conditions"] == {
        "box": "a",
        "stage": "sweep",
        "spec": "experiments/a1.yaml",
    }
    assert [o.entry_id for o in summary.outcomes if o.by_driver] == [
        written[o.item.name]["id"] for o in summary.outcomes if o.by_driver
    ]


def test_a_run_that_left_no_entry_is_recorded_by_the_driver_and_a_box_failure_is_not(root):
    plan = items(("refused", "a"), ("crashed", "b"))
    cluster = FakeCluster(
        {"a", "b"},
        {
            "experiments/refused.yaml": report(kind="", run_exit=3),
            "experiments/crashed.yaml": report("failure", 5),
        },
    )
    summary, _ = sweep(root, plan, cluster)
    by_name = {o.item.name: o for o in summary.outcomes}
    assert by_name["refused"].by_driver and "exited 3 without an entry" in by_name["refused"].problem
    assert not by_name["crashed"].by_driver and by_name["crashed"].entry_kind == "failure"
    assert [e["payload"]["subject"] for e in Ledger.open(root).entries()] == ["refused"]
    assert len(summary.failed) == 2


def test_a_result_whose_sync_failed_is_kept_and_flagged(root):
    plan = items(("a1", "a"))
    summary, _ = sweep(root, plan, FakeCluster({"a"}, {"experiments/a1.yaml": report(sync_exit=3)}))
    outcome = summary.outcomes[0]
    assert outcome.entry_kind == "result" and not outcome.ok and "entry waits there" in outcome.problem


def test_a_box_with_no_node_is_refused_before_anything_runs(root):
    plan = items(("a1", "a"), ("z1", "zz"))
    cluster = FakeCluster({"a"}, {})
    with pytest.raises(StateError, match="no live node labelled box=zz.*experiments/z1.yaml") as error:
        check_boxes(plan, cluster, "head:6379")
    assert "ray start --address head:6379 --labels box=zz" in error.value.one_line()
    assert cluster.counter == 0


def test_plan_reads_name_and_box_and_refuses_a_spec_outside_the_project(root, tmp_path_factory):
    text = json.dumps(study_spec("placement", "box-a"))
    (root / "experiments").mkdir()
    (root / "experiments" / "s.yaml").write_text(text)
    assert plan_sweep(root, [root / "experiments" / "s.yaml"]) == [
        SweepItem("experiments/s.yaml", "placement", "box-a")
    ]
    outside = tmp_path_factory.mktemp("elsewhere") / "s.yaml"
    outside.write_text(text)
    with pytest.raises(InputError, match="outside the project"):
        plan_sweep(root, [outside])
