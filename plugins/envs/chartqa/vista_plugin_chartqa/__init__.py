"""Chart QA envs: unlimited synthetic charts with answers computed from their tables, and ChartQA
records.  Import-light: matplotlib loads when an env is made."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("chartqa/synthetic-v0", "vista_plugin_chartqa.env:SyntheticChartEnv",
             description="Seeded bar/grouped-bar/line/pie charts; value, extreme, difference, ratio, trend questions")
    register("chartqa/records-v0", "vista_plugin_chartqa.env:ChartRecordsEnv",
             description="ChartQA-format records judged with relaxed accuracy (5%)")
