# The lease store benchmark: make bench (BENCH_N=runs per op).  Starts a
# throwaway PostgreSQL unless LEASH_BENCH_PG_CONNINFO is set, and the TDS test
# server (Python + SQLite, labelled as such) for mssql unless LEASH_TEST_MSSQL
# names a SQL Server.
BENCH_N ?= 2000

$(BUILD)/bench/store_bench: bench/store_bench.c $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: $(BUILD)/bench/store_bench
	bench/run.sh $(BUILD)/bench/store_bench $(BENCH_N)

.PHONY: bench

# The floor under a fire's start, without leash: make bench-floor
# (FLOOR_JOBS=100,1100 FLOOR_SECONDS=10): bench/start_floor.c.
FLOOR_JOBS ?= 100,1100
FLOOR_SECONDS ?= 10

$(BUILD)/bench/start_floor: bench/start_floor.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) -o $@ $<

bench-floor: $(BUILD)/bench/start_floor
	@for n in $$(echo $(FLOOR_JOBS) | tr , ' '); do \
		$(BUILD)/bench/start_floor $$n $(FLOOR_SECONDS) 3 4 || exit 1; \
		START_FLOOR_PLAIN=1 $(BUILD)/bench/start_floor $$n $(FLOOR_SECONDS) 3 4 || exit 1; \
	done

.PHONY: bench-floor

# At a crowded instant, the runs of the jobs that fire again soonest begin
# first: make bench-order (ORDER_INSTANTS=10).  SQLite, no server.
bench-order: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	{ lua5.4 bench/order_bench.lua; rc=$$?; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-order
