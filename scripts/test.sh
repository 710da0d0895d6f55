#!/usr/bin/env bash
# What `make test` runs (and so CI: .ci/run). The phases, in order, each a
# make target of its own:
#
#   deps        scripts/test-deps.sh system: what comes from apt-get
#   fmt-check   gofmt
#   vet         go vet ./...
#   cross       go vet ./... for windows/amd64, go build ./... for linux/arm64
#   fuzz-short  every fuzz target, briefly
#   test-race   go test -race ./...
#
# MinIO (scripts/test-deps.sh minio: a go install of some minutes on a fresh
# machine) is installed in the background from the start, at a lower
# priority, while the phases before test-race run; test-race waits for it,
# and the run fails when it failed. At the end, and when a phase fails, it
# prints how long each phase took.
#
# Under `make -n test` (DRY_RUN set) it prints what each phase would run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAKE="${MAKE:-make}"
DRY_RUN="${DRY_RUN:-}"
PHASES=(deps fmt-check vet cross fuzz-short test-race)

# mmss formats a number of seconds as 1m05s.
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

START=$(date +%s)
NAMES=()
TIMES=()
NOTES=()
record() { NAMES+=("$1") TIMES+=("$2") NOTES+=("${3:-}"); }

summary() {
	local i
	echo
	echo "make test: where the time went"
	for i in "${!NAMES[@]}"; do
		printf '  %-11s %7s%s\n' "${NAMES[$i]}" "$(mmss "${TIMES[$i]}")" "${NOTES[$i]:+  ${NOTES[$i]}}"
	done
	printf '  %-11s %7s\n' total "$(mmss $(($(date +%s) - START)))"
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
	echo "# in the background from the start, at nice 10 (test-race waits for it):"
	echo "scripts/test-deps.sh minio"
	for p in "${PHASES[@]}"; do
		echo "# $p"
		make_phase "$p" -n
	done
	exit 0
fi

# --- MinIO in the background ---------------------------------------------------
# In a session of its own (setsid), so that the whole go install, compilers
# included, can be stopped when the run ends early.
MINIO_LOG="$(mktemp "${TMPDIR:-/tmp}/edge-test-minio.XXXXXX")"
MINIO_END="$MINIO_LOG.end"
MINIO_GROUP=0
SETSID=()
if command -v setsid >/dev/null 2>&1; then
	MINIO_GROUP=1 SETSID=(setsid)
fi
# The end time goes to a file of its own: the install may end long before
# the tests wait for it.
nice -n 10 "${SETSID[@]}" bash -c 'rc=0; scripts/test-deps.sh minio || rc=$?; date +%s >"$1"; exit $rc' \
	_ "$MINIO_END" >"$MINIO_LOG" 2>&1 </dev/null &
MINIO_PID=$!

stop_minio() {
	if [ -n "${MINIO_PID:-}" ] && kill -0 "$MINIO_PID" 2>/dev/null; then
		echo "test: stopping the background MinIO install" >&2
		if [ "$MINIO_GROUP" = 1 ]; then
			kill -TERM -- "-$MINIO_PID" 2>/dev/null || true
		else
			kill -TERM "$MINIO_PID" 2>/dev/null || true
		fi
		wait "$MINIO_PID" 2>/dev/null || true
	fi
	MINIO_PID=
	rm -f "$MINIO_LOG" "$MINIO_END"
}
trap stop_minio EXIT
trap 'stop_minio; exit 130' INT
trap 'stop_minio; exit 143' TERM

# wait_minio waits for the background install, shows what it printed (its
# go: downloading lines only when it failed) and fails when it failed.
wait_minio() {
	local t rc end
	t=$(date +%s)
	if kill -0 "$MINIO_PID" 2>/dev/null; then
		echo "== minio: waiting for the background install"
	fi
	rc=0
	wait "$MINIO_PID" || rc=$?
	MINIO_PID=
	end="$(cat "$MINIO_END" 2>/dev/null || date +%s)"
	if [ "$rc" != 0 ]; then
		cat "$MINIO_LOG"
		echo "test: scripts/test-deps.sh minio failed (exit $rc); the tests need MinIO" >&2
		record minio $((end - START)) "in the background: FAILED"
		summary
		exit 1
	fi
	grep -v '^go: downloading ' "$MINIO_LOG" || true
	record minio $((end - START)) "in the background from the start; waited $(mmss $(($(date +%s) - t)))"
}

# --- the phases ----------------------------------------------------------------
for p in "${PHASES[@]}"; do
	[ "$p" != test-race ] || wait_minio
	echo "== $p"
	t=$(date +%s)
	if ! make_phase "$p"; then
		record "$p" $(($(date +%s) - t)) FAILED
		summary
		exit 1
	fi
	record "$p" $(($(date +%s) - t))
done
summary
