"""What a remote client may put into an env's config: values, never code or host resources.

Why this exists: ``vista env-server`` hands a client's per-session config to the env's constructor.
A field that names code (``encoder: "os:abort"``) turns that into remote code execution, and a field
or record that names a host file (``records_path``, a record's ``images``) into a file-read and
file-existence oracle.  So there is ONE rule, applied here for every env, not a per-env list:

1. **Markers** an env config class puts on its fields with :data:`typing.Annotated`:

   - :class:`ServerOnly` (and its instances :data:`ImportTarget`, :data:`HostPath`,
     :data:`ServerArguments`): whoever runs the server sets it (``--set``); any client value,
     ``null`` included, is refused with 403 naming the key.  Nested models are walked, so a marked
     field inside a sub-model is refused as well.
   - :data:`ClientRecords`: a list of TaskRecord-shaped dicts.  Their text is data; their
     ``images`` are references the server resolves itself, inside a root its operator declared
     (:func:`resolve_record_image`), or inline ``data:image/...;base64,`` images.
   - :data:`PlainText`: free text (a question, a level map); exempt from the reference rule below.
   - :class:`NonCodePrefixes`: beside ``ImportTarget``, the value prefixes that name no code
     (``hf:``), for the run-config check of :mod:`vista_rl.import_targets`.

2. **A safe default for everything unmarked**, so a plugin that adds a ``str`` path field and forgets
   the marker is still covered: every client string (values and keys, at any depth) that reads like a
   reference is refused with 422 naming the key: a ``prefix:rest`` shape (``module:attr``,
   ``hf:name``, URLs, ``file:``, ``data:``, drive letters), an absolute or home path, or any path
   separator (which covers ``..`` steps and sub-folders).  What remains possible for an unmarked
   field is a bare file name, relative to the server's working directory, in an env that opens it:
   mark such fields :data:`HostPath`.

A config class is found from the env's class (:func:`config_class_of`: its ``config_class``
attribute, or a ``config`` class annotation); an env without one gets the default rule only.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Union

from PIL import Image
from pydantic import AliasChoices, AliasPath, BaseModel
from pydantic.fields import FieldInfo

from vista_rl.limits import ALLOWED_IMAGE_FORMATS

#: default cap on one record image (width x height), checked from the header before any decoding
MAX_RECORD_IMAGE_PIXELS = 4096 * 4096

_PREFIX = re.compile(r"^\s*[A-Za-z_][\w.+-]*:")
_DATA_URI = re.compile(r"^data:image/[\w.+-]+;base64,", re.IGNORECASE)


@dataclass(frozen=True)
class ServerOnly:
    """Marker: the field names code or a host resource, so only the server's operator may set it."""

    why: str = "is set only by whoever runs the server"


@dataclass(frozen=True)
class NonCodePrefixes:
    """Marker beside :data:`ImportTarget`: values that start with one of these prefixes name something
    other than code (``hf:`` a hub model), so :mod:`vista_rl.import_targets` does not count them."""

    prefixes: tuple[str, ...]


@dataclass(frozen=True)
class _PlainText:
    """Marker: free text, not a reference (exempt from the default reference rule)."""


@dataclass(frozen=True)
class _ClientRecords:
    """Marker: a list of task records whose ``images`` the server resolves inside its records root."""


ImportTarget = ServerOnly("names code to import")
HostPath = ServerOnly("names a file or folder on the server")
ServerArguments = ServerOnly("holds keyword arguments for code the env calls (they may name files or code)")
PlainText = _PlainText()
ClientRecords = _ClientRecords()


