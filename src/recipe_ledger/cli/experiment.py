"""`ledger experiment schema`: the JSON Schema of experiment files, or the field reference."""

from __future__ import annotations

import click


@click.group("experiment")
def experiment_group() -> None:
    """Experiment specs (experiments/*.yaml): their JSON Schema."""


@experiment_group.command("schema")
@click.option(
    "--markdown",
    is_flag=True,
    help="Print the field reference for people (docs/experiments.md) instead of the JSON Schema.",
)
def experiment_schema_cmd(markdown: bool) -> None:
    """Print the JSON Schema of experiment files, for editors to validate and complete them."""
    if markdown:
        from recipe_ledger.experiment.reference import markdown as reference_markdown

        click.echo(reference_markdown(), nl=False)
        return
    from recipe_ledger.cli.output import print_json
    from recipe_ledger.experiment.spec import experiment_json_schema

    print_json(experiment_json_schema())
