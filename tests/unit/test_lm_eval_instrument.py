"""The task-accuracy instrument (kind ``lm_eval``) without running lm-eval: its options, the task
folder's checks (a malformed or unrunnable task file refused at file:line, exit 2), the command it
builds, and the reading of lm-eval's output on files lm-eval 0.4.13 really wrote
(tests/fixtures/lm_eval/README.md). tests/integration/test_lm_eval_real.py runs lm-eval itself."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from recipe_ledger import instruments, metrics, quality
from recipe_ledger.cli import main
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import lm_eval
from recipe_ledger.instruments.base import InstrumentError, MeasureContext
from recipe_ledger.instruments.lm_eval_tasks import TaskFolder, read_task_folder
from recipe_ledger.spec.yamlfile import LocalTag, load_yaml_11

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "evals" / "tasks"
RECORDED = REPO / "tests" / "fixtures" / "lm_eval" / "recorded"
RIGHT = {"rl_arith/0", "rl_toolcall_format/0", "rl_reasoning_budget/0", "rl_reasoning_budget/1"}

TASK = """\
task: mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def ctx(tmp_path: Path, point: int = 4, model: str | None = "tiny") -> MeasureContext:
    return MeasureContext("control", point, 1, 1001, tmp_path / "raw", "http://127.0.0.1:8000", model)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A user's task folder with one good task, ``mine`` (two documents)."""
    path = tmp_path / "my-tasks"
    path.mkdir()
    (path / "mine.yaml").write_text(TASK)
    (path / "data.jsonl").write_text('{"q": "1+1=", "a": "2"}\n{"q": "2+2=", "a": "4"}\n')
    return path


def refused(folder: Path, pattern: str) -> InputError:
    with pytest.raises(InputError, match=pattern) as caught:
        read_task_folder(folder, "my-tasks")
    assert caught.value.exit_code == 2
    return caught.value


# --- options ---------------------------------------------------------------------------------------


def test_the_defaults_are_the_shipped_three_tasks_of_evals_tasks_over_completions():
    options = lm_eval.parse_options({})
    assert options.tasks == ["rl_arith", "rl_toolcall_format", "rl_reasoning_budget"]
    assert options.task_dir == "evals/tasks" and options.model == "local-completions"
    assert options.limit is None and options.num_concurrent is None and options.max_gen_toks is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"task": ["x"]}, r"options\.task: Extra inputs are not permitted"),
        ({"tasks": []}, r"options\.tasks: List should have at least 1 item"),
        ({"tasks": ["a", "a"]}, r"options\.tasks: listed twice: a"),
        ({"limit": 0}, r"options\.limit: Input should be greater than or equal to 1"),
        ({"model": "hf"}, r"options\.model: Input should be 'local-completions' or 'local-chat-completions'"),
        ({"timeout_s": "60"}, r"options\.timeout_s: Input should be a valid number"),
    ],
)
def test_bad_options_are_one_line_naming_the_field(options, message):
    with pytest.raises(InputError, match=message):
        lm_eval.parse_options(options, "acc")


def test_the_kind_is_registered_as_a_quality_instrument_on_eval_accuracy():
    kind = instruments.get("lm_eval")
    assert kind is lm_eval.INSTRUMENT and kind.client == "lm-evaluation-harness"
    assert kind.item_metrics == ("eval_accuracy",) and kind.measures_quality


# --- the task folder ------------------------------------------------------------------------------


def test_the_shipped_folder_holds_three_generate_until_tasks_and_their_item_metrics():
    read = read_task_folder(SHIPPED, "evals/tasks")
    assert sorted(read.tasks) == ["rl_arith", "rl_reasoning_budget", "rl_toolcall_format"]
    keys = {name: (task.result_key, task.docs) for name, task in read.tasks.items()}
    assert keys == {
        "rl_arith": ("exact_match,number", 50),
        "rl_toolcall_format": ("call_correct,none", 20),
        "rl_reasoning_budget": ("answered_correctly,none", 20),
    }


def test_a_user_folder_with_one_task_reads(folder):
    read = read_task_folder(folder, "my-tasks")
    assert list(read.tasks) == ["mine"] and read.tasks["mine"].docs == 2


