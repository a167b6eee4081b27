/*
 * scoring/checker_judge.c: open answers graded by a judge model
 * (`{"type":"judge","model":URL,...}`), an OpenAI-compatible server.
 *
 * The judge gets the question (the sample's last user message), the
 * reference answer (the sample's targets, when it has any), the rubric and
 * the answer, and ends its reply with `GRADE: C` (correct, 1), `GRADE: P`
 * (partly, 0.5) or `GRADE: I` (incorrect, 0); its last such line counts.
 * Nothing about it is silent: building the checker asks the judge's
 * /models once (an unreachable judge, or one serving several models when
 * none is named, fails the suite before any sample runs), and the
 * normalised spec names the judge's model and a digest of its /models entry
 * (judge_identity), which the run stores with its suites. A judge that
 * cannot be asked or gives no grade is a fault of the scoring, not a wrong
 * answer: the sample is left out as an error (backend_error), never scored
 * 0 quietly.
 */
#include "scoring/scoring_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#define JUDGE_MAX_REPLY ((size_t)4 << 20)
#define JUDGE_MAX_RUBRIC ((size_t)64 << 10)

typedef struct {
	char *chat_url;    /* <model>/chat/completions */
	char *model_name;  /* what the judge serves */
	char *rubric;      /* or NULL */
	char *key_env;     /* the variable holding the API key */
	int max_tokens, retries;
	long timeout_ms;
	ev_rx grade;
	pcre2_match_context *mctx;
} judge_checker;

static const char *const judge_fields[] = {"model", "model_name", "rubric", "api_key_env", "max_tokens", "timeout",
                                           "retries", "judge_model", "judge_identity", NULL};

static void judge_free(void *impl)
{
	judge_checker *j = impl;
	if (!j)
		return;
	free(j->chat_url);
	free(j->model_name);
	free(j->rubric);
	free(j->key_env);
	ev_rx_clear(&j->grade);
	pcre2_match_context_free(j->mctx);
	free(j);
}

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
	ev_buf *b = ud;
	return ev_buf_append(b, p, size * n) ? 0 : size * n;
}

/* One HTTP exchange with the judge: GET (body NULL) or POST JSON. Returns
 * 0 with *code and the body in `out`, or a negative status naming url. */
static int exchange(const judge_checker *j, const char *url, const char *body, long timeout_ms, long *code, ev_buf *out)
{
	CURL *e = curl_easy_init();
	if (!e)
		return ev_error_set(EV_E_NOMEM, "judge: curl_easy_init failed");
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	const char *key = j->key_env ? getenv(j->key_env) : NULL;
	char *auth = key && *key ? ev_asprintf("Authorization: Bearer %s", key) : NULL;
	if (auth)
		h = curl_slist_append(h, auth);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode rc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, code);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	free(auth);
	if (rc != CURLE_OK)
		return ev_error_set(EV_E_BACKEND, "judge at %s: %s", url, curl_easy_strerror(rc));
	return 0;
}

/* Asks the judge's /models which model it serves and what it is. */
static int probe(judge_checker *j, const char *base, char identity[EV_SHA256_HEX])
{
	char *url = ev_asprintf("%s/models", base);
	ev_buf b = EV_BUF_INIT((size_t)1 << 20);
	long code = 0;
	int rc = url ? exchange(j, url, NULL, 10000, &code, &b) : ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON *root = NULL;
	if (!rc && code != 200)
		rc = ev_error_set(EV_E_BACKEND, "judge at %s: GET /models answered HTTP %ld", base, code);
	if (!rc)
		rc = ev_json_parse(&root, b.data ? b.data : "", b.len, "judge /models");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data"), *m, *pick = NULL;
	int n = 0;
	cJSON_ArrayForEach(m, data) {
		const char *id = ev_json_str(m, "id", NULL);
		n++;
		if (id && (!j->model_name || !strcmp(id, j->model_name)))
			pick = pick ? pick : m;
	}
	if (!rc && !pick)
		rc = j->model_name ? ev_error_set(EV_E_NOTFOUND, "judge at %s does not serve \"%.100s\"", base, j->model_name)
		                   : ev_error_set(EV_E_INVALID, "judge at %s serves no model", base);
	if (!rc && !j->model_name && n > 1)
		rc = ev_error_set(EV_E_INVALID, "judge at %s serves %d models: name one with model_name", base, n);
	if (!rc && !j->model_name && !(j->model_name = ev_strdup(ev_json_str(pick, "id", ""))))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc) { /* the URL and the entry's stable fields */
		static const char *const keys[] = {"id", "root", "parent", "owned_by", "max_model_len", NULL};
		ev_buf id = EV_BUF_INIT((size_t)1 << 16);
		ev_buf_puts(&id, base);
		for (int k = 0; keys[k]; k++) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(pick, keys[k]);
			char *s = v ? ev_json_print(v) : NULL;
			ev_buf_printf(&id, "\n%s=%s", keys[k], s ? s : "");
			free(s);
		}
		ev_sha256_hex(identity, id.data ? id.data : "", id.len);
		ev_buf_free(&id);
	}
	cJSON_Delete(root);
	ev_buf_free(&b);
	free(url);
	return rc;
}

