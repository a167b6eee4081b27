/*
 * `evald engine` end to end: mkmodel writes a checkpoint that info
 * describes, logits prints the same numbers on the fast and reference
 * paths, generate runs from token ids (and from text where the tokenizer
 * is present), and bad input fails with a message and exit status 1 or 2.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/engine/engine_testutil.h"
#ifdef EV_HAVE_CUDA
#include "engine/cuda/cuda.h"
#endif

static char *run_ok(const char *const argv[])
{
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc != 0)
		fail_msg("%s %s exited %d: %s", argv[1], argv[2], rc, err ? err : "");
	free(err);
	return out;
}

static void mkmodel_info_logits_generate(void **state)
{
	char *dir = tu_tmpdir("cli");
	char *model = tu_path(dir, "m");
	const char *ev = tu_evald();
	free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", "mixtral", "--out", model, "--layers", "2",
					   "--experts", "4", "--top-k", "2", "--vocab", "400", "--dtype", "bf16", NULL}));
	char *info = run_ok((const char *const[]){ev, "engine", "info", "--model", model, "--json", NULL});
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, info, strlen(info), "info"), 0);
	assert_string_equal(ev_json_str(j, "architecture", ""), "MixtralForCausalLM");
	assert_int_equal((int)ev_json_num(j, "vocab", 0), 400);
	assert_string_equal(ev_json_str(j, "dtypes", ""), "bf16");
	assert_non_null(strstr(ev_json_str(j, "kernels", ""), "bf16 weights: bf16 activations"));
	double total = ev_json_num(j, "params_total", 0), active = ev_json_num(j, "params_active", 0);
	/* 2 layers x 2 inactive experts x 3 x 128 x 64 */
	assert_true(total - active == 2.0 * 2 * 3 * 128 * 64);
	assert_true(ev_json_num(j, "weight_bytes", 0) == 2 * total);
	/* what a token reads: the active ones, less the untied embedding table but one row (bf16) */
	assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tied_embeddings")));
	assert_true(ev_json_num(j, "decode_weight_bytes", 0) == 2 * active - 2.0 * 399 * 64);
	/* by type: every weight bf16 here */
	const cJSON *wt = cJSON_GetObjectItemCaseSensitive(j, "weight_types");
	assert_int_equal(cJSON_GetArraySize(wt), 1);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(wt, 0), "dtype", ""), "bf16");
	assert_true(ev_json_num(cJSON_GetArrayItem(wt, 0), "bytes", 0) == 2 * total);
	assert_true(ev_json_num(cJSON_GetArrayItem(wt, 0), "elements", 0) == total);
	cJSON_Delete(j);
	free(info);
	/* --activation-bits: named in the kernels line; a value not 16 or 8 refused */
	info = run_ok((const char *const[]){ev, "engine", "info", "--model", model, "--activation-bits", "8", "--json", NULL});
	assert_non_null(strstr(info, "Q2_K .. Q6_K, IQ4_XS: 8-bit a super-block"));
	free(info);
	{
		char *o7 = NULL, *e7 = NULL;
		const char *a7[] = {ev, "engine", "info", "--model", model, "--activation-bits", "7", NULL};
		assert_int_equal(tu_run(&o7, &e7, NULL, a7), 2);
		assert_non_null(strstr(e7, "--activation-bits needs 16 or 8"));
		free(o7), free(e7);
	}

	/* the kernels' environment choices: a cap is followed, a value that is
	 * not a choice is named in a warning (not silently ignored) */
	const char *info_argv[] = {ev, "engine", "info", "--model", model, NULL};
	setenv("EVALD_CPU_KERNELS", "plain", 1);
	char *kout = NULL, *kerr = NULL;
	assert_int_equal(tu_run(&kout, &kerr, NULL, info_argv), 0);
	assert_non_null(strstr(kout, "bf16 weights: bf16 activations, plain"));
	assert_null(strstr(kerr, "warning"));
	free(kout), free(kerr);
	setenv("EVALD_CPU_KERNELS", "avx3", 1);
	setenv("EVALD_QUANT_DOT", "int8", 1);
	assert_int_equal(tu_run(&kout, &kerr, NULL, info_argv), 0);
	assert_non_null(strstr(kerr, "EVALD_CPU_KERNELS=avx3 is not one of plain, avx2, auto"));
	assert_non_null(strstr(kerr, "EVALD_QUANT_DOT=int8 is not one of f32, auto"));
	assert_non_null(strstr(kout, "bf16 weights: bf16 activations"));
	free(kout), free(kerr);
	unsetenv("EVALD_CPU_KERNELS");
	unsetenv("EVALD_QUANT_DOT");

	const char *fast[] = {ev, "engine", "logits", "--model", model, "--tokens", "1,2,3,200", "--json", NULL};
	const char *ref[] = {ev, "engine", "logits", "--model", model, "--tokens", "1,2,3,200", "--json", "--reference", NULL};
	char *a = run_ok(fast), *b = run_ok(ref);
	cJSON *ja = NULL, *jb = NULL;
	assert_int_equal(ev_json_parse(&ja, a, strlen(a), "fast"), 0);
	assert_int_equal(ev_json_parse(&jb, b, strlen(b), "ref"), 0);
	assert_int_equal(cJSON_GetArraySize(ja), 4);
	double num = 0, den = 0;
	for (int i = 0; i < 4; i++) {
		cJSON *ra = cJSON_GetArrayItem(ja, i), *rb = cJSON_GetArrayItem(jb, i);
		assert_int_equal(cJSON_GetArraySize(ra), 400);
		for (int k = 0; k < 400; k++) {
			double x = cJSON_GetArrayItem(ra, k)->valuedouble, y = cJSON_GetArrayItem(rb, k)->valuedouble;
			num += (x - y) * (x - y);
			den += y * y;
		}
	}
	/* BF16 weights: the fast path rounds activations to BF16 (engine/cpu/bfdot.h), the reference does not */
	assert_true(den > 0 && sqrt(num / den) < 1.5e-2);
	cJSON_Delete(ja), cJSON_Delete(jb);
	free(a), free(b);

	/* greedy generation from ids is deterministic and says why it stopped */
	const char *gen[] = {ev, "engine", "generate", "--model", model, "--prompt-tokens", "5,6,7", "--max-tokens", "6",
			     "--json", NULL};
	char *g1 = run_ok(gen), *g2 = run_ok(gen);
	assert_string_equal(g1, g2);
	assert_non_null(strstr(g1, "\"prompt_tokens\":3"));
	assert_true(strstr(g1, "\"finish_reason\":\"length\"") || strstr(g1, "\"finish_reason\":\"stop\""));
	free(g1), free(g2);
	char *tj = tu_path(model, "tokenizer.json");
	if (access(tj, R_OK) == 0) {
		char *t = run_ok((const char *const[]){ev, "engine", "generate", "--model", model, "--prompt", "Hello", "--chat",
						       "--max-tokens", "5", "--temperature", "0.7", "--top-p", "0.9",
						       "--seed", "1", "--json", NULL});
		assert_non_null(strstr(t, "\"text\":"));
		free(t);
	}
	free(tj);

	/* failures: a missing model, bad tokens, no arguments */
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", "info", "--model", dir, NULL});
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "config.json"));
	free(out), free(err);
	char *gone = tu_path(dir, "absent.gguf"); /* a GGUF file that is not there is named as missing */
	rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", "info", "--model", gone, NULL});
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "absent.gguf: No such file"));
	assert_null(strstr(err, "config.json"));
	free(out), free(err), free(gone);
	rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", "logits", "--model", model, "--tokens", "1,x", NULL});
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "--tokens"));
	free(out), free(err);
	rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", "logits", "--model", model, "--tokens", "400", NULL});
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "outside the vocabulary"));
	free(out), free(err);
	rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", "mkmodel", "--arch", "gpt2", "--out", model, NULL});
	assert_int_equal(rc, 1);
	free(out), free(err);
	rc = tu_run(&out, &err, NULL, (const char *const[]){ev, "engine", NULL});
	assert_int_equal(rc, 2);
	free(out), free(err);

	/* --backend: an unknown one is refused; cuda runs the model where
	 * there is a device and names why not where there is none */
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "logits", "--model", model, "--tokens", "1,2", "--backend", "tpu", NULL});
	assert_int_equal(rc, 2);
	assert_non_null(strstr(err, "--backend needs cpu or cuda"));
	free(out), free(err);
	bool device = false;
