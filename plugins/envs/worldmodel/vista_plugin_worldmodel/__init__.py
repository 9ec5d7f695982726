"""VAGEN's reasoning rewards for VISTA: grounding (``<observation>`` vs the state before the turn) and
world modeling (``<prediction>`` vs the state after it), scored by rules or by an LLM judge, and the
state-reward env wrapper that puts them into each turn's reward.  Import-light: judges, the judge
service and the wrapper load only when made."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_judges(register: vista_rl.RegisterJudge) -> None:
    register("worldmodel/grounding", "vista_plugin_worldmodel.rule_judge:GroundingRuleJudge",
             description="VAGEN grounding reward by rules: <observation> text read into relations, F1 vs the "
                         "state before the turn")
    register("worldmodel/worldmodeling", "vista_plugin_worldmodel.rule_judge:WorldModelingRuleJudge",
             description="VAGEN world-modeling reward by rules: <prediction> text read into relations, F1 vs the "
                         "state after the turn")
    register("worldmodel/grounding-llm", "vista_plugin_worldmodel.llm_judge:GroundingLLMJudge",
             description="VAGEN grounding reward by an LLM judge (any model backend; YES/NO or parse-to-JSON)")
    register("worldmodel/worldmodeling-llm", "vista_plugin_worldmodel.llm_judge:WorldModelingLLMJudge",
             description="VAGEN world-modeling reward by an LLM judge (any model backend; YES/NO or parse-to-JSON)")


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("worldmodel/state-reward-v0", "vista_plugin_worldmodel.env:StateRewardEnv",
             description="Any env + VAGEN's grounding/world-modeling rewards per turn (env=ID, config={...}, "
                         "use_state_reward, *_reward_weight, *_judge)")
