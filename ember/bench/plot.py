"""Plots and comparisons of benchmark results.

- ``plot_versus(results, path)``: after a run (``--plot``), ember's speed relative to torch per case
  (torch time / ember time: right of the 1.0 line, ember is faster).
- ``compare_files(old, new, plot)``: ``python -m ember.bench compare old.json new.json --plot rel.png``
  prints, per benchmark, old and new medians and the relative performance ``(new_time / old_time)^-1``
  (above 1: the new version is faster), and draws them as horizontal bars around a vertical line at 1.0.

Plots are drawn with matplotlib's Agg canvas directly (no GUI backend and no change to the global
backend), so they work on headless machines.
"""
from __future__ import annotations

import sys

from .harness import Result, load_results, fmt_time, _SCALE

_FASTER = "#2a9d8f"
_SLOWER = "#e76f51"


def _figure(n_rows: int):
    try:
        from matplotlib.figure import Figure
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise RuntimeError("plotting benchmark results needs matplotlib: pip install matplotlib "
                           "(or pip install ember[plot])") from None
    fig = Figure(figsize=(9.0, 1.2 + 0.42 * max(n_rows, 1)), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _bars(fig, labels, values, notes, title, subtitle, xlabel):
    """Horizontal bars of ``values`` (relative performance) with a vertical line at 1.0."""
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(labels)))[::-1]          # first benchmark on top
    colors = [_FASTER if v >= 1.0 else _SLOWER for v in values]
    ax.barh(ys, values, color=colors, height=0.62, zorder=2)
    ax.axvline(1.0, color="black", linewidth=1.2, linestyle="--", zorder=3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=9)
    hi = max(values + [1.0]) if values else 1.0
    ax.set_xlim(0, hi * 1.6)          # room for the labels right of the longest bar
    for y, v, note in zip(ys, values, notes):
        ax.text(v + hi * 0.01, y, f"{v:.2f}x  {note}", va="center", fontsize=8, zorder=4,
                bbox=dict(facecolor="white", edgecolor="none", pad=1.0, alpha=0.85))
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    if subtitle:
        ax.set_title(subtitle, fontsize=8, loc="left", color="#555555")
    fig.tight_layout()
    return ax


def _short(sec: float, unit: str = "") -> str:
    # a readable unit for the value itself (the case's unit may not suit a slow machine)
    for u in ("s", "ms", "us", "ns"):
        if sec >= 1.0 / _SCALE[u] or u == "ns":
            return f"{sec * _SCALE[u]:.3g} {u}"
    return f"{sec:.3g} s"


def plot_versus(results: list[Result], path: str, variant: str = "ember", baseline: str = "torch",
                machine: dict | None = None) -> None:
    """Draw ``variant``'s speed relative to ``baseline`` per case (baseline time / variant time). Cases
    with more variants (the compile suite: ember, ember.compile, torch.compile) get one bar per variant."""
    by_case: dict = {}
    for r in results:
        by_case.setdefault((r.suite, r.name), {})[r.variant] = r
    labels, values, notes = [], [], []
    several = any(len(vs) > 2 for vs in by_case.values())
    for (suite, name), vs in by_case.items():
        if baseline not in vs:
            continue
        b = vs[baseline]
        others = [variant] + sorted(v for v in vs if v not in (variant, baseline))
        for v in others:
            if v not in vs:
                continue
            a = vs[v]
            labels.append(f"{suite}/{name}" + (f"  {v}" if several else ""))
            values.append(b.median / a.median)
            notes.append(f"{_short(a.median)} vs {_short(b.median)} per {a.per}")
    if not labels:
        raise ValueError(f"plot_versus: no case has both a '{variant}' and a '{baseline}' result")
    if machine is None:
        from .harness import machine_info
        machine = machine_info()
    fig = _figure(len(labels))
    who = "each variant" if several else variant
    _bars(fig, labels, values, notes, f"{who} vs {baseline} (eager): speed relative to {baseline} "
          f"(labels: {who} vs {baseline} median time)",
          _machine_line(machine), f"{baseline} time / {who} time   (right of 1.0: faster than {baseline})")
    fig.savefig(path)


def _machine_line(m: dict) -> str:
    if not m:
        return ""
    parts = [f"ember {m.get('ember', '?')}", f"torch {m.get('torch', '-')}", f"numpy {m.get('numpy', '?')}",
             f"Python {m.get('python', '?')}", f"{m.get('machine', '')} x{m.get('cpus', '?')}"]
    return ", ".join(parts) + (f"  ({m['time']})" if m.get("time") else "")


def compare(old: list[Result], new: list[Result], variant: str = "ember") -> list[tuple]:
    """Rows ``(label, old Result, new Result, relative)`` for benchmarks in both lists, where
    ``relative = (new_time / old_time) ** -1`` (above 1: new is faster)."""
    new_by = {(r.suite, r.name, r.variant): r for r in new}
    rows = []
    for r in old:
        if r.variant != variant:
            continue
        n = new_by.get((r.suite, r.name, r.variant))
        if n is None:
            continue
        rows.append((f"{r.suite}/{r.name}", r, n, (n.median / r.median) ** -1))
    return rows


def print_comparison(rows: list[tuple], file=None) -> None:
    """The comparison table: old and new medians, relative performance and the change in time."""
    file = file if file is not None else sys.stdout
    print(f"{'benchmark':40s} {'old':>14s} {'new':>14s} {'relative':>9s} {'time':>9s}", file=file)
    for label, o, n, rel in rows:
        change = (n.median / o.median - 1.0) * 100.0
        print(f"{label:40s} {fmt_time(o.median, o.unit):>14s} {fmt_time(n.median, n.unit):>14s} "
              f"{rel:8.2f}x {change:+8.1f}%", file=file)
    if rows:
        import math
        geo = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
        print(f"{'geometric mean':40s} {'':14s} {'':14s} {geo:8.2f}x", file=file)


def plot_comparison(rows: list[tuple], path: str, old_name: str = "old", new_name: str = "new",
                    machine: dict | None = None) -> None:
    """Horizontal bars of relative performance per benchmark, a vertical line at 1.0."""
    if not rows:
        raise ValueError("plot_comparison: no benchmark appears in both files")
    labels = [r[0] for r in rows]
    values = [r[3] for r in rows]
    notes = [f"{_short(o.median)} -> {_short(n.median)}" for _, o, n, _ in rows]
    fig = _figure(len(rows))
    _bars(fig, labels, values, notes, f"Relative performance: {new_name} vs {old_name}",
          _machine_line(machine or {}), "(new time / old time)$^{-1}$   (right of 1.0: faster than before)")
    fig.savefig(path)


def compare_files(old_path: str, new_path: str, plot: str | None = None, variant: str = "ember",
                  file=None) -> int:
    """``python -m ember.bench compare old.json new.json [--plot rel.png]``; returns an exit code."""
    file = file if file is not None else sys.stdout
    _, old = load_results(old_path)
    machine, new = load_results(new_path)
    rows = compare(old, new, variant)
    if not rows:
        print(f"no '{variant}' benchmark appears in both {old_path} and {new_path}", file=sys.stderr)
        return 1
    print_comparison(rows, file=file)
    if plot:
        import os
        plot_comparison(rows, plot, os.path.basename(old_path), os.path.basename(new_path), machine)
        print(f"saved {plot}", file=file)
    return 0
