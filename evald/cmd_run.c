/*
 * evald run: evaluate a model on one or more suites, storing every scored
 * result in the tracker as it arrives, then print the run's summary.
 *
 * Every setting of a run is stored with it (config_json), so that
 * `evald run --resume RUN` rebuilds the same plan and runs only what is
 * missing (results with a backend error are tried again).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "evald/cli.h"
#include "runners/runners.h"

#define MAX_LIST 64

typedef struct {
	const char *models[MAX_LIST];
	int n_models;
	const char *model_name;
	const char *suites[MAX_LIST];
	int n_suites;
	char *checker_spec; /* owned */
	int concurrency;
	double timeout_s;
	int retries;
	const char *headers[MAX_LIST];
	int n_headers;
	const char *api_key_env;
	long limit;
	int epochs; /* 0: each suite's own */
	int shard_k, shard_n;
	int max_tokens;
	double temperature, top_p;
	bool has_seed;
	int64_t seed;
	bool no_cache;
	char *engine_flags; /* owned JSON object: --attention, --msa-*, --kv-* */
} run_config;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: evald run --model URL|DIR [--model URL...] [--model-name NAME] [--suite PATH]...\n"
	        "                 [--checker includes|exact|numeric|choice|regex] [--pattern P]... [--group N]\n"
	        "                 [--match first|last] [--ignore-case] [--tolerance X] [--compare exact|includes|none]\n"
	        "                 [--concurrency N] [--timeout S] [--retries N] [--header 'K: V']... [--api-key-env VAR]\n"
	        "                 [--limit N] [--epochs K] [--shard K/N] [--max-tokens N] [--temperature T]\n"
	        "                 [--top-p P] [--seed S] [--no-cache] [--json]\n"
	        "                 with a checkpoint folder: [--attention dense|msa] [--msa-top-k K] [--msa-block-size B]\n"
	        "                 [--msa-sink-blocks S] [--msa-local-blocks L] [--msa-dense-below N]\n"
	        "                 [--msa-dense-layers 0,1] [--kv-dtype f32|f16|bf16] [--kv-max-bytes N]\n"
	        "       evald run --resume RUN [--concurrency N] [--json]\n"
	        "Without --suite, the embedded default suite is run.\n");
}

/* ---- the config as JSON (stored with the run) ----------------------------- */

static cJSON *str_array(const char *const *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
	return a;
}

static char *config_to_json(const run_config *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "models", str_array(c->models, c->n_models));
	cJSON_AddStringToObject(o, "model_name", c->model_name);
	cJSON_AddItemToObject(o, "suites", str_array(c->suites, c->n_suites));
	if (c->checker_spec) {
		cJSON *spec = cJSON_Parse(c->checker_spec);
		cJSON_AddItemToObject(o, "checker", spec ? spec : cJSON_CreateNull());
	}
	cJSON_AddNumberToObject(o, "concurrency", c->concurrency);
	cJSON_AddNumberToObject(o, "timeout", c->timeout_s);
	cJSON_AddNumberToObject(o, "retries", c->retries);
	cJSON_AddItemToObject(o, "headers", str_array(c->headers, c->n_headers));
	cJSON_AddStringToObject(o, "api_key_env", c->api_key_env);
	cJSON_AddNumberToObject(o, "limit", (double)c->limit);
	cJSON_AddNumberToObject(o, "epochs", c->epochs);
	cJSON_AddNumberToObject(o, "shard_k", c->shard_k);
	cJSON_AddNumberToObject(o, "shard_n", c->shard_n);
	cJSON_AddNumberToObject(o, "max_tokens", c->max_tokens);
	cJSON_AddNumberToObject(o, "temperature", c->temperature);
	cJSON_AddNumberToObject(o, "top_p", c->top_p);
	if (c->has_seed)
		cJSON_AddNumberToObject(o, "seed", (double)c->seed);
	cJSON_AddBoolToObject(o, "no_cache", c->no_cache);
	if (c->engine_flags) {
		cJSON *e = cJSON_Parse(c->engine_flags);
		cJSON_AddItemToObject(o, "engine", e ? e : cJSON_CreateNull());
	}
	char *s = ev_json_print(o);
	cJSON_Delete(o);
	return s;
}

