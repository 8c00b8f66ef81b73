/*
 * conf/load.c — the sources a configuration is read from besides flags:
 * the INI file (libinih), with the line of every error, and the
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

#include <ini.h>

#include "conf/conf_int.h"

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

/* One pass of libinih over a file.  libinih calls the handler without a
 * line number (the distribution builds it without INI_HANDLER_LINENO), so
 * the pass hands it the lines itself and counts them.  Handing lines over
 * also lets the pass stop at the first error, check section names (an
 * empty unknown section never reaches the handler) and drop leading
 * blanks, which would otherwise make an indented "key = value" a
 * continuation of the line before. */
struct ini_pass {
	pgo_conf_t *conf;
	FILE *fp;
	const char *path; /* as the caller named it, for messages */
	int lineno;	  /* number of the line handed over last */
	int err;	  /* first error, PGO_OK while none: ends the pass */
	int err_line;	  /* line of that error */
	char *line;	  /* getline() buffer */
	size_t cap;	  /* its size */
	pgo_buf_t where;  /* "path:line" of the value being set */
};

static int pass_fail(struct ini_pass *p, int code)
{
	p->err = code;
	p->err_line = p->lineno;
	return code;
}

/* Checks what libinih would take for a section header or a value line. */
static int check_line(struct ini_pass *p, const char *s)
{
	const char *end, *guess;
	char name[64];

	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return pass_fail(
				p, pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
						 "%s:%d: \"[\" without \"]\"",
						 p->path, p->lineno));
		if (pgo_conf_section_known(s + 1, (size_t)(end - s - 1)) ||
		    passthrough_def(s + 1, (size_t)(end - s - 1)))
			return PGO_OK;
		snprintf(name, sizeof(name), "%.*s", (int)(end - s - 1), s + 1);
		guess = pgo_conf_suggest_section(name);
		return pass_fail(
			p,
			pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
				      "%s:%d: unknown section [%s]%s%s%s",
				      p->path, p->lineno, name,
				      guess ? " (did you mean [" : "",
				      guess ? guess : "", guess ? "]?)" : ""));
	}
	if (!*s || strchr(";#\r\n", *s) || strpbrk(s, "=:"))
		return PGO_OK;
	return pass_fail(p, pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
					  "%s:%d: expected \"name = value\" or "
					  "\"[section]\"",
					  p->path, p->lineno));
}

/* libinih's fgets-like reader. */
static char *ini_read_line(char *str, int num, void *stream)
{
	struct ini_pass *p = stream;
	size_t len, content;
	ssize_t got;
	char *s;

	if (p->err != PGO_OK)
		return NULL; /* stop at the first error */
	if ((got = getline(&p->line, &p->cap, p->fp)) < 0)
		return NULL;
	p->lineno++;
	if (memchr(p->line, '\0', (size_t)got)) {
		/* Text after it would be dropped unseen ("5\0junk" read as
		 * 5). */
		pass_fail(p, pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
					   "%s:%d: the line holds a NUL byte",
					   p->path, p->lineno));
		return NULL;
	}
	s = p->line;
	if (p->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3; /* UTF-8 byte order mark */
	while (*s != '\n' && isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	content = len;
	if (content && s[content - 1] == '\n')
		content--;
	if (content && s[content - 1] == '\r')
		content--;
	/* A CR before the end would hide the rest of the line from the length
	 * check below (and pass a CR into a value). */
	if (memchr(s, '\r', content)) {
		pass_fail(p, pgo_conf_fail(
				     p->conf, PGO_ERR_CONFIG,
				     "%s:%d: carriage return inside the line "
				     "(lines end with \"\\n\" or \"\\r\\n\")",
				     p->path, p->lineno));
		return NULL;
	}
	/* libinih's line buffer must hold the line, "\r\n" and the NUL. */
	if (content + 3 > (size_t)num) {
		pass_fail(p, pgo_conf_fail(
				     p->conf, PGO_ERR_CONFIG,
				     "%s:%d: line is longer than %d characters",
				     p->path, p->lineno, num - 3));
		return NULL;
	}
	if (check_line(p, s) != PGO_OK)
		return NULL;
	memcpy(str, s, len + 1);
	return str;
}

/* libinih's handler: one "name = value" of the line just read. */
static int ini_on_value(void *user, const char *section, const char *name,
			const char *value)
{
	struct ini_pass *p = user;
	const pgo_sink_def_t *d;
	char key[128];
	int rc;

	if (p->err != PGO_OK)
		return 1;
	pgo_buf_reset(&p->where);
	pgo_buf_printf(&p->where, "%s:%d", p->path, p->lineno);
	if (p->where.oom) {
		pass_fail(p, pgo_conf_nomem(p->conf));
		return 0;
	}
	if (!*section) {
		pass_fail(p,
			  pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
					"%s: \"%s\" comes before any [section]",
					p->where.data, name));
		return 0;
	}
	if (!*name) {
		pass_fail(p, pgo_conf_fail(p->conf, PGO_ERR_CONFIG,
					   "%s: no name before \"=\"",
					   p->where.data));
		return 0;
	}
	if ((d = passthrough_def(section, strlen(section))))
		rc = set_passthrough(p->conf, d, name, value, p->where.data);
	else {
		snprintf(key, sizeof(key), "%s.%s", section, name);
		rc = pgo_conf_set_by_name(p->conf, key, value, PGO_CONF_FILE,
					  p->where.data);
	}
	if (rc != PGO_OK) {
		pass_fail(p, rc);
		return 0;
	}
	return 1;
}

int pgo_conf_load_file(pgo_conf_t *conf, const char *path)
{
	struct ini_pass p = {.conf = conf, .path = path};
	char *copy;
	int rc;

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

	rc = ini_parse_stream(ini_read_line, &p, ini_on_value, &p);
	if (rc > 0 && (p.err == PGO_OK || rc < p.err_line)) {
		/* A line libinih refused that check_line() let through. */
		p.err = pgo_conf_fail(conf, PGO_ERR_CONFIG,
				      "%s:%d: syntax error", path, rc);
	} else if (rc == -2 && p.err == PGO_OK) {
		p.err = pgo_conf_nomem(conf);
	} else if (p.err == PGO_OK && ferror(p.fp)) {
		p.err = pgo_conf_fail(conf, PGO_ERR_CONFIG,
				      "%s: cannot read: %s", path,
				      strerror(errno));
	}
	fclose(p.fp);
	free(p.line);
	pgo_buf_free(&p.where);
	return p.err;
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
