/* ev_bench_runner: the OpenAI backend's throughput and client CPU cost,
 * measured against an OpenAI-compatible server (the fixture server). */
#include "runners/runners.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_seconds(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
	       (double)u.ru_stime.tv_usec * 1e-6;
}

int ev_bench_runner(const char *base_url, long n_requests, int concurrency, double *out_req_per_s,
                    double *out_cpu_s_per_req)
{
	if (!base_url || n_requests < 1 || concurrency < 1)
		return ev_error_set(EV_E_INVALID, "bench runner: needs a base URL, n >= 1 and concurrency >= 1");
	const char *urls[] = {base_url};
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = urls;
	o.n_urls = 1;
	o.api_key_env = NULL;
	o.concurrency = concurrency;
	o.timeout_s = 30;
	o.max_retries = 0;
	ev_backend *b = NULL;
	int rc = ev_backend_openai_new(&b, &o);
	if (rc)
		return rc;
	ev_part part;
	memset(&part, 0, sizeof part);
	part.kind = EV_PART_TEXT;
	part.text = (char *)"ping";
	ev_message msg = {(char *)"user", &part, 1, NULL, NULL, NULL};
	ev_request req;
	memset(&req, 0, sizeof req);
	req.model = "bench";
	req.messages = &msg;
	req.n_messages = 1;
	req.gen = (ev_gen)EV_GEN_INIT;
	ev_completion done[64];
	long sent = 0, got = 0, failed = 0;
	char first_error[256] = "";
	double t0 = ev_now(), c0 = cpu_seconds();
	while (got < n_requests) {
		while (sent < n_requests && ev_backend_pending(b) < concurrency) {
			if ((rc = ev_backend_submit(b, &req)))
				goto done;
			sent++;
		}
		int n = ev_backend_poll(b, done, 64, 0.05);
		if (n < 0) {
			rc = n;
			goto done;
		}
		for (int i = 0; i < n; i++) {
			if (done[i].status != EV_COMPLETION_OK && failed++ == 0)
				snprintf(first_error, sizeof first_error, "%s", done[i].error ? done[i].error : "?");
			ev_completion_clear(&done[i]);
		}
		got += n;
	}
	double wall = ev_now() - t0, cpu = cpu_seconds() - c0;
	if (failed) {
		rc = ev_error_set(EV_E_BACKEND, "bench runner: %ld of %ld requests failed (first: %s)", failed, n_requests,
		                  first_error);
		goto done;
	}
	if (out_req_per_s)
		*out_req_per_s = wall > 0 ? (double)n_requests / wall : 0;
	if (out_cpu_s_per_req)
		*out_cpu_s_per_req = cpu / (double)n_requests;
done:
	ev_backend_free(b);
	return rc;
}
