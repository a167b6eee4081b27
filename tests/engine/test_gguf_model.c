/* GGUF checkpoints in the engine: a random Hugging Face folder written as a
 * GGUF file the way llama.cpp's converter writes one (q/k rows reordered
 * for llama, the tokenizer as tokenizer.ggml.* arrays) loads through
 * --model FILE.gguf with the folder's logits: bit for bit from F32
 * tensors, within the rounding or quantization error from every other type
 * (argmax mostly equal from F16, BF16 and Q8_0), each type kept in memory
 * as stored giving exactly the logits of its values converted to F32; the
 * tokenizer gives the folder's ids; unknown
 * architectures and tokenizers are refused by name. */
#include "testutil.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/backend.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/engine_testutil.h"

/* A SentencePiece vocabulary written instead of the folder's tokenizer (the
 * SentencePiece test sets it). */
typedef struct {
	char **pieces;
	float *scores;
	int32_t *types;
	int n;
	bool space_prefix;
} spm_vocab;
static const spm_vocab *spm_override;

/* A SentencePiece vocabulary's keys (spm_override), in place of the
 * folder's byte-level BPE */
static int put_spm(eng_gguf_writer *w, void *ctx)
{
	const spm_vocab *v = ctx;
	assert_int_equal(eng_gguf_put_str(w, "tokenizer.ggml.model", "llama"), 0);
	assert_int_equal(eng_gguf_put_strs(w, "tokenizer.ggml.tokens", (const char *const *)v->pieces, (size_t)v->n), 0);
	assert_int_equal(eng_gguf_put_f32s(w, "tokenizer.ggml.scores", v->scores, (size_t)v->n), 0);
	assert_int_equal(eng_gguf_put_i32s(w, "tokenizer.ggml.token_type", v->types, (size_t)v->n), 0);
	assert_int_equal(eng_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", v->space_prefix), 0);
	assert_int_equal(eng_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", true), 0);
	assert_int_equal(eng_gguf_put_u32(w, "tokenizer.ggml.bos_token_id", 1), 0);
	assert_int_equal(eng_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", 2), 0);
	return 0;
}

/* The folder as llama.cpp's converter would write it (eng_gguf_export,
 * its architecture `arch`): weights of `qtype`, norms and biases F32;
 * Mixtral's experts one tensor each, as older llama.cpp files hold them
 * (Qwen's stacked). */
static char *write_gguf(const char *dir, const char *arch, uint32_t qtype, const char *name)
{
	eng_gguf_export_opts o = {.type = eng_ggml_type_name(qtype), .experts_apart = true};
	if (spm_override)
		o.tokenizer = put_spm, o.tokenizer_ctx = (void *)spm_override;
	char *out = ev_asprintf("%s/%s.gguf", dir, name);
	eng_gguf_export_stats st;
	if (eng_gguf_export(dir, out, &o, &st))
		fail_msg("%s: %s", out, ev_error_msg());
	assert_string_equal(st.arch, arch);
	return out;
}

/* few: the MoE forms, through F32, BF16, Q8_0 and Q4_K only (the kernels
 * are the dense ones; what is new there is the experts' layout) */
static void same_model_as_the_folder(const char *arch, const char *hf_arch, bool few)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 256, z.intermediate = 512, z.vocab = 512, z.heads = 4, z.kv_heads = 2; /* rows of whole K-quant blocks */
	char *dir = et_mkmodel(arch, hf_arch, &z, "f32", 21);
	/* Llama 3.1-style RoPE scaling travels as a rope_freqs tensor in GGUF, whose
	 * factors the engine divides by as llama.cpp does: transformers' formula
	 * within rounding (llama3_rope_freqs_as_factors checks it); plain RoPE here */
	char *cp = ev_asprintf("%s/config.json", dir), *ct = NULL;
	size_t cl = 0;
	assert_int_equal(ev_file_read(&ct, &cl, cp, 1 << 20), 0);
	char *rs = strstr(ct, "\"rope_scaling\":{");
	if (rs) {
		char *end = strchr(rs, '}');
		memmove(rs, end + 2, strlen(end + 2) + 1); /* the object and its comma */
		assert_int_equal(ev_file_write(cp, ct, strlen(ct)), 0);
	}
	free(cp), free(ct);
	char *cache = tu_tmpdir("ggufcache");
	setenv("EVALD_CACHE_DIR", cache, 1);
	const uint32_t types[] = {ENG_GGML_F32,  ENG_GGML_F16,  ENG_GGML_BF16, ENG_GGML_Q8_0, ENG_GGML_Q4_0, ENG_GGML_Q4_1,
	                          ENG_GGML_Q5_0, ENG_GGML_Q5_1, ENG_GGML_IQ4_NL, ENG_GGML_Q3_K, ENG_GGML_Q4_K,
	                          ENG_GGML_Q5_K, ENG_GGML_Q6_K, ENG_GGML_IQ4_XS, ENG_GGML_Q2_K, ENG_GGML_IQ3_XXS, ENG_GGML_IQ3_S,
	                          ENG_GGML_IQ1_S, ENG_GGML_IQ1_M, ENG_GGML_IQ2_XXS, ENG_GGML_IQ2_XS, ENG_GGML_IQ2_S};
	enum { NTYPES = sizeof types / sizeof types[0] };
	enum { N = 40 };
	int32_t toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = (int32_t)((i * 53 + 7) % 500);
	eng_model *ref = et_load(dir, ENG_BACKEND_CPU, 0);
	float *want = et_logits(ref, toks, N, 0);
	for (int k = 0; k < NTYPES; k++) {
		if (few && types[k] != ENG_GGML_F32 && types[k] != ENG_GGML_BF16 && types[k] != ENG_GGML_Q8_0 &&
		    types[k] != ENG_GGML_Q4_K && types[k] != ENG_GGML_Q5_1)
			continue;
		char nm[32];
		snprintf(nm, sizeof nm, "m-%s", eng_ggml_type_name(types[k]));
		char *g = write_gguf(dir, arch, types[k], nm), *conv = NULL;
		if (eng_model_path_resolve(g, &conv))
			fail_msg("%s: %s", g, ev_error_msg());
		/* every converted tensor is the folder's, through the type's blocks */
		eng_tensor_set sa, sb;
		memset(&sa, 0, sizeof sa), memset(&sb, 0, sizeof sb);
		assert_int_equal(eng_st_open(&sa, dir), 0);
		assert_int_equal(eng_st_open(&sb, conv), 0);
		assert_int_equal(sa.nt, sb.nt);
		for (int t = 0; t < sa.nt; t++) {
			const eng_tensor *x = &sa.t[t], *y = eng_st_find(&sb, x->name);
			assert_non_null(y);
			size_t n = x->nbytes / eng_dtype_size(x->dtype);
			float *f = malloc(n * 4), *g2 = malloc(n * 4), *h = malloc(n * 4);
			void *qb = malloc(n * 4 + 256);
			eng_to_f32(f, x->data, x->dtype, n);
			int blk = eng_ggml_type_block(types[k]);
			if (x->ndim == 2 && x->shape[1] % blk == 0 && !strstr(x->name, "shared_expert_gate")) {
				eng_ggml_quantize(qb, f, types[k], n);
				eng_ggml_dequantize(f, qb, types[k], n);
			}
			eng_to_f32(h, y->data, y->dtype, n);
			if (memcmp(f, h, n * 4))
				fail_msg("%s %s: the converted tensor is not the folder's through %s blocks", arch, x->name,
				         eng_ggml_type_name(types[k]));
			free(f), free(g2), free(h), free(qb);
		}
		eng_st_close(&sa), eng_st_close(&sb);
		eng_model *m = et_load(conv, ENG_BACKEND_CPU, 0);
		float *got = et_logits(m, toks, N, 0);
		size_t V = (size_t)z.vocab;
		double e = et_rel_err(got, want, N * V);
		int agree = 0;
		for (int i = 0; i < N; i++) {
			int a = 0, b = 0;
			for (size_t v = 1; v < V; v++) {
				a = got[i * V + v] > got[i * V + (size_t)a] ? (int)v : a;
				b = want[i * V + v] > want[i * V + (size_t)b] ? (int)v : b;
			}
			agree += a == b;
		}
		print_message("%s %s GGUF: logits vs the folder %.2e, argmax %d/%d\n", arch, eng_ggml_type_name(types[k]), e,
		              agree, N);
		if (types[k] == ENG_GGML_F32)
			assert_memory_equal(got, want, N * V * sizeof(float));
		else
			/* Q8_0: 1.5e-2 to 1.6e-2 for the dense and renormalizing forms; 3.0e-2
			 * for Qwen2-MoE (no renormalization, a shared expert twice an
			 * expert's width) */
			assert_true(types[k] == ENG_GGML_F16 || types[k] == ENG_GGML_BF16 || types[k] == ENG_GGML_Q8_0
			                    ? e < (few ? 0.04 : 0.03) && agree >= N * 3 / 4
			                    : e < (types[k] == ENG_GGML_IQ1_S || types[k] == ENG_GGML_IQ1_M ? 1.5
			                           : types[k] >= ENG_GGML_IQ2_XXS && types[k] <= ENG_GGML_IQ2_XS ? 1.5
			                           : types[k] == ENG_GGML_IQ2_S ? 1.5
			                           : types[k] == ENG_GGML_Q2_K || types[k] == ENG_GGML_IQ3_XXS ? 1.2
			                           : types[k] == ENG_GGML_Q3_K || types[k] == ENG_GGML_IQ3_S ? 0.8
			                                                                                       : 0.5));
		/* (Q3_K: 0.51-0.54; IQ3_S 0.55-0.58 and IQ3_XXS 0.72-0.77 through evald's
		 * plain grid search; Q2_K, 2 bits a weight: 0.94-0.97; IQ1_S and IQ1_M,
		 * under 2 bits on a random model: 1.2-1.3, no likeness left; the tensors
		 * equal the folder's through the type's blocks above, and the kernels
		 * equal the type's F32 conversion below) */
		/* the tokenizer from the metadata gives the folder's ids */
		if (k == 0) {
			eng_tokenizer *ta = NULL, *tb = NULL;
			assert_int_equal(eng_tokenizer_load(&ta, dir), 0);
			assert_int_equal(eng_tokenizer_load(&tb, conv), 0);
			const char *texts[] = {"Hello, world! 12345", "  two  spaces\tand\nlines <|im_end|>", "caf\xc3\xa9 \xe6\x97\xa5"};
			for (size_t t = 0; t < 3; t++) {
				int32_t *ia = NULL, *ib = NULL;
				size_t na = 0, nb = 0;
				assert_int_equal(eng_tokenize_with_specials(ta, texts[t], strlen(texts[t]), &ia, &na), 0);
				assert_int_equal(eng_tokenize_with_specials(tb, texts[t], strlen(texts[t]), &ib, &nb), 0);
				assert_int_equal(na, nb);
				assert_memory_equal(ia, ib, na * sizeof *ia);
				free(ia), free(ib);
			}
			eng_tokenizer_free(ta), eng_tokenizer_free(tb);
		}
		/* every type kept in memory as stored: the logits of the same values
		 * converted to F32 (EVALD_GGUF_DEQUANTIZE=1), bit for bit: F16 and
		 * BF16 exactly, blocks exactly their dequantized values */
		if (types[k] != ENG_GGML_F32) {
			char *f32dir = NULL;
			setenv("EVALD_GGUF_DEQUANTIZE", "1", 1);
			assert_int_equal(eng_model_path_resolve(g, &f32dir), 0);
			unsetenv("EVALD_GGUF_DEQUANTIZE");
			assert_string_not_equal(f32dir, conv);
			eng_model *mf = et_load(f32dir, ENG_BACKEND_CPU, 0);
			float *gf = et_logits(mf, toks, N, 0), *g1 = et_logits(m, toks, N, 1);
			assert_memory_equal(g1, got, N * V * sizeof(float)); /* token by token = at once */
			if (eng_ggml_type_block(types[k]) > 1 || types[k] == ENG_GGML_BF16) {
				/* blocks: the integer path (16-bit activations), BF16: the BF16
				 * path (activations rounded to BF16), each within its rounding;
				 * the f32 kernels (EVALD_QUANT_DOT=f32) exactly */
				double eq = et_rel_err(got, gf, N * V);
				print_message("%s %s kept, %s path: logits vs its F32 conversion %.2e\n", arch,
				              eng_ggml_type_name(types[k]), types[k] == ENG_GGML_BF16 ? "BF16" : "integer", eq);
				assert_true(eq < (types[k] == ENG_GGML_BF16 ? 1.5e-2 : 2e-3));
				setenv("EVALD_QUANT_DOT", "f32", 1);
				eng_model *mk = et_load(conv, ENG_BACKEND_CPU, 0);
				unsetenv("EVALD_QUANT_DOT");
				float *gk = et_logits(mk, toks, N, 0), *gk1 = et_logits(mk, toks, N, 1);
				assert_memory_equal(gf, gk, N * V * sizeof(float));
				assert_memory_equal(gk1, gk, N * V * sizeof(float));
				free(gk), free(gk1);
				eng_model_free(mk);
				if (types[k] == ENG_GGML_Q4_K || types[k] == ENG_GGML_Q5_K || types[k] == ENG_GGML_Q6_K ||
				    types[k] == ENG_GGML_IQ4_XS || types[k] == ENG_GGML_Q3_K || types[k] == ENG_GGML_Q2_K) {
					/* --activation-bits 8 (cpu/q8k.h): every matrix here is whole
					 * super-blocks; within 8-bit rounding of the F32 conversion,
					 * other bits than the 16-bit path's, token by token = at once */
					eng_model_options o8 = ENG_MODEL_OPTIONS_INIT;
					o8.threads = 2, o8.activation_bits = 8;
					eng_model *m8 = NULL;
					if (eng_model_load(&m8, conv, &o8))
						fail_msg("load %s: %s", conv, ev_error_msg());
					float *g8 = et_logits(m8, toks, N, 0), *g81 = et_logits(m8, toks, N, 1);
					assert_memory_equal(g81, g8, N * V * sizeof(float));
					double e8 = et_rel_err(g8, gf, N * V);
					print_message("%s %s kept, 8-bit activations: logits vs its F32 conversion %.2e\n", arch,
					              eng_ggml_type_name(types[k]), e8);
					/* measured: 2.5e-2 on the dense forms (7e-5 with 16 bits:
					 * the step is 256 times coarser); 4.8e-2 and 1.3e-1 on the
					 * MoE forms, where it changes some routing choices */
					assert_true(e8 < (few ? 0.25 : 0.04));
					assert_true(memcmp(g8, got, N * V * sizeof(float)) != 0);
					eng_model_info i8;
					eng_model_get_info(m8, &i8);
					assert_int_equal(i8.activation_bits, 8);
					free(g8), free(g81);
					eng_model_free(m8);
				}
			} else {
				assert_memory_equal(gf, got, N * V * sizeof(float));
			}
			eng_model_info mi, fi;
			eng_model_get_info(m, &mi), eng_model_get_info(mf, &fi);
			/* Q4_0 .. Q5_1, Q4_K, Q5_K where the CPU decodes them with
			 * AVX512-VNNI: the matrices laid out as quads of four rows
			 * (engine/cpu/layout.c; the embedding table with them, its
			 * tokens' rows taken out of their quads), the logits those of
			 * the rows as stored (EVALD_WEIGHT_LAYOUT=rows), at once and
			 * token by token */
			int et = eng_dtype_from_ggml(types[k]);
			if (et >= 0 && eng_qx4_type(et)) {
				uint64_t emb = eng_dtype_bytes((eng_dtype)et, (size_t)z.vocab * (size_t)z.hidden);
				if (eng_qdot_level() == 2)
					assert_true(mi.quad_bytes > emb && mi.quad_bytes <= mi.weight_bytes);
				else
					assert_true(mi.quad_bytes == 0);
				setenv("EVALD_WEIGHT_LAYOUT", "rows", 1);
				eng_model *mr = et_load(conv, ENG_BACKEND_CPU, 0);
				unsetenv("EVALD_WEIGHT_LAYOUT");
				eng_model_info ri;
				eng_model_get_info(mr, &ri);
				assert_true(ri.quad_bytes == 0);
				float *gr = et_logits(mr, toks, N, 0), *gr1 = et_logits(mr, toks, N, 1);
				assert_memory_equal(gr, got, N * V * sizeof(float));
				assert_memory_equal(gr1, g1, N * V * sizeof(float));
				print_message("%s %s kept: %.2f MiB as quads of four rows; the logits of the rows as stored\n", arch,
				              eng_ggml_type_name(types[k]), mi.quad_bytes / 1048576.0);
				free(gr), free(gr1);
				eng_model_free(mr);
			}
			print_message("%s %s kept: %.2f MiB of weights against %.2f MiB dequantized; the same logits\n", arch,
			              eng_ggml_type_name(types[k]), mi.weight_bytes / 1048576.0, fi.weight_bytes / 1048576.0);
			/* by type: the kept type holds the most bytes, the norms stay f32,
			 * and the types add up to the whole */
			uint64_t sum = 0, elems = 0;
			for (int i = 0; i < mi.n_weight_types; i++)
				sum += mi.weight_types[i].bytes, elems += mi.weight_types[i].elems;
			assert_true(sum == mi.weight_bytes);
			assert_true(elems == fi.params_total);
			char lower[16];
			/* (the grid types IQ3_XXS, IQ3_S, IQ1_S, IQ1_M are kept as Q6_K, value for value) */
			uint32_t kept = eng_ggml_grid_type(types[k]) ? ENG_GGML_Q6_K : types[k];
			snprintf(lower, sizeof lower, "%s", eng_ggml_type_name(kept));
			for (char *c = lower; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			assert_string_equal(mi.weight_types[0].dtype, lower);
			if (types[k] != ENG_GGML_F32)
				assert_string_equal(mi.weight_types[mi.n_weight_types - 1].dtype, "f32");
			if (eng_ggml_type_block(types[k]) > 1)
				assert_true(mi.weight_bytes * 3 < fi.weight_bytes);
			else
				assert_true(mi.weight_bytes * 3 < fi.weight_bytes * 2);
			free(gf), free(g1), free(f32dir);
			eng_model_free(mf);
		}
		/* converted once: a second resolve finds the folder */
		char *again = NULL;
		assert_int_equal(eng_model_path_resolve(g, &again), 0);
		assert_string_equal(again, conv);
		free(again);
		free(got), free(g), free(conv);
		eng_model_free(m);
	}
	free(want);
	eng_model_free(ref);
	free(dir), free(cache);
}

static void llama_gguf_equals_folder(void **st)
{
	(void)st;
	same_model_as_the_folder("llama", "llama", false);
}

/* Mixtral: a llama file with experts, one tensor an expert */
static void mixtral_gguf_equals_folder(void **st)
{
	(void)st;
	same_model_as_the_folder("llama", "mixtral", true);
}

/* Qwen3-MoE: experts stacked in 3-D tensors, layer 0 dense (no router) */
/* Qwen2-MoE: Qwen3-MoE's stacked experts, a sigmoid-gated shared expert
 * whose gate llama.cpp writes as a vector, q/k/v biases */
static void qwen2moe_gguf_equals_folder(void **st)
{
	(void)st;
	same_model_as_the_folder("qwen2moe", "qwen2_moe", true);
}

static void qwen3moe_gguf_equals_folder(void **st)
{
	(void)st;
	same_model_as_the_folder("qwen3moe", "qwen3_moe", true);
}

static void qwen2_gguf_equals_folder(void **st)
{
	(void)st;
	same_model_as_the_folder("qwen2", "qwen2", false);
}

static void unknown_architectures_and_tokenizers_refused(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("ggufbadm"), *cache = tu_tmpdir("ggufbadc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	const char *cases[][3] = {{"gemma", "gpt2", "architecture 'gemma'"}, {"llama", "bert", "'bert': only 'gpt2'"}};
	for (int i = 0; i < 2; i++) {
		eng_gguf_writer *w = NULL;
		assert_int_equal(eng_gguf_writer_new(&w), 0);
		assert_int_equal(eng_gguf_put_str(w, "general.architecture", cases[i][0]), 0);
		assert_int_equal(eng_gguf_put_str(w, "tokenizer.ggml.model", cases[i][1]), 0);
		char *p = ev_asprintf("%s/bad%d.gguf", dir, i), *out = NULL;
		assert_int_equal(eng_gguf_write(w, p), 0);
		eng_gguf_writer_free(w);
		assert_int_not_equal(eng_model_path_resolve(p, &out), 0);
		if (!strstr(ev_error_msg(), cases[i][2]))
			fail_msg("%s", ev_error_msg());
		assert_null(out);
		free(p);
	}
	free(dir), free(cache);
}

/* Llama 3.1-style RoPE scaling (rope_scaling llama3 in the folder, a
 * rope_freqs tensor in the file): the file's logits match the folder's
 * within float rounding (the factor divides where transformers' formula
 * blends; here they came out equal), far closer than the same file
 * without the tensor. */
static void llama3_rope_freqs_as_factors(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 256, z.intermediate = 256, z.vocab = 512, z.heads = 4, z.kv_heads = 2, z.layers = 2;
	char *dir = et_mkmodel("ropefreqs", "llama", &z, "f32", 8), *cache = tu_tmpdir("ropecache");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *with = write_gguf(dir, "llama", ENG_GGML_F32, "with"), *cw = NULL;
	/* the same weights without the scaling: no rope_freqs tensor */
	char *cp = ev_asprintf("%s/config.json", dir), *ct = NULL;
	size_t cl = 0;
	assert_int_equal(ev_file_read(&ct, &cl, cp, 1 << 20), 0);
	char *orig = ev_strdup(ct), *rs = strstr(ct, "\"rope_scaling\":{");
	assert_non_null(rs);
	memmove(rs, strchr(rs, '}') + 2, strlen(strchr(rs, '}') + 2) + 1);
	assert_int_equal(ev_file_write(cp, ct, strlen(ct)), 0);
	char *without = write_gguf(dir, "llama", ENG_GGML_F32, "without"), *cwo = NULL;
	assert_int_equal(ev_file_write(cp, orig, strlen(orig)), 0);
	if (eng_model_path_resolve(with, &cw) || eng_model_path_resolve(without, &cwo))
		fail_msg("%s", ev_error_msg());
	enum { N = 300 };
	int32_t toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = (int32_t)((i * 71 + 5) % 500);
	eng_model *mf = et_load(dir, ENG_BACKEND_CPU, 0), *mw = et_load(cw, ENG_BACKEND_CPU, 0),
	          *mo = et_load(cwo, ENG_BACKEND_CPU, 0);
	float *lf = et_logits(mf, toks, N, 0), *lw = et_logits(mw, toks, N, 0), *lo = et_logits(mo, toks, N, 0);
	double ew = et_rel_err(lw, lf, (size_t)N * 512), eo = et_rel_err(lo, lf, (size_t)N * 512);
	print_message("llama3 RoPE scaling over %d positions: with rope_freqs %.2e, without %.2e\n", N, ew, eo);
	assert_true(ew < 1e-4);
	assert_true(eo > 100 * ew);
	free(lf), free(lw), free(lo);
	eng_model_free(mf), eng_model_free(mw), eng_model_free(mo);
	free(with), free(without), free(cw), free(cwo), free(cp), free(ct), free(orig), free(dir), free(cache);
}

/* ---- SentencePiece vocabularies ------------------------------------------ */

#define MSP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* The id of a normal piece, or -1 (a linear scan: the oracle stays plain). */
static int spm_find(const spm_vocab *v, const char *p, size_t n)
{
	for (int i = 0; i < v->n; i++)
		if (v->types[i] == 1 && strlen(v->pieces[i]) == n && !memcmp(v->pieces[i], p, n))
			return i;
	return -1;
}

/* SentencePiece's BPE written plainly (the oracle): spaces as the
 * metaspace (one put first), characters as the first symbols, then again
 * and again the adjacent pair whose join is a piece with the highest
 * score (the leftmost of equals) joined; symbols that are not pieces as
 * their bytes' <0xXX> pieces. */
static size_t spm_oracle(const spm_vocab *v, const char *text, int32_t *out)
{
	char norm[1024] = "";
	size_t nl = 0;
	if (v->space_prefix)
		memcpy(norm, MSP, 3), nl = 3;
	for (const char *c = text; *c; c++)
		if (*c == ' ')
			memcpy(norm + nl, MSP, 3), nl += 3;
		else
			norm[nl++] = *c;
	size_t start[1024], len[1024], ns = 0;
	for (size_t i = 0; i < nl;) {
		size_t l = 1;
		while (i + l < nl && ((unsigned char)norm[i + l] & 0xC0) == 0x80)
			l++;
		start[ns] = i, len[ns++] = l;
		i += l;
	}
	for (;;) {
		int best = -1;
		float bs = 0;
		for (size_t i = 0; i + 1 < ns; i++) {
			int id = spm_find(v, norm + start[i], len[i] + len[i + 1]);
			if (id >= 0 && (best < 0 || v->scores[id] > bs))
				best = (int)i, bs = v->scores[id];
		}
		if (best < 0)
			break;
		len[best] += len[best + 1];
		memmove(start + best + 1, start + best + 2, (ns - (size_t)best - 2) * sizeof *start);
		memmove(len + best + 1, len + best + 2, (ns - (size_t)best - 2) * sizeof *len);
		ns--;
	}
	size_t n = 0;
	for (size_t i = 0; i < ns; i++) {
		int id = spm_find(v, norm + start[i], len[i]);
		if (id >= 0) {
			out[n++] = id;
			continue;
		}
		for (size_t k = 0; k < len[i]; k++) /* <0xXX> pieces are ids 3 + byte */
			out[n++] = 3 + (unsigned char)norm[start[i] + k];
	}
	return n;
}

/* A Llama-style SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte
 * pieces, single characters, then pieces trained as BPE trains them (the
 * most frequent adjacent pair of a corpus joined, again and again) with
 * scores in a random order, padded with unused pieces to `size`. */
static spm_vocab *spm_make(int size, uint64_t seed, bool space_prefix)
{
	spm_vocab *v = calloc(1, sizeof *v);
	v->pieces = calloc((size_t)size, sizeof(char *));
	v->scores = calloc((size_t)size, sizeof(float));
	v->types = calloc((size_t)size, sizeof(int32_t));
	v->space_prefix = space_prefix;
	const char *special[3] = {"<unk>", "<s>", "</s>"};
	for (int i = 0; i < 3; i++)
		v->pieces[v->n] = ev_strdup(special[i]), v->types[v->n++] = i ? 3 : 2;
	for (int b = 0; b < 256; b++)
		v->pieces[v->n] = ev_asprintf("<0x%02X>", b), v->types[v->n++] = 6;
	const char *chars[] = {MSP, "a", "b", "c", "d", "e", "\xc3\xa9", "\xe6\x97\xa5"}; /* é, 日 */
	for (size_t i = 0; i < sizeof chars / sizeof chars[0]; i++)
		v->pieces[v->n] = ev_strdup(chars[i]), v->scores[v->n] = -1000.0f - (float)i, v->types[v->n++] = 1;
	/* the corpus: words of the alphabet (z and 本 outside it), symbols as piece ids */
	ev_rng r;
	ev_rng_seed(&r, seed);
	enum { WORDS = 300, MAXL = 12 };
	int w[WORDS][MAXL + 1], wl[WORDS];
	for (int i = 0; i < WORDS; i++) {
		wl[i] = 1 + (int)ev_rng_below(&r, MAXL);
		w[i][0] = 259; /* the metaspace */
		for (int k = 1; k <= wl[i]; k++)
			w[i][k] = 260 + (int)ev_rng_below(&r, 1 + ev_rng_below(&r, 7)); /* skewed to early letters */
		wl[i]++;
	}
	int trained = 0;
	while (v->n < size - 20) {
		int bl = -1, br = -1, bc = 0;
		for (int i = 0; i < WORDS; i++)
			for (int k = 0; k + 1 < wl[i]; k++) {
				int c = 0;
				for (int j = 0; j < WORDS; j++)
					for (int q = 0; q + 1 < wl[j]; q++)
						c += w[j][q] == w[i][k] && w[j][q + 1] == w[i][k + 1];
				if (c > bc)
					bl = w[i][k], br = w[i][k + 1], bc = c;
			}
		if (bc < 2)
			break;
		int id = v->n++;
		v->pieces[id] = ev_asprintf("%s%s", v->pieces[bl], v->pieces[br]);
		v->types[id] = 1;
		trained++;
		for (int i = 0; i < WORDS; i++)
			for (int k = 0; k + 1 < wl[i]; k++)
				if (w[i][k] == bl && w[i][k + 1] == br) {
					w[i][k] = id;
					memmove(&w[i][k + 1], &w[i][k + 2], (size_t)(wl[i] - k - 2) * sizeof(int));
					wl[i]--;
				}
	}
	/* distinct scores in a random order: which pair joins first is the scores' choice, not the training's */
	for (int i = 267; i < v->n; i++)
		v->scores[i] = -(float)(i - 266);
	for (int i = v->n - 1; i > 267; i--) {
		int j = 267 + (int)ev_rng_below(&r, (uint64_t)(i - 266));
		float t = v->scores[i];
		v->scores[i] = v->scores[j], v->scores[j] = t;
	}
	while (v->n < size)
		v->pieces[v->n] = ev_asprintf("<unused%d>", v->n), v->scores[v->n] = 0, v->types[v->n++] = 5;
	print_message("SentencePiece vocabulary: %d trained pieces, %d in all\n", trained, v->n);
	return v;
}

static void spm_free(spm_vocab *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->pieces[i]);
	free(v->pieces), free(v->scores), free(v->types), free(v);
}

/* The folder made of a SentencePiece GGUF file, written as GGUF again
 * (eng_gguf_export): the same pieces and types (unused ones as normal),
 * the flag for the space
 * put first, scores in the order v's had for every piece a merge makes,
 * and the folder made of that file tokenizing as tok does. */
static void spm_comes_back(const char *conv, const spm_vocab *v, const eng_tokenizer *tok)
{
	char *work = tu_tmpdir("spmback"), *out = tu_path(work, "again.gguf"), *conv2 = NULL;
	eng_gguf_export_opts o = {.type = NULL};
	eng_gguf_export_stats es;
	if (eng_gguf_export(conv, out, &o, &es))
		fail_msg("%s", ev_error_msg());
	eng_gguf *g = NULL;
	assert_int_equal(eng_gguf_open(&g, out), 0);
	char *model = NULL;
	assert_int_equal(eng_gguf_get_str(g, "tokenizer.ggml.model", &model), 0);
	assert_string_equal(model, "llama");
	const eng_gguf_value *toks = eng_gguf_find_key(g, "tokenizer.ggml.tokens"),
	                     *sc = eng_gguf_find_key(g, "tokenizer.ggml.scores"),
	                     *ty = eng_gguf_find_key(g, "tokenizer.ggml.token_type"),
	                     *sp = eng_gguf_find_key(g, "tokenizer.ggml.add_space_prefix");
	assert_true(toks && sc && ty && sp && toks->count == (uint64_t)v->n && sc->count == toks->count);
	assert_int_equal((int)sp->v.u, (int)v->space_prefix);
	const uint8_t *at = toks->elems;
	float *scores = malloc((size_t)v->n * sizeof *scores);
	for (int i = 0; i < v->n; i++) {
		eng_gguf_str t = eng_gguf_next_str(&at);
		int32_t type;
		memcpy(&type, ty->elems + 4 * (size_t)i, 4);
		memcpy(&scores[i], sc->elems + 4 * (size_t)i, 4);
		int want = v->types[i] == 5 ? 1 : v->types[i]; /* (tokenizer.json cannot say "unused": a normal piece) */
		if (t.n != strlen(v->pieces[i]) || memcmp(t.p, v->pieces[i], t.n) || type != want)
			fail_msg("piece %d: '%.*s' of type %d, not '%s' of type %d", i, (int)t.n, t.p, type, v->pieces[i], want);
	}
	int joins = 0;
	for (int i = 267; i < v->n; i++) /* the trained pieces: each a join of two others */
		for (int k = 267; k < v->n && v->types[i] == 1; k++)
			if (v->types[k] == 1 && (v->scores[i] > v->scores[k]) != (scores[i] > scores[k]))
				fail_msg("pieces %d and %d: scores %g, %g were %g, %g", i, k, scores[i], scores[k], v->scores[i],
				         v->scores[k]);
			else
				joins += k == 267;
	assert_true(joins > 100);
	free(model), free(scores);
	eng_gguf_close(g);
	assert_int_equal(eng_model_path_resolve(out, &conv2), 0);
	eng_tokenizer *t2 = NULL;
	assert_int_equal(eng_tokenizer_load(&t2, conv2), 0);
	ev_rng r;
	ev_rng_seed(&r, 9);
	const char *alpha[] = {"a", "b", "c", "d", "e", "\xc3\xa9", "\xe6\x97\xa5", "z", "\xe6\x9c\xac", " "};
	for (int t = 0; t < 200; t++) {
		char text[256] = "";
		for (int k = 0, n = 1 + (int)ev_rng_below(&r, 30); k < n; k++)
			strcat(text, alpha[ev_rng_below(&r, k < 3 ? 7 : 10)]);
		int32_t *a = NULL, *b = NULL;
		size_t na = 0, nb = 0;
		assert_int_equal(eng_tokenize(tok, text, strlen(text), true, &a, &na), 0);
		assert_int_equal(eng_tokenize(t2, text, strlen(text), true, &b, &nb), 0);
		if (na != nb || memcmp(a, b, na * sizeof *a))
			fail_msg("'%s': %zu ids from the first file, %zu from the one written again", text, na, nb);
		free(a), free(b);
	}
	eng_tokenizer_free(t2);
	/* without byte_fallback GGUF's 'llama' tokenizer could not say what becomes of uncovered text: refused */
	char *bad = tu_path(work, "nofallback");
	assert_int_equal(mkdir(bad, 0755), 0);
	static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
	for (int f = 0; f < 3; f++) {
		char *from = tu_path(conv, files[f]), *to = tu_path(bad, files[f]);
		assert_int_equal(symlink(from, to), 0);
		free(from), free(to);
	}
	char *tp = tu_path(bad, "tokenizer.json"), *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, tp, 64 << 20), 0);
	char *bf = strstr(text, "\"byte_fallback\":true");
	assert_non_null(bf);
	char *edited = ev_asprintf("%.*s\"byte_fallback\":false%s", (int)(bf - text), text,
	                           bf + strlen("\"byte_fallback\":true"));
	assert_int_equal(unlink(tp), 0);
	assert_int_equal(ev_file_write(tp, edited, strlen(edited)), 0);
	char *out2 = tu_path(work, "refused.gguf");
	assert_int_not_equal(eng_gguf_export(bad, out2, &o, &es), 0);
	assert_non_null(strstr(ev_error_msg(), "without byte_fallback"));
	ev_error_clear();
	assert_int_not_equal(access(out2, F_OK), 0);
	/* a merge that is not two pieces: refused by name, not taken for one */
	char *ms = strstr(text, "\"merges\":[");
	assert_non_null(ms);
	ms += strlen("\"merges\":[");
	char *bad2 = ev_asprintf("%.*s\"zz\",%s", (int)(ms - text), text, ms);
	assert_int_equal(unlink(tp), 0);
	assert_int_equal(ev_file_write(tp, bad2, strlen(bad2)), 0);
	assert_int_not_equal(eng_gguf_export(bad, out2, &o, &es), 0);
	assert_non_null(strstr(ev_error_msg(), "merge 0 ('zz') is not two pieces"));
	ev_error_clear();
	assert_int_not_equal(access(out2, F_OK), 0);
	free(bad2);
	free(out2), free(edited), free(text), free(tp), free(bad);
	free(conv2), free(out), free(work);
}

/* tokenizer.ggml.model "llama" (SentencePiece BPE: scores, no merges):
 * the converted tokenizer segments 400 random texts exactly as the plain
 * SentencePiece algorithm does (characters outside the vocabulary as their
 * bytes), with and without the space prefix, and decodes them back. */
static void sentencepiece_gguf_tokenizes_as_sentencepiece(void **st)
{
	(void)st;
	for (int sp = 1; sp >= 0; sp--) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.vocab = 512, z.layers = 1;
		char *dir = et_mkmodel("spm", "llama", &z, "f32", 3);
		char *cache = tu_tmpdir("spmcache");
		setenv("EVALD_CACHE_DIR", cache, 1);
		spm_vocab *v = spm_make(512, 77 + (uint64_t)sp, sp);
		spm_override = v;
		char *g = write_gguf(dir, "llama", ENG_GGML_F32, "spm");
		spm_override = NULL;
		char *conv = NULL;
		if (eng_model_path_resolve(g, &conv))
			fail_msg("%s", ev_error_msg());
		eng_tokenizer *tok = NULL;
		if (eng_tokenizer_load(&tok, conv))
			fail_msg("%s", ev_error_msg());
		ev_rng r;
		ev_rng_seed(&r, 5);
		const char *alpha[] = {"a", "b", "c", "d", "e", "\xc3\xa9", "\xe6\x97\xa5", "z", "\xe6\x9c\xac", " "};
		int checked = 0, bytes = 0;
		for (int t = 0; t < 400; t++) {
			char text[256] = "";
			int n = 1 + (int)ev_rng_below(&r, 30);
			for (int k = 0; k < n; k++)
				strcat(text, alpha[ev_rng_below(&r, k < 3 ? 7 : 10)]);
			int32_t want[1024], *got = NULL;
			size_t nw = spm_oracle(v, text, want), ng = 0;
			assert_int_equal(eng_tokenize(tok, text, strlen(text), false, &got, &ng), 0);
			if (ng != nw || memcmp(got, want, nw * sizeof *got)) {
				ev_buf b = EV_BUF_INIT(1 << 16);
				for (size_t i = 0; i < nw; i++)
					ev_buf_printf(&b, " %d", want[i]);
				ev_buf_puts(&b, " | got");
				for (size_t i = 0; i < ng; i++)
					ev_buf_printf(&b, " %d", got[i]);
				fail_msg("space prefix %d, '%s': want%s", sp, text, b.data);
			}
			for (size_t i = 0; i < nw; i++)
				bytes += want[i] >= 3 && want[i] < 259;
			char *back = NULL;
			size_t bl = 0;
			assert_int_equal(eng_detokenize(tok, got, ng, true, &back, &bl), 0);
			assert_string_equal(back, text); /* the prefix space is the decoder's to drop */
			free(back), free(got);
			checked++;
		}
		print_message("space prefix %d: %d texts segmented as SentencePiece does (%d byte pieces among them)\n", sp,
		              checked, bytes);
		assert_true(bytes > 0);
		spm_comes_back(conv, v, tok);
		eng_tokenizer_free(tok);
		spm_free(v);
		free(g), free(conv), free(dir), free(cache);
	}
}

