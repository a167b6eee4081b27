/* Multimodal importers: VLMEvalKit TSV (pandas quoting, base64 images,
 * references to another row's image, image lists, options up to the first
 * empty one) and lmms-eval-style JSON Lines (options as a list or by
 * letter, answers as letters, texts or indexes, images as paths, data:
 * URLs or base64); circular import (every rotation a sample, the target
 * following the right option); the summary's circular score; hostile and
 * broken input failing with file:line and nothing written. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/text.h"
#include "scoring/scoring.h"
#include "suites/suites.h"

/* a real 1 x 1 PNG */
static const unsigned char PNG1[] = {
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
	0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
	0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0,
	0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
static const unsigned char JPG1[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};

static char *b64(const void *d, size_t n)
{
	char *o = NULL;
	assert_int_equal(ev_base64_encode(&o, d, n), 0);
	return o;
}

static const ev_sample *find(const ev_suite *s, const char *id)
{
	for (size_t i = 0; i < s->n_samples; i++)
		if (!strcmp(s->samples[i].id, id))
			return &s->samples[i];
	fail_msg("no sample %s", id);
	return NULL;
}

static const char *text_of(const ev_sample *x)
{
	const ev_message *m = &x->messages[0];
	return m->parts[m->n_parts - 1].text;
}

/* the text of option `letter` in a sample's prompt */
static void option_text(const ev_sample *x, char letter, char *out, size_t cap)
{
	char key[8];
	snprintf(key, sizeof key, "\n%c. ", letter);
	const char *p = strstr(text_of(x), key);
	assert_non_null(p);
	p += 4;
	size_t n = strcspn(p, "\n");
	snprintf(out, cap, "%.*s", (int)n, p);
}

static void vlmevalkit_tsv_circular(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("vlmtsv"), *out = tu_path(dir, "suite");
	char *p = b64(PNG1, sizeof PNG1), *j = b64(JPG1, sizeof JPG1);
	char *tsv = ev_asprintf("index\tquestion\thint\tA\tB\tC\tD\tanswer\tcategory\timage\n"
	                        "10\tWhat colour?\t\tred\tblue\tgreen\t\tB\tcolour\t%s\n"
	                        "11\t\"Two lines\nand a\ttab, \"\"quoted\"\"\"\tnan\tx\ty\t\t\tA\tcount\t10\n"
	                        "12\tBoth pictures?\tlook\tyes\tno\t\t\tA\tpair\t['%s', '%s']\n"
	                        "13\tOpen question\t\t\t\t\t\tforty two\tvqa\t%s\n",
	                        p, p, j, p);
	char *f = tu_write(dir, "MMBench_TEST.tsv", tsv);
	if (ev_import_vlmevalkit(f, out, true))
		fail_msg("%s", ev_error_msg());
	ev_suite *s = NULL;
	if (ev_suite_load(&s, out, NULL))
		fail_msg("%s", ev_error_msg());
	assert_string_equal(s->name, "mmbench_test");
	assert_int_equal(s->n_samples, 3 + 2 + 2 + 1); /* rotations: 3 options, 2, 2; the open one once */
	/* every rotation's target names the same option text: blue */
	const char *ids[3] = {"10", "10-c1", "10-c2"};
	char seen[3] = {0};
	for (int r = 0; r < 3; r++) {
		const ev_sample *x = find(s, ids[r]);
		char opt[64];
		assert_int_equal(x->n_targets, 1);
		option_text(x, x->targets[0][0], opt, sizeof opt);
		assert_string_equal(opt, "blue");
		seen[r] = x->targets[0][0];
		assert_non_null(strstr(x->metadata_json, "\"circular_group\":\"10\""));
		assert_non_null(strstr(x->checker_json, "\"letters\":\"ABC\""));
		assert_int_equal(x->messages[0].parts[0].kind, EV_PART_IMAGE);
	}
	assert_true(seen[0] != seen[1] && seen[1] != seen[2] && seen[0] != seen[2]);
	/* quoting: a newline, a tab and doubled quotes kept; nan is no hint; a
	 * reference to row 10's image */
	const ev_sample *q11 = find(s, "11");
	assert_non_null(strstr(text_of(q11), "Question: Two lines\nand a\ttab, \"quoted\"\n"));
	assert_null(strstr(text_of(q11), "Hint"));
	char *img10 = NULL, *img11 = NULL;
	size_t n10 = 0, n11 = 0;
	assert_int_equal(ev_file_read(&img10, &n10, find(s, "10")->messages[0].parts[0].path, 1 << 20), 0);
	assert_int_equal(ev_file_read(&img11, &n11, q11->messages[0].parts[0].path, 1 << 20), 0);
	assert_int_equal(n11, sizeof PNG1);
	assert_memory_equal(img11, PNG1, sizeof PNG1);
	free(img10), free(img11);
	/* a list: two images, in order, the JPEG named as one */
	const ev_sample *q12 = find(s, "12");
	assert_int_equal(q12->messages[0].n_parts, 3);
	assert_true(ev_str_ends(q12->messages[0].parts[1].path, ".jpg"));
	assert_non_null(strstr(text_of(q12), "Hint: look\n"));
	/* no options: the answer is an exact target */
	const ev_sample *q13 = find(s, "13");
	assert_string_equal(q13->targets[0], "forty two");
	assert_null(q13->checker_json);
	assert_null(strstr(q13->metadata_json, "circular_group"));
	ev_suite_free(s);

	/* broken rows fail naming the line; nothing is written */
	char *bad_out = tu_path(dir, "bad");
	const char *bad[][2] = {
		{"index\tquestion\tA\tB\tanswer\timage\n1\tq\tx\ty\tC\t@\n", "answer"},
		{"index\tquestion\tA\tB\tanswer\timage\n1\tq\tx\ty\tA\t!!notbase64!!@\n", "base64"},
		{"index\tquestion\tA\tB\tanswer\timage\n1\tq\tx\ty\tA\t77\n", "index of a row"},
		{"index\tquestion\tanswer\n1\tq\t\n", "answer"},
		{"index\tquestion\tA\tB\tanswer\timage\n1\t\"open quote\tx\ty\tA\t@\n", "not closed"},
		{"index\tquestion\n1\tq\n", "answer columns"},
		{"index\tquestion\tA\tB\tanswer\timage\n1\tq\tx\ty\tA\t@\n1\tq\tx\ty\tA\t@\n", "duplicate"},
	};
	static const char words[] = "just some text and no picture at all, long enough to be base64 of a file";
	char *txt = b64(words, sizeof words - 1);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ev_buf bb = EV_BUF_INIT(1 << 20); /* '@' stands for the image's base64 */
		for (const char *c = bad[i][0]; *c; c++)
			assert_int_equal(*c == '@' ? ev_buf_puts(&bb, p) : ev_buf_putc(&bb, *c), 0);
		char *body = ev_buf_detach(&bb, NULL);
		char *bf = tu_write(dir, "bad.tsv", body);
		assert_int_not_equal(ev_import_vlmevalkit(bf, bad_out, i == 6), 0);
		if (!strstr(ev_error_msg(), bad[i][1]) || !strstr(ev_error_msg(), "bad.tsv"))
			fail_msg("case %zu: %s", i, ev_error_msg());
		char *sj = tu_path(bad_out, "samples.jsonl"), *im = tu_path(bad_out, "images");
		struct stat sb;
		assert_int_not_equal(stat(sj, &sb), 0);
		assert_int_not_equal(stat(im, &sb), 0);
		free(sj), free(im), free(body), free(bf);
	}
	char *nb = ev_asprintf("index\tquestion\tanswer\timage\n1\tq\tA\t%s\n", txt);
	char *nf = tu_write(dir, "bad.tsv", nb);
	assert_int_not_equal(ev_import_vlmevalkit(nf, bad_out, false), 0);
	assert_non_null(strstr(ev_error_msg(), "not a PNG, JPEG"));
	free(nb), free(nf), free(txt);
	free(bad_out), free(dir), free(out), free(p), free(j), free(tsv), free(f);
}

