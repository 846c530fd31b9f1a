#!/usr/bin/env bash
# Outputs of the documented commands, as normalised digests: proof that a refactor leaves
# every output unchanged (issue 31: the 0.2 recut was checked this way against 6b16388).
#
#   benchmarks/outputs_digest.sh OUT_DIR [TREE]      # TREE: a checkout (default: this one)
#   diff OLD_DIR/SHA256SUMS NEW_DIR/SHA256SUMS
#
# Runs 20 commands on bundled data (the demo, the 16k forecast at 15 min and 1 s, small
# at 1 min, comply, three size-mitigation runs, flex offer and plan, study-package,
# export-grid in three formats, calibrate, backtest, import, summary, aggregate) with the
# checkout's own code (PYTHONPATH), and writes sha256 sums of every output file to
# OUT_DIR/SHA256SUMS.  Normalised before hashing, and nothing else: the run folder's path,
# generation times (and the sidecar hash that covers them), the version string, and the
# 0.1 module paths an output cites as a metric's definition (read in their 0.2 names,
# from powerlab._deprecation.MOVED_MODULES of the newer tree).  The store's part files
# have random names, so the store is compared through summary and aggregate; printed
# progress and timings are dropped from stdout.normalised.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(realpath -m "$1"); mkdir -p "$OUT"; TREE=$(realpath "${2:-$HERE/..}")
MOVED_SED="$OUT/moved.sed"
PYTHONPATH="$HERE/.." python -c '
import re
from powerlab._deprecation import MOVED_MODULES
for old, new in sorted(MOVED_MODULES.items(), key=lambda kv: -len(kv[0])):
    print("s#%s\\b#%s#g" % (re.escape(old), new))' > "$MOVED_SED"
cd "$TREE"; export PYTHONPATH=$TREE
powerlab() { python -m powerlab.cli "$@"; }
S=data/scenarios; R=data/requirements
run() { echo "+ $*" >>"$OUT/commands.log"; "$@" >>"$OUT/stdout.log" 2>&1; echo "exit $?" >>"$OUT/commands.log"; }
printf 'start_utc,end_utc,cap_megawatts\n2025-07-01T14:00:00Z,2025-07-01T14:05:00Z,12\n' > "$OUT/target.csv"
run powerlab demo --out "$OUT/demo" --quiet
run powerlab forecast $S/llama3_16k_h100.yaml --out "$OUT/f16k.csv" --quiet
run powerlab forecast $S/llama3_16k_h100.yaml --out "$OUT/f16k_1s.csv" --resolution 1s --draws 4 --quiet
run powerlab forecast $S/small.yaml --out "$OUT/small.csv" --resolution 1min --quiet
run powerlab comply $S/small.yaml --requirements $R/small_site_example.yaml --out "$OUT/comply"
run powerlab comply $S/llama3_16k_h100.yaml --requirements $R/choukse2025_forms.yaml --out "$OUT/comply16k"
run powerlab size-mitigation $S/small.yaml --requirements $R/small_site_example.yaml --out "$OUT/size" --quiet
run powerlab size-mitigation $S/llama3_16k_h100.yaml --requirements $R/choukse2025_forms.yaml --out "$OUT/size16k" --tick-s auto --hours 0.5 --draws 2 --quiet
run powerlab size-mitigation $S/small.yaml --requirements $R/choukse2025_forms.yaml --out "$OUT/size_small" --tick-s auto --hours 0.5 --quiet
run powerlab flex offer $S/llama3_16k_h100.yaml --out "$OUT/offer"
run powerlab flex plan $S/llama3_16k_h100.yaml --target "$OUT/target.csv" --requirements $R/choukse2025_forms.yaml --out "$OUT/plan" --draws 4 --quiet
run powerlab study-package $S/small.yaml --requirements $R/small_site_example.yaml --out "$OUT/study"
for f in pscad powerfactory csv; do run powerlab export-grid $S/small.yaml --format $f --out "$OUT/grid.$f"; done
run powerlab calibrate data/mlperf-v50-b200-bert/power/result_0 --events data/mlperf-v50-b200-bert/result_0.txt.gz --out "$OUT/job.yaml"
run powerlab backtest data/mlperf-v50-b200-bert/power/result_0 --events data/mlperf-v50-b200-bert/result_0.txt.gz --out "$OUT/backtest"
run powerlab import tests/data/iotools/nvidia_smi_constructed.csv data/mlperf-gpt3-64node/power/node_1.txt.gz data/mlperf-gpt3-64node/power/node_2.txt.gz --tz UTC --out "$OUT/store"
run powerlab summary "$OUT/store"
run powerlab aggregate "$OUT/store" --freq 1min --by host --out "$OUT/agg.csv"
# normalised digests: the run folder's path, generation times and the sidecar's own hash
# (it covers generated_utc) are the only parts allowed to differ between two runs; the
# store's part files have random names, so the store is compared through summary/aggregate
(cd "$OUT" && find . -type f ! -name SHA256SUMS ! -name commands.log ! -name moved.sed ! -name stdout.log ! -name stdout.normalised ! -path './store/*' -print0 | sort -z |
  while IFS= read -r -d '' f; do
    printf '%s  %s\n' "$(sed -E -f "$MOVED_SED" -e "s#$OUT#OUT#g" -e '/"generated_utc"|"sidecar_sha256"/d' -e 's#(powerlab[_ a-z]*"?:? ?"?)0\.[12]\.0#\1VERSION#g' -e 's#([Gg]enerated (by powerlab [^ ]+ on )?)[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC#\1T#g' "$f" | sha256sum | cut -c1-64)" "$f"
  done > SHA256SUMS
 # what the commands printed, less progress and timing lines
 grep -vE '[0-9.]+ s (elapsed|in all|left)|/s  |[0-9.]+ ?s\)?$|took [0-9.]+ ?s|estimate' stdout.log | sed -E -e "s#$OUT#OUT#g" -e 's#0\.[12]\.0#VERSION#g' > stdout.normalised
 printf '%s  %s\n' "$(sha256sum < stdout.normalised | cut -c1-64)" "./stdout.normalised" >> SHA256SUMS)
