/*
 * conf/show.c — a configuration written out: `pgoutbox config show`
 * (every key, its value and where it came from) and the Markdown
 * reference of docs/configuration.md (every key's type, default, range,
 * flag, variable and help).  Values that may hold a password (secret keys:
 * database.url, sink.redis_url, ...) pass through their masker
 * (base/mask.c, or the one their key names) whenever they are written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf_int.h"
#include "base/buf.h"
#include "base/mask.h"
#include "conf/conf.h"
#include "pgoutbox.h"

/* Indexed by pgo_conf_type_t, in its order. */
static const char *const type_names[] = {"string", "int",  "duration",
					 "bool",   "enum", "identifier"};

/* --- values as they may be shown --- */

const char *pgo_conf_display(const pgo_conf_key_t *k, const char *text,
			     pgo_buf_t *b)
{
	return k->secret ? pgo_mask_secret(text, k->mask, b) : text;
}

void pgo_conf_describe_origin(const struct key_state *st, char *buf,
			      size_t size)
{
	static const char *const names[] = {"default", "file", "env", "flag"};

	if (st->where && st->origin != PGO_CONF_DEFAULT)
		snprintf(buf, size, "%s %s", names[st->origin], st->where);
	else
		snprintf(buf, size, "%s", names[st->origin]);
}

/* --- show and reference --- */

/* "name = value" and, in a column, where the value came from. */
static void show_value(FILE *out, const char *name, const char *value,
		       const char *origin)
{
	enum { ORIGIN_COLUMN = 36 };
	int len = fprintf(out, "%s = %s", name, value);

	if (len < 0)
		len = 0;
	fprintf(out, "%*s; %s\n",
		len < ORIGIN_COLUMN - 3 ? ORIGIN_COLUMN - len : 3, "", origin);
}

/* Writes one key as `config show` does: its help, then "name = value"
 * (masked) and, in a column, where the value came from. */
static void show_key(const pgo_conf_t *conf, size_t i, FILE *out, pgo_buf_t *b)
{
	const pgo_conf_key_t *k = pgo_conf_keys[i];
	const struct key_state *st = &conf->state[i];
	char origin[600];

	pgo_conf_describe_origin(st, origin, sizeof(origin));
	fprintf(out, "; %s\n", k->help);
	show_value(out, k->name, pgo_conf_display(k, st->text, b), origin);
}

/* The fleet's databases (docs/fleet.md) as [database NAME] sections,
 * named as the relay names them, each url masked as database.url is. */
static void show_databases(const pgo_conf_t *conf, FILE *out, pgo_buf_t *b)
{
	const pgo_conf_key_t *url =
		pgo_conf_keys[pgo_conf_find_key("database.url")];
	pgo_conf_db_t *named;
	pgo_error_t err;
	char origin[600];

	if (!conf->ndbs)
		return;
	if (!(named = calloc(conf->ndbs, sizeof(*named)))) {
		fprintf(out, "\n; the fleet's databases: out of memory\n");
		return;
	}
	if (pgo_conf_databases_named(conf, named, &err) != PGO_OK) {
		fprintf(out, "\n; the fleet's databases: %s\n", err.msg);
		for (size_t i = 0; i < conf->ndbs; i++)
			snprintf(named[i].name, sizeof(named[i].name), "%s",
				 conf->dbs[i].name ? conf->dbs[i].name : "?");
	}
	for (size_t i = 0; i < conf->ndbs; i++) {
		const struct conf_db *d = &conf->dbs[i];

		snprintf(origin, sizeof(origin), "%s %s",
			 d->from_file ? "file" : "flag",
			 d->where ? d->where : "?");
		fprintf(out, "\n[database %s]\n", named[i].name);
		if (!d->from_file)
			fprintf(out, "; given by --db, named by its dbname "
				     "(or its place)\n");
		show_value(out, "url", pgo_conf_display(url, d->url, b),
			   origin);
	}
	free(named);
}

/* Every key by section, or (defaults given) those whose value differs
 * from the value they have in defaults. */
static void show_keys(const pgo_conf_t *conf, const pgo_conf_t *defaults,
		      FILE *out)
{
	const char *section = NULL;
	pgo_buf_t b;

	pgo_buf_init(&b);
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		const pgo_conf_key_t *k = pgo_conf_keys[i];

		/* The fleet's sections follow the [database] keys. */
		if (i &&
		    strcmp(pgo_conf_keys[i - 1]->section, "database") == 0 &&
		    strcmp(k->section, "database") != 0)
			show_databases(conf, out, &b);
		if (defaults &&
		    strcmp(conf->state[i].text, defaults->state[i].text) == 0)
			continue;
		if (!section || strcmp(section, k->section) != 0) {
			fprintf(out, "%s[%s]\n", section ? "\n" : "",
				k->section);
			section = k->section;
		}
		show_key(conf, i, out, &b);
	}
	pgo_buf_free(&b);
}

void pgo_conf_show(const pgo_conf_t *conf, FILE *out)
{
	show_keys(conf, NULL, out);
}

int pgo_conf_show_changed(const pgo_conf_t *conf, FILE *out)
{
	pgo_conf_t *defaults = pgo_conf_new();

	if (!defaults)
		return PGO_ERR_NOMEM;
	show_keys(conf, defaults, out);
	pgo_conf_destroy(defaults);
	return PGO_OK;
}

/* Writes s for a Markdown table cell: '|' would end the cell. */
static void md_cell(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', out);
		fputc(*s, out);
	}
}

void pgo_conf_reference(FILE *out)
{
	char env[64], range[128];

	pgo_conf_keys_ready();
	fprintf(out, "| Key | Type | Default | Range | Reloadable | Flag | "
		     "Environment | Description |\n");
	fprintf(out, "|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		const pgo_conf_key_t *k = pgo_conf_keys[i];

		pgo_conf_env_name(k, env, sizeof(env));
		pgo_conf_format_range(k, range, sizeof(range));
		fprintf(out, "| `%s` | %s | %s%s%s | ", k->key,
			type_names[k->type], k->def[0] ? "`" : "",
			k->def[0] ? k->def : "(empty)", k->def[0] ? "`" : "");
		md_cell(out, range);
		fprintf(out, " | %s | %s%s%s | `%s`%s%s%s | ",
			k->reloadable ? "yes" : "no", k->flag ? "`" : "",
			k->flag ? k->flag : "", k->flag ? "`" : "", env,
			k->env_alias ? ", `" : "",
			k->env_alias ? k->env_alias : "",
			k->env_alias ? "`" : "");
		md_cell(out, k->help);
		fprintf(out, " |\n");
	}
}
