/*
 * scoring: checkers that turn a model's answer into a score, the sandbox
 * that runs generated code, and the statistics of scores. Its public
 * interface, cut at its seams:
 *   scoring/checker.h    checkers (includes, exact, numeric, choice, regex, code, tool calls)
 *   scoring/toolcall.h   the tool-call checker's parsing and BFCL rules
 *   scoring/sandbox.h    the sandbox and test execution
 *   scoring/metrics.h    mean with CI, pass@k, pass^k
 *   scoring/summary.h    the summary of scored results and its JSON
 * Include the one a file needs; this header includes them all.
 */
#ifndef EV_SCORING_H
#define EV_SCORING_H

#include "scoring/checker.h"
#include "scoring/metrics.h"
#include "scoring/sandbox.h"
#include "scoring/summary.h"
#include "scoring/toolcall.h"

#endif
