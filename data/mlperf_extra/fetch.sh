#!/bin/sh
# Fetch the extra MLPerf Training v4.0 power recordings used by
# benchmarks/bench_backtest_blind.py (issue 32) into DEST (default ../cal-extra), kept out
# of git (about 46 MB development + 20 MB sealed).
# Source: public repository mlcommons/training_results_v4.0, commit
# 6fe954378efe4a1a1bd665550b18ff8f26018def, Apache License 2.0 (LICENSE.md, copied too);
# copyright MLCommons and the submitter (Sustainable Metal Cloud / Supermicro, "smc").
# Never fetched (sealed for the project's acceptance check): round v4.1, and v4.0's
# 64-node llama2_70b_lora power logs.
set -eu
DEST=${1:-../cal-extra}
REPO=https://github.com/mlcommons/training_results_v4.0
COMMIT=6fe954378efe4a1a1bd665550b18ff8f26018def
TMP=$(mktemp -d)
git -C "$TMP" init -q && git -C "$TMP" remote add origin "$REPO"
git -C "$TMP" sparse-checkout set --no-cone \
  LICENSE.md smc-ac-power/systems \
  smc-ac-power/results/8xSMC-H100-SXM-80GB/resnet smc-ac-power/results/8xSMC-H100-SXM-80GB/ssd \
  smc-ac-power/results/1xSMC-H100-SXM-80GB/llama2_70b_lora \
  smc-ac-power/results/1xSMC-H100-SXM-80GB/resnet smc-ac-power/results/1xSMC-H100-SXM-80GB/ssd \
  smc-ac-power/results/1xSMC-H100-SXM-80GB/dlrm_dcnv2 smc-ac-power/results/1xSMC-H100-SXM-80GB/unet3d \
  smc-ac-power/results/9xSMC-H100-SXM-80GB smc-dc-power/results/9xSMC-H100-SXM-80GB
git -C "$TMP" fetch -q --depth 1 --filter=blob:none origin "$COMMIT"
git -C "$TMP" checkout -q FETCH_HEAD
mkdir -p "$DEST/sealed"
cp -r "$TMP/LICENSE.md" "$DEST/"
mkdir -p "$DEST/smc-ac-power/results"
cp -r "$TMP/smc-ac-power/systems" "$DEST/smc-ac-power/"
for s in 8xSMC-H100-SXM-80GB 1xSMC-H100-SXM-80GB; do
  cp -r "$TMP/smc-ac-power/results/$s" "$DEST/smc-ac-power/results/"
done
mkdir -p "$DEST/sealed/smc-ac-power/results" "$DEST/sealed/smc-dc-power/results"
cp -r "$TMP/smc-ac-power/results/9xSMC-H100-SXM-80GB" "$DEST/sealed/smc-ac-power/results/"
cp -r "$TMP/smc-dc-power/results/9xSMC-H100-SXM-80GB" "$DEST/sealed/smc-dc-power/results/"
rm -rf "$TMP"
echo "fetched into $DEST"
