# cli_lib.sh - what the command-line test scripts share (sourced by cli_test.sh and
# cli_oom_test.sh after they set $scratch, the scratch directory's name prefix): a scratch
# directory that is removed on exit, made the current directory; ok / bad, which count failures
# in $fails.
# Under AddressSanitizer a report must not pass for an expected exit 1 (a bad input file).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
# A tmpfs keeps the many fsyncs of the atomic writer cheap; any directory works.
base=${TMPDIR:-/tmp}
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
T=$(mktemp -d "$base/$scratch.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
cd "$T" || exit 1
fails=0
ok() { printf 'ok   %s\n' "$1"; }
bad() { printf 'FAIL %s\n' "$1"; fails=$((fails + 1)); }
