#!/usr/bin/env python3
"""plot-verbs.py - the verbs BTL's protocol comparison as a plot: reads the tables that
ci/bench-verbs.sh prints (one-way latency and bandwidth per message size and configuration) and
writes an SVG of two panels, latency and bandwidth against message size (log scales), one line
per configuration. Standard library only (the SVG is written by hand).

usage: ci/plot-verbs.py BENCH_OUTPUT OUT.svg [--title TEXT]
   e.g. bash ci/bench-verbs.sh --reps 1 --scale 0.3 > verbs.txt
        python3 ci/plot-verbs.py verbs.txt docs/verbs-protocols.svg
"""

import math
import re
import sys

ORDER = ["rget/on", "rget/off", "pipeline/on", "pipeline/off", "pipesend/on", "pipesend/off", "send"]
COLORS = ["#1f77b4", "#1f77b4", "#d62728", "#d62728", "#2ca02c", "#2ca02c", "#7f7f7f"]
# Cache off: dashed, so each protocol's pair shares a colour.
DASH = ["", "6,4", "", "6,4", "", "6,4", "2,3"]


def parse(path):
    """{"lat"|"bw": {config: [(bytes, value)]}} from bench-verbs.sh's output."""
    data = {"lat": {}, "bw": {}}
    section = None
    cols = []
    for line in open(path):
        s = line.strip()
        if s.startswith("one-way latency"):
            section = "lat"
            continue
        if s.startswith("bandwidth"):
            section = "bw"
            continue
        if s.startswith("transfer and registration"):
            section = None
            continue
        if section is None or not s:
            continue
        w = s.split()
        if w[0] == "bytes":
            cols = w[1:]
            continue
        if not w[0].isdigit() or not cols:
            continue
        n = int(w[0])
        # Cells are "value (ratio x)" or "-".
        cells = re.findall(r"(-|[0-9.]+ \(\s*[0-9.]+x\))", s[len(w[0]):])
        for c, cell in zip(cols, cells):
            if cell != "-":
                data[section].setdefault(c, []).append((n, float(cell.split()[0])))
    return data


def size_label(n):
    if n >= 1 << 20:
        return f"{n >> 20} MiB"
    if n >= 1 << 10:
        return f"{n >> 10} KiB"
    return f"{n} B"


def panel(out, x0, y0, w, h, series, title, unit, log_y):
    """One plot at (x0, y0) of w x h pixels."""
    xs = sorted({n for pts in series.values() for n, _ in pts})
    ys = [v for pts in series.values() for _, v in pts if v > 0]
    if not xs or not ys:
        return
    lx0, lx1 = math.log2(xs[0]), math.log2(xs[-1])
    if lx1 == lx0:
        lx1 += 1
    if log_y:
        ly0 = math.floor(math.log10(min(ys)))
        ly1 = math.ceil(math.log10(max(ys)))
        if ly1 == ly0:
            ly1 += 1
    else:
        ly0, ly1 = 0.0, max(ys) * 1.1

    def px(n):
        return x0 + (math.log2(n) - lx0) / (lx1 - lx0) * w

    def py(v):
        t = (math.log10(v) - ly0) / (ly1 - ly0) if log_y else (v - ly0) / (ly1 - ly0)
        return y0 + h - t * h

    out.append(f'<text x="{x0 + w / 2}" y="{y0 - 10}" text-anchor="middle" font-weight="bold">{title}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
    # Every size gets a grid line; with many sizes every other one a label, so they do not overlap.
    every = 2 if len(xs) > 6 else 1
    for i, n in enumerate(xs):
        x = px(n)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + h}" stroke="#ddd"/>')
        if i % every == 0:
            out.append(f'<text x="{x:.1f}" y="{y0 + h + 16}" text-anchor="middle">{size_label(n)}</text>')
    if log_y:
        ticks = [10 ** e for e in range(ly0, ly1 + 1)]
    else:
        step = 10 ** math.floor(math.log10(ly1 / 4)) if ly1 > 0 else 1
        while ly1 / step > 8:
            step *= 2
        ticks = [i * step for i in range(int(ly1 / step) + 1)]
    for t in ticks:
        y = py(t)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(
        f'<text x="{x0 - 48}" y="{y0 + h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 - 48} {y0 + h / 2})">{unit}</text>'
    )
    for i, c in enumerate(ORDER):
        pts = sorted(p for p in series.get(c, []) if p[1] > 0)
        if not pts:
            continue
        d = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)
        dash = f' stroke-dasharray="{DASH[i]}"' if DASH[i] else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{COLORS[i]}" stroke-width="2"{dash}/>')
        for n, v in pts:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{COLORS[i]}"/>')


def main():
    args = sys.argv[1:]
    title = "verbs BTL large-message protocols over the software verbs device (2 ranks)"
    if "--title" in args:
        i = args.index("--title")
        title = args[i + 1]
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    data = parse(args[0])
    if not data["lat"] and not data["bw"]:
        sys.exit(f"plot-verbs.py: no latency or bandwidth table in {args[0]}")
    width, height = 980, 470
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>',
    ]
    panel(out, 80, 70, 360, 300, data["lat"], "one-way latency (lower is better)", "µs", True)
    panel(out, 580, 70, 360, 300, data["bw"], "bandwidth (higher is better)", "MB/s", False)
    # Legend: protocol / mpi_leave_pinned.
    lx, ly = 80, 420
    for i, c in enumerate(ORDER):
        if c not in data["lat"] and c not in data["bw"]:
            continue
        x = lx + (i % 4) * 220
        y = ly + (i // 4) * 20
        dash = f' stroke-dasharray="{DASH[i]}"' if DASH[i] else ""
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 30}" y2="{y}" stroke="{COLORS[i]}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 36}" y="{y + 4}">{c}</text>')
    out.append(
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end" fill="#666">'
        "protocol/mpi_leave_pinned; ci/bench-verbs.sh, ci/plot-verbs.py</text>"
    )
    out.append("</svg>")
    with open(args[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
