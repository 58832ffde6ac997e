#!/usr/bin/env bash
# Fetcher benchmark against nginx on 127.0.0.1: 200 small files (gpuenv's concurrent fetcher vs curl one by
# one) and one large file (gpuenv vs curl alone). Needs nginx and hyperfine (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target fetch_bench >/dev/null
work=$(mktemp -d)
trap 'kill $(cat "$work/nginx.pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/www" "$work/out" "$work/logs"
for i in $(seq 0 199); do head -c 65536 /dev/urandom > "$work/www/f$i"; done
head -c $((512 << 20)) /dev/urandom > "$work/www/big"
port=$((20000 + RANDOM % 20000))
cat > "$work/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 10000;
  server { listen 127.0.0.1:$port; root $work/www; }
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
sleep 0.5
base=http://127.0.0.1:$port
urls=$(for i in $(seq 0 199); do printf '%s/f%s ' "$base" "$i"; done)
hyperfine -N --warmup 2 --runs 10 \
  -n "gpuenv fetcher, 200 x 64 KiB" "build-bench/bench/fetch_bench $work/out $urls" \
  -n "curl one by one, 200 x 64 KiB" "bash -c 'for u in $urls; do curl -s -o $work/out/one \$u; done'"
hyperfine -N --warmup 1 --runs 10 \
  -n "gpuenv fetcher, 512 MiB" "build-bench/bench/fetch_bench $work/out $base/big" \
  -n "curl, 512 MiB" "curl -s -o $work/out/big $base/big"
