"""The command line as a whole: every command registered once, listed, loadable, and loaded lazily."""

import inspect
import json
import subprocess
import sys

import click
from click.testing import CliRunner

from recipe_ledger import __version__
from recipe_ledger.cli import COMMANDS, load_command, main

# What building the group, or one command's help, must not drag in: the pydantic-heavy core and the
# adapters' libraries. Listed by hand so that a new heavy import shows up here as a failure.
HEAVY = {
    "recipe_ledger.ledger.models",
    "recipe_ledger.ledger.store",
    "recipe_ledger.recipes.models",
    "recipe_ledger.recipes.resolve",
    "recipe_ledger.tracking",
    "recipe_ledger.pipeline",
    "recipe_ledger.site",
    "docker",
    "mlflow",
    "git",
    "rich",
}


def _modules_after(args: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after running ``ledger ARGS`` (exit code must be 0)."""
    code = (
        "import json, sys\n"
        "from recipe_ledger.cli import main\n"
        "try:\n"
        f"    main({args!r}, prog_name='ledger')\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def _command_module(name: str) -> str:
    return COMMANDS[name].target.partition(":")[0]


def test_version_prints_the_package_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"ledger {__version__}"


def test_every_command_has_help():
    runner = CliRunner()
    ctx = click.Context(main)

    def walk(command, path):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])

    walk(main, [])


def test_help_lists_every_registered_command_with_its_summary():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = result.output.split("Commands:")[1].splitlines()
    names = [line.split()[0] for line in listed if line.strip()]
    assert names == sorted(COMMANDS)
    for name, (target, summary) in COMMANDS.items():
        command = load_command(target)
        assert command.name == name, target
        # The static summary is what `ledger --help` shows without importing the module: it must
        # stay the first line of the command's own help.
        assert inspect.cleandoc(command.help).splitlines()[0] == summary, name


def test_an_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["lgo"])
    assert result.exit_code == 2 and "No such command 'lgo'" in result.output


def test_building_the_group_and_its_help_imports_no_command_module():
    loaded = _modules_after(["--help"])
    command_modules = {_command_module(name) for name in COMMANDS}
    assert not loaded & command_modules
    assert not loaded & HEAVY
    assert "recipe_ledger.cli.options" not in loaded


def test_a_command_s_help_imports_its_module_and_not_the_others():
    loaded = _modules_after(["log", "--help"])
    assert "recipe_ledger.cli.log" in loaded
    others = {_command_module(name) for name in COMMANDS} - {"recipe_ledger.cli.log"}
    assert not loaded & others
    assert not loaded & {"recipe_ledger.recipes.models", "recipe_ledger.tracking", "docker", "mlflow", "git"}


def test_render_imports_neither_pydantic_models_nor_the_linter(tmp_path):
    # `recipe render` is timed against recipes.vllm.ai's builder: its imports are part of the figure.
    cases = tmp_path / "cases.jsonl"
    cases.write_text("")
    loaded = _modules_after(["recipe", "render", "--batch", str(cases)])
    assert "recipe_ledger.recipes.corpus" in loaded
    assert not loaded & {"pydantic", "recipe_ledger.recipes.models", "recipe_ledger.recipes.lint", "rich"}


def test_log_finds_its_root_without_gitpython_and_prints_without_rich():
    loaded = _modules_after(["log"])  # run in this checkout: the root is its git top level
    assert "recipe_ledger.cli.log" in loaded and not loaded & {"git", "rich"}
