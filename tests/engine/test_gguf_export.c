/* A checkpoint folder written as a GGUF file (evald engine gguf FOLDER
 * --out FILE.gguf): the file loads with the folder's logits bit for bit
 * from its stored weights; q and k rows go in llama.cpp's order; the
 * Q4_K_M mix puts llama.cpp's rows in Q6_K; what GGUF cannot say is
 * refused by name with nothing written; and SmolLM2's own file, read into
 * its folder and written again, comes back tensor for tensor and token
 * for token (skipped without the file). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/engine_testutil.h"

static char *small_llama(const char *tag)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 256, z.intermediate = 512, z.vocab = 512, z.heads = 4, z.kv_heads = 2, z.layers = 9;
	return et_mkmodel(tag, "llama", &z, "f32", 31);
}

/* evald's output for argv; fails the test on a non-zero exit */
static char *run_ok(const char *const argv[])
{
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc)
		fail_msg("evald %s %s: exit %d: %s", argv[1], argv[2], rc, err);
	free(err);
	return out;
}

static void cli_writes_a_folder_as_gguf(void **st)
{
	(void)st;
	char *dir = small_llama("export"), *work = tu_tmpdir("exportw"), *cache = tu_tmpdir("exportc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *f32 = tu_path(work, "m.gguf"), *q4 = tu_path(work, "m-q4km.gguf");
	const char *ev = tu_evald();
	const char *a1[] = {ev, "engine", "gguf", dir, "--out", f32, "--json", NULL};
	char *js = run_ok(a1);
	cJSON *j = cJSON_Parse(js);
	assert_non_null(j);
	assert_string_equal(ev_json_str(j, "architecture", ""), "llama");
	assert_string_equal(ev_json_str(j, "pre_tokenizer", ""), "llama-bpe");
	assert_string_equal(ev_json_str(j, "type", ""), "as stored");
	assert_int_equal((int)ev_json_num(j, "converted", -1), 0); /* f32 weights and norms: nothing converted */
	cJSON_Delete(j), free(js);

	/* the same logits as the folder, bit for bit, through the command users run */
	const char *l1[] = {ev, "engine", "logits", "--model", dir, "--tokens", "3,1,4,1,5,9,2,6", NULL};
	const char *l2[] = {ev, "engine", "logits", "--model", f32, "--tokens", "3,1,4,1,5,9,2,6", NULL};
	char *o1 = run_ok(l1), *o2 = run_ok(l2);
	assert_true(strlen(o1) > 1000);
	assert_string_equal(o1, o2);
	free(o1), free(o2);

	/* q and k rows in llama.cpp's order: GGUF row 2i + j of a head is HF row j * hd / 2 + i */
	eng_gguf *g = NULL;
	assert_int_equal(eng_gguf_open(&g, f32), 0);
	eng_tensor_set ts;
	memset(&ts, 0, sizeof ts);
	assert_int_equal(eng_st_open(&ts, dir), 0);
	const char *pairs[][3] = {{"blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight", "4"},
	                          {"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight", "2"},
	                          {"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight", "0"}};
	for (int p = 0; p < 3; p++) {
		const eng_gguf_tensor *gt = eng_gguf_find_tensor(g, pairs[p][0]);
		const eng_tensor *ht = eng_st_find(&ts, pairs[p][1]);
		assert_non_null(gt), assert_non_null(ht);
		assert_int_equal(gt->type, ENG_GGML_F32);
		int rows = (int)ht->shape[0], cols = (int)ht->shape[1], heads = atoi(pairs[p][2]), hd = heads ? rows / heads : 0;
		for (int r = 0; r < rows; r++) {
			int from = heads ? r / hd * hd + (r % hd % 2) * (hd / 2) + r % hd / 2 : r;
			if (memcmp(gt->data + (size_t)r * cols * 4, (const char *)ht->data + (size_t)from * cols * 4, (size_t)cols * 4))
				fail_msg("%s row %d is not %s row %d", pairs[p][0], r, pairs[p][1], from);
		}
	}
	eng_st_close(&ts);
	eng_gguf_close(g);

	/* Q4_K_M: the output matrix, and attn_v and ffn_down of layers 0, 3, 6, 7, 8 of 9, in Q6_K */
	const char *a2[] = {ev, "engine", "gguf", dir, "--out", q4, "--quantize", "Q4_K_M", NULL};
	free(run_ok(a2));
	assert_int_equal(eng_gguf_open(&g, q4), 0);
	uint64_t ft = 0;
	assert_int_equal(eng_gguf_get_u64(g, "general.file_type", &ft), 0);
	assert_int_equal(ft, 15);
	int q6 = 0;
	for (size_t i = 0; i < g->n_t; i++) {
		const eng_gguf_tensor *t = &g->t[i];
		char nm[96];
		snprintf(nm, sizeof nm, "%.*s", (int)t->name.n, t->name.p);
		int l = -1;
		sscanf(nm, "blk.%d.", &l);
		bool more = l == 0 || l == 3 || l == 6 || l == 7 || l == 8;
		uint32_t want = t->ndim == 1 ? ENG_GGML_F32
		                : !strcmp(nm, "output.weight") || (more && (strstr(nm, "attn_v") || strstr(nm, "ffn_down")))
		                        ? ENG_GGML_Q6_K
		                        : ENG_GGML_Q4_K;
		if (t->type != want)
			fail_msg("%s is %s, not %s", nm, eng_ggml_type_name(t->type), eng_ggml_type_name(want));
		q6 += t->type == ENG_GGML_Q6_K;
	}
	assert_int_equal(q6, 11);
	eng_gguf_close(g);
	/* it runs, near the folder */
	eng_model *mf = et_load(dir, ENG_BACKEND_CPU, 0);
	char *conv = NULL;
	assert_int_equal(eng_model_path_resolve(q4, &conv), 0);
	eng_model *mq = et_load(conv, ENG_BACKEND_CPU, 0);
	int32_t toks[24];
	for (int i = 0; i < 24; i++)
		toks[i] = (int32_t)((i * 41 + 5) % 500);
	float *lf = et_logits(mf, toks, 24, 0), *lq = et_logits(mq, toks, 24, 0);
	double e = et_rel_err(lq, lf, 24 * 512);
	print_message("folder written as Q4_K_M: logits vs the folder %.2e\n", e);
	assert_true(e > 0 && e < 0.5);
	free(lf), free(lq), free(conv);
	eng_model_free(mf), eng_model_free(mq);
	free(f32), free(q4), free(dir), free(work), free(cache);
}

/* a file of the folder rewritten with `edit` applied to its text (JSON) */
static void edit_json(const char *dir, const char *file, const char *from, const char *to)
{
	char *p = tu_path(dir, file), *t = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&t, &len, p, 64 << 20), 0);
	char *at = strstr(t, from);
	if (!at)
		fail_msg("%s: no '%s'", file, from);
	char *n = ev_asprintf("%.*s%s%s", (int)(at - t), t, to, at + strlen(from));
	assert_int_equal(ev_file_write(p, n, strlen(n)), 0);
	free(n), free(t), free(p);
}

