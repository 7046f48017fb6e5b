#!/usr/bin/env bash
# End-to-end `vela bench model` (CPU, the 100m preset, short runs): the report prints each decode
# run against its own floor, and the JSON holds three per-run ratios for B=1 and B=2 that agree with
# the reported step times and floors no lower than the multiply-adds at the measured peak; bad flags
# are clear errors.
# usage: test_bench_model.sh path/to/vela   (run from tests/)
set -euo pipefail
VELA="$1"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

"$VELA" bench model --preset 100m --batch 2 --prompt 16 --decode 8 --json "$W/m.json" > "$W/out.txt"
grep -q "of their floors" "$W/out.txt" || { cat "$W/out.txt"; echo "no per-run floor ratios"; exit 1; }
python3 - "$W/m.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["benchmark"] == "model" and j["batch"] == 2, j
for ratios, ms, floor in ((j["floor_ratios"], j["decode_ms_per_token"], j["floor_ms_per_token"]),
                          (j["floor_ratios_batch"], j["decode_ms_per_step_batch"],
                           j["floor_ms_per_step_batch"])):
    assert len(ratios) == 3 and all(r > 0 for r in ratios), ratios
    # The reported run is the median of the three by ratio.
    assert abs(floor / ms - sorted(ratios)[1]) < 1e-9, (floor / ms, ratios)
assert j["read_gbps"] > 0 and j["read_gbps_batch"] > 0
# A floor is never below the step's multiply-adds at the measured peak (100m ties its embeddings:
# every parameter is one multiply-add a token).
assert j["macs_per_token"] == j["params"] and j["dot_gmacs"] >= 0, j
if j["dot_gmacs"] > 0:
    for b, floor in ((1, j["floor_ms_per_token"]), (j["batch"], j["floor_ms_per_step_batch"])):
        assert floor >= b * j["macs_per_token"] / (j["dot_gmacs"] * 1e9) * 1e3 * (1 - 1e-9), (b, floor)
rows = {r["case"]: r for r in j["results"]}
assert any(c.startswith("decode B=1") for c in rows) and any(c.startswith("decode B=2") for c in rows)
PY

for bad in "--batch 0" "--decode 0" "--preset nope"; do
  if "$VELA" bench model $bad > "$W/bad.txt" 2>&1; then echo "accepted: $bad"; exit 1; fi
  grep -qi "error" "$W/bad.txt" || { cat "$W/bad.txt"; echo "no error message for: $bad"; exit 1; }
done
echo "bench model OK"