/* Strings point into `j`, which the caller keeps alive. */
static int config_from_json(run_config *c, const cJSON *j)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "models")) if (cJSON_IsString(v) &&
	                                                                          c->n_models < MAX_LIST)
		c->models[c->n_models++] = v->valuestring;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "suites")) if (cJSON_IsString(v) &&
	                                                                          c->n_suites < MAX_LIST)
		c->suites[c->n_suites++] = v->valuestring;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "headers")) if (cJSON_IsString(v) &&
	                                                                           c->n_headers < MAX_LIST)
		c->headers[c->n_headers++] = v->valuestring;
	c->model_name = ev_json_str(j, "model_name", NULL);
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "checker");
	if (spec && cJSON_IsObject(spec))
		c->checker_spec = ev_json_print(spec);
	c->concurrency = (int)ev_json_num(j, "concurrency", 16);
	c->timeout_s = ev_json_num(j, "timeout", 300);
	c->retries = (int)ev_json_num(j, "retries", 6);
	c->api_key_env = ev_json_str(j, "api_key_env", "OPENAI_API_KEY");
	c->limit = (long)ev_json_num(j, "limit", 0);
	c->epochs = (int)ev_json_num(j, "epochs", 0);
	c->shard_k = (int)ev_json_num(j, "shard_k", 0);
	c->shard_n = (int)ev_json_num(j, "shard_n", 1);
	c->max_tokens = (int)ev_json_num(j, "max_tokens", 0);
	c->temperature = ev_json_num(j, "temperature", -1);
	c->top_p = ev_json_num(j, "top_p", -1);
	if (cJSON_GetObjectItemCaseSensitive(j, "seed")) {
		c->has_seed = true;
		c->seed = (int64_t)ev_json_num(j, "seed", 0);
	}
	c->no_cache = ev_json_bool(j, "no_cache", false);
	const cJSON *eng = cJSON_GetObjectItemCaseSensitive(j, "engine");
	if (cJSON_IsObject(eng))
		c->engine_flags = ev_json_print(eng);
	if (!c->n_models || !c->n_suites)
		return ev_error_set(EV_E_INVALID, "the stored run config has no models or suites");
	return 0;
}

/* ---- resume: the set of results already stored ------------------------------ */

static char *done_key(const char *suite, const char *id, int epoch)
{
	return ev_asprintf("%s\x1f%s\x1f%d", suite, id, epoch);
}

static int collect_done(void *ctx, const ev_result *r)
{
	if (ev_result_is_error(r))
		return 0; /* errors are tried again */
	char *k = done_key(r->suite, r->sample_id, r->epoch);
	int rc = k ? ev_strset_add(ctx, k, strlen(k), NULL, NULL) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(k);
	return rc;
}

/* ---- the sink --------------------------------------------------------------- */

typedef struct {
	ev_tracker *t;
	int64_t run_id;
	ev_strset *done;
	bool use_cache;
} sink_ctx;

static bool sink_is_done(void *ctx, const char *suite, const char *id, int epoch)
{
	sink_ctx *s = ctx;
	char *k = done_key(suite, id, epoch);
	bool has = k && ev_strset_find(s->done, k, strlen(k)) >= 0;
	free(k);
	return has;
}

static int sink_cache_get(void *ctx, const char *key, char **body)
{
	sink_ctx *s = ctx;
	if (!s->use_cache)
		return EV_E_NOTFOUND;
	return ev_tracker_cache_get(s->t, key, body);
}

static int sink_cache_put(void *ctx, const char *key, const char *body)
{
	sink_ctx *s = ctx;
	return s->use_cache ? ev_tracker_cache_put(s->t, key, body) : 0;
}

static int sink_result(void *ctx, const ev_result *r)
{
	sink_ctx *s = ctx;
	int rc = ev_tracker_result_put(s->t, s->run_id, r);
	if (rc)
		return rc;
	if (g_stop)
		return ev_error_set(EV_E_INVALID, "interrupted");
	return 0;
}

static void sink_tick(void *ctx)
{
	sink_ctx *s = ctx;
	if (ev_tracker_tick(s->t))
		ev_log_warn("tracker: %s", ev_error_msg());
}

/* ---- argument parsing --------------------------------------------------------- */

