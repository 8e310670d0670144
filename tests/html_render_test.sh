#!/usr/bin/env bash
# HtmlReportRendersInChromium: the HTML report of `shardsim compare` (runtime/report/compare.h)
# opened in headless Chromium. It must render to a non-trivial screenshot, and the DOM Chromium
# builds from it must hold the report's SVG charts (the element ids of ComparisonHtml). Inputs:
# the fixtures of tests/data/compare (tiny, pp=2 on cpu-host, 2 ranks; README.md there).
# Usage: html_render_test.sh SHARDSIM_BINARY FIXTURE_DIR. Exit 77 (ctest's skip) without Chromium.
set -euo pipefail
bin=$1
fixtures=$2

chromium=""
for c in chromium chromium-browser; do
  if command -v "$c" > /dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
done
if [ -z "$chromium" ]; then
  echo "SKIP: Chromium is not installed (apt-get install chromium)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report=$tmp/report.html
"$bin" compare --sim "$fixtures/sim.json" --run "$fixtures/run.json" \
  --sim-trace "$fixtures/sim.trace.json" --run-trace "$fixtures/run.trace.json" --html "$report" > /dev/null

# Headless Chromium wants a writable home and profile; --no-sandbox because CI runs as root.
# A timeout so that a Chromium that hangs fails the test instead of ctest's own limit.
export HOME=$tmp
browser=("$chromium" --headless --disable-gpu --no-sandbox --user-data-dir="$tmp/profile"
         --no-first-run --disable-dev-shm-usage)
timeout 60 "${browser[@]}" --screenshot="$tmp/report.png" --window-size=1200,2000 "file://$report" \
  > "$tmp/screenshot.log" 2>&1 || { cat "$tmp/screenshot.log"; echo "FAIL: chromium --screenshot failed"; exit 1; }
# A blank 1200 x 2000 page compresses to a few kB; the report's text and bars to well above 20 kB.
size=$(stat -c %s "$tmp/report.png" 2> /dev/null || echo 0)
if [ "$size" -lt 20000 ]; then
  echo "FAIL: screenshot $tmp/report.png is $size bytes (a blank page?)"
  exit 1
fi
if [ "$(head -c 8 "$tmp/report.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
  echo "FAIL: the screenshot is not a PNG"
  exit 1
fi

timeout 60 "${browser[@]}" --dump-dom "file://$report" > "$tmp/dom.html" 2> "$tmp/dom.log" \
  || { cat "$tmp/dom.log"; echo "FAIL: chromium --dump-dom failed"; exit 1; }
# Each chart an <svg> with its id and drawn content: the two timelines' spans and the bars.
for id in timeline-predicted timeline-measured phases memory rank-memory; do
  if ! grep -q "<svg id=\"$id\"" "$tmp/dom.html"; then
    echo "FAIL: the rendered DOM has no <svg id=\"$id\">"
    exit 1
  fi
done
rects=$(grep -o "<rect" "$tmp/dom.html" | wc -l)
if [ "$rects" -lt 20 ]; then
  echo "FAIL: the rendered DOM has only $rects <rect> elements"
  exit 1
fi
grep -q '<table id="summary">' "$tmp/dom.html" || { echo "FAIL: no summary table in the DOM"; exit 1; }
echo "PASS: screenshot $size bytes; DOM has the 5 charts and $rects bars"
