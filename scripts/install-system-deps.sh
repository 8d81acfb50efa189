#!/usr/bin/env bash
# Install the system packages the test suite needs: redis-server, the
# PostgreSQL server binaries, rabbitmq-server (the AMQP broker tests),
# chromium (the web app's tests drive it with Playwright, whose own browser
# download is not reachable from every machine) and nodejs (`node --test`
# runs the web app's pure modules' tests).
# Idempotent: does nothing when they are present.
#
# `--bench` also installs what `make bench` drives besides Python: wrk (the
# HTTP benches) and redis-benchmark (the fan-out's ceiling, in redis-tools).
#
# The tests start their own private servers on free loopback ports, so the
# system-wide services the Debian packages start are stopped again right away.
set -euo pipefail

have_redis() { command -v redis-server >/dev/null 2>&1; }
have_postgres() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }
have_rabbitmq() { [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; }
have_chromium() { [ -x /usr/bin/chromium ]; }
have_node() { command -v node >/dev/null 2>&1; }
have_wrk() { command -v wrk >/dev/null 2>&1; }
have_redis_benchmark() { command -v redis-benchmark >/dev/null 2>&1; }

bench=0
case "${1:-}" in
    --bench) bench=1 ;;
    "") ;;
    *) echo "install-system-deps: unknown option ${1} (known: --bench)" >&2; exit 2 ;;
esac
have_bench_tools() { [ "$bench" -eq 0 ] || { have_wrk && have_redis_benchmark; }; }

if have_redis && have_postgres && have_rabbitmq && have_chromium && have_node && have_bench_tools; then
    echo "install-system-deps: redis-server, PostgreSQL, RabbitMQ, Chromium and Node already installed$([ "$bench" -eq 1 ] && echo ', and wrk and redis-benchmark'); nothing to do"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-system-deps: need root or sudo to install redis-server/postgresql/rabbitmq-server/chromium/nodejs" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: apt-get not found; install redis-server, postgresql, rabbitmq-server, chromium and nodejs yourself" >&2
    exit 1
fi

missing=()
have_redis || missing+=(redis-server)
have_postgres || missing+=(postgresql)
have_rabbitmq || missing+=(rabbitmq-server)
have_chromium || missing+=(chromium)
have_node || missing+=(nodejs)
if [ "$bench" -eq 1 ]; then
    have_wrk || missing+=(wrk)
    have_redis_benchmark || missing+=(redis-tools)
fi
echo "install-system-deps: installing ${missing[*]}"

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"

# Do not leave system-wide servers running (redis on 6379, the default
# PostgreSQL cluster on 5432, RabbitMQ on 5672): the tests must never talk to them.
echo "install-system-deps: stopping the system redis-server, postgresql and rabbitmq services"
"${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
"${SUDO[@]}" service postgresql stop >/dev/null 2>&1 || true
"${SUDO[@]}" service rabbitmq-server stop >/dev/null 2>&1 || true

have_redis || { echo "install-system-deps: redis-server still missing" >&2; exit 1; }
have_postgres || { echo "install-system-deps: PostgreSQL server binaries still missing" >&2; exit 1; }
have_rabbitmq || { echo "install-system-deps: rabbitmq-server still missing" >&2; exit 1; }
have_chromium || { echo "install-system-deps: chromium still missing" >&2; exit 1; }
have_node || { echo "install-system-deps: node (nodejs) still missing" >&2; exit 1; }
have_bench_tools || { echo "install-system-deps: wrk or redis-benchmark still missing" >&2; exit 1; }
echo "install-system-deps: done ($(redis-server --version | cut -d' ' -f3), $(ls -d /usr/lib/postgresql/*/bin/postgres | tr '\n' ' '))"
