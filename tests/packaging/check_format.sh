#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every C and C++ source in the tree is formatted the way .clang-format says
# (clang-format 14, Debian 12's: another version formats some lines
# differently). Fix with: clang-format-14 -i FILE...
set -euo pipefail
src=$1
fmt=$(command -v clang-format-14 || true)
[[ -n $fmt ]] || { echo "clang-format-14 is not installed (scripts/install-deps.sh --tests installs it)"; exit 1; }
cd "$src"
mapfile -t files < <(find agent kernel policy writers udev util systemd measure tests bench fuzz \( -name '*.cpp' -o -name '*.hpp' -o -name '*.c' \) \
                      -not -path 'tests/vm/*' | sort)
((${#files[@]} > 100)) || { echo "found only ${#files[@]} sources: wrong directory?"; exit 1; }
bad=()
for f in "${files[@]}"; do
    "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
    echo "not formatted as .clang-format says (clang-format-14 -i to fix):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "${#files[@]} sources formatted"
