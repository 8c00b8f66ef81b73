/*
 * base/mask.h — secrets as they may be shown: `config show`, the reload
 * log lines, any log line that names a connection.  A masker rebuilds a
 * value with every password as "***"; what it cannot read is hidden whole.
 */
#ifndef PGO_BASE_MASK_H
#define PGO_BASE_MASK_H

#include <stdbool.h>
#include "base/buf.h"

struct pgo_buf;

/* What a secret is shown as. */
#define PGO_MASK "***"

/*
 * A masker of one kind of value (a libpq conninfo, a redis:// URL):
 * appends value to b as it may be shown, every secret as PGO_MASK, and
 * returns true; or appends nothing and returns false when value is not of
 * its kind.  The sinks give theirs in their keys' rows
 * (pgo_conf_key_t.mask).
 */
typedef bool (*pgo_mask_fn)(const char *value, struct pgo_buf *b);

/* Appends a libpq conninfo string or postgres:// URL to b as it may be
 * shown (`config show`, logs): rebuilt from what PQconninfoParse() reads,
 * in the same form, every secret option (dispchar "*": password,
 * sslpassword) as "***".  Text libpq cannot parse appends "***" alone and
 * returns false. */
bool pgo_conninfo_mask(const char *conninfo, struct pgo_buf *b);

/* value as it may be shown: through mask (NULL: none) when that masker
 * takes it, else through pgo_conninfo_mask(), which hides whole what
 * libpq cannot read.  The result lives in b (reset first) or is the
 * constant PGO_MASK (out of memory: hide all rather than risk a leak). */
const char *pgo_mask_secret(const char *value, pgo_mask_fn mask,
			    struct pgo_buf *b);

#endif
