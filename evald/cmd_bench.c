/*
 * evald bench KIND: benchmarks that print figures side by side with a
 * baseline measured in the same run (tests never time anything).
 *
 *   bench runner [--requests N] [--concurrency C] [--url URL] [--results N] [--json]
 *       requests/s and evald CPU time per request through the OpenAI backend
 *       against the fixture server (started here unless --url), at
 *       concurrency 1 (baseline) and C; tracker ingest results/s with one
 *       commit per result (baseline) and with the group commit.
 *   bench engine --model DIR ...   (evald/bench_engine.c)
 *   bench sandbox [--problems PATH] [--jobs N]   (evald/bench_sandbox.c)
 *   bench attention --model DIR [--lengths ...]  (evald/bench_attention.c)
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evald/cli.h"
#include "runners/runners.h"

/* Other benchmarks live beside their modules' commands. */
typedef int (*bench_fn)(const ev_cli *cli, int argc, char **argv);
int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv);
int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);
int ev_bench_sandbox_main(const ev_cli *cli, int argc, char **argv);

static char *exe_dir(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return ev_strdup(".");
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = 0;
	return ev_strdup(buf);
}

/* Starts the fixture server beside this program; returns its pid. */
static pid_t start_fixture(char url[128], const char *bin)
{
	int po[2];
	if (pipe(po))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		close(po[0]);
		execl(bin, bin, "--port", "0", "--print-port", "--threads", "2", (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	char line[64] = {0};
	size_t got = 0;
	struct pollfd pf = {po[0], POLLIN, 0};
	while (got < sizeof line - 1 && !memchr(line, '\n', got) && poll(&pf, 1, 10000) > 0) {
		ssize_t r = read(po[0], line + got, sizeof line - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(po[0]);
	int port = atoi(line);
	if (port <= 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	snprintf(url, 128, "http://127.0.0.1:%d/v1", port);
	return pid;
}

static int ingest(double *out_rate, long n, bool commit_each)
{
	char dir[] = "/tmp/evald-bench-XXXXXX";
	if (!mkdtemp(dir))
		return ev_error_set(EV_E_IO, "mkdtemp: %s", strerror(errno));
	char *db = ev_asprintf("%s/bench.db", dir);
	ev_tracker *t = NULL;
	int rc = ev_tracker_open(&t, db);
	int64_t run = 0;
	ev_run_info info = {"bench", "none", "[{\"name\":\"bench\"}]", "{}", 1, n};
	if (!rc)
		rc = ev_tracker_run_create(t, &info, &run);
	char id[32];
	char response[] = "The answer is 42, as computed from the question's premises.";
	double t0 = ev_now();
	for (long i = 0; !rc && i < n; i++) {
		snprintf(id, sizeof id, "s%ld", i);
		ev_result r = {.suite = "bench", .sample_id = id, .epoch = 0,
		               .request_hash = "0000000000000000000000000000000000000000000000000000000000000000",
		               .response = response, .extracted = "42", .score = (double)(i & 1), .reason = "",
		               .finish_reason = "stop", .prompt_tokens = 20, .completion_tokens = 12, .latency_s = 0.01,
		               .attempts = 1};
		rc = ev_tracker_result_put(t, run, &r);
		if (!rc && commit_each)
			rc = ev_tracker_flush(t);
		else if (!rc)
			rc = ev_tracker_tick(t);
	}
	if (!rc)
		rc = ev_tracker_flush(t);
	double el = ev_now() - t0;
	ev_tracker_close(t);
	char *cmd = ev_asprintf("rm -rf '%s'", dir);
	if (cmd && system(cmd) != 0)
		ev_log_warn("could not remove %s", dir);
	free(cmd);
	free(db);
	*out_rate = el > 0 ? (double)n / el : 0;
	return rc;
}

static int bench_runner(const ev_cli *cli, int argc, char **argv)
{
	int64_t requests = 20000, concurrency = 64, results = 200000;
	const char *url = NULL;
	bool json = cli->json;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--requests") && i + 1 < argc && ev_parse_i64(argv[i + 1], &requests))
			i++;
		else if (!strcmp(argv[i], "--concurrency") && i + 1 < argc && ev_parse_i64(argv[i + 1], &concurrency))
			i++;
		else if (!strcmp(argv[i], "--results") && i + 1 < argc && ev_parse_i64(argv[i + 1], &results))
			i++;
		else if (!strcmp(argv[i], "--url") && i + 1 < argc)
			url = argv[++i];
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else {
			fprintf(stderr, "usage: evald bench runner [--requests N] [--concurrency C] [--results N] [--url URL] [--json]\n");
			return EV_EXIT_USAGE;
		}
	}
	if (requests < 1 || concurrency < 1 || results < 1) {
		fprintf(stderr, "evald bench runner: counts must be positive\n");
		return EV_EXIT_USAGE;
	}
	char own_url[128];
	pid_t server = 0;
	if (!url) {
		char *dir = exe_dir();
		char *bin = ev_asprintf("%s/evald-fixture-server", dir);
		server = start_fixture(own_url, bin);
		free(bin);
		free(dir);
		if (server <= 0) {
			ev_error_set(EV_E_NOTFOUND, "could not start evald-fixture-server beside evald (give --url)");
			return ev_cli_fail("bench runner");
		}
		url = own_url;
	}
	long base_n = requests / 10 > 0 ? requests / 10 : 1;
	double rps1 = 0, cpu1 = 0, rpsc = 0, cpuc = 0, ing1 = 0, ingg = 0;
	int rc = ev_bench_runner(url, base_n, 1, &rps1, &cpu1);
	if (!rc)
		rc = ev_bench_runner(url, requests, (int)concurrency, &rpsc, &cpuc);
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	long base_results = results / 20 > 0 ? results / 20 : 1;
	if (!rc)
		rc = ingest(&ing1, base_results, true);
	if (!rc)
		rc = ingest(&ingg, results, false);
	if (rc)
		return ev_cli_fail("bench runner");
	if (json) {
		printf("{\"runner\":{\"baseline\":{\"concurrency\":1,\"requests\":%ld,\"requests_per_s\":%.1f,"
		       "\"cpu_us_per_request\":%.1f},\"measured\":{\"concurrency\":%lld,\"requests\":%lld,"
		       "\"requests_per_s\":%.1f,\"cpu_us_per_request\":%.1f}},"
		       "\"ingest\":{\"baseline\":{\"commit\":\"each\",\"results\":%ld,\"results_per_s\":%.0f},"
		       "\"measured\":{\"commit\":\"group\",\"results\":%lld,\"results_per_s\":%.0f}}}\n",
		       base_n, rps1, cpu1 * 1e6, (long long)concurrency, (long long)requests, rpsc, cpuc * 1e6, base_results,
		       ing1, (long long)results, ingg);
	} else {
		printf("runner (OpenAI backend -> %s)\n", url);
		printf("  %-28s %12s %14s %18s\n", "", "requests", "requests/s", "evald CPU us/req");
		printf("  %-28s %12ld %14.1f %18.1f\n", "baseline: concurrency 1", base_n, rps1, cpu1 * 1e6);
		char label[64];
		snprintf(label, sizeof label, "concurrency %lld", (long long)concurrency);
		printf("  %-28s %12lld %14.1f %18.1f\n", label, (long long)requests, rpsc, cpuc * 1e6);
		printf("  ratio %.2fx requests/s\n", rps1 > 0 ? rpsc / rps1 : 0);
		printf("tracker ingest\n");
		printf("  %-28s %12s %14s\n", "", "results", "results/s");
		printf("  %-28s %12ld %14.0f\n", "baseline: commit each", base_results, ing1);
		printf("  %-28s %12lld %14.0f\n", "group commit", (long long)results, ingg);
		printf("  ratio %.1fx results/s\n", ing1 > 0 ? ingg / ing1 : 0);
	}
	return 0;
}

int ev_cmd_bench(const ev_cli *cli, int argc, char **argv)
{
	static const struct {
		const char *name;
		bench_fn fn;
	} kinds[] = {
		{"attention", ev_bench_attention_main},
		{"engine", ev_bench_engine_main},
		{"runner", bench_runner},
		{"sandbox", ev_bench_sandbox_main},
	};
	if (argc >= 2)
		for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
			if (!strcmp(argv[1], kinds[i].name))
				return kinds[i].fn(cli, argc - 1, argv + 1);
	fprintf(stderr, "usage: evald bench attention|engine|runner|sandbox [...]\n");
	return EV_EXIT_USAGE;
}
