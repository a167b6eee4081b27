/* A team tracker: `evald serve` taking runs from many `evald run --tracker
 * URL` at once. Three concurrent runs against the fixture server land whole
 * (every result once, each run finished, its summary there); the server
 * stopped and started again mid-run loses nothing (the client queues and
 * sends again); a run killed mid-way is finished by `--resume N --tracker`
 * without duplicates; a create or a batch sent twice stores once; runs,
 * report and compare read the server; a wrong token is refused before
 * anything is stored; commands that write are refused with --tracker. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "team-token-1"

static char *dir, *db;

static pid_t serve(int port, int *got)
{
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		char p[16];
		snprintf(p, sizeof p, "%d", port);
		setenv("EVALD_API_TOKEN", TOKEN, 1);
		execl(tu_evald(), tu_evald(), "-q", "--db", db, "serve", "--port", p, "--print-port", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	assert_true(f && fscanf(f, "%d", got) == 1);
	fclose(f);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

static long q(const char *sql)
{
	char *o = NULL, *e = NULL;
	if (tu_sh(&o, &e, "sqlite3 %s \"%s\"", db, sql))
		fail_msg("sqlite3: %s", e);
	long n = atol(o);
	free(o), free(e);
	return n;
}

/* `evald run --tracker` in the background: its pid. */
static pid_t run_bg(const char *url, const char *model, const char *suite, const char *name)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", 1);
		dup2(nul, 1);
		setenv("EVALD_API_TOKEN", TOKEN, 1);
		/* short retries: while the server is away, batches wait in the queue */
		setenv("EVALD_TRACKER_RETRY_S", "0.3", 1);
		execl(tu_evald(), tu_evald(), "--db", "/nonexistent/never-used.db", "run", "--tracker", url, "--model",
		      model, "--model-name", name, "--suite", suite, "--concurrency", "2", "--no-cache", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int wait_rc(pid_t pid)
{
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *suite_of(const char *name, int n, int latency_ms)
{
	ev_buf s = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < n; i++)
		ev_buf_printf(&s, "{\"id\":\"%s-%d\",\"input\":\"[[latency=%d]] say %s %d\",\"target\":\"%s %d\"}\n", name, i,
		              latency_ms, name, i, name, i);
	char file[64];
	snprintf(file, sizeof file, "%s.jsonl", name);
	char *p = tu_write(dir, file, s.data);
	ev_buf_free(&s);
	return p;
}

static void many_writers_a_restart_and_a_resume(void **state)
{
	(void)state;
	dir = tu_tmpdir("team");
	db = tu_path(dir, "team.db");
	tu_server fx;
	const char *none[] = {NULL};
	assert_int_equal(tu_server_start(&fx, none), 0);
	int port = 0;
	pid_t srv = serve(0, &port);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d", port);

	/* three writers at once */
	char *s[3] = {suite_of("alpha", 40, 5), suite_of("beta", 40, 5), suite_of("gamma", 40, 5)};
	pid_t w[3];
	for (int i = 0; i < 3; i++)
		w[i] = run_bg(url, fx.url, s[i], i == 0 ? "m-a" : i == 1 ? "m-b" : "m-c");
	for (int i = 0; i < 3; i++)
		assert_int_equal(wait_rc(w[i]), 0);
	assert_int_equal(q("SELECT count(*) FROM runs"), 3);
	assert_int_equal(q("SELECT count(*) FROM results"), 120);
	assert_int_equal(q("SELECT count(*) FROM (SELECT DISTINCT run_id, suite, sample_id, epoch FROM results)"), 120);
	assert_int_equal(q("SELECT count(*) FROM runs WHERE status = 'finished' AND summary_json IS NOT NULL"), 3);
	/* the fixture echoes: every answer holds its target */
	assert_int_equal(q("SELECT count(*) FROM results WHERE score = 1"), 120);

	/* the server stopped and started again mid-run: nothing lost */
	/* 40 answers of 150 ms, 2 at a time: 3 s; batches go at the first result
	 * and every 2 s; the server is away from 1 s to 3 s, so the batch of
	 * about 2.2 s cannot be sent and waits in the queue */
	char *slow = suite_of("slow", 40, 150);
	pid_t r = run_bg(url, fx.url, slow, "m-slow");
	usleep(1000 * 1000);
	stop(srv);
	usleep(2000 * 1000);
	int again = 0;
	srv = serve(port, &again);
	assert_int_equal(again, port);
	assert_int_equal(wait_rc(r), 0);
	assert_int_equal(q("SELECT count(*) FROM results WHERE suite = 'slow'"), 40);
	assert_int_equal(q("SELECT count(*) FROM runs WHERE model_id = (SELECT id FROM models WHERE name = 'm-slow') AND "
	                   "status = 'finished'"),
	                 1);

	/* a run killed mid-way, finished by --resume through the tracker */
	char *res = suite_of("resumed", 30, 100);
	r = run_bg(url, fx.url, res, "m-res");
	usleep(700 * 1000);
	kill(r, SIGKILL);
	waitpid(r, NULL, 0);
	long id = q("SELECT id FROM runs ORDER BY id DESC LIMIT 1"), before = q("SELECT count(*) FROM results WHERE suite = 'resumed'");
	assert_true(before < 30);
	char idtxt[24];
	snprintf(idtxt, sizeof idtxt, "%ld", id);
	setenv("EVALD_API_TOKEN", TOKEN, 1);
	const char *resume[] = {tu_evald(), "-q", "run", "--resume", idtxt, "--tracker", url, NULL};
	char *err = NULL;
	if (tu_run(NULL, &err, NULL, resume))
		fail_msg("resume: %s", err);
	free(err);
	assert_int_equal(q("SELECT count(*) FROM results WHERE suite = 'resumed'"), 30);
	assert_int_equal(q("SELECT count(*) FROM runs WHERE status = 'finished'"), 5);

	/* a create and a batch sent twice store once */
	char *o = NULL, *e = NULL;
	const char *create = "{\"model\":\"dup\",\"key\":\"k-1\",\"epochs\":1,\"n_planned\":1}";
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tu_sh(&o, &e, "curl -s -w ' %%{http_code}' -H 'Authorization: Bearer %s' -d '%s' %s/api/runs",
		                       TOKEN, create, url),
		                 0);
		assert_non_null(strstr(o, i ? "} 200" : "} 201"));
		free(o), free(e);
	}
	long dup = q("SELECT id FROM runs WHERE client_key = 'k-1'");
	const char *batch = "{\"results\":[{\"suite\":\"s\",\"sample_id\":\"x\",\"epoch\":0,\"score\":1,\"reason\":\"\"}]}";
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tu_sh(&o, &e, "curl -s -H 'Authorization: Bearer %s' -d '%s' %s/api/runs/%ld/results", TOKEN,
		                       batch, url, dup),
		                 0);
		free(o), free(e);
	}
	char where[96];
	snprintf(where, sizeof where, "SELECT count(*) FROM results WHERE run_id = %ld", dup);
	assert_int_equal(q(where), 1);
	/* a malformed batch: refused naming the result, nothing stored */
	assert_int_equal(tu_sh(&o, &e, "curl -s -w ' %%{http_code}' -H 'Authorization: Bearer %s' -d "
	                               "'{\"results\":[{\"suite\":\"s\",\"sample_id\":\"y\"},{\"suite\":\"s\",\"score\":\"high\"}]}' "
	                               "%s/api/runs/%ld/results",
	                       TOKEN, url, dup),
	                 0);
	assert_non_null(strstr(o, "results[1]"));
	assert_non_null(strstr(o, " 400"));
	free(o), free(e);
	assert_int_equal(q(where), 1);

	/* reading through the tracker */
	const char *runs[] = {tu_evald(), "runs", "--tracker", url, NULL};
	const char *report[] = {tu_evald(), "report", "1", "--tracker", url, NULL};
	const char *cmp[] = {tu_evald(), "--json", "compare", "1", "2", "--tracker", url, NULL};
	assert_int_equal(tu_run(&o, NULL, NULL, runs), 0);
	assert_non_null(strstr(o, "m-slow"));
	assert_non_null(strstr(o, "30/30"));
	free(o);
	assert_int_equal(tu_run(&o, NULL, NULL, report), 0);
	assert_non_null(strstr(o, "# Run 1: m-")); /* one of the three concurrent ones */
	free(o);
	assert_int_equal(tu_run(&o, NULL, NULL, cmp), 0);
	assert_non_null(strstr(o, "\"suites\""));
	free(o);
	/* writing commands are refused; a wrong token stores nothing */
	const char *issue[] = {tu_evald(), "issue", "list", "--tracker", url, NULL};
	err = NULL;
	assert_int_equal(tu_run(NULL, &err, NULL, issue), 2);
	free(err);
	long nruns = q("SELECT count(*) FROM runs");
	setenv("EVALD_API_TOKEN", "wrong", 1);
	const char *bad[] = {tu_evald(), "-q", "run", "--tracker", url, "--model", fx.url, "--suite", s[0], NULL};
	err = NULL;
	assert_int_not_equal(tu_run(NULL, &err, NULL, bad), 0);
	assert_non_null(strstr(err, "token was refused"));
	free(err);
	assert_int_equal(q("SELECT count(*) FROM runs"), nruns);
	unsetenv("EVALD_API_TOKEN");
	err = NULL;
	assert_int_not_equal(tu_run(NULL, &err, NULL, bad), 0);
	assert_non_null(strstr(err, "EVALD_API_TOKEN"));
	free(err);

	stop(srv);
	tu_server_stop(&fx);
	for (int i = 0; i < 3; i++)
		free(s[i]);
	free(slow), free(res), free(db), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(many_writers_a_restart_and_a_resume),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