static int parse_args(run_config *c, ev_checker_flags *cf, int64_t *resume, bool *json, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int r = ev_checker_flags_parse(cf, argc, argv, &i);
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t n;
		double d;
#define NEED()                                                          \
	do {                                                            \
		if (!v) {                                               \
			fprintf(stderr, "evald run: %s needs a value\n", a); \
			return -1;                                      \
		}                                                       \
		i++;                                                    \
	} while (0)
		if (ev_str_starts(a, "--attention") || ev_str_starts(a, "--msa-") || ev_str_starts(a, "--kv-")) {
			/* The engine's settings, checked when the engine loads. */
			NEED();
			cJSON *e = c->engine_flags ? cJSON_Parse(c->engine_flags) : cJSON_CreateObject();
			if (!e)
				return -1;
			cJSON_DeleteItemFromObjectCaseSensitive(e, a + 2);
			cJSON_AddStringToObject(e, a + 2, v);
			free(c->engine_flags);
			c->engine_flags = ev_json_print(e);
			cJSON_Delete(e);
		} else if (!strcmp(a, "--json")) {
			*json = true;
		} else if (!strcmp(a, "--no-cache")) {
			c->no_cache = true;
		} else if (!strcmp(a, "--model")) {
			NEED();
			if (c->n_models < MAX_LIST)
				c->models[c->n_models++] = v;
		} else if (!strcmp(a, "--model-name")) {
			NEED();
			c->model_name = v;
		} else if (!strcmp(a, "--suite")) {
			NEED();
			if (c->n_suites < MAX_LIST)
				c->suites[c->n_suites++] = v;
		} else if (!strcmp(a, "--header")) {
			NEED();
			if (!strchr(v, ':')) {
				fprintf(stderr, "evald run: --header takes 'Name: value'\n");
				return -1;
			}
			if (c->n_headers < MAX_LIST)
				c->headers[c->n_headers++] = v;
		} else if (!strcmp(a, "--api-key-env")) {
			NEED();
			c->api_key_env = v;
		} else if (!strcmp(a, "--resume")) {
			NEED();
			if (!ev_cli_parse_run_id(v, resume))
				return -1;
		} else if (!strcmp(a, "--shard")) {
			NEED();
			int k, nn;
			char extra;
			if (sscanf(v, "%d/%d%c", &k, &nn, &extra) != 2 || nn < 1 || k < 0 || k >= nn) {
				fprintf(stderr, "evald run: --shard takes K/N with 0 <= K < N (got '%s')\n", v);
				return -1;
			}
			c->shard_k = k, c->shard_n = nn;
		} else if (!strcmp(a, "--concurrency") || !strcmp(a, "--retries") || !strcmp(a, "--limit") ||
		           !strcmp(a, "--epochs") || !strcmp(a, "--max-tokens") || !strcmp(a, "--seed")) {
			NEED();
			if (!ev_parse_i64(v, &n) || n < 0 || n > 1000000000) {
				fprintf(stderr, "evald run: %s: '%s' is not a count\n", a, v);
				return -1;
			}
			if (!strcmp(a, "--concurrency"))
				c->concurrency = n > 0 ? (int)n : 1;
			else if (!strcmp(a, "--retries"))
				c->retries = (int)n;
			else if (!strcmp(a, "--limit"))
				c->limit = (long)n;
			else if (!strcmp(a, "--epochs"))
				c->epochs = (int)n;
			else if (!strcmp(a, "--max-tokens"))
				c->max_tokens = (int)n;
			else
				c->has_seed = true, c->seed = n;
		} else if (!strcmp(a, "--timeout") || !strcmp(a, "--temperature") || !strcmp(a, "--top-p")) {
			NEED();
			if (!ev_parse_f64(v, &d) || d < 0) {
				fprintf(stderr, "evald run: %s: '%s' is not a non-negative number\n", a, v);
				return -1;
			}
			if (!strcmp(a, "--timeout"))
				c->timeout_s = d;
			else if (!strcmp(a, "--temperature"))
				c->temperature = d;
			else
				c->top_p = d;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		} else {
			fprintf(stderr, "evald run: unknown argument '%s'\n", a);
			return -1;
		}
#undef NEED
	}
	return 0;
}

/* ---- the run ------------------------------------------------------------------- */

static long planned(const ev_suite *s, long limit, int shard_k, int shard_n, int epochs)
{
	long n = 0;
	for (size_t i = 0; i < s->n_samples && (limit <= 0 || (long)i < limit); i++)
		if (ev_shard_owns(s->samples[i].id, shard_k, shard_n))
			n++;
	return n * epochs;
}

