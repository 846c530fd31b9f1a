/*
 * A fake libnvidia-ml.so.1 for powerlab's tests and benchmarks.
 *
 * The real pynvml bindings (nvidia-ml-py) load this library instead of NVIDIA's: it
 * exports the NVML symbols powerlab uses, with NVML's C ABI, and answers from a scenario
 * file named by the environment variable FAKE_NVML_SCENARIO, read at nvmlInit.
 *
 * Scenario file: one "key = value" per line, '#' starts a comment.
 *
 *   gpus = 2                       number of GPUs (0: "no GPU")
 *   driver_version = 550.54.15
 *   init_error = 9                 nvmlInit fails with this NVML return code
 *   energy_step_s = 0.1            the energy counter advances in steps of this length
 *   init_stamp_file = /path        nvmlInit writes its wall-clock time [us since epoch]
 *   gpu*.KEY = ...                 applies to every GPU (give it before gpuN lines)
 *   gpuN.KEY = ...                 GPU N (0-based)
 *
 * Per-GPU keys:
 *   name, uuid, serial, tdp_mw, energy0_mj, energy_scale_pct
 *   energy_reset_s = T             the energy counter restarts from 0 at T [s since init]
 *                                  (a driver reload): then it counts the steps j >= T/step
 *   power_mw, power_avg_mw, temp_gpu_c, temp_mem_c, clock_sm_mhz, clock_mem_mhz,
 *   util_gpu_pct, util_mem_pct, power_limit_mw, throttle       (waveforms)
 *   unsupported = name,name,...    quantities answered with NVML_ERROR_NOT_SUPPORTED;
 *                                  also "energy", "fields" (nvmlDeviceGetFieldValues as a
 *                                  whole), "event_reasons" (the ClocksEventReasons call
 *                                  is missing: NVML_ERROR_FUNCTION_NOT_FOUND)
 *   fault = KIND@START-END,...     every call on the GPU fails in [START, END) seconds
 *                                  since init; KIND is lost, timeout or unknown
 *   pci_bus_id = 00000000:1B:00.0  (default 00000000:N+0x10:00.0), minor = N (default N)
 *   fb_total_mib, fb_used_mib      framebuffer memory (waveform for used; default 81559, 0)
 *   xid = T:CODE T:CODE ...        XID critical errors delivered through the event set
 *                                  API at T seconds since init (one each)
 *   hang = START-END               every call on the GPU made in [START, END) seconds
 *                                  since init blocks until END (no END: for an hour),
 *                                  then answers normally -- a hung driver call
 *
 * The environment variable FAKE_NVML_HANG = "N@START-END,..." adds hang windows to GPU N
 * without editing the scenario file.
 *
 * Waveform: "V" (constant) or "T:V T:V ... [@PERIOD]": piecewise constant, value V from
 * time T [s since init]; repeats every PERIOD seconds when given.  Values are integers
 * (decimal or 0x hex).  All times are handled in integer microseconds, so a Python model
 * of the same rules (powerlab/collect/fake.py) reproduces every value exactly.
 *
 * Energy counter [mJ] at time t: energy0_mj + scale% of the sum over completed steps
 * j < floor(t / step) of power_mw(j * step) * step_us / 1e6 (integer arithmetic).
 *
 * Field values carry timestamp = the wall-clock time of the call [us since epoch]; the
 * value is evaluated at exactly that time.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef unsigned int nvmlReturn_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83
#define NVML_FI_DEV_POWER_AVERAGE 185
#define NVML_FI_DEV_POWER_INSTANT 186

#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3

#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    unsigned int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

enum {
    Q_POWER, Q_POWER_AVG, Q_TEMP_GPU, Q_TEMP_MEM, Q_CLOCK_SM, Q_CLOCK_MEM, Q_UTIL_GPU,
    Q_UTIL_MEM, Q_POWER_LIMIT, Q_THROTTLE, NQ
};
static const char *QNAMES[NQ] = {
    "power_mw", "power_avg_mw", "temp_gpu_c", "temp_mem_c", "clock_sm_mhz",
    "clock_mem_mhz", "util_gpu_pct", "util_mem_pct", "power_limit_mw", "throttle"};
#define U_ENERGY (1u << NQ)
#define U_FIELDS (1u << (NQ + 1))
#define U_EVENT_REASONS (1u << (NQ + 2))

#define MAXG 64
#define MAXPTS 64
#define MAXFAULTS 16

typedef struct {
    int n;
    long long t_us[MAXPTS];
    unsigned long long v[MAXPTS];
    long long period_us;
} wave_t;

typedef struct {
    long long start_us, end_us;
    nvmlReturn_t code;
} fault_t;

typedef struct fake_dev {
    int index;
    wave_t w[NQ];
    unsigned int unsupported;
    long long energy0_mj;
    long long energy_scale_pct;
    char name[96], uuid[96], serial[32];
    unsigned long long tdp_mw;
    fault_t faults[MAXFAULTS];
    int nfaults;
    long long e_k, e_sum; /* energy cache: sum over steps j < e_k */
    long long reset_us;   /* energy counter restarts from 0 at this time; -1: never */
    long long hang_start_us, hang_end_us; /* calls in [start, end) block until end */
    char pci_bus_id[32];
    unsigned int minor;
    unsigned long long fb_total_mib;
    wave_t fb_used;
    wave_t xid; /* event times and XID codes */
    int xid_next; /* next XID event not yet delivered */
} fake_dev_t;