#ifdef EV_HAVE_CUDA
	eng_cuda_info ci;
	device = eng_cuda_probe(&ci) == 0;
	ev_error_clear();
#endif
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "logits", "--model", model, "--tokens", "1,2,3", "--backend", "cuda", NULL});
	if (device) {
		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "[["));
	} else {
		assert_int_equal(rc, 1);
		assert_non_null(strstr(err, "--backend cuda: "));
		assert_true(strstr(err, "no CUDA device") || strstr(err, "built without CUDA"));
		print_message("--backend cuda here: %s", err);
		free(out), free(err);
		/* evald run takes it as the engine commands do, and fails the same way */
		char *db = tu_path(dir, "run.db");
		rc = tu_run(&out, &err, NULL,
			    (const char *const[]){ev, "--db", db, "run", "--model", model, "--limit", "1", "--backend", "cuda",
						  NULL});
		assert_int_equal(rc, 1);
		assert_non_null(strstr(err, "--backend cuda: "));
		free(db);
	}
	free(out), free(err);
	free(model);
	free(dir);
}

/* Without a tokenizer, --json still answers (text null: there is no text);
 * a generation that ends on an end-of-sequence id says which one. The
 * checkpoint's EOS is set to the id greedy decoding picks first, so the
 * second generation stops at once, on it. */
