/* cli.h — behaviour every frigg executable shares: --version text, the "not implemented yet" answer. */
#ifndef FRIGG_CLI_H
#define FRIGG_CLI_H

#include "engine/backend.h" /* FRIGG_DEQUANT_NEVER */
#include "model/model.h"   /* frigg_dtype */

void frigg_print_version(const char *prog);
/* For an executable whose issue has not landed: --help/--version say so, everything exits 2. */
int frigg_not_implemented_main(int argc, char **argv, const char *prog, const char *what);
/* A numeric option's value: the whole of `arg` must be a number within [lo, hi] (an integer when `integer`).
 * Otherwise prints "PROG: bad number for OPT: "ARG" (...)" on stderr and returns -1, so a typo is an error and
 * never a silent 0. */
int frigg_cli_number(const char *prog, const char *opt, const char *arg, double lo, double hi, int integer, double *out);
/* A --threads value, the same limit in every program: 0 (every online core) or 1..FRIGG_MAX_THREADS, what an
 * engine accepts (each program used to have its own: 1024, 4096 or 2^24, the larger found only at engine start).
 * -1 with frigg_cli_number's message otherwise. */
int frigg_cli_threads(const char *prog, const char *arg, int *out);
/* A --kv-dtype value: "bf16" (FRIGG_DT_BF16) or "int8" (FRIGG_DT_INT8, the engines' int8 KV cache).
 * Otherwise prints "PROG: --kv-dtype takes bf16 or int8, not "ARG"" on stderr and returns -1. */
int frigg_cli_kv_dtype(const char *prog, const char *arg, frigg_dtype *out);
/* --dequant-rows N|off: *out = N (1 or more rows), or FRIGG_DEQUANT_NEVER for off (frigg_backend_opts.dequant_rows);
 * -1 with a message on stderr otherwise. */
int frigg_cli_dequant_rows(const char *prog, const char *arg, int *out);

#endif
