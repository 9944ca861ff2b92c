# shellcheck shell=bash disable=SC2154
# Sourced by the contrib scripts (not run): one progress line per step, the
# step's tool output in a log file, and on failure the log's last lines.
#
#   prog=build                      # the prefix of every progress line
#   say "configure"                 # -> "build: configure" (on stderr)
#   step LOG "configure" cmd args   # say, then run cmd >LOG 2>&1; on failure
#                                   # print LOG's last 40 lines and its path
#                                   # and exit 1
#   step LOG "make" in_dir DIR cmd  # the same, cmd run in DIR
# cmd may be a shell function; it runs in a subshell (a cd stays there) in
# which set -e does not apply (it is on the left of ||): chain its commands
# with &&. Progress goes to stderr, so that a script's
# stdout stays its result (setup-deps.sh prints a directory there).

say() { echo "$prog: $*" >&2; }

fail_log() {   # fail_log LOG WHAT: the end of LOG, its path, exit 1
    {
        echo "$prog: $2 FAILED; the last 40 lines of $1:"
        tail -n 40 "$1" | sed 's/^/    /'
        echo "$prog: $2 FAILED (whole log: $1)"
    } >&2
    exit 1
}

step() {
    local log=$1 what=$2
    shift 2
    say "$what"
    mkdir -p "$(dirname "$log")"
    ("$@") </dev/null >"$log" 2>&1 || fail_log "$log" "$what"
}

in_dir() { cd "$1" && shift && "$@"; }
