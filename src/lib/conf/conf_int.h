/*
 * conf/conf_int.h — what the files of src/lib/conf share, and no other
 * module: the list of every key (keys.c), the state a configuration keeps
 * per key (conf.c), and the steps between them.  Other modules include
 * conf/conf.h.
 *
 *   keys.c     the table of conf's own keys; every key, sinks' included
 *   suggest.c  "did you mean": the nearest key, section, variable or flag
 *   value.c    reading and writing a typed value (duration, bool, ...)
 *   conf.c     a configuration: its life cycle, set, get, validate
 *   load.c     the INI file and the PGOUTBOX_* environment
 *   reload.c   SIGHUP: read every source again, take what may change
 *   show.c     `config show` and the Markdown reference
 */
#ifndef PGO_CONF_CONF_INT_H
#define PGO_CONF_CONF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "conf/conf.h"
#include "pgoutbox.h"

/* Short names of the types (pgo_conf_type_t). */
#define T_STRING   PGO_CONF_T_STRING
#define T_INT	   PGO_CONF_T_INT
#define T_DURATION PGO_CONF_T_DURATION
#define T_BOOL	   PGO_CONF_T_BOOL
#define T_ENUM	   PGO_CONF_T_ENUM
#define T_IDENT	   PGO_CONF_T_IDENT

/* The most keys in all tables. */
#define KEYS_MAX 256
/* Prefix of every variable that names a key. */
#define ENV_PREFIX "PGOUTBOX_"
/* Longest identifier T_IDENT accepts (that of a queue table). */
#define IDENT_MAX 48

/* --- every key (keys.c) --- */

/* Every key, conf's own and the sinks', by section in the order `config
 * show` lists them.  Built once by pgo_conf_keys_ready(); an index into
 * pgo_conf_keys[] names a key everywhere else. */
extern const pgo_conf_key_t *pgo_conf_keys[KEYS_MAX];
extern size_t pgo_conf_nkeys;

/* Builds pgo_conf_keys[] on first use; false (and logged) when the
 * tables do not fit together, a bug that the unit tests catch. */
bool pgo_conf_keys_ready(void);
/* The index of key ("section.name"), or -1. */
int pgo_conf_find_key(const char *key);
/* Whether some key is in the section name (len bytes, not NUL-ended). */
bool pgo_conf_section_known(const char *name, size_t len);
/* The variable naming key k: PGOUTBOX_<SECTION>_<NAME> in upper case. */
void pgo_conf_env_name(const pgo_conf_key_t *k, char *buf, size_t size);

/* --- did you mean (suggest.c) --- */

/* The closest of n candidates to s within a few edits, or NULL. */
const char *pgo_conf_closest(const char *s, const char *const *cand, size_t n);
/* The key the user probably meant by an unknown "section.name", or NULL. */
const char *pgo_conf_suggest_key(const char *key);
/* The section the user probably meant by an unknown one, or NULL. */
const char *pgo_conf_suggest_section(const char *name);

/* --- a configuration (conf.c) --- */

/* What one key holds besides its typed value. */
struct key_state {
	pgo_conf_origin_t origin; /* source of the current value */
	int64_t num; /* typed value: int, enum index, ms, bool (0/1) */
	char *text;  /* canonical text of the value; never NULL after _new */
	char *where; /* the source ("relay.ini:3", "--batch"); NULL: none */
};

/* A value the caller set through pgo_conf_set() that no source re-reads
 * (a flag, or a default computed at run time), replayed on reload. */
struct setting {
	size_t key;		  /* index into pgo_conf_keys[] */
	pgo_conf_origin_t origin; /* PGO_CONF_FLAG or PGO_CONF_DEFAULT */
	char *value;		  /* text as the caller gave it */
	char *where;		  /* as the caller named it, or NULL */
};

/* A database of a fleet (databases.c): a [database NAME] section of the
 * file, or one of several --db flags (name NULL: the fleet names it). */
