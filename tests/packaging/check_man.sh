#!/usr/bin/env bash
# The generated man pages render, have the sections a user looks for, and
# name every command and option that `blkpolicy --help` lists.
set -euo pipefail
build_dir=$1
page8=$build_dir/man/blkpolicy.8
page5=$build_dir/man/blkpolicy.toml.5
# Plain text of a page: roff escapes (\& after dots, \- for dashes) removed.
text() { sed -e 's/\\&//g' -e 's/\\-/-/g' "$1"; }
for p in "$page8" "$page5"; do [[ -s $p ]] || { echo "missing $p"; exit 1; }; done
for section in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS "EXIT STATUS" FILES ENVIRONMENT EXAMPLES; do
    grep -q "^.SH \"*$section\"*" "$page8" || { echo "blkpolicy.8 lacks $section"; exit 1; }
done
# Held in variables: `text | grep -q` under pipefail fails when grep exits
# before sed has written everything (SIGPIPE).
t8=$(text "$page8")
t5=$(text "$page5")
help=$("$build_dir/blkpolicy" --help)
for cmd in $(sed -n '/^Commands:/,/^Options:/p' <<<"$help" | awk '/^  [a-z]/{print $1}'); do
    grep -q -- "$cmd" <<<"$t8" || { echo "blkpolicy.8 does not mention the command $cmd"; exit 1; }
done
for opt in $(grep -o -- '--[a-z-]*' <<<"$help" | sort -u); do
    grep -q -- "$opt" <<<"$t8" || { echo "blkpolicy.8 does not mention $opt"; exit 1; }
done
for key in rotational max_sectors_kb discard_max_bytes write_cache add_random iostats scheduler nr_requests \
           iosched wbt_lat_usec nomerges rq_affinity device.timeout device.queue_depth read_ahead_kb; do
    grep -q -- "$key" <<<"$t5" || { echo "blkpolicy.toml.5 does not mention $key"; exit 1; }
done
man -l "$page8" >/dev/null 2>&1 || { echo "man cannot render blkpolicy.8"; exit 1; }

# bash completion: valid bash that defines and registers the completion.
completion=$(dirname "$0")/../../packaging/blkpolicy.bash-completion
bash -n "$completion"
bash -c "_init_completion() { return 0; }; _filedir() { :; }; source '$completion'; complete -p blkpolicy" | grep -q '_blkpolicy blkpolicy$' || {
    echo "the bash completion does not register itself"; exit 1; }
echo "man pages and bash completion complete"
