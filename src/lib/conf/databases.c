/*
 * conf/databases.c — the databases of a relay fleet: `[database NAME]`
 * sections of the INI file (each with its url) and --db given more than
 * once, and the configuration each database's relay runs with.
 *
 * A fleet's database runs with a configuration of its own, built from the
 * same sources as the whole (the file, the environment, the flags) with
 * database.url set to the database's URL as a flag would set it: so it
 * outranks every other source, and reload (SIGHUP) keeps it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf_int.h"
#include "base/error.h"
#include "conf/conf.h"
#include "pgoutbox.h"

/* A database name: letters, digits, '_' and '-', as it goes into log
 * subjects, metric labels and the envelope's source header. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PGO_DB_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

int pgo_conf_add_database(pgo_conf_t *conf, const char *name, const char *url,
			  const char *where)
{
	struct conf_db *grown, *d;

	if (!url)
		return pgo_conf_fail(conf, PGO_ERR_INVALID,
				     "pgo_conf_add_database: url is required");
	if (name && !name_ok(name))
		return pgo_conf_fail(
			conf, PGO_ERR_CONFIG,
			"%s%sdatabase name \"%s\": use 1 to %d letters, "
			"digits, '_' or '-'",
			where ? where : "", where ? ": " : "", name,
			PGO_DB_NAME_MAX);
	for (size_t i = 0; name && i < conf->ndbs; i++)
		if (conf->dbs[i].name && strcmp(conf->dbs[i].name, name) == 0)
			return pgo_conf_fail(
				conf, PGO_ERR_CONFIG,
				"%s%s[database %s] is given twice (first at "
				"%s)",
				where ? where : "", where ? ": " : "", name,
				conf->dbs[i].where ? conf->dbs[i].where : "?");
	grown = realloc(conf->dbs, (conf->ndbs + 1) * sizeof(*grown));
	if (!grown)
		return pgo_conf_nomem(conf);
	conf->dbs = grown;
	d = &conf->dbs[conf->ndbs];
	memset(d, 0, sizeof(*d));
	if ((name && !(d->name = strdup(name))) || !(d->url = strdup(url)) ||
	    (where && !(d->where = strdup(where)))) {
		free(d->name);
		free(d->url);
		free(d->where);
		return pgo_conf_nomem(conf);
	}
	d->from_file = name != NULL;
	conf->ndbs++;
	return PGO_OK;
}

/* A [database NAME] section's "url = ..." line (load.c). */
int pgo_conf_database_line(pgo_conf_t *conf, const char *name, const char *key,
			   const char *value, const char *where)
{
	for (size_t i = 0; i < conf->ndbs; i++) {
		struct conf_db *d = &conf->dbs[i];
		char *url;

		if (!d->name || strcmp(d->name, name) != 0)
			continue;
		if (strcmp(key, "url") != 0)
			break;
		if (!(url = strdup(value)))
			return pgo_conf_nomem(conf);
		free(d->url);
		d->url = url;
		return PGO_OK;
	}
	return pgo_conf_fail(conf, PGO_ERR_CONFIG,
			     "%s: [database %s] has no key \"%s\" (a database "
			     "of a fleet takes only url; the other keys are "
			     "the whole fleet's, in [database] and [relay])",
			     where, name, key);
}

/* The dbname of a URL or conninfo ("" when it names none). */
static void url_dbname(const char *url, char *buf, size_t size)
{
	PQconninfoOption *opts = PQconninfoParse(url, NULL);

	buf[0] = '\0';
	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "dbname") == 0 && o->val)
			snprintf(buf, size, "%s", o->val);
	PQconninfoFree(opts);
}

/* Names the databases given by --db: their dbname when each has one of
 * its own (and a usable one), else db1, db2, ... */
static void name_flags(pgo_conf_db_t *dbs, size_t n)
{
	bool unique = true;

	for (size_t i = 0; i < n && unique; i++) {
		pgo_conf_db_t *d = &dbs[i];

		url_dbname(d->url, d->name, sizeof(d->name));
		if (!d->url[0] || !name_ok(d->name))
			unique = false;
		for (size_t j = 0; j < i && unique; j++)
			if (strcmp(dbs[j].name, d->name) == 0)
				unique = false;
	}
	if (unique)
		return;
	for (size_t i = 0; i < n; i++)
		snprintf(dbs[i].name, sizeof(dbs[i].name), "db%zu", i + 1);
}

