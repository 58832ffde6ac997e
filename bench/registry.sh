# Sourced by the registry benchmarks (push.sh, pull.sh, mark.sh): the real docker-registry on 127.0.0.1 with its
# storage in a fresh $work, stopped and $work removed on exit. Sets work, port and pid.
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
cat > "$work/config.yml" <<CONF
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/storage}}
http: {addr: 127.0.0.1:$port}
CONF
docker-registry serve "$work/config.yml" 2>/dev/null & pid=$!
trap 'kill $pid; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && break; sleep 0.1; done
