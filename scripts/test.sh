#!/usr/bin/env bash
# The test command: installs what is missing, checks that every C file is
# formatted (scripts/format.sh), then builds and tests twice: with
# ASan+UBSan and -Werror (every unit and end-to-end test but the fairness
# tests, and the structure check scripts/check-deps.py), and a plain
# -Werror build (the end-to-end tests labelled `plain` in
# test/e2e/CMakeLists.txt again, as the hook runs in production: the
# timed and those ASan cannot run), then fuzzes the decoders of
# outside input for $GMT_FUZZ_SECONDS each (default 60; 0 skips; clang
# build, scripts/fuzz.sh). No GPU needed: the tests use the fake driver.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
asan=${GMT_TEST_BUILD:-$root/build-test}
plain=${GMT_TEST_BUILD_PLAIN:-$root/build-test-plain}

"$root/scripts/setup.sh" --packages-only
echo "== format"
"$root/scripts/format.sh" --check
"$root/scripts/setup.sh" "$asan" -DCMAKE_BUILD_TYPE=Debug -DGMT_SANITIZE=ON -DGMT_WERROR=ON
"$root/scripts/setup.sh" "$plain" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMT_SANITIZE=OFF -DGMT_WERROR=ON

echo "== structure: no cycles between files, no upward includes"
python3 "$root/scripts/check-deps.py" "$asan"
echo "== tests, ASan+UBSan build"
# The fairness tests (e2e_test_tokens: nearly three minutes of timed
# windows) run in the plain build only, where their timing is the hook's
# as in production; under ASan the token code runs in every other
# end-to-end test (each launch is gated) and in test_token.
(cd "$asan" && ctest --output-on-failure --timeout 600 -E '^e2e_test_tokens$' "$@")
echo "== end-to-end tests labelled plain, plain build"
(cd "$plain" && ctest --output-on-failure --timeout 600 -L plain "$@")
echo "== fuzz: the envelope decoder, the config parser, the trace dump loader, the webhook's review, the metrics port's request head"
"$root/scripts/fuzz.sh" "${GMT_FUZZ_SECONDS:-60}"