static int judge_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	judge_checker *j = calloc(1, sizeof *j);
	if (!j)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	int rc = 0;
	const char *model = ev_json_str(spec, "model", NULL),
	           *name = ev_json_str(spec, "model_name", ev_json_str(spec, "judge_model", NULL)),
	           *was = ev_json_str(spec, "judge_identity", NULL),
	           *rubric = ev_json_str(spec, "rubric", NULL), *key = ev_json_str(spec, "api_key_env", "OPENAI_API_KEY");
	double max_tokens, timeout, retries;
	if (!model || (strncmp(model, "http://", 7) && strncmp(model, "https://", 8)))
		rc = ev_error_set(EV_E_INVALID, "checker.model: expected the judge's base URL (http://host:port/v1)");
	else if (cJSON_GetObjectItemCaseSensitive(spec, "rubric") && (!rubric || strlen(rubric) > JUDGE_MAX_RUBRIC))
		rc = ev_error_set(EV_E_INVALID, "checker.rubric: expected a string of at most 64 KiB");
	if (!rc)
		rc = ev_spec_num(&max_tokens, spec, "max_tokens", 512, 1, 1e6);
	if (!rc)
		rc = ev_spec_num(&timeout, spec, "timeout", 120, 1, 3600);
	if (!rc)
		rc = ev_spec_num(&retries, spec, "retries", 2, 0, 10);
	size_t n = model ? strlen(model) : 0;
	while (n && model[n - 1] == '/')
		n--;
	char *base = !rc ? ev_strndup(model, n) : NULL;
	j->max_tokens = (int)max_tokens;
	j->timeout_ms = (long)(timeout * 1000);
	j->retries = (int)retries;
	if (!rc && (!base || !(j->chat_url = ev_asprintf("%s/chat/completions", base)) || !(j->key_env = ev_strdup(key)) ||
	            (name && !(j->model_name = ev_strdup(name))) || (rubric && !(j->rubric = ev_strdup(rubric)))))
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
	static const char pat[] = "(?i)\\bGRADE\\s*:\\s*\\**\\s*([CPI])\\b";
	if (!rc)
		rc = ev_rx_compile(&j->grade, pat, sizeof pat - 1, 0, "checker (judge grade)");
	if (!rc && !(j->mctx = ev_rx_context(EV_RX_MATCH_LIMIT, EV_RX_DEPTH_LIMIT)))
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
	char identity[EV_SHA256_HEX] = "";
	if (!rc && (rc = probe(j, base, identity)))
		ev_error_wrap(rc, "checker.model");
	if (!rc) {
		cJSON_AddStringToObject(norm, "model", base);
		if (j->rubric)
			cJSON_AddStringToObject(norm, "rubric", j->rubric);
		cJSON_AddStringToObject(norm, "api_key_env", j->key_env);
		cJSON_AddNumberToObject(norm, "max_tokens", j->max_tokens);
		cJSON_AddNumberToObject(norm, "timeout", timeout);
		cJSON_AddNumberToObject(norm, "retries", j->retries);
		cJSON_AddStringToObject(norm, "judge_model", j->model_name);
		cJSON_AddStringToObject(norm, "judge_identity", identity);
		ev_log_info("judge: %s at %s grades the answers (identity %.12s)", j->model_name, base, identity);
		if (was && strcmp(was, identity)) /* a stored spec (rescore) names another judge */
			ev_log_warn("judge: %s at %s is not the judge this spec was written for (identity %.12s then, %.12s now)",
			            j->model_name, base, was, identity);
	}
	free(base);
	if (rc) {
		judge_free(j);
		return rc;
	}
	*impl = j;
	return 0;
}

