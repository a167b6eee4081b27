/*
 * agent.c: the agent loop for multi-turn tool use.
 *
 * One sample at a time: build its environment (suites' ev_env) from
 * metadata.environment or tests.environment, send the messages with the
 * environment's tools and the sample's own, execute every call the model
 * makes (native OpenAI tool_calls, or <tool_call> blocks in the text for
 * backends without native tools, read with scoring's ev_toolcalls_parse),
 * answer each with a tool message, and stop at the first answer without
 * calls or at a limit. Then score the end state against tests.expected_state
 * (subset match) and the final answer against tests.required_facts.
 *
 * Messages appended during the loop live in one arena freed at the end.
 */
#include "runners/runners_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARENA_MAX ((size_t)512 << 20)
#define MAX_CALLS_PER_TURN 64
#define MAX_FACTS 64
#define POLL_WAIT_S 0.05

void ev_agent_result_clear(ev_agent_result *r)
{
	if (!r)
		return;
	free(r->detail);
	free(r->final_text);
	free(r->tool_calls_json);
	free(r->state_json);
	free(r->first_request_json);
	free(r->finish_reason);
	free(r->agents_json);
	memset(r, 0, sizeof *r);
}

static const cJSON *env_spec(const cJSON *meta, const cJSON *tests)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(meta, "environment");
	return e ? e : cJSON_GetObjectItemCaseSensitive(tests, "environment");
}

bool ev_agent_wants(const ev_suite *suite, const ev_sample *s)
{
	if (suite && suite->kind && !strcmp(suite->kind, "tool-use-multiturn"))
		return true;
	bool yes = false;
	const char *texts[2] = {s->metadata_json, s->tests_json};
	for (int i = 0; i < 2 && !yes; i++) {
		if (!texts[i] || !strstr(texts[i], "\"environment\""))
			continue; /* cheap test first: most samples have none */
		cJSON *j = cJSON_Parse(texts[i]);
		yes = cJSON_GetObjectItemCaseSensitive(j, "environment") != NULL;
		cJSON_Delete(j);
	}
	return yes;
}

/* ---- the conversation ------------------------------------------------------ */

typedef struct {
	ev_arena *arena;
	ev_message *msgs;
	size_t n, cap;
} convo;

static int convo_push(convo *c, const ev_message *m)
{
	if (EV_GROW(c->msgs, c->cap, c->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	c->msgs[c->n++] = *m;
	return 0;
}

/* Appends a message with one text part (text may be NULL: no parts). */
static int convo_add(convo *c, const char *role, const char *text, const char *tool_calls_json,
                     const char *tool_call_id, const char *name)
{
	ev_message m;
	memset(&m, 0, sizeof m);
	m.role = ev_arena_strdup(c->arena, role);
	bool ok = m.role != NULL;
	if (text && *text) {
		m.parts = ev_arena_alloc(c->arena, sizeof *m.parts);
		ok = ok && m.parts;
		if (m.parts) {
			memset(m.parts, 0, sizeof *m.parts);
			m.parts->kind = EV_PART_TEXT;
			ok = ok && (m.parts->text = ev_arena_strdup(c->arena, text));
			m.n_parts = 1;
		}
	}
	if (tool_calls_json)
		ok = ok && (m.tool_calls_json = ev_arena_strdup(c->arena, tool_calls_json));
	if (tool_call_id)
		ok = ok && (m.tool_call_id = ev_arena_strdup(c->arena, tool_call_id));
	if (name)
		ok = ok && (m.name = ev_arena_strdup(c->arena, name));
	if (!ok)
		return ev_error_set(EV_E_LIMIT, "agent: the conversation outgrew %zu MiB", ARENA_MAX >> 20);
	return convo_push(c, &m);
}

/* ---- reading the calls of one completion ------------------------------------- */

typedef struct {
	char *id;
	char *name;
	char *args; /* JSON text as the model wrote it */
} call;

static void calls_free(call *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].name);
		free(v[i].args);
	}
	free(v);
}