/* The bytes of a metadata value as stored, for comparing two files' metadata. */
static size_t raw_value(const eng_gguf_value *v, const uint8_t **at)
{
	if (v->type == ENG_GGUF_STRING) {
		*at = (const uint8_t *)v->s.p;
		return v->s.n;
	}
	if (v->type != ENG_GGUF_ARRAY) {
		*at = (const uint8_t *)&v->v;
		return 8;
	}
	const uint8_t *e = v->elems;
	if (v->elem_type == ENG_GGUF_STRING)
		for (uint64_t i = 0; i < v->count; i++)
			eng_gguf_next_str(&e);
	else
		e += v->count * (v->elem_type == ENG_GGUF_F32 || v->elem_type == ENG_GGUF_I32 ? 4 : 1);
	*at = v->elems;
	return (size_t)(e - v->elems);
}

/* `evald engine gguf FILE --quantize TYPE`: metadata copied value for
 * value (general.file_type added, naming the new type), each 2-D weight the quantization of its dequantized values in the
 * type the rules give (Q4_K_M: Q6_K for the output matrix (the tied
 * embedding here) and for attn_v / ffn_down in the layers that use more
 * bits), norms as stored; the result loads and runs; unknown types refused. */
static void requantized_files_follow_the_rules(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 256, z.intermediate = 512, z.vocab = 512, z.heads = 4, z.kv_heads = 2, z.layers = 9;
	char *dir = et_mkmodel("requant", "llama", &z, "f32", 5);
	char *cache = tu_tmpdir("requantcache");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *src = write_gguf(dir, "llama", ENG_GGML_F16, "src");
	struct {
		const char *type;
		uint32_t base, file_type;
	} cases[] = {{"Q4_K_M", ENG_GGML_Q4_K, 15}, {"Q8_0", ENG_GGML_Q8_0, 7}, {"Q5_K", ENG_GGML_Q5_K, 16}};
	eng_gguf *a = NULL;
	assert_int_equal(eng_gguf_open(&a, src), 0);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		char *out = ev_asprintf("%s/out-%s.gguf", dir, cases[c].type);
		eng_gguf_requant_stats rs;
		if (eng_gguf_requantize(src, out, cases[c].type, &rs))
			fail_msg("%s: %s", cases[c].type, ev_error_msg());
		eng_gguf *b = NULL;
		assert_int_equal(eng_gguf_open(&b, out), 0);
		/* the source's file type (F16, 1) replaced in place by llama.cpp's number for the new type; the rest copied */
		uint64_t ft = 99;
		assert_int_equal(eng_gguf_get_u64(a, "general.file_type", &ft), 0);
		assert_int_equal(ft, 1);
		assert_int_equal(a->n_kv, b->n_kv);
		assert_int_equal(eng_gguf_get_u64(b, "general.file_type", &ft), 0);
		assert_int_equal(ft, cases[c].file_type);
		for (size_t i = 0; i < a->n_kv; i++) {
			const eng_gguf_value *x = &a->kv[i], *y = &b->kv[i];
			assert_int_equal(x->key.n, y->key.n);
			assert_memory_equal(x->key.p, y->key.p, x->key.n);
			assert_int_equal(x->type, y->type);
			const uint8_t *px, *py;
			size_t nx = raw_value(x, &px), ny = raw_value(y, &py);
			assert_int_equal(nx, ny);
			if (memcmp(px, py, nx) && !(x->key.n == 17 && !memcmp(x->key.p, "general.file_type", 17)))
				fail_msg("%s: metadata '%.*s' differs", cases[c].type, (int)x->key.n, x->key.p);
		}
		if (c == 1) { /* a file without a type (the folder written as stored): the copy adds one */
			char *plain = ev_asprintf("%s/plain.gguf", dir), *again = ev_asprintf("%s/again-Q5_0.gguf", dir);
			eng_gguf_export_opts eo = {.type = NULL};
			eng_gguf_export_stats es;
			assert_int_equal(eng_gguf_export(dir, plain, &eo, &es), 0);
			assert_int_equal(es.quantized, 0); /* f32 weights, f32 norms */
			eng_gguf *p0 = NULL, *d = NULL;
			assert_int_equal(eng_gguf_open(&p0, plain), 0);
			assert_null(eng_gguf_find_key(p0, "general.file_type"));
			eng_gguf_requant_stats rs2;
			assert_int_equal(eng_gguf_requantize(plain, again, "Q5_0", &rs2), 0);
			assert_int_equal(eng_gguf_open(&d, again), 0);
			assert_int_equal(d->n_kv, p0->n_kv + 1);
			assert_int_equal(eng_gguf_get_u64(d, "general.file_type", &ft), 0);
			assert_int_equal(ft, 8);
			eng_gguf_close(d), eng_gguf_close(p0);
			free(again), free(plain);
		}
		assert_int_equal(a->n_t, b->n_t);
		size_t q6 = 0;
		for (size_t i = 0; i < a->n_t; i++) {
			const eng_gguf_tensor *x = &a->t[i], *y = &b->t[i];
			char nm[128];
			snprintf(nm, sizeof nm, "%.*s", (int)x->name.n, x->name.p);
			uint32_t want = x->type;
			if (x->ndim == 2) {
				want = cases[c].base;
				int l = -1;
				sscanf(nm, "blk.%d.", &l);
				bool more = l >= 0 && (l < 9 / 8 || l >= 7 * 9 / 8 || (l - 9 / 8) % 3 == 2); /* layers 0, 3, 6, 7, 8 */
				if (!strcmp(cases[c].type, "Q4_K_M") &&
				    (!strcmp(nm, eng_gguf_find_tensor(a, "output.weight") ? "output.weight" : "token_embd.weight") ||
				     (more && (strstr(nm, "attn_v") || strstr(nm, "ffn_down")))))
					want = ENG_GGML_Q6_K;
			}
			if (y->type != want)
				fail_msg("%s: %s is %s, not %s", cases[c].type, nm, eng_ggml_type_name(y->type), eng_ggml_type_name(want));
			q6 += y->type == ENG_GGML_Q6_K;
			float *f = malloc(x->elements * 4);
			void *q = malloc(x->elements * 4);
			eng_ggml_dequantize(f, x->data, x->type, x->elements);
			if (y->type != x->type) {
				eng_ggml_quantize(q, f, y->type, x->elements);
				assert_memory_equal(q, y->data, y->bytes);
			} else {
				assert_memory_equal(x->data, y->data, x->bytes);
			}
			free(f), free(q);
		}
		/* Q4_K_M: the output matrix and 5 of 9 layers' attn_v and ffn_down */
		assert_int_equal(q6, strcmp(cases[c].type, "Q4_K_M") ? (cases[c].base == ENG_GGML_Q6_K ? q6 : 0) : 11);
		eng_gguf_close(b);
		/* it runs, with logits near the source's */
		char *d1 = NULL, *d2 = NULL;
		assert_int_equal(eng_model_path_resolve(src, &d1), 0);
		assert_int_equal(eng_model_path_resolve(out, &d2), 0);
		eng_model *m1 = et_load(d1, ENG_BACKEND_CPU, 0), *m2 = et_load(d2, ENG_BACKEND_CPU, 0);
		int32_t toks[16];
		for (int i = 0; i < 16; i++)
			toks[i] = (int32_t)((i * 37 + 3) % 500);
		float *l1 = et_logits(m1, toks, 16, 0), *l2 = et_logits(m2, toks, 16, 0);
		double e = et_rel_err(l2, l1, 16 * 512);
		print_message("requantized to %s: %zu tensors converted, %.2f -> %.2f MiB, logits vs F16 %.2e\n", cases[c].type,
		              rs.converted, rs.bytes_in / 1048576.0, rs.bytes_out / 1048576.0, e);
		assert_true(e < (cases[c].base == ENG_GGML_Q8_0 ? 0.03 : 0.5));
		free(l1), free(l2), free(d1), free(d2), free(out);
		eng_model_free(m1), eng_model_free(m2);
	}
	eng_gguf_close(a);
	eng_gguf_requant_stats rs;
	char *bad = ev_asprintf("%s/bad.gguf", dir);
	assert_int_not_equal(eng_gguf_requantize(src, bad, "TQ2_0", &rs), 0);
	assert_non_null(strstr(ev_error_msg(), "TQ2_0"));
	assert_int_not_equal(access(bad, F_OK), 0);
	free(bad), free(src), free(dir), free(cache);
}

