/* feedback: triage groups near-duplicate reports. A generated set of reports
 * with known duplicate groups (paraphrases by word swaps, insertions and
 * deletions over shared boilerplate, and rewrites that only share an
 * attachment) is grouped; pairwise precision and recall must both be at
 * least 0.9 (printed, with a sweep of thresholds). Also: cluster ids stay
 * stable across runs, label rules (built in, from a file, bad files). */
#include "tracker_fixture.h"

#include <stdlib.h>
#include <string.h>

#define N_TOPICS 60
#define MAX_REPORTS 400

static const char *const syl[] = {"ka", "lo", "mi", "ter", "san", "vo", "rin", "pel", "dor", "qua",
                                  "zen", "fi", "mos", "tal", "bri", "nex", "ul", "gra", "shi", "po"};
static const char *const fillers[] = {"really", "actually", "please", "again", "also", "just", "still", "sadly"};
/* Boilerplate that many real reports share: three templates. */
static const char *const heads[] = {
	"steps to reproduce run the model with the default settings and send this prompt",
	"hello team I found a problem with the latest checkpoint when I tried the following",
	"bug report the model gives a wrong answer in this case please take a look",
};
static const char *const tails[] = {
	"expected behaviour a correct answer actual behaviour the answer is wrong",
	"thanks for looking into it let me know if you need more details",
	"this worked with the previous release and broke after the update",
};

typedef struct {
	char **w;
	size_t n, cap;
} words;

static void w_push(words *w, const char *s)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->w = realloc(w->w, w->cap * sizeof *w->w);
	}
	w->w[w->n++] = strdup(s);
}

static void w_split(words *w, const char *s)
{
	char *copy = strdup(s), *save = NULL;
	for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		w_push(w, tok);
	free(copy);
}

static void w_free(words *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->w[i]);
	free(w->w);
	memset(w, 0, sizeof *w);
}

static char *w_join(const words *w)
{
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (size_t i = 0; i < w->n; i++) {
		if (i)
			ev_buf_putc(&b, ' ');
		ev_buf_puts(&b, w->w[i]);
	}
	return ev_buf_detach(&b, NULL);
}

static void pseudo_word(ev_rng *r, char *out, size_t outsz)
{
	out[0] = 0;
	int n = 2 + (int)ev_rng_below(r, 2);
	for (int i = 0; i < n; i++)
		strncat(out, syl[ev_rng_below(r, sizeof syl / sizeof syl[0])], outsz - strlen(out) - 1);
}

/* One paraphrase: 2-6 edits, each an adjacent swap, an inserted filler or a
 * deleted word, somewhere in the topic part. */
static void paraphrase(ev_rng *r, words *w)
{
	int edits = 2 + (int)ev_rng_below(r, 5);
	for (int e = 0; e < edits && w->n > 4; e++) {
		size_t i = 1 + ev_rng_below(r, w->n - 2);
		switch (ev_rng_below(r, 3)) {
		case 0: {
			char *x = w->w[i];
			w->w[i] = w->w[i + 1];
			w->w[i + 1] = x;
			break;
		}
		case 1:
			w_push(w, "");
			free(w->w[w->n - 1]);
			memmove(w->w + i + 1, w->w + i, (w->n - 1 - i) * sizeof *w->w);
			w->w[i] = strdup(fillers[ev_rng_below(r, sizeof fillers / sizeof fillers[0])]);
			break;
		default:
			free(w->w[i]);
			memmove(w->w + i, w->w + i + 1, (w->n - i - 1) * sizeof *w->w);
			w->n--;
		}
	}
}

typedef struct {
	int64_t id[MAX_REPORTS];
	int group[MAX_REPORTS];
	size_t n;
} truth;

/* Generates the reports into the tracker; group ids are the topics. */
static void generate(ev_tracker *t, truth *tr, uint64_t seed)
{
	ev_rng r;
	ev_rng_seed(&r, seed);
	tr->n = 0;
	for (int g = 0; g < N_TOPICS; g++) {
		words base = {0};
		char wbuf[32];
		int head = (int)ev_rng_below(&r, 3), tail = (int)ev_rng_below(&r, 3);
		w_split(&base, heads[head]);
		int topic_len = 20 + (int)ev_rng_below(&r, 21);
		for (int k = 0; k < topic_len; k++) {
			pseudo_word(&r, wbuf, sizeof wbuf);
			w_push(&base, wbuf);
		}
		w_split(&base, tails[tail]);
		char title[64];
		pseudo_word(&r, wbuf, sizeof wbuf);
		snprintf(title, sizeof title, "problem with %s", wbuf);
		/* group sizes 1..5; every 4th group has a rewrite that only shares a screenshot */
		int size = 1 + (int)ev_rng_below(&r, 5);
		bool shot = g % 4 == 0 && size >= 2;
		char png[64];
		int plen = snprintf(png, sizeof png, "\x89PNG\r\n\x1a\nshot-of-topic-%d", g);
		for (int m = 0; m < size && tr->n < MAX_REPORTS; m++) {
			words w = {0};
			for (size_t i = 0; i < base.n; i++)
				w_push(&w, base.w[i]);
			if (m > 0)
				paraphrase(&r, &w);
			char *body = w_join(&w);
			ev_issue_attachment att = {"screenshot.png", "image/png", png, (size_t)plen};
			ev_issue_info info = {0};
			info.title = title;
			info.body = body;
			if (shot && m == size - 1) { /* a different text, the same screenshot */
				free(body);
				/* short and in other words: only the screenshot ties it to its group */
				ev_buf mb = EV_BUF_INIT(4096);
				ev_buf_puts(&mb, "same here on my setup with");
				for (int k = 0; k < 8; k++) {
					pseudo_word(&r, wbuf, sizeof wbuf);
					ev_buf_printf(&mb, " %s", wbuf);
				}
				ev_buf_puts(&mb, " see the screenshot");
				body = ev_buf_detach(&mb, NULL);
				info.body = body;
				info.title = "me too";
			}
			if (shot && (m == 0 || m == size - 1)) {
				info.attachments = &att;
				info.n_attachments = 1;
			}
			int64_t id = 0;
			if (ev_issue_add(t, &info, &id) != 0)
				fail_msg("add: %s", ev_error_msg());
			tr->id[tr->n] = id;
			tr->group[tr->n] = g;
			tr->n++;
			free(body);
			w_free(&w);
		}
		w_free(&base);
	}
}

