"""`ledger experiment schema`: the JSON Schema of experiment files."""

from __future__ import annotations

import click


@click.group("experiment")
def experiment_group() -> None:
    """Experiment specs (experiments/*.yaml): their JSON Schema."""


@experiment_group.command("schema")
def experiment_schema_cmd() -> None:
    """Print the JSON Schema of experiment files, for editors to validate and complete them."""
    from recipe_ledger.cli.output import print_json
    from recipe_ledger.experiment.spec import experiment_json_schema

    print_json(experiment_json_schema())
