/*
 * evald export RUN [--format jsonl|csv] [-o FILE]: a run's per-sample rows,
 * one a result, for analysis elsewhere (pandas, a spreadsheet, a CI step).
 *
 * Each row: suite, sample_id, epoch, input (the last user message of the
 * request sent; a multiple-choice sample's first prompt), response, extracted, score, reason, detail,
 * finish_reason, prompt_tokens, completion_tokens, latency_s. JSONL writes
 * one object a line; CSV (RFC 4180) a header and one record a line, fields
 * with commas, quotes or line breaks quoted. Text from the model is written
 * as it is (a file, not a terminal).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

int ev_cmd_export(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *format, *out;
} export_opts;

static const ev_opt export_opts_table[] = {
	EV_O_CHOICE("--format", export_opts, format, "jsonl|csv", "the file's format"),
	{.name = "--output", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(export_opts, out), .meta = "FILE",
	 .help = "write there (default: standard output)"},
	EV_O_END,
};

static const ev_cmd_spec export_spec = {
	.name = "export",
	.synopsis = "RUN [--format jsonl|csv] [-o FILE]",
	.about = "Writes a run's per-sample rows (input, answer, extracted, score, reason, tokens, latency)\n"
	         "as JSON lines or CSV.",
	.opts = export_opts_table,
	.positional = "RUN",
	.min_pos = 1,
	.max_pos = 1,
};

static const char *const COLUMNS[] = {"suite", "sample_id", "epoch", "input", "response", "extracted", "score",
                                      "reason", "detail", "finish_reason", "prompt_tokens", "completion_tokens",
                                      "latency_s", NULL};

typedef struct {
	bool csv;
	ev_buf out;
} export_ctx;

/* The last user message of a request body (its text parts joined), malloc'd. */
static char *input_of(const char *request_json)
{
	cJSON *j = NULL;
	char *out = NULL;
	if (!request_json || ev_json_parse(&j, request_json, strlen(request_json), "request")) {
		ev_error_clear();
		return NULL;
	}
	/* a scoring request (a multiple-choice sample): its first prompt,
	 * context and first choice */
	const cJSON *pr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "prompt"), 0);
	if (cJSON_IsString(pr)) {
		out = ev_strdup(pr->valuestring);
		cJSON_Delete(j);
		return out;
	}
	const cJSON *m, *last = NULL;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "messages"))
	if (!strcmp(ev_json_str(m, "role", ""), "user"))
		last = m;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(last, "content");
	if (cJSON_IsString(c)) {
		out = ev_strdup(c->valuestring);
	} else if (cJSON_IsArray(c)) {
		ev_buf b = EV_BUF_INIT((size_t)64 << 20);
		const cJSON *p;
		cJSON_ArrayForEach(p, c)
		{
			const char *t = ev_json_str(p, "text", NULL);
			if (t) {
				if (b.len)
					ev_buf_putc(&b, '\n');
				ev_buf_puts(&b, t);
			}
		}
		out = b.data ? b.data : ev_strdup("");
	}
	cJSON_Delete(j);
	return out;
}

static void csv_field(ev_buf *b, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		ev_buf_puts(b, s);
		return;
	}
	ev_buf_putc(b, '"');
	for (; *s; s++) {
		if (*s == '"')
			ev_buf_putc(b, '"');
		ev_buf_putc(b, *s);
	}
	ev_buf_putc(b, '"');
}

static int row(void *ctx, const ev_result *r)
{
	export_ctx *x = ctx;
	char *input = input_of(r->request_json);
	char epoch[16], score[32], pt[16], ct[16], lat[32];
	snprintf(epoch, sizeof epoch, "%d", r->epoch);
	snprintf(score, sizeof score, "%.17g", r->score);
	snprintf(pt, sizeof pt, "%d", r->prompt_tokens);
	snprintf(ct, sizeof ct, "%d", r->completion_tokens);
	snprintf(lat, sizeof lat, "%.6f", r->latency_s);
	const char *vals[] = {r->suite, r->sample_id, epoch, input, r->response, r->extracted, score, r->reason,
	                      r->detail, r->finish_reason, pt, ct, lat};
	int rc = 0;
	if (x->csv) {
		for (size_t i = 0; COLUMNS[i]; i++) {
			if (i)
				ev_buf_putc(&x->out, ',');
			csv_field(&x->out, vals[i]);
		}
		rc = ev_buf_puts(&x->out, "\r\n");
	} else {
		ev_buf_putc(&x->out, '{');
		for (size_t i = 0; COLUMNS[i]; i++) {
			ev_buf_printf(&x->out, "%s\"%s\":", i ? "," : "", COLUMNS[i]);
			bool number = i == 2 || i == 6 || i == 10 || i == 11 || i == 12;
			if (number)
				ev_buf_puts(&x->out, vals[i]);
			else if (vals[i])
				ev_json_buf_str(&x->out, vals[i]);
			else
				ev_buf_puts(&x->out, "null");
		}
		rc = ev_buf_puts(&x->out, "}\n");
	}
	free(input);
	return rc ? ev_error_set(EV_E_LIMIT, "export: more than %zu bytes", x->out.max) : 0;
}

int ev_cmd_export(const ev_cli *cli, int argc, char **argv)
{
	export_opts eo = {.format = "jsonl"};
	const char *pos[EV_OPT_MAX_POS] = {NULL};
	int prc = ev_opt_parse(&export_spec, &eo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	int64_t run_id = 0;
	if (!ev_cli_parse_run_id(pos[0], &run_id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	export_ctx x = {!strcmp(eo.format, "csv"), EV_BUF_INIT((size_t)4 << 30)};
	ev_run_row r = {0};
	int rc = ev_tracker_run_get(t, run_id, &r);
	if (!rc && x.csv)
		for (size_t i = 0; COLUMNS[i]; i++)
			ev_buf_printf(&x.out, "%s%s", i ? "," : "", COLUMNS[i]);
	if (!rc && x.csv)
		ev_buf_puts(&x.out, "\r\n");
	if (!rc)
		rc = ev_tracker_results_each(t, run_id, row, &x);
	if (!rc) {
		if (eo.out)
			rc = ev_file_write(eo.out, x.out.data ? x.out.data : "", x.out.len);
		else
			fwrite(x.out.data ? x.out.data : "", 1, x.out.len, stdout);
	}
	ev_run_row_clear(&r);
	ev_buf_free(&x.out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("export");
	return 0;
}
