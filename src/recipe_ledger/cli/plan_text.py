"""A planned arm for people: its launch as one line a shell takes as it is, and what it changes
from the control.

The line is what the launcher would run: for a process arm the program with the arm's variables
in front, for a docker arm the ``docker run`` the docker launcher would make (rendered by
``launch.containers.docker_run_argv`` from the same settings it creates the container with).
Every word is shell-quoted (``shlex``), so a JSON flag value pastes as one word. A variable whose
value is secret (``redact``) is never printed: docker takes it from the caller's environment
(``-e NAME``), a process arm leaves it out; a line after the command names it, to be exported.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from recipe_ledger.experiment.spec import CONTROL_ARM
from recipe_ledger.launch.containers import docker_run_argv
from recipe_ledger.launch.spec import LaunchSpec
from recipe_ledger.pipeline.measure import Launch, launch_spec
from recipe_ledger.pipeline.plan import ArmPlan, RunPlan
from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.redact import redact_env

_PLAN_RUN_ID = "plan"  # a launch spec needs a run; nothing is written under it


def is_hidden(name: str, value: str) -> bool:
    """Whether a variable's value must not be printed: redaction would change it."""
    return redact_env({name: value})[name] != value


def command_lines(plan: RunPlan, arm: ArmPlan) -> list[str]:
    """The arm's launch as shell lines: the command, then (when it has secret variables) which
    ones to export first. A study arm has no command: its parameters."""
    if not arm.argv:
        return [", ".join(f"{k}={v}" for k, v in sorted(arm.params.items()))]
    hidden = [name for name, value in arm.env.items() if is_hidden(name, value)]
    if plan.experiment.server.launcher == "docker" and arm.image:
        lines = [shlex.join(docker_run_argv(_launch_spec(plan, arm), is_hidden))]
    else:
        shown = [f"{name}={shlex.quote(value)}" for name, value in arm.env.items() if name not in hidden]
        lines = [" ".join([*shown, shlex.join(arm.argv)])]
    if hidden:
        lines.append(f"(secret, not shown: export {', '.join(hidden)} in your shell first)")
    return lines


def _launch_spec(plan: RunPlan, arm: ArmPlan) -> LaunchSpec:
    run_dir = Path(plan.spec_path).parent / _PLAN_RUN_ID  # only named, never made
    return launch_spec(Launch(plan, arm, 1, run_dir, _PLAN_RUN_ID, Path(".")))


def differences(control: ArmPlan, arm: ArmPlan) -> list[str]:
    """What ``arm`` changes from the control, in words: each flag (read by ``LaunchCommand``, the
    last occurrence winning as for the server), the program words, each variable (secret values
    hidden), the image."""
    changes = _changed("", _command_texts(control.argv), _command_texts(arm.argv))
    changes += _changed("env ", redact_env(control.env), redact_env(arm.env))
    changes += _changed("image", {"": control.image or ""}, {"": arm.image or ""})
    changes += _changed("param ", control.params, arm.params)
    return changes


def _command_texts(argv: list[str]) -> dict[str, str]:
    command = LaunchCommand.parse(argv)
    return {"(program)": " ".join(command.positionals()), **command.option_texts()}


def _changed(kind: str, before: dict[str, str], after: dict[str, str]) -> list[str]:
    out = []
    for key in [*before, *(k for k in after if k not in before)]:
        old, new = before.get(key), after.get(key)
        name = f"{kind}{key}".strip()
        if old == new:
            continue
        if new is None or new == "":
            out.append(f"{name} removed (control: {old})")
        elif old is None or old == "":
            out.append(f"{name} {new} added")
        else:
            out.append(f"{name} {new} (control: {old})")
    return out


def difference_line(plan: RunPlan, arm: ArmPlan) -> str | None:
    """``changed from control: ...`` for a candidate arm; None for the control itself."""
    control = plan.arms.get(CONTROL_ARM)
    if control is None or arm.name == CONTROL_ARM:
        return None
    changes = differences(control, arm)
    return f"changed from control: {'; '.join(changes)}" if changes else "same launch as control"
