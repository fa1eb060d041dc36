/* view.h - what `leash status` and `leash history` show: the store's rows
 * gathered, handed to lua/leash/jobs_view.lua, status.lua and history.lua,
 * and the text they render.  One copy for the commands (main.c) and the
 * HTTP server's /api/status and /api/history (httpd.c), so the JSON cannot
 * drift between them. */
#ifndef LEASH_VIEW_H
#define LEASH_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

#include "core/cfg.h"
#include "plan/job.h"
#include "store/store.h"

/* What `leash status --json` prints with singleton mode off: no store. */
#define VIEW_NO_STORE_JSON "{\"provider\":null,\"singleton\":false,\"leases\":[]}"

/* The pages of /api/status: at most VIEW_PAGE_MAX jobs each,
 * VIEW_PAGE_DEFAULT unless asked. */
#define VIEW_PAGE_DEFAULT 500
#define VIEW_PAGE_MAX 1000

/* The local job files, as the jobs view compares them with the store. */
struct view_jobs {
	lua_State *L;
	struct job **jobs;
	size_t n;
	/* The page view_jobs shows: the jobs (in name order) from offset,
	 * at most limit of them; limit 0 is all.  view_jobs_load sets all. */
	size_t offset, limit;
	/* The files that do not load: "NAME\tERROR" (its first line) each. */
	char **bad;
	size_t nbad;
};

/* Loads the good job files of dir into d, and notes the bad ones (their
 * name and first error line; `leash check` tells the rest); view_jobs_free
 * frees them. */
void view_jobs_load(struct view_jobs *d, lua_State *L, const char *dir,
                    int64_t load_timeout_ms);
void view_jobs_free(struct view_jobs *d);

/* What a view renders: a table that fits 120 columns, the table with every
 * column whole (--wide), JSON, a monitor's check, the leases. */
enum { VIEW_TABLE, VIEW_WIDE, VIEW_JSON, VIEW_CHECK, VIEW_LEASES, VIEW_LEASES_JSON };

/* The jobs view's input, as leash.jobs_view.build takes it: one list() and
 * one last_runs() (and the replicas' presence), d's page of them.  Pushes
 * the table and returns 0, or -1 with the reason in err when the store
 * could not be read (nothing pushed). */
int view_jobs_input(lua_State *L, const struct cfg *c, struct store *s, struct view_jobs *d,
                    char *err, size_t errlen);

/* One snapshot of the jobs view (view_jobs_input, rendered): one list() and one last_runs() (and the
 * replicas' presence).  Pushes the text; returns the exit code (the check's
 * level for VIEW_CHECK), or -1 with the reason in err when the store could
 * not be read. */
int view_jobs(lua_State *L, const struct cfg *c, struct store *s, struct view_jobs *d,
              int view, long fail, char *err, size_t errlen);

/* leash history's arguments (any may be NULL), checked by leash.history
 * against the local clock.  Returns 0 with the rows' lower bound
 * (STORE_NO_TIME for none) and limit; 1 with the user's mistake in err; -1
 * with a Lua failure in err. */
int view_history_args(lua_State *L, const char *job, const char *since, const char *limit,
                      int64_t *since_at, size_t *lim, char *err, size_t errlen);

/* The ledger's rows, newest first, as view (VIEW_TABLE, VIEW_WIDE or
 * VIEW_JSON) renders them: one read_runs.  Pushes the text and returns 0,
 * or -1 with the reason in err. */
int view_history(lua_State *L, const struct cfg *c, struct store *s, const char *job,
                 int64_t since_at, size_t lim, int view, char *err, size_t errlen);

#endif