static void generate_json_without_tokenizer_and_the_eos_it_stops_on(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("cli-eos");
	char *model = tu_path(dir, "m");
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	const char *mk[] = {ev, "engine", "mkmodel", "--arch", "llama", "--out", model, "--vocab", "200", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0); /* warns: no tokenizer at this vocab */
	const char *gen[] = {ev, "engine", "generate", "--model", model, "--prompt-tokens", "1,2,3", "--max-tokens", "2",
	                     "--json", NULL};
	int rc = tu_run(&out, &err, NULL, gen);
	if (rc)
		fail_msg("generate without a tokenizer: exit %d: %s", rc, err);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "generate"), 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "text")));
	assert_string_equal(ev_json_str(j, "finish_reason", ""), "length");
	assert_null(cJSON_GetObjectItem(j, "stop_token"));
	int first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tokens"), 0)->valueint;
	cJSON_Delete(j);
	free(out), free(err);

	/* that first id becomes the end of sequence */
	char *cfg = tu_path(model, "config.json"), *text = NULL;
	assert_int_equal(ev_file_read(&text, NULL, cfg, 1 << 20), 0);
	cJSON *c = cJSON_Parse(text);
	cJSON_DeleteItemFromObject(c, "eos_token_id");
	cJSON_AddNumberToObject(c, "eos_token_id", first);
	char *w = ev_json_print(c);
	free(tu_write(model, "config.json", w));
	char *gc = tu_path(model, "generation_config.json");
	unlink(gc);
	free(w), free(text), free(gc), free(cfg);
	cJSON_Delete(c);
	rc = tu_run(&out, &err, NULL, gen);
	if (rc)
		fail_msg("generate: exit %d: %s", rc, err);
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "generate"), 0);
	assert_string_equal(ev_json_str(j, "finish_reason", ""), "stop");
	assert_int_equal((int)ev_json_num(j, "stop_token", -1), first);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), 0);
	cJSON_Delete(j);
	free(out), free(err);
	free(model), free(dir);
}

