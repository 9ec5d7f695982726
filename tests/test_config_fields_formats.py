"""Client image bytes reach only the decoders a server accepts (:data:`vista_rl.limits.ALLOWED_IMAGE_FORMATS`).

Why: ``vista env-server`` decodes a client record's inline ``data:image/...;base64,`` image; the
MIME type in the URI is the client's word, so without a format list any PIL decoder (EPS, which
hands the bytes to Ghostscript on load; PSD) would run on client bytes."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from vista_rl import config_fields


def _data_uri(image_format: str) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(buffer, format=image_format)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def test_inline_png_is_accepted_and_loads() -> None:
    ref = _data_uri("PNG")
    assert config_fields.resolve_record_image(ref, None, "records[0].images[0]") == ref
    assert config_fields.load_image_reference(ref).size == (4, 4)


def test_inline_bytes_of_another_format_are_refused_whatever_the_uri_claims() -> None:
    ref = _data_uri("TIFF")  # a real image PIL decodes, labelled image/png, outside the accepted formats
    with pytest.raises(config_fields.ClientConfigRefused, match="not a valid data:image"):
        config_fields.resolve_record_image(ref, None, "records[0].images[0]")
    with pytest.raises(Exception, match="cannot identify"):
        config_fields.load_image_reference(ref)