typedef fake_dev_t *nvmlDevice_t;

static fake_dev_t devs[MAXG];
static int ndev;
static int refcount;
static long long init_us;
static long long energy_step_us = 100000;
static nvmlReturn_t init_error;
static char driver_version[80] = "550.54.15";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static long long sec_to_us(const char *s, char **end) {
    double x = strtod(s, end);
    return (long long)(x * 1e6 + (x >= 0 ? 0.5 : -0.5));
}

static void wave_const(wave_t *w, unsigned long long v) {
    w->n = 1;
    w->t_us[0] = 0;
    w->v[0] = v;
    w->period_us = 0;
}

static unsigned long long wave_at(const wave_t *w, long long t_us) {
    long long tt = t_us;
    int i, k = 0;
    if (w->period_us > 0) {
        tt = t_us % w->period_us;
        if (tt < 0) tt += w->period_us;
    }
    for (i = 0; i < w->n; i++) {
        if (w->t_us[i] <= tt) k = i;
        else break;
    }
    return w->v[k];
}

static char *trim(char *s) {
    char *e;
    while (*s == ' ' || *s == '\t') s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
    return s;
}

static void parse_wave(wave_t *w, char *val) {
    char *p = val, *end;
    if (!strchr(val, ':')) {
        wave_const(w, strtoull(val, NULL, 0));
        return;
    }
    w->n = 0;
    w->period_us = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        if (*p == '@') {
            w->period_us = sec_to_us(p + 1, &end);
            break;
        }
        if (w->n >= MAXPTS) break;
        w->t_us[w->n] = sec_to_us(p, &end);
        if (*end != ':') break;
        p = end + 1;
        w->v[w->n] = strtoull(p, &end, 0);
        w->n++;
        p = end;
    }
    if (w->n == 0) wave_const(w, 0);
}

static void parse_faults(fake_dev_t *d, char *val) {
    char *tok, *save = NULL;
    d->nfaults = 0;
    for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *at, *dash, *kind = trim(tok);
        nvmlReturn_t code;
        if (d->nfaults >= MAXFAULTS) break;
        at = strchr(kind, '@');
        if (!at) continue;
        *at = 0;
        if (!strcmp(kind, "lost")) code = NVML_ERROR_GPU_IS_LOST;
        else if (!strcmp(kind, "timeout")) code = NVML_ERROR_TIMEOUT;
        else code = NVML_ERROR_UNKNOWN;
        d->faults[d->nfaults].start_us = sec_to_us(at + 1, &dash);
        d->faults[d->nfaults].end_us =
            (*dash == '-') ? sec_to_us(dash + 1, NULL) : (long long)1 << 62;
        d->faults[d->nfaults].code = code;
        d->nfaults++;
    }
}

