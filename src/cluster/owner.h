/* owner.h - who this process is in the store: its owner id. */
#ifndef LEASH_OWNER_H
#define LEASH_OWNER_H

#include <stddef.h>

/* The owner id of this process: <name>:<pid>:<8 random hex>, where name is
 * [leash] replica, or the hostname when that is "auto".  Unique per process
 * whatever the config says, so two replicas sharing a config, or a process
 * restarted while its predecessor's lease runs, never hold a lease as one.
 * The name is at most STORE_REPLICA_MAX bytes (leash.config refuses longer),
 * so the whole id fits the store's STORE_NAME_MAX. */
void owner_id(const char *replica, char *out, size_t len);

#endif
