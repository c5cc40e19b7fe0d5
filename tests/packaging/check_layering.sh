#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The build enforces the layering of ARCHITECTURE.md: each library compiles
# against the staging include directories of itself and what it links, so a
# header of a layer above it cannot be found. Compiles one-line files with
# exactly those directories and expects the allowed includes to work and
# the forbidden ones to fail.
set -euo pipefail
build_dir=$(realpath "$1")
# Compile from an empty directory: a quoted include also searches the
# current one, which must not be the source tree.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
cxx=${CXX:-c++}
# Library -> the include directories its sources really compile with (from
# compile_commands.json), found through a compile of its target (bp_LIB):
# one of its files, or one of its unity batches (BLKPOLICY_UNITY).
libs=(util kernel_rows policy writer_model writers report udev systemd agent daemon measure)
declare -A dirs
for lib in "${libs[@]}"; do
  dirs[$lib]=$(python3 - "$build_dir/compile_commands.json" "bp_$lib" <<'PY'
import json, shlex, sys
for entry in json.load(open(sys.argv[1])):
    if f"CMakeFiles/{sys.argv[2]}.dir/" in entry["command"]:
        args = shlex.split(entry["command"])
        out = [args[i + 1] for i, a in enumerate(args) if a in ("-I", "-isystem")]
        out += [a[2:] for a in args if a.startswith("-I") and len(a) > 2]
        print(" ".join(out))
        break
else:
    sys.exit("no compile command for " + sys.argv[2])
PY
)
done
try() {  # library header -> ok, or refused when the header is not found (any other error fails)
  local flags=() d out
  for d in ${dirs[$1]}; do flags+=(-I "$d"); done
  if out=$(echo "#include \"$2\"" | "$cxx" -std=c++20 -fsyntax-only -x c++ "${flags[@]}" - 2>&1); then
    echo ok
  elif grep -q -- "$2: No such file or directory" <<<"$out"; then
    echo refused
  else
    echo "error: $out"
  fi
}
fail=0
checked=0
expect() {  # ok|refused library header
  local want=$1 lib=$2 header=$3 got
  got=$(try "$lib" "$header")
  checked=$((checked + 1))
  if [[ $got != "$want" ]]; then echo "layering: $lib including $header: $got, expected $want"; fail=1; fi
}
expect ok kernel_rows util/names.hpp
expect ok kernel_rows policy/keys.hpp
expect ok kernel_rows util/text.hpp
expect refused kernel_rows udev/sysfs_text.hpp
expect refused kernel_rows util/files.hpp
expect refused kernel_rows report/explain.hpp
expect ok policy policy/plan.hpp
expect ok policy kernel/rows.hpp
expect refused policy report/explain.hpp
expect refused policy report/audit.hpp
expect refused policy writers/model.hpp
expect refused policy util/files.hpp
expect ok policy util/names.hpp
expect ok policy util/utf8.hpp
expect ok policy util/text.hpp
expect ok policy util/quoted.hpp
expect refused policy udev/sysfs_text.hpp
expect refused policy udev/sysfs.hpp
expect refused policy agent/state.hpp
expect refused util policy/plan.hpp
expect refused util udev/sysfs_text.hpp
expect ok writer_model util/text.hpp
expect refused writer_model writers/parsers.hpp
expect refused writer_model util/files.hpp
expect ok writers writers/model.hpp
expect ok writers util/files.hpp
expect refused writers report/audit.hpp
expect refused writers udev/sysfs.hpp
expect ok report writers/model.hpp
expect ok report policy/plan.hpp
expect refused report writers/parsers.hpp
expect refused report writers/udev_rules.hpp
expect refused report util/files.hpp
expect refused report udev/sysfs.hpp
expect ok udev policy/facts.hpp
expect ok udev udev/sysfs_text.hpp
expect refused udev writers/scan.hpp
expect refused udev report/audit.hpp
expect refused udev agent/snapshot.hpp
expect refused udev systemd/alerts.hpp
expect refused systemd policy/plan.hpp
expect ok systemd util/fd.hpp
expect ok systemd util/names.hpp
expect ok agent udev/discovery.hpp
expect ok agent writers/scan.hpp
expect refused agent agent/daemon/reconciler.hpp
expect refused agent agent/cli/commands.hpp
expect refused agent agent/daemon/outputs.hpp
expect ok agent agent/daemon_client.hpp
expect ok measure udev/sysfs.hpp
expect ok measure report/audit.hpp
expect refused measure writers/parsers.hpp
expect refused measure agent/state.hpp
expect refused measure systemd/alerts.hpp
expect refused udev measure/session.hpp
expect ok agent measure/session.hpp
expect ok daemon agent/snapshot.hpp
expect refused daemon agent/cli/commands.hpp
[[ $fail == 0 ]] && echo "layering holds: $checked includes checked"
exit $fail
