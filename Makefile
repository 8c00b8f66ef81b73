# pgoutbox — the two commands a newcomer needs:
#   make demo    build, start a throwaway PostgreSQL (or use DB=URL), relay events
#   make check   build with ASan+UBSan and run every test against real servers
# and the rest:
#   make build | bench | install [PREFIX=...] | uninstall | format | fuzz |
#        valgrind | try-kafka | try-nats | man | deb | deb-test | clean

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
VALGRIND_BUILD ?= build-valgrind
FUZZ_TIME  ?= 60
PREFIX     ?= /usr/local
DB         ?=
# Extra `meson setup` options of $(BUILD) (e.g. -Dkafka=disabled).
MESON_ARGS ?=

.PHONY: all deps build asan fuzz valgrind demo check bench install uninstall format format-check clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) --prefix=$(PREFIX) -Dbuildtype=release -Db_ndebug=true $(MESON_ARGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# The libFuzzer harnesses of tests/fuzz (tests/fuzz/README.md), in a clang
# build of their own, each run for FUZZ_TIME seconds (CI: 10).
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dtests=false -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)
	FUZZ_TIME=$(FUZZ_TIME) tests/fuzz/run.sh $(FUZZ_BUILD)

# memcheck over a plain debug build: the unit tests, and one integration
# test per command and sink with every pgoutbox they start under valgrind
# (tests/valgrind.sh; PATTERN=t_name for others).
$(VALGRIND_BUILD)/build.ninja:
	meson setup $(VALGRIND_BUILD) -Dbuildtype=debug

valgrind: deps $(VALGRIND_BUILD)/build.ninja
	@command -v valgrind >/dev/null || PGO_DEPS_EXTRA=valgrind scripts/deps.sh
	ninja -C $(VALGRIND_BUILD)
	tests/valgrind.sh $(VALGRIND_BUILD) $(PATTERN)

demo: build
	scripts/demo.sh $(if $(DB),--db "$(DB)")

check: asan
	tests/run.sh $(ASAN_BUILD)

# A broker sink tried without a broker of your own (scripts/try.sh): the
# broker (librdkafka's mock cluster; nats-server -js), a throwaway
# PostgreSQL (or DB=URL), a relay, three events read back by kcat or the
# nats npm client, then everything removed.  KEEP=1 keeps it running.
.PHONY: try-kafka try-nats
try-kafka try-nats: build
	scripts/try.sh $(@:try-%=%) --bin $(BUILD)/pgoutbox $(if $(DB),--db "$(DB)") $(if $(KEEP),--keep)

# The core workloads (stdout sink), then each broker sink's drains and
# latency beside the stdout sink's from its own run (Kafka through
# librdkafka's mock cluster, nats-server, rabbitmq-server, a local
# libmicrohttpd receiver, bench/http-receiver.c): ~20 minutes.
# A failing part does not stop the others; make bench fails if any did.
bench: build
	@rc=0; bench/run.sh $(BUILD) || rc=1; \
	for s in kafka nats rabbitmq http; do \
		echo "== bench/$$s.sh"; bench/$$s.sh $(BUILD) || rc=1; \
	done; exit $$rc

# Latency commit -> consumer through Redis (issue 3): the redis sink with
# `pgoutbox consume` and the bullmq sink with a BullMQ Worker, ~3 minutes.
# FSYNC=always runs Redis with appendfsync always (default everysec).
.PHONY: bench-rabbitmq
bench-rabbitmq: build
	bench/rabbitmq.sh $(BUILD)

.PHONY: bench-redis
bench-redis: build
	bench/redis-latency.sh $(BUILD) $(if $(FSYNC),--appendfsync $(FSYNC))

# A scrape flood (2,000 GET /metrics) during drains of 100,000 events
# (issue 16), ~1 minute; FLOOD_KEEPALIVE=1 keeps the connections alive.
.PHONY: bench-metrics
bench-metrics: build
	bench/metrics-flood.sh $(BUILD)

