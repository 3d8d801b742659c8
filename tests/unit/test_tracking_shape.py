"""How ledger entries map onto MLflow runs, without MLflow: names, tags, params, metrics, children,
redaction, and the idempotent sync against an in-memory stand-in for the tracking store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger import runs, tracking
from recipe_ledger.cli import main
from recipe_ledger.errors import InputError
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.models import current_version
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.tracking import compare, links, runfolder, tree
from recipe_ledger.tracking import sync as sync_module
from recipe_ledger.tracking.entries import entry_spec
from recipe_ledger.tracking.runfolder import arm_differences, arm_settings, run_folder, run_roots
from recipe_ledger.tracking.runspec import (
    CALIBRATIONS_TAG,
    COMPARE_TAG,
    ENTRY_TAG,
    NOTE_CHARS,
    NOTES_TAG,
    PROBLEMS_TAG,
    RETRACTED_PREFIX,
    STATUS_TAG,
    SYNC_TAG,
    USED_BY_TAG,
    RunSpec,
    key,
)
from recipe_ledger.tracking.sync import SyncReport, refusal, sync_entries
from recipe_ledger.tracking.tree import STALE_MS, IndexedRun, SyncSession, create_tree, stage_redacted
from recipe_ledger.tracking.uri import check_tracking_uri, safe_uri
from recipe_ledger.tracking.view import (
    LOCAL_UI,
    VIEW_TAG,
    browse_lines,
    browse_url,
    compare_url,
    experiment_tags,
    ui_command,
)

RUN_ID = "wiring-20260101T000000Z-abcd"
FP_CONTROL = "sha256:" + "a" * 64
FP_FAST = "sha256:" + "b" * 64
SECRET = "hf_" + "Q" * 30


# ------------------------------------------------------------------------------ a small real ledger


def bar(point: int = 4, outcome: str = "win") -> dict:
    return {
        "candidate": "fast",
        "metric": "output_tps_total",
        "point": point,
        "direction": "higher",
        "min_effect": 0.05,
        "outcome": outcome,
        "effect": 0.3,
        "ci_low": 0.28,
        "ci_high": 0.31,
        "mde": 0.01,
        "control": 400.0,
        "value": 520.0,
        "reason": "effect +30% exceeds the bar",
    }


def experiment(run_id: str = RUN_ID) -> dict:
    return {
        "name": "wiring",
        "spec": "experiments/x.yaml",
        "spec_sha256": "sha256:" + "c" * 64,
        "box": "cpu-only",
        "run_id": run_id,
        "points": [1, 4],
        "repeats": 2,
        "schedule": ["control#1", "fast#1", "fast#2", "control#2"],
        "instruments": {"probe": "command:54be33543e056229"},
        "method": "rl-verdict/1",
        "duration_s": 2.0,
        "host": {"cpu": "Xeon", "hostname": "box-a"},
        "bars": [bar()],
        "arms": {
            "control": {
                "source": "raw command",
                "fingerprint": FP_CONTROL,
                "argv": ["serve", "--api-key", SECRET],
                "env": {},
                "image": "vllm/vllm-openai@sha256:" + "d" * 64,
            },
            "fast": {"source": "raw command", "fingerprint": FP_FAST, "argv": ["serve", "--fast"], "env": {}},
        },
    }


def result_payload(run_id: str = RUN_ID) -> dict:
    return {
        "schema_version": current_version("result"),
        "subject": "wiring",
        "text": "fast output_tps_total@4: win (+30.0%)",
        "metrics": {"control.c4.output_tps_total": 400.0, "fast.c4.output_tps_total": 520.0},
        "verdict": "win",
        "conditions": {"box": "cpu-only", "run_id": run_id},
        "experiment": experiment(run_id),
        "origin": {"how": "measured", "source": run_id},
    }


GIT = {"commit": "1" * 40, "dirty": False, "scripts": {"scripts/probe.py": "2" * 40}}


@pytest.fixture()
def ledger(tmp_path) -> Ledger:
    return Ledger.init(tmp_path)


def add_result(ledger: Ledger, run_id: str = RUN_ID) -> dict:
    return ledger.append("result", result_payload(run_id), writer="box-a", git=GIT)


def add_calibration(ledger: Ledger) -> dict:
    payload = {
        "schema_version": 2,
        "instrument": "probe",
        "metric": "output_tps_total",
        "method": "rl-verdict/1",
        "fingerprint": "sha256:" + "e" * 64,
        "text": "A/A calibration",
        "points": {
            "4": {
                "n": 2,
                "mean": 400.0,
                "sigma": 1.1,
                "cv": 0.0028,
                "max_spread": 0.004,
                "samples": [400.8, 399.2],
            }
        },
        "conditions": {"box": "cpu-only", "experiment": "wiring"},
        "origin": {"how": "measured", "source": RUN_ID},
    }
    return ledger.append("calibration", payload, writer="box-a", git=None)


def add_failure(ledger: Ledger) -> dict:
    payload = {
        "schema_version": 1,
        "subject": "wiring",
        "cause_class": "oom",
        "cause": "measurement: the server ran out of memory",
        "log_tail": f"HF_TOKEN={SECRET}\nCUDA out of memory",
        "minutes_lost": 1.5,
        "conditions": {"box": "cpu-only", "run_id": "wiring-x", "stage": "measurement"},
        "origin": {"how": "measured", "source": "wiring-x"},
    }
    return ledger.append("failure", payload, writer="box-a", git=None)


def record(arm: str, repeat: int, point: int, value: float, **extra) -> dict:
    return {
        "arm": arm,
        "repeat": repeat,
        "point": point,
        "instrument": "probe",
        "instrument_version": "command:54be33543e056229",
        "seed": repeat * 1000 + point,
        "metrics": {"output_tps_total": value},
        "server": {"prefix_cache_hit_rate": 0.5},
        "raw_file": f"raw/{arm}-p{point}-r{repeat}.stdout.log",
        "raw_sha256": "sha256:" + "f" * 64,
        "wall_s": 0.06,
        **extra,
    }


def make_run_dir(runs_dir: Path, run_id: str = RUN_ID) -> Path:
    run_dir = runs_dir / run_id
    (run_dir / "raw").mkdir(parents=True)
    records = [
        record(a, r, p, 100.0 * p)
        for a, r in (("control", 1), ("fast", 1), ("fast", 2), ("control", 2))
        for p in (1, 4)
    ]
    (run_dir / "measurements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / "calibration.jsonl").write_text(json.dumps(record("control", 1, 4, 400.0)) + "\n")
    (run_dir / "plan.json").write_text(json.dumps({"arms": {"control": {"fingerprint": FP_CONTROL}}}))
    (run_dir / "summary.json").write_text("{}")
    (run_dir / "server-control-r1.log").write_text(f"starting with --api-key {SECRET}\nready\n")
    (run_dir / "server-aa-control-r1.log").write_text("ready\n")
    (run_dir / "raw" / "control-p4-r1.stdout.log").write_text('{"output_tps_total": 400}\n')
    (run_dir / "raw" / "aa-control-p4-r1.stdout.log").write_text('{"output_tps_total": 400}\n')
    (run_dir / "raw" / "profile.bin").write_bytes(b"\xff\xfe\x00binary")
    return run_dir


# ------------------------------------------------------------------------------ names and shapes


def test_importing_the_package_does_not_import_mlflow():
    """Every module of the package imports on a bare GPU box: MLflow (and its SQLAlchemy) only on use."""
    code = (
        "import pkgutil, sys, recipe_ledger.cli, recipe_ledger.tracking as package\n"
        "names = [m.name for m in pkgutil.iter_modules(package.__path__)]\n"
        "assert len(names) > 5, names\n"
        "for name in names: __import__('recipe_ledger.tracking.' + name)\n"
        "assert not {'mlflow', 'sqlalchemy'} & set(sys.modules), names"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_using_it_without_mlflow_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what an environment without MLflow looks like
    Ledger.init(tmp_path)
    with pytest.raises(tracking.TrackingUnavailable, match=r"pip install 'recipe-ledger\[tracking\]'"):
        tracking.sync_ledger(tmp_path)


def test_the_cli_reports_a_missing_mlflow_in_one_line_with_exit_code_3(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    Ledger.init(tmp_path)
    result = CliRunner().invoke(main, ["mlflow", "sync", "--root", str(tmp_path)])
    assert result.exit_code == 3
    assert "recipe-ledger[tracking]" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("verdict", "fast", "output_tps_total", "c4"), "verdict.fast.output_tps_total.c4"),
        (("verdict", "fast", "tps@4"), "verdict.fast.tps_4"),  # MLflow refuses '@' in any name
        (("a:b",), "a_b"),  # and ':' on Windows servers
        (("script", "scripts/probe.py"), "script.scripts/probe.py"),  # slashes that stay one path are kept
        (("x", "a//b"), "x.a__b"),  # a name that normalizes to another path is flattened
        (("..", "x"), "x"),  # never a leading dot
    ],
)
def test_names_are_made_acceptable_to_mlflow(parts, expected):
    assert key(*parts) == expected


def test_run_folders_never_leave_runs_dir():
    entry = {
        "payload": {"conditions": {"run_id": "../../etc"}, "origin": {"how": "measured", "source": "/abs"}}
    }
    assert run_folder(entry) is None
    assert run_folder({"payload": {"experiment": {"run_id": RUN_ID}}}) == RUN_ID
    imported = {"payload": {"origin": {"how": "imported", "source": "000_81e5.txt"}}}
    assert run_folder(imported) is None  # an imported entry's source is a document, not a run


def test_a_result_maps_to_one_parent_with_verdict_tags_and_pinned_params(ledger, tmp_path):
    entry = {**add_result(ledger), "git": GIT}  # as `ledger run` pins an instrument script
    spec = entry_spec(entry, tmp_path / "runs")
    assert spec.name == RUN_ID  # "<experiment>-<stamp>-<hex>": the experiment name is already in it
    assert spec.tags[ENTRY_TAG] == entry["id"] and spec.tags["ledger.kind"] == "result"
    assert spec.tags["ledger.writer"] == "box-a" and spec.tags["box"] == "cpu-only"
    assert spec.tags["git.commit"] == "1" * 40 and spec.tags["git.dirty"] == "false"
    assert spec.tags["host.hostname"] == "box-a"
    assert spec.tags["verdict.fast.output_tps_total.c4"] == "win"
    assert spec.status_tags[STATUS_TAG] == "active"
    assert spec.params["arm.control.fingerprint"] == FP_CONTROL
    assert spec.params["arm.control.image"].startswith("vllm/vllm-openai@sha256:")
    assert spec.params["arm.fast.model_sha256"] == "-"
    assert spec.params["instrument.probe.version"] == "command:54be33543e056229"
    assert spec.params["experiment.spec"] == "experiments/x.yaml"
    assert spec.params["experiment.spec_sha256"] == "sha256:" + "c" * 64
    assert spec.params["script.scripts/probe.py"] == "2" * 40
    # The bar by position (columns that line up across experiments), not by candidate and metric.
    assert spec.tags["bar1"] == "fast vs control: output_tps_total (tok/s) at c4"
    assert spec.tags["bar1.verdict"] == "win"
    assert spec.metrics["bar1.candidate"] == 520.0 and spec.metrics["bar1.control"] == 400.0
    assert spec.metrics["bar1.effect_pct"] == pytest.approx(30.0)
    assert spec.metrics["bar1.ci_low_pct"] == pytest.approx(28.0)
    assert spec.metrics["bar1.ci_high_pct"] == pytest.approx(31.0)
    assert not any(name.startswith(("verdict.", "fast.", "control.")) for name in spec.metrics)
    assert "bar1.effect_pct=%" in spec.tags["ledger.units"].split(", ")
    assert spec.end_ms - spec.start_ms == 2000  # the run's duration, ending when the entry was written


def test_a_sequential_result_says_how_it_was_decided_in_words_and_numbers(ledger, tmp_path):
    payload = result_payload()
    record = payload["experiment"]
    record["design"] = {
        "kind": "sequential",
        "method": "rl-sequential/1",
        "alpha": 0.01,
        "cap": 24,
        "looks": 2,
        "launches": 6,
        "stopped": "decided",
        "summary": "decided after 6 launches: win",
    }
    record["bars"][0].update(launches=6, looks=2, stopped="decided", decision="decided after 6 launches: win")
    spec = entry_spec(ledger.append("result", payload, writer="box-a", git=GIT), tmp_path / "runs")
    assert spec.tags["ledger.design"] == "rl-sequential/1: decided after 6 launches: win"
    assert spec.tags["verdict.fast.output_tps_total.c4.decision"] == "decided after 6 launches: win"
    assert spec.metrics["design.launches"] == 6 and spec.metrics["design.looks"] == 2
    plain = entry_spec(add_result(ledger, "wiring-20261128T000000Z-0002"), tmp_path / "runs")
    assert "ledger.design" not in plain.tags and "design.launches" not in plain.metrics


def test_without_its_run_folder_a_result_still_gets_params_and_metrics(ledger, tmp_path):
    spec = entry_spec(add_result(ledger), tmp_path / "runs")
    assert spec.run_dir is None and spec.children == () and spec.files == ()
    assert spec.params and spec.metrics


def test_with_its_run_folder_a_result_gets_children_and_files(ledger, tmp_path):
    make_run_dir(tmp_path / "runs")
    spec = entry_spec(add_result(ledger), tmp_path / "runs")
    assert len(spec.children) == 8  # 2 arms x 2 repeats x 2 points
    child = next(c for c in spec.children if c.name == "fast#2 c4")
    assert child.params["arm"] == "fast" and child.params["repeat"] == "2" and child.params["point"] == "4"
    assert child.params["seed"] == "2004" and child.params["instrument_version"] == "command:54be33543e056229"
    assert child.params["arm_fingerprint"] == FP_FAST
    assert child.metrics == {"output_tps_total": 400.0, "server.prefix_cache_hit_rate": 0.5, "wall_s": 0.06}
    # What sets the arms apart, as params on every child: the flags, the image; not what they share.
    assert (child.params["flag.fast"], child.params["image"]) == ("true", "-")
    assert "flag.api-key" in child.params  # a flag only one arm has (its value redacted by its name)
    control = next(c for c in spec.children if c.name == "control#1 c4")
    assert control.params["flag.fast"] == "-" and control.params["image"].startswith("vllm/vllm-openai@")
    assert SECRET not in control.params["flag.api-key"] and "command" not in control.params
    assert "output_tps_total=tok/s" in child.tags["ledger.units"]
    assert not any(name.startswith(("control.", "fast.")) for name in child.metrics)
    assert child.tags["ledger.parent_entry"] == spec.tags[ENTRY_TAG] and child.status_tags == {
        STATUS_TAG: "active"
    }
    assert {
        "plan.json",
        "measurements.jsonl",
        "summary.json",
        "server-control-r1.log",
        "raw/control-p4-r1.stdout.log",
    } <= set(spec.files)


def test_a_calibration_gets_per_point_noise_and_its_a_a_children(ledger, tmp_path):
    make_run_dir(tmp_path / "runs")
    spec = entry_spec(add_calibration(ledger), tmp_path / "runs")
    assert (
        spec.tags["ledger.kind"] == "calibration" and spec.params["calibration.metric"] == "output_tps_total"
    )
    assert spec.metrics["c4.cv"] == pytest.approx(0.0028) and spec.metrics["c4.n"] == 2
    assert [c.name for c in spec.children] == ["A/A control#1 c4"]
    assert spec.children[0].params["arm_fingerprint"] == FP_CONTROL  # from plan.json
    assert "measurements.jsonl" not in spec.files and "server-aa-control-r1.log" in spec.files


def test_a_failure_carries_its_cause_and_log_tail_as_text(ledger, tmp_path):
    spec = entry_spec(add_failure(ledger), tmp_path / "runs")
    assert spec.name == "failed (oom): wiring wiring-x"
    assert spec.tags["ledger.cause_class"] == "oom" and spec.tags["ledger.stage"] == "measurement"
    assert spec.metrics == {"minutes_lost": 1.5}
    assert "CUDA out of memory" in spec.texts["failure.txt"]


# ------------------------------------------------------------------------------ secrets


def all_strings(spec: RunSpec) -> list[str]:
    out = [
        spec.name,
        *spec.tags,
        *spec.tags.values(),
        *spec.status_tags.values(),
        *spec.params,
        *spec.params.values(),
        *spec.metrics,
        *spec.texts.values(),
    ]
    return out + [s for child in spec.children for s in all_strings(child)]


def test_no_secret_reaches_a_tag_param_name_or_text(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "s3cr3t-value-from-env")
    make_run_dir(tmp_path / "runs")
    entries = [add_result(ledger), add_failure(ledger)]
    # The ledger redacted these on append already; entries from elsewhere may not have been.
    entries[0]["payload"]["experiment"]["bars"][0]["reason"] = "see s3cr3t-value-from-env"
    entries[0]["payload"]["experiment"]["arms"]["fast"]["argv"] = ["serve", "--hf-token", SECRET]
    for entry in entries:
        strings = all_strings(entry_spec(entry, tmp_path / "runs"))
        assert not [s for s in strings if SECRET in s or "s3cr3t-value-from-env" in s]


def test_files_are_uploaded_as_redacted_copies_and_binaries_are_withheld(tmp_path):
    run_dir = make_run_dir(tmp_path / "runs")
    staging = tmp_path / "staging"
    withheld = stage_redacted(run_dir, ["server-control-r1.log", "raw/profile.bin"], staging)
    assert withheld == ["raw/profile.bin"]
    assert SECRET not in (staging / "server-control-r1.log").read_text()
    assert "ready" in (staging / "server-control-r1.log").read_text()
    assert SECRET in (run_dir / "server-control-r1.log").read_text()  # the original is never touched


def test_printed_uris_carry_no_password():
    assert safe_uri("https://alice:pw@mlflow.lab:5000") == "https://mlflow.lab:5000"
    assert safe_uri("sqlite:////abs/mlflow.db") == "sqlite:////abs/mlflow.db"


# ------------------------------------------------------------------------------ idempotent sync


@dataclass
class FakeRun:
    spec: RunSpec
    tags: dict
    parent: str | None
    status: str = "RUNNING"
    deleted: bool = False
    files: dict = field(default_factory=dict)
    name: str = ""

    @property
    def finished(self) -> bool:
        return self.status != "RUNNING"


class FakeStore:
    """The TrackingClient protocol in memory, counting calls."""

    def __init__(self):
        self.runs: dict[str, FakeRun] = {}
        self.created = 0
        self.lookups = 0

    def active(self):
        return {rid: r for rid, r in self.runs.items() if not r.deleted}

    def indexed_runs(self):
        return [
            IndexedRun(rid, r.tags[ENTRY_TAG], r.finished, 0, dict(r.tags), r.status)
            for rid, r in self.active().items()
            if r.tags.get("ledger.role") == "entry"
        ]

    def entry_runs(self, entry_id):
        self.lookups += 1
        return [r for r in self.indexed_runs() if r.entry_id == entry_id]

    def running_runs(self):
        return [r for r in self.indexed_runs() if not r.finished]

    def create_run(self, spec, parent_run_id=None):
        self.created += 1
        run_id = f"run{self.created:04d}"
        self.runs[run_id] = FakeRun(spec, dict(spec.tags), parent_run_id, name=spec.name)
        return run_id

    def rename(self, run_id, name):
        self.runs[run_id].name = name

    def upload_dir(self, run_id, local_dir):
        for path in local_dir.rglob("*"):
            if path.is_file():
                self.runs[run_id].files[path.relative_to(local_dir).as_posix()] = path.read_text()

    def finish(self, run_id, end_ms, status="FINISHED"):
        self.runs[run_id].status = status

    def set_tags(self, run_id, tags):
        self.runs[run_id].tags.update(tags)

    def child_run_ids(self, run_id):
        return [rid for rid, r in self.active().items() if r.parent == run_id]

    def children(self, run_id, role="measurement"):
        """The child runs of one role: "measurement" (per arm x repeat x point) or "summary"."""
        return [rid for rid in self.child_run_ids(run_id) if self.runs[rid].tags["ledger.role"] == role]

    def delete_run(self, run_id):
        self.runs[run_id].deleted = True


def sync(store: FakeStore, ledger: Ledger, runs_dir: Path) -> SyncReport:
    ledger.refresh()
    report = SyncReport("http://mlflow.lab:5000", "recipe-ledger", experiment_id="7")
    return sync_entries(store, ledger.entries(), runs_dir, report)


def test_sync_creates_each_entry_once_and_then_skips_it(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    make_run_dir(runs_dir)
    result = add_result(ledger)
    add_calibration(ledger)
    actions.note(ledger, "not indexed", writer="box-a", git=None)
    store = FakeStore()
    first = sync(store, ledger, runs_dir)
    assert (first.created, first.updated, first.skipped) == (2, 0, 0)
    parent = store.runs[first.runs[result["id"]]]
    assert parent.finished and parent.tags["ledger.files"] == "attached"
    assert len(store.children(first.runs[result["id"]])) == 8
    assert SECRET not in parent.files["server-control-r1.log"]
    assert "raw/profile.bin" not in parent.files and parent.tags["ledger.files_withheld"] == "raw/profile.bin"
    count = len(store.runs)
    second = sync(store, ledger, runs_dir)
    assert (second.created, second.updated, second.skipped) == (0, 0, 2)
    assert len(store.runs) == count and second.runs == first.runs
    assert str(second).startswith("0 created, 0 updated, 2 unchanged")


def test_a_torn_line_in_the_run_folder_is_reported_by_the_sync_and_on_the_run(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    run_dir = make_run_dir(runs_dir)
    good = (run_dir / "measurements.jsonl").read_text()
    (run_dir / "measurements.jsonl").write_text(good + '{"arm": "fast", "repe')  # killed mid-write
    result = add_result(ledger)
    store = FakeStore()
    report = sync(store, ledger, runs_dir)
    where = f"{run_dir / 'measurements.jsonl'}:9"
    assert report.problems == [f"{where}: torn last line (the run stopped mid-write?)"]
    assert f"run-folder lines not indexed: {where}" in str(report)
    parent = store.runs[report.runs[result["id"]]]
    assert len(store.children(report.runs[result["id"]])) == 8  # the good lines are all indexed
    assert parent.tags[PROBLEMS_TAG].startswith(where)


def test_a_run_folder_written_with_headers_reads_as_one_written_without(ledger, tmp_path):
    legacy_dir, current_dir = tmp_path / "legacy", tmp_path / "current"
    make_run_dir(legacy_dir)
    folder = make_run_dir(current_dir)
    for name in ("measurements.jsonl", "calibration.jsonl"):
        rows = runs.read_records(folder / name).raise_if_problems()
        runs.write_records(folder / name, rows)
        assert (folder / name).read_text().startswith('{"format": "recipe-ledger/measurements"')
    runs.write_json(folder / "plan.json", runs.read_json(folder / "plan.json"))
    for make in (add_result, add_calibration):
        entry = make(ledger)
        old, new = entry_spec(entry, legacy_dir), entry_spec(entry, current_dir)
        assert old.children and [c.params for c in old.children] == [c.params for c in new.children]
        assert [c.metrics for c in old.children] == [c.metrics for c in new.children]
        assert old.problems == new.problems == ()


def test_a_retraction_is_mirrored_into_the_status_tags_of_the_parent_and_children(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    make_run_dir(runs_dir)
    result = add_result(ledger)
    store = FakeStore()
    run_id = sync(store, ledger, runs_dir).runs[result["id"]]
    retraction = actions.retract(
        ledger, result["id"], reason="the probe was miscalibrated", writer="box-a", git=None
    )
    report = sync(store, ledger, runs_dir)
    assert (report.created, report.updated) == (0, 1)
    tags = store.runs[run_id].tags
    assert tags[STATUS_TAG] == "retracted"
    assert tags["ledger.status_note"] == f"retracted by {retraction['id'][:12]}: the probe was miscalibrated"
    assert tags["mlflow.note.content"].startswith("**RETRACTED**")
    assert {store.runs[c].tags[STATUS_TAG] for c in store.child_run_ids(run_id)} == {"retracted"}
    assert sync(store, ledger, runs_dir).skipped == 1


def test_an_unfinished_run_from_a_killed_sync_is_rebuilt(ledger, tmp_path):
    result = add_result(ledger)
    store = FakeStore()
    run_id = sync(store, ledger, tmp_path / "runs").runs[result["id"]]
    store.runs[run_id].status = "RUNNING"  # as if the sync had died before marking it done
    report = sync(store, ledger, tmp_path / "runs")
    assert (report.created, report.repaired) == (1, 1)
    assert store.runs[run_id].deleted and len(store.indexed_runs()) == 1


def test_duplicates_from_two_syncs_at_once_are_reduced_to_one(ledger, tmp_path):
    result = add_result(ledger)
    store = FakeStore()
    first = sync(store, ledger, tmp_path / "runs").runs[result["id"]]
    duplicate = create_tree(store, entry_spec(result, tmp_path / "runs"))
    report = sync(store, ledger, tmp_path / "runs")
    assert report.repaired == 1 and report.runs[result["id"]] == first and store.runs[duplicate].deleted


def test_a_run_indexed_without_its_folder_gets_it_when_a_box_that_has_it_syncs(ledger, tmp_path):
    result = add_result(ledger)
    store = FakeStore()
    run_id = sync(store, ledger, tmp_path / "runs").runs[result["id"]]
    assert store.runs[run_id].tags["ledger.files"] == "absent" and not store.children(run_id)
    make_run_dir(tmp_path / "runs")
    report = sync(store, ledger, tmp_path / "runs")
    assert report.updated == 1 and report.runs[result["id"]] == run_id
    assert len(store.children(run_id)) == 8 and "measurements.jsonl" in store.runs[run_id].files
    assert sync(store, ledger, tmp_path / "runs").skipped == 1


def test_other_kinds_are_not_indexed(ledger, tmp_path):
    actions.note(ledger, "a closed door", writer="box-a", git=None)
    store = FakeStore()
    report = sync(store, ledger, tmp_path / "runs")
    assert report.runs == {} and store.runs == {}


# ------------------------------------------------------------------------------ export (no MLflow needed)


def fake_store(root: Path) -> None:
    """The two MLflow tables export rewrites, with absolute artifact paths as a local sync leaves them."""
    artifacts = root / "mlartifacts" / "recipe-ledger"
    (artifacts / "r1" / "artifacts").mkdir(parents=True)
    (artifacts / "r1" / "artifacts" / "plan.json").write_text("{}")
    with sqlite3.connect(root / "mlflow.db") as db:
        db.execute("CREATE TABLE experiments (experiment_id INTEGER, artifact_location TEXT)")
        db.execute("CREATE TABLE runs (run_uuid TEXT, artifact_uri TEXT)")
        db.execute("INSERT INTO experiments VALUES (1, ?)", (str(artifacts),))
        db.execute("INSERT INTO runs VALUES ('r1', ?)", (f"{artifacts}/r1/artifacts",))
        db.execute("INSERT INTO runs VALUES ('r2', 's3://elsewhere/r2')")
    db.close()


def test_export_copies_the_store_with_artifact_paths_relative_to_the_folder(tmp_path):
    repo, dest = tmp_path / "repo", tmp_path / "out"
    repo.mkdir()
    fake_store(repo)
    report = tracking.export_local_store(repo, dest)
    assert (report.runs, report.artifact_files, report.outside) == (2, 1, 1)
    with sqlite3.connect(dest / "mlflow.db") as db:
        uris = dict(db.execute("SELECT run_uuid, artifact_uri FROM runs").fetchall())
        location = db.execute("SELECT artifact_location FROM experiments").fetchone()[0]
    db.close()
    assert uris == {"r1": "mlartifacts/recipe-ledger/r1/artifacts", "r2": "s3://elsewhere/r2"}
    assert location == "mlartifacts/recipe-ledger"
    assert (dest / uris["r1"] / "plan.json").is_file() and (dest / "README.txt").is_file()
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db" in str(report)


def test_export_refuses_a_non_empty_folder_and_a_remote_store(tmp_path):
    fake_store(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(InputError, match="not empty"):
        tracking.export_local_store(tmp_path, tmp_path / "out")
    with pytest.raises(InputError, match="local SQLite"):
        tracking.export_local_store(tmp_path, tmp_path / "out2", "http://mlflow.lab:5000")


def test_a_server_refusing_this_host_gets_a_hint_naming_allowed_hosts():
    message = (
        "API request failed with error code 403 != 200. Response body: 'Invalid Host header - possible DNS"
    )
    report = SyncReport("http://mlflow.lab:5000", "x")
    error = refusal(message, "http://u:p@mlflow.lab:5000", report)
    assert "--allowed-hosts mlflow.lab:5000" in error.hint
    assert refusal("anything else", "http://x", report).hint.startswith("ledger mlflow sync")


@pytest.mark.parametrize(
    ("message", "says", "hint"),
    [
        (
            "API request to endpoint /api/2.0/mlflow/experiments/get-by-name failed with error code 404"
            ' != 200. Response body: \'<?xml version="1.0"?>\n<Error><Code>NoSuchBucket</Code>',
            "not as an MLflow tracking server",
            "check --tracking-uri",
        ),
        (
            "500 Server Error: InvalidAccessKeyId for url: http://x/api/2.0/mlflow-artifacts/x",
            "artifact store",
            "S3",
        ),
        (
            "API request to /api/2.0/mlflow/runs/create failed with error code 500 != 200",
            "failed mid-sync",
            "resumes",
        ),
        (
            "API request to http://h/api/2.0/mlflow/runs/create failed with exception HTTPConnectionPool("
            "host='h', port=1): Max retries exceeded (Caused"
            " by ResponseError('too many 500 error responses'))",
            "failed mid-sync",
            "resumes",
        ),
        (
            "failed with exception ... Failed to establish a new connection",
            "stopped answering",
            "once it is up",
        ),
    ],
)
def test_a_refusal_is_one_line_saying_what_happened_and_what_to_run(message, says, hint):
    report = SyncReport("http://127.0.0.1:5000", "x", created=3)
    error = refusal(message, "http://127.0.0.1:5000", report)
    assert says in error.message and hint in error.hint and "\n" not in error.one_line()
    assert "3 created" in error.message and "the ledger is untouched" in error.message


@pytest.mark.parametrize("uri", ["mlflow.lab:5000", "htp://mlflow.lab", "http://", "localhost"])
def test_what_is_not_a_tracking_uri_is_refused_before_anything_is_contacted(uri):
    with pytest.raises(InputError, match="is not a tracking URI"):
        check_tracking_uri(uri)
    check_tracking_uri("sqlite:///x.db")
    check_tracking_uri("postgresql+psycopg://u@h/db")


def test_a_sync_of_indexed_entries_reads_no_run_folder(ledger, tmp_path, monkeypatch):
    """Syncing a large, already indexed ledger must stay cheap: only the status tags are computed."""
    make_run_dir(tmp_path / "runs")
    add_result(ledger)
    store = FakeStore()
    sync(store, ledger, tmp_path / "runs")

    def refuse(*_args, **_kwargs):
        raise AssertionError("an indexed entry's run folder was read again")

    monkeypatch.setattr(runfolder, "read_records", refuse)  # where with_run_folder looks it up
    monkeypatch.setattr(tree, "stage_redacted", refuse)  # where create_tree / attach_late_files do
    assert sync(store, ledger, tmp_path / "runs").skipped == 1


# ------------------------------------------------------------------------------ status, views, several syncs


def test_a_failure_ends_failed_and_a_retraction_ends_killed_with_a_visible_name(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    make_run_dir(runs_dir)
    result, failure = add_result(ledger), add_failure(ledger)
    store = FakeStore()
    report = sync(store, ledger, runs_dir)
    assert store.runs[report.runs[failure["id"]]].status == "FAILED"
    parent = store.runs[report.runs[result["id"]]]
    assert parent.status == "FINISHED" and parent.name == RUN_ID
    actions.retract(ledger, result["id"], reason="miscalibrated", writer="box-a", git=None)
    sync(store, ledger, runs_dir)
    assert parent.status == "KILLED" and parent.name == RETRACTED_PREFIX + RUN_ID
    assert {store.runs[c].status for c in store.child_run_ids(report.runs[result["id"]])} == {"KILLED"}
    # Indexed after the retraction, from nothing, it looks the same.
    fresh = FakeStore()
    run = fresh.runs[sync(fresh, ledger, runs_dir).runs[result["id"]]]
    assert (run.status, run.name) == ("KILLED", RETRACTED_PREFIX + RUN_ID)


def test_run_folders_are_found_in_evidence_folders_too(ledger, tmp_path):
    make_run_dir(tmp_path / "evidence" / "tiny-study")
    spec = entry_spec(add_result(ledger), run_roots(tmp_path))
    assert spec.run_dir == tmp_path / "evidence" / "tiny-study" / RUN_ID and len(spec.children) == 8


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["vllm", "serve", "/m", "--max-num-seqs", "8", "--enforce-eager"],
            {"max-num-seqs": "8", "enforce-eager": "true"},
        ),
        (["serve", "--kv=fp8", "--tp", "2"], {"kv": "fp8", "tp": "2"}),
        # Read as planning reads it (LaunchCommand): a flag keeps every value it takes, the last
        # occurrence wins.
        (
            ["vllm", "serve", "/m", "--cpu-offload-params", "a", "b", "--tp", "1", "--tp=2"],
            {"cpu-offload-params": "a b", "tp": "2"},
        ),
    ],
)
def test_an_arm_reads_as_flags(argv, expected):
    settings = arm_settings({"argv": argv})
    assert {k.removeprefix("flag."): v for k, v in settings.items() if k.startswith("flag.")} == expected


def test_an_arm_s_command_is_the_words_no_flag_owns():
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--x=1", "stray"]
    settings = arm_settings({"argv": argv, "image": "img", "env": {"A": "1"}})
    assert settings == {
        "image": "img",
        "model_sha256": "-",
        "env.A": "1",
        "flag.m": "sglang.launch_server",
        "flag.model-path": "/m",
        "flag.x": "1",
        "command": "python stray",
    }
    assert arm_settings({"argv": ["--only", "flags"]})["command"] == "-"


def test_only_what_differs_between_arms_becomes_child_params():
    arms = {
        "control": {"argv": ["serve", "--max-num-seqs", "1", "--dtype", "bf16"], "env": {"A": "1"}},
        "lane": {"argv": ["serve", "--dtype", "bf16"], "env": {"A": "2"}},
    }
    assert arm_differences(arms) == {
        "control": {"env.A": "1", "flag.max-num-seqs": "1"},
        "lane": {"env.A": "2", "flag.max-num-seqs": "-"},
    }


def test_the_experiment_carries_a_view_the_printed_link_opens():
    tags = experiment_tags()
    view = json.loads(tags[VIEW_TAG])
    assert "params.`arm`" in view["selectedColumns"] and "tags.`ledger.status`" in view["selectedColumns"]
    url = browse_url("http://u:pw@mlflow.lab:5000", "7")
    assert (
        url
        == "http://mlflow.lab:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=ledger"
    )
    assert browse_url("databricks", "7") is None and browse_url("http://mlflow.lab:5000", "") is None


def test_a_local_store_gets_the_command_that_serves_it_and_the_address_it_serves():
    uri = "sqlite:////home/me/my repo/mlflow.db"
    lines = browse_lines(uri, "3")
    assert lines == [
        "Serve: mlflow ui --backend-store-uri 'sqlite:////home/me/my repo/mlflow.db' --port 5000",
        f"Browse: {LOCAL_UI}/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=ledger",
    ]
    assert ui_command("postgresql://mlflow:pw@db.lab/mlflow") == (
        "mlflow ui --backend-store-uri postgresql://db.lab/mlflow --port 5000"  # no password printed
    )
    assert ui_command("http://mlflow.lab:5000") is None
    assert browse_lines("http://mlflow.lab:5000", "3") == [
        f"Browse: {browse_url('http://mlflow.lab:5000', '3')}"
    ]


def test_the_compare_link_is_mlflow_s_compare_route_with_its_runs_and_experiment():
    url = compare_url("http://mlflow.lab:5000/", "7", ["aa11", "bb22"])
    assert url is not None and url.startswith("http://mlflow.lab:5000/#/compare-runs?")
    # What the UI's compare page reads: the query of the route, JSON lists (it decodes %-escapes).
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url.split("#", 1)[1]).query)
    assert json.loads(query["runs"][0]) == ["aa11", "bb22"] and json.loads(query["experiments"][0]) == ["7"]
    assert query["workflowType"] == ["machine_learning"]
    assert not set('"[] ') & set(url)  # a terminal keeps the link whole
    assert compare_url("sqlite:///x.db", "7", ["aa11"]).startswith(LOCAL_UI + "/#/compare-runs?")
    assert compare_url("databricks", "7", ["aa11"]) is None and compare_url("http://h:5000", "7", []) is None


class SlowStore(FakeStore):
    """Two syncs sharing one store, interleaved: ``before_finish`` runs while a parent is incomplete."""

    def __init__(self):
        super().__init__()
        self.before_finish = None

    def finish(self, run_id, end_ms, status="FINISHED"):
        if self.before_finish and self.runs[run_id].parent is None:
            hook, self.before_finish = self.before_finish, None
            hook()
        super().finish(run_id, end_ms, status)


def test_two_syncs_at_the_same_moment_leave_one_run_per_entry(ledger, tmp_path):
    result = add_result(ledger)
    ledger.refresh()
    entries = ledger.entries()
    store = SlowStore()
    other: list[SyncReport] = []
    # The second sync lists the store while the first one's run is still being built, makes its own.
    store.before_finish = lambda: other.append(
        sync_entries(store, entries, tmp_path / "runs", SyncReport("fake://", "x"), session=stranger())
    )
    mine = sync_entries(store, entries, tmp_path / "runs", SyncReport("fake://", "x"))
    assert other[0].elsewhere == 1 and other[0].created == 0  # a live sync's RUNNING run is left to it
    assert len([r for r in store.indexed_runs() if r.finished]) == 1 and mine.created == 1

    # Neither sees the other's run in time (both listed the store before either made a run): both
    # make one; whichever post-check comes last removes the other, so exactly one survives.
    store2 = SlowStore()
    second: list[SyncReport] = []
    store2.before_finish = lambda: second.append(
        sync_entries(store2, entries, tmp_path / "runs", SyncReport("fake://", "x"), session=stranger(pid=1))
    )
    listings = []

    def listed_early():  # the first two listings (one per sync) see an empty store
        listings.append(1)
        return [] if len(listings) <= 2 else FakeStore.indexed_runs(store2)

    store2.indexed_runs = listed_early
    store2.running_runs = lambda: []  # and each looked for other syncs before the other began
    first = sync_entries(store2, entries, tmp_path / "runs", SyncReport("fake://", "x"))
    survivors = [r for r in FakeStore.indexed_runs(store2) if r.finished]
    assert len(survivors) == 1 and first.runs[result["id"]] == survivors[0].run_id
    assert store2.runs[second[0].runs[result["id"]]].deleted  # the other sync's run, removed by the first


def stranger(pid: int = 0) -> SyncSession:
    """Another box's sync, started just now (its RUNNING runs are work in progress)."""
    here = SyncSession.here()
    return SyncSession("other-box", pid or here.pid, "feedbeef", here.started_ms)


