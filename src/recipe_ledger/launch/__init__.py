"""Launching a server for one arm x repeat: a local process group or a docker container.

```
with ProcessLauncher().start(spec) as server:   # returns once spec.health_path answers 200 (and
                                                # spec.engine's own readiness check passed)
    server.base_url, server.is_alive(), server.log_tail(80)
# leaving the block stops the server and waits until its port is free and nothing of it remains
```

A boot that fails raises ``BootFailure`` with a ``cause`` the ledger records; a port answered by
another process than the one launched (an impostor that bound it while the server loaded) is the
cause ``impostor``, checked before anything but /health reaches the server. Every launch is
guarded by a watchdog that stops it if this process dies without doing so. ``stop_all()`` stops
every server this process still holds (for a signal handler). Only ``containers`` and ``images``
import ``docker`` (an import contract checks it), and only when docker is actually used. What
differs between engines (readiness after /health, the prefix-cache flush, their out-of-memory
words) comes from ``spec.engine``, a ``ServedEngine`` that ``recipe_ledger.engines`` provides.

Modules:
  spec        LaunchSpec: what to launch, shared by both launchers; ServedEngine: what it needs
              from the engine it serves
  process     ProcessLauncher: ``vllm serve ...`` (or any command) as a process group
  containers  DockerLauncher: the seed's ``docker run`` shape through the docker SDK
  images      what the daemon knows of an image: id, repository digests, labels
  server      RunningServer: what both launchers hand back
  health      readiness: poll the health URL until 200, exit, or timeout
  ports       is a TCP port free, before a launch and after a teardown
  failures    BootFailure and the pure classifier of a boot log into a cause (with the engine's words)
  registry    every live server of this process, for ``stop_all`` from a signal handler
  guard       Guard: the watchdog of one launch, started before the server, released after teardown
  watchdog    the watchdog process: when ledger dies (kill -9 too) it stops the launch's processes
  owner       whether the socket listening on the port belongs to the launched tree (no impostor)
  procs       the /proc process table: a pid's identity, tree, launch tag and sockets
"""

from recipe_ledger.launch.containers import DockerLauncher, DockerServer, cleanup_containers
from recipe_ledger.launch.failures import BOOT_CAUSES, BootCause, BootFailure, classify_boot_failure
from recipe_ledger.launch.ports import ensure_port_free, port_is_free, wait_port_free
from recipe_ledger.launch.process import ProcessLauncher, ProcessServer
from recipe_ledger.launch.registry import live_servers, stop_all
from recipe_ledger.launch.server import RunningServer
from recipe_ledger.launch.spec import LaunchSpec, ServedEngine

__all__ = [
    "BOOT_CAUSES",
    "BootCause",
    "BootFailure",
    "DockerLauncher",
    "DockerServer",
    "LaunchSpec",
    "ProcessLauncher",
    "ProcessServer",
    "RunningServer",
    "ServedEngine",
    "classify_boot_failure",
    "cleanup_containers",
    "ensure_port_free",
    "live_servers",
    "port_is_free",
    "stop_all",
    "wait_port_free",
]
