/*
 * An LD_PRELOAD shim that makes fsync(2) and fdatasync(2) slow: a slow or overloaded disk
 * for powerlab's collector tests (tests/collect/test_collector.py).
 *
 * SLOW_FSYNC_S = seconds each call sleeps before calling the real function (default 0).
 * SLOW_FSYNC_LOG = a file to which each call appends "start_us end_us\n" (wall clock).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void slow(void) {
    const char *s = getenv("SLOW_FSYNC_S");
    double d = s ? strtod(s, NULL) : 0.0;
    if (d > 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)d;
        ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
}

static void log_call(long long t0) {
    const char *path = getenv("SLOW_FSYNC_LOG");
    FILE *f;
    if (!path || !*path) return;
    f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%lld %lld\n", t0, now_us());
    fclose(f);
}

int fsync(int fd) {
    static int (*real)(int);
    long long t0 = now_us();
    int r;
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    slow();
    r = real(fd);
    log_call(t0);
    return r;
}

int fdatasync(int fd) {
    static int (*real)(int);
    long long t0 = now_us();
    int r;
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    slow();
    r = real(fd);
    log_call(t0);
    return r;
}
