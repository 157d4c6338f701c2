#!/usr/bin/env bash
# Checks that every C++ file of the repository is formatted as .clang-format says (Google style,
# 100 columns), with Debian's clang-format; run by ctest (test `format`). Exit 1 lists the files
# that differ and the command that formats them.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h')
else
  mapfile -t files < <(find src include python/src tests bench \( -name '*.cc' -o -name '*.h' \) 2> /dev/null)
fi
unformatted=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  "$clang_format" --dry-run -Werror "$f" > /dev/null 2>&1 || unformatted+=("$f")
done
if ((${#unformatted[@]})); then
  echo "format_check: ${#unformatted[@]} file(s) not formatted: ${unformatted[*]}" >&2
  echo "format_check: run  $clang_format -i ${unformatted[*]}" >&2
  exit 1
fi
echo "format_check: ${#files[@]} files formatted"
