/*
 * fuzz_conf.c — the configuration reader (conf/conf.c): an INI file, the
 * PGOUTBOX_* environment and the flags, then the cross-key rules, `config
 * show` and a reload.
 *
 * Input: three fields cut at NUL bytes: the INI file; the environment,
 * one NAME=VALUE a line; the flags, one a line, either "--flag value" or
 * "section.name=value".  Oracles: nothing crashes, leaks or reads out of
 * bounds, and every error has a message.  (Whether `config show` hides the
 * passwords is fuzz_mask.c's oracle.)
 */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "pgoutbox.h"

/* Lines of text as a NULL-terminated array pointing into text (changed). */
static char **lines(char *text)
{
	size_t n = 1;
	char **v;

	for (const char *p = text; *p; p++)
		n += *p == '\n';
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		abort();
	n = 0;
	for (char *p = text, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (*p)
			v[n++] = p;
		if (!nl)
			break;
	}
	return v;
}

static void set_flags(pgo_conf_t *conf, char **flags)
{
	for (char **l = flags; *l; l++) {
		char *sp = strchr(*l, ' '), *eq = strchr(*l, '=');
		const char *key;
		int rc;

		if (strncmp(*l, "--", 2) == 0 && sp) {
			*sp = '\0';
			key = pgo_conf_key_for_flag(*l);
			if (!key)
				continue;
			rc = pgo_conf_set(conf, key, sp + 1, PGO_CONF_FLAG, *l);
		} else if (eq) {
			*eq = '\0';
			rc = pgo_conf_set(conf, *l, eq + 1, PGO_CONF_FLAG,
					  "fuzz");
		} else {
			continue;
		}
		FUZZ_CHECK(rc == PGO_OK || *pgo_conf_errmsg(conf),
			   "error %d without a message", rc);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	pgo_conf_t *conf;
	char path[64], *shown = NULL;
	char **env, **flags;
	size_t shown_len = 0;
	FILE *out;
	int fd, rc, changed = 0;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	fuzz_fields(&ff, data, size, '\0', 3);
	env = lines(ff.f[1]);
	flags = lines(ff.f[2]);
	conf = pgo_conf_new();
	if (!conf)
		abort();

	fd = memfd_create("fuzz.ini", 0);
	if (fd < 0 || write(fd, ff.f[0], ff.len[0]) != (ssize_t)ff.len[0])
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = pgo_conf_load_file(conf, path);
	FUZZ_CHECK(rc == PGO_OK || *pgo_conf_errmsg(conf),
		   "load_file %d without a message", rc);
	rc = pgo_conf_load_env(conf, env);
	FUZZ_CHECK(rc == PGO_OK || *pgo_conf_errmsg(conf),
		   "load_env %d without a message", rc);
	set_flags(conf, flags);
	rc = pgo_conf_validate(conf);
	FUZZ_CHECK(rc == PGO_OK || *pgo_conf_errmsg(conf),
		   "validate %d without a message", rc);

	out = open_memstream(&shown, &shown_len);
	if (!out)
		abort();
	pgo_conf_show(conf, out);
	fclose(out);
	FUZZ_CHECK(shown_len > 0, "config show wrote nothing");
	free(shown);

	rc = pgo_conf_reload(conf, env, &changed);
	FUZZ_CHECK(rc == PGO_OK || *pgo_conf_errmsg(conf),
		   "reload %d without a message", rc);

	pgo_conf_destroy(conf);
	close(fd);
	free(env);
	free(flags);
	fuzz_fields_free(&ff);
	return 0;
}
