/*
 * Loading hostile or broken checkpoints: every defect gives a clear error
 * naming the file and the tensor or field, never a crash. The broken files
 * are derived from a good random checkpoint by rewriting its header.
 */
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

typedef struct {
	char *dir;
	char *st;      /* model.safetensors path */
	char *file;    /* its bytes */
	size_t len;
	uint64_t hlen;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.layers = 1;
	f->dir = et_mkmodel("load", "qwen2", &z, "f32", 1);
	f->st = tu_path(f->dir, "model.safetensors");
	assert_int_equal(ev_file_read(&f->file, &f->len, f->st, 64 << 20), 0);
	for (int i = 7; i >= 0; i--)
		f->hlen = f->hlen << 8 | (unsigned char)f->file[i];
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	free(f->dir), free(f->st), free(f->file), free(f);
	return 0;
}

/* Writes model.safetensors with `header` JSON and the original data. */
static void write_with_header(fixture *f, const char *header)
{
	size_t hl = strlen(header), dl = f->len - 8 - f->hlen;
	char *buf = malloc(8 + hl + dl);
	for (int i = 0; i < 8; i++)
		buf[i] = (char)((uint64_t)hl >> (8 * i));
	memcpy(buf + 8, header, hl);
	memcpy(buf + 8 + hl, f->file + 8 + f->hlen, dl);
	assert_int_equal(ev_file_write(f->st, buf, 8 + hl + dl), 0);
	free(buf);
}

static cJSON *header(fixture *f)
{
	cJSON *h = NULL;
	assert_int_equal(ev_json_parse(&h, f->file + 8, f->hlen, "header"), 0);
	return h;
}

static void write_json_header(fixture *f, cJSON *h)
{
	char *s = ev_json_print(h);
	write_with_header(f, s);
	free(s);
	cJSON_Delete(h);
}

static void restore(fixture *f)
{
	assert_int_equal(ev_file_write(f->st, f->file, f->len), 0);
}

/* Loads, expects failure with `code` and every `needle` in the message. */
static void expect_error(fixture *f, int code, const char *n1, const char *n2)
{
	eng_model *m = NULL;
	int rc = eng_model_load(&m, f->dir, NULL);
	const char *msg = ev_error_msg();
	print_message("  -> %s\n", msg);
	assert_null(m);
	assert_int_equal(rc, code);
	if (n1)
		assert_non_null(strstr(msg, n1));
	if (n2)
		assert_non_null(strstr(msg, n2));
	restore(f);
}

static void good_checkpoint_loads(void **state)
{
	fixture *f = *state;
	eng_model *m = NULL;
	assert_int_equal(eng_model_load(&m, f->dir, NULL), 0);
	eng_model_free(m);
}

static void truncated_file_is_refused(void **state)
{
	fixture *f = *state;
	assert_int_equal(truncate(f->st, (off_t)(f->len / 2)), 0);
	expect_error(f, EV_E_INVALID, "model.safetensors", "past the end of the data");
	assert_int_equal(truncate(f->st, 5), 0);
	expect_error(f, EV_E_PARSE, "model.safetensors", "too short");
}

static void header_length_past_eof_is_refused(void **state)
{
	fixture *f = *state;
	char *b = malloc(f->len);
	memcpy(b, f->file, f->len);
	uint64_t big = f->len; /* header claims the whole file and more */
	for (int i = 0; i < 8; i++)
		b[i] = (char)(big >> (8 * i));
	assert_int_equal(ev_file_write(f->st, b, f->len), 0);
	expect_error(f, EV_E_PARSE, "model.safetensors", "past the end of the file");
	big = UINT64_MAX;
	for (int i = 0; i < 8; i++)
		b[i] = (char)(big >> (8 * i));
	assert_int_equal(ev_file_write(f->st, b, f->len), 0);
	expect_error(f, EV_E_LIMIT, "model.safetensors", "over the limit");
	/* a header that is not JSON */
	memcpy(b + 8, "{\"x\":", 5);
	for (int i = 0; i < 8; i++)
		b[i] = (char)(f->hlen >> (8 * i));
	assert_int_equal(ev_file_write(f->st, b, f->len), 0);
	expect_error(f, EV_E_PARSE, "model.safetensors", "JSON");
	free(b);
}

