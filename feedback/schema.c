/*
 * feedback/schema.c: the tracker's schema as an ordered list of forward
 * migrations, and the code that applies them.
 *
 * PRAGMA user_version holds the schema version. Step N takes a database from
 * version N-1 to N. To change the schema, append a step at the end of
 * `migrations` (never edit or reorder a released one): an older file is then
 * upgraded in place, step by step, inside one transaction, and a file written
 * by a newer evald (a version past the last step) is refused.
 */
#include "feedback/feedback_int.h"

#include <stdlib.h>
#include <string.h>

static const ev_migration migrations[] = {
	{1, "runs, results and the response cache",
	 "CREATE TABLE models ("
	 "  id INTEGER PRIMARY KEY,"
	 "  name TEXT NOT NULL UNIQUE,"
	 "  source TEXT,"
	 "  created REAL NOT NULL);"
	 "CREATE TABLE runs ("
	 "  id INTEGER PRIMARY KEY,"
	 "  model_id INTEGER NOT NULL REFERENCES models(id),"
	 "  model_source TEXT,"
	 "  suites_json TEXT,"
	 "  config_json TEXT,"
	 "  status TEXT NOT NULL DEFAULT 'running',"
	 "  summary_json TEXT,"
	 "  created REAL NOT NULL,"
	 "  finished REAL NOT NULL DEFAULT 0,"
	 "  epochs INTEGER NOT NULL DEFAULT 1,"
	 "  n_planned INTEGER NOT NULL DEFAULT 0);"
	 "CREATE INDEX runs_by_model ON runs(model_id, created);"
	 "CREATE TABLE results ("
	 "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	 "  suite TEXT NOT NULL,"
	 "  sample_id TEXT NOT NULL,"
	 "  epoch INTEGER NOT NULL,"
	 "  request_hash TEXT,"
	 "  request_json TEXT,"
	 "  response TEXT,"
	 "  tool_calls_json TEXT,"
	 "  extracted TEXT,"
	 "  score REAL NOT NULL,"
	 "  reason TEXT NOT NULL DEFAULT '',"
	 "  detail TEXT,"
	 "  finish_reason TEXT,"
	 "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
	 "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
	 "  latency_s REAL NOT NULL DEFAULT 0,"
	 "  attempts INTEGER NOT NULL DEFAULT 0,"
	 "  cached INTEGER NOT NULL DEFAULT 0,"
	 "  created REAL NOT NULL,"
	 "  PRIMARY KEY (run_id, suite, sample_id, epoch));"
	 /* No further index on results: the key serves every run-scoped lookup
	  * (resume, reports, comparing two runs sample by sample), and each
	  * extra index costs about a fifth of the ingest rate. A step that needs
	  * a cross-run lookup adds its own index. */
	 "CREATE TABLE cache ("
	 "  key TEXT PRIMARY KEY,"
	 "  response_json TEXT NOT NULL,"
	 "  created REAL NOT NULL,"
	 "  hits INTEGER NOT NULL DEFAULT 0);"},
	/* Step 2 (owner: regress): the noise floor and regressions between runs. */
	{2, "calibrations and regressions",
	 "CREATE TABLE calibrations ("
	 "  id INTEGER PRIMARY KEY,"
	 "  model TEXT NOT NULL,"
	 "  suite TEXT NOT NULL,"
	 "  suite_hash TEXT NOT NULL DEFAULT '',"
	 "  repeats INTEGER NOT NULL,"
	 "  n INTEGER NOT NULL DEFAULT 0,"
	 "  variance REAL NOT NULL,"
	 "  flip_rate_json TEXT,"
	 "  run_ids TEXT NOT NULL,"
	 "  created REAL NOT NULL);"
	 "CREATE INDEX calibrations_by_suite ON calibrations(suite, created);"
	 "CREATE TABLE regressions ("
	 "  id INTEGER PRIMARY KEY,"
	 "  suite TEXT NOT NULL,"
	 "  baseline_run INTEGER NOT NULL REFERENCES runs(id),"
	 "  candidate_run INTEGER NOT NULL REFERENCES runs(id),"
	 "  last_run INTEGER NOT NULL,"
	 "  baseline_model TEXT,"
	 "  candidate_model TEXT,"
	 "  n INTEGER NOT NULL DEFAULT 0,"
	 "  delta REAL NOT NULL,"
	 "  ci_low REAL NOT NULL,"
	 "  ci_high REAL NOT NULL,"
	 "  p REAL NOT NULL,"
	 "  mde REAL NOT NULL DEFAULT 0,"
	 "  status TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'confirmed', 'investigating', 'fixed', "
	 "'invalid', 'wontfix', 'regressed')),"
	 "  assignee TEXT,"
	 "  fixed_in TEXT,"
	 "  created REAL NOT NULL,"
	 "  updated REAL NOT NULL);"
	 "CREATE INDEX regressions_by_suite ON regressions(suite, baseline_run);"
	 "CREATE TABLE regression_samples ("
	 "  regression_id INTEGER NOT NULL REFERENCES regressions(id) ON DELETE CASCADE,"
	 "  sample_id TEXT NOT NULL,"
	 "  fingerprint TEXT NOT NULL,"
	 "  detail TEXT,"
	 "  PRIMARY KEY (regression_id, sample_id));"
	 "CREATE TABLE regression_events ("
	 "  id INTEGER PRIMARY KEY,"
	 "  regression_id INTEGER NOT NULL REFERENCES regressions(id) ON DELETE CASCADE,"
	 "  status TEXT NOT NULL,"
	 "  model TEXT,"
	 "  run INTEGER,"
	 "  note TEXT,"
	 "  at REAL NOT NULL);"
	 "CREATE INDEX regression_events_by_regression ON regression_events(regression_id, id);"},
	/* Step 3 (owner: intake): community issues, attachments, triage clusters,
	 * training proposals. */
	{3, "issues, attachments, clusters and proposals",
	 "CREATE TABLE clusters ("
	 "  id INTEGER PRIMARY KEY,"
	 "  created REAL NOT NULL,"
	 "  size INTEGER NOT NULL DEFAULT 0);"
	 "CREATE TABLE issues ("
	 "  id INTEGER PRIMARY KEY,"
	 "  title TEXT NOT NULL,"
	 "  body TEXT NOT NULL DEFAULT '',"
	 "  model TEXT,"
	 "  prompt TEXT,"
	 "  output TEXT,"
	 "  expected TEXT,"
	 "  source TEXT NOT NULL DEFAULT 'cli' CHECK (source IN ('cli', 'http', 'github')),"
	 "  external_id TEXT UNIQUE,"
	 "  author TEXT,"
	 "  status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),"
	 "  modality TEXT NOT NULL DEFAULT 'text' CHECK (modality IN ('text', 'image', 'video', 'document', 'mixed')),"
	 "  cluster_id INTEGER REFERENCES clusters(id) ON DELETE SET NULL,"
	 "  created REAL NOT NULL,"
	 "  closed REAL NOT NULL DEFAULT 0);"
	 "CREATE INDEX issues_by_status ON issues(status, id);"
	 "CREATE INDEX issues_by_cluster ON issues(cluster_id);"
	 "CREATE TABLE attachments ("
	 "  sha256 TEXT PRIMARY KEY,"
	 "  mime TEXT NOT NULL,"
	 "  size INTEGER NOT NULL,"
	 "  original_name TEXT);"
	 "CREATE TABLE issue_attachments ("
	 "  issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,"
	 "  sha256 TEXT NOT NULL REFERENCES attachments(sha256),"
	 "  name TEXT,"
	 "  PRIMARY KEY (issue_id, sha256));"
	 "CREATE INDEX issue_attachments_by_sha ON issue_attachments(sha256);"
	 "CREATE TABLE links ("
	 "  issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,"
	 "  url TEXT NOT NULL,"
	 "  PRIMARY KEY (issue_id, url));"
	 "CREATE TABLE labels ("
	 "  issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,"
	 "  label TEXT NOT NULL,"
	 "  PRIMARY KEY (issue_id, label));"
	 "CREATE INDEX labels_by_label ON labels(label);"
	 "CREATE TABLE proposals ("
	 "  id INTEGER PRIMARY KEY,"
	 "  title TEXT NOT NULL,"
	 "  body TEXT NOT NULL DEFAULT '',"
	 "  status TEXT NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'investigating', 'experimenting', "
	 "'accepted', 'shipped', 'dropped')),"
	 "  created REAL NOT NULL,"
	 "  updated REAL NOT NULL);"
	 "CREATE TABLE proposal_members ("
	 "  proposal_id INTEGER NOT NULL REFERENCES proposals(id) ON DELETE CASCADE,"
	 "  who TEXT NOT NULL,"
	 "  joined REAL NOT NULL,"
	 "  PRIMARY KEY (proposal_id, who));"
	 "CREATE TABLE proposal_evidence ("
	 "  proposal_id INTEGER NOT NULL REFERENCES proposals(id) ON DELETE CASCADE,"
	 "  kind TEXT NOT NULL CHECK (kind IN ('issue', 'cluster', 'regression', 'sample')),"
	 "  ref TEXT NOT NULL,"
	 "  note TEXT,"
	 "  PRIMARY KEY (proposal_id, kind, ref));"},
	/* Step 4 (owner: lead): each result keeps its sample's metadata, so
	 * reports can group by it (long-context length x depth grids). */
	{4, "sample metadata on results",
	 "ALTER TABLE results ADD COLUMN metadata_json TEXT;"},
	/* Step 5 (owner: watch): the checkpoint watcher's state, one row per
	 * checkpoint folder (feedback/watch.c, `evald watch`). */
	{5, "checkpoint watcher state",
	 "CREATE TABLE watch_checkpoints ("
	 "  path TEXT PRIMARY KEY,"
	 "  name TEXT NOT NULL,"
	 "  state TEXT NOT NULL DEFAULT 'seen' CHECK (state IN ('seen', 'complete', 'running', 'evaluated', "
	 "'failed')),"
	 "  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
	 "  compare_json TEXT,"
	 "  detail TEXT,"
	 "  created REAL NOT NULL,"
	 "  updated REAL NOT NULL);"},
	/* Step 6 (owner: reports): each result keeps its sample's target as
	 * written, so reports can show it beside the answer. */
	{6, "sample target on results",
	 "ALTER TABLE results ADD COLUMN target_json TEXT;"},
	/* Step 7 (owner: feedback): the hash of the prompt as the model got it
	 * (the bundled engine's chat template and tokenizer applied), so a
	 * comparison can tell a changed rendering from a changed model. */
	{7, "rendered prompt hash on results",
	 "ALTER TABLE results ADD COLUMN prompt_hash TEXT;"},
	/* Step 8 (owner: feedback): of the completion tokens, those spent
	 * thinking, so effort sweeps can tell thinking from answering. */
	{8, "thinking tokens on results",
	 "ALTER TABLE results ADD COLUMN thinking_tokens INTEGER NOT NULL DEFAULT 0;"},
	/* Step 9 (owner: feedback): with routing between models, the model that
	 * answered each sample. */
	{9, "routed model on results",
	 "ALTER TABLE results ADD COLUMN answered_by TEXT;"},
	/* Step 10 (owner: feedback): multi-agent samples' accounting per agent
	 * (turns, tokens, tool calls, delegations). */
	{10, "per-agent accounting on results",
	 "ALTER TABLE results ADD COLUMN agents_json TEXT;"},
	/* Step 11 (owner: feedback): a team tracker's runs carry the key their
	 * creator chose, so a retried create gives back the same run. */
	{11, "client key on runs",
	 "ALTER TABLE runs ADD COLUMN client_key TEXT;"
	 "CREATE UNIQUE INDEX runs_client_key ON runs(client_key) WHERE client_key IS NOT NULL;"},
	/* Append new steps here: {12, "what it adds", "SQL;"}, ... */
};

