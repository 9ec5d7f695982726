"""Calling a tool on a tool server, and a supervised local server that is restarted when it dies.

:class:`HttpToolTransport` talks to any ``vista tool-server`` (``url``).  With a
:class:`LocalToolServer` (no ``url`` given) the transport also owns the server process: when a
call finds it dead (killed, crashed, OOM) the server is started again and the call that was lost
comes back to the model as an error result, so the rollout goes on.  A server someone else runs
is theirs to restart (systemd, Kubernetes); calls to it fail as error results until it is back.

A server at ``url`` may be down when a run starts or go away mid-episode: a call that cannot even
connect is retried a few times (it never reached the server, so it cannot run twice) and then comes
back as an error result that names the url, while the episode goes on; the next call tries again.
A transport made while the server was down describes the tool from this process's own registry
(or, if the tool is not installed here, with an open argument schema) and takes the server's
schema once the server answers.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import httpx
import msgpack
from vista_plugin_envserver.codec import CONTENT_TYPE, CodecError

import vista_rl
from vista_plugin_toolserve.wire import decode_result, encode_call
from vista_rl import Tool, ToolContext, ToolResult, VistaError

TOKEN_ENV_VAR = "VISTA_TOOL_TOKEN"
logger = logging.getLogger(__name__)


class ToolServerError(VistaError):
    """A tool server could not be started or reached."""


class ToolServerUnreachable(ToolServerError):  # noqa: N818 - a kind of ToolServerError, named for what happened
    """No connection to the tool server could be made (down, restarting, wrong host or port)."""


def offline_schema(tool_id: str, url: str) -> dict[str, Any]:
    """The OpenAI function entry of ``tool_id`` without asking its server: from this process's
    registry when the tool is installed here (the same schema the server would give), else a
    placeholder whose open ``parameters`` let any call through to be validated where the tool lives."""
    try:
        target = vista_rl.host().spec("tools", tool_id).load()
        if isinstance(target, type) and issubclass(target, Tool):
            # openai_schema reads only class attributes (name, description, Arguments): no instance,
            # so no weights are loaded just to describe the tool.
            return dict(Tool.openai_schema(target))  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - not installed here, or a factory: fall back to a placeholder
        logger.debug("no local schema for %s: %s", tool_id, exc)
    name = tool_id.rsplit("/", 1)[-1].replace("-", "_")
    return {"type": "function", "function": {
        "name": name,
        "description": f"{tool_id} on the tool server at {url} (it was unreachable when this run started, "
                       "so its arguments are not listed here).",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class LocalToolServer:
    """A ``vista_plugin_toolserve.http_server`` child process serving ``tool`` (made with ``config``)."""

    def __init__(self, tool: str, config: dict[str, Any] | None = None, *, host: str = "127.0.0.1",
                 threads: int = 16, start_timeout_s: float = 300.0) -> None:
        import json

        self.tool = tool
        self.config_json = json.dumps(config or {})
        self.host = host
        self.threads = threads
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._log_file: Any = None
        self._start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> None:
        self.port = free_port(self.host)
        command = [sys.executable, "-m", "vista_plugin_toolserve.http_server", "--tool", self.tool,
                   "--config", self.config_json, "--host", self.host, "--port", str(self.port),
                   "--threads", str(self.threads), "--parent-pid", str(os.getpid())]
        # stderr to a file, not a pipe: nobody drains a pipe after start-up, and a full one blocks the server
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server process
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._log_file)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ToolServerError(f"the tool server for {self.tool!r} exited on start:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.close()
        raise ToolServerError(f"the tool server for {self.tool!r} did not start within {self.start_timeout_s:g}s")

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the server's stderr (start-up errors, tracebacks)."""
        if self._log_file is None:
            return ""
        self._log_file.seek(0, os.SEEK_END)
        size = self._log_file.tell()
        self._log_file.seek(max(0, size - limit))
        return self._log_file.read().decode(errors="replace")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    def ensure_running(self, grace_s: float = 2.0) -> bool:
        """Start the server again if it died or stopped answering; ``True`` when it was restarted.
        A dropped connection can arrive before the kernel reports the exit, hence ``grace_s``."""
        with self._lock:
            deadline = time.monotonic() + grace_s
            while self.alive() and time.monotonic() < deadline:
                if self.healthy():
                    return False
                time.sleep(0.1)
            if self._process is not None and self._process.poll() is None:
                self._process.kill()  # alive but not answering: a hung server is replaced too
                self._process.wait(timeout=10)
            self.restarts += 1
            self._start()
            return True

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class HttpToolTransport:
    """Calls ``tool`` on the server at ``url`` (or on ``server``, which it restarts when dead).

    ``connect_retries`` is how many more times a call that cannot connect to a server at ``url``
    is tried (after ``retry_backoff_s``, doubling) before it returns its error result;
    ``connect_timeout_s`` bounds each connection attempt (a black-holed host), ``timeout_s`` the call."""

    def __init__(self, tool: str, url: str | None = None, *, server: LocalToolServer | None = None,
                 token: str | None = None, timeout_s: float = 120.0, max_connections: int = 64,
                 connect_retries: int = 2, retry_backoff_s: float = 0.25, connect_timeout_s: float = 5.0) -> None:
        if (url is None) == (server is None):
            raise ValueError("give exactly one of url= (a running tool server) or server= (a managed one)")
        if connect_retries < 0 or retry_backoff_s < 0:
            raise ValueError("connect_retries and retry_backoff_s must be >= 0")
        self.tool_id = tool
        self.server = server
        self._url = url
        self.connect_retries = connect_retries
        self.retry_backoff_s = retry_backoff_s
        token = token or os.environ.get(TOKEN_ENV_VAR) or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, connect_timeout_s))
        self._client = httpx.Client(headers=headers, timeout=timeout,
                                    limits=httpx.Limits(max_connections=max_connections))
        try:
            self._schema = self._fetch_schema()
            self.schema_from_server = True
        except ToolServerUnreachable as exc:
            if server is not None:  # a managed server that just passed /health and then vanished
                raise
            logger.warning("%s; %s calls return error results until it answers", exc, tool)
            self._schema = offline_schema(tool, self.url)
            self.schema_from_server = False

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else str(self._url)

    def _fetch_schema(self) -> dict[str, Any]:
        try:
            response = self._client.get(f"{self.url}/tools")
        except httpx.TransportError as exc:
            raise ToolServerUnreachable(f"cannot reach the tool server at {self.url}: {exc}") from None
        if response.status_code != 200:
            raise ToolServerError(f"tool server at {self.url} answered {response.status_code}: {response.text[:200]}")
        tools = response.json().get("tools", {})
        if self.tool_id not in tools:
            raise ToolServerError(f"the tool server at {self.url} does not host {self.tool_id!r} "
                                  f"(it hosts {sorted(tools)})")
        return dict(tools[self.tool_id])

    def schema(self) -> dict[str, Any]:
        return self._schema

    def _adopt_server_schema(self) -> None:
        """After the first call that reached a server that was down at start, take its schema
        (the function name stays the one prompts already use)."""
        try:
            fresh = self._fetch_schema()
        except ToolServerError as exc:
            logger.debug("keeping the offline schema of %s: %s", self.tool_id, exc)
            return
        name = self._schema.get("function", {}).get("name")
        if name and isinstance(fresh.get("function"), dict):
            fresh["function"] = {**fresh["function"], "name": name}
        self._schema, self.schema_from_server = fresh, True

    def call(self, arguments: Any, context: ToolContext) -> ToolResult:
        body = msgpack.packb(encode_call(self.tool_id, arguments, context), use_bin_type=True)
        retries = 0 if self.server is not None else self.connect_retries
        for attempt in range(retries + 1):
            try:
                response = self._client.post(f"{self.url}/call", content=body,
                                             headers={"content-type": CONTENT_TYPE})
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # the call never reached the server
                if self.server is not None:
                    return self._lost(exc)
                if attempt == retries:
                    return self._unreachable(exc, retries)
                time.sleep(self.retry_backoff_s * 2 ** attempt)
            except httpx.TimeoutException:
                return ToolResult(text=f"Error: {self.tool_id} did not answer in time.", error=True,
                                  metadata={"timeout": True})
            except httpx.TransportError as exc:
                return self._lost(exc)
        if not self.schema_from_server:
            self._adopt_server_schema()
        if response.status_code != 200:
            message = response.text[:300]
            return ToolResult(text=f"Error: the {self.tool_id} server refused the call ({response.status_code}): "
                                   f"{message}", error=True)
        try:
            return decode_result(msgpack.unpackb(response.content, raw=False))
        except (CodecError, ValueError, msgpack.UnpackException) as exc:
            return ToolResult(text=f"Error: unreadable result from the {self.tool_id} server: {exc}", error=True)

    def _unreachable(self, exc: Exception, retries: int) -> ToolResult:
        return ToolResult(
            text=f"Error: cannot reach the tool server at {self.url} for {self.tool_id} (retried {retries} times: "
                 f"{type(exc).__name__}: {exc}). The call did not run; the server may be down or restarting. "
                 "Call the tool again later or go on without it.",
            error=True, metadata={"unreachable": True, "url": self.url, "retries": retries})

    def _lost(self, exc: Exception) -> ToolResult:
        note = ""
        if self.server is not None:
            try:
                if self.server.ensure_running():
                    note = " The server has been restarted; call the tool again."
            except ToolServerError as restart_error:
                note = f" Restarting it failed: {restart_error}"
        return ToolResult(text=f"Error: the {self.tool_id} server was lost during this call "
                               f"({type(exc).__name__}).{note}", error=True, metadata={"worker_lost": True})

    def close(self) -> None:
        self._client.close()
        if self.server is not None:
            self.server.close()
