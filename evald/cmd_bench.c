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
 *   bench kernels [--types ...] [--rows N] [--cols N]  (evald/bench_kernels.c)
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
int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv);
int ev_bench_vision_main(const ev_cli *cli, int argc, char **argv); /* bench_vision.c */
int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);
int ev_bench_sandbox_main(const ev_cli *cli, int argc, char **argv);
int ev_bench_cuda_main(const ev_cli *cli, int argc, char **argv); /* bench_cuda.c */
int ev_bench_kernels_main(const ev_cli *cli, int argc, char **argv); /* bench_kernels.c */

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
	char *dir = NULL;
	if (ev_mkdtemp(&dir, NULL, "bench"))
		return ev_error_wrap(EV_E_IO, "bench");
	char *db = ev_asprintf("%s/bench.db", dir);
	ev_tracker *t = NULL;
	int rc = ev_tracker_open(&t, db);
	int64_t run = 0;
	ev_run_info info = {"bench", "none", "[{\"name\":\"bench\"}]", "{}", 1, n, 0, NULL};
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
	if (ev_rmtree(dir, 0))
		ev_log_warn("%s", ev_error_msg());
	free(dir);
	free(db);
	*out_rate = el > 0 ? (double)n / el : 0;
	return rc;
}

typedef struct {
	int64_t requests, concurrency, results;
	const char *url;
	bool json;
} runner_opts;

#define T runner_opts
static const ev_opt runner_opts_table[] = {
	EV_O_INT("--requests", T, requests, 1, 1e9, "N", "requests sent at the measured concurrency"),
	EV_O_INT("--concurrency", T, concurrency, 1, 4096, "C", "requests in flight"),
	EV_O_INT("--results", T, results, 1, 1e9, "N", "results ingested with group commit"),
	EV_O_STR("--url", T, url, "URL", "a server to send to (default: the fixture server, started here)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec runner_spec = {
	.name = "bench runner",
	.synopsis = "[--requests N] [--concurrency C] [--results N] [--url URL] [--json]",
	.about = "Requests/s and CPU per request of the OpenAI backend against concurrency 1, and tracker\n"
	         "ingest results/s with group commit against a commit per result.",
	.opts = runner_opts_table,
};

static int bench_runner(const ev_cli *cli, int argc, char **argv)
{
	runner_opts ro = {.requests = 20000, .concurrency = 64, .results = 200000, .json = cli->json};
	int prc = ev_opt_parse(&runner_spec, &ro, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	int64_t requests = ro.requests, concurrency = ro.concurrency, results = ro.results;
	const char *url = ro.url;
	bool json = ro.json;
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
	static const ev_subcommand subs[] = {
		{"attention", ev_bench_attention_main, "dense vs MSA attention by context length"},
		{"cuda", ev_bench_cuda_main, "the CUDA ops on the device beside copy bandwidth (needs a GPU)"},
		{"engine", ev_bench_engine_main, "the engine's prefill and decode speed, fast vs reference"},
		{"kernels", ev_bench_kernels_main, "quantized and BF16 dot-product kernels by level vs plain C"},
		{"runner", bench_runner, "requests/s and CPU per request; tracker ingest"},
		{"sandbox", ev_bench_sandbox_main, "HumanEval tests/s in the sandbox"},
		{"vision", ev_bench_vision_main, "an image into M3's LM rows: the vision tower fast vs plain"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"bench", "Benchmarks, each beside a baseline measured in the same run.",
	                                      subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
