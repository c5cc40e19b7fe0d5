#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The generated man pages render, have the sections a user looks for, and
# name every command and option that `blkpolicy --help` lists.
set -euo pipefail
build_dir=$1
page8=$build_dir/man/blkpolicy.8
page5=$build_dir/man/blkpolicy.toml.5
# Plain text of a page: roff escapes (\& after dots, \- for dashes) removed.
text() { sed -e 's/\\&//g' -e 's/\\-/-/g' "$1"; }
for p in "$page8" "$page5"; do [[ -s $p ]] || { echo "missing $p: the build found no scdoc (scripts/install-deps.sh installs it)"; exit 1; }; done
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
# Every attribute and match key the loader knows (its own lists, from the
# error for an unknown one) is described in blkpolicy.toml(5).
known() {  # TOML text -> the names in the error's "(known: ...)" or "(writable: ...)" list
    local f; f=$(mktemp --suffix=.toml)
    printf '%s' "$1" >"$f"
    "$build_dir/blkpolicy" check --policy "$f" 2>&1 | sed -n -E 's/.*\((known|writable): (.*)\)$/\2/p' | tr ',' '\n' |
        sed -e 's/^ *//' -e 's/\.<.*>$//'
    rm -f "$f"
}
attributes=$(known $'[[rule]]\nname = "x"\n[rule.set]\nno_such_attribute = 1\n')
match_keys=$(known $'[[rule]]\nname = "x"\n[rule.match]\nno_such_key = "x"\n[rule.set]\nnomerges = 1\n')
[[ $(wc -l <<<"$attributes") -ge 15 && $(wc -l <<<"$match_keys") -ge 13 ]] || {
    echo "could not read the known attributes and match keys from blkpolicy check"; exit 1; }
for key in $attributes $match_keys; do
    grep -q -- "$key" <<<"$t5" || { echo "blkpolicy.toml.5 does not mention $key"; exit 1; }
done
man -l "$page8" >/dev/null 2>&1 || { echo "man cannot render blkpolicy.8"; exit 1; }

# bash completion: valid bash that defines and registers the completion.
completion=$(dirname "$0")/../../packaging/blkpolicy.bash-completion
bash -n "$completion"
bash -c "_init_completion() { return 0; }; _filedir() { :; }; source '$completion'; complete -p blkpolicy" | grep -q '_blkpolicy blkpolicy$' || {
    echo "the bash completion does not register itself"; exit 1; }
echo "man pages and bash completion complete"
