#!/usr/bin/env bash
# What `make test` runs (and so CI: .ci/run). The phases, each a make target
# of its own:
#
#   minio       scripts/test-deps.sh minio: a go install of some minutes on
#               a fresh machine, in the background from the start; the
#               tests wait for it
#   deps        scripts/test-deps.sh system: what comes from apt-get
#   fmt-check   gofmt
#   vet         go vet -race ./... : under the race detector's build (the
#               Makefile's RACE flags), so that the tests reuse its
#               compilations of every package
#   cross       the shipped commands built and vetted for windows/amd64,
#               type-checked for linux/arm64     } in the background, at a
#   fuzz-short  every fuzz target, briefly       } lower priority, beside
#                                                } test-race
#   test-race   go test -race ./... (with the same RACE flags)
#
# On 2 cores a fresh run is bound by the compiler: MinIO and the race build
# of the tree (vet) take both cores first; the tests then wait on servers,
# phones and timeouts much of the time, which leaves a core to the
# compilations of cross and fuzz-short (their builds share nothing with
# the race build). The run fails when any phase failed, and at the end, or
# when a phase fails, it prints when each phase started and how long it took.
#
# Under `make -n test` (DRY_RUN set) it prints what each phase would run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAKE="${MAKE:-make}"
DRY_RUN="${DRY_RUN:-}"
FOREGROUND=(deps fmt-check vet)   # in order, before the tests
BACKGROUND=(cross fuzz-short)      # in order, in the background, beside the tests
# BG_NICE: the background checks' priority; the tests keep theirs. At 19
# they take the CPU the tests leave idle (the tests alone kept about 56 % of
# 2 cores busy in a warm run: they wait on servers and processes) and give
# it back as soon as a test's thread wakes; at 10 their fuzzing and
# type-checking slowed the tests beside them.
BG_NICE="${BG_NICE:-19}"

# mmss formats a number of seconds as 1m05s.
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

START=$(date +%s)
NAMES=()
BEGINS=()
TIMES=()
NOTES=()
# record NAME BEGIN END [NOTE]: a phase that ran from BEGIN to END (epoch s).
record() { NAMES+=("$1") BEGINS+=($(($2 - START))) TIMES+=($(($3 - $2))) NOTES+=("${4:-}"); }

summary() {
	local i
	echo
	echo "make test: where the time went (start: when the phase began, from the start of make test)"
	printf '  %-11s %7s %7s\n' phase start took
	for i in "${!NAMES[@]}"; do
		printf '  %-11s %7s %7s%s\n' "${NAMES[$i]}" "$(mmss "${BEGINS[$i]}")" "$(mmss "${TIMES[$i]}")" "${NOTES[$i]:+  ${NOTES[$i]}}"
	done
	printf '  %-11s %7s %7s\n' total "" "$(mmss $(($(date +%s) - START)))"
}

# make_phase runs make for one phase (deps: only its system part).
make_phase() {
	if [ "$1" = deps ]; then
		"$MAKE" --no-print-directory "$@" DEPS=system
	else
		"$MAKE" --no-print-directory "$@"
	fi
}

if [ -n "$DRY_RUN" ]; then
	echo "# in the background from the start (test-race waits for it):"
	echo "scripts/test-deps.sh minio"
	for p in "${FOREGROUND[@]}"; do
		echo "# $p"
		make_phase "$p" -n
	done
	for p in "${BACKGROUND[@]}"; do
		echo "# $p (in the background at nice $BG_NICE, beside test-race)"
		make_phase "$p" -n
	done
	echo "# test-race"
	make_phase test-race -n
	exit 0
fi

# --- background jobs -------------------------------------------------------------
# Each runs in a session of its own (setsid), so that the whole of it,
# compilers and test binaries included, can be stopped when the run ends
# early. Its output goes to a log, shown when it is waited for, so that it
# does not interleave with the tests'.
TMP="$(mktemp -d "${TMPDIR:-/tmp}/edge-test.XXXXXX")"
SETSID=()
if command -v setsid >/dev/null 2>&1; then
	SETSID=(setsid)
