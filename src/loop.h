/* loop.h - `leash run`: the single-threaded parent and its event loop. */
#ifndef LEASH_LOOP_H
#define LEASH_LOOP_H

#include <lua.h>

#include "cfg.h"

/* Runs the scheduler until SIGTERM or SIGINT.  Returns the process exit
 * code: 0 after a clean stop. */
int loop_run(lua_State *L, const struct cfg *cfg);

/* The owner id of this replica: cfg->replica, or <hostname>:<pid>:<8 hex>. */
void loop_owner_id(const struct cfg *cfg, char *out, size_t len);

#endif
