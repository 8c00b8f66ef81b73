# cpu.sh — sourced by the sink benchmarks (http.sh, nats.sh, rabbitmq.sh)
# and metrics-flood.sh:
# figures that stay meaningful on a shared host where rates swing with the
# load of others.
#   cpu_s PID           CPU seconds (user + system) the process used so far
#   batch_times LOG     the sink's "batch of N ... done in M ms" debug lines
#                       of a relay log (--log-level debug): count, p50, p90
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }

batch_times() {
	python3 - "$1" <<'PY'
import re, sys
ms = sorted(int(m) for m in re.findall(r'batch of \d+.* done in (\d+) ms', open(sys.argv[1], errors='replace').read()))
q = lambda p: ms[min(len(ms) - 1, int(p * len(ms)))]
print(f'{len(ms)} batches in the sink: p50 {q(0.5)} ms, p90 {q(0.9)} ms' if ms else 'no batch times in the log')
PY
}