static void overlapping_offsets_are_refused(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON *a = cJSON_GetObjectItem(h, "model.norm.weight"); /* move it onto the embedding */
	cJSON *off = cJSON_GetObjectItem(a, "data_offsets");
	double len = cJSON_GetArrayItem(off, 1)->valuedouble - cJSON_GetArrayItem(off, 0)->valuedouble;
	cJSON_ReplaceItemInArray(off, 0, cJSON_CreateNumber(4));
	cJSON_ReplaceItemInArray(off, 1, cJSON_CreateNumber(4 + len));
	write_json_header(f, h);
	expect_error(f, EV_E_INVALID, "overlap", "model.norm.weight");
}

static void dtype_shape_mismatch_is_refused(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON *a = cJSON_GetObjectItem(h, "model.norm.weight");
	cJSON_ReplaceItemInObject(a, "dtype", cJSON_CreateString("BF16"));
	write_json_header(f, h);
	expect_error(f, EV_E_INVALID, "model.norm.weight", "BF16 need");
	h = header(f);
	a = cJSON_GetObjectItem(h, "model.norm.weight");
	cJSON_ReplaceItemInObject(a, "dtype", cJSON_CreateString("I8"));
	write_json_header(f, h);
	expect_error(f, EV_E_UNSUPPORTED, "model.norm.weight", "I8");
}

static void duplicate_tensor_is_refused(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON *a = cJSON_GetObjectItem(h, "model.norm.weight");
	cJSON *dup = cJSON_Duplicate(a, 1);
	cJSON *off = cJSON_GetObjectItem(dup, "data_offsets");
	/* an empty slice at the very end: no overlap, only the name repeats */
	double end = (double)(f->len - 8 - f->hlen);
	cJSON_ReplaceItemInArray(off, 0, cJSON_CreateNumber(end));
	cJSON_ReplaceItemInArray(off, 1, cJSON_CreateNumber(end));
	cJSON_ReplaceItemInObject(dup, "shape", cJSON_CreateIntArray((int[]){0}, 1));
	cJSON_AddItemToObject(h, "model.norm.weight", dup); /* cJSON keeps both keys */
	write_json_header(f, h);
	expect_error(f, EV_E_INVALID, "model.norm.weight", "twice");
}

/* The same name twice with the same (overlapping) slice: the error says the
 * name repeats, not that two tensors overlap. */
static void duplicate_name_with_the_same_slice_is_named_as_a_duplicate(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON *dup = cJSON_Duplicate(cJSON_GetObjectItem(h, "model.norm.weight"), 1);
	cJSON_AddItemToObject(h, "model.norm.weight", dup);
	write_json_header(f, h);
	expect_error(f, EV_E_INVALID, "model.norm.weight", "twice");
}

static void missing_tensor_is_named(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON_DeleteItemFromObject(h, "model.layers.0.self_attn.k_proj.bias");
	cJSON_DeleteItemFromObject(h, "model.layers.0.mlp.up_proj.weight");
	write_json_header(f, h);
	expect_error(f, EV_E_NOTFOUND, "model.layers.0.self_attn.k_proj.bias", "model.layers.0.mlp.up_proj.weight");
}

static void shape_mismatch_names_both_shapes(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	cJSON *a = cJSON_GetObjectItem(h, "model.layers.0.self_attn.o_proj.weight");
	cJSON *sh = cJSON_GetObjectItem(a, "shape"); /* [64, 64] -> [32, 128] */
	cJSON_ReplaceItemInArray(sh, 0, cJSON_CreateNumber(32));
	cJSON_ReplaceItemInArray(sh, 1, cJSON_CreateNumber(128));
	write_json_header(f, h);
	expect_error(f, EV_E_INVALID, "o_proj.weight' has shape [32, 128]", "implies [64, 64]");
}

