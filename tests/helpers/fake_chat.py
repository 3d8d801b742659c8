"""An in-process stand-in for an OpenAI ``/v1/chat/completions`` server, for instrument unit tests:
stdlib only, answering the way vLLM 0.32 or SGLang 0.5.23 answer (docs/research/issue-25-quality.md
section 3), one behaviour per field of ``ChatBehaviour``.

    with FakeChat(ChatBehaviour(engine="sglang", tool_parser=False)) as chat:
        post(chat.base_url + "/v1/chat/completions", ...)
        chat.requests  # the bodies it received, in order

- vLLM: errors nest (``{"error": {"message", "type", "param", "code"}}``); the reasoning parser's
  output goes to ``message.reasoning``, ``content`` null when all of it is reasoning; without a
  tool-call parser a required tool choice is a 400.
- SGLang: errors are flat (``{"object": "error", "message", ...}``); reasoning goes to
  ``message.reasoning_content`` and ``content`` is ``""``, never null; without a tool-call parser
  the constrained call comes back as JSON text in ``content``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

# vLLM 0.32's ReasoningEffort literal (SGLang's adds "ultra" and floats in [0, 0.99]).
VLLM_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
ANSWER_WORD = "323"


@dataclass
class ChatBehaviour:
    engine: Literal["vllm", "sglang"] = "vllm"
    tool_parser: bool = True  # launched with a tool-call parser
    thinking: bool = False  # a reasoning parser, thinking on by default (the qwen3 template's default)
    efforts: tuple[str, ...] = VLLM_EFFORTS  # reasoning_effort values it accepts; others get a 400
    status: int | None = None  # answer every request with this status (a 500: the engine failed)
    delay_s: float = 0.0  # wait before answering (past the client's timeout: a timeout)
    close_without_answer: bool = False  # drop the connection: no status at all
    tool_name: str | None = None  # call this tool instead of the one offered
    tool_arguments: str = '{"city": "Paris"}'  # the call's arguments as the parser returns them
    call_completes: bool = True  # False: the call runs out of tokens inside its JSON (a random model)
    requests: list[dict[str, Any]] = field(default_factory=list)


def error_body(behaviour: ChatBehaviour, status: int, message: str) -> dict[str, Any]:
    if behaviour.engine == "sglang":
        return {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": status}
    return {"error": {"message": message, "type": "Bad Request", "param": None, "code": status}}


def thinks(behaviour: ChatBehaviour, request: dict[str, Any]) -> bool:
    """Whether this request's text goes to the reasoning field: the parser on, thinking not turned
    off by ``chat_template_kwargs.enable_thinking: false`` or ``reasoning_effort: none``."""
    kwargs = request.get("chat_template_kwargs") or {}
    if not behaviour.thinking or kwargs.get("enable_thinking") is False:
        return False
    return request.get("reasoning_effort") != "none"


def answer(behaviour: ChatBehaviour, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and body the engine would answer ``request`` with."""
    if behaviour.status is not None:
        return behaviour.status, error_body(behaviour, behaviour.status, "EngineCore encountered an issue")
    effort = request.get("reasoning_effort")
    if effort is not None and effort not in behaviour.efforts:
        refusal = f"1 validation error: reasoning_effort should be one of {behaviour.efforts}, got {effort!r}"
        return 400, error_body(behaviour, 400, refusal)
    budget = int(request.get("max_tokens") or 16)
    text = " ".join([ANSWER_WORD] * budget)
    reasoning_field = "reasoning_content" if behaviour.engine == "sglang" else "reasoning"
    empty = "" if behaviour.engine == "sglang" else None
    message: dict[str, Any] = {"role": "assistant", "content": empty, "tool_calls": None}
    if request.get("tool_choice") == "required":
        return tool_answer(behaviour, request, message, text)
    if thinks(behaviour, request):
        message[reasoning_field] = text  # a trace that never closes: the budget runs out inside it
    else:
        message["content"] = text
    return 200, completion(request, message, "length")


def tool_answer(
    behaviour: ChatBehaviour, request: dict[str, Any], message: dict[str, Any], text: str
) -> tuple[int, dict[str, Any]]:
    name = behaviour.tool_name or request["tools"][0]["function"]["name"]
    if not behaviour.tool_parser and behaviour.engine == "vllm":
        refusal = 'tool_choice="required" requires --tool-call-parser to be set'
        return 400, error_body(behaviour, 400, refusal)
    if thinks(behaviour, request):
        # vLLM holds the call's grammar back until the trace ends: a trace that never ends spends
        # the whole budget on reasoning (seen on the tiny model with --reasoning-parser qwen3).
        message["reasoning_content" if behaviour.engine == "sglang" else "reasoning"] = text
        return 200, completion(request, message, "length")
    if not behaviour.call_completes:
        # A random model inside the call's grammar: whitespace until the budget is gone.
        message["content"] = f'<tool_call>{{"name": "{name}", "arguments": {{' + "\t" * 40
        return 200, completion(request, message, "length")
    if not behaviour.tool_parser:
        message["content"] = json.dumps([{"name": name, "parameters": {"city": "Paris"}}])
        return 200, completion(request, message, "stop")
    function = {"name": name, "arguments": behaviour.tool_arguments}
    message["tool_calls"] = [{"id": "call-0", "type": "function", "function": function}]
    return 200, completion(request, message, "tool_calls")


def completion(request: dict[str, Any], message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": int(request.get("max_tokens") or 16)},
    }


class FakeChat:
    """A ThreadingHTTPServer on a free loopback port, serving ``behaviour`` until the block ends."""

    def __init__(self, behaviour: ChatBehaviour | None = None):
        self.behaviour = behaviour or ChatBehaviour()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.behaviour.requests

    def __enter__(self) -> FakeChat:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        behaviour = self.behaviour

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                behaviour.requests.append(request)
                if behaviour.close_without_answer:
                    self.close_connection = True
                    return  # nothing written: the client sees the connection end with no status
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)
                if self.path != "/v1/chat/completions":
                    status, body = 404, error_body(behaviour, 404, f"no route {self.path}")
                else:
                    status, body = answer(behaviour, request)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt: str, *args: object) -> None:
                pass  # a unit test's output stays the test's

        return Handler
