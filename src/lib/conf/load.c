/*
 * conf/load.c — the sources a configuration is read from besides flags:
 * the INI file, with the line of every error, and the
 * PGOUTBOX_<SECTION>_<NAME> environment (plus the conventional aliases,
 * DATABASE_URL).  A sink's pass-through section ([kafka]) becomes lines of
 * one of its keys.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "conf/conf_int.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

/* The registry row whose pass-through INI section is name ([kafka]), or
 * NULL. */
static const pgo_sink_def_t *passthrough_def(const char *name, size_t len)
{
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
		if (d->ini_section && strlen(d->ini_section) == len &&
		    memcmp(d->ini_section, name, len) == 0)
			return d;
	return NULL;
}

/* "name = value" in a pass-through section: a "name=value" line appended
 * to the sink's key (d->ini_key) as this file has set it so far. */
static int set_passthrough(pgo_conf_t *conf, const pgo_sink_def_t *d,
			   const char *name, const char *value,
			   const char *where)
{
	int i = pgo_conf_find_key(d->ini_key);
	pgo_buf_t b;
	int rc;

	if (i < 0)
		return pgo_conf_fail(conf, PGO_ERR_CONFIG,
				     "%s: [%s] has no key %s", where,
				     d->ini_section, d->ini_key);
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	if (conf->state[i].origin == PGO_CONF_FILE && *conf->state[i].text)
		pgo_buf_printf(&b, "%s\n", conf->state[i].text);
	pgo_buf_printf(&b, "%s=%s", name, value);
	rc = b.oom ? pgo_conf_nomem(conf)
		   : pgo_conf_set_key(conf, (size_t)i, b.data, PGO_CONF_FILE,
				      where);
	pgo_buf_free(&b);
	return rc;
}

/* --- the INI file --- */

/*
 * The file is read here line by line, not by libinih: the distribution's
 * libinih holds a line in a 200-byte buffer (INI_MAX_LINE, fixed when it
 * is built), too short for a long database URL, and calls its handler
 * without a line number.  The format is the one libinih read for us:
 * "[section]", then "name = value" or "name: value" lines; a line starting
 * with ';' or '#' is a comment, and so is the rest of a line from a ';'
 * after a blank; blanks around names and values are dropped.  Leading
 * blanks are dropped too (to libinih they made a continuation of the line
 * before).  A line may be of any length.  The first error ends the pass.
 */
struct ini_pass {
	pgo_conf_t *conf;
	FILE *fp;
	const char *path; /* as the caller named it, for messages */
	int lineno;	  /* number of the line read last */
	char *line;	  /* getline() buffer */
	size_t cap;	  /* its size */
	char section[64]; /* the current [section]; "" before the first */
	pgo_buf_t where;  /* "path:line" of the value being set */
};

/* "path:line: what" as the error of the pass. */
static int line_error(struct ini_pass *p, const char *what)
{
	return pgo_conf_fail(p->conf, PGO_ERR_CONFIG, "%s:%d: %s", p->path,
			     p->lineno, what);
}

/* The NAME of a section header "[database NAME]" (s after the '['),
 * or NULL for any other section. */
static const char *fleet_db(const char *s)
{
	if (strncmp(s, "database", 8) != 0 || !isspace((unsigned char)s[8]))
		return NULL;
	for (s += 8; isspace((unsigned char)*s);)
		s++;
	return *s && *s != ']' ? s : NULL;
}

/* Checks a section header or a value line before it is split, for the
 * messages a user can act on. */
static int check_line(struct ini_pass *p, const char *s)
{
	const char *end, *guess;
	char name[64];

	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return line_error(p, "\"[\" without \"]\"");
		if (pgo_conf_section_known(s + 1, (size_t)(end - s - 1)) ||
		    passthrough_def(s + 1, (size_t)(end - s - 1)) ||
		    fleet_db(s + 1) != NULL)
			return PGO_OK;
		snprintf(name, sizeof(name), "%.*s", (int)(end - s - 1), s + 1);
		guess = pgo_conf_suggest_section(name);
		return pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
				     "%s:%d: unknown section [%s]%s%s%s",
				     p->path, p->lineno, name,
				     guess ? " (did you mean [" : "",
				     guess ? guess : "", guess ? "]?)" : "");
	}
	if (!*s || strchr(";#", *s) || strpbrk(s, "=:"))
		return PGO_OK;
	return line_error(p, "expected \"name = value\" or \"[section]\"");
}

