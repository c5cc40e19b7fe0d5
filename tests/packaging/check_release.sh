#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The version is set once, in CMakeLists.txt's project(): NEWS.md's newest
# entry, debian/changelog's and `blkpolicy --version` must say the same. And
# every deprecation in NEWS.md names the release it ends in, later than this
# one, and the man page says that release wherever it names the deprecated
# thing.
set -euo pipefail
src_dir=$1
build_dir=$2
fail() { echo "$*"; exit 1; }
version=$(sed -n 's/^project(blkpolicy VERSION \([0-9.]*\) .*/\1/p' "$src_dir/CMakeLists.txt")
[[ -n "$version" ]] || fail "no version in CMakeLists.txt's project()"
news=$(sed -n 's/^## \([0-9][0-9.]*\) (.*/\1/p' "$src_dir/NEWS.md" | head -n1)
[[ "$news" == "$version" ]] || fail "NEWS.md's newest release is '$news', CMakeLists.txt says $version"
changelog=$(sed -n '1s/^blkpolicy (\([^)]*\)).*/\1/p' "$src_dir/debian/changelog")
[[ "$changelog" == "$version" ]] || fail "debian/changelog's newest entry is '$changelog', CMakeLists.txt says $version"
binary=$("$build_dir/blkpolicy" --version)
[[ "$binary" == "blkpolicy $version" ]] || fail "blkpolicy --version says '$binary', CMakeLists.txt says $version"

# The newest entry's deprecations: "### Deprecated (removed in X.Y.Z)" and
# one bullet per deprecated name, the name in the bullet's first `...`.
/usr/bin/python3 - "$src_dir" "$version" <<'PY'
import re, sys
src, version = sys.argv[1], sys.argv[2]
def key(v):
    return tuple(int(x) for x in v.split("."))
news = open(f"{src}/NEWS.md").read()
newest = news.split("\n## ")[1]  # the newest release's entry
man = open(f"{src}/docs/blkpolicy.8.scd").read().split("\n\n")  # paragraphs
problems = []
sections = re.findall(r"^### Deprecated \(removed in ([0-9.]+)\)\n(.*?)(?=^### |\Z)", newest, re.M | re.S)
for ends, body in sections:
    if key(ends) <= key(version):
        problems.append(f"NEWS.md: deprecations removed in {ends}, not after this release ({version})")
    names = re.findall(r"^- [^`]*`([^`]+)`", body, re.M)
    if not names:
        problems.append(f"NEWS.md: a deprecated section (removed in {ends}) that names nothing")
    for name in names:
        said = [p for p in man if name in p.replace("*", "")]
        if not said:
            problems.append(f"blkpolicy(8) never names the deprecated {name}")
        elif not any(f"removed in {ends}" in p and "deprecated" in p for p in said):
            problems.append(f"blkpolicy(8) names {name} but not that it is deprecated and removed in {ends}")
        else:
            print(f"deprecated: {name}, removed in {ends}, said in blkpolicy(8)")
if problems:
    print("\n".join(problems))
    sys.exit(1)
PY
echo "version $version in CMakeLists.txt, NEWS.md, debian/changelog and blkpolicy --version"