static void lmms_jsonl(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("lmms"), *out = tu_path(dir, "suite"), *pics = tu_path(dir, "pics");
	assert_int_equal(ev_mkdir_p(pics), 0);
	char *png = tu_path(pics, "a.png");
	assert_int_equal(ev_file_write(png, PNG1, sizeof PNG1), 0);
	char *p = b64(PNG1, sizeof PNG1);
	char *body = ev_asprintf(
		"{\"question_id\":7,\"question\":\"Which?\",\"options\":[\"cat\",\"dog\",\"fox\",\"owl\"],\"answer\":\"fox\","
		"\"image\":\"pics/a.png\"}\n"
		"{\"id\":\"b\",\"prompt\":\"Pick\",\"choices\":{\"A\":\"up\",\"B\":\"down\"},\"answer\":1,\"images\":"
		"[\"data:image/png;base64,%s\",\"pics/a.png\"]}\n"
		"{\"id\":\"c\",\"text\":\"Say it\",\"target\":\"hello\"}\n",
		p);
	char *f = tu_write(dir, "q.jsonl", body);
	if (ev_import_lmms(f, out, true))
		fail_msg("%s", ev_error_msg());
	ev_suite *s = NULL;
	if (ev_suite_load(&s, out, NULL))
		fail_msg("%s", ev_error_msg());
	assert_int_equal(s->n_samples, 4 + 2 + 1);
	for (int r = 0; r < 4; r++) {
		char id[16], opt[32];
		snprintf(id, sizeof id, r ? "7-c%d" : "7", r);
		const ev_sample *x = find(s, id);
		option_text(x, x->targets[0][0], opt, sizeof opt);
		assert_string_equal(opt, "fox");
	}
	const ev_sample *b = find(s, "b");
	assert_string_equal(b->targets[0], "B");
	assert_int_equal(b->messages[0].n_parts, 3);
	assert_string_equal(find(s, "c")->targets[0], "hello");
	ev_suite_free(s);
	/* paths may not leave the file's folder; options need their letter keys */
	const char *bad[][2] = {
		{"{\"id\":1,\"question\":\"q\",\"answer\":\"x\",\"image\":\"../etc/passwd\"}\n", "leaves"},
		{"{\"id\":1,\"question\":\"q\",\"answer\":\"A\",\"options\":{\"B\":\"x\",\"A\":\"y\"}}\n", "keys"},
		{"{\"id\":1,\"question\":\"q\",\"answer\":\"Z\",\"options\":[\"x\",\"y\"]}\n", "letter"},
		{"{\"id\":1,\"question\":\"q\"}\n", "answer"},
	};
	char *bad_out = tu_path(dir, "bad");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *bf = tu_write(dir, "bad.jsonl", bad[i][0]);
		assert_int_not_equal(ev_import_lmms(bf, bad_out, false), 0);
		if (!strstr(ev_error_msg(), bad[i][1]) || !strstr(ev_error_msg(), "bad.jsonl:1"))
			fail_msg("case %zu: %s", i, ev_error_msg());
		free(bf);
	}
	free(bad_out), free(dir), free(out), free(pics), free(png), free(p), free(body), free(f);
}