/* Pairwise precision and recall of a triage result against the truth. */
static void score(const truth *tr, const char *json, double *precision, double *recall)
{
	static int64_t cl[MAX_REPORTS];
	memset(cl, 0, sizeof cl);
	cJSON *j = cJSON_Parse(json), *c;
	int k = 0;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "clusters"))
	{
		k++;
		cJSON *id;
		cJSON_ArrayForEach(id, cJSON_GetObjectItem(c, "issues"))
		for (size_t i = 0; i < tr->n; i++)
			if (tr->id[i] == (int64_t)id->valuedouble)
				cl[i] = k;
	}
	cJSON_Delete(j);
	long tp = 0, fp = 0, fn = 0;
	for (size_t a = 0; a < tr->n; a++)
		for (size_t b = a + 1; b < tr->n; b++) {
			bool same_truth = tr->group[a] == tr->group[b];
			bool same_cl = cl[a] && cl[a] == cl[b];
			tp += same_truth && same_cl;
			fp += !same_truth && same_cl;
			fn += same_truth && !same_cl;
		}
	*precision = tp + fp ? (double)tp / (double)(tp + fp) : 1.0;
	*recall = tp + fn ? (double)tp / (double)(tp + fn) : 1.0;
}

static void triage_groups_generated_duplicates_with_high_precision_and_recall(void **state)
{
	(void)state;
	char *db = tf_db_path("triage-pr");
	ev_tracker *t = tf_open(db);
	truth tr;
	generate(t, &tr, 20261202);
	long pairs = 0;
	for (size_t a = 0; a < tr.n; a++)
		for (size_t b = a + 1; b < tr.n; b++)
			pairs += tr.group[a] == tr.group[b];
	printf("triage: %zu reports in %d topics, %ld true duplicate pairs\n", tr.n, N_TOPICS, pairs);
	/* A sweep, for tuning the default (dry runs store nothing). */
	static const double sweep[] = {0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7};
	for (size_t i = 0; i < sizeof sweep / sizeof sweep[0]; i++) {
		ev_triage_options o = EV_TRIAGE_OPTIONS_INIT;
		o.threshold = sweep[i];
		o.dry_run = true;
		char *json = NULL;
		assert_int_equal(ev_triage_run(t, &o, &json), 0);
		double p, r;
		score(&tr, json, &p, &r);
		printf("triage: threshold %.2f  precision %.3f  recall %.3f\n", sweep[i], p, r);
		free(json);
	}
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM clusters"), 0); /* dry runs stored nothing */

	ev_triage_options o = EV_TRIAGE_OPTIONS_INIT;
	char *json = NULL;
	double t0 = ev_now();
	assert_int_equal(ev_triage_run(t, &o, &json), 0);
	double dt = ev_now() - t0;
	double p, r;
	score(&tr, json, &p, &r);
	printf("triage: default threshold %.2f: precision %.3f recall %.3f (%.1f ms for %zu reports)\n", o.threshold, p,
	       r, dt * 1000, tr.n);
	assert_true(p >= 0.9);
	assert_true(r >= 0.9);

	/* stored: every clustered issue points at a cluster of the right size */
	assert_true(tf_query_long(db, "SELECT count(*) FROM clusters") > 0);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM clusters c WHERE size != (SELECT count(*) FROM "
	                                   "issues i WHERE i.cluster_id = c.id)"),
	                 0);
	assert_int_equal(tf_query_long(db, "SELECT min(size) FROM clusters"), 2);
	/* listed by size, largest first */
	cJSON *j = cJSON_Parse(json), *c;
	double last = 1e9;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "clusters"))
	{
		assert_true(ev_json_num(c, "size", 0) <= last);
		last = ev_json_num(c, "size", 0);
		assert_true(ev_json_bool(c, "new", false));
	}
	cJSON_Delete(j);

	/* a second run keeps the cluster ids and reports none as new */
	long sum_before = tf_query_long(db, "SELECT sum(id * size) FROM clusters");
	char *json2 = NULL;
	assert_int_equal(ev_triage_run(t, &o, &json2), 0);
	assert_int_equal(tf_query_long(db, "SELECT sum(id * size) FROM clusters"), sum_before);
	j = cJSON_Parse(json2);
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "clusters"))
	assert_false(ev_json_bool(c, "new", true));
	cJSON_Delete(j);
	free(json2);
	free(json);
	ev_tracker_close(t);
	free(db);
}