/* Every command that takes a checkpoint takes a GGUF file as it takes a
 * folder (through its converted folder in the cache): the engine's info,
 * logits, generate and tokenize, bench engine and bench attention, suites
 * gen long-context, and run (the main job's path). */
/* An IQ3_XXS tensor one of whose blocks has a d with no f16 half (the
 * smallest subnormal) cannot be kept as Q6_K value for value: that tensor
 * alone is converted to F32, with the values the format gives, and the
 * others stay Q6_K */
static void iq3xxs_inexact_half_goes_f32(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 256, z.intermediate = 512, z.vocab = 512, z.heads = 4, z.kv_heads = 2, z.layers = 1; /* whole super-blocks */
	char *dir = et_mkmodel("iq3odd", "llama", &z, "f32", 5), *cache = tu_tmpdir("iq3oddc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *g = write_gguf(dir, "llama", ENG_GGML_IQ3_XXS, "odd");
	eng_gguf *gg = NULL;
	assert_int_equal(eng_gguf_open(&gg, g), 0);
	const eng_gguf_tensor *t = eng_gguf_find_tensor(gg, "blk.0.ffn_up.weight");
	assert_non_null(t);
	assert_int_equal(t->type, ENG_GGML_IQ3_XXS);
	long at = (long)(t->data - gg->map) + 98; /* its second block's d */
	size_t n = (size_t)t->elements;
	uint8_t *raw = malloc(t->bytes);
	memcpy(raw, t->data, t->bytes);
	eng_gguf_close(gg);
	const uint8_t odd[2] = {1, 0};
	memcpy(raw + 98, odd, 2);
	FILE *f = fopen(g, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, at, SEEK_SET), 0);
	assert_int_equal(fwrite(odd, 1, 2, f), 2);
	fclose(f);
	char *conv = NULL;
	if (eng_model_path_resolve(g, &conv))
		fail_msg("%s: %s", g, ev_error_msg());
	eng_tensor_set sb;
	memset(&sb, 0, sizeof sb);
	assert_int_equal(eng_st_open(&sb, conv), 0);
	const eng_tensor *up = eng_st_find(&sb, "model.layers.0.mlp.up_proj.weight"),
	                 *gate = eng_st_find(&sb, "model.layers.0.mlp.gate_proj.weight");
	assert_non_null(up), assert_non_null(gate);
	assert_int_equal(up->dtype, ENG_F32);
	assert_int_equal(gate->dtype, ENG_Q6_K);
	float *want = malloc(n * 4);
	eng_ggml_dequantize(want, raw, ENG_GGML_IQ3_XXS, n);
	assert_memory_equal(want, up->data, n * 4);
	eng_st_close(&sb);
	eng_model *m = et_load(conv, ENG_BACKEND_CPU, 0); /* and it runs */
	eng_model_free(m);
	free(want), free(raw), free(conv), free(g), free(dir), free(cache);
	unsetenv("EVALD_CACHE_DIR");
}

