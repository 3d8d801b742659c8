"""The answer-agreement instrument (kind ``agreement``) against the stand-in server's scripted
/v1/completions (tests/helpers/fake_server.py ``--completions``, run in this process): the request,
the reference and the comparison with it, the raw file, concurrency, every way a point fails, the
prompt file's checks and the refusals of an arm before launch."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from recipe_ledger import engines, instruments
from recipe_ledger.engines.base import Engine
from recipe_ledger.errors import InputError
from recipe_ledger.experiment.spec import Instrument
from recipe_ledger.instruments import agreement
from recipe_ledger.instruments.agreement_compare import top_k_kl
from recipe_ledger.instruments.base import InstrumentError, MeasureContext, sha256_file
from recipe_ledger.pipeline.plan import check_workload_instruments
from recipe_ledger.recipes.flags import LaunchCommand

from helpers import fake_server

REPO = Path(__file__).resolve().parents[2]
PROMPTS = ["The capital of France is", "2 + 2 = #d", "def add(a, b):\n    return", "Once upon a time #d"]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that timed out closed its end: the late answer has nowhere to go


@contextmanager
def fake_completions(*flags: str) -> Iterator[str]:
    """The stand-in's /v1/completions on a free port, served from a thread of this process."""
    options = fake_server.parse_args(["--port", "0", "--completions", *flags])
    server = QuietServer(("127.0.0.1", 0), fake_server.make_handler(options, time.monotonic()))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def received(base_url: str) -> dict:
    with _NO_PROXY.open(f"{base_url}/fake/completions", timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    return tmp_path


def context(repo: Path, base_url: str, arm: str = "control", point: int = 1) -> MeasureContext:
    out = repo / "raw"
    return MeasureContext(arm, point, 1, 1001, out, base_url, "tiny", reference=f"control-p{point}-r1")


OPTIONS = {"prompts": "prompts.jsonl", "max_tokens": 8, "top_logprobs": 3}


# --- measuring ------------------------------------------------------------------------------------


def test_the_reference_agrees_with_itself_and_an_a_a_measurement_agrees_prompt_by_prompt(repo):
    with fake_completions() as url:
        first = agreement.measure(OPTIONS, context(repo, url), repo=repo)
        second = agreement.measure(OPTIONS, context(repo, url, arm="candidate"), repo=repo)
    assert first.items == {} and first.facts["reference"] == "self"
    assert first.metrics["answer_match_rate"] == 1.0 and first.metrics["kl_per_token_mean"] == 0.0
    assert first.metrics["answers_prompts"] == 4 and first.metrics["answers_tokens_mean"] == 8
    assert second.facts == {"reference": "control-p1-r1", "prompts": "prompts.jsonl"}
    assert second.items == {
        "answer_match_rate": {"0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0},
        "top1_agreement": {"0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0},
    }
    assert second.metrics["first_divergence_mean"] == 8 and second.metrics["kl_per_token_mean"] == 0.0
    assert first.instrument_version == second.instrument_version
    assert set(agreement.INSTRUMENT.item_metrics) <= set(second.items)


def test_a_server_whose_answers_change_at_token_3_is_flagged_on_those_prompts(repo):
    with fake_completions() as url:
        agreement.measure(OPTIONS, context(repo, url), repo=repo)
    with fake_completions("--diverge-at", "3", "--diverge-only", "#d") as url:
        m = agreement.measure(OPTIONS, context(repo, url, arm="candidate"), repo=repo)
    assert m.items["answer_match_rate"] == {"0": 1.0, "1": 0.0, "2": 1.0, "3": 0.0}
    assert m.items["top1_agreement"] == {"0": 1.0, "1": 0.75, "2": 1.0, "3": 0.75}
    assert m.metrics["answer_match_rate"] == 0.5
    assert m.metrics["first_divergence_mean"] == (8 + 3 + 8 + 3) / 4
    assert m.metrics["top1_agreement"] == pytest.approx((1 + 0.75 + 1 + 0.75) / 4)
    # Only the divergence's own position differs in its top list (the prefixes before agree):
    # two such positions over 8 + 4 + 8 + 4 compared.
    raw = json.loads(m.raw_path.read_text())
    reference = json.loads((repo / "raw" / "control-p1-r1.answers.json").read_text())
    kl_at_3 = top_k_kl(reference["answers"][1]["top_logprobs"][3], raw["answers"][1]["top_logprobs"][3])
    assert kl_at_3 > 0
    assert m.metrics["kl_per_token_mean"] == pytest.approx(2 * kl_at_3 / 24)
    assert [c["first_divergence"] for c in raw["comparisons"]] == [8, 3, 8, 3]


def test_every_request_is_greedy_with_logprobs_token_ids_the_seed_and_the_served_name(repo):
    with fake_completions() as url:
        agreement.measure(OPTIONS, context(repo, url), repo=repo)
        bodies = received(url)["bodies"]
    assert sorted(b["prompt"] for b in bodies) == sorted(PROMPTS)
    for body in bodies:
        assert body["temperature"] == 0 and body["max_tokens"] == 8 and body["logprobs"] == 3
        assert body["return_token_ids"] is True and body["seed"] == 1001 and body["model"] == "tiny"


def test_the_point_s_concurrency_is_what_is_in_flight(repo):
    options = {**OPTIONS, "prompts": None, "limit": 8}
    # The stand-in holds each request until 4 are in flight: only a client that sends 4 at once
    # gets there (a sequential one would be seen at 1, after 2 s of waiting per request).
    with fake_completions("--barrier", "4") as url:
        agreement.measure(options, context(repo, url, point=4), repo=repo)
        assert received(url)["max_in_flight"] == 4
    with fake_completions() as url:
        agreement.measure(options, context(repo, url, point=1), repo=repo)
        assert received(url)["max_in_flight"] == 1


def test_the_raw_file_holds_every_answer_and_is_what_the_measurement_hashed(repo):
    with fake_completions() as url:
        m = agreement.measure(OPTIONS, context(repo, url), repo=repo)
    assert m.raw_path == repo / "raw" / "control-p1-r1.answers.json"
    assert m.raw_sha256 == sha256_file(m.raw_path)
    assert [p.name for p in m.raw_path.parent.iterdir()] == [m.raw_path.name]  # no temp file left
    raw = json.loads(m.raw_path.read_text())
    assert raw["format"] == "recipe-ledger/answers" and raw["comparisons"] is None
    assert [a["prompt"] for a in raw["answers"]] == PROMPTS  # in prompt order, whatever came back first
    first = raw["answers"][0]
    assert len(first["token_ids"]) == len(first["token_logprobs"]) == len(first["top_logprobs"]) == 8
    assert first["finish_reason"] == "length" and first["text"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_server_error_fails_the_point_naming_the_prompt_and_the_server_s_words(repo, engine):
    with fake_completions("--fail-on", "def add", "--engine", engine) as url:
        with pytest.raises(InstrumentError, match=r"prompt 2: HTTP 400: scripted failure for a prompt"):
            agreement.measure(OPTIONS, context(repo, url), repo=repo)
    assert not (repo / "raw" / "control-p1-r1.answers.json").exists()


def test_an_answer_without_token_ids_fails_the_point(repo):
    with fake_completions("--no-token-ids") as url:
        with pytest.raises(InstrumentError, match=r"prompt 0: the answer has no choices\[0\]\.token_ids"):
            agreement.measure(OPTIONS, context(repo, url), repo=repo)


def test_a_request_past_its_timeout_fails_the_point(repo):
    with fake_completions("--completion-delay", "1.0") as url:
        with pytest.raises(
            InstrumentError, match=r"prompt 0: no answer from the server \(timeout 0.2 s\): .*timed out"
        ):
            agreement.measure({**OPTIONS, "timeout_s": 0.2, "limit": 1}, context(repo, url), repo=repo)


def test_no_server_answering_fails_the_point(repo):
    with fake_completions() as url:
        pass  # the port is closed again
    with pytest.raises(InstrumentError, match=r"prompt 0: no answer from the server .*[Rr]efused"):
        agreement.measure(OPTIONS, context(repo, url), repo=repo)


def test_without_the_reference_s_answers_the_point_fails_before_any_request(repo):
    with fake_completions() as url:
        with pytest.raises(
            InstrumentError, match="the control's first launch at this point must be measured"
        ):
            agreement.measure(OPTIONS, context(repo, url, arm="candidate"), repo=repo)
        assert received(url)["bodies"] == []


def test_a_reference_measured_with_other_options_is_refused(repo):
    with fake_completions() as url:
        agreement.measure(OPTIONS, context(repo, url), repo=repo)
        with pytest.raises(InstrumentError, match=r"measured differently: max_tokens 8 \(this one: 4\)"):
            agreement.measure({**OPTIONS, "max_tokens": 4}, context(repo, url, arm="candidate"), repo=repo)
        with pytest.raises(InstrumentError, match="measured differently: prompt_set_sha256"):
            agreement.measure({**OPTIONS, "limit": 2}, context(repo, url, arm="candidate"), repo=repo)


def test_the_pipeline_s_measure_point_reaches_it_through_the_registry(repo, monkeypatch):
    calls = []
    monkeypatch.setattr(agreement, "measure", lambda *a, **k: calls.append((a, k)) or "measured")
    run = SimpleNamespace(spec=SimpleNamespace(options=OPTIONS), ctx="ctx", repo=repo)
    assert instruments.get("agreement").measure(run) == "measured"  # type: ignore[arg-type]
    assert calls == [((OPTIONS, "ctx"), {"repo": repo})]


# --- the prompt set -------------------------------------------------------------------------------


def test_the_shipped_set_is_200_distinct_prompts_of_every_category():
    lines = [json.loads(line) for line in agreement.SHIPPED_PROMPTS.read_text().splitlines()]
    assert len(lines) == 200 and len({line["prompt"] for line in lines}) == 200
    assert {line["category"] for line in lines} == {
        "arithmetic",
        "facts",
        "code",
        "lists",
        "continuation",
        "misc",
    }
    # Categories interleave, so that a limit takes a mix rather than the first category only.
    assert len({line["category"] for line in lines[:6]}) == 6
    shipped = agreement.prompt_set(agreement.parse_options({}), REPO)
    assert shipped.source == "shipped:agreement_prompts.jsonl" and len(shipped.prompts) == 200


def test_the_version_names_the_prompt_set_so_another_set_is_another_instrument(repo):
    version = agreement.prompt_set(agreement.parse_options(OPTIONS), repo).instrument_version
    assert version.startswith("agreement/1 prompts:") and len(version.split(":")[1]) == 12
    fewer = agreement.prompt_set(agreement.parse_options({**OPTIONS, "limit": 3}), repo)
    shipped = agreement.prompt_set(agreement.parse_options({}), repo)
    assert len({version, fewer.instrument_version, shipped.instrument_version}) == 3


def test_a_txt_prompt_file_is_one_prompt_per_non_blank_line(repo):
    (repo / "p.txt").write_text("first prompt\n\n  second, indented\n")
    prompts = agreement.prompt_set(agreement.parse_options({"prompts": "p.txt"}), repo).prompts
    assert prompts == ("first prompt", "  second, indented")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"prompt": ""}', "'prompt' must be a non-empty string"),
        ('{"text": "x"}', "unknown keys ['text']"),
        ('{"prompt": 3}', "'prompt' must be a non-empty string"),
    ],
)
def test_a_malformed_prompt_line_is_refused_before_launch_at_file_and_line(repo, line, message):
    (repo / "bad.jsonl").write_text('{"prompt": "fine"}\n\n' + line + "\n")
    spec = Instrument(name="answers", kind="agreement", options={"prompts": "bad.jsonl"})
    with pytest.raises(InputError) as caught:
        agreement.INSTRUMENT.check_before_launch(spec, repo, None)
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"{repo / 'bad.jsonl'}:3: {message}")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prompts": "missing.jsonl"}, "missing.jsonl: no such prompt file"),
        ({"prompts": "prompts.csv"}, "prompts.csv: a prompt file is .jsonl"),
        ({"prompts": "prompts.jsonl", "limit": 5}, "options.limit 5 is more than the 4 prompts"),
        ({"top_logprobs": 0}, "options.top_logprobs: Input should be greater than or equal to 1"),
        ({"temperature": 0.5}, "options.temperature: Extra inputs are not permitted"),
    ],
)
def test_bad_options_are_refused_before_launch(repo, options, message):
    spec = Instrument(name="answers", kind="agreement", options=options)
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        agreement.INSTRUMENT.check_before_launch(spec, repo, None)


