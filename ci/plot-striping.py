#!/usr/bin/env python3
"""plot-striping.py - the striping benchmark's bandwidth curves as an SVG, in the manner of
Figure 2 of Open MPI's heterogeneity paper (NetPIPE-style: bandwidth against message size on a
logarithmic axis, one curve per network configuration).

usage: ci/plot-striping.py TSV SVG

TSV is what ci/bench-striping.sh writes (target/striping/striping.tsv): comment lines start with
'#'; the columns are bytes, lat_A_us, lat_B_us, lat_both_us, bw_A_MBps, bw_B_MBps, bw_both_MBps.
A comment line '# raw TCP: A <x> MB/s, B <y> MB/s' adds the links' raw TCP rates as dashed
lines (A, B and their sum). Only the standard library is used.
"""
import math
import re
import sys
from xml.sax.saxutils import escape

W, H = 820, 500
LEFT, RIGHT, TOP, BOTTOM = 80, 120, 56, 70
PW, PH = W - LEFT - RIGHT, H - TOP - BOTTOM
SERIES = [  # column, label, colour, marker
    (6, "A + B striped (both links)", "#d62728", "circle"),
    (4, "link A only (400 Mbit/s, tbf)", "#1f77b4", "square"),
    (5, "link B only (200 Mbit/s, htb)", "#2ca02c", "triangle"),
]


def read(path):
    rows, raw = [], {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                m = re.search(r"raw TCP: A ([\d.]+) MB/s, B ([\d.]+) MB/s", line)
                if m:
                    raw = {"A": float(m.group(1)), "B": float(m.group(2))}
                continue
            rows.append([float(x) for x in line.split("\t")])
    if not rows:
        sys.exit("plot-striping.py: no data rows in %s" % path)
    return rows, raw


def size_label(n):
    n = int(n)
    for unit, k in (("M", 20), ("K", 10)):
        if n >= 1 << k:
            return "%d%s" % (n >> k, unit)
    return str(n)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows, raw = read(sys.argv[1])
    sizes = [r[0] for r in rows]
    lo, hi = math.log2(min(sizes)), math.log2(max(sizes))
    if hi == lo:
        hi = lo + 1
    # Bandwidth in Mbit/s, as the paper (and NetPIPE) plots it.
    mbit = lambda mbps: mbps * 8.0
    top = max(mbit(r[c]) for r in rows for c, _, _, _ in SERIES)
    if raw:
        top = max(top, mbit(raw["A"] + raw["B"]))
    step = 100 if top <= 1000 else 500
    ymax = step * math.ceil(top * 1.08 / step)

    def x(size):
        return LEFT + PW * (math.log2(size) - lo) / (hi - lo)

    def y(v):
        return TOP + PH * (1 - v / ymax)

    out = []
    add = out.append
    add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="Helvetica, Arial, sans-serif" font-size="13">' % (W, H, W, H))
    add('<rect width="100%" height="100%" fill="white"/>')
    add('<text x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">'
        'stormpi: one message striped over two TCP networks (ping-pong)</text>' % (LEFT + PW // 2))
    add('<text x="%d" y="43" text-anchor="middle" font-size="12" fill="#555">'
        'two hosts (network namespaces) joined by two veth links shaped with tc; best of all '
        'runs</text>' % (LEFT + PW // 2))
    # Grid and axes.
    v = 0
    while v <= ymax + 1e-9:
        add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>' % (LEFT, y(v), LEFT + PW, y(v)))
        add('<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%d</text>'
            % (LEFT - 8, y(v), v))
        v += step
    e = math.ceil(lo)
    while e <= hi + 1e-9:
        xs = x(2 ** e)
        major = e % 2 == 0 or hi - lo < 12
        add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>'
            % (xs, TOP, xs, TOP + PH, "#e3e3e3" if major else "#f3f3f3"))
        if major:
            add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                % (xs, TOP + PH + 20, size_label(2 ** e)))
        e += 1
    add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (LEFT, TOP, PW, PH))
    add('<text x="%d" y="%d" text-anchor="middle">message size (bytes)</text>'
        % (LEFT + PW // 2, H - 22))
    add('<text transform="translate(22,%d) rotate(-90)" text-anchor="middle">'
        'bandwidth (Mbit/s)</text>' % (TOP + PH // 2))
    # The links' raw TCP rates.
    if raw:
        for value, label in ((raw["A"] + raw["B"], "raw TCP A + B"), (raw["A"], "raw TCP A"),
                             (raw["B"], "raw TCP B")):
            yy = y(mbit(value))
            add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="5,4"/>'
                % (LEFT, yy, LEFT + PW, yy))
            add('<text x="%d" y="%.1f" font-size="11" fill="#666" dominant-baseline="middle">'
                '%s %.0f</text>' % (LEFT + PW + 6, yy, escape(label), mbit(value)))
    # Curves.
    for col, label, colour, marker in SERIES:
        pts = [(x(r[0]), y(mbit(r[col]))) for r in rows]
        add('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
            % (colour, " ".join("%.1f,%.1f" % p for p in pts)))
        for px, py in pts:
            add(marker_svg(marker, px, py, colour))
    # Legend, upper left (small messages leave that part empty).
    lx, ly = LEFT + 16, TOP + 16
    add('<rect x="%d" y="%d" width="250" height="%d" fill="white" stroke="#bbb"/>'
        % (lx - 8, ly - 12, 22 * len(SERIES) + 6))
    for i, (_, label, colour, marker) in enumerate(SERIES):
        yy = ly + 22 * i
        add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
            % (lx, yy, lx + 28, yy, colour))
        add(marker_svg(marker, lx + 14, yy, colour))
        add('<text x="%d" y="%d" dominant-baseline="middle">%s</text>' % (lx + 38, yy, escape(label)))
    add('</svg>')
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


def marker_svg(kind, x, y, colour):
    if kind == "square":
        return '<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>' % (x - 3.5, y - 3.5, colour)
    if kind == "triangle":
        return ('<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>'
                % (x, y - 4.5, x - 4.5, y + 3.5, x + 4.5, y + 3.5, colour))
    return '<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, colour)


if __name__ == "__main__":
    main()