static void every_command_takes_a_gguf_file(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("cmds", "llama", &z, "f32", 9), *cache = tu_tmpdir("ggufcmdc"), *work = tu_tmpdir("ggufcmd");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *g = write_gguf(dir, "llama", ENG_GGML_Q8_0, "cmds"), *db = tu_path(work, "evald.db"),
	     *lc = tu_path(work, "lc"), *suite = tu_write(work, "s.jsonl",
	                                                   "{\"id\":\"a\",\"input\":\"the cat sat\",\"target\":\"zz\"}\n"
	                                                   "{\"id\":\"b\",\"input\":\"a ship at sea\",\"target\":\"zz\"}\n");
	const char *ev = tu_evald();
	const char *const cmds[][16] = {
	        {ev, "engine", "info", "--model", g, NULL},
	        {ev, "engine", "logits", "--model", g, "--tokens", "1,2,3", "--last", NULL},
	        {ev, "engine", "generate", "--model", g, "--prompt-tokens", "1,2,3", "--max-tokens", "3", NULL},
	        {ev, "engine", "tokenize", "--model", g, "--text", "the cat", NULL},
	        {ev, "bench", "engine", "--model", g, "--prompt", "8", "--decode", "2", "--batch", "1", "--repeats", "1",
	         "--no-reference", NULL},
	        {ev, "bench", "attention", "--model", g, "--lengths", "300", "--decode", "2", "--repeats", "1", NULL},
	        /* (2k: with the folder's chat template, as the folder itself, 1k has no room for the agent task) */
	        {ev, "suites", "gen", "long-context", "--model", g, "-o", lc, "--lengths", "2k", NULL},
	        {ev, "--db", db, "run", "--model", g, "--suite", suite, "--max-tokens", "3", "--json", NULL},
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		char *out = NULL, *err = NULL;
		int rc = tu_run(&out, &err, NULL, cmds[i]);
		if (rc)
			fail_msg("evald %s %s on a GGUF file: exit %d: %s", cmds[i][1], cmds[i][2], rc, err);
		if (i == 0)
			assert_non_null(strstr(out, "LlamaForCausalLM"));
		free(out), free(err);
	}
	char *samples = tu_path(lc, "samples.jsonl");
	assert_int_equal(access(samples, R_OK), 0);
	free(samples), free(suite), free(lc), free(db), free(g), free(work), free(cache), free(dir);
}

