"""`mjfast.format_statistics`: `env.statistics()` as the plain-text table the CLI prints.

Owns the layout only (no env access): sections for the env, the plugins (with failures wrapped
inside their column), MuJoCo's warning counts, each plugin's custom figures (what its
`statistics()` returns) and the callback timings. Every line stays under `WIDTH` columns.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["WIDTH", "format_statistics", "one_line"]

WIDTH = 119
_INDENT = "  "
_GAP = "  "
_MIN_FAILURE_WIDTH = 24
_MIN_COLUMN = 12


def one_line(text: object) -> str:
    """`text` as a single line: MuJoCo's and pybind11's messages span several."""
    lines = [line.strip() for line in str(text).strip().splitlines()]
    # pybind11 appends the Python stack after an "At:" line; the message is what comes before.
    if "At:" in lines:
        lines = lines[: lines.index("At:")]
    return " ".join(line for line in lines if line)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int],
           wrap_last: bool = False) -> list[str]:
    """Aligned columns within `WIDTH`. A cell wider than its column wraps inside it (the row
    takes several lines, nothing is cut). With `wrap_last`, the last column gets what the others
    leave; any column still too wide for the line (a long plugin name or type) is narrowed,
    widest first, down to `_MIN_COLUMN` characters."""
    count = len(header)
    widths = [max([len(header[i])] + [len(row[i]) for row in rows]) for i in range(count)]
    room = WIDTH - len(_INDENT) - len(_GAP) * (count - 1)
    if wrap_last:
        widths[-1] = min(widths[-1], max(_MIN_FAILURE_WIDTH, room - sum(widths[:-1])))
    while sum(widths) > room:
        widest = max(range(count), key=lambda i: widths[i])
        floor = max(_MIN_COLUMN, len(header[widest]))
        if widths[widest] <= floor:
            break  # only headers left to cut: more columns than WIDTH can hold
        widths[widest] = max(floor, widths[widest] - (sum(widths) - room))

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if i in numeric else text.ljust(widths[i])

    def lines_of(cells: Sequence[str]) -> list[str]:
        pieces = [[text] if len(text) <= widths[i]
                  else textwrap.wrap(text, widths[i], break_long_words=True) or [""]
                  for i, text in enumerate(cells)]
        depth = max(len(column) for column in pieces)
        return [_GAP.join(cell(column[k] if k < len(column) else "", i)
                          for i, column in enumerate(pieces)).rstrip() for k in range(depth)]

    lines = lines_of(header) + lines_of(["-" * w for w in widths])
    for row in rows:
        lines += lines_of(row)
    return [_INDENT + text for text in lines]


def _ns(value: float) -> str:
    return f"{value:,.0f}"


def _figure(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)
                                  and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:.6g}"


def _state(value: object) -> str:
    # A PluginState (a str enum) or its name, as a JSON round trip gives it.
    return str(getattr(value, "name", value))


def _failure(failure: object) -> str:
    if failure is None:
        return "-"
    if isinstance(failure, Mapping):
        phase, message = failure.get("phase", "?"), failure.get("message", "")
    else:  # a PluginLoadFailure
        phase, message = getattr(failure, "phase", "?"), getattr(failure, "message", failure)
    return f"{phase}: {one_line(message)}"


def _warnings(counts: Mapping[str, Any]) -> str:
    raised = [(kind, int(n)) for kind, n in counts.items() if int(n) > 0]
    if not raised:
        return "none"
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(raised))


def format_statistics(stats: Mapping[str, Any], wall_s: float | None = None, *,
                      running_s: float | None = None) -> str:
    """`env.statistics()` (or its JSON round trip) as the table `mjfast run` prints.

    `wall_s`, the wall time of the whole run, adds a line; the real-time factor shown is the
    one in `stats` (the CLI replaces it with simulated time over `wall_s`). `running_s`, the
    part of it the env ran (pauses excluded), adds a line, and the factor is then said to be
    over that time (`mjfast view`, whose window pauses the run).
    """
    env = stats["env"]
    sampled = env.get("timing_sample_interval", 1)
    lines = ["environment",
             f"  steps                 {env['steps']:,}",
             f"  simulated time        {env.get('simulated_s', float('nan')):.3f} s"]
    if wall_s is not None:
        lines.append(f"  wall time             {wall_s:.3f} s")
    basis = "wall time"
    if running_s is not None:
        lines.append(f"  running time          {running_s:.3f} s (pauses excluded)")
        basis = "running time"
    lines += [f"  mean step time        {_ns(env['mean_step_ns'])} ns",
              f"  real-time factor      {env['realtime_factor']:,.1f}x (simulated / {basis})",
              f"  model generation      {env['model_generation']}",
              f"  plugin generation     {env['plugin_generation']}"]
    if "warnings" in env:
        lines.append(textwrap.fill(_warnings(env["warnings"]), WIDTH,
                                   initial_indent="  MuJoCo warnings       ",
                                   subsequent_indent=" " * 24))
    lines.append("")
    plugins = stats["plugins"]
    if not plugins:
        lines.append("plugins: none configured")
        return "\n".join(lines)
    rows = [[plugin["name"], plugin["type"], _state(plugin["state"]),
             f"{plugin['load_time_s'] * 1e3:.2f}", _failure(plugin["failure"])]
            for plugin in plugins]
    lines.append("plugins")
    lines += _table(["name", "type", "state", "load ms", "failure"], rows, numeric={3},
                    wrap_last=True)
    figures = [[plugin["name"], str(name), _figure(value)]
               for plugin in plugins for name, value in (plugin.get("custom") or {}).items()]
    if figures:
        lines += ["", "plugin figures (each plugin's statistics())"]
        lines += _table(["plugin", "figure", "value"], figures, numeric={2}, wrap_last=True)
    callback_rows = [
        [plugin["name"], callback, f"{figures['calls']:,}",
         _ns(figures["mean_ns"]) if figures.get("timed_calls", 1) else "-",
         _ns(figures["last_ns"]) if figures.get("timed_calls", 1) else "-"]
        for plugin in plugins for callback, figures in (plugin.get("callbacks") or {}).items()]
    if callback_rows:
        lines += ["", f"callbacks (wall time sampled on 1 dispatch in {sampled} per callback)"]
        lines += _table(["plugin", "callback", "calls", "mean ns", "last ns"], callback_rows,
                        numeric={2, 3, 4})
    return "\n".join(lines)
