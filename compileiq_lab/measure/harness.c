/* compileiq-lab CPU timing harness: loads buffers, calls cil_kernel, times repeats, saves outputs.
 *
 * usage: harness MIN_REPEATS MIN_SECONDS NPARAMS P1..Pn NBUFS (in|out BYTES PATH)...
 * Prints "tick SECONDS" (the smallest step two back-to-back clock reads show: what a timed call is quantised to,
 * the clock's own tick and the cost of reading it), one line "t SECONDS" per timed call after one untimed warm-up
 * call, then "written INDEX" for each input buffer the calls changed (a kernel must not write its inputs: every call
 * is made on the same buffers).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cil_kernel(void **bufs, const long *params);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "harness: %s: %s\n", what, detail);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 5) die("usage", "MIN_REPEATS MIN_SECONDS NPARAMS P.. NBUFS (in|out BYTES PATH)..");
    int a = 1;
    long min_repeats = atol(argv[a++]);
    double min_seconds = atof(argv[a++]);
    int np = atoi(argv[a++]);
    long *params = calloc((size_t)np + 1, sizeof(long));
    for (int i = 0; i < np && a < argc; i++) params[i] = atol(argv[a++]);
    int nb = atoi(argv[a++]);
    void **bufs = calloc((size_t)nb + 1, sizeof(void *));
    int *is_out = calloc((size_t)nb + 1, sizeof(int));
    long *sizes = calloc((size_t)nb + 1, sizeof(long));
    char **paths = calloc((size_t)nb + 1, sizeof(char *));
    for (int i = 0; i < nb; i++) {
        if (a + 2 >= argc) die("usage", "missing buffer arguments");
        is_out[i] = strcmp(argv[a++], "out") == 0;
        sizes[i] = atol(argv[a++]);
        paths[i] = argv[a++];
        size_t alloc = ((size_t)sizes[i] + 63) / 64 * 64 + 64;
        bufs[i] = aligned_alloc(64, alloc);
        if (!bufs[i]) die("out of memory", paths[i]);
        memset(bufs[i], 0, alloc);
        if (!is_out[i]) {
            FILE *f = fopen(paths[i], "rb");
            if (!f) die("cannot open input", paths[i]);
            if (fread(bufs[i], 1, (size_t)sizes[i], f) != (size_t)sizes[i]) die("short input", paths[i]);
            fclose(f);
        }
    }
    double tick = 0.0, began = now(); /* at most 10 ms of it, whatever the clock */
    for (int i = 0; i < 200 && now() - began < 0.01; i++) {
        double t0 = now(), t1 = now();
        for (int spin = 0; t1 == t0 && spin < 10000; spin++) t1 = now();
        if (t1 > t0 && (tick == 0.0 || t1 - t0 < tick)) tick = t1 - t0;
    }
    if (tick > 0.0) printf("tick %.3e\n", tick);
    cil_kernel(bufs, params); /* warm-up */
    double total = 0.0;
    for (long r = 0; r < 100000 && (r < min_repeats || total < min_seconds); r++) {
        double t0 = now();
        cil_kernel(bufs, params);
        double dt = now() - t0;
        total += dt;
        printf("t %.9f\n", dt);
    }
    for (int i = 0; i < nb; i++) {
        if (is_out[i]) continue;
        char *again = malloc((size_t)sizes[i] + 1);
        FILE *f = fopen(paths[i], "rb");
        if (!again || !f || fread(again, 1, (size_t)sizes[i], f) != (size_t)sizes[i])
            die("cannot reread input", paths[i]);
        fclose(f);
        if (memcmp(again, bufs[i], (size_t)sizes[i]) != 0) printf("written %d\n", i);
        free(again);
    }
    for (int i = 0; i < nb; i++) {
        if (!is_out[i]) continue;
        FILE *f = fopen(paths[i], "wb");
        if (!f || fwrite(bufs[i], 1, (size_t)sizes[i], f) != (size_t)sizes[i]) die("cannot write output", paths[i]);
        fclose(f);
    }
    return 0;
}
