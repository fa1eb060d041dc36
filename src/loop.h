/* loop.h - `leash run`: the single-threaded parent and its event loop. */
#ifndef LEASH_LOOP_H
#define LEASH_LOOP_H

#include <lua.h>

#include "core/cfg.h"

/* Runs the scheduler until SIGTERM or SIGINT.  Returns the process exit
 * code: 0 after a clean stop. */
int loop_run(lua_State *L, const struct cfg *cfg);

/* The owner id of this process: <name>:<pid>:<8 random hex>, where name is
 * [leash] replica, or the hostname when that is "auto".  Unique per process
 * whatever the config says, so two replicas sharing a config, or a process
 * restarted while its predecessor's lease runs, never hold a lease as one.
 * The name is at most STORE_REPLICA_MAX bytes (leash.config refuses longer),
 * so the whole id fits the store's STORE_NAME_MAX. */
void loop_owner_id(const struct cfg *cfg, char *out, size_t len);

#endif