def test_a_sync_that_died_on_this_host_is_recognized_and_another_hosts_is_waited_for(tmp_path):
    here = SyncSession.here()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    def run(tag):
        return IndexedRun("r", "e", False, 0, {SYNC_TAG: tag}, "RUNNING")

    assert here.abandoned(run(f"{here.host} {dead.pid} 00000000 {here.started_ms}"))
    assert not here.abandoned(run(f"{here.host} {here.pid} {here.nonce} {here.started_ms}"))  # its own
    assert here.abandoned(run(f"{here.host} {here.pid} 0badc0de {here.started_ms}"))  # an earlier one here
    assert not here.abandoned(run(f"other-box 1 00000000 {here.started_ms - 60_000}"))
    assert here.abandoned(run(f"other-box 1 00000000 {here.started_ms - STALE_MS - 1}"))
    assert here.abandoned(run(""))


def test_a_sync_into_a_local_store_looks_entries_up_only_once_another_sync_is_seen(ledger, tmp_path):
    for n in range(30):
        ledger.append("result", {"subject": f"lane-{n}", "metrics": {"x": 1.0}}, writer="box-a", git=None)
    ledger.refresh()
    alone = FakeStore()
    sync_entries(alone, ledger.entries(), tmp_path / "runs", SyncReport("fake://", "x"))
    assert alone.lookups == 30  # nobody else at work: no lookup before making a run, one in the post-check

    shared = FakeStore()
    busy = create_tree(shared, entry_spec(ledger.entries()[0], tmp_path / "runs"), stranger())
    shared.runs[busy].status = "RUNNING"  # another box's sync, building a run right now
    report = sync_entries(shared, ledger.entries(), tmp_path / "runs", SyncReport("fake://", "x"))
    assert shared.lookups >= 25 + 29 and report.created == 29 and report.elsewhere == 1


