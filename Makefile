# leash - build, test, run, install, deb
VERSION := $(shell cat VERSION)
CC      ?= cc
PKGS    := lua5.4 inih libpq sqlite3 libmicrohttpd
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -DLEASH_VERSION='"$(VERSION)"' -iquote src $(shell pkg-config --cflags $(PKGS))
DBLIBS  := $(shell pkg-config --libs inih) -lrt -lm
LDLIBS  += $(shell pkg-config --libs lua5.4) $(DBLIBS)
PREFIX  ?= /usr/local
# Out-of-tree builds (BUILD=build-x) let several people build and test at once.
BUILD   ?= build
export LEASH_BUILD := $(BUILD)

# Every .c under src/ is part of the core; main.c and the commands (src/cmd/)
# only go into the binary.  src/README.md says which folder holds what.
SRC_DIRS := src/ $(sort $(dir $(wildcard src/*/*.c src/*/*/*.c)))
CORE_SRC := $(filter-out src/main.c src/cmd/%,$(wildcard $(addsuffix *.c,$(SRC_DIRS))))
CMD_SRC  := src/main.c $(wildcard src/cmd/*.c)
HEADERS  := $(wildcard src/*.h src/*/*.h src/*/*/*.h)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
PIC_OBJ  := $(CORE_SRC:%.c=$(BUILD)/pic/%.o)

all: $(BUILD)/leash $(BUILD)/lua/leash/core.so

$(BUILD)/leash: $(CMD_SRC:%.c=$(BUILD)/obj/%.o) $(CORE_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/lua/leash/core.so: $(PIC_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -o $@ $^ $(DBLIBS)

$(BUILD)/obj/%.o: %.c $(HEADERS) VERSION
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -c -o $@ $<

$(BUILD)/pic/%.o: %.c $(HEADERS) VERSION
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIC -DLEASH_LUA_MODULE -c -o $@ $<

# The whole suite: starts the test databases, runs every spec, stops them.
test: all
	tests/run.sh

# Run leash on the embedded default (SQLite under var/, the example jobs).
# var/ and the database in it are yours alone (a new database is 0600).
run: all
	@mkdir -p var && chmod 0700 var
	@for f in var/leash.db var/leash.db-wal var/leash.db-shm; do \
		if [ -e "$$f" ]; then chmod 0600 "$$f"; fi; done
	$(BUILD)/leash run -c config/leash.ini

clean:
	rm -rf $(BUILD)

.PHONY: all test run clean
-include mk/*.mk
