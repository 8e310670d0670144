#!/usr/bin/env bash
# Builds a small training set for `shardsim run --data`: byte-level tokens (one token per byte,
# ids 0-255, so any model with vocab >= 256 takes them) of text every Debian machine has, the
# licence texts under /usr/share/common-licenses (base-files; about 260 KB), or of the files
# given. Written as flat little-endian uint16 ids (--data-dtype uint16), whole or not at all.
#   scripts/make-token-file.sh OUT [TEXT_FILE...]
set -euo pipefail
out=${1:?usage: make-token-file.sh OUT [TEXT_FILE...]}
shift
if [ $# -eq 0 ]; then
  set -- $(find /usr/share/common-licenses -maxdepth 1 -type f | LC_ALL=C sort)
fi
[ $# -gt 0 ] || { echo "make-token-file.sh: no text files (none under /usr/share/common-licenses)" >&2; exit 1; }
python3 - "$out" "$@" <<'PY'
import array, os, sys
out, files = sys.argv[1], sys.argv[2:]
data = b"".join(open(f, "rb").read() for f in files)
ids = array.array("H", list(data))  # one uint16 per byte (a bytes initializer would pair them)
if sys.byteorder != "little":
    ids.byteswap()
tmp = out + ".tmp.%d" % os.getpid()
with open(tmp, "wb") as f:
    ids.tofile(f)
os.replace(tmp, out)
print("%s: %d tokens (bytes) from %d files" % (out, len(ids), len(files)))
PY