int ev_schema_latest(void) { return (int)(sizeof migrations / sizeof migrations[0]); }

static int read_version(sqlite3 *db, const char *path, int *out)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		int err = ev_error_set(EV_E_DB, "%s: cannot read the schema version: %s", path, sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return err;
	}
	*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

int ev_schema_migrate_steps(sqlite3 *db, const char *path, const ev_migration *steps, size_t n_steps,
                            int *out_version)
{
	int latest = (int)n_steps;
	int cur = 0;
	bool in_tx = false;
	int rc = 0;

	for (size_t i = 0; i < n_steps; i++)
		if (steps[i].version != (int)i + 1)
			return ev_error_set(EV_E_INTERNAL, "schema: migration %zu has version %d (steps must be numbered 1, 2, ...)",
			                    i + 1, steps[i].version);

	if ((rc = read_version(db, path, &cur)))
		return rc;
	if (cur == latest)
		goto done;
	if (cur > latest || cur < 0)
		return ev_error_set(EV_E_UNSUPPORTED,
		                    "%s: tracker schema version %d is newer than this evald knows (%d): use a newer evald",
		                    path, cur, latest);

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		rc = ev_error_set(EV_E_DB, "%s: cannot start the schema migration: %s", path, sqlite3_errmsg(db));
		goto done;
	}
	in_tx = true;
	/* Another process may have migrated between the read and the lock. */
	if ((rc = read_version(db, path, &cur)))
		goto done;
	if (cur > latest || cur < 0) {
		rc = ev_error_set(EV_E_UNSUPPORTED,
		                  "%s: tracker schema version %d is newer than this evald knows (%d): use a newer evald",
		                  path, cur, latest);
		goto done;
	}
	for (int v = cur + 1; v <= latest; v++) {
		const ev_migration *m = &steps[v - 1];
		char *err = NULL;
		if (sqlite3_exec(db, m->sql, NULL, NULL, &err) != SQLITE_OK) {
			rc = ev_error_set(EV_E_DB, "%s: schema migration %d (%s) failed: %s", path, v, m->name,
			                  err ? err : sqlite3_errmsg(db));
			sqlite3_free(err);
			goto done;
		}
		char pragma[48];
		snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v);
		if (sqlite3_exec(db, pragma, NULL, NULL, NULL) != SQLITE_OK) {
			rc = ev_error_set(EV_E_DB, "%s: cannot set schema version %d: %s", path, v, sqlite3_errmsg(db));
			goto done;
		}
		ev_log_debug("%s: schema migrated to version %d (%s)", path, v, m->name);
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = ev_error_set(EV_E_DB, "%s: cannot commit the schema migration: %s", path, sqlite3_errmsg(db));
		goto done;
	}
	in_tx = false;
	cur = latest;
done:
	if (in_tx)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	if (!rc && out_version)
		*out_version = cur;
	return rc;
}

int ev_schema_version(sqlite3 *db, const char *path, int *out) { return read_version(db, path, out); }

int ev_schema_migrate(sqlite3 *db, const char *path, int *out_version)
{
	return ev_schema_migrate_steps(db, path, migrations, sizeof migrations / sizeof migrations[0], out_version);
}
