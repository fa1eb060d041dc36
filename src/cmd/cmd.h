/* cmd/cmd.h - the subcommands, one file each (src/main.c is their table),
 * and what they share. */
#ifndef LEASH_CMD_H
#define LEASH_CMD_H

#include <stdint.h>
#include <lua.h>

struct cfg;
struct store;

#define EXIT_PROBLEMS 1
#define EXIT_CONFIG 2
#define EXIT_UNKNOWN 3          /* status --check: the store cannot be read */

extern const char cmd_usage[];

/* Everything a command needs: the Lua state and the checked config. */
int cmd_setup(const char *path, lua_State **L, struct cfg *c);

/* A command's end after cmd_setup: closes s (when not NULL), frees c and
 * L; returns rc. */
int cmd_end(struct store *s, struct cfg *c, lua_State *L, int rc);

/* -c FILE, then fn with the Lua state and the checked config. */
int cmd_with_config(int argc, char **argv, int (*fn)(lua_State *, const struct cfg *));

/* The controls' store (control.c), from the checked config c: NULL with
 * the reason printed and *rc the exit code when singleton mode is off or
 * it cannot be opened. */
struct store *cmd_control_store(const char *cmd, const struct cfg *c, int *rc);

/* The ledger's "control" row of a control on job at db time at (the actor
 * user@host, the action in text).  0, or -1 with the reason printed. */
int cmd_record_control(struct store *s, const char *cmd, const char *job, int64_t at,
                       int64_t token, const char *text);

/* Whether job is one the cluster knows: a lease row in the store, or a
 * file in this host's jobs/.  1, 0, or -1 when the store cannot be read
 * (the reason in s->err). */
int cmd_job_known(struct store *s, const struct cfg *c, const char *job);

/* Whether jobs/JOB.lua exists in c's jobs directory (a job only this
 * host's jobs/ knows). */
int cmd_local_job(const struct cfg *c, const char *job);

int cmd_check(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_handoff(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_drain(int argc, char **argv);
int cmd_undrain(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_http(int argc, char **argv);

#endif
