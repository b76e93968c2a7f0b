#!/usr/bin/env bash
# Demo: a throwaway redis-server on a free port, and four "settle" jobs that
# start at the same moment; `rlock exec market -- ...` runs them one at a
# time. Prints each job's start and end, then checks they never overlapped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
# The binary as shipped (`make build`: scripts/cargo-release.sh).
scripts/cargo-release.sh build --release --quiet --locked --bin rlock
rlock=$PWD/$(scripts/cargo-release.sh --dir)/rlock

dir=$(mktemp -d)
redis_pid=""
trap '[ -z "$redis_pid" ] || { kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; }; rm -rf "$dir"' EXIT
# A free port, and a server that is ours: a port found free can be taken
# before redis-server binds it (then it exits, and another process may
# answer there), so the server that answers must have our pid.
port=""
for _ in $(seq 20); do
  p=$((20000 + RANDOM % 40000))
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then continue; fi
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" &
  redis_pid=$!
  while kill -0 "$redis_pid" 2>/dev/null; do
    pid=$(redis-cli -p "$p" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p' || true)
    if [ "$pid" = "$redis_pid" ]; then port=$p; break 2; fi
    sleep 0.05
  done
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=""
done
[ -n "$port" ] || { echo "could not start a throwaway redis-server" >&2; exit 1; }
export RLOCK_URL="redis://127.0.0.1:$port"
echo "throwaway redis-server on 127.0.0.1:$port"

cat >"$dir/settle.sh" <<'JOB'
#!/bin/sh
# A job that must never run twice at once.
echo "$(date +%T.%3N) job $1 start  (fencing token $RLOCK_FENCE)"
sleep 0.4
echo "$(date +%T.%3N) job $1 end"
JOB
chmod +x "$dir/settle.sh"

echo "starting 4 jobs at once: rlock exec market -- ./settle.sh N"
jobs=()
for i in 1 2 3 4; do
  "$rlock" -q exec market -- "$dir/settle.sh" "$i" >>"$dir/out" &
  jobs+=($!)
done
sleep 0.2
"$rlock" status market | sed 's/^/  status: /'
wait "${jobs[@]}"
cat "$dir/out"

# Serialized means: start, end, start, end... each end from the job that started.
if awk '{ if ($4 == "start") { if (open) bad = 1; open = $3 }
          else { if (open != $3) bad = 1; open = "" } }
        END { exit bad }' "$dir/out" && [ "$(grep -c start "$dir/out")" = 4 ]; then
  echo "OK: 4 jobs ran one at a time, in arrival order of the lock queue; nothing left held:"
  "$rlock" status market | sed 's/^/  /'
else
  echo "FAIL: jobs overlapped" >&2
  exit 1
fi