/* engine tokenize: BOS exactly where the tokenizer's post-processor puts
 * it (Llama-3: first; Qwen: never, even with a bos_token_id in
 * config.json, which generate --prompt used to prepend), and Qwen's NFC
 * normalizer applied; generate --prompt encodes the same way. */
static void tokenize_puts_special_tokens_where_the_post_processor_does(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("cli-tokenize");
	char *llama = tu_path(dir, "llama"), *qwen = tu_path(dir, "qwen");
	const char *ev = tu_evald();
	free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", "llama", "--out", llama, NULL}));
	free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", "qwen2", "--out", qwen, NULL}));
	char *out = run_ok((const char *const[]){ev, "engine", "tokenize", "--model", llama, "--text", "Hi", "--json", NULL});
	cJSON *j = cJSON_Parse(out);
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "pieces"), 0)->valuestring, "<|begin_of_text|>");
	int n_llama = cJSON_GetArraySize(cJSON_GetObjectItem(j, "ids"));
	cJSON_Delete(j), free(out);
	out = run_ok((const char *const[]){ev, "engine", "tokenize", "--model", llama, "--text", "Hi", "--json",
	                                   "--no-special-tokens", NULL});
	j = cJSON_Parse(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "ids")), n_llama - 1);
	cJSON_Delete(j), free(out);
	out = run_ok((const char *const[]){ev, "engine", "generate", "--model", llama, "--prompt", "Hi", "--max-tokens",
	                                   "1", "--json", NULL});
	j = cJSON_Parse(out);
	assert_int_equal((int)ev_json_num(j, "prompt_tokens", 0), n_llama);
	cJSON_Delete(j), free(out);

	/* Qwen: a bos_token_id in config.json, and still no BOS */
	char *cfg = tu_path(qwen, "config.json"), *text = NULL;
	assert_int_equal(ev_file_read(&text, NULL, cfg, 1 << 20), 0);
	cJSON *c = cJSON_Parse(text);
	cJSON_DeleteItemFromObject(c, "bos_token_id");
	cJSON_AddNumberToObject(c, "bos_token_id", 1);
	char *w = ev_json_print(c);
	free(tu_write(qwen, "config.json", w));
	free(w), free(text), free(cfg);
	cJSON_Delete(c);
	/* "cafe" + U+0301 is NFC-composed to "café" first */
	out = run_ok((const char *const[]){ev, "engine", "tokenize", "--model", qwen, "--text", "cafe\xcc\x81", "--json", NULL});
	char *composed = run_ok((const char *const[]){ev, "engine", "tokenize", "--model", qwen, "--text", "caf\xc3\xa9",
	                                              "--json", NULL});
	assert_string_equal(out, composed);
	j = cJSON_Parse(out);
	int n_qwen = cJSON_GetArraySize(cJSON_GetObjectItem(j, "ids"));
	assert_int_not_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "ids"), 0)->valueint, 1);
	cJSON_Delete(j), free(out), free(composed);
	out = run_ok((const char *const[]){ev, "engine", "generate", "--model", qwen, "--prompt", "caf\xc3\xa9",
	                                   "--max-tokens", "1", "--json", NULL});
	j = cJSON_Parse(out);
	assert_int_equal((int)ev_json_num(j, "prompt_tokens", 0), n_qwen);
	cJSON_Delete(j), free(out);
	free(llama), free(qwen), free(dir);
}

/* The checkpoint's own chat template is what renders: engine render
 * prints it (with tools, --var and the special tokens), generate --chat
 * feeds exactly that prompt, and a template that raises is an error with
 * its message. */
