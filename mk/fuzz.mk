# make fuzz: tools/fuzz.lua's pass over job files and store rows with the
# C core built with ASan and UBSan (SAN_BUILD, as make sanitize builds it).
# FUZZ_ROUNDS directories of 50 mutated job files, and as many SQLite stores
# with random rows; prints each finding and `fuzz: N cases, N findings`.
FUZZ_ROUNDS ?= 6

fuzz:
	$(MAKE) all BUILD=$(SAN_BUILD) CFLAGS='$(SAN_FLAGS)' LDFLAGS='-fsanitize=address,undefined'
	ASAN_OPTIONS=detect_leaks=0 lua5.4 tools/fuzz.lua $(abspath $(SAN_BUILD))/leash $(FUZZ_ROUNDS)

.PHONY: fuzz