static void unknown_architecture_lists_supported(void **state)
{
	fixture *f = *state;
	char *cfg = tu_path(f->dir, "config.json"), *text = NULL;
	size_t len;
	assert_int_equal(ev_file_read(&text, &len, cfg, 1 << 20), 0);
	char *p = strstr(text, "Qwen2ForCausalLM");
	memcpy(p, "GPTXXForCausalLM", 16);
	assert_int_equal(ev_file_write(cfg, text, len), 0);
	expect_error(f, EV_E_UNSUPPORTED, "GPTXXForCausalLM", "Qwen3MoeForCausalLM");
	memcpy(p, "Qwen2ForCausalLM", 16);
	/* a bad size in the config names the field */
	char *q = strstr(text, "\"num_key_value_heads\":2");
	assert_non_null(q);
	q[22] = '3';
	assert_int_equal(ev_file_write(cfg, text, len), 0);
	expect_error(f, EV_E_INVALID, "config.json", "num_key_value_heads 3");
	q[22] = '2';
	assert_int_equal(ev_file_write(cfg, text, len), 0);
	free(text);
	free(cfg);
}

/* Shards: the index's file names must stay in the folder; a good split
 * loads and gives the single file's logits. */
static void shards_load_and_escape_is_refused(void **state)
{
	fixture *f = *state;
	cJSON *h = header(f);
	/* shard 1: the embedding only; shard 2: everything else */
	cJSON *h1 = cJSON_CreateObject(), *h2 = cJSON_CreateObject(), *wm = cJSON_CreateObject();
	ev_buf d1 = EV_BUF_INIT(64 << 20), d2 = EV_BUF_INIT(64 << 20);
	const char *base = f->file + 8 + f->hlen;
	for (cJSON *e = h->child; e; e = e->next) {
		if (!strcmp(e->string, "__metadata__"))
			continue;
		cJSON *off = cJSON_GetObjectItem(e, "data_offsets");
		size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, en = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
		bool first = !strcmp(e->string, "model.embed_tokens.weight");
		ev_buf *d = first ? &d1 : &d2;
		cJSON *c = cJSON_Duplicate(e, 1);
		cJSON *no = cJSON_GetObjectItem(c, "data_offsets");
		cJSON_ReplaceItemInArray(no, 0, cJSON_CreateNumber((double)d->len));
		cJSON_ReplaceItemInArray(no, 1, cJSON_CreateNumber((double)(d->len + en - b)));
		assert_int_equal(ev_buf_append(d, base + b, en - b), 0);
		cJSON_AddItemToObject(first ? h1 : h2, e->string, c);
		cJSON_AddStringToObject(wm, e->string, first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors");
	}
	for (int k = 0; k < 2; k++) {
		char *s = ev_json_print(k ? h2 : h1);
		ev_buf *d = k ? &d2 : &d1;
		ev_buf out = EV_BUF_INIT(64 << 20);
		size_t hl = strlen(s);
		for (int i = 0; i < 8; i++)
			ev_buf_putc(&out, (char)((uint64_t)hl >> (8 * i)));
		ev_buf_append(&out, s, hl);
		ev_buf_append(&out, d->data, d->len);
		char *p = ev_asprintf("%s/model-0000%d-of-00002.safetensors", f->dir, k + 1);
		assert_int_equal(ev_file_write(p, out.data, out.len), 0);
		free(p), free(s);
		ev_buf_free(&out);
	}
	cJSON *idx = cJSON_CreateObject();
	cJSON_AddItemToObject(idx, "weight_map", wm);
	char *is = ev_json_print(idx);
	char *ip = tu_path(f->dir, "model.safetensors.index.json");
	assert_int_equal(ev_file_write(ip, is, strlen(is)), 0);

	/* the single file as the oracle, then the shards alone */
	eng_model *m1 = NULL, *m2 = NULL;
	assert_int_equal(eng_model_load(&m1, f->dir, NULL), 0);
	assert_int_equal(unlink(f->st), 0);
	assert_int_equal(eng_model_load(&m2, f->dir, NULL), 0);
	int32_t t[4] = {1, 50, 7, 299};
	float *a = et_logits(m1, t, 4, 0), *b = et_logits(m2, t, 4, 0);
	assert_true(et_rel_err(a, b, 4 * 300) == 0);
	free(a), free(b);
	eng_model_free(m1);
	eng_model_free(m2);

	/* an index naming a file outside the folder */
	char *bad = ev_asprintf("{\"weight_map\":{\"model.norm.weight\":\"../model-00001-of-00002.safetensors\"}}");
	assert_int_equal(ev_file_write(ip, bad, strlen(bad)), 0);
	eng_model *m = NULL;
	assert_int_equal(eng_model_load(&m, f->dir, NULL), EV_E_UNSAFE);
	assert_non_null(strstr(ev_error_msg(), "model.norm.weight"));
	/* an index whose tensor is not in the shard it names */
	free(bad);
	bad = ev_asprintf("{\"weight_map\":{\"model.norm.weight\":\"model-00001-of-00002.safetensors\"}}");
	assert_int_equal(ev_file_write(ip, bad, strlen(bad)), 0);
	assert_int_equal(eng_model_load(&m, f->dir, NULL), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "not in shard"));
	assert_null(m);
	unlink(ip);
	restore(f);
	free(bad), free(ip), free(is);
	cJSON_Delete(idx);
	cJSON_Delete(h1), cJSON_Delete(h2), cJSON_Delete(h);
	ev_buf_free(&d1), ev_buf_free(&d2);
}

