/*
 * conf/conf.c — a configuration: the value of every key, where each came
 * from, setting and getting them, the rules between keys.
 *
 * Sources rank defaults < file < environment < flags.  A value from a
 * lower-ranked source is still checked (a typo in the file is reported
 * even when a flag overrides that key) but never replaces a value from a
 * higher-ranked one, so callers may read the sources in any order: the
 * CLI parses its flags before it knows which file to read.
 *
 * Each key keeps its value as canonical text ("30s", "on") next to the
 * typed value, and where that value came from.  Reload (reload.c) builds
 * a fresh configuration from the same sources and compares the texts.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf_int.h"
#include "base/buf.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

/* --- errors --- */

int pgo_conf_fail(pgo_conf_t *conf, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(conf->errmsg, sizeof(conf->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

int pgo_conf_nomem(pgo_conf_t *conf)
{
	return pgo_conf_fail(conf, PGO_ERR_NOMEM, "out of memory");
}

/* --- setting a key --- */

/* Moves an already parsed value into vals (a key of conf's own, with a
 * field there), freeing a replaced string. */
static void store_value(pgo_conf_t *conf, const pgo_conf_key_t *k, int64_t num,
			char *str)
{
	void *field = field_of(&conf->vals, k);

	switch (k->type) {
	case T_STRING:
	case T_IDENT:
		free(*(char **)field);
		*(char **)field = str;
		break;
	case T_INT:
	case T_ENUM: *(int *)field = (int)num; break;
	case T_DURATION: *(int64_t *)field = num; break;
	case T_BOOL: *(bool *)field = num != 0; break;
	}
}

#define SECRET_FILE_MAX 65536 /* a connection string, not a document */

/* Key k (file_for) was set to path: sets the key it names to the file's
 * first line, from the same source (file: a higher-ranked source of that
 * key still wins, as for any value). */
static int set_from_file(pgo_conf_t *conf, const pgo_conf_key_t *k,
			 const char *path, pgo_conf_origin_t origin,
			 const char *path_where)
{
	char where[600];
	pgo_buf_t b;
	FILE *f;
	size_t n;
	int rc, e;

	f = fopen(path, "r");
	if (!f)
		return pgo_conf_fail(conf, PGO_ERR_CONFIG,
				     "%s: cannot open %s: %s", k->key, path,
				     strerror(errno));
	pgo_buf_init(&b);
	if (!pgo_buf_reserve(&b, SECRET_FILE_MAX + 1)) {
		fclose(f);
		return pgo_conf_nomem(conf);
	}
	n = fread(b.data, 1, SECRET_FILE_MAX + 1, f);
	e = ferror(f) ? errno : 0;
	fclose(f);
	if (e) {
		pgo_buf_free(&b);
		return pgo_conf_fail(conf, PGO_ERR_CONFIG,
				     "%s: cannot read %s: %s", k->key, path,
				     strerror(e));
	}
	b.data[n < SECRET_FILE_MAX ? n : SECRET_FILE_MAX] = '\0';
	b.data[strcspn(b.data, "\r\n")] = '\0';
	if (n > SECRET_FILE_MAX || !b.data[0]) {
		pgo_buf_free(&b);
		return pgo_conf_fail(
			conf, PGO_ERR_CONFIG, "%s: %s %s (it must hold %s)",
			k->key, path,
			n > SECRET_FILE_MAX ? "is longer than 64 KiB"
					    : "has an empty first line",
			k->file_for);
	}
	snprintf(where, sizeof(where), "%s %s",
		 path_where ? path_where : k->key, path);
	rc = pgo_conf_set_key(conf, (size_t)pgo_conf_find_key(k->file_for),
			      b.data, origin, where);
	/* The secret is wiped from our copy, not only freed. */
	memset(b.data, 0, b.cap);
	pgo_buf_free(&b);
	return rc;
}

int pgo_conf_set_key(pgo_conf_t *conf, size_t i, const char *value,
		     pgo_conf_origin_t origin, const char *where)
{
	const pgo_conf_key_t *k = pgo_conf_keys[i];
	struct key_state *st = &conf->state[i];
	char subject[80] = "";
	char *text, *str = NULL, *where_copy = NULL;
	int64_t num = 0;
	int rc;

	/* A flag or a variable names the key itself; a file line does not. */
	if (where && (origin == PGO_CONF_FILE || origin == PGO_CONF_DEFAULT))
		snprintf(subject, sizeof(subject), "%s = ", k->key);
	rc = pgo_conf_parse_value(conf, k, value, where ? where : k->key,
				  subject, &num, &text);
	if (rc != PGO_OK)
		return rc;
	if (st->text && origin < st->origin) {
		/* Checked, but a higher-ranked source keeps the key. */
		free(text);
		return PGO_OK;
	}
	if (where && !(where_copy = strdup(where)))
		goto oom;
	if (k->in_values && holds_string(k) && !(str = strdup(text)))
		goto oom;
	if (k->in_values)
		store_value(conf, k, num, str);
	st->num = num;
	free(st->text);
	free(st->where);
	st->text = text;
	st->where = where_copy;
	st->origin = origin;
	if (k->file_for && *text)
		return set_from_file(conf, k, text, origin, where);
	return PGO_OK;
oom:
	free(text);
	free(where_copy);
	return pgo_conf_nomem(conf);
}

int pgo_conf_set_by_name(pgo_conf_t *conf, const char *key, const char *value,
			 pgo_conf_origin_t origin, const char *where)
{
	int i = pgo_conf_find_key(key);
	const char *guess;

	if (i >= 0)
		return pgo_conf_set_key(conf, (size_t)i, value, origin, where);
	guess = pgo_conf_suggest_key(key);
	return pgo_conf_fail(conf, PGO_ERR_CONFIG,
			     "%s%sunknown key \"%s\"%s%s%s", where ? where : "",
			     where ? ": " : "", key,
			     guess ? " (did you mean \"" : "",
			     guess ? guess : "", guess ? "\"?)" : "");
}

/* --- life cycle --- */

pgo_conf_t *pgo_conf_new(void)
{
	pgo_conf_t *conf;

	if (!pgo_conf_keys_ready())
		return NULL;
	conf = calloc(1, sizeof(*conf));
	if (!conf)
		return NULL;
	conf->state = calloc(pgo_conf_nkeys, sizeof(*conf->state));
	if (!conf->state) {
		free(conf);
		return NULL;
	}
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		if (pgo_conf_set_key(conf, i, pgo_conf_keys[i]->def,
				     PGO_CONF_DEFAULT, NULL)) {
			pgo_conf_destroy(conf);
			return NULL;
		}
	}
	conf->errmsg[0] = '\0';
	return conf;
}

void pgo_conf_destroy(pgo_conf_t *conf)
{
	if (!conf)
		return;
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		if (pgo_conf_keys[i]->in_values &&
		    holds_string(pgo_conf_keys[i]))
			free(*(char **)field_of(&conf->vals, pgo_conf_keys[i]));
		free(conf->state[i].text);
		free(conf->state[i].where);
	}
	for (size_t i = 0; i < conf->nsettings; i++) {
		free(conf->settings[i].value);
		free(conf->settings[i].where);
	}
	free(conf->settings);
	free(conf->state);
	free(conf->path);
	pgo_conf_databases_free(conf);
	free(conf);
}

const struct pgo_conf_values *pgo_conf_values(const pgo_conf_t *conf)
{
	return &conf->vals;
}

const char *pgo_conf_errmsg(const pgo_conf_t *conf)
{
	return conf ? conf->errmsg : "";
}

/* --- setting and getting keys --- */

/* Sets pgo_conf_keys[i] and remembers the setting so reload can replay it. */
static int set_remembered(pgo_conf_t *conf, size_t i, const char *value,
			  pgo_conf_origin_t origin, const char *where)
{
	struct setting *s = NULL;
	char *value_copy, *where_copy = NULL;
	int rc;

	/* Allocate first: once set, the key must not lose its record. */
	if (conf->nsettings == conf->settings_cap) {
		size_t cap = conf->settings_cap ? conf->settings_cap * 2 : 8;
		struct setting *grown =
			realloc(conf->settings, cap * sizeof(*grown));

		if (!grown)
			return pgo_conf_nomem(conf);
		conf->settings = grown;
		conf->settings_cap = cap;
	}
	value_copy = strdup(value);
	if (!value_copy || (where && !(where_copy = strdup(where)))) {
		free(value_copy);
		return pgo_conf_nomem(conf);
	}
	rc = pgo_conf_set_key(conf, i, value, origin, where);
	if (rc != PGO_OK) {
		free(value_copy);
		free(where_copy);
		return rc;
	}
	for (size_t j = 0; j < conf->nsettings && !s; j++)
		if (conf->settings[j].key == i &&
		    conf->settings[j].origin == origin)
			s = &conf->settings[j];
	if (s) {
		free(s->value);
		free(s->where);
	} else {
		s = &conf->settings[conf->nsettings++];
		s->key = i;
		s->origin = origin;
	}
	s->value = value_copy;
	s->where = where_copy;
	return PGO_OK;
}

/*
 * Besides what the header says: a value from a lower-ranked origin than
 * the key's current one is checked but not applied.  Flags and defaults
 * set here (e.g. a relay.name computed at start-up) are remembered and
 * replayed by pgo_conf_reload(), since no file or variable holds them.
 */
int pgo_conf_set(pgo_conf_t *conf, const char *key, const char *value,
		 pgo_conf_origin_t origin, const char *where_)
{
	int i;

	if (!key || !value)
		return pgo_conf_fail(conf, PGO_ERR_INVALID,
				     "pgo_conf_set: no %s",
				     key ? "value" : "key");
	if (origin < PGO_CONF_DEFAULT || origin > PGO_CONF_FLAG)
		return pgo_conf_fail(conf, PGO_ERR_INVALID,
				     "pgo_conf_set: bad origin %d",
				     (int)origin);
	i = pgo_conf_find_key(key);
	if (i < 0 || origin == PGO_CONF_FILE || origin == PGO_CONF_ENV)
		return pgo_conf_set_by_name(conf, key, value, origin, where_);
	return set_remembered(conf, (size_t)i, value, origin, where_);
}

const char *pgo_conf_get(const pgo_conf_t *conf, const char *key)
{
	int i = key ? pgo_conf_find_key(key) : -1;

	return i < 0 ? NULL : conf->state[i].text;
}

/* The state of key when it exists and has type a or b; else NULL, and the
 * caller's bug is logged. */
static const struct key_state *typed_state(const pgo_conf_t *conf,
					   const char *key, pgo_conf_type_t a,
					   pgo_conf_type_t b, const char *fn)
{
	int i = key ? pgo_conf_find_key(key) : -1;

	if (i >= 0 &&
	    (pgo_conf_keys[i]->type == a || pgo_conf_keys[i]->type == b))
		return &conf->state[i];
	pgo_log(PGO_LOG_ERROR, "config", "pgo_conf_get_%s(\"%s\"): %s", fn,
		key ? key : "(null)",
		i < 0 ? "no such key" : "the key is of another type");
	return NULL;
}

int pgo_conf_get_int(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_INT, T_ENUM, "int");

	return st ? (int)st->num : 0;
}

