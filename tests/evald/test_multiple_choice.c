/* Multiple-choice samples scored by log-likelihood, as lm-eval scores its
 * multiple-choice tasks, end to end: `evald run --model DIR` gives each
 * choice the log-probability an independent computation gives (the
 * engine's plain forward over context + " " + choice, log-softmax by hand,
 * the context's trailing space moved to the choice), picks the likeliest
 * (acc), and `evald rescore --metric acc_norm` picks per character; the
 * same suite through `evald serve` (legacy completions, echo, logprobs,
 * offsets in characters over non-ASCII choices) gives the same figures; a
 * second run answers from the cache. */
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"

#define NS 4
static const char *const inputs[NS] = {"The capital of France is", "Two plus two equals", "Answer: ",
                                       "Une boisson chaude"};
static const char *const choices[NS][3] = {
	{"Paris", "Berlin", "Madrid"}, {"three", "four", "five"}, {"yes", "no", NULL}, {"café", "thé glacé", "naïve eau"}};
static const int n_choices[NS] = {3, 3, 2, 3};
static const char *const targets[NS] = {"0", "\"four\"", "\"B\"", "2"};
static const int gold[NS] = {0, 1, 1, 2};

static char *dir, *ckpt, *suite;
static double want_lp[NS][3];
static int want_tok[NS][3];

static double lse_row(const float *row, int V, int tok)
{
	double mx = row[0], sum = 0;
	for (int v = 1; v < V; v++)
		mx = row[v] > mx ? row[v] : mx;
	for (int v = 0; v < V; v++)
		sum += exp(row[v] - mx);
	return row[tok] - mx - log(sum);
}

/* The oracle: one plain forward a choice, every row's logits. */
static void oracle(void)
{
	eng_model *m = NULL;
	eng_tokenizer *tok = NULL;
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	mo.backend = ENG_BACKEND_REF;
	assert_int_equal(eng_model_load(&m, ckpt, &mo), 0);
	assert_int_equal(eng_tokenizer_load(&tok, ckpt), 0);
	eng_model_info info;
	eng_model_get_info(m, &info);
	for (int i = 0; i < NS; i++) {
		size_t clen = strlen(inputs[i]);
		while (clen && inputs[i][clen - 1] == ' ')
			clen--;
		int32_t *cids = NULL;
		size_t nc = 0;
		assert_int_equal(eng_tokenize_with_specials(tok, inputs[i], clen, &cids, &nc), 0);
		for (int k = 0; k < n_choices[i]; k++) {
			char *full = ev_asprintf("%s %s", inputs[i], choices[i][k]);
			int32_t *ids = NULL;
			size_t n = 0;
			assert_int_equal(eng_tokenize_with_specials(tok, full, strlen(full), &ids, &n), 0);
			float *rows = malloc(n * (size_t)info.vocab * sizeof *rows);
			eng_seq *s = NULL;
			assert_int_equal(eng_seq_new(&s, m), 0);
			assert_int_equal(eng_forward(s, ids, (int)n, rows), 0);
			double lp = 0;
			for (size_t t = nc; t < n; t++)
				lp += lse_row(rows + (t - 1) * (size_t)info.vocab, info.vocab, ids[t]);
			want_lp[i][k] = lp;
			want_tok[i][k] = (int)(n - nc);
			eng_seq_free(s);
			free(rows);
			free(ids);
			free(full);
		}
		free(cids);
	}
	eng_tokenizer_free(tok);
	eng_model_free(m);
}

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("multiple-choice");
	ckpt = tu_path(dir, "ckpt");
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 600;
	if (eng_mkmodel(ckpt, "qwen2", &z, "f32", 11))
		return -1;
	suite = tu_path(dir, "suite");
	char *cmd = ev_asprintf("mkdir -p '%s'", suite);
	if (system(cmd))
		return -1;
	free(cmd);
	free(tu_write(suite, "suite.json",
	              "{\"name\":\"mc\",\"version\":\"1\",\"kind\":\"multiple-choice\",\"checker\":{\"type\":\"loglikelihood\"}}"));
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < NS; i++) {
		ev_buf_printf(&b, "{\"id\":\"q%d\",\"input\":\"%s\",\"choices\":[", i, inputs[i]);
		for (int k = 0; k < n_choices[i]; k++)
			ev_buf_printf(&b, "%s\"%s\"", k ? "," : "", choices[i][k]);
		ev_buf_printf(&b, "],\"target\":%s}\n", targets[i]);
	}
	free(tu_write(suite, "samples.jsonl", b.data));
	ev_buf_free(&b);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	free(ckpt);
	free(suite);
	free(dir);
	return 0;
}