static int make_backend(ev_backend **out, const run_config *c)
{
	bool http = ev_str_starts(c->models[0], "http://") || ev_str_starts(c->models[0], "https://");
	/* A checkpoint folder runs on the bundled engine in process (runners/
	 * backend_engine.c; added by the serving engineer). */
	struct stat st;
	if (!http && stat(c->models[0], &st) == 0 && S_ISDIR(st.st_mode)) {
		if (c->n_models > 1)
			return ev_error_set(EV_E_INVALID, "--model: one checkpoint folder at a time");
		ev_engine_backend_options eo = EV_ENGINE_BACKEND_OPTIONS_INIT;
		eo.model_dir = c->models[0];
		eo.model_name = c->model_name;
		eo.engine_flags_json = c->engine_flags;
		return ev_backend_engine_new(out, &eo);
	}
	if (c->engine_flags)
		return ev_error_set(EV_E_INVALID, "--attention, --msa-* and --kv-* apply to a checkpoint folder, not to %s",
		                    c->models[0]);
	if (!http)
		return ev_error_set(EV_E_INVALID, "--model %s: neither an http(s) URL nor a checkpoint folder", c->models[0]);
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = c->models;
	o.n_urls = (size_t)c->n_models;
	o.api_key_env = c->api_key_env;
	o.headers = c->headers;
	o.n_headers = (size_t)c->n_headers;
	o.concurrency = c->concurrency;
	o.timeout_s = c->timeout_s;
	o.max_retries = c->retries;
	return ev_backend_openai_new(out, &o);
}