/* two questions of three rotations: the first all right, the second with one
 * rotation wrong on one of two epochs: circular 0.5, the plain score 5/6 of
 * the samples' means */
static void circular_score_needs_every_rotation(void **st)
{
	(void)st;
	ev_run_fold f = {0};
	const char *meta[2] = {"{\"circular_group\":\"q1\"}", "{\"circular_group\":\"q2\"}"};
	for (int g = 0; g < 2; g++)
		for (int r = 0; r < 3; r++)
			for (int e = 0; e < 2; e++) {
				char id[16];
				snprintf(id, sizeof id, "q%d-c%d", g + 1, r);
				ev_result x = {.suite = "mm", .sample_id = id, .epoch = e, .reason = "", .metadata_json = meta[g]};
				x.score = (g == 1 && r == 2 && e == 1) ? 0.0 : 1.0;
				if (x.score == 0)
					x.reason = "wrong_answer";
				assert_int_equal(ev_run_fold_add(&f, &x), 0);
			}
	ev_suite_figures fig;
	assert_int_equal(ev_suite_figures_compute(&fig, ev_run_fold_find(&f, "mm"), NULL), 0);
	assert_int_equal(fig.circular_groups, 2);
	assert_true(fig.circular_score == 0.5);
	assert_true(fig.score > 0.9 && fig.score < 1.0);
	char *json = NULL;
	assert_int_equal(ev_summary_json(&json, 1, "m", &f, NULL, NULL), 0);
	assert_non_null(strstr(json, "\"circular\":{\"groups\":2,\"score\":0.5"));
	free(json);
	ev_run_fold_clear(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vlmevalkit_tsv_circular),
		cmocka_unit_test(lmms_jsonl),
		cmocka_unit_test(circular_score_needs_every_rotation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
