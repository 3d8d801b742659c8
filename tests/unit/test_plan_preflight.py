"""Planning (overrides, ABBA, seeds) and preflight checks, without launching anything."""

import json
from pathlib import Path

import pytest

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.experiment.spec import Overrides, load_experiment
from recipe_ledger.pipeline import preflight
from recipe_ledger.pipeline.plan import (
    ArmPlan,
    abba_schedule,
    apply_overrides,
    plan_run,
    with_server_address,
)
from recipe_ledger.recipes.catalog import RecipeRoot
from recipe_ledger.recipes.flags import LaunchCommand, parse_flags

REPO = Path(__file__).resolve().parents[2]


def test_abba_spreads_each_arm_over_the_run():
    assert abba_schedule(["A", "B"], 3) == [("A", 1), ("B", 1), ("B", 2), ("A", 2), ("A", 3), ("B", 3)]
    assert abba_schedule(["A", "B", "C"], 2) == [("A", 1), ("B", 1), ("C", 1), ("C", 2), ("B", 2), ("A", 2)]


def test_overrides_replace_flags_instead_of_duplicating_them():
    argv = ["vllm", "serve", "m", "--max-num-seqs", "8", "--enforce-eager", "--x=1"]
    out, env = apply_overrides(
        LaunchCommand.parse(argv),
        {"A": "1"},
        Overrides(args=["--max-num-seqs", "1"], env={"B": "2"}, remove_args=["--enforce-eager", "--x"]),
    )
    assert out.render() == ["vllm", "serve", "m", "--max-num-seqs", "1"]
    assert env == {"A": "1", "B": "2"}


def test_server_address_is_set_once():
    command = LaunchCommand.parse(["vllm", "serve", "m", "--port", "8000", "--host=0.0.0.0"])
    argv = with_server_address(command, "127.0.0.1", 8123).render()
    assert argv == ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8123"]
    assert LaunchCommand.parse(["a", "--p", "x", "y", "--q"]).without({"--p"}).render() == ["a", "--q"]


# The argv functions planning used before LaunchCommand (render, edit, parse again at each step):
# the oracle the structured form must agree with, token for token.
def _old_drop_flags(argv: list[str], names: set[str]) -> list[str]:
    dropped: set[int] = set()
    for flag in parse_flags(argv):
        if flag.name in names:
            dropped.add(flag.index)
            dropped.update(range(flag.index + 1, flag.index + 1 + (0 if flag.joined else len(flag.values))))
    return [token for index, token in enumerate(argv) if index not in dropped]


def _old_replace(argv: list[str], args: list[str], remove: set[str]) -> list[str]:
    return _old_drop_flags(argv, {f.name for f in parse_flags(args)} | remove) + list(args)


ODD_ARGVS = [
    ["vllm", "serve", "m", "--a=1", "stray", "words", "--b", "x", "y", "--c"],
    ["python", "server.py", "--flag", "--x=", "--y", "1", "--x", "2"],
    ["vllm", "serve", "m", "--speculative-config", '{"k": 2}', "--max-num-seqs=4", "-O3"],
    ["--only", "flags", "--here=1"],
    ["vllm", "serve"],
]
EDITS = [
    (["--max-num-seqs", "1"], set()),
    (["--host", "h", "--port", "1"], {"--c"}),
    (["--a", "2", "extra"], {"--b", "--x"}),
    (["--new=3"], {"--flag", "-O3", "--y"}),
]


def _reference_argvs(compat_dir: Path) -> list[list[str]]:
    lines = (compat_dir / "expected-commands.jsonl").read_text().splitlines()
    found = [json.loads(line)["result"].get("argv") for line in lines[:400]]
    return [argv for argv in found if argv]


def test_a_launch_command_renders_every_reference_argv_back_byte_for_byte(compat_dir):
    argvs = _reference_argvs(compat_dir) + ODD_ARGVS
    assert len(argvs) > 100
    for argv in argvs:
        assert LaunchCommand.parse(argv).render() == argv