struct conf_db {
	char *name;	/* the section's NAME; NULL for a --db flag */
	char *url;	/* its database.url */
	char *where;	/* "relay.ini:12" or "--db" */
	bool from_file; /* a [database NAME] section */
};

struct pgo_conf {
	struct pgo_conf_values vals; /* typed values the modules read */
	struct key_state *state;     /* per key, in pgo_conf_keys[] order */
	char *path;		     /* file read last, re-read on reload */
	struct setting *settings;    /* replayed on reload, in set order */
	size_t nsettings;	     /* used entries of settings */
	size_t settings_cap;	     /* allocated entries of settings */
	char errmsg[512];	     /* last error; "" when none yet */
	struct conf_db *dbs;	     /* a fleet's databases (databases.c) */
	size_t ndbs;		     /* how many */
};

/* Records the error text in conf and returns code. */
int pgo_conf_fail(pgo_conf_t *conf, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* pgo_conf_fail() with PGO_ERR_NOMEM, "out of memory". */
int pgo_conf_nomem(pgo_conf_t *conf);
/* Sets pgo_conf_keys[i] from one source.  where (may be NULL) names the
 * source in messages and in `config show`.  A value from a lower-ranked
 * source than the key's current one is checked but not applied. */
int pgo_conf_set_key(pgo_conf_t *conf, size_t i, const char *value,
		     pgo_conf_origin_t origin, const char *where);
/* Sets a key given by name; an unknown one is an error with a guess. */
int pgo_conf_set_by_name(pgo_conf_t *conf, const char *key, const char *value,
			 pgo_conf_origin_t origin, const char *where);

/* The address of key k's value inside vals (k->in_values). */
static inline void *field_of(struct pgo_conf_values *vals,
			     const pgo_conf_key_t *k)
{
	return (char *)vals + k->offset;
}

static inline bool holds_string(const pgo_conf_key_t *k)
{
	return k->type == T_STRING || k->type == T_IDENT;
}

/* Size of the C object a key's value is stored in. */
static inline size_t field_size(const pgo_conf_key_t *k)
{
	switch (k->type) {
	case T_STRING:
	case T_IDENT: return sizeof(char *);
	case T_INT:
	case T_ENUM: return sizeof(int);
	case T_DURATION: return sizeof(int64_t);
	case T_BOOL: return sizeof(bool);
	}
	return 0;
}

/* --- a fleet's databases (databases.c) --- */

/* "key = value" in the section [database name] (load.c): the section
 * was added by pgo_conf_add_database() at its header. */
int pgo_conf_database_line(pgo_conf_t *conf, const char *name, const char *key,
			   const char *value, const char *where);
/* Reload: the file's databases are fresh's from now on (moved from it);
 * those of flags stay.  PGO_OK or PGO_ERR_NOMEM (nothing changed). */
int pgo_conf_databases_take(pgo_conf_t *conf, pgo_conf_t *fresh);
/* Frees the list (pgo_conf_destroy()). */
void pgo_conf_databases_free(pgo_conf_t *conf);

/* --- values (value.c) --- */

/*
 * Reads value as key k.  On success *num holds the number (int, ms, bool,
 * enum index) and *text the canonical text (malloc'd).  Messages start
 * with where; subject is "relay.batch = " when where does not already name
 * the key (a file line) and "" when it does (a flag, a variable).
 */
int pgo_conf_parse_value(pgo_conf_t *conf, const pgo_conf_key_t *k,
			 const char *value, const char *where,
			 const char *subject, int64_t *num, char **text);
/* The accepted values of key k, for messages and the reference. */
void pgo_conf_format_range(const pgo_conf_key_t *k, char *buf, size_t size);

/* --- show (show.c) --- */

/* The value of key k as it may be shown: a password never appears.  The
 * result lives in b (or is a constant). */
const char *pgo_conf_display(const pgo_conf_key_t *k, const char *text,
			     pgo_buf_t *b);
/* Where a value came from, as `config show` and the log say it. */
void pgo_conf_describe_origin(const struct key_state *st, char *buf,
			      size_t size);

#endif