static void the_checkpoints_template_renders_prompts(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("cli-render");
	char *m = tu_path(dir, "m");
	const char *ev = tu_evald();
	free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", "qwen2", "--out", m, NULL}));
	free(tu_write(m, "tokenizer_config.json",
	              "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{%- for m in messages %}[{{ m.role|upper }}]"
	              "{{ m.content|trim }}{% if m.role == 'system' and m.content == 'boom' %}{{ raise_exception('no boom') }}"
	              "{% endif %}{{ '\\n' }}{%- endfor %}{% if tools %}TOOLS={{ tools|tojson }}{{ '\\n' }}{% endif %}"
	              "{% if flag is defined %}FLAG={{ flag }}{{ '\\n' }}{% endif %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
	              "{{ eos_token }}\"}"));
	char *msgs = tu_write(dir, "m.json", "[{\"role\": \"user\", \"content\": \"  hi 1.0  \"}]");
	char *tools = tu_write(dir, "t.json", "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"x\": 1.0}}]");
	char *out = run_ok((const char *const[]){ev, "engine", "render", "--model", m, "--messages", msgs, "--tools", tools,
	                                         "--var", "flag=True", NULL});
	assert_string_equal(out, "[USER]hi 1.0\nTOOLS=[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"x\": 1.0}}]\n"
	                         "FLAG=True\n[ASSISTANT]<|im_end|>");
	free(out);
	/* generate --chat encodes that same text (without tools and flag) */
	char *want = run_ok((const char *const[]){ev, "engine", "tokenize", "--model", m, "--no-special-tokens", "--text",
	                                          "[USER]hi\n[ASSISTANT]<|im_end|>", "--json", NULL});
	cJSON *j = cJSON_Parse(want);
	int n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "ids"));
	cJSON_Delete(j), free(want);
	out = run_ok((const char *const[]){ev, "engine", "generate", "--model", m, "--chat", "--prompt", " hi ",
	                                   "--max-tokens", "1", "--json", NULL});
	j = cJSON_Parse(out);
	assert_int_equal((int)ev_json_num(j, "prompt_tokens", 0), n);
	cJSON_Delete(j), free(out);
	/* raise_exception reaches the user */
	char *boom = tu_write(dir, "b.json", "[{\"role\": \"system\", \"content\": \"boom\"}]");
	char *err = NULL;
	const char *bad[] = {ev, "engine", "render", "--model", m, "--messages", boom, NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, bad), 1);
	assert_non_null(strstr(err, "no boom"));
	free(err), free(boom), free(msgs), free(tools), free(m), free(dir);
}

/* `evald bench kernels` runs every level this CPU has on every type and
 * compares each output with the plain definition's bits; its figures are
 * not judged here (tests never time anything), its checks and shape are */