/* Random byte changes in the header and its length: each load either
 * fails with a message or gives a model that runs; never a crash (this is
 * what the sanitizer build checks). */
static void mutated_headers_never_crash(void **state)
{
	fixture *f = *state;
	ev_rng r;
	ev_rng_seed(&r, 77);
	char *b = malloc(f->len);
	int loaded = 0, refused = 0;
	for (int it = 0; it < 300; it++) {
		memcpy(b, f->file, f->len);
		int nmut = 1 + (int)ev_rng_below(&r, 4);
		for (int k = 0; k < nmut; k++) {
			size_t at = (size_t)ev_rng_below(&r, 8 + f->hlen);
			const char pool[] = "0123456789[]{},:\"\\ -.eE\x00\xff";
			b[at] = ev_rng_below(&r, 2) ? pool[ev_rng_below(&r, sizeof(pool) - 1)] : (char)ev_rng_below(&r, 256);
		}
		assert_int_equal(ev_file_write(f->st, b, f->len), 0);
		eng_model *m = NULL;
		if (eng_model_load(&m, f->dir, NULL) == 0) {
			int32_t t[2] = {1, 2};
			eng_seq *s = NULL;
			assert_int_equal(eng_seq_new(&s, m), 0);
			assert_int_equal(eng_forward(s, t, 2, NULL), 0);
			eng_seq_free(s);
			eng_model_free(m);
			loaded++;
		} else {
			assert_true(strlen(ev_error_msg()) > 10);
			refused++;
		}
	}
	print_message("mutations: %d loaded, %d refused\n", loaded, refused);
	assert_true(refused > 0);
	restore(f);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_checkpoint_loads),
		cmocka_unit_test(duplicate_name_with_the_same_slice_is_named_as_a_duplicate),
		cmocka_unit_test(truncated_file_is_refused),
		cmocka_unit_test(header_length_past_eof_is_refused),
		cmocka_unit_test(overlapping_offsets_are_refused),
		cmocka_unit_test(dtype_shape_mismatch_is_refused),
		cmocka_unit_test(duplicate_tensor_is_refused),
		cmocka_unit_test(missing_tensor_is_named),
		cmocka_unit_test(shape_mismatch_names_both_shapes),
		cmocka_unit_test(unknown_architecture_lists_supported),
		cmocka_unit_test(shards_load_and_escape_is_refused),
		cmocka_unit_test(mutated_headers_never_crash),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
