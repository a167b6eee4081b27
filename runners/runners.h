/*
 * runners: drive a model through a suite. Its public interface, cut at its
 * seams:
 *   runners/runner.h          requests, completions, backends (OpenAI), the runner, shards
 *   runners/agent.h           the agent loop for multi-turn tool use
 *   runners/engine_backend.h  the bundled engine as a backend, in process
 * Include the one a file needs; this header includes them all.
 */
#ifndef EV_RUNNERS_H
#define EV_RUNNERS_H

#include "runners/agent.h"
#include "runners/engine_backend.h"
#include "runners/runner.h"

#endif
