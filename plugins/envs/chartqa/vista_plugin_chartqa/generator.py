"""Seeded synthetic charts: a random table, a matplotlib (Agg) rendering of it, and a question whose
answer is computed from the table, so data is unlimited and every answer is verifiable.

Everything comes from ``random.Random(seed)``; figures are built with the object API (no pyplot
global state), so generation is deterministic and thread-safe.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from typing import Literal

from PIL import Image

ChartType = Literal["bar", "grouped_bar", "line", "pie"]
CHART_TYPES: tuple[ChartType, ...] = ("bar", "grouped_bar", "line", "pie")
QUESTION_TYPES = ("value", "max", "min", "difference", "ratio", "average", "trend", "compare", "share")

TOPICS = [
    ("Fruit sales", "Fruit", "Sales (tonnes)", ["Apples", "Bananas", "Cherries", "Grapes", "Lemons", "Mangoes", "Pears"]),
    ("Internet users by country", "Country", "Users (%)", ["Brazil", "Canada", "France", "Japan", "Kenya", "Mexico", "Spain"]),
    ("Museum visitors", "City", "Visitors (thousands)", ["Berlin", "Cairo", "Dublin", "Lima", "Oslo", "Paris", "Rome"]),
    ("Energy mix", "Source", "Share of output (%)", ["Coal", "Gas", "Hydro", "Nuclear", "Solar", "Wind"]),
]
SERIES_NAMES = [("Men", "Women"), ("Online", "Retail"), ("North", "South", "West"), ("Product A", "Product B")]
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


@dataclass
class ChartTable:
    title: str
    x_label: str
    y_label: str
    categories: list[str]
    series: dict[str, list[float]]
    decimals: int

    def value(self, series: str, category: str) -> float:
        return self.series[series][self.categories.index(category)]

    def fmt(self, value: float, decimals: int | None = None) -> str:
        places = self.decimals if decimals is None else decimals
        text = f"{value:.{places}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass
class ChartQuestion:
    question: str
    answer: str
    kind: str
    reasoning: str
    facts: dict[str, float] = field(default_factory=dict)


@dataclass
class ChartSample:
    image: Image.Image
    table: ChartTable
    question: ChartQuestion
    chart_type: ChartType


def _values(rng: random.Random, count: int, decimals: int) -> list[float]:
    """Distinct values so extremes and comparisons have one answer."""
    while True:
        values = [round(rng.uniform(8, 95), decimals) for _ in range(count)]
        if len(set(values)) == count and min(values) > 0:
            return values


def random_table(rng: random.Random, chart_type: ChartType) -> ChartTable:
    title, x_label, y_label, pool = rng.choice(TOPICS)
    decimals = rng.choice([0, 1])
    if chart_type == "line":
        start = rng.randint(2005, 2016)
        categories = [str(year) for year in range(start, start + rng.randint(5, 8))]
        x_label = "Year"
    else:
        categories = sorted(rng.sample(pool, rng.randint(3, 6) if chart_type == "pie" else rng.randint(4, 6)))
    if chart_type == "grouped_bar" or (chart_type == "line" and rng.random() < 0.5):
        names = rng.choice(SERIES_NAMES)
    else:
        names = (y_label.split(" (")[0],)
    series = {name: _values(rng, len(categories), decimals) for name in names}
    return ChartTable(title, x_label, y_label, categories, series, decimals)


def render(table: ChartTable, chart_type: ChartType, size: tuple[int, int] = (640, 480)) -> Image.Image:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    dpi = 100
    figure = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    names = list(table.series)
    if chart_type == "pie":
        values = table.series[names[0]]
        axes.pie(values, labels=table.categories, colors=PALETTE[: len(values)], startangle=90, counterclock=False,
                 autopct="%1.1f%%", textprops={"fontsize": 11})
        axes.set_aspect("equal")
    elif chart_type == "line":
        for index, name in enumerate(names):
            values = table.series[name]
            axes.plot(table.categories, values, marker="o", color=PALETTE[index], label=name)
            for x, y in zip(table.categories, values, strict=True):
                axes.annotate(table.fmt(y), (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=10)
        axes.set_xlabel(table.x_label)
        axes.set_ylabel(table.y_label)
        axes.set_ylim(0, max(max(v) for v in table.series.values()) * 1.2)
    else:
        width = 0.8 / len(names)
        for index, name in enumerate(names):
            positions = [i + (index - (len(names) - 1) / 2) * width for i in range(len(table.categories))]
            bars = axes.bar(positions, table.series[name], width=width * 0.95, color=PALETTE[index], label=name)
            axes.bar_label(bars, labels=[table.fmt(v) for v in table.series[name]], padding=2, fontsize=11)
        axes.set_xticks(range(len(table.categories)), table.categories)
        axes.set_xlabel(table.x_label)
        axes.set_ylabel(table.y_label)
        axes.set_ylim(0, max(max(v) for v in table.series.values()) * 1.18)
    if len(names) > 1:
        axes.legend(loc="upper left", fontsize=9)
    axes.set_title(table.title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    buffer.seek(0)
    with Image.open(buffer) as image:
        return image.convert("RGB")


def _applicable(chart_type: ChartType, table: ChartTable) -> list[str]:
    kinds = ["value", "max", "min", "difference", "ratio", "average"]
    if chart_type == "line":
        kinds.append("trend")
    if len(table.series) > 1:
        kinds.append("compare")
    if chart_type == "pie":
        kinds = ["share", "max", "min"]  # a pie shows shares, not the raw values
    return kinds


def make_question(rng: random.Random, table: ChartTable, chart_type: ChartType,
                  allowed: tuple[str, ...] | None = None) -> ChartQuestion:
    kinds = [kind for kind in _applicable(chart_type, table) if allowed is None or kind in allowed]
    if not kinds:
        raise ValueError(f"none of the question types {allowed} apply to a {chart_type} chart")
    kind = rng.choice(kinds)
    series = rng.choice(list(table.series))
    values = table.series[series]
    of = f" {series}" if len(table.series) > 1 else ""
    item = table.x_label.lower()
    a, b = rng.sample(table.categories, 2)
    va, vb = table.value(series, a), table.value(series, b)
    if kind == "value":
        return ChartQuestion(f"What is the{of} value for {a}?", table.fmt(va), kind,
                             f"The{of} label for {a} reads {table.fmt(va)}.", {a: va})
    if kind in ("max", "min"):
        pick = max if kind == "max" else min
        best = table.categories[values.index(pick(values))]
        word = "highest" if kind == "max" else "lowest"
        return ChartQuestion(f"Which {item} has the {word}{of} value?", best, kind,
                             f"Comparing all labels, {best} has the {word} value ({table.fmt(pick(values))}).")
    if kind == "difference":
        diff = abs(va - vb)
        return ChartQuestion(f"What is the difference between the{of} values for {a} and {b}?",
                             table.fmt(diff), kind, f"{table.fmt(va)} - {table.fmt(vb)} = {table.fmt(diff)} in absolute value.",
                             {a: va, b: vb})
    if kind == "ratio":
        return ChartQuestion(f"What is the ratio of the{of} value for {a} to that for {b}? Round to two decimals.",
                             f"{va / vb:.2f}", kind, f"{table.fmt(va)} / {table.fmt(vb)} = {va / vb:.2f}.", {a: va, b: vb})
    if kind == "average":
        mean = sum(values) / len(values)
        return ChartQuestion(f"What is the average{of} value across all {item} categories? Round to two decimals.",
                             f"{mean:.2f}", kind, f"The sum {table.fmt(sum(values), 2)} over {len(values)} values is {mean:.2f}.")
    if kind == "trend":
        first, last = values[0], values[-1]
        direction = "increase" if last > first else "decrease"
        return ChartQuestion(f"Did the{of} value increase or decrease from {table.categories[0]} to "
                             f"{table.categories[-1]}? Answer increase or decrease.", direction, kind,
                             f"It went from {table.fmt(first)} to {table.fmt(last)}.")
    if kind == "compare":
        names = list(table.series)
        s1, s2 = rng.sample(names, 2)
        higher = s1 if table.value(s1, a) > table.value(s2, a) else s2
        return ChartQuestion(f"In {a}, which is higher: {s1} or {s2}?", higher, kind,
                             f"In {a}, {s1} is {table.fmt(table.value(s1, a))} and {s2} is {table.fmt(table.value(s2, a))}.")
    share = 100 * va / sum(values)
    return ChartQuestion(f"What percentage of the total does {a} account for?", f"{share:.1f}", kind,
                         f"The slice for {a} is labelled {share:.1f}%.")


def generate(seed: int, chart_types: tuple[ChartType, ...] = CHART_TYPES,
             question_types: tuple[str, ...] | None = None, size: tuple[int, int] = (640, 480)) -> ChartSample:
    rng = random.Random(seed)
    chart_type = rng.choice(list(chart_types))
    table = random_table(rng, chart_type)
    question = make_question(rng, table, chart_type, question_types)
    return ChartSample(render(table, chart_type, size), table, question, chart_type)
