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
# Headless Chromium wants a writable home and profile; --no-sandbox because CI runs as root.
# A timeout so that a Chromium that hangs fails the test instead of ctest's own limit.
export HOME=$tmp
browser=("$chromium" --headless --disable-gpu --no-sandbox --user-data-dir="$tmp/profile"
         --no-first-run --disable-dev-shm-usage)

# render PAGE NAME HEIGHT: a screenshot of PAGE (a blank 1250-wide page compresses to a few kB,
# a report's text and charts to well above 20 kB), then the DOM Chromium builds, in
# $tmp/NAME-dom.html; sets $size to the screenshot's bytes.
render() {
  local page=$1 name=$2 height=$3
  timeout 60 "${browser[@]}" --screenshot="$tmp/$name.png" --window-size=1250,"$height" "file://$page" \
    > "$tmp/$name-screenshot.log" 2>&1 || { cat "$tmp/$name-screenshot.log"; echo "FAIL: chromium --screenshot of $name failed"; exit 1; }
  size=$(stat -c %s "$tmp/$name.png" 2> /dev/null || echo 0)
  if [ "$size" -lt 20000 ]; then
    echo "FAIL: screenshot $tmp/$name.png is $size bytes (a blank page?)"
    exit 1
  fi
  if [ "$(head -c 8 "$tmp/$name.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
    echo "FAIL: the screenshot of $name is not a PNG"
    exit 1
  fi
  timeout 60 "${browser[@]}" --dump-dom "file://$page" > "$tmp/$name-dom.html" 2> "$tmp/$name-dom.log" \
    || { cat "$tmp/$name-dom.log"; echo "FAIL: chromium --dump-dom of $name failed"; exit 1; }
}
# has NAME ELEMENT ID...: the rendered DOM of NAME holds <ELEMENT id="ID"> for each ID.
has() {
  local name=$1 element=$2
  shift 2
  for id in "$@"; do
    grep -q "<$element id=\"$id\"" "$tmp/$name-dom.html" || { echo "FAIL: the rendered $name has no <$element id=\"$id\">"; exit 1; }
  done
}

report=$tmp/report.html
"$bin" compare --sim "$fixtures/sim.json" --run "$fixtures/run.json" \
  --sim-trace "$fixtures/sim.trace.json" --run-trace "$fixtures/run.trace.json" --html "$report" > /dev/null
render "$report" compare 2000
# Each chart an <svg> with its id and drawn content: the two timelines' spans and the bars.
has compare svg timeline-predicted timeline-measured phases memory rank-memory
has compare table summary
rects=$(grep -o "<rect" "$tmp/compare-dom.html" | wc -l)
if [ "$rects" -lt 20 ]; then
  echo "FAIL: the rendered compare report has only $rects <rect> elements"
  exit 1
fi
echo "PASS: compare: screenshot $size bytes; DOM has the 5 charts and $rects bars"

# The plan page over a GPU range: a ranked table and a scatter per GPU count, the winner's
# timeline with its legend, the scaling chart.
page=$tmp/plan.html
"$bin" plan --model llama3-8b --hardware dgx-h100 --gpus 8..16 --global-batch 64 --top 5 --html "$page" > /dev/null
render "$page" plan 2600
has plan svg scatter-8 scatter-16 timeline-winner scaling
has plan table ranked-8 ranked-16
has plan p legend
circles=$(grep -o "<circle" "$tmp/plan-dom.html" | wc -l)
# At least 5 points in each scatter and one per GPU count in the scaling chart.
if [ "$circles" -lt 12 ]; then
  echo "FAIL: the rendered plan has only $circles points"
  exit 1
fi
echo "PASS: plan: screenshot $size bytes; DOM has the tables, the 4 charts and $circles points"