def test_a_malformed_task_file_is_refused_at_its_file_and_line(folder):
    (folder / "broken.yaml").write_text("task: broken\ndataset_path: json\n  dataset_kwargs: [\n")
    error = refused(folder, "malformed YAML")
    assert error.where == "my-tasks/broken.yaml:3"


def test_a_malformed_task_file_in_the_folder_stops_ledger_run_plan_with_exit_2(tmp_path, folder):
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    shutil.copytree(folder, root / "my-tasks")
    (root / "my-tasks" / "mine.yaml").write_text(TASK.replace("test_split: test", "test_split: [test"))
    server = {"argv": [sys.executable, "-c", "pass"]}
    spec = {
        "name": "accuracy",
        "hypothesis": "a task file is checked before any launch",
        "box": "cpu-only",
        "engine": "none",
        "server": {"launcher": "process", "port": 18997},
        "control": server,
        "candidates": {"other": server},
        "instruments": [
            {"name": "acc", "kind": "lm_eval", "options": {"tasks": ["mine"], "task_dir": "my-tasks"}}
        ],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "eval_accuracy", "point": 1, "margin": 0.05}],
    }
    path = root / "accuracy.yaml"
    path.write_text(json.dumps(spec))
    result = CliRunner().invoke(main, ["run", "--plan", str(path), "--root", str(root)])
    assert result.exit_code == 2, result.output
    # libyaml marks where it found the problem: the line after the open bracket
    assert "error: my-tasks/mine.yaml:7: malformed YAML" in result.output and "Traceback" not in result.output


def test_a_task_named_that_the_folder_lacks_is_refused_naming_what_it_has(folder, tmp_path):
    options = lm_eval.parse_options({"tasks": ["mine", "theirs"], "task_dir": "my-tasks"})
    with pytest.raises(InputError, match=r"no task 'theirs' in the task folder \(it has: mine\)"):
        lm_eval.select_tasks(options, tmp_path)


def test_a_task_dir_outside_the_repository_is_refused(tmp_path):
    options = lm_eval.parse_options({"task_dir": "../elsewhere"})
    with pytest.raises(InputError, match="cannot name a file inside|outside"):
        lm_eval.select_tasks(options, tmp_path / "repo")


@pytest.mark.parametrize(
    ("edit", "pattern", "line"),
    [
        (("output_type: generate_until", "output_type: multiple_choice"), "only generate_until tasks", 7),
        (("dataset_path: json", "dataset_path: openai/gsm8k"), "not a local file builder", 2),
        (
            ("test: data.jsonl", "test: missing.jsonl"),
            "data file 'missing.jsonl' is not in the task folder",
            4,
        ),
        (("test_split: test", "test_split: validation"), "test_split 'validation' is not a split", 6),
        (("metric: exact_match", "metric: bleu"), "metric 'bleu' without process_results", 10),
        (("aggregation: mean", "aggregation: median"), "aggregates by 'median'", 12),
        (("task: mine", "task: has space"), "letters, digits", 1),
    ],
)
def test_a_task_lm_eval_could_not_run_offline_is_refused_at_the_key(folder, edit, pattern, line):
    (folder / "mine.yaml").write_text(TASK.replace(*edit))
    assert refused(folder, pattern).where == f"my-tasks/mine.yaml:{line}"


def test_a_function_tag_must_name_a_module_beside_the_task_file(folder):
    (folder / "mine.yaml").write_text(TASK + "process_results: !function judges.score\n")
    assert refused(folder, r"no judges\.py beside the task file").where == "my-tasks/mine.yaml:14"
    (folder / "judges.py").write_text("def score(doc, results):\n    return {'ok': 1.0}\n")
    (folder / "mine.yaml").write_text(
        TASK.replace("exact_match", "ok") + "process_results: !function judges.score\n"
    )
    assert read_task_folder(folder, "my-tasks").tasks["mine"].result_key == "ok,none"


def test_a_task_defined_twice_is_refused_naming_both_files(folder):
    (folder / "copy.yaml").write_text(TASK)
    error = refused(folder, r"task 'mine' is defined twice \(first at my-tasks/copy.yaml:1\)")
    assert error.where == "my-tasks/mine.yaml:1"


