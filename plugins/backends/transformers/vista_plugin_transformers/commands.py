"""``vista model init-tiny`` and ``vista serve``.  Heavy imports (torch, transformers, uvicorn) happen
inside the commands, so ``vista --help`` stays fast."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("init-tiny")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--family", "--arch", "arch", default="qwen2_5_vl", show_default=True,
              help="VLM family (architecture) of the tiny model: qwen2_5_vl or internvl.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random weights.")
def init_tiny_command(out_dir: Path, arch: str, seed: int) -> None:
    """Write a tiny randomly initialised VLM (weights, tokenizer, processor) to OUT_DIR."""
    from vista_rl_sdk.tiny_models import ARCHITECTURES, init_tiny_model

    if arch not in ARCHITECTURES:
        raise click.BadParameter(f"{arch!r}; choose one of {', '.join(ARCHITECTURES)}", param_hint="--family")
    path = init_tiny_model(out_dir, arch=arch, seed=seed)
    click.echo(f"tiny {arch} model (seed {seed}) written to {path}")


SERVE_TOKEN_ENV_VAR = "VISTA_SERVE_TOKEN"


@click.command("serve")
@click.argument("model_dir")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Anything but loopback exposes the model to the network: use --token.")
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:1 ...")
@click.option("--model-name", default=None, help="Name reported at /v1/models (default: MODEL_DIR).")
@click.option("--batch-window-ms", default=20.0, show_default=True, type=click.FloatRange(min=0.0),
              help="How long the first waiting request waits for others to join its batch.")
@click.option("--max-batch-size", default=64, show_default=True, type=click.IntRange(1))
@click.option("--max-tokens", "default_max_tokens", default=256, show_default=True, type=click.IntRange(1),
              help="max_tokens when a request gives none.")
@click.option("--max-tokens-limit", default=4096, show_default=True, type=click.IntRange(1),
              help="Largest max_tokens a request may ask for (400 past it).")
@click.option("--max-model-len", default=None, type=click.IntRange(1),
              help="Context length (prompt + max_tokens); default: the model's max_position_embeddings.")
@click.option("--max-image-pixels", default=4096 * 4096, show_default=True, type=click.IntRange(1),
              help="Largest image (width x height) a request may send (400 past it).")
@click.option("--max-request-pixels", default=2 * 4096 * 4096, show_default=True, type=click.IntRange(1),
              help="Pixels of all a request's images together (400 past it).")
@click.option("--max-images", default=32, show_default=True, type=click.IntRange(0),
              help="Images one request may send (400 past it).")
@click.option("--max-body-mb", default=64.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Largest request body in MB (413 past it, refused while it streams in).")
@click.option("--max-prompts", default=16, show_default=True, type=click.IntRange(1),
              help="Text prompts one /v1/completions request may list (400 past it).")
@click.option("--max-queued-rows", default=1024, show_default=True, type=click.IntRange(1),
              help="Generations (prompts x n) that may wait for the model; past it a request gets 503 with "
                   "Retry-After. A client that disconnects has its queued or running generation cancelled.")
@click.option("--retry-after-s", default=2, show_default=True, type=click.IntRange(0),
              help="The Retry-After (seconds) of a 503 for a full queue.")
@click.option("--token", default=None, help=f"Require 'Authorization: Bearer TOKEN' (default: ${SERVE_TOKEN_ENV_VAR}).")
def serve_command(model_dir: str, host: str, port: int, device: str, model_name: str | None,
                  batch_window_ms: float, max_batch_size: int, default_max_tokens: int, max_tokens_limit: int,
                  max_model_len: int | None, max_image_pixels: int, max_request_pixels: int, max_images: int,
                  max_body_mb: float, max_prompts: int, max_queued_rows: int, retry_after_s: int,
                  token: str | None) -> None:
    """Serve MODEL_DIR with an OpenAI-compatible API (transformers backend): /v1/chat/completions
    (streaming, logprobs, top_logprobs) and /v1/completions for text prompts."""
    import os

    import uvicorn

    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.server import ServeLimits, create_app
    from vista_rl.limits import limit_decompression
    from vista_rl.serving import exposure_warning

    token = token or os.environ.get(SERVE_TOKEN_ENV_VAR) or None
    warning = exposure_warning(host, token, "use this model")
    if warning:
        click.secho(warning, fg="yellow", err=True)
    backend = TransformersBackend(path=model_dir, device=device, max_batch_size=max_batch_size)
    limits = ServeLimits(max_model_len=max_model_len, max_tokens_limit=max_tokens_limit,
                         max_image_pixels=max_image_pixels, max_request_pixels=max_request_pixels,
                         max_images=max_images, max_body_bytes=int(max_body_mb * 1024 * 1024),
                         max_prompts=max_prompts, max_queued_rows=max_queued_rows, retry_after_s=retry_after_s)
    limit_decompression(max_image_pixels)  # PIL's own bomb check, behind the header checks
    app = create_app(backend, model_name or model_dir, batch_window_ms=batch_window_ms,
                     max_batch_size=max_batch_size, default_max_tokens=default_max_tokens, limits=limits, token=token)
    context = limits.max_model_len or backend.max_model_len
    click.echo(f"serving {model_dir} on http://{host}:{port}/v1 (device {backend.device}, context {context} tokens"
               f"{', bearer token required' if token else ''})")
    uvicorn.run(app, host=host, port=port, log_level="warning")


def model_group(existing: click.Command | None) -> click.Group:
    """The ``vista model`` group (reusing one another plugin already added)."""
    if isinstance(existing, click.Group):
        return existing

    @click.group("model")
    def model() -> None:
        """Model utilities (tiny test models, ...)."""

    return model
