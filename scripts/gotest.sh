#!/usr/bin/env bash
# Runs `go test` with the given arguments and, when it fails, ends with a
# short summary of why: the failed tests, and for a timeout the tests that
# were running and the test goroutines that had been blocked for minutes.
# CI shows only the tail of a long output; a timeout's goroutine dump is
# thousands of lines, and the line that names the hung test is at its top.
set -uo pipefail

log=$(mktemp "${TMPDIR:-/tmp}/gotest.XXXXXX")
trap 'rm -f "$log"' EXIT

"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && exit 0

{
  echo
  echo "=== go test failed (exit $rc): summary of $*"
  grep -E '^(--- FAIL|FAIL|panic: )' "$log" | head -40
  if grep -q '^panic: test timed out' "$log"; then
    echo "--- running when the timeout struck:"
    sed -n '/^panic: test timed out/,/^$/p' "$log" | sed -n '2,30p'
    echo "--- goroutines in test code blocked for minutes (first frames):"
    # A goroutine block runs from its "goroutine N [state, M minutes]:"
    # line to the next blank line; keep those that pass through a _test.go.
    awk '
      /^goroutine [0-9]+ \[.*minutes\]:$/ { inblk = 1; blk = $0; n = 0; hit = 0; next }
      inblk && /^$/ { if (hit) { print blk; print "" } inblk = 0; next }
      inblk { if (n < 24) { blk = blk "\n" $0; n++ } if ($0 ~ /_test\.go:/) hit = 1 }
    ' "$log" | head -150
  fi
} >&2
exit "$rc"