def test_includes_merge_under_the_task_s_own_keys_and_a_missing_one_is_refused(folder):
    base, own = TASK.split("output_type: generate_until\n")
    (folder / "_base.yaml").write_text(base.replace("task: mine\n", ""))
    (folder / "mine.yaml").write_text("include: _base.yaml\ntask: mine\noutput_type: generate_until\n" + own)
    task = read_task_folder(folder, "my-tasks").tasks["mine"]
    assert task.config["dataset_path"] == "json" and task.docs == 2
    (folder / "mine.yaml").write_text("include: _nowhere.yaml\ntask: mine\n")
    assert refused(folder, "include: no such file").where == "my-tasks/mine.yaml:1"


def test_the_folder_hash_changes_with_any_file_and_not_with_the_order_they_were_read(folder):
    before = read_task_folder(folder, "my-tasks").sha256()
    assert read_task_folder(folder, "my-tasks").sha256() == before
    (folder / "data.jsonl").write_text('{"q": "1+1=", "a": "3"}\n{"q": "2+2=", "a": "4"}\n')
    assert read_task_folder(folder, "my-tasks").sha256() != before


def test_lm_eval_s_yaml_dialect_is_yaml_1_1_with_function_tags_kept(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("flag: yes\nprocess_results: !function utils.score\n")
    data = load_yaml_11(path).data
    assert data == {"flag": True, "process_results": LocalTag("!function", "utils.score", 2)}


# --- the command ----------------------------------------------------------------------------------


def selected(tmp_path: Path) -> lm_eval.Selected:
    return lm_eval.select_tasks(lm_eval.parse_options({}), REPO)


def test_the_command_asks_the_server_in_text_with_the_point_s_concurrency_and_only_the_task_folder(tmp_path):
    client = lm_eval.Client(Path("/venv/bin/python"), REPO / "scripts" / "lm_eval_local.py")
    options = lm_eval.parse_options({"limit": 3})
    argv = lm_eval.build_argv(client, options, ctx(tmp_path), selected(tmp_path), tmp_path / "out")
    assert argv[:4] == ["/venv/bin/python", str(REPO / "scripts" / "lm_eval_local.py"), "run", "--model"]
    model_args = argv[argv.index("--model_args") + 1 : argv.index("--tasks")]
    assert model_args[:3] == [
        'base_url="http://127.0.0.1:8000/v1/completions"',
        'model="tiny"',
        "num_concurrent=4",
    ]
    assert {"tokenized_requests=False", "tokenizer_backend=none", "seed=1001"} <= set(model_args)
    assert argv[argv.index("--tasks") + 1 : argv.index("--include_path")] == list(lm_eval.SHIPPED_TASKS)
    assert argv[argv.index("--include_path") + 1] == str(SHIPPED)
    assert argv[argv.index("--limit") + 1] == "3" and "--log_samples" in argv
    assert "--apply_chat_template" not in argv and "--gen_kwargs" not in argv


def test_chat_completions_apply_the_server_s_template_and_the_options_override_budget_and_concurrency(
    tmp_path,
):
    client = lm_eval.Client(Path("/venv/bin/python"), Path("/repo/scripts/lm_eval_local.py"))
    options = lm_eval.parse_options(
        {"model": "local-chat-completions", "num_concurrent": 2, "max_gen_toks": 9}
    )
    argv = lm_eval.build_argv(client, options, ctx(tmp_path, model=None), selected(tmp_path), tmp_path / "o")
    assert 'base_url="http://127.0.0.1:8000/v1/chat/completions"' in argv and "num_concurrent=2" in argv
    assert not any(arg.startswith("model=") for arg in argv)  # no served name: lm-eval sends none
    assert argv[-3:] == ["--gen_kwargs", "max_gen_toks=9", "--apply_chat_template"]


def test_the_client_runs_offline_without_tokens_and_past_any_proxy(tmp_path):
    env = {"HF_TOKEN": "hf_x", "PATH": "/bin", "NO_PROXY": "corp.example"}
    out = lm_eval.lm_eval_env(env, "http://10.1.2.3:8000", tmp_path)
    assert "HF_TOKEN" not in out and out["PATH"] == "/bin" and out["HF_HOME"] == str(tmp_path)
    assert out["HF_HUB_OFFLINE"] == out["HF_DATASETS_OFFLINE"] == "1"
    assert (
        out["NO_PROXY"].split(",")[:2] == ["corp.example", "10.1.2.3"] and out["no_proxy"] == out["NO_PROXY"]
    )


def test_the_time_bound_counts_documents_retries_and_concurrency(tmp_path):
    tasks = selected(tmp_path).tasks  # 50 + 20 + 20 documents
    options = lm_eval.parse_options({"timeout_s": 10.0, "num_concurrent": 10})
    assert lm_eval.time_bound(options, ctx(tmp_path), tasks) == lm_eval.STARTUP_S + 9 * 3 * 20.0
    limited = lm_eval.parse_options({"timeout_s": 10.0, "num_concurrent": 10, "limit": 5})
    assert lm_eval.time_bound(limited, ctx(tmp_path), tasks) == lm_eval.STARTUP_S + 2 * 3 * 20.0


def test_a_missing_venv_is_refused_with_the_set_up_command(tmp_path):
    client = lm_eval.find_client(tmp_path)
    with pytest.raises(InputError, match=r"not installed .*next: scripts/setup_eval_venv.sh"):
        lm_eval.require_client(client)


# --- lm-eval's output, as it wrote it -------------------------------------------------------------


def recorded_output(tmp_path: Path) -> tuple[Path, lm_eval.Output]:
    output = tmp_path / "control-p1-r1.lm_eval"
    shutil.copytree(RECORDED, output)
    return output, lm_eval.output_files(output, selected(tmp_path).tasks, tmp_path / "log")


def read_outcome(files: lm_eval.Output, tmp_path: Path) -> lm_eval.Outcome:
    samples = {task: lm_eval.read_samples(path) for task, path in files.samples.items()}
    where = {"results": str(files.results), **{task: str(path) for task, path in files.samples.items()}}
    return lm_eval.outcome(selected(tmp_path).tasks, lm_eval.read_results(files.results), samples, where)


def test_recorded_output_gives_an_item_per_document_and_task_accuracies(tmp_path):
    _, files = recorded_output(tmp_path)
    measured = read_outcome(files, tmp_path)
    items = measured.items["eval_accuracy"]
    assert len(items) == 9 and {item for item, value in items.items() if value == 1.0} == RIGHT
    assert measured.metrics["rl_arith_accuracy"] == pytest.approx(1 / 3)
    assert measured.metrics["rl_reasoning_budget_accuracy"] == pytest.approx(2 / 3)
    assert measured.metrics["eval_accuracy"] == pytest.approx(4 / 9) and measured.metrics["eval_items"] == 9
    low, high = quality.wilson_interval(4, 9)
    assert (measured.metrics["eval_accuracy_low"], measured.metrics["eval_accuracy_high"]) == (low, high)
    assert measured.facts["task rl_arith"] == "exact_match,number: 1/3 = 0.333 (Wilson 95%: 0.061-0.792)"


def test_samples_that_disagree_with_the_results_fail_the_point(tmp_path):
    _, files = recorded_output(tmp_path)
    path = files.samples["rl_arith"]
    lines = path.read_text().splitlines()
    first = json.loads(lines[0]) | {"exact_match": 0.0}
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(InstrumentError, match=r"rl_arith: results say exact_match,number = 0\.333"):
        read_outcome(files, tmp_path)


def test_a_score_that_is_no_outcome_in_0_1_fails_the_point_naming_the_item(tmp_path):
    _, files = recorded_output(tmp_path)
    path = files.samples["rl_toolcall_format"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([json.dumps(json.loads(lines[0]) | {"call_correct": 2.5}), *lines[1:]]))
    with pytest.raises(InstrumentError, match=r"rl_toolcall_format/0: call_correct is 2\.5"):
        read_outcome(files, tmp_path)


def test_a_torn_samples_line_fails_at_its_file_and_line(tmp_path):
    _, files = recorded_output(tmp_path)
    path = files.samples["rl_arith"]
    path.write_text(path.read_text() + '{"doc_id": 3, "exac')
    with pytest.raises(InstrumentError) as caught:
        lm_eval.read_samples(path)
    assert caught.value.where == f"{path}:4"


def test_no_results_file_or_a_missing_samples_file_fails_the_point_with_the_log_tail(tmp_path):
    output, files = recorded_output(tmp_path)
    log = tmp_path / "client.log"
    log.write_text("WARNING  Could not save results aggregated\n")
    files.samples["rl_arith"].unlink()
    with pytest.raises(InstrumentError, match="left no samples for rl_arith") as caught:
        lm_eval.output_files(output, selected(tmp_path).tasks, log)
    assert "Could not save" in caught.value.output_tail
    files.results.unlink()
    with pytest.raises(InstrumentError, match="lm_eval exited 0 but left no results file"):
        lm_eval.output_files(output, selected(tmp_path).tasks, log)


# --- the shipped judges (evals/tasks/rl_judges.py, run by lm-eval in its venv) -----------------------


@pytest.fixture(scope="module")
def judges() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rl_judges", SHIPPED / "rl_judges.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        (' {"name": "set_timer", "arguments": {"minutes": 10}}', True),
        ('Sure: {"name": "set_timer", "arguments": {"minutes": 10.0}} done', True),
        (' {"name": "set_timer", "arguments": {"minutes": 10, "label": "x"}}', False),
        (' {"name": "get_weather", "arguments": {"minutes": 10}}', False),
        (" set_timer(minutes=10)", False),
        ("", False),
    ],
)
def test_a_tool_call_is_right_only_with_the_right_name_and_exactly_the_arguments(judges, answer, right):
    doc = {"name": "set_timer", "arguments": {"minutes": 10}}
    assert judges.tool_call(doc, [answer]) == {"call_correct": 1.0 if right else 0.0}


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        (" Max.", True),
        ("<think>Tom > Sue > Max</think> Max", True),
        ("<think>Tom is older than Sue, so the youngest", False),  # the trace ate the budget
        ("", False),
        ("LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER", False),  # lm-eval's stand-in for a null content
        (" Maxine", False),
    ],
)
def test_a_budget_answer_must_be_left_after_the_reasoning_and_hold_the_answer(judges, answer, right):
    assert judges.budget_answer({"answer": "Max"}, [answer]) == {"answered_correctly": 1.0 if right else 0.0}


