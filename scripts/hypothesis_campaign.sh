#!/usr/bin/env bash
# Seed campaign for the property tests: run every Hypothesis test (the tests under tests/ that use
# @given, selected with Hypothesis's own `-m hypothesis` marker) under N fresh seeds, each with
# every profile named, and report each failure with its seed and the shrunk falsifying example.
# CI stays derandomised (the `ci` profile); this is what a newcomer's `dev` runs can draw.
#
# Usage (from anywhere): bash scripts/hypothesis_campaign.sh [N] [PROFILE ...]
#   N        seeds to run (default 20); one seed of the `dev` profile takes ~100 s on a 2-core machine
#   PROFILE  profiles of tests/conftest.py to run under each seed (default: dev); `campaign` is dev
#            with 4x the examples for tests that do not pin max_examples themselves
# Environment: SEEDS="s1 s2 ..." replays given seeds instead of drawing N fresh ones;
#   CAMPAIGN_LOGS=DIR keeps the per-run logs there (default: a fresh mktemp directory);
#   CAMPAIGN_TESTS="paths" restricts the run (default: every test file under tests/ that uses @given).
# Exit status: 0 when every run passed, 1 when any failed (or did not run).
set -uo pipefail
cd "$(dirname "$0")/.."
N="${1:-20}"
shift || true
PROFILES=("$@")
[ ${#PROFILES[@]} -eq 0 ] && PROFILES=(dev)
case "$N" in ''|*[!0-9]*) echo "N must be a positive integer, got '$N'" >&2; exit 2;; esac
[ "$N" -ge 1 ] || { echo "N must be >= 1" >&2; exit 2; }

if [ -n "${SEEDS:-}" ]; then
  read -r -a seeds <<< "$SEEDS"
else
  # fresh 32-bit seeds from the OS, printed so any run can be replayed with SEEDS=...
  read -r -a seeds <<< "$(python -c "import secrets; print(*(secrets.randbits(32) for _ in range($N)))")"
fi
if [ -n "${CAMPAIGN_TESTS:-}" ]; then
  read -r -a tests <<< "$CAMPAIGN_TESTS"
else
  mapfile -t tests < <(grep -rlE '^\s*@given' tests --include='test_*.py' | sort)
fi
logs="${CAMPAIGN_LOGS:-$(mktemp -d /tmp/hypothesis_campaign.XXXXXX)}"
mkdir -p "$logs"
echo "== hypothesis campaign: ${#seeds[@]} seeds x profiles (${PROFILES[*]}), ${#tests[@]} test files, logs in $logs =="
echo "seeds: ${seeds[*]}"

unset CI  # the ci profile is derandomised: --hypothesis-seed would change nothing
export SPECSIM_HYPOTHESIS_NO_DATABASE=1  # no replays of saved failures: each seed stands alone
runs=0; failed_runs=0; summary=()
for seed in "${seeds[@]}"; do
  for prof in "${PROFILES[@]}"; do
    log="$logs/${prof}_${seed}.log"
    start=$(date +%s)
    SPECSIM_HYPOTHESIS_PROFILE="$prof" python -m pytest -q -m hypothesis -p no:cacheprovider \
      --hypothesis-seed="$seed" --tb=short --durations=10 "${tests[@]}" > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    runs=$((runs + 1))
    tail_line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$log" | tail -1)
    echo "seed $seed profile $prof: rc=$rc ${secs}s  ${tail_line}"
    if [ "$rc" -ne 0 ]; then
      failed_runs=$((failed_runs + 1))
      # each failing test with its shrunk example (Hypothesis prints "Falsifying example: ...")
      grep -E '^(FAILED|ERROR) ' "$log" | sed "s/^/    /"
      awk '/Falsifying (explicit )?example/ {on=1} on && /^(E  |    )?[[:space:]]*\)$/ {print "    " $0; on=0; next}
           on {print "    " $0}' "$log" | sed 's/^    E  */    /' | head -200
      while read -r line; do summary+=("seed $seed ($prof): ${line#FAILED }"); done < <(grep -E '^(FAILED|ERROR) ' "$log")
      [ "$rc" -ne 1 ] && summary+=("seed $seed ($prof): pytest exit status $rc (see $log)")
    fi
  done
done
echo "== summary: $runs runs (${#seeds[@]} seeds), $failed_runs failed =="
for line in "${summary[@]}"; do echo "  $line"; done
[ "$failed_runs" -eq 0 ]