/*
 * The next line of the file, without its leading blanks, byte order mark
 * and line end; NULL at the end of the file or (*rc set) on an error.
 */
static char *next_line(struct ini_pass *p, int *rc)
{
	size_t len;
	ssize_t got;
	char *s;

	if ((got = getline(&p->line, &p->cap, p->fp)) < 0)
		return NULL;
	p->lineno++;
	/* Text after a NUL would be dropped unseen ("5\0junk" read as 5). */
	if (memchr(p->line, '\0', (size_t)got)) {
		*rc = line_error(p, "the line holds a NUL byte");
		return NULL;
	}
	s = p->line;
	if (p->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3; /* UTF-8 byte order mark */
	while (*s != '\n' && isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	if (len && s[len - 1] == '\n')
		s[--len] = '\0';
	if (len && s[len - 1] == '\r')
		s[--len] = '\0';
	if (memchr(s, '\r', len)) {
		*rc = line_error(p, "carriage return inside the line (lines "
				    "end with \"\\n\" or \"\\r\\n\")");
		return NULL;
	}
	return s;
}

/* The first of chars in s, or the ';' of a comment (after a blank), or
 * the end of s. */
static char *stop_at(char *s, const char *chars)
{
	bool blank = false;

	for (; *s; s++) {
		if ((chars && strchr(chars, *s)) || (blank && *s == ';'))
			break;
		blank = isspace((unsigned char)*s);
	}
	return s;
}

/* s without its trailing blanks (in place). */
static char *rstrip(char *s)
{
	size_t len = strlen(s);

	while (len && isspace((unsigned char)s[len - 1]))
		s[--len] = '\0';
	return s;
}

/* "name = value" in the current section. */
static int on_value(struct ini_pass *p, const char *name, const char *value)
{
	const pgo_sink_def_t *d;
	char key[128];

	pgo_buf_reset(&p->where);
	pgo_buf_printf(&p->where, "%s:%d", p->path, p->lineno);
	if (p->where.oom)
		return pgo_conf_nomem(p->conf);
	if (!p->section[0])
		return pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
				     "%s: \"%s\" comes before any [section]",
				     p->where.data, name);
	if (!*name)
		return pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
				     "%s: no name before \"=\"", p->where.data);
	if ((d = passthrough_def(p->section, strlen(p->section))))
		return set_passthrough(p->conf, d, name, value, p->where.data);
	if (fleet_db(p->section))
		return pgo_conf_database_line(p->conf, fleet_db(p->section),
					      name, value, p->where.data);
	snprintf(key, sizeof(key), "%s.%s", p->section, name);
	return pgo_conf_set_by_name(p->conf, key, value, PGO_CONF_FILE,
				    p->where.data);
}

/* One line, without leading blanks: a comment, a [section] or a value. */
static int read_line(struct ini_pass *p, char *s)
{
	char *end, *value;
	int rc;

	if ((rc = check_line(p, rstrip(s))) != PGO_OK)
		return rc;
	if (!*s || strchr(";#", *s))
		return PGO_OK;
	if (*s == '[') {
		/* check_line() found the ']' and knows the section. */
		end = strchr(s, ']');
		snprintf(p->section, sizeof(p->section), "%.*s",
			 (int)(end - s - 1), s + 1);
		rstrip(p->section);
		if (!fleet_db(p->section))
			return PGO_OK;
		/* A database of the fleet: its url follows. */
		pgo_buf_reset(&p->where);
		pgo_buf_printf(&p->where, "%s:%d", p->path, p->lineno);
		if (p->where.oom)
			return pgo_conf_nomem(p->conf);
		return pgo_conf_add_database(p->conf, fleet_db(p->section), "",
					     p->where.data);
	}
	end = stop_at(s, "=:");
	if (*end != '=' && *end != ':')
		return line_error(p, "syntax error"); /* "a ;b = c" */
	*end = '\0';
	value = end + 1;
	*stop_at(value, NULL) = '\0';
	while (isspace((unsigned char)*value))
		value++;
	return on_value(p, rstrip(s), rstrip(value));
}

