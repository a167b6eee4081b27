/*
 * evald calibrate --model ... --suite ... --repeats R [run options]:
 * measures the noise floor. Evaluates the same settings R times in process
 * (ev_eval_run, each repeat without the response cache so that every repeat
 * asks the model again), then stores per suite the variance of the suite
 * score across the repeats and each sample's flip rate. `compare` and
 * regression filing then take the minimum detectable effect from the latest
 * calibration of a suite.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "evald/eval.h"

#define MAX_REPEATS 100

typedef struct {
	ev_eval_config eval; /* first: ev_eval_opts' offsets are its own */
	int repeats;
	bool json;
} calibrate_opts;

static const ev_opt calibrate_own_opts[] = {
	EV_O_INT("--repeats", calibrate_opts, repeats, 2, MAX_REPEATS, "R", "how many times to evaluate (required)"),
	EV_O_FLAG("--json", calibrate_opts, json, "print the calibration as JSON"),
	EV_O_END,
};

static const ev_opt *const calibrate_groups[] = {ev_eval_opts, NULL};

static const ev_cmd_spec calibrate_spec = {
	.name = "calibrate",
	.synopsis = "--model URL|DIR --suite PATH... --repeats R [run options] [--json]",
	.about = "Evaluates the same settings R times (2..100, each without the response cache) and stores\n"
	         "the noise floor of each suite: the variance of its score across the repeats and per-sample\n"
	         "flip rates. The run options are those of 'evald run'.",
	.opts = calibrate_own_opts,
	.groups = calibrate_groups,
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
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

/* The repeats, each a new run: their ids into ids[]. */
static int repeat_runs(const ev_cli *cli, ev_tracker *t, calibrate_opts *co, int64_t *ids)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (int k = 0; k < co->repeats; k++) {
		if (!cli->quiet && !co->json)
			fprintf(stderr, "evald: calibrate: repeat %d of %d\n", k + 1, co->repeats);
		ev_eval_config c = co->eval; /* the same settings each time */
		c.checker_spec = NULL;
		ev_eval_options eo = {.quiet = true, .stop = &g_stop};
		ev_eval_outcome out;
		int rc = ev_eval_run(t, &c, &eo, &out);
		ids[k] = out.run_id;
		ev_eval_outcome_clear(&out);
		ev_eval_config_clear(&c);
		if (rc)
			return ev_error_wrap(rc, "repeat %d", k + 1);
	}
	return 0;
}

int ev_cmd_calibrate(const ev_cli *cli, int argc, char **argv)
{
	calibrate_opts co = {.json = cli->json};
	ev_eval_config_init(&co.eval);
	int prc = ev_opt_parse(&calibrate_spec, &co, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!co.repeats || !co.eval.n_models) {
		fprintf(stderr, "evald calibrate: --model and --repeats are required\n");
		ev_opt_usage(&calibrate_spec, stderr);
		return EV_EXIT_USAGE;
	}
	co.eval.no_cache = true;
	const char *model_name = co.eval.model_name ? co.eval.model_name : co.eval.models[0];
	bool json = co.json;
	int64_t ids[MAX_REPEATS];
	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	if (repeat_runs(cli, t, &co, ids)) {
		ev_cli_fail("calibrate");
		goto done;
	}
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	if (ev_calibration_store(t, model_name, ids, (size_t)co.repeats, &opt, &out)) {
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
