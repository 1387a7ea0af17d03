"""Render a terminal capture (text) to a PNG: `python docs/captures/render.py top.txt`.

The captures are plain text taken with `tmux capture-pane -p` (see docs/tutorial.md);
this draws them in DejaVu Sans Mono (shipped with matplotlib) on a dark background.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFont

FONT = Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSansMono.ttf"
SIZE, PAD = 15, 16
BACKGROUND, FOREGROUND, HIGHLIGHT = (30, 30, 30), (220, 220, 220), (120, 200, 120)


def render(text: str, out: Path) -> None:
    font = ImageFont.truetype(str(FONT), SIZE)
    lines = text.rstrip("\n").splitlines()
    cell_w = font.getbbox("M")[2]
    cell_h = int(SIZE * 1.35)
    width = max(len(line) for line in lines) * cell_w + 2 * PAD
    image = Image.new("RGB", (width, len(lines) * cell_h + 2 * PAD), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        colour = HIGHLIGHT if line.startswith(("ksched", "summary", "SERVICE")) else FOREGROUND
        draw.text((PAD, PAD + i * cell_h), line, font=font, fill=colour)
    image.save(out)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        render(path.read_text(), path.with_suffix(".png"))