# --- refusing an arm before launch ----------------------------------------------------------------


def spec_of(**options: object) -> Instrument:
    return Instrument(name="answers", kind="agreement", options=options)


def command(*flags: str) -> LaunchCommand:
    return LaunchCommand.parse(["vllm", "serve", "/model", *flags])


class NoLogprobs(Engine):
    name = "tgi"  # an engine (a plugin's) whose completions cannot return log-probabilities


def test_an_engine_without_logprobs_is_refused_naming_the_instrument_and_the_engine(monkeypatch):
    real = engines.get
    monkeypatch.setattr(engines, "get", lambda name: NoLogprobs() if name == "tgi" else real(name))
    with pytest.raises(InputError) as caught:
        agreement.INSTRUMENT.check_arm(spec_of(), "control", "tgi", command())
    assert caught.value.exit_code == 2
    assert (
        "instrument 'answers' (agreement) needs per-token log-probabilities; engine 'tgi' cannot "
        "return them (no logprobs option)"
    ) in str(caught.value)
    assert str(caught.value).startswith("arm 'control': ")


def test_a_top_k_above_vllm_s_max_logprobs_is_refused_naming_the_arm_and_the_option():
    with pytest.raises(InputError) as caught:
        agreement.INSTRUMENT.check_arm(spec_of(top_logprobs=25), "fast", "vllm", command())
    text = str(caught.value)
    assert text.startswith("arm 'fast': ") and "engine 'vllm'" in text
    assert (
        "--max-logprobs 20 < top_logprobs 25 (next: raise --max-logprobs or lower options.top_logprobs)"
        in text
    )
    agreement.INSTRUMENT.check_arm(spec_of(top_logprobs=25), "fast", "vllm", command("--max-logprobs", "30"))
    agreement.INSTRUMENT.check_arm(spec_of(top_logprobs=25), "fast", "vllm", command("--max-logprobs=-1"))
    agreement.INSTRUMENT.check_arm(spec_of(top_logprobs=20), "fast", "vllm", command())
    sglang = LaunchCommand.parse(["python", "-m", "sglang.launch_server", "--model-path", "/m"])
    agreement.INSTRUMENT.check_arm(spec_of(top_logprobs=100), "fast", "sglang", sglang)  # no cap


def test_the_planner_asks_every_arm_with_its_parsed_command():
    experiment = SimpleNamespace(instruments=[spec_of(top_logprobs=8, limit=2)], points=[1])
    arms = {
        "control": SimpleNamespace(name="control", engine="vllm", argv=["vllm", "serve", "/m"]),
        "capped": SimpleNamespace(
            name="capped", engine="vllm", argv=["vllm", "serve", "/m", "--max-logprobs", "4"]
        ),
    }
    with pytest.raises(InputError, match=r"arm 'capped': .*--max-logprobs 4 < top_logprobs 8"):
        check_workload_instruments(experiment, arms, REPO)  # type: ignore[arg-type]
    del arms["capped"]
    check_workload_instruments(experiment, arms, REPO)  # type: ignore[arg-type]
