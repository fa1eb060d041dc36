# The election benchmark: make bench-elect (BENCH_JOBS=1,100,1000
# BENCH_TRIALS=10 BENCH_WINDOW=20; then bench/spread_bench.lua, BENCH_REPLICAS=3,10,
# BENCH_SPREAD=0 to skip it), then the burst benchmark (BURST_JOBS=100,1000
# BURST_WINDOW=10 BURST_PERF=1 for perf trace's syscall summary).  Starts a
# throwaway PostgreSQL.
bench-elect: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	eval "$$(tests/support/services/10-postgres.sh start)" && \
	{ lua5.4 bench/elect_bench.lua && lua5.4 bench/burst_bench.lua; rc=$$?; tests/support/services/10-postgres.sh stop; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-elect

# Claims and the run ledger at steady state: make bench-ledger (BENCH_WINDOW=75
# BENCH_SLOW=1000 BENCH_FAST=100).  Starts a throwaway PostgreSQL.
bench-ledger: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	eval "$$(tests/support/services/10-postgres.sh start)" && \
	{ lua5.4 bench/ledger_bench.lua; rc=$$?; tests/support/services/10-postgres.sh stop; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-ledger

# What each start trick buys alone (src/core/tune.h): make bench-tricks
# (TRICKS_ROUNDS=5 TRICKS_JOBS=100,1000 TRICKS_WINDOW=5).  Starts a throwaway
# PostgreSQL; figures in bench/tricks_results.txt.
bench-tricks: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	eval "$$(tests/support/services/10-postgres.sh start)" && \
	{ lua5.4 bench/tricks_bench.lua; rc=$$?; tests/support/services/10-postgres.sh stop; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-tricks
