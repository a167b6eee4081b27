/*
 * suites/gen_recall.c: the recall suite's samples and suite.json. The
 * prompts themselves come from the caller (the engine knows the recall
 * checkpoint's vocabulary; suites know the suite format).
 */
#include "suites/suites.h"

#include <stdlib.h>

int ev_gen_recall(const ev_recall_options *opt, ev_recall_make_fn make, void *ctx, const char *out_dir)
{
	ev_buf out = EV_BUF_INIT(1u << 30);
	int rc = 0;
	if (opt->nlengths < 1 || opt->ndepths < 1 || opt->samples < 1)
		return ev_error_set(EV_E_INVALID, "recall suite: no lengths, depths or samples");
	for (int li = 0; li < opt->nlengths && !rc; li++) {
		long len = opt->lengths[li];
		if (len < 4 || len > (1L << 21))
			return ev_error_set(EV_E_INVALID, "recall suite: length %ld out of [4, 2097152]", len);
		int nd = opt->distractors < len - 4 ? opt->distractors : (int)(len - 4);
		for (int di = 0; di < opt->ndepths && !rc; di++)
			for (int s = 0; s < opt->samples && !rc; s++) {
				uint64_t sd = opt->seed * 1000003u + (uint64_t)li * 7919u + (uint64_t)di * 131u + (uint64_t)s;
				char *text = NULL, answer[16];
				int depth = opt->depths[di];
				if ((rc = make(ctx, &text, answer, len, depth, nd, sd)))
					break;
				rc = ev_buf_printf(&out, "{\"id\":\"len%ld-depth%d-%d\",\"input\":", len, depth, s);
				if (!rc)
					rc = ev_json_buf_str(&out, text);
				if (!rc)
					rc = ev_buf_puts(&out, ",\"target\":");
				if (!rc)
					rc = ev_json_buf_str(&out, answer);
				if (!rc)
					rc = ev_buf_printf(&out,
					                   ",\"metadata\":{\"task\":\"recall\",\"length\":%ld,\"depth\":%d,"
					                   "\"distractors\":%d}}\n",
					                   len, depth, nd);
				free(text);
			}
	}
	static const char suite[] =
		"{\"name\":\"recall\",\"version\":\"1\",\"kind\":\"long-context\",\"description\":\"key-value recall "
		"for the constructed recall checkpoint (evald engine mkmodel --arch recall): the answer is the "
		"value token bound to the asked key\",\"generation\":{\"max_tokens\":4,\"temperature\":0},"
		"\"checker\":{\"type\":\"includes\"}}\n";
	if (!rc && !(rc = ev_mkdir_p(out_dir)))
		rc = ev_import_write_suite(out_dir, suite, out.data ? out.data : "", out.len);
	ev_buf_free(&out);
	return rc;
}
