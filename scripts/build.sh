#!/usr/bin/env bash
# Configures and builds shardsim (Release with debug info) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
echo "build: ok (build/shardsim)"
