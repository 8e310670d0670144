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
  echo "attention kernel the planner searches. For every layout the test asserts that the critical"
  echo "path without contention (\`critical_path_s\`, what the planner searches by) equals the"
  echo "critical path of the simulator's program (an independent Boost.Graph longest path) to 1e-9"
  echo "and is never above the simulated time, that the planner's two cheaper bounds are never above"
  echo "it, that the estimate (each pass's transfers sharing links with those of the two passes just"
  echo "before it and the one after it, and its compute slowed beside NCCL's kernels as the"
  echo "simulation slows it, \`src/cost/pass_contention.h\`)"
  echo "is never below it and its breakdown adds up, and that the peak memory is the simulator's."
  echo
  echo "| figure | median | p90 | max |"
  echo "|---|---:|---:|---:|"
  sed -n 's/^estimate vs simulation over \([0-9]*\) layouts: |sim - est| \/ sim median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %.*/| estimate against the simulation, abs(sim - est) \/ sim | \2 % | \3 % | \4 % |/p' "$log"
  sed -n 's/^critical path vs simulation: median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| simulation above the critical path, (sim - path) \/ sim | \1 % | \2 % | \3 % |/p' "$log"
  sed -n "s/^planner's bound vs critical path: median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| plan bound (\`BoundPlan\`) below the critical path | \1 % | \2 % | \3 % |/p" "$log"
  sed -n "s/^planner's compute bound vs critical path: median \([0-9.]*\) %, p90 \([0-9.]*\) %, max \([0-9.]*\) %/| compute bound (\`ComputeLowerBound\`) below the critical path | \1 % | \2 % | \3 % |/p" "$log"
  echo
  sed -n 's/^estimate vs simulation over .*; \(simulation above by at most [0-9.]* %, below by at most [0-9.]* %\)$/Signed: the \1./p' "$log"
  echo
  echo "Issue 13 asks for a median of at most 2 % and a maximum of at most 8 %; the test asserts"
  echo "both. What is left is contention the estimate does not see: with the ranks of other stages"
  echo "(a pipeline send into a rank while it reduces gradients), passes further apart than two"
  echo "(a backlog of ZeRO-2 reduce-scatters on the DP stream, holding SMs beside the compute), and"
  echo "the exact offsets between passes (a pass that waits for its input is taken to start"
  echo "fresh). The simulation is above the critical path where transfers share links and where"
  echo "NCCL's kernels hold SMs beside the compute (docs/simulator.md, \"NCCL's SMs\"). The"
  echo "layouts where estimate and simulation differ by more than 3 % (gap = (sim -"
  echo "est) / sim; in brackets the critical path's):"
  echo
  echo "| gap | critical path | model on cluster | layout |"
  echo "|---:|---:|---|---|"
  grep '^gap ' "$log" | awk '{g = $2 < 0 ? -$2 : $2; print g, $0}' | sort -g -r | awk '$1 > 3 && n++ < 20' |
    sed 's/^[0-9.]* gap \([-0-9.]*\) % (critical path \([0-9.]*\) %) \([^ ]*\) on \([^:]*\): \(.*\)$/| \1 % | \2 % | \3 on \4 | `\5` |/'
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