# ------------------------------------------------------------------------------ links: calibrations, notes


def add_noise(ledger: Ledger, metric: str, cv: float, instrument: str = "probe") -> dict:
    """A calibration of ``metric`` (its noise at point 4), as `ledger run` records one per bar."""
    payload = {
        "schema_version": 2,
        "instrument": instrument,
        "metric": metric,
        "method": "rl-verdict/1",
        "fingerprint": "sha256:" + metric[0] * 64,
        "text": f"A/A calibration: p4 cv {cv * 100:.2f}%",
        "points": {
            "4": {"n": 3, "mean": 100.0, "sigma": cv * 100, "cv": cv, "max_spread": cv, "samples": []}
        },
        "conditions": {"box": "cpu-only", "experiment": "wiring"},
        "origin": {"how": "measured", "source": RUN_ID},
    }
    return ledger.append("calibration", payload, writer="box-a", git=None)


def add_two_bar_result(ledger: Ledger) -> tuple[dict, dict, dict]:
    """A result deciding on two metrics, each with its own calibration: the record names the first
    (``experiment.calibration``), the second is a ref (``evidence``), as `ledger run` writes them."""
    throughput, latency = (
        add_noise(ledger, "output_tps_total", 0.0695),
        add_noise(ledger, "ttft_ms_p50", 0.152),
    )
    payload = result_payload()
    payload["experiment"]["calibration"] = throughput["id"]
    payload["experiment"]["bars"] = [
        bar(),
        {**bar(), "metric": "ttft_ms_p50", "direction": "lower", "outcome": "no-change"},
    ]
    result = ledger.append("result", payload, writer="box-a", refs=[("evidence", latency["id"])], git=GIT)
    return result, throughput, latency