int ev_cmd_run(const ev_cli *cli, int argc, char **argv)
{
	run_config c = {.concurrency = 16, .timeout_s = 300, .retries = 6, .api_key_env = "OPENAI_API_KEY",
	                .shard_n = 1, .temperature = -1, .top_p = -1};
	ev_checker_flags cf = EV_CHECKER_FLAGS_INIT;
	int64_t resume = 0;
	bool json = cli->json;
	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	ev_backend *backend = NULL;
	ev_suite *suites[MAX_LIST] = {0};
	ev_checker *checkers[MAX_LIST] = {0};
	cJSON *stored = NULL, *suites_info = NULL;
	char *config_json = NULL, *suites_json = NULL, *summary = NULL, *tmpdir = NULL;
	ev_progress *progress = NULL;
	sink_ctx sink = {0};
	ev_run_row row = {0};
	int64_t run_id = 0;

	if (parse_args(&c, &cf, &resume, &json, argc, argv) != 0) {
		usage();
		return EV_EXIT_USAGE;
	}
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;

	if (resume) {
		int concurrency = c.concurrency;
		if (ev_tracker_run_get(t, resume, &row) != 0) {
			ev_cli_fail("--resume");
			goto done;
		}
		if (!row.config_json || ev_json_parse(&stored, row.config_json, strlen(row.config_json), "run config") ||
		    config_from_json(&c, stored)) {
			ev_cli_fail("--resume");
			goto done;
		}
		if (concurrency != 16)
			c.concurrency = concurrency;
		run_id = resume;
	} else {
		c.checker_spec = ev_checker_flags_spec(&cf);
		if (!c.n_models) {
			fprintf(stderr, "evald run: --model is required\n");
			usage();
			rc = EV_EXIT_USAGE;
			goto done;
		}
		if (!c.n_suites)
			c.suites[c.n_suites++] = "@default";
		if (!c.model_name)
			c.model_name = c.models[0];
	}

	/* Load the suites and their checkers before anything is stored. */
	suites_info = cJSON_CreateArray();
	long total = 0;
	int max_epochs = 1;
	for (int i = 0; i < c.n_suites; i++) {
		int lr = ev_cli_suite_load(&suites[i], c.suites[i], &tmpdir);
		if (lr != 0) {
			ev_cli_fail(c.suites[i]);
			goto done;
		}
		ev_suite *s = suites[i];
		const char *spec = c.checker_spec ? c.checker_spec : s->checker_json ? s->checker_json
		                                                                      : "{\"type\":\"includes\"}";
		if (ev_checker_new(&checkers[i], spec) != 0) {
			ev_cli_fail(s->name);
			goto done;
		}
		if (c.epochs > 0)
			s->gen.epochs = c.epochs;
		if (s->gen.epochs < 1)
			s->gen.epochs = 1;
		if (c.max_tokens > 0)
			s->gen.max_tokens = c.max_tokens;
		if (c.temperature >= 0)
			s->gen.temperature = c.temperature;
		if (c.top_p >= 0)
			s->gen.top_p = c.top_p;
		if (c.has_seed)
			s->gen.has_seed = true, s->gen.seed = c.seed;
		if (s->gen.epochs > max_epochs)
			max_epochs = s->gen.epochs;
		total += planned(s, c.limit, c.shard_k, c.shard_n, s->gen.epochs);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddStringToObject(o, "version", s->version ? s->version : "");
		cJSON_AddStringToObject(o, "kind", s->kind ? s->kind : "");
		cJSON_AddStringToObject(o, "hash", s->content_hash ? s->content_hash : "");
		cJSON_AddStringToObject(o, "path", c.suites[i]);
		cJSON_AddNumberToObject(o, "n", (double)s->n_samples);
		cJSON_AddItemToArray(suites_info, o);
	}
	if (resume) {
		/* The suites must be the ones the run started with. */
		cJSON *old = NULL;
		if (row.suites_json && !ev_json_parse(&old, row.suites_json, strlen(row.suites_json), "run suites")) {
			for (int i = 0; i < c.n_suites; i++) {
				const char *h = ev_json_str(cJSON_GetArrayItem(old, i), "hash", "");
				if (*h && suites[i]->content_hash && strcmp(h, suites[i]->content_hash)) {
					cJSON_Delete(old);
					ev_error_set(EV_E_INVALID, "suite %s changed since run %lld started (content hash differs)",
					             suites[i]->name, (long long)resume);
					ev_cli_fail("--resume");
					goto done;
				}
			}
			cJSON_Delete(old);
		}
	}

	if (make_backend(&backend, &c) != 0) {
		ev_cli_fail("model");
		goto done;
	}
	if (!resume) {
		config_json = config_to_json(&c);
		suites_json = ev_json_print(suites_info);
		char *sources = NULL;
		{
			ev_buf b = EV_BUF_INIT(1 << 20);
			for (int i = 0; i < c.n_models; i++)
				ev_buf_printf(&b, "%s%s", i ? " " : "", c.models[i]);
			sources = ev_buf_detach(&b, NULL);
		}
		ev_run_info info = {c.model_name, sources, suites_json, config_json, max_epochs, total};
		int r = ev_tracker_run_create(t, &info, &run_id);
		free(sources);
		if (r) {
			ev_cli_fail("tracker");
			goto done;
		}
	}
	if (ev_tracker_run_set_status(t, run_id, "running")) {
		ev_cli_fail("tracker");
		goto done;
	}
	if (!json && !cli->quiet)
		fprintf(stderr, "evald: run %lld: %s on %d suite(s), %ld results planned\n", (long long)run_id,
		        c.model_name, c.n_suites, total);

	sink.t = t;
	sink.run_id = run_id;
	sink.use_cache = !c.no_cache;
	if (ev_strset_new(&sink.done) ||
	    (resume && ev_tracker_results_each(t, run_id, collect_done, sink.done))) {
		ev_cli_fail("resume");
		goto done;
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ev_progress_new(&progress, "run", total - (long)ev_strset_count(sink.done), stderr, cli->quiet || json);
	bool interrupted = false;
	for (int i = 0; i < c.n_suites && !interrupted; i++) {
		ev_run_plan plan = {0};
		plan.suite = suites[i];
		plan.checker = checkers[i];
		plan.model = c.model_name;
		plan.epochs = suites[i]->gen.epochs;
		plan.limit = c.limit;
		plan.shard_k = c.shard_k;
		plan.shard_n = c.shard_n;
		plan.is_done = sink_is_done;
		plan.cache_get = sink_cache_get;
		plan.cache_put = sink_cache_put;
		plan.on_result = sink_result;
		plan.on_tick = sink_tick;
		plan.ctx = &sink;
		plan.progress = progress;
		ev_run_counts counts = {0};
		int r = ev_runner_run(backend, &plan, &counts);
		if (r != 0) {
			interrupted = true;
			if (!g_stop)
				ev_cli_fail(suites[i]->name);
		}
	}
	ev_progress_finish(progress);
	if (ev_tracker_flush(t)) {
		ev_cli_fail("tracker");
		goto done;
	}
	if (interrupted) {
		ev_tracker_run_set_status(t, run_id, g_stop ? "interrupted" : "failed");
		fprintf(stderr, "evald: run %lld %s; finish it with: evald run --resume %lld\n", (long long)run_id,
		        g_stop ? "interrupted" : "failed", (long long)run_id);
		goto done;
	}
	if (ev_summary_compute(&summary, t, run_id) || ev_tracker_run_set_summary(t, run_id, summary) ||
	    ev_tracker_run_set_status(t, run_id, "finished")) {
		ev_cli_fail("summary");
		goto done;
	}
	if (json)
		printf("%s\n", summary);
	else
		ev_summary_print(stdout, summary);
	rc = 0;
done:
	ev_progress_free(progress);
	ev_strset_free(sink.done);
	ev_backend_free(backend);
	for (int i = 0; i < MAX_LIST; i++) {
		ev_checker_free(checkers[i]);
		ev_suite_free(suites[i]);
	}
	ev_cli_tmpdir_remove(tmpdir);
	free(c.checker_spec);
	free(c.engine_flags);
	free(config_json);
	free(suites_json);
	free(summary);
	cJSON_Delete(suites_info);
	cJSON_Delete(stored);
	ev_run_row_clear(&row);
	ev_tracker_close(t);
	return rc;
}
