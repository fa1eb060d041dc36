# Placement and spread: make bench-spread.  First bench/place_bench.c, the map
# alone (PLACE_SETS=100 name sets a row: shares, moves per join and leave for
# each slack and walk order, what a map costs), then bench/spread_bench.lua
# with real replicas on a throwaway PostgreSQL (BENCH_REPLICAS=3,10
# BENCH_SPREAD_JOBS=1000 BENCH_WINDOW=20).  bench/spread_results.txt holds runs.
PLACE_SETS ?= 100

$(BUILD)/bench/place_bench: bench/place_bench.c src/cluster/place.c src/cluster/place.h src/core/hash.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ bench/place_bench.c -lm

bench-spread: all $(BUILD)/bench/place_bench
	$(BUILD)/bench/place_bench $(PLACE_SETS)
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	eval "$$(tests/support/services/10-postgres.sh start)" && \
	{ lua5.4 bench/spread_bench.lua; rc=$$?; tests/support/services/10-postgres.sh stop; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-spread
