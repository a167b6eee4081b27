/*
 * testexec_checker.c: the test-execution checker kinds, "humaneval",
 * "mbpp" and "tests", for the checker table (see scoring_int.h).
 *
 * All three run the answer's code against the sample's "tests" object in
 * the sandbox (ev_testexec_run with extract_code on); the names say which
 * test style a suite expects and are kept apart so a report can tell them
 * apart. Spec fields: "timeout" (seconds, default 10), "memory_mb"
 * (default 1024). A sandbox error is not the model's fault: it is reported
 * as backend_error, which is excluded from scores.
 */
#include "scoring/scoring_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const te_fields[] = {"timeout", "memory_mb", NULL};

static void te_free(void *impl) { free(impl); }

static int te_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	double timeout, mem;
	int rc;
	if ((rc = ev_spec_num(&timeout, spec, "timeout", 10.0, 0.1, 3600.0)) ||
	    (rc = ev_spec_num(&mem, spec, "memory_mb", 1024.0, 64.0, 1048576.0)))
		return rc;
	ev_testexec_options *o = malloc(sizeof *o);
	if (!o || !cJSON_AddNumberToObject(norm, "timeout", timeout) || !cJSON_AddNumberToObject(norm, "memory_mb", mem)) {
		free(o);
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	}
	*o = (ev_testexec_options)EV_TESTEXEC_OPTIONS_INIT;
	o->sandbox.timeout_s = timeout;
	o->sandbox.mem_bytes = (size_t)(mem * 1048576.0);
	o->extract_code = true;
	*impl = o;
	return 0;
}

static int te_score(const void *impl, const ev_sample *sample, const char *answer, size_t len, ev_check_out *out)
{
	(void)len;
	if (!sample || !sample->tests_json)
		return ev_error_set(EV_E_INVALID, "test execution: the sample has no \"tests\"");
	ev_sandbox_result r;
	int rc = ev_testexec_run(impl, sample->tests_json, answer, &r);
	if (rc) {
		ev_sandbox_result_clear(&r);
		return rc; /* malformed tests: the suite's fault */
	}
	out->score = r.verdict == EV_SANDBOX_PASSED ? 1.0 : 0.0;
	out->reason = r.verdict == EV_SANDBOX_PASSED ? EV_REASON_NONE
	              : r.verdict == EV_SANDBOX_ERROR ? EV_REASON_BACKEND_ERROR
	                                              : EV_REASON_WRONG_ANSWER;
	if (r.verdict != EV_SANDBOX_PASSED)
		out->detail = ev_sandbox_result_text(&r);
	ev_sandbox_result_clear(&r);
	return 0;
}

const ev_checker_type ev_checker_humaneval = {"humaneval", te_fields, te_parse, te_score, te_free};
const ev_checker_type ev_checker_mbpp = {"mbpp", te_fields, te_parse, te_score, te_free};
const ev_checker_type ev_checker_tests = {"tests", te_fields, te_parse, te_score, te_free};
