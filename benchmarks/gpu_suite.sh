#!/usr/bin/env bash
# Issue 25's GPU figures in one run, on a bare GPU machine with no internet (about 6 minutes on an H100).
#
#   bash benchmarks/gpu_suite.sh            # OUT=/some/dir to keep the JSON (default /tmp/vista-gpu-suite)
#
# The machine has python3 with torch (CUDA), transformers, accelerate, peft, pillow, numpy, rich, pyyaml,
# click, jinja2 and pluggy, but not pydantic, TRL or datasets: those come as wheels carried in .whl/
# (see benchmarks/README.md, "GPU suite", for the download recipe), installed with --no-deps into
# $SITE.  The repository's own distributions are not installed: their source directories go on
# PYTHONPATH, and a dist-info with each one's entry points is written into $SITE so that plugin
# discovery (importlib.metadata entry points) finds them as if they were pip-installed.
#
# Then, each stage under its own time limit (a stage that fails or runs over is reported, the
# others still run):
#   1. benchmarks/train.py at Qwen2.5-0.5B's text shape, bf16: our GRPO step against TRL with and
#      without gradient checkpointing (TRL runs in this same python3), and our rollout tokens/s;
#   2. benchmarks/rollout.py --decode-only: generated tokens/s, static KV cache + compiled decode
#      step against the dynamic cache, same shape;
#   3. the main job (examples/frozenlake_grpo.yaml, tiny model) on the GPU for a few RL steps: its
#      per-step time, beside this repository's CPU figure;
#   4. a summary (ratios against the issue's targets) on stdout and in $OUT/summary.json.
# Everything needed to read the results is printed; the JSON files land in $OUT.
# Rehearse on a CPU: DEVICE=cpu PRECISION=fp32 SHAPE=tiny PY=/path/to/python bash benchmarks/gpu_suite.sh
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PY:-python3}
OUT=${OUT:-/tmp/vista-gpu-suite}
SITE=${SITE:-/tmp/site}
WHL=${WHL:-.whl}
DEVICE=${DEVICE:-cuda}
PRECISION=${PRECISION:-bf16}
SHAPE=${SHAPE:-qwen2.5-0.5b}
TRAIN_ARGS=${TRAIN_ARGS:---steps 4 --repeats 2}
DECODE_ARGS=${DECODE_ARGS:---decode-calls 4}
MAIN_STEPS=${MAIN_STEPS:-8}
STAGES=${STAGES:-train decode main_job}
LIMIT_TRAIN=${LIMIT_TRAIN:-230}
LIMIT_DECODE=${LIMIT_DECODE:-110}
LIMIT_MAIN=${LIMIT_MAIN:-90}
mkdir -p "$OUT" "$SITE"
START=$(date +%s)
log() { echo "[gpu_suite +$(($(date +%s) - START))s] $*"; }

log "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -4
"$PY" -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__, '| transformers', transformers.__version__, '| cuda', torch.cuda.is_available())"

log "installing carried wheels from $WHL into $SITE"
if compgen -G "$WHL/*.whl" >/dev/null; then
  if [ "$(cd "$WHL" && ls ./*.whl)" = "$(cat "$SITE/.vista-wheels" 2>/dev/null)" ]; then
    log "same wheels as last time: kept"
  else
    "$PY" -m pip install -q --no-index --no-deps --disable-pip-version-check --upgrade --target "$SITE" "$WHL"/*.whl 2>&1 \
      | grep -v -i "warning: target directory" | tail -5
    (cd "$WHL" && ls ./*.whl) >"$SITE/.vista-wheels"
  fi
else
  log "no wheels in $WHL (fine if pydantic, trl and datasets are already importable)"
fi

log "repository packages on PYTHONPATH, entry points into $SITE"
PKG_PATH="$REPO/core:$REPO/sdk"
for dir in "$REPO"/plugins/*/*/ "$REPO"/contrib/*/; do
  [ -f "$dir/pyproject.toml" ] && PKG_PATH="$PKG_PATH:${dir%/}"
done
export PYTHONPATH="$SITE:$PKG_PATH:$REPO/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VISTA_BENCH_MODELS=${VISTA_BENCH_MODELS:-/tmp/vista-bench-models}  # shared by train.py and rollout.py; not under $OUT (1.4 GB)
"$PY" - "$SITE" "$REPO" <<'PY'
"""A dist-info per repository distribution (name, version, entry points), so importlib.metadata
finds the plugins' entry points as it would after pip install."""
import sys
import tomllib
from pathlib import Path

site, repo = Path(sys.argv[1]), Path(sys.argv[2])
made = 0
for project in [repo / "pyproject.toml", repo / "sdk" / "pyproject.toml", *sorted(repo.glob("plugins/*/*/pyproject.toml")),
                *sorted(repo.glob("contrib/*/pyproject.toml"))]:
    try:
        meta = tomllib.loads(project.read_text())["project"]
        name, version = meta["name"], meta.get("version", "0")
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        groups = dict(meta.get("entry-points", {}))
        if meta.get("scripts"):
            groups["console_scripts"] = meta["scripts"]
        lines = [f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in items.items())
                 for group, items in groups.items()]
        (info / "entry_points.txt").write_text("\n".join(lines))
        made += 1
    except Exception as exc:  # one unreadable pyproject is reported, the rest still register
        print(f"  {project}: {type(exc).__name__}: {exc}")
