#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The project's licence: LICENSE (MIT) at the top, the same terms in
# debian/copyright (as Debian names them, Expat), and an SPDX line near the
# top of every source file: C++, scripts, Python, CMake, rules.
set -euo pipefail
src=$1
cd "$src"
grep -q "^MIT License$" LICENSE || { echo "LICENSE is not the MIT licence"; exit 1; }
grep -q "^License: Expat$" debian/copyright || { echo "debian/copyright does not give the Expat (MIT) licence"; exit 1; }
if grep -q "unspecified\|all rights are reserved" debian/copyright; then echo "debian/copyright still reserves rights"; exit 1; fi
missing=()
count=0
while IFS= read -r f; do
    case $f in
        fuzz/corpus/*) continue ;;
        *.cpp|*.hpp|*.c|*.sh|*.py|*.yml|CMakeLists.txt|*/CMakeLists.txt|.ci/run|debian/rules|debian/postrm) ;;
        *) continue ;;
    esac
    [[ -f $f ]] || continue
    count=$((count + 1))
    head -3 "$f" | grep -q "SPDX-License-Identifier: MIT" || missing+=("$f")
done < <(git ls-files 2>/dev/null || find . -type f -printf '%P\n')
if ((${#missing[@]} > 0)); then
    echo "no SPDX-License-Identifier: MIT line in the first three lines of:"
    printf '  %s\n' "${missing[@]}"
    exit 1
fi
echo "licence: MIT; $count source files carry the SPDX line"