/* model.safetensors with one more tensor, `name`, of four F32 values */
static void add_tensor(const char *dir, const char *name)
{
	char *p = tu_path(dir, "model.safetensors"), *t = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&t, &len, p, 1 << 30), 0);
	uint64_t hl;
	memcpy(&hl, t, 8);
	cJSON *h = cJSON_ParseWithLength(t + 8, (size_t)hl);
	assert_non_null(h);
	size_t data = len - 8 - (size_t)hl;
	char *extra = ev_asprintf("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[%zu,%zu]}", data, data + 16);
	cJSON_AddItemToObject(h, name, cJSON_Parse(extra));
	char *nh = cJSON_PrintUnformatted(h);
	uint64_t nl = strlen(nh);
	ev_buf b = EV_BUF_INIT((size_t)1 << 31);
	static const float four[4] = {1, 2, 3, 4};
	assert_int_equal(ev_buf_append(&b, &nl, 8), 0);
	assert_int_equal(ev_buf_append(&b, nh, nl), 0);
	assert_int_equal(ev_buf_append(&b, t + 8 + hl, data), 0);
	assert_int_equal(ev_buf_append(&b, four, 16), 0);
	assert_int_equal(ev_file_write(p, b.data, b.len), 0);
	ev_buf_free(&b);
	free(nh), free(extra), free(t), free(p);
	cJSON_Delete(h);
}