static int count_hit(void *ctx, const char *label)
{
	(void)label;
	(*(int *)ctx)++;
	return 0;
}

static void triage_labels_from_rules_and_modality(void **state)
{
	(void)state;
	char *db = tf_db_path("triage-labels");
	ev_tracker *t = tf_open(db);
	static const char MP4[] = "\0\0\0\x18" "ftypisom\0\0\0\0moov";
	ev_issue_attachment vid = {"clip.mp4", NULL, MP4, sizeof MP4 - 1};
	ev_issue_info a = {0}, b = {0}, c = {0};
	a.title = "Wrong OCR on SCREENSHOT";
	a.body = "the text in the image is misread";
	b.title = "Python code does not compile";
	b.body = "syntax error in the generated function";
	c.title = "summary of my recording";
	c.body = "it ignores the second half";
	c.attachments = &vid;
	c.n_attachments = 1;
	int64_t ia, ib, ic;
	assert_int_equal(ev_issue_add(t, &a, &ia), 0);
	assert_int_equal(ev_issue_add(t, &b, &ib), 0);
	assert_int_equal(ev_issue_add(t, &c, &ic), 0);
	ev_triage_options o = EV_TRIAGE_OPTIONS_INIT;
	char *json = NULL;
	assert_int_equal(ev_triage_run(t, &o, &json), 0);
	free(json);
	char *sql = ev_asprintf("SELECT group_concat(label) FROM (SELECT label FROM labels WHERE issue_id = %lld "
	                        "ORDER BY label)",
	                        (long long)ia);
	char *l = tf_query_text(db, sql);
	assert_string_equal(l, "vision");
	free(l);
	free(sql);
	sql = ev_asprintf("SELECT group_concat(label) FROM (SELECT label FROM labels WHERE issue_id = %lld ORDER BY "
	                  "label)",
	                  (long long)ib);
	l = tf_query_text(db, sql);
	assert_string_equal(l, "coding");
	free(l);
	free(sql);
	sql = ev_asprintf("SELECT group_concat(label) FROM labels WHERE issue_id = %lld", (long long)ic);
	l = tf_query_text(db, sql);
	assert_string_equal(l, "video"); /* from the attachment's modality */
	free(l);
	free(sql);

	/* a rules file replaces the built-in set; comments and blank lines skipped */
	char *dir = tu_tmpdir("triage-rules");
	char *rules = tu_write(dir, "rules.tsv", "# my rules\n\nocr-bug\tOCR|misread\r\nlang\t\\bpython\\b\n");
	o.rules_path = rules;
	assert_int_equal(ev_triage_run(t, &o, &json), 0);
	free(json);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM labels WHERE label = 'ocr-bug'"), 1);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM labels WHERE label = 'lang'"), 1);
	/* bad files name file:line */
	char *bad = tu_write(dir, "bad.tsv", "ok\tfine\nno tab here\n");
	o.rules_path = bad;
	assert_int_equal(ev_triage_run(t, &o, &json), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "bad.tsv:2"));
	char *bad2 = tu_write(dir, "bad2.tsv", "x\t(unclosed\n");
	o.rules_path = bad2;
	assert_int_equal(ev_triage_run(t, &o, &json), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "bad2.tsv:1: pattern"));
	/* a catastrophic pattern hits the match limit and simply does not match */
	ev_label_rules *lr = NULL;
	char *slow = tu_write(dir, "slow.tsv", "slow\t(a+)+$\n");
	assert_int_equal(ev_label_rules_new(&lr, slow), 0);
	int hits = 0;
	char text[64];
	memset(text, 'a', 40);
	strcpy(text + 40, "!");
	double t0 = ev_now();
	assert_int_equal(ev_label_rules_apply(lr, text, count_hit, &hits), 0);
	assert_int_equal(hits, 0);
	assert_true(ev_now() - t0 < 5.0);
	assert_int_equal(ev_label_rules_apply(lr, "aaa", count_hit, &hits), 0);
	assert_int_equal(hits, 1);
	ev_label_rules_free(lr);
	o.threshold = 1.5;
	assert_int_equal(ev_triage_run(t, &o, &json), EV_E_INVALID);
	free(slow);
	free(bad);
	free(bad2);
	free(rules);
	free(dir);
	ev_tracker_close(t);
	free(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(triage_groups_generated_duplicates_with_high_precision_and_recall),
		cmocka_unit_test(triage_labels_from_rules_and_modality),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