static void parse_hang(fake_dev_t *d, char *val) {
    char *dash;
    d->hang_start_us = sec_to_us(val, &dash);
    d->hang_end_us = (*dash == '-') ? sec_to_us(dash + 1, NULL)
                                    : d->hang_start_us + 3600LL * 1000000LL;
}

static void parse_unsupported(fake_dev_t *d, char *val) {
    char *tok, *save = NULL;
    int q;
    d->unsupported = 0;
    for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *name = trim(tok);
        if (!strcmp(name, "energy")) d->unsupported |= U_ENERGY;
        else if (!strcmp(name, "fields")) d->unsupported |= U_FIELDS;
        else if (!strcmp(name, "event_reasons")) d->unsupported |= U_EVENT_REASONS;
        for (q = 0; q < NQ; q++)
            if (!strcmp(name, QNAMES[q])) d->unsupported |= 1u << q;
    }
}

static void set_dev_key(fake_dev_t *d, const char *key, const char *value) {
    char buf[4096];
    int q;
    snprintf(buf, sizeof buf, "%s", value);
    if (!strcmp(key, "name")) snprintf(d->name, sizeof d->name, "%s", value);
    else if (!strcmp(key, "uuid")) snprintf(d->uuid, sizeof d->uuid, "%s", value);
    else if (!strcmp(key, "serial")) snprintf(d->serial, sizeof d->serial, "%s", value);
    else if (!strcmp(key, "tdp_mw")) d->tdp_mw = strtoull(value, NULL, 0);
    else if (!strcmp(key, "energy0_mj")) d->energy0_mj = strtoll(value, NULL, 0);
    else if (!strcmp(key, "energy_scale_pct")) d->energy_scale_pct = strtoll(value, NULL, 0);
    else if (!strcmp(key, "energy_reset_s")) d->reset_us = sec_to_us(value, NULL);
    else if (!strcmp(key, "unsupported")) parse_unsupported(d, buf);
    else if (!strcmp(key, "fault")) parse_faults(d, buf);
    else if (!strcmp(key, "hang")) parse_hang(d, buf);
    else if (!strcmp(key, "pci_bus_id")) snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", value);
    else if (!strcmp(key, "minor")) d->minor = (unsigned int)strtoul(value, NULL, 0);
    else if (!strcmp(key, "fb_total_mib")) d->fb_total_mib = strtoull(value, NULL, 0);
    else if (!strcmp(key, "fb_used_mib")) parse_wave(&d->fb_used, buf);
    else if (!strcmp(key, "xid")) parse_wave(&d->xid, buf);
    else {
        for (q = 0; q < NQ; q++)
            if (!strcmp(key, QNAMES[q])) parse_wave(&d->w[q], buf);
    }
}

static void defaults(void) {
    int i;
    ndev = 1;
    energy_step_us = 100000;
    init_error = 0;
    snprintf(driver_version, sizeof driver_version, "550.54.15");
    for (i = 0; i < MAXG; i++) {
        fake_dev_t *d = &devs[i];
        memset(d, 0, sizeof *d);
        d->index = i;
        snprintf(d->name, sizeof d->name, "Fake NVIDIA H100 80GB HBM3");
        snprintf(d->uuid, sizeof d->uuid, "GPU-fa6e0000-0000-4000-8000-%012d", i);
        snprintf(d->serial, sizeof d->serial, "FAKE%08d", i);
        d->tdp_mw = 700000;
        d->energy0_mj = 1000000;
        d->energy_scale_pct = 100;
        d->reset_us = -1;
        d->hang_start_us = d->hang_end_us = -1;
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "00000000:%02X:00.0", 0x10 + i);
        d->minor = (unsigned int)i;
        d->fb_total_mib = 81559;
        wave_const(&d->fb_used, 0);
        d->xid.n = 0;
        d->xid_next = 0;
        wave_const(&d->w[Q_POWER], 300000);
        wave_const(&d->w[Q_POWER_AVG], 300000);
        wave_const(&d->w[Q_TEMP_GPU], 45);
        wave_const(&d->w[Q_TEMP_MEM], 50);
        wave_const(&d->w[Q_CLOCK_SM], 1980);
        wave_const(&d->w[Q_CLOCK_MEM], 2619);
        wave_const(&d->w[Q_UTIL_GPU], 100);
        wave_const(&d->w[Q_UTIL_MEM], 40);
        wave_const(&d->w[Q_POWER_LIMIT], 700000);
        wave_const(&d->w[Q_THROTTLE], 0);
    }
}

