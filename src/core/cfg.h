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


void cfg_free(struct cfg *c);

#endif
