#!/usr/bin/env bash
# Issue 16's parameter-count table: every config in tests/data/hf/published.tsv read by
# shardsim (total and active parameters, the default sequence length) beside the published
# figures, written into docs/models.md between the hf-param-table markers (whole or not at all).
#
#   bash scripts/hf-param-table.sh            # needs ./build/shardsim (bash scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${SHARDSIM_BIN:-./build/shardsim}"
[[ -x "$bin" ]] || { echo "hf-param-table: $bin not built (bash scripts/build.sh)" >&2; exit 2; }
BIN="$bin" python3 - <<'PY'
import json, os, subprocess

bin_ = os.environ["BIN"]
rows = [l.rstrip("\n").split("\t") for l in open("tests/data/hf/published.tsv")][1:]

def billions(n):
    return f"{n / 1e9:,.3f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"

def err(ours, published):
    return f"{100.0 * (ours - published) / published:+.2f} %"

out = ["| file | shardsim total | published total | error | shardsim active | published active | error | seq_len | source |",
       "|---|---|---|---|---|---|---|---|---|"]
for f, total, active, digits, source in rows:
    r = subprocess.run([bin_, "describe", "--model", "tests/data/hf/" + f, "--layout", "tp=1,pp=1,gbs=1",
                        "--gpus", "1", "--json"], capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    t, a = d["parameters"], d["active_parameters"]
    pt, pa = float(total), float(active)
    out.append(f"| `{f}` | {t:,} | {billions(pt)} | {err(t, pt)} | {a:,} | {billions(pa)} | {err(a, pa)} | "
               f"{d['seq_len']} | {source} |")

path = "docs/models.md"
text = open(path).read()
start, end = "<!-- hf-param-table -->\n", "<!-- /hf-param-table -->"
i, j = text.index(start) + len(start), text.index(end)
tmp = path + ".tmp"
with open(tmp, "w") as fh:
    fh.write(text[:i] + "\n".join(out) + "\n" + text[j:])
os.replace(tmp, path)
print(f"hf-param-table: {len(rows)} rows into {path}")
PY
