"""Guards shared by VISTA's HTTP servers (``vista env-server``, ``vista serve``), in one place.

- :class:`BearerAuth`: a pure ASGI middleware (no framework import, so the core stays
  dependency-free): every route but the ones named open (``/health``, for load-balancer probes)
  needs ``Authorization: Bearer TOKEN``.  Guarding at the ASGI layer, not per route, is what keeps
  framework routes such as FastAPI's ``/docs`` and ``/openapi.json`` from being left open.
- :func:`exposure_warning`: the warning for a non-loopback bind without a token.
- :func:`nesting_depth` and :func:`short`: bounding hostile request bodies (a JSON body nested
  100,000 deep, a value whose repr is a megabyte) without recursion.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import reprlib
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, token: str | None, what: str) -> str | None:
    """The warning to print when a server binds beyond loopback with no token (else None)."""
    if token or is_loopback(host):
        return None
    return (f"warning: serving on {host} without --token: anyone who can reach this port can {what}; "
            "set --token (or bind 127.0.0.1)")


def bearer_problem(header: str | None, token: str) -> str | None:
    """Why the ``Authorization`` header does not carry ``token`` (None when it does).  The compare
    is constant-time, so the token cannot be guessed byte by byte from response times."""
    scheme, _, presented = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return "missing bearer token: send 'Authorization: Bearer <token>'"
    if not hmac.compare_digest(presented.strip().encode(), token.encode()):
        return "wrong bearer token"
    return None


class BearerAuth:
    """ASGI middleware: HTTP requests to any path outside ``open_paths`` need the bearer token.

    ``error_body`` shapes the 401 body so each server keeps its own error format (the env server's
    ``{"error": ...}``, OpenAI's ``{"error": {"message": ...}}``)."""

    def __init__(self, app: ASGIApp, token: str, open_paths: Iterable[str] = ("/health",),
                 error_body: Callable[[str], Any] | None = None) -> None:
        if not token:
            raise ValueError("BearerAuth needs a non-empty token")
        self.app = app
        self.token = token
        self.open_paths = frozenset(open_paths)
        self.error_body = error_body or (lambda message: {"error": message, "status": 401})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                header = value.decode("latin-1")
                break
        problem = bearer_problem(header, self.token)
        if problem is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps(self.error_body(problem)).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})


_CONTAINERS = (dict, list, tuple)


def nesting_depth(value: Any, stop_at: int) -> int:
    """How deep lists and maps nest in ``value``: the depth of its deepest value, ``[1]`` being 1
    (iterative, so no input can exhaust the stack; stops counting once past ``stop_at``).

    Level by level, and only containers are visited one by one: a flat list's element types are
    read by ``map``/``set`` in C, so an 8 MB body holding a 7M-element list costs 0.1 s here, not
    the 11 s a walk over every element cost (on the server's event loop)."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level and depth <= stop_at:
        below: list[Any] = []
        children_seen = False
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            if not children:
                continue
            children_seen = True
            if any(issubclass(kind, _CONTAINERS) for kind in set(map(type, children))):
                below.extend(child for child in children if isinstance(child, _CONTAINERS))
        if not children_seen:
            break
        depth += 1
        level = below
    return depth


def short(value: Any, limit: int = 80) -> str:
    """A bounded repr for error messages (a hostile value can be huge or deeply nested)."""
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = limit
    shortener.maxlevel = 3
    text = shortener.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class BodyTooLarge(ValueError):
    """A request body over the server's byte limit (the server answers 413 with this message)."""


async def read_limited_body(stream: Any, declared_length: str | None, max_bytes: int) -> bytes:
    """Read a request body (an async iterator of byte chunks, e.g. Starlette's ``request.stream()``)
    and stop as soon as it passes ``max_bytes``, so a huge upload never sits in memory whole.
    A declared ``Content-Length`` over the limit is refused before reading anything."""
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > max_bytes:
        raise BodyTooLarge(f"body of {declared_length} bytes exceeds the limit of {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
