#!/usr/bin/env bash
# HtmlReportRendersInChromium: the HTML report of `shardsim compare` (runtime/report/compare.h)
# and the plan page of `shardsim plan --html` (planner/plan_html.h) opened in headless
# Chromium. Each must render to a non-trivial screenshot, and the DOM Chromium builds from it
# must hold the page's SVG charts (their element ids). Inputs: the fixtures of tests/data/compare
# (tiny, pp=2 on cpu-host, 2 ranks; README.md there); Llama 3 8B planned on 8 and 16 H100.
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
echo "PASS: compare: screenshot $size bytes; DOM has the 5 charts and $rects bars"

# The plan page over a GPU range: a ranked table and a scatter per GPU count, the winner's
# timeline with its legend, the scaling chart.
page=$tmp/plan.html
"$bin" plan --model llama3-8b --hardware dgx-h100 --gpus 8..16 --global-batch 64 --top 5 --html "$page" > /dev/null
timeout 60 "${browser[@]}" --screenshot="$tmp/plan.png" --window-size=1250,2600 "file://$page" \
  > "$tmp/plan-screenshot.log" 2>&1 || { cat "$tmp/plan-screenshot.log"; echo "FAIL: chromium --screenshot of the plan failed"; exit 1; }
size=$(stat -c %s "$tmp/plan.png" 2> /dev/null || echo 0)
if [ "$size" -lt 20000 ]; then
  echo "FAIL: screenshot $tmp/plan.png is $size bytes (a blank page?)"
  exit 1
fi
timeout 60 "${browser[@]}" --dump-dom "file://$page" > "$tmp/plan-dom.html" 2> "$tmp/plan-dom.log" \
  || { cat "$tmp/plan-dom.log"; echo "FAIL: chromium --dump-dom of the plan failed"; exit 1; }
for id in scatter-8 scatter-16 timeline-winner scaling; do
  if ! grep -q "<svg id=\"$id\"" "$tmp/plan-dom.html"; then
    echo "FAIL: the plan's rendered DOM has no <svg id=\"$id\">"
    exit 1
  fi
done
for id in ranked-8 ranked-16; do
  grep -q "<table id=\"$id\">" "$tmp/plan-dom.html" || { echo "FAIL: no <table id=\"$id\"> in the plan's DOM"; exit 1; }
done
grep -q '<p id="legend">' "$tmp/plan-dom.html" || { echo "FAIL: no legend in the plan's DOM"; exit 1; }
circles=$(grep -o "<circle" "$tmp/plan-dom.html" | wc -l)
# At least 5 points in each scatter and one per GPU count in the scaling chart.
if [ "$circles" -lt 12 ]; then
  echo "FAIL: the plan's rendered DOM has only $circles points"
  exit 1
fi
echo "PASS: plan: screenshot $size bytes; DOM has the tables, the 4 charts and $circles points"