/* The judge's request: its instructions, then the case to grade. */
static char *judge_body(const judge_checker *j, const ev_sample *s, const char *answer, size_t len)
{
	char *question = NULL;
	for (size_t i = s->n_messages; i-- > 0 && !question;)
		if (!strcmp(s->messages[i].role, "user"))
			question = ev_message_text(&s->messages[i]);
	ev_buf u = EV_BUF_INIT((size_t)64 << 20);
	ev_buf_printf(&u, "QUESTION:\n%s\n\n", question ? question : "");
	if (s->n_targets) {
		ev_buf_puts(&u, "REFERENCE ANSWER:\n");
		for (size_t i = 0; i < s->n_targets; i++)
			ev_buf_printf(&u, "%s%s", i ? "\nor: " : "", s->targets[i]);
		ev_buf_puts(&u, "\n\n");
	}
	if (j->rubric)
		ev_buf_printf(&u, "RUBRIC:\n%s\n\n", j->rubric);
	ev_buf_puts(&u, "SUBMITTED ANSWER:\n");
	ev_buf_append(&u, answer, len);
	ev_buf_puts(&u, "\n\nGrade the submitted answer.");
	free(question);
	if (!u.data)
		return NULL;
	cJSON *root = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(root, "messages"),
	      *sys = cJSON_CreateObject(), *usr = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "model", j->model_name);
	cJSON_AddStringToObject(sys, "role", "system");
	cJSON_AddStringToObject(sys, "content",
	                        "You grade one answer to a question. Judge it against the reference answer when one is "
	                        "given and against the rubric when one is given; wording does not matter, substance "
	                        "does. Explain in a few sentences, then end with one line: GRADE: C if the answer is "
	                        "correct, GRADE: P if it is partly correct, GRADE: I if it is incorrect.");
	cJSON_AddStringToObject(usr, "role", "user");
	cJSON_AddStringToObject(usr, "content", u.data);
	cJSON_AddItemToArray(msgs, sys);
	cJSON_AddItemToArray(msgs, usr);
	cJSON_AddNumberToObject(root, "temperature", 0);
	cJSON_AddNumberToObject(root, "max_tokens", j->max_tokens);
	char *out = ev_json_print(root);
	cJSON_Delete(root);
	ev_buf_free(&u);
	return out;
}

/* The judge's reply text, after retries of what may pass (network, 429, 5xx). */
static int ask(const judge_checker *j, const char *body, char **reply)
{
	int rc = 0;
	for (int attempt = 0; attempt <= j->retries; attempt++) {
		if (attempt) {
			struct timespec ts = {attempt, 0}; /* 1 s, 2 s, ... */
			nanosleep(&ts, NULL);
		}
		ev_buf b = EV_BUF_INIT(JUDGE_MAX_REPLY);
		long code = 0;
		rc = exchange(j, j->chat_url, body, j->timeout_ms, &code, &b);
		bool again = rc != 0 || code == 429 || code >= 500;
		if (!rc && code != 200)
			rc = ev_error_set(EV_E_BACKEND, "judge at %s: HTTP %ld: %.200s", j->chat_url, code, b.data ? b.data : "");
		cJSON *root = NULL;
		if (!rc && !(rc = ev_json_parse(&root, b.data ? b.data : "", b.len, "judge reply"))) {
			const cJSON *msg = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0), "message");
			const char *t = ev_json_str(msg, "content", NULL);
			if (!t)
				rc = ev_error_set(EV_E_BACKEND, "judge at %s: a reply without content", j->chat_url);
			else if (!(*reply = ev_strdup(t)))
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
		}
		cJSON_Delete(root);
		ev_buf_free(&b);
		if (!rc || !again)
			break;
	}
	return rc;
}

static int judge_score(const void *impl, const ev_sample *s, const char *answer, size_t len, ev_check_out *out)
{
	const judge_checker *j = impl;
	char *body = judge_body(j, s, answer, len), *reply = NULL;
	if (!body)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ask(j, body, &reply);
	free(body);
	if (rc)
		return rc;
	bool unclosed = false;
	char *said = ev_strip_thinking(reply, &unclosed);
	free(reply);
	if (!said)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(j->grade.code, NULL);
	size_t off = 0, slen = strlen(said);
	char grade = 0;
	while (md && ev_rx_next(&j->grade, j->mctx, md, said, slen, &off) == 1) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		grade = (char)(said[ov[2]] & ~0x20); /* the last one counts */
	}
	pcre2_match_data_free(md);
	if (!grade) {
		rc = ev_error_set(EV_E_BACKEND, "judge %s gave no grade (GRADE: C, P or I): \"%.200s\"", j->model_name, said);
		free(said);
		return rc;
	}
	out->score = grade == 'C' ? 1.0 : grade == 'P' ? 0.5 : 0.0;
	out->reason = grade == 'C' ? EV_REASON_NONE : EV_REASON_WRONG_ANSWER;
	out->extracted = ev_strndup(&grade, 1);
	out->detail = ev_asprintf("judge %s: %s", j->model_name, said);
	free(said);
	return out->extracted && out->detail ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

const ev_checker_type ev_checker_judge = {"judge", judge_fields, judge_parse, judge_score, judge_free};
