/* title.h - the name a leash process shows in ps: its command line and
 * its comm (`leash: spawner`, `leash: http`), as PostgreSQL's processes
 * show `postgres: checkpointer`. */
#ifndef LEASH_TITLE_H
#define LEASH_TITLE_H

/* Notes where main's arguments lie (once, before anything moves them). */
void title_init(int argc, char **argv);

/* Shows name in ps: over the arguments' bytes (cut to their length; the
 * rest zeroed), and as the comm (cut to 15 bytes).  The first call keeps
 * the command line as it was, for title_restore. */
void title_set(const char *name);

/* The command line as main had it (a process forked from one that called
 * title_set, which is not that process). */
void title_restore(void);

#endif
