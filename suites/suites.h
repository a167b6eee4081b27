/*
 * suites: the suite format, loading (folder or archive), importers,
 * generators and the tool environments. Its public interface, cut at its
 * seams:
 *   suites/result.h   what a result means: the result type, reasons, the fold
 *   suites/suite.h    the message and sample model, loading, archives, templates
 *   suites/import.h   importers (BFCL, HumanEval, MBPP)
 *   suites/gen.h      generators (long-context, recall)
 *   suites/env.h      the environments of tool-use suites
 * Include the one a file needs; this header includes them all.
 */
#ifndef EV_SUITES_H
#define EV_SUITES_H

#include "suites/env.h"
#include "suites/gen.h"
#include "suites/import.h"
#include "suites/result.h"
#include "suites/suite.h"
#include "suites/video.h"

#endif
