/* Scenario access for the fake driver libraries.
 *
 * A scenario is a flat "key=value" file (written by tests/fakelibs.py from a
 * JSON scenario under tests/scenarios/) whose path is in GPUCHECK_FAKE_SCENARIO.
 * Keys are JSON paths joined with dots: "cuda.init", "gpus.0.name".
 */
#ifndef GPUCHECK_FAKECFG_H
#define GPUCHECK_FAKECFG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKECFG_MAX 512
/* Not every fake uses every helper: unused ones are no warning under -Wall. */
#define FAKECFG_UNUSED __attribute__((unused))

static char fakecfg_keys[FAKECFG_MAX][128];
static char fakecfg_vals[FAKECFG_MAX][256];
static int fakecfg_n = -1;

FAKECFG_UNUSED static void fakecfg_load(void) {
    if (fakecfg_n >= 0) return;
    fakecfg_n = 0;
    const char *path = getenv("GPUCHECK_FAKE_SCENARIO");
    if (!path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fakecfg_n < FAKECFG_MAX && fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        char *val = eq + 1;
        size_t len = strlen(val);
        while (len && (val[len - 1] == '\n' || val[len - 1] == '\r')) val[--len] = '\0';
        /* Longer keys and values are cut, as they always were (the precision says so to the compiler). */
        snprintf(fakecfg_keys[fakecfg_n], sizeof fakecfg_keys[0], "%.127s", line);
        snprintf(fakecfg_vals[fakecfg_n], sizeof fakecfg_vals[0], "%.255s", val);
        fakecfg_n++;
    }
    fclose(f);
}

/* The value of KEY, or NULL. */
FAKECFG_UNUSED static const char *cfg_get(const char *key) {
    fakecfg_load();
    for (int i = 0; i < fakecfg_n; i++)
        if (strcmp(fakecfg_keys[i], key) == 0) return fakecfg_vals[i];
    return NULL;
}

FAKECFG_UNUSED static const char *cfg_getf(const char *fmt, int index, const char *field) {
    char key[128];
    snprintf(key, sizeof key, fmt, index, field);
    return cfg_get(key);
}

FAKECFG_UNUSED static long long cfg_int(const char *key, long long dflt) {
    const char *v = cfg_get(key);
    return v ? strtoll(v, NULL, 0) : dflt;
}

FAKECFG_UNUSED static const char *cfg_str(const char *key, const char *dflt) {
    const char *v = cfg_get(key);
    return v ? v : dflt;
}

/* Behaviour hooks shared by every fake: "hang" blocks forever, "crash" segfaults, "abort" aborts. */
FAKECFG_UNUSED static void cfg_misbehave(const char *what) {
    if (!what) return;
    if (strcmp(what, "hang") == 0) {
        for (;;) { struct timespec ts = {3600, 0}; nanosleep(&ts, NULL); }
    }
    if (strcmp(what, "crash") == 0) { volatile int *p = NULL; *p = 1; }
    if (strcmp(what, "abort") == 0) abort();
}

#endif