def test_a_result_links_every_calibration_its_verdicts_used_with_its_noise(ledger, tmp_path):
    result, throughput, latency = add_two_bar_result(ledger)
    store = FakeStore()
    report = sync(store, ledger, tmp_path / "runs")
    tags = store.runs[report.runs[result["id"]]].tags
    ids = {throughput["id"][:12], latency["id"][:12]}
    assert set(tags[CALIBRATIONS_TAG].split(", ")) == ids  # both, not only experiment.calibration
    assert tags["calibration.probe.output_tps_total"] == f"{throughput['id'][:12]}: c4 cv 6.95% (n 3)"
    assert tags["calibration.probe.ttft_ms_p50"] == f"{latency['id'][:12]}: c4 cv 15.20% (n 3)"
    # The one behind each verdict, with its noise at the bar's point.
    assert tags["verdict.fast.output_tps_total.c4.calibration"] == f"{throughput['id'][:12]} (cv 6.95%)"
    assert tags["verdict.fast.ttft_ms_p50.c4.calibration"] == f"{latency['id'][:12]} (cv 15.20%)"
    # And back: each calibration's run names the results that used it.
    for calibration in (throughput, latency):
        assert store.runs[report.runs[calibration["id"]]].tags[USED_BY_TAG] == result["id"][:12]
    assert sync(store, ledger, tmp_path / "runs").skipped == 3  # links are stable: nothing rewritten


