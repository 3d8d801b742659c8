"""The one module that imports ray: connect, list the labelled boxes, run a box's job there.

Boxes join with ``ray start --address HEAD:PORT --labels box=NAME``; a job is scheduled with
``label_selector={"box": NAME}`` (Ray's label scheduling, 2.49+), so it runs on a node of that box
or not at all. Tasks are never retried by Ray (``max_retries=0``): a second run of an experiment
is a new measurement, which is the driver's decision, not the scheduler's.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import RayError

from recipe_ledger.errors import StateError
from recipe_ledger.scaleout.onbox import BoxJob, BoxReport, run_here
from recipe_ledger.scaleout.sweep import Lost

BOX_LABEL = "box"
CONNECT_TIMEOUT_S = 5.0
POLL_S = 5.0  # how often a wait for the next task checks that the boxes it waits on are alive


@ray.remote(num_cpus=0, max_retries=0)
def _run_on_box(job: BoxJob) -> BoxReport:
    return run_here(job)


class RayCluster:
    """A connection to a running Ray cluster (the driver's side)."""

    def __init__(self, address: str):
        self.address = address
        self._box_of: dict[Any, str] = {}  # task handle -> the box it was sent to
        _check_reachable(address)
        try:
            ray.init(
                address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=True
            )
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise StateError(
                f"cannot join the Ray cluster ({str(error).splitlines()[0]})",
                where=address,
                hint="ray status --address ADDRESS; start it with ray start --head",
            ) from None

    def boxes(self) -> set[str]:
        """The box labels of the live nodes."""
        return {
            node["Labels"][BOX_LABEL]
            for node in ray.nodes()
            if node.get("Alive") and BOX_LABEL in (node.get("Labels") or {})
        }

    def submit(self, box: str, job: BoxJob) -> Any:
        handle = _run_on_box.options(label_selector={BOX_LABEL: box}).remote(job)
        self._box_of[handle] = box
        return handle

    def next_done(self, handles: Sequence[Any]) -> tuple[Any, BoxReport | Lost]:
        """The next task to finish; a task whose box has no live node left is cancelled and lost
        (a label selector is a hard constraint: Ray would keep it pending forever)."""
        while True:
            ready, _ = ray.wait(list(handles), num_returns=1, timeout=POLL_S)
            if ready:
                return ready[0], self._result(ready[0])
            live = self.boxes()
            for handle in handles:
                if self._box_of[handle] not in live:
                    ray.cancel(handle, force=True)
                    return handle, Lost(f"no live node labelled box={self._box_of.pop(handle)} any more")

    def _result(self, handle: Any) -> BoxReport | Lost:
        self._box_of.pop(handle, None)
        try:
            return ray.get(handle)
        except RayError as error:  # the node died, its worker crashed, or the task raised
            return Lost(f"{type(error).__name__}: {_first_line(error)}")

    def close(self) -> None:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """Fail in seconds, not after Ray's own minute of retries, when nothing listens at HOST:PORT."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or address.startswith(("ray://", "auto")):
        return  # "auto" or a Ray client URL: let ray.init judge
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise StateError(
            f"no Ray cluster answers at {address} ({error.strerror or error})",
            where=address,
            hint="ray start --head --port PORT on the head box, then --cluster HEAD:PORT",
        ) from None


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else "no message"
