/* cfg.h - the config file: read with inih, checked by lua/leash/config.lua. */
#ifndef LEASH_CFG_H
#define LEASH_CFG_H

#include <stdint.h>
#include <lua.h>

#include "core/cfg_keys.h"

/* One field per key of cfg_keys.h, typed by its kind; renew_ms and margin_ms
 * hold the derived values when the file leaves them out. */
struct cfg {
	char *file;                     /* as given */
#define CFG_FIELD(section, key, kind, words, def, min, max, field, meaning) \
	CFG_TYPE_##kind field;
	CFG_KEYS(CFG_FIELD)
#undef CFG_FIELD
};

/* The file to read: path if given, else $LEASH_CONFIG, config/leash.ini,
 * /etc/leash/leash.ini (the first that exists; the last when none does). */
const char *cfg_locate(const char *path);

/* Reads and checks the file.  Returns 0, or -1 with every problem (one per
 * line, each naming file, line and key) written to errs. */
int cfg_load(lua_State *L, const char *file, struct cfg *c, char *errs, size_t errlen);

/* -o SECTION.KEY=VALUE on the command line: kept for every cfg_load after
 * it, where each replaces the file's value of its key (checked as the file's
 * are; an error names the option).  Returns 0, or -1 with err set when arg
 * is not SECTION.KEY=VALUE or there are too many. */
#define CFG_OPTIONS_MAX 64
int cfg_option(const char *arg, char *err, size_t errlen);

/* The options given, as "SECTION.KEY=VALUE" (for a process leash starts
 * with its own command line: the HTTP server). */
int cfg_options(const char *const **list);

void cfg_free(struct cfg *c);

#endif