def test_a_bar_is_linked_only_to_a_calibration_it_names_unambiguously():
    def calibration(instrument: str, metric: str) -> dict:
        return {"id": instrument, "payload": {"instrument": instrument, "metric": metric}}

    bench, replay = calibration("bench", "output_tps_total"), calibration("replay", "output_tps_total")
    named = {"metric": "replay/output_tps_total"}  # a record of several instruments names the instrument
    assert links.bar_calibration(named, ["bench", "replay"], [bench, replay]) is replay
    plain = {"metric": "output_tps_total"}
    assert links.bar_calibration(plain, ["bench"], [bench]) is bench  # the only instrument
    assert links.bar_calibration(plain, ["bench", "replay"], [bench, replay]) is None  # which one? not said
    assert links.bar_calibration({"metric": "ttft_ms_p50"}, ["bench"], [bench]) is None


def test_a_note_written_after_the_sync_updates_the_runs_it_refers_to_on_the_next(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    make_run_dir(runs_dir)
    result, throughput, _latency = add_two_bar_result(ledger)
    store = FakeStore()
    first = sync(store, ledger, runs_dir)
    run = store.runs[first.runs[result["id"]]]
    assert NOTES_TAG not in run.tags
    text = "Correction: the control ran with a cold page cache; " + "the effect is overstated. " * 40
    note = actions.note(ledger, text, refs=[result["id"], throughput["id"]], writer="box-a", git=None)
    second = sync(store, ledger, runs_dir)
    assert (second.created, second.updated, second.skipped) == (0, 2, 1)  # the result and the calibration
    short = note["id"][:12]
    for entry in (result, throughput):
        tags = store.runs[first.runs[entry["id"]]].tags
        assert tags[NOTES_TAG] == short
        said = tags[f"ledger.note.{short}"]
        assert said.startswith("Correction: the control ran with a cold page cache;")
        assert len(said) <= NOTE_CHARS and said.endswith("...[truncated]")
        assert f"`{short}` (box-a): Correction" in tags["mlflow.note.content"]
    assert all(NOTES_TAG not in store.runs[c].tags for c in store.child_run_ids(first.runs[result["id"]]))
    assert sync(store, ledger, runs_dir).skipped == 3
    # A retracted note stays listed, marked; a retracted calibration is marked on the results that used it.
    actions.retract(ledger, note["id"], reason="wrong run", writer="box-a", git=None)
    actions.retract(ledger, throughput["id"], reason="a noisy neighbour", writer="box-a", git=None)
    third = sync(store, ledger, runs_dir)
    assert third.updated == 2
    tags = run.tags
    assert tags[f"ledger.note.{short}"].startswith("[retracted] Correction")
    assert tags["calibration.probe.output_tps_total"].startswith(f"{throughput['id'][:12]} (retracted): ")
    assert tags["verdict.fast.output_tps_total.c4.calibration"].startswith(
        f"{throughput['id'][:12]} (retracted) "
    )
    assert tags[STATUS_TAG] == "active"  # the result itself stands


def test_a_status_change_alone_rewrites_the_children_a_note_does_not(ledger, tmp_path):
    runs_dir = tmp_path / "runs"
    make_run_dir(runs_dir)
    result = add_result(ledger)
    store = CountingStore()
    run_id = sync(store, ledger, runs_dir).runs[result["id"]]
    actions.note(ledger, "seen on box-b too", refs=[result["id"]], writer="box-a", git=None)
    store.tagged.clear()
    sync(store, ledger, runs_dir)
    assert store.tagged == [run_id]  # one call, on the parent
    assert set(store.runs[run_id].tags) >= {NOTES_TAG, STATUS_TAG}


class CountingStore(FakeStore):
    def __init__(self):
        super().__init__()
        self.tagged: list[str] = []

    def set_tags(self, run_id, tags):
        self.tagged.append(run_id)
        super().set_tags(run_id, tags)


def test_a_note_s_text_is_redacted_and_on_one_line(ledger, tmp_path):
    result = add_result(ledger)
    actions.note(ledger, f"token\n{SECRET} leaked\tin the log", refs=[result["id"]], writer="box-a", git=None)
    store = FakeStore()
    tags = store.runs[sync(store, ledger, tmp_path / "runs").runs[result["id"]]].tags
    (said,) = [v for k, v in tags.items() if k.startswith("ledger.note.")]
    assert SECRET not in said and "\n" not in said and said.startswith("token ")
    assert SECRET not in tags["mlflow.note.content"]


def test_the_runs_table_view_shows_the_links():
    columns = json.loads(experiment_tags()[VIEW_TAG])["selectedColumns"]
    assert f"tags.`{CALIBRATIONS_TAG}`" in columns and f"tags.`{NOTES_TAG}`" in columns


# ------------------------------------------------------------------- bars as columns, the comparison


def test_bars_are_columns_by_position_so_two_experiments_share_them():
    ours = [bar(4, "win"), {**bar(1, "regression"), "candidate": "lane", "metric": "ttft_ms_p50"}]
    theirs = [{**bar(8, "no-change"), "candidate": "ngram", "metric": "prefill_tps"}]
    tags, metrics = compare.bar_columns(ours)
    assert tags["bar1"] == "fast vs control: output_tps_total (tok/s) at c4" and tags["bar1.verdict"] == "win"
    assert tags["bar2"] == "lane vs control: ttft_ms_p50 (ms) at c1" and tags["bar2.verdict"] == "regression"
    assert metrics["bar2.effect_pct"] == pytest.approx(30.0) and metrics["bar2.mde_pct"] == pytest.approx(1.0)
    their_tags, their_metrics = compare.bar_columns(theirs)
    assert set(their_metrics) == {f"bar1.{m}" for m in compare.BAR_METRICS}  # the same columns as ours
    assert set(their_metrics) < set(metrics) and set(their_tags) < set(tags)
    partial = compare.bar_columns([{**bar(), "ci_low": None, "value": float("nan")}])[1]
    assert "bar1.ci_low_pct" not in partial and "bar1.candidate" not in partial  # not a number: no cell


def test_a_result_gets_a_summary_child_per_compared_arm_and_point():
    payload = result_payload()
    record = payload["experiment"]
    record["bars"] = [bar(4), bar(1)]
    summary = {"control.c4.output_tps_total": 400.0, "fast.c4.output_tps_total": 520.0}
    summary |= {"fast.c4.ttft_ms_p50": 12.5, "control.c1.output_tps_total": 100.0, "fast.c9.x": 1.0}
    parent = RunSpec("p", {ENTRY_TAG: "e" * 64, "ledger.kind": "result", "box": "cpu-only"}, {})
    specs, opened = compare.summary_specs(record, summary, parent)
    assert [(s.params["arm"], s.params["point"]) for s in specs] == [
        ("control", "4"),
        ("fast", "4"),
        ("control", "1"),
        ("fast", "1"),
    ]
    assert specs[1].metrics == {"output_tps_total": 520.0, "ttft_ms_p50": 12.5}  # plain names
    assert specs[2].metrics == {"output_tps_total": 100.0} and specs[3].metrics == {}
    assert specs[1].params["repeat"] == "median" and specs[1].tags["ledger.role"] == "summary"
    assert specs[1].params["arm_fingerprint"] == FP_FAST and specs[1].params["flag.fast"] == "true"
    assert specs[0].params["flag.fast"] == "-" and specs[0].tags["box"] == "cpu-only"
    assert opened == (0, 1)  # the first bar's point: control, then its candidate


def test_sync_links_each_new_result_to_the_comparison_of_its_control_and_candidate(ledger, tmp_path):
    result = add_result(ledger)
    store = FakeStore()
    report = sync(store, ledger, tmp_path / "runs")
    run_id = report.runs[result["id"]]
    summaries = store.children(run_id, "summary")
    assert [store.runs[s].name for s in summaries] == ["control c4 (median)", "fast c4 (median)"]
    assert store.runs[summaries[1]].spec.metrics == {"output_tps_total": 520.0}
    assert store.runs[summaries[1]].status == "FINISHED"
    link = store.runs[run_id].tags[COMPARE_TAG]
    assert link == compare_url("http://mlflow.lab:5000", "7", summaries)
    assert f"Compare {RUN_ID}: {link}" in str(report).splitlines()
    assert str(report).splitlines()[1].startswith("Browse: http://mlflow.lab:5000/#/experiments/7/runs?")
    again = sync(store, ledger, tmp_path / "runs")
    assert again.skipped == 1 and "Compare " not in str(again)  # printed once, when the result is new

    make_run_dir(tmp_path / "runs")  # the run folder arrives: the children are made again
    sync(store, ledger, tmp_path / "runs")
    fresh = store.children(run_id, "summary")
    assert len(fresh) == 2 and not set(fresh) & set(summaries)
    assert store.runs[run_id].tags[COMPARE_TAG] == compare_url("http://mlflow.lab:5000", "7", fresh)


def test_a_sync_prints_a_few_comparison_links_and_says_where_the_rest_are():
    report = SyncReport("http://h:5000", "x", experiment_id="1")
    for n in range(sync_module.COMPARES_PRINTED + 2):
        entry = {"id": f"entry{n}", "ts": f"2026-12-0{n + 1}T00:00:00Z"}
        report.compare_link(entry, f"run{n}")([f"a{n}", f"b{n}"])
    lines = str(report).splitlines()
    printed = [line.split(":")[0] for line in lines if line.startswith("Compare ")]
    # the newest first: a first sync indexes the whole ledger, the run just made is the one wanted
    newest = range(sync_module.COMPARES_PRINTED + 1, 1, -1)
    assert printed == [f"Compare run{n}" for n in newest]
    assert lines[-1] == f"(and 2 more new results: their tag {COMPARE_TAG} has the link)"


def test_every_metric_column_of_the_view_is_filled_on_a_parent_or_a_child(ledger, tmp_path):
    make_run_dir(tmp_path / "runs")
    spec = entry_spec(add_result(ledger), tmp_path / "runs")
    columns = json.loads(experiment_tags()[VIEW_TAG])["selectedColumns"]
    metrics = [c.split("`")[1] for c in columns if c.startswith("metrics.")]
    on_parent = [m for m in metrics if m in spec.metrics]
    assert {"bar1.effect_pct", "bar1.ci_low_pct", "bar1.ci_high_pct", "bar1.candidate"} <= set(on_parent)
    on_children = {m for child in (*spec.children, *spec.summaries) for m in child.metrics}
    assert "output_tps_total" in on_children
    # every bar column on the parent; the arms' columns are filled where the result measured them
    assert {m for m in metrics if m.startswith("bar")} <= set(spec.metrics)
    assert f"tags.`{compare.bar_name(1)}`" in columns and "tags.`verdict`" in columns


def test_a_summary_names_its_medians_as_the_measurement_children_do():
    medians = {"bench/output_tps_total": 5.0, "replay/output_tps_total": 6.0, "bench/ttft_ms_p50": 7.0}
    # The run's first instrument keeps the plain name; the second one's colliding name gets its prefix.
    assert compare.child_names(medians, ["replay", "bench"]) == {
        "output_tps_total": 6.0,
        "bench.output_tps_total": 5.0,
        "ttft_ms_p50": 7.0,
    }
    assert compare.child_names({"output_tps_total": 1.0}) == {"output_tps_total": 1.0}
