#!/usr/bin/env bash
# Regenerates every golden output (tests/golden/<case>.json, from tests/golden/cases.tsv) and
# the published-run validation tables and error bands (docs/validation/megatron-2021-table1.md,
# published-runs.md and error-bands.yaml, by scripts/validate-published.sh, run first), so
# that a change that moves predictions shows its diff.
# Needs build/shardsim (or SHARDSIM_BIN) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SHARDSIM_BIN:-build/shardsim}
# First the validation tables and the error bands they yield: estimate, simulate and plan print
# the bands (docs/validation/error-bands.yaml), so the goldens come after.
SHARDSIM_BIN="$bin" bash scripts/validate-published.sh
n=0
while IFS=$'\t' read -r name args; do
  case "$name" in ''|'#'*) continue ;; esac
  # shellcheck disable=SC2086  # the arguments are words
  "$bin" $args --json > "tests/golden/$name.json.tmp"
  mv "tests/golden/$name.json.tmp" "tests/golden/$name.json"
  n=$((n + 1))
done < tests/golden/cases.tsv
echo "regen-golden: $n cases written to tests/golden/"