int pgo_conf_load_file(pgo_conf_t *conf, const char *path)
{
	struct ini_pass p = {.conf = conf, .path = path};
	char *copy, *s;
	int rc = PGO_OK;

	if (!path)
		return pgo_conf_fail(conf, PGO_ERR_INVALID,
				     "no configuration file given");
	copy = strdup(path);
	if (!copy)
		return pgo_conf_nomem(conf);
	p.fp = fopen(path, "r");
	if (!p.fp) {
		free(copy);
		return pgo_conf_fail(conf, PGO_ERR_CONFIG,
				     "%s: cannot open: %s", path,
				     strerror(errno));
	}
	free(conf->path);
	conf->path = copy;
	pgo_buf_init(&p.where);
	while (rc == PGO_OK && (s = next_line(&p, &rc)))
		rc = read_line(&p, s);
	if (rc == PGO_OK && ferror(p.fp))
		rc = pgo_conf_fail(conf, PGO_ERR_CONFIG, "%s: cannot read: %s",
				   path, strerror(errno));
	fclose(p.fp);
	free(p.line);
	pgo_buf_free(&p.where);
	return rc;
}

/* --- the environment --- */

/* The value of variable name in envp, or NULL. */
static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static int unknown_env(pgo_conf_t *conf, const char *name, size_t len)
{
	char names[KEYS_MAX][64], given[64];
	const char *all[KEYS_MAX], *guess = NULL;

	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		pgo_conf_env_name(pgo_conf_keys[i], names[i], sizeof(names[i]));
		all[i] = names[i];
	}
	if (len < sizeof(given)) {
		snprintf(given, sizeof(given), "%.*s", (int)len, name);
		guess = pgo_conf_closest(given, all, pgo_conf_nkeys);
	}
	return pgo_conf_fail(conf, PGO_ERR_CONFIG,
			     "unknown environment variable %.*s%s%s%s",
			     (int)(len < 100 ? len : 100), name,
			     guess ? " (did you mean " : "", guess ? guess : "",
			     guess ? "?)" : "");
}

/* Variables pgoutbox itself sets for the commands it runs (the exec sink),
 * so that such a command may run pgoutbox in turn. */
static bool env_exported(const char *name, size_t len)
{
	static const char *const exported[] = {"PGOUTBOX_BATCH_SIZE",
					       "PGOUTBOX_FIRST_ID",
					       "PGOUTBOX_LAST_ID", NULL};

	for (int i = 0; exported[i]; i++)
		if (strlen(exported[i]) == len &&
		    memcmp(exported[i], name, len) == 0)
			return true;
	return false;
}

int pgo_conf_load_env(pgo_conf_t *conf, char *const *envp)
{
	char name[64];
	int rc;

	if (!envp)
		return PGO_OK;
	/* Aliases first, so that PGOUTBOX_* set together with one wins. */
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		const char *v;

		if (!pgo_conf_keys[i]->env_alias)
			continue;
		v = env_get(envp, pgo_conf_keys[i]->env_alias);
		if (v && (rc = pgo_conf_set_key(conf, i, v, PGO_CONF_ENV,
						pgo_conf_keys[i]->env_alias)))
			return rc;
	}
	for (char *const *e = envp; *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len, i;

		if (strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) != 0 || !eq)
			continue;
		len = (size_t)(eq - *e);
		if (env_exported(*e, len))
			continue;
		for (i = 0; i < pgo_conf_nkeys; i++) {
			pgo_conf_env_name(pgo_conf_keys[i], name, sizeof(name));
			if (strlen(name) == len && memcmp(name, *e, len) == 0)
				break;
		}
		if (i == pgo_conf_nkeys)
			return unknown_env(conf, *e, len);
		rc = pgo_conf_set_key(conf, i, eq + 1, PGO_CONF_ENV, name);
		if (rc)
			return rc;
	}
	return PGO_OK;
}