/* The exported rows of run 1 in `db`: answers[i] parsed, scores[i]. */
static void exported(const char *db, cJSON *answers[NS], double scores[NS])
{
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "export", "1", "--format", "jsonl", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	char *line = out;
	int got = 0;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		cJSON *row = cJSON_Parse(line);
		assert_non_null(row);
		const char *id = ev_json_str(row, "sample_id", ev_json_str(row, "id", ""));
		int i = id[0] == 'q' ? atoi(id + 1) : -1;
		assert_true(i >= 0 && i < NS);
		answers[i] = cJSON_Parse(ev_json_str(row, "response", ""));
		assert_non_null(answers[i]);
		scores[i] = ev_json_num(row, "score", -1);
		cJSON_Delete(row);
		got++;
		line = nl ? nl + 1 : NULL;
	}
	assert_int_equal(got, NS);
	free(out);
	free(err);
}

static void check_answers(cJSON *answers[NS], double scores[NS], double tol)
{
	for (int i = 0; i < NS; i++) {
		const cJSON *lps = cJSON_GetObjectItem(answers[i], "logprobs"), *toks = cJSON_GetObjectItem(answers[i], "tokens");
		assert_int_equal(cJSON_GetArraySize(lps), n_choices[i]);
		int best = 0;
		for (int k = 0; k < n_choices[i]; k++) {
			double got = cJSON_GetArrayItem(lps, k)->valuedouble;
			if (fabs(got - want_lp[i][k]) > tol * (1 + fabs(want_lp[i][k])))
				fail_msg("q%d choice %d: logprob %.9g, the oracle says %.9g", i, k, got, want_lp[i][k]);
			assert_int_equal(cJSON_GetArrayItem(toks, k)->valueint, want_tok[i][k]);
			best = want_lp[i][k] > want_lp[i][best] ? k : best;
		}
		assert_true(scores[i] == (best == gold[i] ? 1.0 : 0.0));
	}
}

static void engine_scores_choices_as_the_oracle(void **st)
{
	(void)st;
	oracle();
	char *db = tu_path(dir, "engine.db"), *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", ckpt, "--suite", suite, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, run), 0);
	free(out), free(err);
	cJSON *answers[NS];
	double scores[NS];
	exported(db, answers, scores);
	check_answers(answers, scores, 1e-6);
	for (int i = 0; i < NS; i++)
		cJSON_Delete(answers[i]);
	/* acc_norm from the stored answers, no model: per character */
	const char *rescore[] = {tu_evald(), "--db", db, "rescore", "1", "--metric", "acc_norm", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, rescore), 0);
	double norm = 0;
	for (int i = 0; i < NS; i++) {
		int best = 0;
		for (int k = 1; k < n_choices[i]; k++) {
			double a = want_lp[i][k] / (double)ev_utf8_chars(choices[i][k], strlen(choices[i][k]));
			double b = want_lp[i][best] / (double)ev_utf8_chars(choices[i][best], strlen(choices[i][best]));
			best = a > b ? k : best;
		}
		norm += best == gold[i];
	}
	cJSON *sum = cJSON_Parse(out);
	double got = ev_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(sum, "suites"), 0), "score", -1);
	assert_true(fabs(got - norm / NS) < 1e-12);
	cJSON_Delete(sum);
	free(out), free(err);
	/* again: every answer from the cache */
	const char *again[] = {tu_evald(), "--db", db, "run", "--model", ckpt, "--suite", suite, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, again), 0);
	assert_non_null(strstr(err, "4 of 4 answers came from the cache"));
	free(out), free(err);
	free(db);
}

static void served_scores_equal_the_engine(void **st)
{
	(void)st;
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	char *sdb = tu_path(dir, "serve.db");
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(tu_evald(), tu_evald(), "--db", sdb, "serve", "--model", ckpt, "--port", "0", "--print-port",
		      (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	int port = 0;
	assert_true(f && fscanf(f, "%d", &port) == 1);
	fclose(f);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
	char *db = tu_path(dir, "http.db"), *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", url, "--suite", suite, NULL};
	int rc = tu_run(&out, &err, NULL, run);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	if (rc)
		fail_msg("run over HTTP: %s", err);
	free(out), free(err);
	cJSON *answers[NS];
	double scores[NS];
	exported(db, answers, scores);
	check_answers(answers, scores, 1e-6); /* the server prints 9 digits */
	for (int i = 0; i < NS; i++)
		cJSON_Delete(answers[i]);
	free(db);
	free(sdb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(engine_scores_choices_as_the_oracle),
		cmocka_unit_test(served_scores_equal_the_engine),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
