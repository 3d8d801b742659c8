"""Helpers shared by the test suites (importable as ``helpers``: pytest's ``pythonpath`` names tests/).

- resources: ``require(resource)``, the one switch between skipping and failing on a missing resource
- net: free ports and whether anything listens on one
- waiting: ``wait_for``, polling a condition with a deadline instead of sleeping on luck
- fake_server: a stdlib stand-in for ``vllm serve`` (run as a script: ``FAKE_SERVER``)
- fake_chat: an in-process stand-in for ``/v1/chat/completions`` answering as vLLM or SGLang do
- images: the tiny ``FROM scratch`` busybox images the docker tests build
- projects: projects on disk built from this repository (the fixed ledger prefix, planted input)
- pipeline: the stand-in pipeline of ``ledger run`` (a git repository, a probe script, the CLI)
- plugins: a plugin distribution (modules + entry points) written into a folder for importlib.metadata
- seedtext: the seed documents (tests/fixtures/seeds/) by line, and the figures a line states
"""

from pathlib import Path

FAKE_SERVER = Path(__file__).with_name("fake_server.py")
