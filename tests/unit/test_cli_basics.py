from click.testing import CliRunner

from recipe_ledger import __version__
from recipe_ledger.cli import main


def test_version_prints_the_package_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"ledger {__version__}"


def test_every_command_has_help():
    runner = CliRunner()

    def walk(command, path):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(main, [])