static void load_scenario(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    char line[4096];
    FILE *f;
    defaults();
    if (!path || !*path) return;
    f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#'), *eq, *key, *val;
        if (hash) *hash = 0;
        eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        key = trim(line);
        val = trim(eq + 1);
        if (!strcmp(key, "gpus")) {
            ndev = atoi(val);
            if (ndev < 0) ndev = 0;
            if (ndev > MAXG) ndev = MAXG;
        } else if (!strcmp(key, "driver_version")) {
            snprintf(driver_version, sizeof driver_version, "%s", val);
        } else if (!strcmp(key, "init_error")) {
            init_error = (nvmlReturn_t)strtoul(val, NULL, 0);
        } else if (!strcmp(key, "energy_step_s")) {
            energy_step_us = sec_to_us(val, NULL);
            if (energy_step_us <= 0) energy_step_us = 100000;
        } else if (!strcmp(key, "init_stamp_file")) {
            /* written after init_us is set, see nvmlInitWithFlags */
        } else if (!strncmp(key, "gpu", 3)) {
            char *dot = strchr(key, '.');
            if (!dot) continue;
            *dot = 0;
            if (!strcmp(key + 3, "*")) {
                int i;
                for (i = 0; i < MAXG; i++) set_dev_key(&devs[i], dot + 1, val);
            } else {
                int i = atoi(key + 3);
                if (i >= 0 && i < MAXG) set_dev_key(&devs[i], dot + 1, val);
            }
        }
    }
    fclose(f);
    {   /* FAKE_NVML_HANG = "N@START-END,..." */
        const char *h = getenv("FAKE_NVML_HANG");
        char hb[1024], *tok, *save = NULL;
        if (h && *h) {
            snprintf(hb, sizeof hb, "%s", h);
            for (tok = strtok_r(hb, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                char *at = strchr(tok, '@');
                int i;
                if (!at) continue;
                *at = 0;
                i = atoi(trim(tok));
                if (i >= 0 && i < MAXG) parse_hang(&devs[i], at + 1);
            }
        }
    }
}

static void write_stamp(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    char line[4096];
    FILE *f;
    if (!path || !*path) return;
    f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '='), *key, *val;
        if (!eq) continue;
        *eq = 0;
        key = trim(line);
        val = trim(eq + 1);
        if (!strcmp(key, "init_stamp_file")) {
            FILE *o = fopen(val, "w");
            if (o) {
                fprintf(o, "%lld\n", init_us);
                fclose(o);
            }
        }
    }
    fclose(f);
}

/* ---- helpers for device calls ---- */

static int valid(nvmlDevice_t d) {
    return refcount > 0 && d >= devs && d < devs + ndev;
}

static nvmlReturn_t fault_at(fake_dev_t *d, long long t) {
    int i;
    for (i = 0; i < d->nfaults; i++)
        if (t >= d->faults[i].start_us && t < d->faults[i].end_us) return d->faults[i].code;
    return NVML_SUCCESS;
}

/* a call made inside the GPU's hang window blocks until the window ends */
static void maybe_hang(fake_dev_t *d, long long t) {
    if (d->hang_start_us >= 0 && t >= d->hang_start_us && t < d->hang_end_us) {
        long long left = d->hang_end_us - t;
        struct timespec ts;
        ts.tv_sec = (time_t)(left / 1000000LL);
        ts.tv_nsec = (long)(left % 1000000LL) * 1000L;
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
}

/* common prologue: validity, hang and fault windows; sets *t to microseconds since init */
static nvmlReturn_t enter(nvmlDevice_t d, long long *now, long long *t) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    *now = now_us();
    *t = *now - init_us;
    if (d->hang_start_us >= 0 && *t >= d->hang_start_us && *t < d->hang_end_us) {
        maybe_hang(d, *t);
        *now = now_us();
        *t = *now - init_us;
    }
    return fault_at(d, *t);
}