print(f"  {made} distributions registered")
PY

log "import check"
"$PY" - <<'PY'
import importlib
for name in ("pydantic", "torchvision", "trl", "datasets", "vista_rl", "vista_plugin_local", "vista_plugin_transformers"):
    try:
        module = importlib.import_module(name)
        print(f"  {name} {getattr(module, '__version__', '')}")
    except Exception as exc:  # report every missing piece at once
        print(f"  {name}: MISSING ({type(exc).__name__}: {exc})")
import vista_rl

vista_rl.host().load()  # a plugin that fails to import is reported on stderr
print("  env oddshape/odd-colour-v0:", type(vista_rl.make_env("oddshape/odd-colour-v0")).__name__)
PY

run_stage() {  # name limit_s out_file command...
  local name=$1 limit=$2 file=$3
  shift 3
  case " $STAGES " in *" $name "*) ;; *) log "$name: skipped (STAGES=$STAGES)"; return ;; esac
  log "$name (limit ${limit}s) -> $file"
  local began=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$file" 2>"$file.log"
  local code=$?
  echo "{\"stage\": \"$name\", \"exit\": $code, \"seconds\": $(($(date +%s) - began)), \"limit_s\": $limit}" >"$file.status"
  log "$name: exit $code after $(($(date +%s) - began))s"
  [ $code -eq 0 ] || { echo "--- $name stderr tail"; tail -25 "$file.log"; }
}

# shellcheck disable=SC2086
run_stage train "$LIMIT_TRAIN" "$OUT/train.json" "$PY" benchmarks/train.py --device "$DEVICE" \
  --precision "$PRECISION" --shape "$SHAPE" --trl-python "$PY" $TRAIN_ARGS
# shellcheck disable=SC2086
run_stage decode "$LIMIT_DECODE" "$OUT/decode.json" "$PY" benchmarks/rollout.py --decode-only --device "$DEVICE" \
  --precision "$PRECISION" --shape "$SHAPE" $DECODE_ARGS

MAIN_DIR="$OUT/main-job"
case " $STAGES " in
  *" main_job "*)
    rm -rf "$MAIN_DIR" && mkdir -p "$MAIN_DIR"
    "$PY" -c "import sys; from vista_rl_sdk.tiny_models import init_tiny_model as m; m(sys.argv[1], seed=0, min_pixels=28 * 28)" \
      "$MAIN_DIR/tiny-model" >/dev/null 2>&1 || log "main job: making the tiny model failed" ;;
esac
run_stage main_job "$LIMIT_MAIN" "$OUT/main_job.txt" "$PY" -c "from vista_rl.cli.main import main; main()" \
  train examples/frozenlake_grpo.yaml \
  --set "model.path=$MAIN_DIR/tiny-model" --set "output_dir=$MAIN_DIR/run" --set sft.steps=0 \
  --set "trainer.steps=$MAIN_STEPS" --set trainer.checkpoint_every=0 --set eval.at_start=false \
  --set eval.after_sft=false --set eval.seeds.count=16 --set "engine_config.local.device=$DEVICE"

log "summary"
"$PY" benchmarks/_gpu_summary.py "$OUT" | tee "$OUT/summary.json"
log "done in $(($(date +%s) - START))s; files in $OUT"
