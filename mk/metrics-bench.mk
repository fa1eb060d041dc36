# What /metrics costs: make bench-metrics (METRICS_JOBS=1000 METRICS_RENDERS=50):
# render time and size at N jobs, the parent's RSS per job (bench/metrics_bench.lua).
bench-metrics: all
	@LEASH_TEST_TMP=$$(mktemp -d /tmp/leash-bench.XXXXXX) && chmod 755 $$LEASH_TEST_TMP && \
	export LEASH_TEST_TMP LEASH_ROOT=$$PWD LEASH_BUILD=$(BUILD) && \
	export LUA_PATH="lua/?.lua;tests/support/?.lua;bench/?.lua;;" LUA_CPATH="$(BUILD)/lua/?.so;;" && \
	{ lua5.4 bench/metrics_bench.lua; rc=$$?; rm -rf $$LEASH_TEST_TMP; exit $$rc; }

.PHONY: bench-metrics
