# shellcheck shell=bash
# Sourced by the shell checks (test/activation/check_*.sh,
# test/wheel/check_wheel.sh): one PASS/FAIL line per check, the count at the
# end.
#
#   check "what is checked" cmd args...   # PASS or FAIL line; returns cmd's
#                                         # verdict, so `if check ...` works
#   checks_summary                        # "N passed, N failed"; status 0
#                                         # only when none failed
pass=0 fail=0

check() {
    local name=$1; shift
    if "$@"; then
        echo "PASS: $name"; pass=$((pass + 1))
    else
        echo "FAIL: $name"; fail=$((fail + 1))
        return 1
    fi
}

checks_summary() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