static void bench_kernels_checks_every_level_against_the_definition(void **state)
{
	(void)state;
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	const char *argv[] = {ev, "bench", "kernels", "--types", "q4_1,q6_k,bf16", "--rows", "16", "--cols", "256",
	                      "--seconds", "0.01", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "bench kernels"), 0);
	const cJSON *ks = cJSON_GetObjectItemCaseSensitive(j, "kernels");
	int n = cJSON_GetArraySize(ks), plain = 0, eight = 0, x4 = 0;
	assert_true(n >= 4); /* at least the plain level of each type (Q6_K twice) */
	for (const cJSON *k = ks->child; k; k = k->next) {
		assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(k, "same_bits")));
		assert_true(ev_json_num(k, "decode_gmacs", 0) > 0);
		/* Q4_1's and Q6_K's decode on quads laid out four rows together,
		 * where the CPU has AVX512-VNNI: decode only (BF16 has none) */
		if (!strcmp(ev_json_str(k, "layout", ""), "x4")) {
			const char *ty = ev_json_str(k, "type", "");
			assert_true(!strcmp(ty, "q4_1") || !strcmp(ty, "q6_k"));
			assert_string_equal(ev_json_str(k, "level", ""), "avx512-vnni");
			assert_null(cJSON_GetObjectItemCaseSensitive(k, "prefill_gmacs"));
			x4++;
			continue;
		}
		assert_true(ev_json_num(k, "prefill_gmacs", 0) > 0);
		/* Q6_K also against 8-bit activations (q8k.h), the others not */
		int bits = (int)ev_json_num(k, "activation_bits", 0);
		assert_true(bits == 16 || (bits == 8 && !strcmp(ev_json_str(k, "type", ""), "q6_k")));
		eight += bits == 8;
		if (!strcmp(ev_json_str(k, "level", ""), "plain")) {
			plain++;
			assert_true(ev_json_num(k, "decode_vs_plain", 0) == 1.0);
		}
	}
	assert_int_equal(plain, 4);
	assert_true(eight >= 1 && eight * 4 <= n);
	assert_true(x4 == 0 || x4 == 2);
	cJSON_Delete(j);
	free(out), free(err);
	/* a type it does not have, and a shape the K-quants cannot take */
	const char *bad[] = {ev, "bench", "kernels", "--types", "q4_1,tq2_0", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, bad), 2);
	assert_non_null(strstr(err, "'tq2_0' is not bf16 or a block type"));
	free(out), free(err);
	const char *shape[] = {ev, "bench", "kernels", "--cols", "300", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, shape), 2);
	assert_non_null(strstr(err, "--cols of 256"));
	free(out), free(err);
	const char *rows[] = {ev, "bench", "kernels", "--rows", "24", NULL}; /* prefill unpacks groups of 16 */
	assert_int_equal(tu_run(&out, &err, NULL, rows), 2);
	assert_non_null(strstr(err, "--rows must be a multiple of 16"));
	free(out), free(err);
	/* a type named again (in any case) is measured once, however often */
	const char *rep[] = {ev, "bench", "kernels", "--types", "bf16,BF16,bf16,bf16,bf16,bf16,bf16,bf16,bf16,bf16,bf16,bf16,bf16",
	                     "--rows", "16", "--cols", "256", "--seconds", "0.01", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, rep), 0);
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "bench kernels"), 0);
	for (const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kernels")->child; k; k = k->next)
		plain -= !strcmp(ev_json_str(k, "level", ""), "plain");
	assert_int_equal(plain, 3);
	cJSON_Delete(j);
	free(out), free(err);
	const char *huge[] = {ev, "bench", "kernels", "--rows", "4194304", "--cols", "65536", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, huge), 2);
	assert_non_null(strstr(err, "at most 268435456 weights"));
	free(out), free(err);
}

/* `evald bench engine`'s memory bound: with --bandwidth weights each timed
 * decode is set against the bandwidth of reading the weights just before
 * it (the share is the mean of the runs' own shares); the buffer reading
 * is the default for weights this small; a wrong value is refused. The
 * figures themselves are not judged (tests never time anything). */
