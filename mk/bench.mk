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
