/* lx.h - glue between the C core and Lua: protected calls, the module. */
#ifndef LEASH_LX_H
#define LEASH_LX_H

#include <stddef.h>
#include <lua.h>

/* Calls the function below nargs arguments on the stack in protected mode
 * with a traceback handler.  On error leaves the message (with traceback)
 * on the stack and returns the Lua status. */
int lx_pcall(lua_State *L, int nargs, int nresults);

/* Pushes the leash.core module table (what require "leash.core" returns). */
int luaopen_leash_core(lua_State *L);

/* Each part of the core adds its functions to the module table on top. */
struct lease_row;

/* Pushes a list of lease rows as list() returns them to Lua. */
void lx_push_rows(lua_State *L, const struct lease_row *rows, size_t n);

void lx_store_lib(lua_State *L);        /* src/store/lstore.c: open_store */
void lx_core_lib(lua_State *L);         /* src/lcore.c: clocks, helpers */
void lx_ctx_lib(lua_State *L);          /* src/lctx.c: what ctx is built on */
void lx_elect_lib(lua_State *L);        /* src/lelect.c: the elector, for specs */
void lx_cfg_lib(lua_State *L);          /* src/lcfg.c: config_load, for the specs */

/* A new state with the standard libraries, leash.core preloaded and
 * package.path pointing at leash's Lua modules (see lx.c). */
lua_State *lx_new(char *err, size_t errlen);

#endif
