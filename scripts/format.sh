#!/usr/bin/env bash
# Formats every C file of the tree (git's tracked *.c and *.h) with
# .clang-format and Debian 12's clang-format (14).
#   scripts/format.sh          rewrite the files that differ
#   scripts/format.sh --check  change nothing: list them and exit 1 if any
# scripts/test.sh runs the check first, so a style that nothing checks
# cannot drift again.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
  echo "format: $cf not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
version=$("$cf" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
  echo "format: $cf is version ${version:-unknown}; the tree is formatted with 14 (Debian 12)," \
    "and another version may format it differently" >&2
fi

mode=${1:-}
case "$mode" in
  "" | --check) ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac

differ=()
while IFS= read -r -d '' f; do
  if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
    differ+=("$f")
  fi
done < <(git ls-files -z -- '*.c' '*.h')

if ((${#differ[@]} == 0)); then
  exit 0
fi
if [ "$mode" = --check ]; then
  echo "format: ${#differ[@]} file(s) differ from .clang-format (scripts/format.sh fixes them):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
"$cf" --style=file -i "${differ[@]}"
echo "format: reformatted ${#differ[@]} file(s)"