static void refusals_name_what_gguf_cannot_say(void **st)
{
	(void)st;
	const char *ev = tu_evald();
	char *work = tu_tmpdir("exportbad");
	struct {
		const char *what, *arch, *file, *from, *to, *expect, *type;
	} cases[] = {
		{"MiniMax-M3", "minimax_m3", NULL, NULL, NULL, "has no GGUF architecture", NULL},
		{"a sliding window", "mistral", "config.json", "\"sliding_window\":null", "\"sliding_window\":4096",
		 "sliding_window 4096", NULL},
		{"byte fallback without SentencePiece's spaces", "llama", "tokenizer.json", "\"byte_fallback\": false",
		 "\"byte_fallback\": true", "not U+2581", NULL},
		{"another pre-tokenizer", "llama", "tokenizer.json", "\\\\p{N}{1,3}", "\\\\p{N}{1,2}", "pre_tokenizer", NULL},
		{"a normalizer", "llama", "tokenizer.json", "\"normalizer\": null", "\"normalizer\": {\"type\": \"Lowercase\"}",
		 "normalizer 'Lowercase'", NULL},
		{"a token past the vocabulary", "llama", "tokenizer.json", "\"\xc4\x81\": 1,", "\"\xc4\x81\": 600,", "has id 600", NULL},
		{"no tokenizer", "llama", "tokenizer.json", NULL, NULL, "tokenizer.json", NULL},
		{"a tensor without a GGUF name", "llama", "model.safetensors", NULL, NULL, "model.layers.0.mystery.weight", NULL},
		{"an unknown type", "llama", NULL, NULL, NULL, "TQ2_0", "TQ2_0"},
		{"an embedding that is not vocab_size rows", "llama", "config.json", "\"vocab_size\":512", "\"vocab_size\":600",
		 "is not 600 rows of 64", NULL},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		char *dir = et_mkmodel("exportcase", cases[c].arch, &z, "f32", 7), *out = tu_path(work, "x.gguf");
		if (cases[c].from)
			edit_json(dir, cases[c].file, cases[c].from, cases[c].to);
		else if (cases[c].file && !strcmp(cases[c].file, "tokenizer.json")) {
			char *p = tu_path(dir, "tokenizer.json");
			assert_int_equal(unlink(p), 0);
			free(p);
		} else if (cases[c].file)
			add_tensor(dir, "model.layers.0.mystery.weight");
		const char *argv[] = {ev, "engine", "gguf", dir, "--out", out, cases[c].type ? "--quantize" : NULL, cases[c].type,
		                      NULL};
		char *o = NULL, *err = NULL;
		int rc = tu_run(&o, &err, NULL, argv);
		print_message("%s: exit %d: %s", cases[c].what, rc, err);
		assert_int_equal(rc, 1);
		if (!strstr(err, cases[c].expect))
			fail_msg("%s: the error does not name '%s': %s", cases[c].what, cases[c].expect, err);
		assert_int_not_equal(access(out, F_OK), 0); /* nothing written */
		free(o), free(err), free(out), free(dir);
	}
	/* a folder takes --out, and not --tensor */
	char *dir = small_llama("exportusage");
	const char *u1[] = {ev, "engine", "gguf", dir, NULL}, *u2[] = {ev, "engine", "gguf", dir, "--tensor", "x", "--out", "y", NULL};
	char *o = NULL, *err = NULL;
	assert_int_equal(tu_run(&o, &err, NULL, u1), 2);
	assert_non_null(strstr(err, "--out"));
	free(o), free(err);
	assert_int_equal(tu_run(&o, &err, NULL, u2), 2);
	free(o), free(err), free(dir), free(work);
}

