"""Report plots as PNG bytes (matplotlib's Agg canvas; pyplot and its global state unused)."""

from __future__ import annotations

import io
import logging
from typing import Optional

from reports.analyse.aggregate import Report

log = logging.getLogger(__name__)

GROUPED_BAR_MODELS = 40
PLOT_NAMES = ("speedup_per_model", "geomean_speedup", "compile_time", "memory_compression")


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _speedup_per_model(report: Report) -> bytes:
    by_config: dict[str, dict[str, float]] = {}
    models: set[str] = set()
    for row in report.rows:
        if row.speedup_counts and row.record.config.stack != report.baseline:
            by_config.setdefault(row.record.config.label, {})[row.record.model_label] = row.speedup
            models.add(row.record.model_label)
    model_list = sorted(models)
    if len(model_list) <= GROUPED_BAR_MODELS:
        figure = _figure(10, max(3.0, 0.35 * len(model_list) * max(1, len(by_config)) ** 0.5 + 1.5))
        ax = figure.add_subplot()
        if not by_config:
            _empty(ax, "no speedups to show")
        else:
            height = 0.8 / len(by_config)
            for i, (label, values) in enumerate(sorted(by_config.items())):
                ys = [m + i * height for m, name in enumerate(model_list) if name in values]
                xs = [values[name] for name in model_list if name in values]
                ax.barh(ys, xs, height=height, label=label)
            ax.set_yticks([m + 0.4 - height / 2 for m in range(len(model_list))], model_list)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.axvline(1.0, color="black", linewidth=0.8)
            ax.legend(fontsize="small", loc="best")
    else:
        figure = _figure(10, 5)
        ax = figure.add_subplot()
        for label, values in sorted(by_config.items()):
            ordered = sorted(values.values())
            ax.plot([100.0 * (i + 0.5) / len(ordered) for i in range(len(ordered))], ordered, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("models, sorted by speedup (percentile)")
        ax.legend(fontsize="small", loc="best")
    ax.set_title(f"Speedup per model against {report.baseline} (higher is better)")
    if by_config:
        (ax.set_xlabel if len(model_list) <= GROUPED_BAR_MODELS else ax.set_ylabel)("speedup")
    return _png(figure)


def _config_bars(report: Report, values: list[tuple[str, Optional[float]]], title: str, xlabel: str,
                 line: Optional[float], log: bool = False, empty: str = "nothing to show") -> bytes:
    shown = [(label, v) for label, v in values if v is not None]
    figure = _figure(10, max(2.5, 0.4 * len(shown) + 1.2))
    ax = figure.add_subplot()
    if not shown:
        _empty(ax, empty)
    else:
        if log:
            # Bars on a log axis start at the axis' left edge; ratios below 1 stay visible.
            low = min(min(v for _, v in shown), line or 1.0) / 1.5
            ax.barh(range(len(shown)), [v - low for _, v in shown], left=low, color="tab:blue")
            ax.set_xscale("log")
            ax.set_xlim(left=low)
        else:
            ax.barh(range(len(shown)), [v for _, v in shown], color="tab:blue")
        ax.set_yticks(range(len(shown)), [label for label, _ in shown])
        ax.invert_yaxis()
        for i, (_, v) in enumerate(shown):
            ax.annotate(f"{v:.3g}", (v, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
        if line is not None:
            ax.axvline(line, color="black", linewidth=0.8)
        ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _png(figure)


def _compile_time(report: Report) -> bytes:
    configs = [s.config for s in report.summaries if s.mean_compile_time is not None]
    figure = _figure(10, max(2.5, 0.4 * len(configs) + 1.2))
    ax = figure.add_subplot()
    if not configs:
        _empty(ax, "no compile times")
    else:
        position = {c: i for i, c in enumerate(configs)}
        xs, ys = [], []
        for row in report.rows:
            record = row.record
            if record.ran and record.compile_time is not None and record.config in position:
                xs.append(record.compile_time)
                ys.append(position[record.config])
        ax.scatter(xs, ys, s=12, alpha=0.5, color="tab:orange", label="model")
        means = [s.mean_compile_time for s in report.summaries if s.mean_compile_time is not None]
        ax.scatter(means, range(len(configs)), marker="|", s=400, color="black", label="mean")
        ax.set_yticks(range(len(configs)), [c.label for c in configs])
        ax.set_ylim(-0.5, len(configs) - 0.5)
        ax.invert_yaxis()
        ax.set_xlabel("compile time (cold start - median iteration), s")
        ax.legend(fontsize="small", loc="best")
    ax.set_title("Compile time per configuration (lower is better)")
    return _png(figure)


def render_plots(report: Report) -> dict[str, bytes]:
    """PNG bytes per plot name; {} when matplotlib is not installed."""
    if not matplotlib_available():
        log.warning("matplotlib is not installed: no plots")
        return {}
    return {
        "speedup_per_model": _speedup_per_model(report),
        "geomean_speedup": _config_bars(
            report,
            [(s.config.label, s.geomean_speedup) for s in report.summaries],
            f"Geometric mean speedup against {report.baseline} (log scale; higher is better)",
            "geomean speedup",
            1.0,
            log=True,
        ),
        "compile_time": _compile_time(report),
        "memory_compression": _config_bars(
            report,
            [(s.config.label, s.compression_ratio) for s in report.summaries],
            f"Peak device memory compression ratio ({report.baseline} peak / peak; higher is better)",
            "compression ratio",
            1.0,
            log=True,
            empty="no device memory measured (on CPU only the process's RSS is known: no ratio)",
        ),
    }