static unsigned long long energy_at(fake_dev_t *d, long long t) {
    long long k = t / energy_step_us, j;
    unsigned long long out;
    pthread_mutex_lock(&lock);
    if (k < d->e_k) {
        d->e_k = 0;
        d->e_sum = 0;
    }
    for (j = d->e_k; j < k; j++)
        d->e_sum += (long long)wave_at(&d->w[Q_POWER], j * energy_step_us) * energy_step_us
                    / 1000000LL;
    d->e_k = k;
    out = (unsigned long long)(d->energy0_mj + d->e_sum * d->energy_scale_pct / 100);
    if (d->reset_us >= 0 && t >= d->reset_us) { /* driver reload: counter from 0 */
        long long kr = d->reset_us / energy_step_us, before = 0;
        for (j = 0; j < kr; j++)
            before += (long long)wave_at(&d->w[Q_POWER], j * energy_step_us)
                      * energy_step_us / 1000000LL;
        out = (unsigned long long)((d->e_sum - before) * d->energy_scale_pct / 100);
    }
    pthread_mutex_unlock(&lock);
    return out;
}

static nvmlReturn_t get_q(nvmlDevice_t d, int q, unsigned long long *out) {
    long long now, t;
    nvmlReturn_t r;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    r = enter(d, &now, &t);
    if (r) return r;
    if (d->unsupported & (1u << q)) return NVML_ERROR_NOT_SUPPORTED;
    *out = wave_at(&d->w[q], t);
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_str(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

/* ---- exported NVML API ---- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (refcount == 0) {
        load_scenario();
        if (init_error) return init_error;
        init_us = now_us();
        write_stamp();
    }
    refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    refcount--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    return copy_str(version, length, driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    return copy_str(version, length, "12.550.54.15-fake");
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)ndev;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    long long t;
    nvmlReturn_t r;
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned int)ndev) return NVML_ERROR_INVALID_ARGUMENT;
    t = now_us() - init_us;
    maybe_hang(&devs[index], t);
    t = now_us() - init_us;
    r = fault_at(&devs[index], t);
    if (r) return r;
    *device = &devs[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
    if (!valid(d) || !index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    return r ? r : copy_str(name, length, d->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    return r ? r : copy_str(uuid, length, d->uuid);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    return r ? r : copy_str(serial, length, d->serial);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *limit) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = (unsigned int)d->tdp_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *limit) {
    unsigned long long v;
    nvmlReturn_t r = get_q(d, Q_POWER_LIMIT, &v);
    if (!r) *limit = (unsigned int)v;
    return r;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *power) {
    unsigned long long v;
    nvmlReturn_t r = get_q(d, Q_POWER_AVG, &v);
    if (!r) *power = (unsigned int)v;
    return r;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!energy) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->unsupported & U_ENERGY) return NVML_ERROR_NOT_SUPPORTED;
    *energy = energy_at(d, t);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    unsigned long long v;
    nvmlReturn_t r;
    if (sensor != 0) return NVML_ERROR_NOT_SUPPORTED;
    r = get_q(d, Q_TEMP_GPU, &v);
    if (!r) *temp = (unsigned int)v;
    return r;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *clock) {
    unsigned long long v;
    nvmlReturn_t r;
    if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) r = get_q(d, Q_CLOCK_SM, &v);
    else if (type == NVML_CLOCK_MEM) r = get_q(d, Q_CLOCK_MEM, &v);
    else return NVML_ERROR_NOT_SUPPORTED;
    if (!r) *clock = (unsigned int)v;
    return r;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *util) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->unsupported & (1u << Q_UTIL_GPU)) return NVML_ERROR_NOT_SUPPORTED;
    util->gpu = (unsigned int)wave_at(&d->w[Q_UTIL_GPU], t);
    util->memory = (unsigned int)wave_at(&d->w[Q_UTIL_MEM], t);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                       unsigned long long *reasons) {
    return get_q(d, Q_THROTTLE, reasons);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                    unsigned long long *reasons) {
    if (valid(d) && (d->unsupported & U_EVENT_REASONS)) return NVML_ERROR_FUNCTION_NOT_FOUND;
    return get_q(d, Q_THROTTLE, reasons);
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    long long now, t;
    int i;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->unsupported & U_FIELDS) return NVML_ERROR_NOT_SUPPORTED;
    for (i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        int q = -1;
        v->timestamp = now;
        v->latencyUsec = 0;
        v->value.ullVal = 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        switch (v->fieldId) {
        case NVML_FI_DEV_POWER_INSTANT: q = Q_POWER; break;
        case NVML_FI_DEV_POWER_AVERAGE: q = Q_POWER_AVG; break;
        case NVML_FI_DEV_MEMORY_TEMP: q = Q_TEMP_MEM; break;
        case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
            v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            if (d->unsupported & U_ENERGY) {
                v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            } else {
                v->nvmlReturn = NVML_SUCCESS;
                v->value.ullVal = energy_at(d, t);
            }
            continue;
        default:
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        if (d->unsupported & (1u << q)) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        } else {
            v->nvmlReturn = NVML_SUCCESS;
            v->value.uiVal = (unsigned int)wave_at(&d->w[q], t);
        }
    }
    return NVML_SUCCESS;
}

/* ---- PCI, memory, XID events ---- */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", d->pci_bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", d->pci_bus_id + 4);
    pci->bus = (unsigned int)(0x10 + d->index);
    pci->pciDeviceId = 0x233010DE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    long long now, t;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = d->minor;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *mem) {
    long long now, t;
    unsigned long long used;
    nvmlReturn_t r = enter(d, &now, &t);
    if (r) return r;
    if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
    used = wave_at(&d->fb_used, t);
    mem->total = d->fb_total_mib << 20;
    mem->used = used << 20;
    mem->free = (d->fb_total_mib - used) << 20;
    return NVML_SUCCESS;
}

