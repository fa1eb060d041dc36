/* lx.h - the core's Lua runtime: the state, protected calls into leash's Lua
 * modules, and how an error from Lua becomes text. */
#ifndef LEASH_LX_H
#define LEASH_LX_H

#include <stddef.h>
#include <lua.h>


/* A new state with the standard libraries, the module `core_open` pushes
 * preloaded as leash.core, and package.path pointing at leash's Lua modules
 * (see lx.c).  NULL with the reason in err. */
lua_State *lx_new(lua_CFunction core_open, char *err, size_t errlen);

/* Calls the function below nargs arguments on the stack in protected mode
 * with a traceback handler.  On error leaves the message (with traceback)
 * on the stack and returns the Lua status. */
int lx_pcall(lua_State *L, int nargs, int nresults);

/* Pushes require(mod), through the require leash started with (a job file
 * that replaces the global cannot reach leash's own modules this way).
 * LUA_OK, or the error status with the message pushed instead. */
int lx_require(lua_State *L, const char *mod);

/* Calls mod.fn with the nargs values on top of the stack as its arguments,
 * as lx_pcall does: LUA_OK with nresults results in their place, or the
 * error status with one message in their place. */
int lx_callmod(lua_State *L, const char *mod, const char *fn, int nargs, int nresults);

/* Pops the error value on top of the stack and writes it to err as text: a
 * string as it is, anything else by what __tostring says or by its type.
 * Returns err. */
const char *lx_report(lua_State *L, char *err, size_t errlen);

#endif
