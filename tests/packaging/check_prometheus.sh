#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The shipped Prometheus rules: valid (promtool check rules) and doing what
# their unit tests say (promtool test rules): every alert fires in its case
# and stays quiet in the others.
set -euo pipefail
src=$1
command -v promtool >/dev/null || { echo "promtool is not installed (scripts/install-deps.sh --tests installs prometheus)"; exit 1; }
promtool check rules "$src/prometheus/blkpolicy-rules.yml"
cd "$src/prometheus"
promtool test rules blkpolicy-rules.test.yml
