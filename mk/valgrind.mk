# make valgrind: a plain -O1 -g build into VG_BUILD, then the short paths of
# the leash binary and leash/core.so under valgrind memcheck (leak check
# full); any error or leak in any process fails.  Never touches $(BUILD).
VG_BUILD ?= build-vg

valgrind:
	$(MAKE) all BUILD=$(VG_BUILD) CFLAGS='-O1 -g'
	LEASH_BUILD=$(VG_BUILD) tests/support/valgrind/run.sh

.PHONY: valgrind
