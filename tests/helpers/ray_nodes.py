"""A local Ray cluster of labelled nodes for the sweep tests and the benchmark.

Each node is a ``ray start --block`` in its own process group, with its own environment (the box's
writer name and checkout), so the test stops exactly the processes it started (by group id), and a
node can be killed mid-sweep to play a box that dies.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from helpers.net import free_port

RAY = Path(sys.executable).parent / "ray"
START_TIMEOUT_S = 90


@dataclass
class LocalCluster:
    address: str
    temp_dir: Path
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)
    head_box: str = ""

    def add_node(self, box: str, env: Mapping[str, str], *, head: bool = False) -> None:
        if head:
            self.head_box = box
        args = (
            [
                "--head",
                f"--port={self.address.rpartition(':')[2]}",
                f"--temp-dir={self.temp_dir}",
                "--include-dashboard=false",
                "--disable-usage-stats",
            ]
            if head
            else [f"--address={self.address}"]
        )
        log = open(self.temp_dir.parent / f"node-{box}.log", "w")  # noqa: SIM115 - closed with the node
        self.nodes[box] = subprocess.Popen(
            [
                str(RAY),
                "start",
                "--block",
                "--num-cpus=1",
                f"--labels=box={box}",
                *args,
            ],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_started(self, box: str) -> None:
        """Until `ray start` says the node runs (it has registered with the head by then)."""
        log = self.temp_dir.parent / f"node-{box}.log"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if "block forever" in log.read_text(errors="replace"):
                return
            if self.nodes[box].poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"Ray node box={box} did not start: {log.read_text(errors='replace')[-2000:]}")

    def kill(self, box: str) -> None:
        """Stop one node and everything it started (its process group)."""
        process = self.nodes.pop(box)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)

    def stop(self) -> None:
        for box in sorted(self.nodes, key=lambda name: name == self.head_box):  # the head last
            self.kill(box)


@contextmanager
def local_cluster(nodes: Mapping[str, Mapping[str, str]]) -> Iterator[LocalCluster]:
    """A head plus one node per box label (the first box is the head); stopped on exit."""
    # Ray puts unix sockets under its temp dir: keep the path short (the limit is 107 bytes).
    temp = Path(tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp"))
    cluster = LocalCluster(f"127.0.0.1:{free_port()}", temp / "r")
    try:
        for index, (box, env) in enumerate(nodes.items()):
            # One at a time: on a 2-core machine nodes started together time out registering.
            cluster.add_node(box, env, head=index == 0)
            cluster.wait_started(box)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp, ignore_errors=True)  # session logs and sockets of the stopped nodes
