/* test_cuda_start.c — a CUDA build starts as light as a CPU-only one: cuBLAS (whose libcublasLt initializers cost
 * ~0.3 s and ~200 MB at load) is not loaded at start, only by the first cuBLAS call, which the CUDA engine makes
 * when it is created (common/engine/cuda_blas_lazy.c); and frigg-run --version, --help, --tokenize and a CPU-backend
 * generation each peak below 64 MB of resident memory (a CUDA build linked against cuBLAS: ~220 MB). In a
 * CPU-only build the memory checks run and the cuBLAS checks are skipped. Uses $FRIGG_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FRIGG_CUDA
#include <cublas_v2.h>
#include <dlfcn.h>
#endif

#include "harness.h"
#include "base/util.h"

/* Run argv with stdin from `input` (NULL: /dev/null), stdout and stderr to /dev/null; its exit status, and its peak
 * resident memory in KiB in *kb. */
static int run(char *const argv[], const char *input, long *kb) {
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[0], 0);
        close(fd[0]);
        close(fd[1]);
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            dup2(fileno(null), 1);
            dup2(fileno(null), 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[0]);
    if (input && write(fd[1], input, strlen(input)) < 0) perror("write");
    close(fd[1]);
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) return -1;
    *kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_start");
    /* this program is linked as the executables are: its own memory at start is theirs (the children below are
     * run first, while it is this small, since a child's peak counts what it was forked from) */
    long hwm = -1;
    FILE *sf = fopen("/proc/self/status", "r");
    char line[256];
    while (sf && fgets(line, sizeof line, sf))
        if (!strncmp(line, "VmHWM:", 6)) hwm = strtol(line + 6, NULL, 10);
    if (sf) fclose(sf);
    CHECK(hwm > 0 && hwm < 32 * 1024, "a program linked as the executables are peaks at %ld KiB at start (32 MiB at most)",
          hwm);
    printf("  at start: peak %ld KiB\n", hwm);
    const char *bin = getenv("FRIGG_BIN");
    if (!bin || !*bin) bin = "bin";
    char exe[4096], model[4096];
    snprintf(exe, sizeof exe, "%s/frigg-run", bin);
    snprintf(model, sizeof model, "%s/golden/default", th_root());
    struct {
        const char *what, *input;
        char *argv[12];
    } cases[] = {
        {"--version", NULL, {exe, "--version", NULL}},
        {"--help", NULL, {exe, "--help", NULL}},
        {"--tokenize", "{\"prompt\":\"Hej med dig\"}\n", {exe, "--model", model, "--tokenize", NULL}},
        {"-b cpu -p", NULL, {exe, "--model", model, "-b", "cpu", "-t", "1", "-n", "4", "-p", "Hej", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long kb = 0;
        int rc = run(cases[i].argv, cases[i].input, &kb);
        CHECK(rc == 0, "frigg-run %s: exit %d", cases[i].what, rc);
        CHECK(kb > 0 && kb < 64 * 1024, "frigg-run %s peaked at %ld KiB (64 MiB at most)", cases[i].what, kb);
        printf("  frigg-run %s: peak %ld KiB\n", cases[i].what, kb);
    }
#ifdef FRIGG_CUDA
    char lib[64];
    snprintf(lib, sizeof lib, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *early = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    CHECK(early == NULL, "%s is loaded before any cuBLAS call (linked at start)", lib);
    if (early) dlclose(early);
    cublasHandle_t h = NULL;
    cublasStatus_t st = cublasCreate(&h); /* loads the library, then fails without a GPU */
    void *after = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (!after && strstr(frigg_error(), "cannot load")) {
        SKIP("%s is not installed here (%s): the first-call load not checked", lib, frigg_error());
    } else {
        CHECK(after != NULL, "%s is not loaded after cublasCreate", lib);
        printf("  cublasCreate: status %d (%s)\n", (int)st, st == CUBLAS_STATUS_SUCCESS ? "a GPU" : "no GPU here");
    }
    if (after) dlclose(after);
    if (st == CUBLAS_STATUS_SUCCESS) cublasDestroy(h);
#else
    SKIP("built without CUDA: the lazy cuBLAS load is not checked (the memory checks run)");
#endif
    TEST_MAIN_END();
}
