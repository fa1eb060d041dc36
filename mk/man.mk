# mk/man.mk - make man: man/leash.ini.5 from its template and the config keys.
#
# leash.1 and leash-job.5 are written by hand; leash.ini.5 is made by
# tools/man.lua from man/leash.ini.5.in and src/core/cfg_keys.h (read through the
# built leash.core), and committed, so that installing needs no Lua step.
# tests/docs_spec.lua fails while the committed page is not what this makes.

man: $(BUILD)/lua/leash/core.so
	LUA_PATH='lua/?.lua;;' LUA_CPATH='$(BUILD)/lua/?.so;;' lua5.4 tools/man.lua man/leash.ini.5.in > man/leash.ini.5.tmp
	mv man/leash.ini.5.tmp man/leash.ini.5

.PHONY: man