# A browser polling the console on the relay's metrics address during
# drains of 500,000 events, against drains without a console (issue 40),
# ~4 minutes.
.PHONY: bench-console
bench-console: build
	bench/console-poll.sh $(BUILD)

# The nats sink (issue 13): drain of 100,000 events into JetStream and
# commit-to-stream latency at 500 events/s, ~1 minute.
.PHONY: bench-nats
bench-nats: build
	bench/nats.sh $(BUILD)

# The chat scenario of issue 3: 20 seeded runs (SEED=n picks the first).
.PHONY: chaos
chaos: asan
	tests/chaos/chat.sh --build $(ASAN_BUILD) --runs 20 $(if $(SEED),--seed $(SEED))

# The same scenario through BullMQ: relays with --sink bullmq, consumers
# real BullMQ Workers (node, tests/bullmq) with the inbox; 5 seeded runs.
# Order into Kafka and JetStream while relays are killed, alone (both are
# in make check too).
.PHONY: chaos-kafka
chaos-kafka: asan
	tests/run.sh $(ASAN_BUILD) t_kafka_chaos

.PHONY: chaos-nats
chaos-nats: asan
	tests/run.sh $(ASAN_BUILD) t_nats_ordered

.PHONY: chaos-bullmq
chaos-bullmq: asan
	tests/chaos/chat.sh --build $(ASAN_BUILD) --runs 5 --consumer bullmq $(if $(SEED),--seed $(SEED))

FORMAT_FILES = $(shell find include src tests/unit tests/fuzz examples bench -name '*.[ch]' | sort)

# PREFIX is applied to a build configured before (by `make demo`, or an
# earlier install elsewhere); uninstall removes what the last install put.
install: deps $(BUILD)/build.ninja
	meson configure $(BUILD) --prefix=$(PREFIX)
	ninja -C $(BUILD)
	meson install -C $(BUILD)

# The man pages and the bash and zsh completions (tools/cli_docs.py),
# made from the binary's --help and `config reference`:
# $(BUILD)/pgoutbox*.[15], $(BUILD)/contrib/completion/{pgoutbox,_pgoutbox}.
# `man -l build/pgoutbox-relay.1` reads one.
.PHONY: man
man: build
	ninja -C $(BUILD) pgoutbox.1 contrib/completion/pgoutbox contrib/completion/_pgoutbox

# Debian packages from the tree (debian/): pgoutbox, libpgoutbox0,
# libpgoutbox-dev in $(DEB_BUILD)/, built from a copy of the tracked and
# untracked files (not the build directories), then lintian, which must
# report no error.  DEB_BUILD_OPTIONS defaults to nocheck (make check
# runs the tests).  `make deb-test` runs tests/integration/t_deb.sh alone
# (make check runs it too): it builds them, installs them on this
# machine, runs them and purges them.
DEB_BUILD ?= build-deb
DEB_BUILD_OPTIONS ?= nocheck parallel=2
.PHONY: deb deb-test
deb:
	@scripts/deps.sh
	rm -rf $(DEB_BUILD)
	mkdir -p $(DEB_BUILD)/src
	git ls-files -co --exclude-standard -z | xargs -0 tar -cf - | tar -xf - -C $(DEB_BUILD)/src
	cd $(DEB_BUILD)/src && DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" dpkg-buildpackage -b -us -uc >../build.log 2>&1 || { tail -40 ../build.log; exit 1; }
	lintian --fail-on error --tag-display-limit 0 $(DEB_BUILD)/*.changes
	@ls $(DEB_BUILD)/*.deb

deb-test: asan
	tests/run.sh $(ASAN_BUILD) t_deb

uninstall:
	@[ -f $(BUILD)/build.ninja ] || { echo "make uninstall: no $(BUILD) to uninstall from" >&2; exit 1; }
	ninja -C $(BUILD) uninstall

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(VALGRIND_BUILD)
