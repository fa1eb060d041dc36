/* bind/bind.h - the leash.core Lua module, one file per core concept.
 *
 * Only the module and the program include this; the core never does.  Each
 * lx_*_lib adds its functions to the module table on top of the stack. */
#ifndef LEASH_BIND_H
#define LEASH_BIND_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

struct store;
struct store_job_runs;
struct lease_row;

/* Pushes the leash.core module table (what require "leash.core" returns). */
int luaopen_leash_core(lua_State *L);

void lx_core_lib(lua_State *L);         /* bind/core.c: clocks, limits, helpers */
void lx_store_lib(lua_State *L);        /* bind/store.c: open_store */
void lx_ctx_lib(lua_State *L);          /* bind/ctx.c: what ctx is built on */
void lx_elect_lib(lua_State *L);        /* bind/elect.c: the elector, for specs */
void lx_cfg_lib(lua_State *L);          /* bind/cfg.c: config_load, for specs */
void lx_sched_lib(lua_State *L);        /* bind/sched.c: the job table, for specs */
void lx_load_lib(lua_State *L);         /* bind/load.c: reading and budgeting job files */
void lx_presence_lib(lua_State *L);     /* bind/presence.c: rendezvous, presence rows */
void lx_metrics_lib(lua_State *L);      /* bind/metrics.c: the /metrics text, in-process */

/* Pushes presence rows as a list of tables (bind/presence.c). */
struct store_replica;
/* Pushes a list of lease rows as list() returns them to Lua. */
void lx_push_rows(lua_State *L, const struct lease_row *rows, size_t n);
void lx_push_replicas(lua_State *L, const struct store_replica *rows, size_t n);

/* The store behind a leash.store userdata at idx, or NULL when the value is
 * not one (or it was closed). */
struct store *lx_test_store(lua_State *L, int idx);

/* Field k of the table at index t as an integer, dflt when it is not one. */
int64_t lx_field_int(lua_State *L, int t, const char *k, int64_t dflt);

/* The strings of the Lua list at index i (anchored there; NULL for a
 * non-string), in a userdata pushed on the stack. */
const char **lx_names_arg(lua_State *L, int i, size_t *n);

/* renew_ctl's answer as a table { [name] = { token=, paused_until=,
 * trigger_at=, handoff_at= } } of the renewed names (NULL columns absent). */
struct store_ctl;
void lx_push_renewed(lua_State *L, const char *const *names, size_t n, const int64_t *tokens,
                     const struct store_ctl *ctl);

/* Pushes one last_runs entry as { job=, last=, ok=, failed= (ledger rows as
 * s:read_runs gives them, or nil), fails=, handled_at= (nil when none) }. */
void lx_push_job_runs(lua_State *L, const struct store_job_runs *j);

#endif
