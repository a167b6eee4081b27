/* Shared pieces of the subcommands: tracker opening, checker flags,
 * the run summary and its printing. */
#include "evald/cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ev_cli_fail(const char *what)
{
	/* Messages quote names and text from suites and the tracker. */
	char msg[2048];
	snprintf(msg, sizeof msg, "%s", ev_error_msg());
	ev_term_clean(msg);
	if (what && *what)
		fprintf(stderr, "evald: %s: %s\n", what, msg);
	else
		fprintf(stderr, "evald: %s\n", msg);
	return EV_EXIT_FAIL;
}

cJSON *ev_cli_text_json(const char *json)
{
	cJSON *j = json ? cJSON_Parse(json) : NULL;
	ev_json_term_clean(j);
	return j;
}

int ev_cli_open_tracker(const ev_cli *cli, ev_tracker **out)
{
	if (ev_tracker_open(out, cli->db_path) != 0) {
		ev_cli_fail("tracker");
		return EV_EXIT_FAIL;
	}
	return 0;
}

bool ev_cli_parse_id(const char *s, const char *what, int64_t *out)
{
	if (!s || !ev_parse_i64(s, out) || *out <= 0) {
		fprintf(stderr, "evald: %s id: '%s' is not a positive whole number\n", what, s ? s : "");
		return false;
	}
	return true;
}

bool ev_cli_parse_run_id(const char *s, int64_t *out) { return ev_cli_parse_id(s, "run", out); }

int ev_cli_parse_lengths(size_t *out, int max, const char *list, const char *flag)
{
	int n = 0;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		char item[64];
		snprintf(item, sizeof item, "%.*s", (int)(l < 63 ? l : 63), p);
		if (n == max)
			return ev_error_set(EV_E_LIMIT, "%s: more than %d items", flag, max), -1;
		if (l >= 63 || ev_longctx_parse_length(&out[n], item))
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not a length (4k, 32k, 1m, 2000)", flag, item), -1;
		n++;
		p += l + (e ? 1 : 0);
	}
	if (!n)
		return ev_error_set(EV_E_INVALID, "%s: empty list", flag), -1;
	return n;
}

int ev_cli_parse_depths(int *out, int max, const char *list, const char *flag)
{
	int n = 0;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		char item[32];
		int64_t v;
		snprintf(item, sizeof item, "%.*s", (int)(l < 31 ? l : 31), p);
		if (n == max)
			return ev_error_set(EV_E_LIMIT, "%s: more than %d items", flag, max), -1;
		if (l >= 31 || !ev_parse_i64(item, &v) || v < 0 || v > 100)
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not a percentage 0..100", flag, item), -1;
		out[n++] = (int)v;
		p += l + (e ? 1 : 0);
	}
	if (!n)
		return ev_error_set(EV_E_INVALID, "%s: empty list", flag), -1;
	return n;
}

const ev_opt ev_json_only_opts[] = {
	EV_O_FLAG("--json", ev_json_opts, json, "as JSON"),
	EV_O_END,
};

static void subcommand_help(const ev_subcommand_set *set, FILE *to)
{
	fprintf(to, "usage: evald %s SUBCOMMAND [ARGS]\n", set->name);
	if (set->about)
		fprintf(to, "\n%s\n", set->about);
	fprintf(to, "\nsubcommands:\n");
	for (const ev_subcommand *s = set->subs; s->name; s++)
		fprintf(to, "  %-14s %s%s\n", s->name, s->summary ? s->summary : "",
		        set->dflt && !strcmp(set->dflt, s->name) ? " (the default)" : "");
	fprintf(to, "\n'evald %s SUBCOMMAND --help' describes one.\n", set->name);
}

int ev_cli_subcommand(const ev_cli *cli, int argc, char **argv, const ev_subcommand_set *set)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		subcommand_help(set, stdout);
		return 0;
	}
	const char *name = argc >= 2 && argv[1][0] != '-' ? argv[1] : set->dflt;
	for (const ev_subcommand *s = set->subs; name && s->name; s++) {
		if (strcmp(name, s->name))
			continue;
		if (argc >= 2 && argv[1][0] != '-')
			return s->fn(cli, argc - 1, argv + 1);
		/* The default subcommand, with the options as they came. */
		return s->fn(cli, argc, argv);
	}
	if (name)
		fprintf(stderr, "evald %s: unknown subcommand '%s'\n", set->name, name);
	subcommand_help(set, stderr);
	return EV_EXIT_USAGE;
}

char *ev_checker_flags_spec(const ev_checker_flags *f)
{
	if (!f->type && !f->n_patterns && f->group < 0 && !f->match && !f->ignore_case && f->tolerance < 0 &&
	    !f->compare && !f->metric)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", f->type      ? f->type
	                                   : f->metric ? "loglikelihood"
	                                   : f->n_patterns ? "regex"
	                                                   : "includes");
	if (f->metric)
		cJSON_AddStringToObject(o, "metric", f->metric);
	if (f->n_patterns) {
		cJSON *p = cJSON_AddArrayToObject(o, "patterns");
		for (int k = 0; k < f->n_patterns; k++)
			cJSON_AddItemToArray(p, cJSON_CreateString(f->patterns[k]));
	}
	if (f->group >= 0)
		cJSON_AddNumberToObject(o, "group", f->group);
	if (f->match)
		cJSON_AddStringToObject(o, "match", f->match);
	if (f->ignore_case)
		cJSON_AddTrueToObject(o, "ignore_case");
	if (f->tolerance >= 0)
		cJSON_AddNumberToObject(o, "tolerance", f->tolerance);
	if (f->compare)
		cJSON_AddStringToObject(o, "compare", f->compare);
	char *s = ev_json_print(o);
	cJSON_Delete(o);
	return s;
}

