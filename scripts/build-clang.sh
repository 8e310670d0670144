#!/usr/bin/env bash
# Builds everything with clang (Debian 12's clang 14) into build-clang, with the same warnings
# as the GCC build (-Wall -Wextra -Wpedantic), and optionally runs the suite there:
#   scripts/build-clang.sh [--test]
# Not part of CI: a second full build would double its time on 2 cores. 2026-12-02: builds
# with no warning (the CUDA backend off: clang is not nvcc's host compiler here).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++ > /dev/null || { echo "build-clang.sh: clang++ is needed (apt-get install clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDSIM_CUDA=OFF \
  > build-clang.log 2>&1 || { tail -30 build-clang.log; exit 1; }
cmake --build build-clang -j "$(nproc)" >> build-clang.log 2>&1 || { grep -m20 "error" build-clang.log; exit 1; }
if grep -q "warning:" build-clang.log; then grep "warning:" build-clang.log | sort -u | head -20; fi
echo "build-clang: ok (build-clang/shardsim)"
if [ "${1:-}" = "--test" ]; then
  cd build-clang && ctest --output-on-failure -j "$(nproc)"
fi
