#!/usr/bin/env bash
# A Tock worker in bash, curl and jq (docs/workers-any-language.md). A simple loop:
#
#   1. claim a batch (POST /v1/leases, long-polling up to TOCK_WAIT_MS, with a claim_id so that a
#      claim retried after a connection error gets the same runs back rather than more);
#   2. run each run's handler, one after another: the shell function handle_<handler>, given the
#      run as JSON in $1. Its stdout is the run's output; exit 0 succeeds, exit 100 fails for good
#      (dead-lettered at once), any other exit fails this attempt (retried with the job's backoff);
#   3. meanwhile a background loop renews every lease of the batch in one request
#      (POST /v1/workers/{id}/heartbeat) at a third of the lease; a run it reports lost is
#      dropped (its handler killed if running, its result never sent);
#   4. send the batch's results in one request (POST /v1/runs/complete); each entry has its own
#      outcome, and one the server did not write (lost, not_found, conflict) is dropped, never
#      sent again: the run belongs to someone else now.
#
# SIGTERM or SIGINT: stop claiming (a waiting claim is cut off: the server gives back what a gone
# client claimed), let the running handler finish within TOCK_GRACE seconds (else kill it), release
# the batch's runs not started (POST /v1/runs/{id}/release, no attempt spent), send the results,
# leave (DELETE /v1/workers/{id}) and exit 0. Connection errors, 5xx and 429 are retried with a
# bounded backoff (after Retry-After when given), so the worker rides out a server restart; 401 or
# 403 stops it with exit code 2. A second signal exits at once (exit 1).
#
# Settings (environment): TOCK_URL (default http://127.0.0.1:8080), TOCK_KEY (an API key of role
# worker; none for `tock dev`), TOCK_POOL (default), TOCK_HANDLERS (comma-separated; default every
# handle_* function below), TOCK_BATCH (runs per claim, default 10), TOCK_WAIT_MS (long-poll,
# default 10000), TOCK_GRACE (seconds, default 10), TOCK_WORKER_ID (default sh-<host>-<pid>).
set -uo pipefail

TOCK_URL="${TOCK_URL:-http://127.0.0.1:8080}"
TOCK_URL="${TOCK_URL%/}"
TOCK_KEY="${TOCK_KEY:-}"
TOCK_POOL="${TOCK_POOL:-default}"
TOCK_BATCH="${TOCK_BATCH:-10}"
TOCK_WAIT_MS="${TOCK_WAIT_MS:-10000}"
TOCK_GRACE="${TOCK_GRACE:-10}"
TOCK_WORKER_ID="${TOCK_WORKER_ID:-sh-$(hostname)-$$-$RANDOM}"

PERMANENT_EXIT=100 # a handler exiting with this fails for good: retryable false
BACKOFF_FIRST_MS=200
BACKOFF_CAP_MS=5000
RETRY_AFTER_CAP_S=30
FLUSH_S=10 # after the grace, how long results and releases may still take on shutdown

# ---------------------------------------------------------------------------------------------
# Handlers: handle_<name> gets the run (JSON: run_id, job_id, attempt, payload, ...) in $1.
# ---------------------------------------------------------------------------------------------

# The payload: a string as it is, anything else as JSON.
handle_echo() { jq -r '.payload | if type == "string" then . else tojson end' <<<"$1"; }

# Sleeps payload.seconds (default 1).
handle_sleep() {
  local s
  s=$(jq -r '.payload.seconds // 1' <<<"$1")
  sleep "$s" && echo "slept ${s}s"
}

# Fails for good: dead-lettered at once, whatever the job's max_attempts.
handle_fail() {
  jq -r '.payload.message // "failed on purpose"' <<<"$1" >&2
  return "$PERMANENT_EXIT"
}

# Fails (retryably) on the first attempt, succeeds on the next.
handle_flaky() {
  local attempt
  attempt=$(jq -r '.attempt' <<<"$1")
  if ((attempt < 2)); then
    echo "flaky on attempt $attempt" >&2
    return 1
  fi
  echo "succeeded on attempt $attempt"
}

# ---------------------------------------------------------------------------------------------

for tool in curl jq; do
  command -v "$tool" >/dev/null || {
    echo "worker.sh: $tool is needed" >&2
    exit 1
  }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tock-sh-worker.XXXXXX")"
MAIN_PID=$BASHPID
# Only this shell removes the scratch directory, never a subshell that ends (a background job).
trap '[[ $BASHPID != "$MAIN_PID" ]] || rm -rf "$WORK"' EXIT
STOPPING=0
STOP_DEADLINE=0

log() { printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$*" >&2; }
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# Sleeps $1 ms in the background, so that a signal is handled at once (bash runs a trap only
# between commands, or when `wait` is interrupted).
nap() {
  sleep "$(seconds "$1")" &
  wait $! 2>/dev/null
}

if [[ -n ${TOCK_HANDLERS:-} ]]; then
  HANDLERS=$(jq -Rc 'split(",") | map(select(. != ""))' <<<"$TOCK_HANDLERS")
else
  HANDLERS=$(compgen -A function handle_ | sed 's/^handle_//' | jq -Rsc 'split("\n") | map(select(. != ""))')
fi
for h in $(jq -r '.[]' <<<"$HANDLERS"); do
  declare -F "handle_$h" >/dev/null || {
    echo "worker.sh: no function handle_$h for handler $h" >&2
    exit 1
  }
done

# api METHOD PATH [BODY] [DEADLINE_MS]: one call to the API. The answer's body is left in
# $API_OUT (default $WORK/answer) and its status in API_STATUS. Connection errors, 5xx and 429 are
# retried with a bounded backoff until DEADLINE_MS (epoch ms; 0: no deadline; once stopping, the
# shutdown's deadline at the latest). With ABORTABLE=1 (the claim) a signal cuts the call off.
# Returns 1 when it gave up; exits 2 on 401/403.
api() {
  local method=$1 path=$2 body=${3-} deadline=${4:-0} out=${API_OUT:-$WORK/answer}
  local pause=$BACKOFF_FIRST_MS tries=0 code rc pid wait_ms problem retry_after
  local max_time=30
  [[ $path == /v1/leases ]] && max_time=$((TOCK_WAIT_MS / 1000 + 15))
  local -a args=(-sS -X "$method" -o "$out" -D "$out.headers" -w '%{http_code}' --max-time "$max_time"
    -H 'accept: application/json')
  [[ -n $TOCK_KEY ]] && args+=(-H "authorization: Bearer $TOCK_KEY")
  if [[ -n $body ]]; then
    printf '%s' "$body" >"$out.request"
    args+=(-H 'content-type: application/json' --data-binary "@$out.request")
  fi
  API_STATUS=0
  while :; do
    # A signal handled just before (between two commands) did not interrupt a wait: check here.
    [[ ${ABORTABLE:-0} == 1 && $STOPPING == 1 ]] && return 1
    tries=$((tries + 1))
    : >"$out"
    curl "${args[@]}" "$TOCK_URL$path" >"$out.code" 2>"$out.err" &
    pid=$!
    while :; do
      wait "$pid"
      rc=$?
      kill -0 "$pid" 2>/dev/null || break # curl ended (else a signal interrupted the wait)
      if [[ ${ABORTABLE:-0} == 1 && $STOPPING == 1 ]]; then
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 1
      fi
    done
    code=$(<"$out.code")
    retry_after=""
    if ((rc == 0)) && [[ $code == 401 || $code == 403 ]]; then
      log "the server refused the key ($code $(jq -r '.error.code + ": " + .error.message' "$out" 2>/dev/null)); stopping"
      exit 2
    fi
    if ((rc == 0)) && [[ $code != 429 && $code != 5* ]]; then
      API_STATUS=$code
      return 0
    fi
    if ((rc != 0)); then
      problem="curl exit $rc: $(head -c 200 "$out.err")"
    else
      problem="HTTP $code"
      retry_after=$(tr -d '\r' <"$out.headers" | awk -F': *' 'tolower($1) == "retry-after" { print $2 }' | tail -1)
    fi
    if [[ $retry_after =~ ^[0-9]+$ ]]; then
      wait_ms=$((retry_after > RETRY_AFTER_CAP_S ? RETRY_AFTER_CAP_S * 1000 : retry_after * 1000))
    else
      wait_ms=$((pause / 2 + RANDOM % (pause / 2 + 1)))
    fi
    pause=$((pause * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : pause * 2))
    if ((STOPPING)) && ((deadline == 0 || deadline > STOP_DEADLINE)); then deadline=$STOP_DEADLINE; fi
    if [[ ${ABORTABLE:-0} == 1 && $STOPPING == 1 ]] || ((deadline > 0 && $(now_ms) + wait_ms > deadline)); then
      log "gave up on $method $path: $problem"
      return 1
    fi
    if ((tries == 1 || tries == 4 || tries % 20 == 0)); then
      log "$method $path failed ($problem); retrying, try $tries"
    fi
    nap "$wait_ms"
  done
}

on_signal() {
  if ((STOPPING)); then
    log "second signal: exiting at once; unreleased runs come back when their leases expire"
    exit 1
  fi
  STOPPING=1
  STOP_DEADLINE=$(($(now_ms) + (TOCK_GRACE + FLUSH_S) * 1000))
  log "stopping: the running handler gets ${TOCK_GRACE}s, the rest of the batch is released"
}
trap on_signal TERM INT

# jq: an RFC 3339 instant (with or without fractional seconds) as epoch ms.
JQ_MS='def ms: capture("^(?<s>[^.Z]+)(\\.(?<f>[0-9]+))?Z$") | ((.s + "Z") | fromdateiso8601) * 1000 + (((.f // "") + "000")[0:3] | tonumber);'

# heartbeat_loop BATCH INTERVAL_MS: renews the batch's leases until killed; lost runs go to
# $WORK/lost, one id a line. A background job: the main loop kills it after the batch's results.
heartbeat_loop() {
  trap - TERM
  trap '' INT
  local batch=$1 interval=$2 body
  body=$(jq -c '{leases: [.runs[] | {run_id, lease_token}]}' "$batch")
  while :; do
    nap "$interval"
    API_OUT="$WORK/heartbeat" api POST "/v1/workers/$TOCK_WORKER_ID/heartbeat" "$body" $(($(now_ms) + interval * 2)) || continue
    if [[ $API_STATUS == 200 ]]; then
      jq -r '.lost[]' "$WORK/heartbeat" >>"$WORK/lost"
    else
      log "heartbeat refused: HTTP $API_STATUS $(head -c 200 "$WORK/heartbeat")"
    fi
  done
}

# A random uuid (version 4), for claim ids.
uuid() {
  if [[ -r /proc/sys/kernel/random/uuid ]]; then
    cat /proc/sys/kernel/random/uuid
  else
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' |
      sed -E 's/^(.{8})(.{4}).(.{3})(.)(.{3})(.{12})$/\1-\2-4\3-a\5-\6/'
  fi
}

is_lost() { grep -qxF "$1" "$WORK/lost" 2>/dev/null; }

# release RUN: gives a run back without spending an attempt.
release() {
  local id token
  id=$(jq -r .run_id <<<"$1")
  token=$(jq -r .lease_token <<<"$1")
  if api POST "/v1/runs/$id/release" "$(jq -nc --arg t "$token" '{lease_token: $t, reason: "worker shutdown"}')" \
    "$STOP_DEADLINE"; then
    if [[ $API_STATUS == 200 ]]; then log "run released run_id=$id"; else log "run not released run_id=$id: HTTP $API_STATUS"; fi
  fi
}

# execute RUN: runs its handler (in the background, watched for the lease, the grace and a
# signal) and appends its result to $WORK/results, unless the run was lost meanwhile.
execute() {
  local run=$1 id token handler pid rc grace_end=0
  id=$(jq -r .run_id <<<"$run")
  token=$(jq -r .lease_token <<<"$run")
  handler=$(jq -r .handler <<<"$run")
  log "run started run_id=$id job_id=$(jq -r .job_id <<<"$run") handler=$handler attempt=$(jq -r .attempt <<<"$run")"
  # In a process group of its own (job control on for this one job), so that stopping it stops
  # what it started too, and a Ctrl-C at the terminal reaches this loop, not the handler.
  set -m
  "handle_$handler" "$run" >"$WORK/out" 2>"$WORK/err" </dev/null &
  pid=$!
  set +m
  while kill -0 "$pid" 2>/dev/null; do
    if is_lost "$id"; then
      kill -- -"$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      log "run dropped: lease lost run_id=$id"
      return
    fi
    if ((STOPPING && grace_end == 0)); then grace_end=$(($(now_ms) + TOCK_GRACE * 1000)); fi
    if ((grace_end > 0 && $(now_ms) > grace_end)); then
      kill -- -"$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      log "grace period over: releasing run_id=$id"
      release "$run"
      return
    fi
    nap 50
  done
  wait "$pid"
  rc=$?
  if ((rc == 0)); then
    jq -nc --arg id "$id" --arg t "$token" --rawfile out "$WORK/out" \
      '{run_id: $id, lease_token: $t, status: "succeeded", output: $out[-1048576:]}' >>"$WORK/results"
  else
    jq -nc --arg id "$id" --arg t "$token" --rawfile out "$WORK/out" --rawfile err "$WORK/err" \
      --argjson rc "$rc" --argjson permanent "$((rc == PERMANENT_EXIT))" \
      '{run_id: $id, lease_token: $t, status: "failed", output: $out[-1048576:],
        error: ("exit \($rc)" + (if $err == "" then "" else ": " + ($err | rtrimstr("\n")) end))[0:65536],
        retryable: ($permanent == 0)}' >>"$WORK/results"
  fi
}