static void bench_engine_sets_each_decode_against_its_own_bound(void **state)
{
	(void)state;
	const char *ev = tu_evald();
	char *dir = tu_tmpdir("cli-bench"), *model = tu_path(dir, "m"), *out = NULL, *err = NULL;
	free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", "llama", "--out", model, NULL}));
	const char *w[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "4", "--batch", "1",
	                   "--repeats", "3", "--no-reference", "--bandwidth", "weights", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, w), 0);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "bench engine"), 0);
	assert_string_equal(ev_json_str(j, "read_bandwidth_of", ""), "weights");
	const cJSON *bw = cJSON_GetObjectItemCaseSensitive(j, "read_bandwidth_runs");
	const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "decode_tok_s_runs");
	assert_int_equal(cJSON_GetArraySize(bw), 3);
	assert_int_equal(cJSON_GetArraySize(dec), 3);
	double step = ev_json_num(j, "decode_bytes_per_token", 0), mean = 0, bsum = 0;
	assert_true(step > 0);
	/* the step's bytes: the weights and the keys and values attention
	 * reads, mkmodel's default shape (2 layers, 2 KV heads of 16, f32) over
	 * contexts 9 .. 12 */
	double kv = ev_json_num(j, "decode_kv_bytes_per_token", -1);
	assert_true(fabs(kv - 2 * 2 * (2 * 16 * 4) * 10.5) < 1e-9);
	assert_true(fabs(step - ev_json_num(j, "decode_weight_bytes_per_token", 0) - kv) <= 1e-9 * step);
	/* the weights a token reads: all but the embedding table, which is not the head here (one row
	 * of its 512 rows of 64 f32) */
	assert_true(ev_json_num(j, "weight_bytes", 0) - ev_json_num(j, "decode_weight_bytes_per_token", 0) ==
	            511.0 * 64 * 4);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "decode_kv_bytes_exact")));
	assert_true(ev_json_num(j, "weight_quad_bytes", -1) == 0); /* f32: nothing laid out as quads */
	for (int r = 0; r < 3; r++) {
		double b = cJSON_GetArrayItem(bw, r)->valuedouble, d = cJSON_GetArrayItem(dec, r)->valuedouble;
		assert_true(b > 0 && d > 0);
		mean += d / (b / step) / 3, bsum += b / 3;
	}
	double share = ev_json_num(j, "decode_share_of_bound", 0);
	assert_true(fabs(share - mean) <= 1e-9 * mean);
	assert_true(fabs(ev_json_num(j, "read_bandwidth_bytes_s", 0) - bsum) <= 1e-9 * bsum);
	assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "decode_share_of_bound_sd")));
	cJSON_Delete(j);
	free(out), free(err);
	/* a checkpoint of a few hundred KiB: its weights would time the caches */
	const char *d[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "4", "--batch", "1",
	                   "--repeats", "1", "--no-reference", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, d), 0);
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "bench engine"), 0);
	assert_string_equal(ev_json_str(j, "read_bandwidth_of", ""), "buffer");
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "read_bandwidth_runs"));
	assert_true(ev_json_num(j, "read_bandwidth_bytes_s", 0) > 0);
	cJSON_Delete(j);
	free(out), free(err);
	/* with no decode timed, the text gives the bound and says so, where it
	 * had read "batch-1 decode at 0% of it" */
	const char *none[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "0", "--batch", "1",
	                      "--repeats", "1", "--no-reference", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, none), 0);
	assert_non_null(strstr(out, "memory bound: "));
	assert_non_null(strstr(out, "(no batch-1 decode was timed to set against it)"));
	assert_null(strstr(out, "decode at 0%"));
	free(out), free(err);
	const char *some[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "4", "--batch", "1",
	                      "--repeats", "1", "--no-reference", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, some), 0);
	assert_non_null(strstr(out, "; batch-1 decode at "));
	assert_non_null(strstr(out, "MiB of keys and values (the mean over 4 steps)"));
	assert_null(strstr(out, "no batch-1 decode was timed"));
	free(out), free(err);
	const char *bad[] = {ev, "bench", "engine", "--model", model, "--bandwidth", "disk", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, bad), 2);
	assert_non_null(strstr(err, "--bandwidth needs weights or buffer"));
	free(out), free(err), free(model), free(dir);
}

/* `evald bench engine --profile`: one more batch-1 run whose decode steps
 * are timed stage by stage; each of the step's stages is there (a MoE
 * layer's MLP as one), they and the rest add up to the step, and the
 * option is refused where it cannot time anything. */
