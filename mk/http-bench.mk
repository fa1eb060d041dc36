# What the HTTP server costs the scheduler: make bench-http (BENCH_WINDOW=45 BENCH_ROUNDS=2
# seconds per window, BENCH_RATE=50 requests/s, BENCH_SLOW=1000 BENCH_FAST=20
# jobs).  Starts a throwaway PostgreSQL.
bench-http: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	eval "$$(tests/support/services/10-postgres.sh start)" && \
	{ lua5.4 bench/http_bench.lua; rc=$$?; tests/support/services/10-postgres.sh stop; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-http