# complete: sends the batch's results in one request and logs each outcome. A server from before
# POST /v1/runs/complete (404) gets one request per run instead.
complete() {
  [[ -s $WORK/results ]] || return 0
  if [[ ${BATCH_ROUTE:-1} == 1 ]]; then
    log "sending $(wc -l <"$WORK/results") results in one request"
    api POST /v1/runs/complete "$(jq -sc '{results: .}' "$WORK/results")" || {
      log "results not delivered; their runs will be retried"
      return
    }
    if [[ $API_STATUS == 200 ]]; then
      jq -r '.results[] | [.run_id, .outcome, (.state // ""), (.error.code // "")] | @tsv' "$WORK/answer" |
        while IFS=$'\t' read -r id outcome state code; do
          case $outcome/$state in
          done/succeeded) log "run succeeded run_id=$id" ;;
          done/dead) log "run failed; dead-lettered run_id=$id" ;;
          done/*) log "run failed; will retry run_id=$id" ;;
          *) log "result dropped ($outcome, $code) run_id=$id" ;;
          esac
        done
      return
    fi
    log "POST /v1/runs/complete answered $API_STATUS; completing one run per request"
    [[ $API_STATUS == 404 ]] && BATCH_ROUTE=0
  fi
  local entry id
  while IFS= read -r entry; do
    id=$(jq -r .run_id <<<"$entry")
    api POST "/v1/runs/$id/complete" "$(jq -c 'del(.run_id)' <<<"$entry")" || continue
    case $API_STATUS in
    200)
      case $(jq -r '.state' "$WORK/answer") in
      succeeded) log "run succeeded run_id=$id" ;;
      dead) log "run failed; dead-lettered run_id=$id" ;;
      *) log "run failed; will retry run_id=$id" ;;
      esac
      ;;
    *) log "result dropped (HTTP $API_STATUS $(jq -r '.error.code // ""' "$WORK/answer")) run_id=$id" ;;
    esac
  done <"$WORK/results"
}

# run_batch: the runs of the claim answer in $WORK/batch.json, one after another.
run_batch() {
  local n i run id lease_ms hb
  n=$(jq '.runs | length' "$WORK/batch.json")
  ((n > 0)) || return 0
  : >"$WORK/results"
  : >"$WORK/lost"
  lease_ms=$(jq "$JQ_MS"' (.server_time | ms) as $now | [.runs[] | (.lease_expires_at | ms)] | min - $now' "$WORK/batch.json")
  # A third of the shortest lease of the batch (not below 200 ms, whatever the clocks say).
  heartbeat_loop "$WORK/batch.json" $((lease_ms / 3 > 200 ? lease_ms / 3 : 200)) &
  hb=$!
  for ((i = 0; i < n; i++)); do
    run=$(jq -c ".runs[$i]" "$WORK/batch.json")
    id=$(jq -r .run_id <<<"$run")
    if ((STOPPING)); then
      release "$run"
    elif is_lost "$id"; then
      log "run dropped: lease lost run_id=$id"
    else
      execute "$run"
    fi
  done
  complete
  kill "$hb" 2>/dev/null
  wait "$hb" 2>/dev/null
}

log "worker started; SIGTERM or Ctrl-C drains it worker_id=$TOCK_WORKER_ID url=$TOCK_URL pool=$TOCK_POOL handlers=$HANDLERS"
while ((!STOPPING)); do
  claim=$(jq -nc --arg w "$TOCK_WORKER_ID" --arg p "$TOCK_POOL" --argjson h "$HANDLERS" \
    --argjson max "$TOCK_BATCH" --argjson wait "$TOCK_WAIT_MS" --arg c "$(uuid)" \
    '{worker_id: $w, pool: $p, handlers: $h, max: $max, wait_ms: $wait, claim_id: $c}')
  ABORTABLE=1 api POST /v1/leases "$claim" || continue
  if [[ $API_STATUS != 200 ]]; then
    log "claim refused: HTTP $API_STATUS $(head -c 300 "$WORK/answer")"
    [[ $API_STATUS == 400 ]] && exit 1 # our request is wrong (pool or handler names): retrying will not help
    nap "$BACKOFF_CAP_MS"
    continue
  fi
  cp "$WORK/answer" "$WORK/batch.json"
  run_batch
done

((STOP_DEADLINE > 0)) || STOP_DEADLINE=$(($(now_ms) + FLUSH_S * 1000))
api DELETE "/v1/workers/$TOCK_WORKER_ID" "" "$STOP_DEADLINE" || true
log "worker stopped worker_id=$TOCK_WORKER_ID"
exit 0
