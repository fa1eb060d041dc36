/* hash.h - the 64-bit hashes that every replica must compute alike:
 * FNV-1a over bytes, and murmur3's finaliser to spread its bits. */
#ifndef LEASH_HASH_H
#define LEASH_HASH_H

#include <stdint.h>

#define HASH_FNV_OFFSET 0xcbf29ce484222325ULL
#define HASH_FNV_PRIME 0x100000001b3ULL

/* FNV-1a of the string s, continued from h (HASH_FNV_OFFSET to start). */
static inline uint64_t hash_fnv(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= HASH_FNV_PRIME;
	}
	return h;
}

/* One byte no name contains, between two strings of one hash. */
static inline uint64_t hash_sep(uint64_t h, unsigned char c)
{
	return (h ^ c) * HASH_FNV_PRIME;
}

/* murmur3's finaliser: FNV alone leaves the high bits of similar strings
 * alike, and rendezvous hashing compares whole values. */
static inline uint64_t hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

#endif