# --- the metric table and the interval ------------------------------------------------------------


def test_the_metric_table_knows_the_accuracy_and_describes_a_task_s_by_its_suffix():
    assert metrics.lookup("eval_accuracy").direction == "higher" and metrics.lookup("eval_accuracy").known
    task = metrics.lookup("rl_arith_accuracy")
    assert (task.unit, task.direction, task.known) == ("share", "higher", False)
    assert metrics.lookup("eval_accuracy_low").direction is None


def test_the_wilson_interval_matches_its_textbook_values_and_closes_at_the_ends():
    low, high = quality.wilson_interval(12, 50)
    assert (round(low, 4), round(high, 4)) == (0.1430, 0.3741)
    assert quality.wilson_interval(0, 20)[0] == 0.0 and quality.wilson_interval(20, 20)[1] == 1.0
    with pytest.raises(ValueError):
        quality.wilson_interval(0, 0)


def test_the_folder_lists_its_files_sorted_for_its_hash(folder):
    read = read_task_folder(folder, "my-tasks")
    assert isinstance(read, TaskFolder) and [p.name for p in read.files] == ["data.jsonl", "mine.yaml"]


def test_a_failed_run_is_explained_by_its_traceback_s_exception_not_a_progress_bar():
    log = (
        "Requesting API:   0%|          | 0/1 [00:00<?, ?it/s]\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "    raise_for_status()\n"
        "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error'\n"
        "Requesting API:   0%|          | 0/1 [00:02<?, ?it/s]\n"
    )
    assert (
        lm_eval.last_line(log)
        == "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error'"
    )
    assert lm_eval.last_line("loading\nRequesting API: 100%| 5/5 [00:00, 9it/s]\n") == "loading"
    assert lm_eval.last_line("") == "no output"