def test_editing_a_launch_command_matches_editing_and_reparsing_its_argv(compat_dir):
    for argv in _reference_argvs(compat_dir)[:150] + ODD_ARGVS:
        for args, remove in EDITS:
            command = LaunchCommand.parse(argv).replacing(args, remove)
            assert command.render() == _old_replace(argv, args, remove), (argv, args, remove)
            # A second edit on the edited form agrees with parsing the first edit's argv again.
            again = command.replacing(["--port", "9"], {"--a"}).render()
            assert again == _old_replace(_old_replace(argv, args, remove), ["--port", "9"], {"--a"})


def test_the_model_and_engine_words_are_replaced_in_place():
    command = LaunchCommand.parse(["vllm", "serve", "org/model", "--max-num-seqs", "4"])
    assert command.with_word(2, "/models/m").with_word(0, "/venv/bin/vllm").render() == [
        "/venv/bin/vllm",
        "serve",
        "/models/m",
        "--max-num-seqs",
        "4",
    ]
    assert command.first_value("--max-num-seqs") == "4" and command.word(2) == "org/model"


def test_the_example_experiment_plans_two_real_vllm_commands():
    spec = REPO / "experiments" / "examples" / "tiny-batching.yaml"
    plan = plan_run(spec, load_experiment(spec), RecipeRoot(REPO / "recipes"), REPO)
    control, candidate = plan.arms["control"], plan.arms["batching"]
    assert control.argv[1:3] == ["serve", str((REPO / ".cache" / "tiny-model").resolve())]
    assert control.argv[-6:-4] == ["--max-num-seqs", "1"] and "--max-num-seqs" not in candidate.argv
    assert control.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert control.fingerprint != candidate.fingerprint
    # The seed depends on the point and the repeat only, so every arm of one repeat gets the same prompts.
    assert plan.seed(4, 1) != plan.seed(4, 2) and plan.seed(4, 1) != plan.seed(1, 1)


def test_network_file_systems_are_recognised():
    assert preflight.is_network_fs("nfs4") and preflight.is_network_fs("fuse.sshfs")
    assert not preflight.is_network_fs("ext4") and not preflight.is_network_fs(None)


def test_a_model_on_a_network_share_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "mount_fstype", lambda path: "nfs4")
    arm = ArmPlan("control", ["vllm", "serve", str(tmp_path)], {}, "x", str(tmp_path), "m")
    with pytest.raises(StateError, match="network file system"):
        preflight.check_model_local(arm, allow_network_fs=False)
    preflight.check_model_local(arm, allow_network_fs=True)


def test_autotune_fingerprint_ignores_serving_only_flags():
    base = ["vllm", "serve", "m", "--max-num-seqs", "16", "--port", "1"]
    assert preflight.autotune_fingerprint(base) == preflight.autotune_fingerprint(base[:-1] + ["2"])
    assert preflight.autotune_fingerprint(base) != preflight.autotune_fingerprint(
        base[:4] + ["24"] + base[5:]
    )


def test_a_new_flag_set_is_announced_once(tmp_path):
    arm = ArmPlan(
        "control",
        ["vllm", "serve", "m", "--max-num-seqs", "16"],
        {"VLLM_CACHE_ROOT": str(tmp_path)},
        "x",
        None,
        "m",
    )
    assert "new to the kernel cache" in preflight.boot_cache_notice(arm)
    preflight.remember_flagset(arm)
    assert preflight.boot_cache_notice(arm) is None


def test_the_experiment_schema_is_printed_and_describes_the_arms():
    import json

    from click.testing import CliRunner

    from recipe_ledger.cli import main

    result = CliRunner().invoke(main, ["experiment", "schema"])
    schema = json.loads(result.output)
    assert {"control", "candidates", "bars", "points"} <= set(schema["properties"])
    assert {"RecipeArm", "CommandArm", "StudyArm"} <= set(schema["$defs"])


def test_a_bad_experiment_names_file_line_and_field(tmp_path):
    from recipe_ledger.errors import SpecError
    from recipe_ledger.experiment.spec import load_experiment

    spec = tmp_path / "x.yaml"
    text = (REPO / "experiments" / "examples" / "tiny-batching.yaml").read_text()
    spec.write_text(text.replace("\npoints: [4]", "\npoints: [4]\nrepeats: two"))
    with pytest.raises(SpecError, match=r"x\.yaml:\d+: repeats: expected an integer, got \"two\""):
        load_experiment(spec)