class ClientConfigRefused(ValueError):
    """A client's config value is not plain data; ``status`` is the HTTP answer (403 or 422)."""

    def __init__(self, status: int, key: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.key = key
        self.message = message


def config_class_of(env_factory: Any) -> type[BaseModel] | None:
    """The pydantic config class of an env class: its ``config_class`` attribute, else the type of a
    ``config`` class annotation; ``None`` when neither says (the default rule still applies)."""
    candidate = getattr(env_factory, "config_class", None)
    if _is_model(candidate):
        return typing.cast(type[BaseModel], candidate)
    try:
        hints = typing.get_type_hints(env_factory) if isinstance(env_factory, type) else {}
    except Exception:  # noqa: BLE001 - an unresolvable annotation just means "not declared"
        hints = {}
    declared = hints.get("config")
    return typing.cast(type[BaseModel], declared) if _is_model(declared) else None


def reference_problem(text: str) -> str | None:
    """Why a client string reads as a reference to code or a host resource, or ``None`` for a value."""
    if "\x00" in text:
        return "holds a NUL byte"
    if _PREFIX.match(text):
        return "has the 'prefix:rest' shape of an import path, URL or drive (code and host resources are server-only)"
    stripped = text.strip()
    if stripped.startswith(("/", "\\", "~")):
        return "is an absolute or home path on the server"
    if "/" in text or "\\" in text:
        return "holds a path separator; client config may not name files on the server"
    if stripped in (".", ".."):
        return "names a folder"
    return None


def check_client_config(config_class: type[BaseModel] | None, config: Mapping[str, Any], *,
                        records_root: str | Path | None = None,
                        max_image_pixels: int = MAX_RECORD_IMAGE_PIXELS) -> dict[str, Any]:
    """The client's ``config`` with record images resolved, or :class:`ClientConfigRefused`.

    ``config_class`` is the env's config model (``None``: default rule only); ``records_root`` is the
    folder client records' image paths resolve inside (``None``: inline images only)."""
    walker = _Walker(Path(records_root) if records_root is not None else None, max_image_pixels)
    return walker.model(config_class, config, "")


class _Walker:
    def __init__(self, records_root: Path | None, max_image_pixels: int) -> None:
        self.records_root = records_root
        self.max_image_pixels = max_image_pixels

    def model(self, model: type[BaseModel] | None, value: Mapping[str, Any], where: str) -> dict[str, Any]:
        fields = _fields_by_name(model) if model is not None else {}
        out: dict[str, Any] = {}
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            self.plain(key, here)
            field = fields.get(key) if isinstance(key, str) else None
            out[key] = self.field(field, item, here) if field is not None else self.plain(item, here)
        return out

    def field(self, field: FieldInfo, item: Any, where: str) -> Any:
        markers = _markers(field)
        server_only = next((m for m in markers if isinstance(m, ServerOnly)), None)
        if server_only is not None:
            raise ClientConfigRefused(403, where, f"config key {where!r} {server_only.why}; clients may not set it "
                                                  "(the server's operator can, with --set)")
        if any(isinstance(m, _ClientRecords) for m in markers):
            return self.records(item, where)
        if any(isinstance(m, _PlainText) for m in markers):
            return item
        return self.typed(field.annotation, item, where)

    def typed(self, annotation: Any, item: Any, where: str) -> Any:
        """Walk ``item`` along its declared type, so sub-models (alone, in unions, lists or dict
        values) get their own markers checked; anything else gets the default rule."""
        if _is_model(annotation):
            return self.model(annotation, item, where) if isinstance(item, Mapping) else self.plain(item, where)
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is typing.Annotated:
            return self.typed(args[0], item, where)
        if origin is Union or isinstance(annotation, types.UnionType):
            fitting = [arg for arg in args if _fits(arg, item)]
            for arg in fitting:
                item = self.typed(arg, item, where)
            return item if fitting else self.plain(item, where)
        if _fits(annotation, item) and isinstance(item, Mapping) and len(args) == 2:
            return {self.plain(key, where): self.typed(args[1], value, f"{where}.{key}") for key, value in item.items()}
        if _fits(annotation, item) and isinstance(item, (list, tuple)) and args:
            fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
            return [self.typed(args[index] if fixed and index < len(args) else args[0], value, f"{where}[{index}]")
                    for index, value in enumerate(item)]
        return self.plain(item, where)

    def plain(self, item: Any, where: str) -> Any:
        """The default rule: every string inside ``item`` (keys too) must not read as a reference."""
        stack = [(item, where)]
        while stack:
            value, here = stack.pop()
            if isinstance(value, str):
                problem = reference_problem(value)
                if problem:
                    raise ClientConfigRefused(422, here, f"config key {here!r}: value {_short(value)} {problem}")
            elif isinstance(value, Mapping):
                for key, inner in value.items():
                    stack.append((key, here))
                    stack.append((inner, f"{here}.{key}"))
            elif isinstance(value, (list, tuple)):
                stack.extend((inner, f"{here}[{index}]") for index, inner in enumerate(value))
        return item

    def records(self, item: Any, where: str) -> Any:
        if item is None:
            return None
        if not isinstance(item, list):
            raise ClientConfigRefused(422, where, f"config key {where!r} must be a list of records")
        out: list[Any] = []
        problems: list[str] = []
        for index, record in enumerate(item):
            try:
                out.append(self.record(record, f"{where}[{index}]"))
            except ClientConfigRefused as exc:  # every record is checked; the first few are named
                problems.append(exc.message)
        if problems:
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise ClientConfigRefused(422, where, "; ".join(problems[:5]) + more)
        return out

    def record(self, record: Any, where: str) -> Any:
        if not isinstance(record, Mapping):
            raise ClientConfigRefused(422, where, f"{where} is not a record (a map with id, question, images, ...)")
        label = f"record {where}" + (f" (id {_short(record['id'])})" if "id" in record else "")
        images = record.get("images", [])
        if not isinstance(images, list):
            raise ClientConfigRefused(422, where, f"{label}: images must be a list of image references")
        resolved = [resolve_record_image(ref, self.records_root, label, self.max_image_pixels) for ref in images]
        return {**record, "images": resolved}


def resolve_record_image(ref: Any, root: Path | None, label: str,
                         max_pixels: int = MAX_RECORD_IMAGE_PIXELS) -> str:
    """A client record's image reference as something the env may open: an inline
    ``data:image/...;base64,`` image (checked), or a relative path resolved inside ``root`` and
    returned as an absolute path.  Absolute paths, ``..`` steps and symlinks that lead out are
    refused; a missing file and an unreadable or non-image one get the SAME message, so a client
    cannot probe which files exist."""
    if not isinstance(ref, str):
        raise ClientConfigRefused(422, label, f"{label}: an image reference must be a string")
    if ref[:5].lower() == "data:":
        try:
            _check_image(io.BytesIO(_data_uri_bytes(ref)), max_pixels)
        except Exception:  # noqa: BLE001 - any decoding failure is the same refusal
            raise ClientConfigRefused(422, label, f"{label}: inline image is not a valid data:image/...;base64, "
                                                  f"image of at most {max_pixels:,} pixels") from None
        return ref
    if root is None:
        raise ClientConfigRefused(422, label, f"{label}: image {_short(ref)} is a file path, and this server has no "
                                              "records root (its operator sets one with --records-root DIR), so "
                                              "client records may carry only inline data:image/...;base64, images")
    posix, windows = PurePosixPath(ref), PureWindowsPath(ref)
    if not ref.strip() or "\x00" in ref:
        raise ClientConfigRefused(422, label, f"{label}: image path is empty or holds a NUL byte")
    if posix.is_absolute() or windows.is_absolute() or windows.drive or ref.startswith(("/", "\\", "~")):
        raise ClientConfigRefused(422, label, f"{label}: image {_short(ref)} is absolute; give a path relative to "
                                              "the server's records root")
    if ".." in posix.parts or ".." in windows.parts:
        raise ClientConfigRefused(422, label, f"{label}: image {_short(ref)} steps out with '..'")
    resolved_root = root.resolve()
    target = (resolved_root / ref).resolve()
    if not target.is_relative_to(resolved_root):
        raise ClientConfigRefused(422, label, f"{label}: image {_short(ref)} leads outside the records root "
                                              "through a symlink")
    # From here on, one message for missing, unreadable, non-image and oversized: no existence oracle.
    try:
        with target.open("rb") as handle:
            _check_image(handle, max_pixels)
    except Exception:  # noqa: BLE001 - see above
        raise ClientConfigRefused(422, label, f"{label}: image {_short(ref)} is not a readable image of at most "
                                              f"{max_pixels:,} pixels under the server's records root") from None
    return str(target)


def load_image_reference(ref: str, max_pixels: int = MAX_RECORD_IMAGE_PIXELS) -> Image.Image:
    """Open a record image (a file path or an inline ``data:image/...;base64,`` URI) as RGB, with its
    pixel count checked from the header before anything is decoded (no decompression bombs)."""
    inline = ref[:5].lower() == "data:"
    source: Any = io.BytesIO(_data_uri_bytes(ref)) if inline else ref
    # a client's inline bytes reach only the decoders servers accept (no EPS/PSD on client data)
    with Image.open(source, formats=ALLOWED_IMAGE_FORMATS if inline else None) as image:
        _check_pixels(image, max_pixels)
        return image.convert("RGB")


def _data_uri_bytes(ref: str) -> bytes:
    if not _DATA_URI.match(ref):
        raise ValueError("expected data:image/<type>;base64,<payload>")
    try:
        return base64.b64decode(ref.partition(",")[2], validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 payload: {exc}") from None


def _check_pixels(image: Image.Image, max_pixels: int) -> None:
    width, height = image.size
    if width * height > max_pixels:
        raise ValueError(f"a {width}x{height} image is over the limit of {max_pixels:,} pixels")


def _check_image(handle: Any, max_pixels: int) -> None:
    with Image.open(handle, formats=ALLOWED_IMAGE_FORMATS) as image:  # only the decoders servers accept
        _check_pixels(image, max_pixels)
        image.verify()


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _fields_by_name(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """Fields by name and by alias (a client may use either)."""
    out: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        out[name] = field
        for alias in _alias_names(field):
            out[alias] = field
    return out


def _alias_names(field: FieldInfo) -> list[str]:
    """Every top-level key that populates the field: ``alias``, ``validation_alias`` and each of
    ``AliasChoices`` (the first step of an ``AliasPath``)."""
    names: list[str] = []
    pending: list[Any] = [field.alias, field.validation_alias]
    while pending:
        alias = pending.pop()
        if isinstance(alias, str):
            names.append(alias)
        elif isinstance(alias, AliasChoices):
            pending.extend(alias.choices)
        elif isinstance(alias, AliasPath) and alias.path and isinstance(alias.path[0], str):
            names.append(alias.path[0])
    return names


def _markers(field: FieldInfo) -> list[Any]:
    """The field's Annotated metadata plus any Annotated metadata nested in its type
    (``list[Annotated[str, HostPath]]``)."""
    found = list(field.metadata)
    stack: list[Any] = [field.annotation]
    while stack:
        annotation = stack.pop()
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is typing.Annotated:
            found.extend(args[1:])
            stack.append(args[0])
        else:
            stack.extend(args)
    return found


def _fits(annotation: Any, item: Any) -> bool:
    """Whether a container ``item`` has the shape ``annotation`` declares (for picking union arms)."""
    origin = typing.get_origin(annotation)
    if isinstance(item, Mapping):
        return _is_model(annotation) or origin in (dict, Mapping, typing.Mapping)
    if isinstance(item, (list, tuple)):
        return origin in (list, tuple, set, frozenset, Sequence, typing.Sequence)
    return False
