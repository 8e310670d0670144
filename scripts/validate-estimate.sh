#!/usr/bin/env bash
# Writes docs/validation/estimate-vs-simulation.md: the figures of the property test
# EstimateProperty.EqualsTheCriticalPathAndBoundsTheSimulation (tests/estimate_property_test.cc)
# over its 1,200 random layouts, and the layouts where the simulation is most above the
# estimate. Needs build/tests/shardsim_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=${SHARDSIM_TESTS:-build/tests/shardsim_tests}
out=docs/validation/estimate-vs-simulation.md
log=$(mktemp)
trap 'rm -f "$log"' EXIT
SHARDSIM_PROPERTY_VERBOSE=1 "$tests" --gtest_filter='EstimateProperty.*' > "$log"
grep -q '\[  PASSED  \] 1 test' "$log" || { cat "$log"; echo "validate-estimate: the property test failed" >&2; exit 1; }
{
  echo "# The estimate against the simulation"
  echo
  echo "Written by \`scripts/validate-estimate.sh\` from the property test"
  echo "\`EstimateProperty.EqualsTheCriticalPathAndBoundsTheSimulation\` (\`tests/estimate_property_test.cc\`):"
  echo "1,200 random valid layouts of a GPT-style (MHA, GELU, tied, learned positions), a Llama-style"
  echo "(GQA 4:1, SwiGLU, RMSNorm, RoPE) and a Mixtral-style MoE model (8 experts, top 2), each"
  echo "8 layers, on 8 to 64 GPUs of the bundled \`dgx-a100-80gb\` and \`dgx-h100\` clusters, over"
  echo "every schedule, ZeRO stage, SP, CP, EP, recompute, offload, overlap switch, dtype and"
  echo "attention kernel the planner searches. For every layout the test asserts that the estimate"
  echo "equals the critical path of the simulator's program (an independent Boost.Graph longest"
  echo "path) to 1e-9, is never above the simulated time, and has the simulator's peak memory; and"
  echo "that the planner's two cheaper bounds are never above the estimate."
  echo
  echo "| figure | median | p90 | max |"
  echo "|---|---:|---:|---:|"
  sed -n 's/^estimate vs simulation over \([0-9]*\) layouts: median \([0-9.]*\) %, mean \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| simulation above the estimate, (sim - est) \/ sim | \2 % | \4 % | \5 % |/p' "$log"
  sed -n "s/^planner's bound vs estimate: median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| plan bound (\`BoundPlan\`) below the estimate | \1 % | \2 % | \3 % |/p" "$log"
  sed -n "s/^planner's compute bound vs estimate: median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| compute bound (\`ComputeLowerBound\`) below the estimate | \1 % | \2 % | \3 % |/p" "$log"
  echo
  echo "The gap is contention, which the estimate does not model: transfers of different streams"
  echo "sharing a link (a ZeRO-3 gather or reduce-scatter and a CP exchange or pipeline send on one"
  echo "NIC). Issue 13 asks for a maximum of 8 %; the median (2 % asked) is met, the maximum is"
  echo "not. The layouts above 5 %:"
  echo
  echo "| gap | model on cluster | layout |"
  echo "|---:|---|---|"
  grep '^gap ' "$log" | sort -t' ' -k2 -g -r | awk '$2 > 5 && n++ < 20' |
    sed 's/^gap \([0-9.]*\) % \([^ ]*\) on \([^:]*\): \(.*\)$/| \1 % | \2 on \3 | `\4` |/'
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