/* ---- engine flags ---------------------------------------------------------- */

void ev_engine_flags_init(ev_engine_flags *f)
{
	memset(f, 0, sizeof *f);
	f->mo = (eng_model_options)ENG_MODEL_OPTIONS_INIT;
}

int ev_engine_flag_fn(void *opts, const ev_opt *o, const char *name, const char *value)
{
	ev_engine_flags *f = (ev_engine_flags *)((char *)opts + o->off);
	int took = eng_options_parse_flag(&f->mo, o->name, value);
	if (took < 0)
		return took;
	if (took == 0)
		return ev_error_set(EV_E_INTERNAL, "%s: not an engine option", name);
	int i = 0;
	while (i < f->n && strcmp(f->names[i], o->name))
		i++;
	if (i == EV_ENGINE_MAX_FLAGS)
		return ev_error_set(EV_E_LIMIT, "%s: too many engine options", name);
	f->names[i] = o->name;
	f->values[i] = value;
	if (i == f->n)
		f->n++;
	return 0;
}

cJSON *ev_engine_flags_json(const ev_engine_flags *f)
{
	if (!f->n)
		return NULL;
	cJSON *e = cJSON_CreateObject();
	for (int i = 0; e && i < f->n; i++)
		cJSON_AddStringToObject(e, f->names[i] + 2, f->values[i]);
	return e;
}

int ev_engine_flags_from_json(ev_engine_flags *f, const cJSON *j)
{
	static const ev_opt rows[] = {EV_ENGINE_OPTS(ev_engine_flags, n), EV_O_END};
	const cJSON *it;
	cJSON_ArrayForEach(it, j) {
		const ev_opt *o = rows;
		while (o->name && (!it->string || strcmp(o->name + 2, it->string)))
			o++;
		const char *v = cJSON_IsString(it) ? it->valuestring : NULL;
		if (!o->name || !v)
			return ev_error_set(EV_E_INVALID, "stored engine settings: %s: not an engine option with a text value",
			                    it->string ? it->string : "?");
		/* The row's offset is that of `n`; point it at f itself. */
		ev_opt row = *o;
		row.off = 0;
		int rc = ev_engine_flag_fn(f, &row, o->name, v);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the run summary ------------------------------------------------------ */

static int fold_one(void *ctx, const ev_result *r) { return ev_run_fold_add(ctx, r); }

int ev_summary_compute(char **out, ev_tracker *t, int64_t run_id)
{
	*out = NULL;
	ev_run_row run = {0};
	ev_run_fold fold = {0};
	cJSON *suites = NULL;
	int rc = ev_tracker_run_get(t, run_id, &run);
	if (!rc)
		rc = ev_tracker_results_each(t, run_id, fold_one, &fold);
	if (!rc) {
		if (!run.suites_json || ev_json_parse(&suites, run.suites_json, strlen(run.suites_json), "run suites"))
			suites = cJSON_CreateArray();
		ev_summary_options opt = run.epochs > 1 ? EV_SUMMARY_EPOCHS_OPTIONS : (ev_summary_options){0};
		/* and k = the run's epochs: pass^K, right every time it was asked */
		bool has = false;
		for (int i = 0; i < opt.n_ks; i++)
			has = has || opt.ks[i] == run.epochs;
		if (run.epochs > 1 && !has && opt.n_ks < EV_SUMMARY_MAX_K) {
			int i = opt.n_ks++;
			for (; i > 0 && opt.ks[i - 1] > run.epochs; i--)
				opt.ks[i] = opt.ks[i - 1];
			opt.ks[i] = (int)run.epochs;
		}
		rc = ev_summary_json(out, run_id, run.model ? run.model : "", &fold, suites, &opt);
	}
	ev_run_fold_clear(&fold);
	cJSON_Delete(suites);
	ev_run_row_clear(&run);
	return rc;
}

char *ev_cli_data_dir(void)
{
	const char *env = getenv("EVALD_DATA_DIR");
	if (env)
		return ev_strdup(env);
	return ev_strdup(EVALD_SOURCE_DIR "/suites/data");
}

int ev_cli_suite_load(ev_suite **out, const char *path, char **tmpdir)
{
	char *default_path = NULL;
	struct stat st;
	if (strcmp(path, "@default") && !strchr(path, '/') && stat(path, &st) != 0) {
		/* a bundled suite by its name ("coding", "tool-use-simple") */
		char *dir = ev_cli_data_dir();
		char *p = dir ? ev_asprintf("%s/%s", dir, path) : NULL;
		free(dir);
		if (p && stat(p, &st) == 0)
			path = default_path = p;
		else
			free(p);
	}
	if (!strcmp(path, "@default")) {
		int trc = *tmpdir ? 0 : ev_mkdtemp(tmpdir, NULL, "default");
		if (trc)
			return ev_error_wrap(trc, "default suite");
		int rc = ev_default_suite_write(&default_path, *tmpdir);
		if (rc)
			return rc;
		path = default_path;
	}
	int rc = ev_suite_load(out, path, NULL);
	free(default_path);
	return rc;
}

void ev_cli_tmpdir_remove(char *tmpdir)
{
	if (!tmpdir)
		return;
	if (ev_rmtree(tmpdir, 0))
		ev_log_warn("%s", ev_error_msg());
	free(tmpdir);
}
