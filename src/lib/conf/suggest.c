/*
 * conf/suggest.c — "did you mean": the key, section, variable, flag or
 * enum value nearest to an unknown one, by edit distance, for the
 * messages that refuse it.
 */
#include <string.h>

#include "conf/conf_int.h"
#include "conf/conf.h"

/* Suggestions are offered within this many edits. */
#define SUGGEST_MAX_EDITS 2

/* Levenshtein distance, or SUGGEST_MAX_EDITS + 1 for long strings. */
static int edit_distance(const char *a, const char *b)
{
	enum { LONGEST = 64 };
	size_t la = strlen(a), lb = strlen(b);
	int row[LONGEST + 1];

	if (la > LONGEST || lb > LONGEST)
		return SUGGEST_MAX_EDITS + 1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];

		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The closest of n candidates within SUGGEST_MAX_EDITS of s, or NULL. */
const char *pgo_conf_closest(const char *s, const char *const *cand, size_t n)
{
	const char *best = NULL;
	int best_d = SUGGEST_MAX_EDITS + 1;

	for (size_t i = 0; i < n; i++) {
		int d = edit_distance(s, cand[i]);

		if (d < best_d) {
			best = cand[i];
			best_d = d;
		}
	}
	return best;
}

/* The key the user probably meant by an unknown "section.name": the same
 * name in another section, else the nearest spelling. */
const char *pgo_conf_suggest_key(const char *key)
{
	const char *dot = strchr(key, '.');
	const char *all[KEYS_MAX];

	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		if (dot && strcmp(pgo_conf_keys[i]->name, dot + 1) == 0)
			return pgo_conf_keys[i]->key;
		all[i] = pgo_conf_keys[i]->key;
	}
	return pgo_conf_closest(key, all, pgo_conf_nkeys);
}

const char *pgo_conf_suggest_section(const char *name)
{
	const char *all[KEYS_MAX];

	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		all[i] = pgo_conf_keys[i]->section;
	return pgo_conf_closest(name, all, pgo_conf_nkeys);
}

const char *pgo_conf_suggest_flag(const char *flag, const char *const *extra)
{
	const char *all[KEYS_MAX + 64];
	size_t n = 0;

	if (!pgo_conf_keys_ready() || !flag)
		return NULL;
	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		if (pgo_conf_keys[i]->flag)
			all[n++] = pgo_conf_keys[i]->flag;
	for (; extra && *extra && n < sizeof(all) / sizeof(all[0]); extra++)
		all[n++] = *extra;
	return pgo_conf_closest(flag, all, n);
}
