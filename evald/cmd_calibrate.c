/*
 * evald calibrate --model ... --suite ... --repeats R [run flags]: measures
 * the noise floor. Runs the same evaluation R times (this program's own
 * `run`, with --no-cache so that every repeat asks the model again), then
 * stores per suite the variance of the suite score across the repeats and
 * each sample's flip rate. `compare` and regression filing then take the
 * minimum detectable effect from the latest calibration of a suite.
 */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evald/cli.h"

extern char **environ;

#define MAX_REPEATS 100
#define MAX_ARGS 512
/* A run's --json summary is small; this bounds a broken child. */
#define MAX_CHILD_OUT ((size_t)64 << 20)

static void usage(void)
{
	fprintf(stderr, "usage: evald calibrate --model URL|DIR --suite PATH... --repeats R [run flags] [--json]\n"
	                "Runs the evaluation R times (2..%d, each with --no-cache) and stores the noise floor\n"
	                "of each suite: the variance of its score across the repeats and per-sample flip rates.\n"
	                "Run flags are those of 'evald run' (--model-name, --concurrency, --temperature, ...).\n",
	                MAX_REPEATS);
}

/* The path of this program, for running `run` as a child. */
static const char *self_path(const ev_cli *cli)
{
	return access("/proc/self/exe", X_OK) == 0 ? "/proc/self/exe" : cli->argv0;
}

/* Runs argv, capturing stdout (stderr is shared with ours). Returns the
 * child's exit status (or 128 + signal), or a negative status when it
 * could not be started. */
static int run_child(char *const argv[], char **out)
{
	int fds[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	pid_t pid = -1;
	ev_buf b = EV_BUF_INIT(MAX_CHILD_OUT);
	int rc;

	*out = NULL;
	if (pipe(fds) != 0)
		return ev_error_set(EV_E_IO, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return ev_error_set(EV_E_IO, "cannot start %s: %s", argv[0], strerror(rc));
	}
	char chunk[8192];
	bool over = false;
	for (;;) {
		ssize_t n = read(fds[0], chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!over && ev_buf_append(&b, chunk, (size_t)n) != 0)
			over = true; /* keep draining so the child can finish */
	}
	close(fds[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (over) {
		ev_buf_free(&b);
		return ev_error_set(EV_E_LIMIT, "the run printed more than %zu bytes", MAX_CHILD_OUT);
	}
	*out = ev_buf_detach(&b, NULL);
	if (!*out)
		*out = ev_strdup("");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void print_human(const char *json)
{
	cJSON *j = cJSON_Parse(json);
	printf("%-20s %7s %6s %10s %10s %9s %6s\n", "suite", "repeats", "n", "mean", "sd", "flip rate", "flaky");
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "calibrations"))
	{
		double var = ev_json_num(c, "variance", 0);
		printf("%-20.20s %7.0f %6.0f %10.4f %10.4f %9.4f %6d\n", ev_json_str(c, "suite", ""),
		       ev_json_num(c, "repeats", 0), ev_json_num(c, "n", 0), ev_json_num(c, "mean_score", 0),
		       var > 0 ? sqrt(var) : 0.0, ev_json_num(c, "mean_flip_rate", 0),
		       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "flaky")));
	}
	cJSON_Delete(j);
}

int ev_cmd_calibrate(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	int64_t repeats = 0;
	const char *model = NULL, *model_name = NULL;
	char *child[MAX_ARGS];
	int nc = 0;

	/* The child: evald --db DB -q run --no-cache --json <the run flags>. */
	child[nc++] = (char *)self_path(cli);
	child[nc++] = "--db";
	child[nc++] = (char *)cli->db_path;
	child[nc++] = "-q";
	child[nc++] = "run";
	child[nc++] = "--no-cache";
	child[nc++] = "--json";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (!strcmp(a, "--no-cache"))
			continue; /* always given */
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 0;
		}
		if (!strcmp(a, "--resume")) {
			fprintf(stderr, "evald calibrate: --resume does not apply (each repeat is a new run)\n");
			return EV_EXIT_USAGE;
		}
		if (!strcmp(a, "--repeats")) {
			if (!v || !ev_parse_i64(v, &repeats) || repeats < 2 || repeats > MAX_REPEATS) {
				fprintf(stderr, "evald calibrate: --repeats takes a count from 2 to %d\n", MAX_REPEATS);
				return EV_EXIT_USAGE;
			}
			i++;
			continue;
		}
		if (!strcmp(a, "--model") && v && !model)
			model = v;
		if (!strcmp(a, "--model-name") && v)
			model_name = v;
		if (nc >= MAX_ARGS - 1) {
			fprintf(stderr, "evald calibrate: more than %d arguments\n", MAX_ARGS - 8);
			return EV_EXIT_USAGE;
		}
		child[nc++] = argv[i];
	}
	child[nc] = NULL;
	if (!repeats || !model) {
		fprintf(stderr, "evald calibrate: --model and --repeats are required\n");
		usage();
		return EV_EXIT_USAGE;
	}
	if (!model_name)
		model_name = model;

	int64_t ids[MAX_REPEATS];
	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	char *out = NULL;
	for (int k = 0; k < (int)repeats; k++) {
		if (!cli->quiet && !json)
			fprintf(stderr, "evald: calibrate: repeat %d of %d\n", k + 1, (int)repeats);
		char *text = NULL;
		int st = run_child(child, &text);
		if (st < 0) {
			ev_cli_fail("calibrate");
			free(text);
			return EV_EXIT_FAIL;
		}
		if (st != 0) {
			fprintf(stderr, "evald: calibrate: repeat %d: 'evald run' failed (exit %d)%s\n", k + 1, st,
			        st == EV_EXIT_USAGE ? ": check the run flags" : "");
			free(text);
			return st == EV_EXIT_USAGE ? EV_EXIT_USAGE : EV_EXIT_FAIL;
		}
		cJSON *j = NULL;
		int pr = ev_json_parse(&j, text, strlen(text), "run --json output");
		double id = pr ? 0 : ev_json_num(j, "run_id", 0);
		cJSON_Delete(j);
		free(text);
		if (pr || id < 1) {
			if (!pr)
				ev_error_set(EV_E_PARSE, "run --json output: no run_id");
			ev_cli_fail("calibrate");
			return EV_EXIT_FAIL;
		}
		ids[k] = (int64_t)id;
	}

	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	if (ev_calibration_store(t, model_name, ids, (size_t)repeats, &opt, &out)) {
		ev_cli_fail("calibrate");
		goto done;
	}
	if (json)
		printf("%s\n", out);
	else
		print_human(out);
	rc = 0;
done:
	free(out);
	ev_tracker_close(t);
	return rc;
}