/* `evald watch` on a folder of GGUF files: each file is a checkpoint, the
 * baseline and a candidate are evaluated and compared, with a report each;
 * a file that starts like GGUF but is broken fails with a reason naming
 * it; a file that is not GGUF at all waits with its reason. */
static void watch_evaluates_gguf_files(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("watchg", "llama", &z, "f32", 11), *cache = tu_tmpdir("ggufwatchc"),
	     *work = tu_tmpdir("ggufwatch");
	setenv("EVALD_CACHE_DIR", cache, 1);
	char *ck = tu_path(work, "ck"), *rep = tu_path(work, "rep"), *db = tu_path(work, "evald.db");
	assert_int_equal(mkdir(ck, 0755), 0);
	const char *names[] = {"base", "cand"};
	const uint32_t types[] = {ENG_GGML_Q8_0, ENG_GGML_Q4_0};
	for (int i = 0; i < 2; i++) {
		char *g = write_gguf(dir, "llama", types[i], names[i]), *to = ev_asprintf("%s/%s.gguf", ck, names[i]);
		assert_int_equal(rename(g, to), 0);
		free(g), free(to);
	}
	char *broken = ev_asprintf("%s/broken.gguf", ck);
	assert_int_equal(ev_file_write(broken, "GGUF\3\0\0\0 and then nothing", 26), 0);
	free(tu_write(ck, "notes.gguf", "not a model"));
	char *suite = tu_write(work, "s.jsonl",
	                       "{\"id\":\"a\",\"input\":\"the cat sat\",\"target\":\"zz\"}\n"
	                       "{\"id\":\"b\",\"input\":\"a ship at sea\",\"target\":\"zz\"}\n");
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "watch", ck, "--suites", suite, "--baseline", "base.gguf", "--once",
	                      "--settle", "0.2", "--reports", rep, "--max-tokens", "3", NULL};
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc)
		fail_msg("watch: exit %d: %s", rc, err);
	free(out), free(err);
	const char *status[] = {tu_evald(), "--db", db, "watch", "--status", "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, status), 0);
	cJSON *j = cJSON_Parse(out), *r;
	assert_non_null(j);
	int seen = 0;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "checkpoints"))
	{
		const char *name = ev_json_str(r, "name", ""), *state = ev_json_str(r, "state", ""),
		           *detail = ev_json_str(r, "detail", "");
		print_message("%s: %s %s\n", name, state, detail);
		if (!strcmp(name, "base.gguf") || !strcmp(name, "cand.gguf"))
			assert_string_equal(state, "evaluated"), seen++;
		if (!strcmp(name, "cand.gguf"))
			assert_true(cJSON_IsObject(cJSON_GetObjectItem(r, "compare")));
		if (!strcmp(name, "broken.gguf")) {
			assert_string_equal(state, "failed"), seen++;
			assert_non_null(strstr(detail, "ck/broken.gguf: ")); /* the file named, then what is wrong */
		}
		if (!strcmp(name, "notes.gguf")) {
			assert_string_equal(state, "seen"), seen++;
			assert_non_null(strstr(detail, "does not start with GGUF's magic"));
		}
	}
	assert_int_equal(seen, 4);
	cJSON_Delete(j);
	free(out);
	for (int i = 0; i < 2; i++) {
		char *md = ev_asprintf("%s/%s.gguf.md", rep, names[i]);
		assert_int_equal(access(md, R_OK), 0);
		free(md);
	}
	free(suite), free(broken), free(db), free(rep), free(ck), free(work), free(cache), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(llama_gguf_equals_folder),
		cmocka_unit_test(qwen2_gguf_equals_folder),
		cmocka_unit_test(mixtral_gguf_equals_folder),
		cmocka_unit_test(qwen3moe_gguf_equals_folder),
		cmocka_unit_test(qwen2moe_gguf_equals_folder),
		cmocka_unit_test(unknown_architectures_and_tokenizers_refused),
		cmocka_unit_test(requantized_files_follow_the_rules),
		cmocka_unit_test(sentencepiece_gguf_tokenizes_as_sentencepiece),
		cmocka_unit_test(llama3_rope_freqs_as_factors),
		cmocka_unit_test(iq3xxs_inexact_half_goes_f32),
		cmocka_unit_test(every_command_takes_a_gguf_file),
		cmocka_unit_test(watch_evaluates_gguf_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