fi
declare -A BG_PID=()

# start_bg NAME NICE CMD...: runs CMD in the background; its start and end
# times go to files of their own (it may end long before it is waited for).
start_bg() {
	local name="$1" prio="$2"
	shift 2
	nice -n "$prio" "${SETSID[@]}" bash -c 'date +%s >"$0.begin"; rc=0; "$@" || rc=$?; date +%s >"$0.end"; exit $rc' \
		"$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 </dev/null &
	BG_PID[$name]=$!
}

stop_bg() {
	local name pid
	for name in "${!BG_PID[@]}"; do
		pid="${BG_PID[$name]}"
		if kill -0 "$pid" 2>/dev/null; then
			echo "test: stopping $name (in the background)" >&2
			if [ "${#SETSID[@]}" -gt 0 ]; then
				kill -TERM -- "-$pid" 2>/dev/null || true
			else
				kill -TERM "$pid" 2>/dev/null || true
			fi
			wait "$pid" 2>/dev/null || true
		fi
	done
	BG_PID=()
	rm -rf "$TMP"
}
trap stop_bg EXIT
trap 'stop_bg; exit 130' INT
trap 'stop_bg; exit 143' TERM

# wait_bg NAME FILTER [PHASES...]: waits for a background job, shows its log
# (through FILTER) and records it, or each of the PHASES it ran (their
# times in $TMP/<phase>.begin and .end); on failure it shows the whole log
# and fails the run.
wait_bg() {
	local name="$1" filter="$2" t rc begin end p note
	shift 2
	local pid="${BG_PID[$name]}"
	t=$(date +%s)
	if kill -0 "$pid" 2>/dev/null; then
		echo "== $name: waiting for it (in the background)"
	else
		echo "== $name (ran in the background)"
	fi
	rc=0
	wait "$pid" || rc=$?
	unset "BG_PID[$name]"
	note="in the background; waited $(mmss $(($(date +%s) - t)))"
	if [ "$#" -eq 0 ]; then
		set -- "$name"
	fi
	for p in "$@"; do
		[ -f "$TMP/$p.begin" ] || continue
		begin="$(cat "$TMP/$p.begin")"
		if [ -f "$TMP/$p.end" ]; then
			record "$p" "$begin" "$(cat "$TMP/$p.end")" "${note/: FAILED/}"
		else
			record "$p" "$begin" "$(date +%s)" "in the background: FAILED"
		fi
	done
	if [ "$rc" != 0 ]; then
		cat "$TMP/$name.log"
		echo "test: $name failed (exit $rc)" >&2
		summary
		exit 1
	fi
	grep -v -e "$filter" "$TMP/$name.log" || true
}

# --- the phases ----------------------------------------------------------------
# MinIO is on the tests' critical path: it keeps the default priority.
start_bg minio 0 scripts/test-deps.sh minio

run_phase() {
	local p="$1" t
	echo "== $p"
	t=$(date +%s)
	if ! make_phase "$p"; then
		record "$p" "$t" "$(date +%s)" FAILED
		summary
		exit 1
	fi
	record "$p" "$t" "$(date +%s)"
}

for p in "${FOREGROUND[@]}"; do
	run_phase "$p"
done
# The background checks run one after the other, beside the tests.
start_bg checks "$BG_NICE" bash -c 'make="$1" dir="$2"; shift 2
	for p in "$@"; do
		echo "== $p"; date +%s >"$dir/$p.begin"
		"$make" --no-print-directory "$p" || exit
		date +%s >"$dir/$p.end"
	done' _ "$MAKE" "$TMP" "${BACKGROUND[@]}"
echo "== ${BACKGROUND[*]}: started in the background at nice $BG_NICE"
wait_bg minio '^go: downloading '
run_phase test-race
wait_bg checks '^$' "${BACKGROUND[@]}"
summary