static void bench_engine_profile_times_each_stage(void **state)
{
	(void)state;
	const char *ev = tu_evald();
	char *dir = tu_tmpdir("cli-prof"), *out = NULL, *err = NULL;
	const char *arch[] = {"llama", "mixtral"};
	for (int a = 0; a < 2; a++) {
		char *model = tu_path(dir, arch[a]);
		free(run_ok((const char *const[]){ev, "engine", "mkmodel", "--arch", arch[a], "--out", model, NULL}));
		const char *p[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "5", "--batch", "1",
		                   "--repeats", "1", "--no-reference", "--profile", "--json", NULL};
		assert_int_equal(tu_run(&out, &err, NULL, p), 0);
		cJSON *j = NULL;
		assert_int_equal(ev_json_parse(&j, out, strlen(out), "bench engine"), 0);
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "decode_profile");
		assert_non_null(pr);
		assert_true(ev_json_num(pr, "steps", 0) == 5); /* the decode's steps, not the prefill */
		double step = ev_json_num(pr, "step_s", 0), other = ev_json_num(pr, "other_s", -1), sum = 0;
		assert_true(step > 0 && other >= 0);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(pr, "stage_s");
		const char *dense[] = {"embed", "norms", "q,k,v", "rope", "kv store", "attention", "o", "residual",
		                       "gate,up", "swiglu", "down", "head"};
		for (size_t k = 0; k < sizeof dense / sizeof dense[0]; k++) {
			bool mlp = !strcmp(dense[k], "gate,up") || !strcmp(dense[k], "swiglu") || !strcmp(dense[k], "down");
			if (a == 1 && mlp) /* the MoE layers' MLP is one stage, with its adds */
				assert_null(cJSON_GetObjectItemCaseSensitive(st, dense[k]));
			else if (!(ev_json_num(st, dense[k], 0) > 0))
				fail_msg("%s: stage %s not timed", arch[a], dense[k]);
		}
		assert_true(a == 0 ? !cJSON_GetObjectItemCaseSensitive(st, "moe") : ev_json_num(st, "moe", 0) > 0);
		for (const cJSON *k = st->child; k; k = k->next)
			sum += k->valuedouble;
		assert_true(fabs(sum + other - step) <= 1e-9 * step);
		double share = ev_json_num(pr, "matmul_share", 0);
		assert_true(share > 0 && share < 1);
		/* and the prefill: one forward of the prompt, its stages within it */
		const cJSON *pp = cJSON_GetObjectItemCaseSensitive(j, "prefill_profile");
		assert_non_null(pp);
		assert_true(ev_json_num(pp, "steps", 0) == 1);
		double pre = ev_json_num(pp, "step_s", 0), pother = ev_json_num(pp, "other_s", -1), psum = 0;
		assert_true(pre > 0 && pother >= 0);
		const cJSON *pst = cJSON_GetObjectItemCaseSensitive(pp, "stage_s");
		assert_true(ev_json_num(pst, "attention", 0) > 0 && ev_json_num(pst, "q,k,v", 0) > 0);
		for (const cJSON *k = pst->child; k; k = k->next)
			psum += k->valuedouble;
		assert_true(fabs(psum + pother - pre) <= 1e-9 * pre);
		cJSON_Delete(j);
		free(out), free(err);
		const char *t[] = {ev, "bench", "engine", "--model", model, "--prompt", "8", "--decode", "3", "--batch", "1",
		                   "--repeats", "1", "--no-reference", "--profile", NULL};
		assert_int_equal(tu_run(&out, &err, NULL, t), 0);
		assert_non_null(strstr(out, "prefill by stage (one more batch-1 run: 8 tokens at "));
		assert_non_null(strstr(out, "decode step by stage (its 3 steps at "));
		assert_non_null(strstr(out, "attention "));
		assert_non_null(strstr(out, "other "));
		free(out), free(err);
		const char *zero[] = {ev, "bench", "engine", "--model", model, "--decode", "0", "--profile", NULL};
		assert_int_equal(tu_run(&out, &err, NULL, zero), 1);
		assert_non_null(strstr(err, "--profile times the fast CPU path's decode steps: it needs --decode of at least 1"));
		free(out), free(err);
		const char *ref[] = {ev, "bench", "engine", "--model", model, "--reference-only", "--profile", NULL};
		assert_int_equal(tu_run(&out, &err, NULL, ref), 1);
		assert_non_null(strstr(err, "not with --reference-only"));
		free(out), free(err), free(model);
	}
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mkmodel_info_logits_generate),
		cmocka_unit_test(bench_engine_profile_times_each_stage),
		cmocka_unit_test(bench_kernels_checks_every_level_against_the_definition),
		cmocka_unit_test(bench_engine_sets_each_decode_against_its_own_bound),
		cmocka_unit_test(generate_json_without_tokenizer_and_the_eos_it_stops_on),
		cmocka_unit_test(tokenize_puts_special_tokens_where_the_post_processor_does),
		cmocka_unit_test(the_checkpoints_template_renders_prompts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