#define NVML_EVENT_TYPE_XID 8ULL

typedef struct {
    unsigned long long types[MAXG];
} fake_event_set_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

nvmlReturn_t nvmlEventSetCreate(fake_event_set_t **set) {
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof **set);
    return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlEventSetFree(fake_event_set_t *set) {
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    if (!valid(d) || !types) return NVML_ERROR_INVALID_ARGUMENT;
    *types = NVML_EVENT_TYPE_XID;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                      fake_event_set_t *set) {
    if (!valid(d) || !set) return NVML_ERROR_INVALID_ARGUMENT;
    if (types & ~NVML_EVENT_TYPE_XID) return NVML_ERROR_NOT_SUPPORTED;
    set->types[d->index] |= types;
    return NVML_SUCCESS;
}

/* the next XID due on a registered GPU at or before now; waits up to timeout_ms */
nvmlReturn_t nvmlEventSetWait_v2(fake_event_set_t *set, nvmlEventData_t *data,
                                 unsigned int timeout_ms) {
    long long deadline = now_us() + (long long)timeout_ms * 1000LL;
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    for (;;) {
        long long t = now_us() - init_us;
        int i;
        pthread_mutex_lock(&lock);
        for (i = 0; i < ndev; i++) {
            fake_dev_t *d = &devs[i];
            if (!(set->types[i] & NVML_EVENT_TYPE_XID)) continue;
            if (d->xid_next < d->xid.n && d->xid.t_us[d->xid_next] <= t) {
                data->device = d;
                data->eventType = NVML_EVENT_TYPE_XID;
                data->eventData = d->xid.v[d->xid_next];
                data->gpuInstanceId = 0xFFFFFFFFu;
                data->computeInstanceId = 0xFFFFFFFFu;
                d->xid_next++;
                pthread_mutex_unlock(&lock);
                return NVML_SUCCESS;
            }
        }
        pthread_mutex_unlock(&lock);
        if (now_us() >= deadline) return NVML_ERROR_TIMEOUT;
        usleep(2000);
    }
}