int pgo_conf_databases_named(const pgo_conf_t *conf, pgo_conf_db_t *dbs,
			     pgo_error_t *err)
{
	bool files = false, flags = false;

	for (size_t i = 0; i < conf->ndbs; i++) {
		const struct conf_db *c = &conf->dbs[i];

		if (c->from_file && !*c->url)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "[database %s] has no url",
					     c->name);
		files |= c->from_file;
		flags |= !c->from_file;
		snprintf(dbs[i].name, sizeof(dbs[i].name), "%s",
			 c->name ? c->name : "");
		dbs[i].url = c->url;
		dbs[i].from_file = c->from_file;
	}
	if (files && flags)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the fleet's databases are [database "
				     "NAME] sections of the file or --db "
				     "flags given more than once, not both");
	if (flags)
		name_flags(dbs, conf->ndbs);
	return PGO_OK;
}

size_t pgo_conf_database_count(const pgo_conf_t *conf)
{
	return conf ? conf->ndbs : 0;
}

bool pgo_conf_database(const pgo_conf_t *conf, size_t i, const char **name,
		       const char **url, bool *from_file)
{
	if (!conf || i >= conf->ndbs)
		return false;
	*name = conf->dbs[i].name;
	*url = conf->dbs[i].url;
	if (from_file)
		*from_file = conf->dbs[i].from_file;
	return true;
}

void pgo_conf_databases_free(pgo_conf_t *conf)
{
	for (size_t i = 0; i < conf->ndbs; i++) {
		free(conf->dbs[i].name);
		free(conf->dbs[i].url);
		free(conf->dbs[i].where);
	}
	free(conf->dbs);
	conf->dbs = NULL;
	conf->ndbs = 0;
}

/* Whether setting s is database.url or the file that holds it. */
static bool sets_url(const struct setting *s)
{
	const pgo_conf_key_t *k = pgo_conf_keys[s->key];

	return strcmp(k->key, "database.url") == 0 ||
	       (k->file_for && strcmp(k->file_for, "database.url") == 0);
}

pgo_conf_t *pgo_conf_for_database(const pgo_conf_t *base, const char *url,
				  const char *where, char *const *envp,
				  pgo_error_t *err)
{
	pgo_conf_t *c = pgo_conf_new();
	int rc = PGO_OK;

	if (!c) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (base->path)
		rc = pgo_conf_load_file(c, base->path);
	if (rc == PGO_OK)
		rc = pgo_conf_load_env(c, envp);
	for (size_t i = 0; rc == PGO_OK && i < base->nsettings; i++) {
		const struct setting *s = &base->settings[i];

		if (!sets_url(s))
			rc = pgo_conf_set(c, pgo_conf_keys[s->key]->key,
					  s->value, s->origin, s->where);
	}
	if (rc == PGO_OK)
		rc = pgo_conf_set(c, "database.url", url, PGO_CONF_FLAG, where);
	if (rc == PGO_OK)
		rc = pgo_conf_validate(c);
	if (rc != PGO_OK) {
		pgo_error_set(err, rc, 0, "%s", c->errmsg);
		pgo_conf_destroy(c);
		return NULL;
	}
	/* The fleet's list is the whole's, not this database's. */
	pgo_conf_databases_free(c);
	return c;
}

int pgo_conf_databases_take(pgo_conf_t *conf, pgo_conf_t *fresh)
{
	size_t n = 0;
	struct conf_db *all;

	all = calloc(conf->ndbs + fresh->ndbs + 1, sizeof(*all));
	if (!all)
		return pgo_conf_nomem(conf);
	/* The flags' databases stay (nothing re-reads the flags). */
	for (size_t i = 0; i < conf->ndbs; i++) {
		if (conf->dbs[i].from_file) {
			free(conf->dbs[i].name);
			free(conf->dbs[i].url);
			free(conf->dbs[i].where);
		} else {
			all[n++] = conf->dbs[i];
		}
	}
	for (size_t i = 0; i < fresh->ndbs; i++) {
		if (fresh->dbs[i].from_file) {
			all[n++] = fresh->dbs[i];
			continue;
		}
		free(fresh->dbs[i].url);
		free(fresh->dbs[i].where);
	}
	free(conf->dbs);
	free(fresh->dbs);
	fresh->dbs = NULL;
	fresh->ndbs = 0;
	conf->dbs = all;
	conf->ndbs = n;
	return PGO_OK;
}
