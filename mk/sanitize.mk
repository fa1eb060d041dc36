# make sanitize: the C core (binary and leash/core.so) built with ASan and
# UBSan into SAN_BUILD, then the whole suite run against it through
# tests/support/sanitize/run.sh, which fails on any sanitizer report.
# Never touches $(BUILD).  $(SAN_BUILD)/plain holds an uninstrumented core.so
# for the one lua5.4 that runs under faketime (see sanitize/bin/lua5.4), and an
# uninstrumented leash for the replicas the ledger spec runs under faketime
# (libfaketime and ASan deadlock at start-up).
# Extra busted arguments: make sanitize SAN_ARGS=tests/run_spec.lua
SAN_BUILD ?= build-asan
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer
SAN_ARGS  ?=

sanitize:
	$(MAKE) all BUILD=$(SAN_BUILD) CFLAGS='$(SAN_FLAGS)' LDFLAGS='-fsanitize=address,undefined'
	$(MAKE) $(SAN_BUILD)/plain/lua/leash/core.so $(SAN_BUILD)/plain/leash BUILD=$(SAN_BUILD)/plain CFLAGS='-O1 -g'
	@mkdir -p $(SAN_BUILD)/sanitize
	$(CC) -O1 -g -fPIC -shared -o $(SAN_BUILD)/sanitize/unpreload.so tests/support/sanitize/unpreload.c
	LEASH_BUILD=$(SAN_BUILD) tests/support/sanitize/run.sh $(SAN_ARGS)

.PHONY: sanitize
