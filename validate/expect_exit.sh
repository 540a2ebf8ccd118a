#!/bin/sh
# Runs a command and passes when it exits CODE and its output matches the extended regex
# REGEX: for tests whose command must fail in one particular way.
# usage: expect_exit.sh CODE REGEX COMMAND [ARGS...]
code=$1
regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -ne "$code" ]; then echo "expect_exit: exit $status, wanted $code"; exit 1; fi
if ! printf '%s\n' "$output" | grep -Eq "$regex"; then echo "expect_exit: output does not match /$regex/"; exit 1; fi
exit 0
