#!/usr/bin/env python3
"""Opens an oomcast HTML report in real headless Chromium and checks what a reader would see.

usage: check_html_report.py OOMCAST OUT_DIR NAME [--no-screenshot] -- oomcast arguments...

Runs `OOMCAST <arguments> --json` for the numbers and `OOMCAST <arguments> --html` for the
page, then in Chromium (--headless --no-sandbox --disable-gpu): the page's script ran without
an error (#script-status is "ok", no "Uncaught" on the console), the peak allocated, peak
reserved and device total bytes from the JSON are in the DOM, the three pictures were drawn,
and a screenshot is not blank (many non-white pixels, several colours). Exits 77 (skipped)
when Chromium is not installed. The screenshot is left in OUT_DIR/NAME.png (--no-screenshot:
none, for the test that opens every bundled scenario's page). A page whose script does not
finish within PAGE_TIMEOUT_S seconds fails (a placement loop that never advanced once hung one).
Standard library only, so it runs on Debian's python3 without extra packages.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_oomcast(oomcast, arguments, extra):
    result = subprocess.run([oomcast] + arguments + extra, capture_output=True, text=True, timeout=600)
    if result.returncode not in (0, 1):
        sys.exit(f"oomcast {' '.join(arguments + extra)} exited {result.returncode}: {result.stderr}")
    return result.stdout


PAGE_TIMEOUT_S = 120


def chromium(browser, url, *flags):
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", *flags, url]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {url} did not finish loading in {PAGE_TIMEOUT_S} s (the page's script never returns)")
        sys.exit(1)


def png_pixels(path):
    """Decodes an 8-bit RGB or RGBA PNG (what Chromium writes) into rows of pixel tuples."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path} is not a PNG")
    at, idat, width, height, channels = 8, b"", 0, 0, 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {colour})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else upper_left
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(line)
        previous = line
    return width, height, channels, rows


def screenshot_is_drawn(path):
    width, height, channels, rows = png_pixels(path)
    coloured, colours = 0, set()
    for line in rows[::4]:
        for x in range(0, width * channels, channels * 4):
            pixel = tuple(line[x:x + 3])
            colours.add(pixel)
            if min(pixel) < 235:
                coloured += 1
    sampled = len(rows[::4]) * len(range(0, width * channels, channels * 4))
    return coloured / max(1, sampled), len(colours)


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    names = sys.argv[1:split]
    screenshot = "--no-screenshot" not in names
    oomcast, out_dir, name = [n for n in names if n != "--no-screenshot"]
    arguments = sys.argv[split + 1:]
    browser = find_chromium()
    if not browser:
        print("chromium is not installed: skipped")
        sys.exit(77)
    os.makedirs(out_dir, exist_ok=True)
    html = os.path.abspath(os.path.join(out_dir, name + ".html"))
    png = os.path.abspath(os.path.join(out_dir, name + ".png"))
    numbers = json.loads(run_oomcast(oomcast, arguments, ["--json"]))
    run_oomcast(oomcast, arguments, ["--html", html])
    with open(html, encoding="utf-8") as f:
        page = f.read()
    failures = []
    # Text may quote a URL (PyTorch's OOM message does); nothing may be fetched from one.
    if re.search(r"<(script|link|img|iframe)[^>]+(src|href)=|url\(|@import", page):
        failures.append("the page loads an external script, style sheet, font or image")

    dom_run = chromium(browser, "file://" + html, "--dump-dom")
    dom = dom_run.stdout
    if 'data-status="ok"' not in dom:
        status = re.search(r'id="script-status" data-status="([^"]*)"', dom)
        failures.append(f"the script did not finish: status {status.group(1) if status else 'missing'}")
    errors = [line for line in dom_run.stderr.splitlines() if "Uncaught" in line or ":ERROR:CONSOLE" in line]
    if errors:
        failures.append(f"script errors: {errors[:3]}")
    keys = ["peak_allocated_bytes", "peak_reserved_bytes"]
    if 0 < numbers.get("device_total_bytes", 0) < 2 ** 59:  # a cpu without a capacity has none
        keys.append("device_total_bytes")
    for key in keys:
        if f'data-bytes="{numbers[key]}"' not in dom:
            failures.append(f"{key} = {numbers[key]} is not in the DOM")
    pictures = ["timeline", "categories"]
    if numbers.get("accounting") != "exact_live_bytes":  # the cpu device has no segments
        pictures.append("segments")
    for picture in pictures:
        if not re.search(r'<div id="%s" class="chart"><svg' % picture, dom):
            failures.append(f"the {picture} picture was not drawn")
    if 'id="peak-marker"' not in dom:
        failures.append("the peak is not marked on the timeline")

    shot = chromium(browser, "file://" + html, "--screenshot=" + png, "--window-size=1200,1500") if screenshot else None
    if shot is None:
        pass
    elif shot.returncode != 0 or not os.path.exists(png):
        failures.append(f"no screenshot: {shot.stderr[-500:]}")
    else:
        coloured, colours = screenshot_is_drawn(png)
        if coloured < 0.05 or colours < 8:
            failures.append(f"the screenshot looks blank: {coloured:.1%} non-white, {colours} colours")
        print(f"screenshot {png}: {coloured:.1%} of sampled pixels drawn, {colours} colours")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        sys.exit(1)
    print(f"{name}: script ok, peak allocated {numbers['peak_allocated_bytes']}, "
          f"peak reserved {numbers['peak_reserved_bytes']} in the DOM")


if __name__ == "__main__":
    main()