/* The calls of a completion: its native tool_calls, else <tool_call>
 * blocks in its text. *n_out = 0 means a final answer. */
static int read_calls(call **out, size_t *n_out, const ev_completion *c, int turn)
{
	*out = NULL;
	*n_out = 0;
	call *v = calloc(MAX_CALLS_PER_TURN, sizeof *v);
	size_t n = 0;
	int rc = 0;
	if (!v)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (c->tool_calls_json) {
		cJSON *arr = cJSON_Parse(c->tool_calls_json);
		const cJSON *tc;
		cJSON_ArrayForEach(tc, arr) {
			if (n >= MAX_CALLS_PER_TURN)
				break;
			const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
			const char *id = ev_json_str(tc, "id", NULL);
			v[n].id = id && *id ? ev_strdup(id) : ev_asprintf("call_%d_%zu", turn, n);
			v[n].name = ev_strdup(ev_json_str(f, "name", ""));
			v[n].args = cJSON_IsString(a) ? ev_strdup(a->valuestring) : a ? ev_json_print(a) : ev_strdup("{}");
			if (!v[n].id || !v[n].name || !v[n].args) {
				n++;
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				break;
			}
			n++;
		}
		cJSON_Delete(arr);
	} else if (c->text && strstr(c->text, "<tool_call>")) {
		/* A backend without native tools: the model wrote its calls. */
		ev_toolcalls *l = NULL;
		if (ev_toolcalls_parse(&l, NULL, c->text) == 0) {
			for (size_t i = 0; i < ev_toolcalls_count(l) && n < MAX_CALLS_PER_TURN; i++, n++) {
				const ev_toolcall *t = ev_toolcalls_get(l, i);
				v[n].id = ev_asprintf("call_%d_%zu", turn, n);
				v[n].name = ev_strdup(t->name);
				v[n].args = ev_strdup(t->arguments_json);
				if (!v[n].id || !v[n].name || !v[n].args) {
					n++;
					rc = ev_error_set(EV_E_NOMEM, "out of memory");
					break;
				}
			}
		} else {
			/* Unreadable calls: answered with an error so the model can
			 * try again, rather than taken as a final answer. */
			v[0].id = ev_asprintf("call_%d_0", turn);
			v[0].name = ev_strdup("(unreadable)");
			v[0].args = ev_strdup("{}");
			n = 1;
			if (!v[0].id || !v[0].name || !v[0].args)
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
		}
		ev_toolcalls_free(l);
	}
	if (rc) {
		calls_free(v, n);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* The OpenAI tool_calls array for calls (appended to `all` too). */
static char *calls_json(const call *v, size_t n, cJSON *all)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject(), *f = NULL;
		if (!o || !cJSON_AddStringToObject(o, "id", v[i].id) || !cJSON_AddStringToObject(o, "type", "function") ||
		    !(f = cJSON_AddObjectToObject(o, "function")) || !cJSON_AddStringToObject(f, "name", v[i].name) ||
		    !cJSON_AddStringToObject(f, "arguments", v[i].args)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
		cJSON_AddItemToArray(arr, o);
		cJSON *dup = cJSON_Duplicate(o, true);
		if (dup)
			cJSON_AddItemToArray(all, dup);
	}
	char *t = arr ? ev_json_print(arr) : NULL;
	cJSON_Delete(arr);
	return t;
}

/* ---- tools ----------------------------------------------------------------- */

/* The environment's tools, then the sample's own whose names the
 * environment does not take. malloc'd JSON, or NULL when there are none. */
static int merge_tools(char **out, const ev_env *env, const char *sample_tools)
{
	*out = NULL;
	cJSON *all = env ? cJSON_Parse(ev_env_tools_json(env)) : cJSON_CreateArray();
	cJSON *own = sample_tools ? cJSON_Parse(sample_tools) : NULL;
	int rc = 0;
	if (!all) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	const cJSON *t;
	cJSON_ArrayForEach(t, own) {
		const char *name = ev_json_str(cJSON_GetObjectItemCaseSensitive(t, "function"), "name", NULL);
		if (env && name && ev_env_has_tool(env, name))
			continue;
		cJSON *d = cJSON_Duplicate(t, true);
		if (!d) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		cJSON_AddItemToArray(all, d);
	}
	if (cJSON_GetArraySize(all) > 0 && !(*out = ev_json_print(all)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	cJSON_Delete(all);
	cJSON_Delete(own);
	return rc;
}

/* ---- one request ----------------------------------------------------------------- */

/* Submits the request and waits for its completion. */
static int ask(ev_backend *b, const ev_request *req, ev_completion *out)
{
	memset(out, 0, sizeof *out);
	int rc = ev_backend_submit(b, req);
	if (rc)
		return ev_error_wrap(rc, "agent: submitting a request");
	for (;;) {
		ev_completion c;
		int n = ev_backend_poll(b, &c, 1, POLL_WAIT_S);
		if (n < 0)
			return n;
		if (n == 0)
			continue;
		if (c.cookie == req->cookie) {
			*out = c;
			return 0;
		}
		/* Not ours: the caller broke the contract (nothing else in
		 * flight). Drop it rather than mistake it for our answer. */
		ev_log_warn("agent: dropping a completion that belongs to another request");
		ev_completion_clear(&c);
	}
}

/* ---- scoring ------------------------------------------------------------------- */

static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	if (n == 0)
		return true;
	for (const char *p = hay; *p; p++)
		if (!strncasecmp(p, needle, n))
			return true;
	return false;
}

/* Scores the end state and the final answer into out. */
static int score_end(ev_agent_result *out, const cJSON *tests, const char *final_text, bool truncated)
{
	ev_buf d = EV_BUF_INIT((size_t)64 << 10);
	bool pass = true;
	int rc = 0;
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(tests, "expected_state");
	if (exp) {
		char *e = ev_json_print(exp), *why = NULL;
		bool ok = false;
		rc = e ? ev_env_state_match(&ok, &why, out->state_json, e) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(e);
		if (rc) {
			free(why);
			goto done;
		}
		if (!ok) {
			pass = false;
			ev_buf_printf(&d, "state: %s", why ? why : "differs");
		}
		free(why);
	}
	bool unclosed = false;
	char *answer = ev_strip_thinking(final_text ? final_text : "", &unclosed);
	if (!answer) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(tests, "required_facts")) {
		if (!contains_ci(answer, f->valuestring)) {
			pass = false;
			ev_buf_printf(&d, "%smissing fact \"%.200s\"", d.len ? "; " : "", f->valuestring);
		}
	}
	free(answer);
	out->score = pass ? 1.0 : 0.0;
	out->reason = pass ? EV_REASON_NONE : truncated ? EV_REASON_TRUNCATED : EV_REASON_WRONG_ANSWER;
	if (!pass && !(out->detail = ev_buf_detach(&d, NULL)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	ev_buf_free(&d);
	return rc;
}

/* Validates tests.expected_state / tests.required_facts. */
static int check_tests(const cJSON *tests, const char *what)
{
	if (!tests)
		return 0;
	if (!cJSON_IsObject(tests))
		return ev_error_set(EV_E_INVALID, "%s: tests: expected an object", what);
	const cJSON *facts = cJSON_GetObjectItemCaseSensitive(tests, "required_facts");
	if (facts && (!cJSON_IsArray(facts) || cJSON_GetArraySize(facts) > MAX_FACTS))
		return ev_error_set(EV_E_INVALID, "%s: tests.required_facts: expected a list of at most %d strings", what,
		                    MAX_FACTS);
	const cJSON *f;
	cJSON_ArrayForEach(f, facts) {
		if (!cJSON_IsString(f))
			return ev_error_set(EV_E_INVALID, "%s: tests.required_facts: expected strings", what);
	}
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(tests, "expected_state");
	if (exp && !cJSON_IsObject(exp))
		return ev_error_set(EV_E_INVALID, "%s: tests.expected_state: expected an object", what);
	return 0;
}

/* ---- agents: an orchestrator and the workers it delegates to ---------------------- */

#define MAX_WORKERS 8

/* A worker as metadata.agents.workers describes it; the orchestrator asks
 * it through the tool ask_<name>(task). */
typedef struct {
	const char *name, *description, *system;
	char *tools;   /* its tools (a subset of the environment's), JSON, or NULL */
	int route;     /* the model that plays it (a router's, 1-based), 0: the orchestrator's */
	int max_turns;
} worker;

typedef struct {
	ev_backend *b;
	const ev_gen *gen;
	ev_agent_options o;
	ev_env *env;
	cJSON *all_calls;
	double t0;
	worker w[MAX_WORKERS];
	int n_workers;
	cJSON *acct; /* {agent: {turns, prompt_tokens, completion_tokens, thinking_tokens, tool_calls, delegations}} */
	ev_agent_result *out;
	const char *what;
	ev_arena *arena; /* the sample's: every agent's messages */
} agent_ctx;

/* How one conversation ended. */
typedef struct {
	bool answered, truncated;
	char *final_text;
	const char *limit;
	char limit_detail[160];
} convo_end;

/* The environment's tools named in `names` (a JSON array of strings), as
 * JSON; a name the environment lacks is the suite's error. */
static int pick_tools(char **out, const ev_env *env, const cJSON *names, const char *what)
{
	*out = NULL;
	if (!names || (cJSON_IsArray(names) && cJSON_GetArraySize(names) == 0))
		return 0;
	if (!cJSON_IsArray(names))
		return ev_error_set(EV_E_INVALID, "%s: tools: expected a list of tool names", what);
	cJSON *all = env ? cJSON_Parse(ev_env_tools_json(env)) : NULL, *keep = cJSON_CreateArray();
	const cJSON *n, *t;
	int rc = keep ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(n, names)
	{
		if (rc)
			break;
		if (!cJSON_IsString(n) || !env || !ev_env_has_tool(env, n->valuestring)) {
			rc = ev_error_set(EV_E_INVALID, "%s: tools: '%.64s' is not a tool of the environment", what,
			                  cJSON_IsString(n) ? n->valuestring : "?");
			break;
		}
		cJSON_ArrayForEach(t, all)
		{
			if (!strcmp(ev_json_str(cJSON_GetObjectItemCaseSensitive(t, "function"), "name", ""), n->valuestring))
				cJSON_AddItemToArray(keep, cJSON_Duplicate(t, true));
		}
	}
	if (!rc && !(*out = ev_json_print(keep)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(all);
	cJSON_Delete(keep);
	return rc;
}

/* True when tools (a JSON array) offers `name`: an agent calls only its own. */
static bool tool_offered(const char *tools, const char *name)
{
	cJSON *arr = tools ? cJSON_Parse(tools) : NULL;
	const cJSON *t;
	bool yes = false;
	cJSON_ArrayForEach(t, arr)
	{
		yes = yes || !strcmp(ev_json_str(cJSON_GetObjectItemCaseSensitive(t, "function"), "name", ""), name);
	}
	cJSON_Delete(arr);
	return yes;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* The orchestrator's tool for worker k: ask_<name>(task). */
static cJSON *ask_tool(const worker *k)
{
	cJSON *t = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(t, "function"), *pr, *props, *task, *req;
	char *nm = ev_asprintf("ask_%s", k->name);
	cJSON_AddStringToObject(t, "type", "function");
	cJSON_AddStringToObject(f, "name", nm ? nm : "");
	free(nm);
	cJSON_AddStringToObject(f, "description", *k->description ? k->description : "Delegate a task to this agent.");
	pr = cJSON_AddObjectToObject(f, "parameters");
	cJSON_AddStringToObject(pr, "type", "object");
	props = cJSON_AddObjectToObject(pr, "properties");
	task = cJSON_AddObjectToObject(props, "task");
	cJSON_AddStringToObject(task, "type", "string");
	cJSON_AddStringToObject(task, "description", "what the agent should do, in full");
	req = cJSON_AddArrayToObject(pr, "required");
	cJSON_AddItemToArray(req, cJSON_CreateString("task"));
	return t;
}

/* Reads metadata.agents: the workers, and the tools the orchestrator keeps
 * (none unless "orchestrator": {"tools": [...]}); *orch_tools gets them
 * with one ask_<worker> tool a worker. */
static int read_agents(agent_ctx *a, const cJSON *agents, char **orch_tools, const char **orch_system)
{
	*orch_tools = NULL;
	*orch_system = NULL;
	char what[400];
	snprintf(what, sizeof what, "%s: metadata.agents", a->what);
	const cJSON *ws = cJSON_GetObjectItemCaseSensitive(agents, "workers"), *w;
	if (!cJSON_IsObject(agents) || !cJSON_IsArray(ws) || cJSON_GetArraySize(ws) < 1 ||
	    cJSON_GetArraySize(ws) > MAX_WORKERS)
		return ev_error_set(EV_E_INVALID, "%s: expected {\"workers\": [1 to %d workers], \"orchestrator\"?: {...}}",
		                    what, MAX_WORKERS);
	cJSON *tools = cJSON_CreateArray();
	int rc = tools ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(w, ws)
	{
		if (rc)
			break;
		worker *k = &a->w[a->n_workers];
		char ww[480];
		snprintf(ww, sizeof ww, "%s.workers[%d]", what, a->n_workers);
		k->name = ev_json_str(w, "name", "");
		k->description = ev_json_str(w, "description", "");
		k->system = ev_json_str(w, "system", NULL);
		double route = ev_json_num(w, "model", 0), turns = ev_json_num(w, "max_turns", 0);
		if (!name_ok(k->name)) {
			rc = ev_error_set(EV_E_INVALID, "%s: name: 1 to 32 of a-z, 0-9, _", ww);
			break;
		}
		for (int i = 0; !rc && i < a->n_workers; i++)
			if (!strcmp(a->w[i].name, k->name))
				rc = ev_error_set(EV_E_INVALID, "%s: name '%s' given twice", ww, k->name);
		if (!rc && (strlen(k->description) > 2000 || (k->system && strlen(k->system) > 16000)))
			rc = ev_error_set(EV_E_INVALID, "%s: description (2,000 bytes) or system (16,000) too long", ww);
		if (!rc && (route < 0 || route > EV_ROUTE_MAX_MODELS || route != (int)route || turns < 0 || turns > 100 ||
		            turns != (int)turns))
			rc = ev_error_set(EV_E_INVALID, "%s: model (1..%d) or max_turns (1..100) out of range", ww,
			                  EV_ROUTE_MAX_MODELS);
		if (rc)
			break;
		k->route = (int)route;
		k->max_turns = turns > 0 ? (int)turns : a->o.max_turns;
		a->n_workers++;
		if ((rc = pick_tools(&k->tools, a->env, cJSON_GetObjectItemCaseSensitive(w, "tools"), ww)))
			break;
		cJSON *t = ask_tool(k);
		if (!t)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		else
			cJSON_AddItemToArray(tools, t);
	}
	const cJSON *orch = cJSON_GetObjectItemCaseSensitive(agents, "orchestrator");
	char *own = NULL;
	if (!rc && orch) {
		*orch_system = ev_json_str(orch, "system", NULL);
		if (!(rc = pick_tools(&own, a->env, cJSON_GetObjectItemCaseSensitive(orch, "tools"), what))) {
			cJSON *o = own ? cJSON_Parse(own) : NULL, *t;
			cJSON_ArrayForEach(t, o)
			{
				cJSON_AddItemToArray(tools, cJSON_Duplicate(t, true));
			}
			cJSON_Delete(o);
		}
	}
	free(own);
	if (!rc && !(*orch_tools = ev_json_print(tools)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(tools);
	return rc;
}

static const worker *worker_of(const agent_ctx *a, const char *tool)
{
	for (int i = 0; ev_str_starts(tool, "ask_") && i < a->n_workers; i++)
		if (!strcmp(a->w[i].name, tool + 4))
			return &a->w[i];
	return NULL;
}

/* Adds n to agent's counter `key`. */
static void account(agent_ctx *a, const char *agent, const char *key, double n)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(a->acct, agent);
	if (!o) {
		o = cJSON_AddObjectToObject(a->acct, agent);
		static const char *const keys[] = {"turns", "prompt_tokens", "completion_tokens", "thinking_tokens",
		                                   "tool_calls", "delegations"};
		for (size_t i = 0; o && i < sizeof keys / sizeof *keys; i++)
			cJSON_AddNumberToObject(o, keys[i], 0);
	}
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (v)
		cJSON_SetNumberValue(v, v->valuedouble + n);
}

static int converse(agent_ctx *a, const char *who, convo *cv, const char *tools, int route, int max_turns, int depth,
                    convo_end *end);

/* A worker's turn at a task: its own conversation (its system message and
 * the task), its own tools, to its final answer; the answer (thinking
 * removed) or why it gave none comes back as the tool's result. */
static int delegate(agent_ctx *a, const worker *w, const char *args, char **result)
{
	*result = NULL;
	cJSON *j = cJSON_Parse(args);
	const char *task = ev_json_str(j, "task", NULL);
	int rc = 0;
	if (!task || !*task) {
		cJSON_Delete(j);
		*result = ev_strdup("{\"error\":\"give the agent a task: {\\\"task\\\": \\\"...\\\"}\"}");
		return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	account(a, w->name, "delegations", 1);
	convo cv;
	memset(&cv, 0, sizeof cv);
	cv.arena = a->arena;
	if (w->system)
		rc = convo_add(&cv, "system", w->system, NULL, NULL, NULL);
	if (!rc)
		rc = convo_add(&cv, "user", task, NULL, NULL, NULL);
	cJSON_Delete(j);
	convo_end end;
	memset(&end, 0, sizeof end);
	if (!rc)
		rc = converse(a, w->name, &cv, w->tools, w->route ? w->route : a->o.route, w->max_turns, 1, &end);
	free(cv.msgs);
	if (rc || a->out->failed) {
		free(end.final_text);
		return rc;
	}
	cJSON *r = cJSON_CreateObject();
	if (end.answered) {
		char *ans = ev_strip_thinking(end.final_text ? end.final_text : "", NULL);
		cJSON_AddStringToObject(r, "answer", ans ? ans : "");
		free(ans);
	} else {
		char *why = ev_asprintf("the agent gave no answer (%s: %s)", end.limit, end.limit_detail);
		cJSON_AddStringToObject(r, "error", why ? why : "the agent gave no answer");
		free(why);
	}
	free(end.final_text);
	if (!(*result = ev_json_print(r)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(r);
	return rc;
}

/* One agent's conversation, from cv's messages to a final answer (a
 * completion without calls) or a limit. Its calls run in the environment
 * when they are its own tools, or, for the orchestrator (depth 0), as
 * delegations. A backend failure sets a->out->failed and ends everything. */
static int converse(agent_ctx *a, const char *who, convo *cv, const char *tools, int route, int max_turns, int depth,
                    convo_end *end)
{
	ev_agent_result *out = a->out;
	const ev_agent_options *o = &a->o;
	int rc = 0;
	for (int turn = 0;; turn++) {
		if (turn >= max_turns) {
			end->limit = "turn_limit";
			snprintf(end->limit_detail, sizeof end->limit_detail, "%d turns without a final answer", max_turns);
			return 0;
		}
		if (turn > 0 && o->max_wall_s > 0 && ev_now() - a->t0 > o->max_wall_s) {
			end->limit = "time_limit";
			snprintf(end->limit_detail, sizeof end->limit_detail, "%.1f s without a final answer (limit %.1f s)",
			         ev_now() - a->t0, o->max_wall_s);
			return 0;
		}
		long left = o->max_tokens > 0 ? o->max_tokens - out->completion_tokens : 0;
		if (o->max_tokens > 0 && left <= 0) {
			end->limit = "token_limit";
			snprintf(end->limit_detail, sizeof end->limit_detail, "%d completion tokens without a final answer",
			         out->completion_tokens);
			return 0;
		}
		ev_request req;
		memset(&req, 0, sizeof req);
		req.model = o->model;
		req.route = route;
		req.messages = cv->msgs;
		req.n_messages = cv->n;
		req.tools_json = tools;
		req.gen = a->gen ? *a->gen : (ev_gen)EV_GEN_INIT;
		if (o->max_tokens > 0 && (req.gen.max_tokens <= 0 || req.gen.max_tokens > left))
			req.gen.max_tokens = left > 1000000 ? 1000000 : (int)left;
		req.suite_root = o->suite_root;
		req.cookie = &req;
		if (depth == 0 && turn == 0 && (rc = ev_request_to_json(&out->first_request_json, &req, false)))
			return ev_error_wrap(rc, "%s", a->what);
		ev_completion c;
		if ((rc = ask(a->b, &req, &c)))
			return rc;
		out->turns++;
		out->prompt_tokens += c.prompt_tokens;
		out->completion_tokens += c.completion_tokens;
		out->thinking_tokens += c.thinking_tokens;
		out->latency_s += c.latency_s;
		out->attempts += c.attempts;
		account(a, who, "turns", 1);
		account(a, who, "prompt_tokens", c.prompt_tokens);
		account(a, who, "completion_tokens", c.completion_tokens);
		account(a, who, "thinking_tokens", c.thinking_tokens);
		free(out->finish_reason);
		out->finish_reason = ev_strdup(c.finish_reason);
		if (c.status != EV_COMPLETION_OK) {
			out->failed = true;
			out->reason = c.status == EV_COMPLETION_TIMEOUT ? EV_REASON_TIMEOUT : EV_REASON_BACKEND_ERROR;
			out->detail = ev_asprintf("%s turn %d: %s", who, turn + 1, c.error ? c.error : "backend failed");
			ev_completion_clear(&c);
			return 0;
		}
		call *calls = NULL;
		size_t n_calls = 0;
		if ((rc = read_calls(&calls, &n_calls, &c, turn))) {
			ev_completion_clear(&c);
			return rc;
		}
		if (n_calls == 0) {
			calls_free(calls, 0);
			end->answered = true;
			end->truncated = c.finish_reason && !strcmp(c.finish_reason, "length");
			end->final_text = c.text;
			c.text = NULL;
			ev_completion_clear(&c);
			return 0;
		}
		char *tcj = calls_json(calls, n_calls, a->all_calls);
		rc = tcj ? convo_add(cv, "assistant", c.text, tcj, NULL, NULL) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(tcj);
		ev_completion_clear(&c);
		for (size_t i = 0; !rc && i < n_calls; i++) {
			char *res = NULL;
			const worker *w = depth == 0 ? worker_of(a, calls[i].name) : NULL;
			if (!strcmp(calls[i].name, "(unreadable)"))
				res = ev_asprintf("{\"error\":\"the tool call could not be read: write <tool_call>{\\\"name\\\": "
				                  "..., \\\"arguments\\\": {...}}</tool_call>\"}");
			else if (w)
				rc = delegate(a, w, calls[i].args, &res);
			else if (a->env && ev_env_has_tool(a->env, calls[i].name) && tool_offered(tools, calls[i].name))
				rc = ev_env_execute(a->env, calls[i].name, calls[i].args, &res);
			else
				res = ev_asprintf("{\"error\":\"unknown tool '%.100s'\"}", calls[i].name);
			if (!rc && out->failed) { /* a worker's backend failed: the sample ends */
				free(res);
				calls_free(calls, n_calls);
				return 0;
			}
			if (!rc && !res)
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
			if (!rc)
				rc = convo_add(cv, "tool", res, NULL, calls[i].id, calls[i].name);
			free(res);
			out->n_tool_calls++;
			account(a, who, "tool_calls", 1);
		}
		calls_free(calls, n_calls);
		if (rc)
			return rc;
	}
}

/* ---- the loop ----------------------------------------------------------------- */

int ev_agent_run(ev_backend *b, const ev_sample *s, const ev_gen *gen, const ev_agent_options *opt,
                 ev_agent_result *out)
{
	memset(out, 0, sizeof *out);
	agent_ctx a;
	memset(&a, 0, sizeof a);
	a.b = b, a.gen = gen, a.out = out;
	a.o = opt ? *opt : (ev_agent_options)EV_AGENT_OPTIONS_INIT;
	if (a.o.max_turns <= 0)
		a.o.max_turns = 10;
	char what[320];
	snprintf(what, sizeof what, "sample %.200s (line %zu)", s->id ? s->id : "?", s->line);
	a.what = what;
	cJSON *meta = NULL, *tests = NULL;
	char *tools = NULL, *spec = NULL;
	const char *orch_system = NULL;
	convo cv;
	memset(&cv, 0, sizeof cv);
	convo_end end;
	memset(&end, 0, sizeof end);
	int rc = 0;
	a.t0 = ev_now();

	if ((s->metadata_json && (rc = ev_json_parse(&meta, s->metadata_json, strlen(s->metadata_json), what))) ||
	    (s->tests_json && (rc = ev_json_parse(&tests, s->tests_json, strlen(s->tests_json), what))) ||
	    (rc = check_tests(tests, what)))
		goto done;
	const cJSON *es = env_spec(meta, tests);
	if (es) {
		char ew[400];
		snprintf(ew, sizeof ew, "%s: environment", what);
		if (!(spec = ev_json_print(es))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if ((rc = ev_env_new(&a.env, spec, ew)))
			goto done;
	}
	const cJSON *agents = cJSON_GetObjectItemCaseSensitive(meta, "agents");
	if (!(a.acct = cJSON_CreateObject()) || !(a.all_calls = cJSON_CreateArray())) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = agents ? read_agents(&a, agents, &tools, &orch_system) : merge_tools(&tools, a.env, s->tools_json)) ||
	    (rc = ev_arena_new(&cv.arena, ARENA_MAX)))
		goto done;
	a.arena = cv.arena;
	if (orch_system && (rc = convo_add(&cv, "system", orch_system, NULL, NULL, NULL)))
		goto done;
	for (size_t i = 0; i < s->n_messages; i++)
		if ((rc = convo_push(&cv, &s->messages[i])))
			goto done;

	rc = converse(&a, agents ? "orchestrator" : "agent", &cv, tools, a.o.route, a.o.max_turns, 0, &end);
	out->final_text = end.final_text;
	if (rc)
		goto done;
	if (cJSON_GetArraySize(a.all_calls) > 0 && !(out->tool_calls_json = ev_json_print(a.all_calls))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (agents && !(out->agents_json = ev_json_print(a.acct))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (a.env && (rc = ev_env_state_json(a.env, &out->state_json)))
		goto done;
	if (!a.env && !(out->state_json = ev_strdup("{}"))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (out->failed)
		goto done;
	if (!end.answered) {
		out->score = 0;
		out->reason = EV_REASON_NO_ANSWER;
		out->detail = ev_asprintf("%s: %s", end.limit, end.limit_detail);
		goto done;
	}
	rc = score_end(out, tests, out->final_text, end.truncated);
done:
	if (rc) {
		ev_error_wrap(rc, "agent");
		ev_agent_result_clear(out);
	}
	free(cv.msgs);
	ev_arena_free(cv.arena);
	free(tools);
	free(spec);
	for (int i = 0; i < a.n_workers; i++)
		free(a.w[i].tools);
	ev_env_free(a.env);
	cJSON_Delete(a.all_calls);
	cJSON_Delete(a.acct);
	cJSON_Delete(meta);
	cJSON_Delete(tests);
	return rc;
}