/* Llama 3's tokenizer takes a word that is a whole token whole, merges or
 * not (ignore_merges; llama.cpp does so for "llama-bpe"): a token the
 * merges cannot reach ("zqzq") comes back as one id through the GGUF
 * file, as the folder gives it. A GPT-2-style folder's file names its
 * pre-tokenizer as llama.cpp spells it ("gpt-2"). */
static void llama3_words_whole_through_gguf(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("exportim", "llama", &z, "f32", 3), *work = tu_tmpdir("exportimw"),
	     *cache = tu_tmpdir("exportimc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	/* the last merge's token renamed, that merge dropped: nothing else changes */
	edit_json(dir, "tokenizer.json", "\"ct\": 506", "\"zqzq\": 506");
	edit_json(dir, "tokenizer.json", "[\"b\", \"le\"],\n[\"c\", \"t\"]", "[\"b\", \"le\"]");
	char *out = tu_path(work, "im.gguf"), *conv = NULL;
	eng_gguf_export_opts o = {.type = NULL};
	eng_gguf_export_stats es;
	if (eng_gguf_export(dir, out, &o, &es))
		fail_msg("%s", ev_error_msg());
	assert_string_equal(es.pre, "llama-bpe");
	assert_int_equal(eng_model_path_resolve(out, &conv), 0);
	const char *texts[] = {"zqzq", "a zqzq b", "zq zqzqzq"};
	eng_tokenizer *ta = NULL, *tb = NULL;
	assert_int_equal(eng_tokenizer_load(&ta, dir), 0);
	assert_int_equal(eng_tokenizer_load(&tb, conv), 0);
	for (size_t t = 0; t < 3; t++) {
		int32_t *ia = NULL, *ib = NULL;
		size_t na = 0, nb = 0;
		assert_int_equal(eng_tokenize(ta, texts[t], strlen(texts[t]), false, &ia, &na), 0);
		assert_int_equal(eng_tokenize(tb, texts[t], strlen(texts[t]), false, &ib, &nb), 0);
		if (t == 0 && !(na == 1 && ia[0] == 506))
			fail_msg("the folder's tokenizer gives %zu ids for 'zqzq', the first %d", na, na ? ia[0] : -1);
		if (na != nb || memcmp(ia, ib, na * sizeof *ia))
			fail_msg("'%s': %zu ids from the folder, %zu through GGUF", texts[t], na, nb);
		free(ia), free(ib);
	}
	eng_tokenizer_free(ta), eng_tokenizer_free(tb);
	free(out), free(conv), free(dir), free(work), free(cache);

	z = (eng_mkmodel_sizes)ENG_MKMODEL_SIZES_INIT;
	dir = et_mkmodel("exportq2", "qwen2", &z, "f32", 3), work = tu_tmpdir("exportq2w");
	out = tu_path(work, "q2.gguf");
	if (eng_gguf_export(dir, out, &o, &es))
		fail_msg("%s", ev_error_msg());
	assert_string_equal(es.pre, "gpt-2");
	eng_gguf *g = NULL;
	char *pre = NULL;
	assert_int_equal(eng_gguf_open(&g, out), 0);
	assert_int_equal(eng_gguf_get_str(g, "tokenizer.ggml.pre", &pre), 0);
	assert_string_equal(pre, "gpt-2");
	free(pre);
	eng_gguf_close(g);
	free(out), free(dir), free(work);
}

/* fills tensor i with the byte i + 1, and fails on the third */
static int fill_test(void *ctx, size_t i, void *buf, size_t bytes)
{
	(void)ctx;
	if (i == 2)
		return ev_error_set(EV_E_IO, "the third tensor cannot be made");
	memset(buf, (int)i + 1, bytes);
	return 0;
}

/* The writer's tensors made as the file is written: in order, at their
 * entries' offsets, between tensors given at once; a fill that fails
 * leaves neither the file nor its temp file */
static void tensors_made_as_the_file_is_written(void **st)
{
	(void)st;
	char *work = tu_tmpdir("gguflater"), *ok = tu_path(work, "ok.gguf"), *bad = tu_path(work, "bad.gguf");
	for (int fail = 0; fail < 2; fail++) {
		eng_gguf_writer *w = NULL;
		assert_int_equal(eng_gguf_writer_new(&w), 0);
		assert_int_equal(eng_gguf_put_str(w, "general.architecture", "llama"), 0);
		uint64_t d1[1] = {40}, d2[1] = {7};
		static const float given[7] = {1, 2, 3, 4, 5, 6, 7};
		assert_int_equal(eng_gguf_put_tensor_later(w, "a", ENG_GGML_F32, d1, 1, 160), 0);
		assert_int_equal(eng_gguf_put_tensor(w, "b", ENG_GGML_F32, d2, 1, given, sizeof given), 0);
		assert_int_equal(eng_gguf_put_tensor_later(w, "c", ENG_GGML_F32, d2, 1, 28), 0);
		if (fail)
			assert_int_equal(eng_gguf_put_tensor_later(w, "d", ENG_GGML_F32, d2, 1, 28), 0);
		int rc = eng_gguf_write_with(w, fail ? bad : ok, fill_test, NULL);
		eng_gguf_writer_free(w);
		if (fail) {
			assert_int_not_equal(rc, 0);
			assert_non_null(strstr(ev_error_msg(), "third tensor"));
			assert_int_not_equal(access(bad, F_OK), 0);
			char *o = NULL, *e = NULL;
			assert_int_equal(tu_sh(&o, &e, "ls -A '%s'", work), 0);
			assert_string_equal(o, "ok.gguf\n"); /* no temp file left */
			free(o), free(e);
			continue;
		}
		assert_int_equal(rc, 0);
		eng_gguf *g = NULL;
		assert_int_equal(eng_gguf_open(&g, ok), 0);
		const eng_gguf_tensor *a = eng_gguf_find_tensor(g, "a"), *b = eng_gguf_find_tensor(g, "b"),
		                      *c = eng_gguf_find_tensor(g, "c");
		assert_non_null(a), assert_non_null(b), assert_non_null(c);
		for (int k = 0; k < 160; k++)
			assert_int_equal(a->data[k], 1);
		assert_memory_equal(b->data, given, sizeof given);
		for (int k = 0; k < 28; k++)
			assert_int_equal(c->data[k], 2);
		eng_gguf_close(g);
	}
	free(ok), free(bad), free(work);
}

/* a metadata value's bytes in the file */
static bool same_value(const eng_gguf *a, const eng_gguf *b, const char *key)
{
	const eng_gguf_value *x = eng_gguf_find_key(a, key), *y = eng_gguf_find_key(b, key);
	if (!x || !y)
		return !x && !y;
	return x->type == y->type && x->raw_len == y->raw_len && !memcmp(x->raw, y->raw, x->raw_len);
}

/* Every tensor of file a in file b as a has it (type, dims, bytes) and the
 * keys listed value for value */
static void same_tensors_and_keys(const char *pa, const char *pb, const char *const *keys, size_t nkeys)
{
	eng_gguf *a = NULL, *b = NULL;
	assert_int_equal(eng_gguf_open(&a, pa), 0);
	assert_int_equal(eng_gguf_open(&b, pb), 0);
	assert_int_equal(a->n_t, b->n_t);
	for (size_t i = 0; i < a->n_t; i++) {
		const eng_gguf_tensor *x = &a->t[i];
		char nm[96];
		snprintf(nm, sizeof nm, "%.*s", (int)x->name.n, x->name.p);
		const eng_gguf_tensor *y = eng_gguf_find_tensor(b, nm);
		if (!y || y->type != x->type || y->ndim != x->ndim || y->bytes != x->bytes ||
		    memcmp(y->dims, x->dims, (size_t)x->ndim * sizeof x->dims[0]) || memcmp(y->data, x->data, x->bytes))
			fail_msg("%s: %s does not come back as the file has it", pb, nm);
	}
	for (size_t k = 0; k < nkeys; k++)
		if (!same_value(a, b, keys[k]))
			fail_msg("%s: %s does not come back as the file has it", pb, keys[k]);
	eng_gguf_close(a), eng_gguf_close(b);
}

/* A file read into its folder (the engine's --model FILE.gguf) and written
 * again as stored is the file: the block types' bytes copied, not
 * quantized twice; q and k back in llama.cpp's order; stacked experts */
static void files_come_back_through_their_folders(void **st)
{
	(void)st;
	char *work = tu_tmpdir("exportrt"), *cache = tu_tmpdir("exportrtc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	const char *keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
	                      "tokenizer.ggml.token_type", "tokenizer.ggml.eos_token_id", "tokenizer.chat_template",
	                      "general.architecture"};
	struct {
		const char *arch, *type;
	} cases[] = {{"llama", "Q4_K_M"}, {"qwen3_moe", "Q4_K"}, {"mixtral", "Q5_1"}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.hidden = 256, z.intermediate = 512, z.vocab = 512, z.heads = 4, z.kv_heads = 2, z.layers = 3;
		char *dir = et_mkmodel("exportrtm", cases[c].arch, &z, "f32", 11), *one = tu_path(work, "one.gguf"),
		     *two = tu_path(work, "two.gguf"), *conv = NULL;
		eng_gguf_export_opts o = {.type = cases[c].type};
		eng_gguf_export_stats es, es2;
		if (eng_gguf_export(dir, one, &o, &es))
			fail_msg("%s: %s", cases[c].arch, ev_error_msg());
		assert_int_equal(eng_model_path_resolve(one, &conv), 0);
		eng_gguf_export_opts as = {.type = NULL};
		if (eng_gguf_export(conv, two, &as, &es2))
			fail_msg("%s again: %s", cases[c].arch, ev_error_msg());
		assert_int_equal(es2.quantized, 0);
		same_tensors_and_keys(one, two, keys, sizeof keys / sizeof keys[0]);
		print_message("%s as %s: %zu tensors, through its folder and back byte for byte\n", cases[c].arch,
		              cases[c].type, es.tensors);
		free(one), free(two), free(conv), free(dir);
	}
	free(work), free(cache);
}

static void smollm2_file_comes_back(void **st)
{
	(void)st;
	const char *file = getenv("EVALD_SMOLLM2_GGUF");
	if (!file || access(file, R_OK)) {
		print_message("skipped: no SmolLM2 GGUF file (scripts/setup.sh fetches it)\n");
		skip();
	}
	char *cache = tu_tmpdir("smolexportc"), *work = tu_tmpdir("smolexport"), *dir = NULL;
	setenv("EVALD_CACHE_DIR", cache, 1);
	assert_int_equal(eng_model_path_resolve(file, &dir), 0);
	char *out = tu_path(work, "again.gguf");
	eng_gguf_export_opts o = {.type = NULL};
	eng_gguf_export_stats es;
	if (eng_gguf_export(dir, out, &o, &es))
		fail_msg("%s: %s", dir, ev_error_msg());
	/* every tensor as the file has it (q and k back in llama.cpp's order), the tokenizer, template and shape */
	const char *keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
	                      "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
	                      "tokenizer.chat_template", "llama.block_count", "llama.embedding_length",
	                      "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
	                      "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon", "llama.context_length"};
	same_tensors_and_keys(file, out, keys, sizeof keys / sizeof keys[0]);
	print_message("SmolLM2 written again from its folder: %zu tensors, %.1f MiB, pre-tokenizer %s\n", es.tensors,
	              es.bytes_out / 1048576.0, es.pre);
	free(out), free(dir), free(work), free(cache);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cli_writes_a_folder_as_gguf),
		cmocka_unit_test(refusals_name_what_gguf_cannot_say),
		cmocka_unit_test(llama3_words_whole_through_gguf),
		cmocka_unit_test(tensors_made_as_the_file_is_written),
		cmocka_unit_test(files_come_back_through_their_folders),
		cmocka_unit_test(smollm2_file_comes_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