def _release_spec(tmp_path, launcher: str, release: str):
    import json

    spec = {
        "name": "vs-release",
        "hypothesis": "h",
        "box": "cpu-only",
        "server": {"launcher": launcher, "port": 8200},
        "control": {"release": release, "overrides": {"args": ["--max-num-seqs", "2"]}},
        "candidates": {"now": {"argv": ["vllm", "serve", "/m"]}},
        "instruments": [{"name": "bench", "kind": "vllm_bench_serve"}],
        "points": [4],
        "bars": [{"metric": "output_tps_total", "point": 4, "direction": "higher", "min_effect": 0.1}],
    }
    path = tmp_path / "x.yaml"
    path.write_text(json.dumps(spec))
    return path


def test_a_release_arm_launches_what_the_release_pinned(tmp_path):
    from recipe_ledger.pipeline.plan import ReleaseLaunch

    pinned = ReleaseLaunch(
        ["vllm", "serve", "/model", "--port", "8124", "--max-num-seqs", "8"],
        {"VLLM_TARGET_DEVICE": "cpu"},
        "127.0.0.1:5000/x@sha256:" + "a" * 64,
        ".cache/tiny-model",
    )
    spec = _release_spec(tmp_path, "docker", "tiny-cpu@v1")
    plan = plan_run(
        spec, load_experiment(spec), RecipeRoot(REPO / "recipes"), tmp_path, release_lookup=lambda ref: pinned
    )
    control = plan.arms["control"]
    assert control.image == pinned.image and control.source == "release tiny-cpu@v1"
    assert control.argv == [
        "vllm",
        "serve",
        "/model",
        "--max-num-seqs",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        "8200",
    ]
    assert control.env == {"VLLM_TARGET_DEVICE": "cpu"}


def test_a_release_served_from_an_image_needs_the_docker_launcher(tmp_path):
    from recipe_ledger.errors import InputError
    from recipe_ledger.pipeline.plan import ReleaseLaunch

    pinned = ReleaseLaunch(["vllm", "serve", "/model"], {}, "img@sha256:" + "b" * 64, None)
    spec = _release_spec(tmp_path, "process", "tiny-cpu@v1")
    with pytest.raises(InputError, match="set server.launcher: docker"):
        plan_run(
            spec,
            load_experiment(spec),
            RecipeRoot(REPO / "recipes"),
            tmp_path,
            release_lookup=lambda r: pinned,
        )


def test_an_imported_release_without_argv_is_refused_by_name(tmp_path):
    from recipe_ledger.ledger.store import Ledger
    from recipe_ledger.releases import catalog

    launch = catalog.launch_of(catalog.find(Ledger.open(REPO), "sixty-k-agent@v14"))
    assert launch.argv == [] and launch.image is None  # v14's image is a tag: unpinned
    spec = _release_spec(tmp_path, "process", "sixty-k-agent@v14")
    with pytest.raises(InputError, match="sixty-k-agent@v14 records no launch argv"):
        plan_run(
            spec,
            load_experiment(spec),
            RecipeRoot(REPO / "recipes"),
            tmp_path,
            release_lookup=lambda r: launch,
        )


def test_a_release_published_from_a_tag_launches_its_digest_not_the_tag():
    from recipe_ledger.ledger.models import ReleasePayload
    from recipe_ledger.releases import catalog

    digest = "sha256:" + "ab" * 32
    payload = ReleasePayload.model_validate(
        {
            "lane": "lane",
            "version": "v1",
            "argv": ["vllm", "serve", "/m"],
            "image": {"ref": "127.0.0.1:5000/x/y:moving", "digest": digest, "pinned": True},
        }
    )
    release = catalog.Release(entry={"id": "e" * 64}, payload=payload, status="active")
    assert catalog.launch_of(release).image == f"127.0.0.1:5000/x/y@{digest}"