int64_t pgo_conf_get_duration(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_DURATION, T_DURATION, "duration");

	return st ? st->num : 0;
}

bool pgo_conf_get_bool(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_BOOL, T_BOOL, "bool");

	return st ? st->num != 0 : false;
}

const char *pgo_conf_get_str(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_STRING, T_IDENT, "str");

	return st ? st->text : "";
}

int pgo_conf_validate(pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = &conf->vals;
	const pgo_sink_def_t *sink = &pgo_sink_defs[v->sink];
	pgo_error_t err;
	char a[32], b[32];

	/* The chosen sink's own rules (the exec sink needs a command). */
	if (sink->validate && sink->validate(conf, &err) != PGO_OK)
		return pgo_conf_fail(conf, PGO_ERR_CONFIG, "%s", err.msg);
	if (v->retry_base > v->retry_max) {
		pgo_format_duration(v->retry_base, a, sizeof(a));
		pgo_format_duration(v->retry_max, b, sizeof(b));
		return pgo_conf_fail(conf, PGO_ERR_CONFIG,
				     "relay.retry_base (%s) must not exceed "
				     "relay.retry_max (%s)",
				     a, b);
	}
	if (v->lease_timeout < 2 * v->heartbeat) {
		pgo_format_duration(v->lease_timeout, a, sizeof(a));
		pgo_format_duration(v->heartbeat, b, sizeof(b));
		return pgo_conf_fail(
			conf, PGO_ERR_CONFIG,
			"relay.lease_timeout (%s) must be at least twice "
			"relay.heartbeat (%s): a live relay would be "
			"fenced between two heartbeats",
			a, b);
	}
	return PGO_OK;
}
