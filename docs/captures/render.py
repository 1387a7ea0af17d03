"""Render a terminal capture (text) as an SVG: `python docs/captures/render.py top.txt`.

The captures are plain text taken with `tmux capture-pane -p` (see docs/tutorial.md);
this lays them out in a monospace font on a dark background, one <text> per line,
so the image stays a small text file beside its capture.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

SIZE, PAD = 15, 16
CELL_W, CELL_H = SIZE * 0.602, round(SIZE * 1.35)  # DejaVu Sans Mono's advance is 0.602 em
FONT = "'DejaVu Sans Mono', Menlo, Consolas, monospace"
BACKGROUND, FOREGROUND, HIGHLIGHT = "#1e1e1e", "#dcdcdc", "#78c878"


def render(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    width = round(max(len(line) for line in lines) * CELL_W + 2 * PAD)
    height = len(lines) * CELL_H + 2 * PAD
    rows = []
    for i, line in enumerate(lines):
        colour = HIGHLIGHT if line.startswith(("ksched", "summary", "SERVICE")) else FOREGROUND
        y = PAD + i * CELL_H + SIZE
        rows.append(f'<text x="{PAD}" y="{y}" fill="{colour}">{escape(line)}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">\n'
        f'<rect width="100%" height="100%" fill="{BACKGROUND}"/>\n'
        f'<g font-family="{FONT}" font-size="{SIZE}" xml:space="preserve">\n'
        + "\n".join(rows)
        + "\n</g>\n</svg>\n"
    )


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        path.with_suffix(".svg").write_text(render(path.read_text()))
