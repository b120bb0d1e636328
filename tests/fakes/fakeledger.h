/* Device memory shared by every process of one fake machine: the ledger.
 *
 * On a real GPU, what one process allocates the others no longer see as free, and a process that
 * dies (even by SIGKILL) gives its memory back. The fakes model that with a small text file per
 * machine, the ledger:
 *
 *   path     the scenario key "memory_ledger" if set, else "$GPUCHECK_FAKE_SCENARIO.ledger" (beside the
 *            scenario file, so one machine = one ledger); without either, nothing is shared and each
 *            process only sees its own use.
 *   lines    "<gpu> <pid> <starttime> <bytes>": gpu is the scenario's gpus.N index (the NVML index, and
 *            the slot libcuda's CUDA ordinals map to through CUDA_VISIBLE_DEVICES); bytes are what that
 *            process holds there (its allocations plus the scenario's context_memory while it has a
 *            context); starttime is field 22 of /proc/<pid>/stat, so a recycled pid is not mistaken for
 *            the old process. "#" lines are comments.
 *   locking  flock(LOCK_EX) around read-check-rewrite (libcuda), flock(LOCK_SH) for reads (NVML).
 *   liveness an entry counts while kill(pid, 0) does not fail with ESRCH, the process is not a zombie
 *            (a real driver frees a process's memory when it exits, before it is reaped) and its start
 *            time matches; other entries are ignored, and dropped at the next write.
 */
#ifndef GPUCHECK_FAKELEDGER_H
#define GPUCHECK_FAKELEDGER_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

#define LEDGER_MAX 128
#define LEDGER_BUF (LEDGER_MAX * 64 + 128) /* a line is at most 11+11+21+21 characters */
#define LEDGER_UNUSED __attribute__((unused))

struct ledger_entry {
    int gpu;
    int pid;
    unsigned long long start;
    unsigned long long bytes;
};

/* The ledger's path into OUT; 0 if this machine has none. */
LEDGER_UNUSED static int ledger_path(char *out, size_t len) {
    const char *p = cfg_get("memory_ledger");
    if (p && *p) {
        snprintf(out, len, "%s", p);
        return 1;
    }
    const char *s = getenv("GPUCHECK_FAKE_SCENARIO");
    if (!s || !*s) return 0;
    snprintf(out, len, "%s.ledger", s);
    return 1;
}

/* Start time (clock ticks after boot) and state of PID from /proc/PID/stat; 0 if unreadable. */
LEDGER_UNUSED static int ledger_proc_stat(int pid, unsigned long long *start, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p) return 0;
    p++;
    /* Fields after the name: 3 state, ..., 22 starttime. */
    char *save = NULL;
    int field = 3;
    *start = 0;
    *state = '?';
    for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
        if (field == 3) *state = tok[0];
        if (field == 22) {
            *start = strtoull(tok, NULL, 10);
            return 1;
        }
    }
    return 0;
}

LEDGER_UNUSED static unsigned long long ledger_self_start(void) {
    unsigned long long start = 0;
    char state;
    ledger_proc_stat((int)getpid(), &start, &state);
    return start;
}

/* Whether the process of an entry still holds GPU memory. */
LEDGER_UNUSED static int ledger_alive(int pid, unsigned long long start) {
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    unsigned long long now = 0;
    char state = '?';
    if (ledger_proc_stat(pid, &now, &state)) {
        if (state == 'Z' || state == 'X') return 0;
        if (start && now && now != start) return 0;
    }
    return 1;
}

/* Open and lock the ledger (LOCK_SH or LOCK_EX); -1 if there is none or it cannot be opened. */
LEDGER_UNUSED static int ledger_open(int lock, int create) {
    char path[512];
    if (!ledger_path(path, sizeof path)) return -1;
    int fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    while (flock(fd, lock) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* The live entries of the ledger open on FD (all of them if KEEP_DEAD), at most MAX; their number. */
LEDGER_UNUSED static int ledger_read(int fd, struct ledger_entry *out, int max, int keep_dead) {
    char buf[LEDGER_BUF];
    size_t have = 0;
    ssize_t n;
    if (lseek(fd, 0, SEEK_SET) < 0) return 0;
    while (have < sizeof buf - 1 && (n = read(fd, buf + have, sizeof buf - 1 - have)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        have += (size_t)n;
    }
    buf[have] = '\0';
    int count = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line && count < max; line = strtok_r(NULL, "\n", &save)) {
        struct ledger_entry e;
        if (line[0] == '#') continue;
        if (sscanf(line, "%d %d %llu %llu", &e.gpu, &e.pid, &e.start, &e.bytes) != 4) continue;
        if (!keep_dead && !ledger_alive(e.pid, e.start)) continue;
        out[count++] = e;
    }
    return count;
}

/* Bytes that live processes other than this one hold on GPU (every process: EXCLUDE_SELF = 0).
 * Without a ledger: 0. */
LEDGER_UNUSED static unsigned long long ledger_used(int gpu, int exclude_self) {
    struct ledger_entry e[LEDGER_MAX];
    int fd = ledger_open(LOCK_SH, 0);
    if (fd < 0) return 0;
    int n = ledger_read(fd, e, LEDGER_MAX, 0);
    close(fd);
    unsigned long long sum = 0;
    int self = (int)getpid();
    for (int i = 0; i < n; i++)
        if (e[i].gpu == gpu && !(exclude_self && e[i].pid == self)) sum += e[i].bytes;
    return sum;
}

/* The live entries for GPU (pid and bytes), at most MAX; their number. */
LEDGER_UNUSED static int ledger_list(int gpu, struct ledger_entry *out, int max) {
    struct ledger_entry e[LEDGER_MAX];
    int fd = ledger_open(LOCK_SH, 0);
    if (fd < 0) return 0;
    int n = ledger_read(fd, e, LEDGER_MAX, 0);
    close(fd);
    int count = 0;
    for (int i = 0; i < n && count < max; i++)
        if (e[i].gpu == gpu && e[i].bytes) out[count++] = e[i];
    return count;
}

/* Whether PID has a live entry on any GPU. */
LEDGER_UNUSED static int ledger_has_pid(int pid) {
    struct ledger_entry e[LEDGER_MAX];
    int fd = ledger_open(LOCK_SH, 0);
    if (fd < 0) return 0;
    int n = ledger_read(fd, e, LEDGER_MAX, 0);
    close(fd);
    for (int i = 0; i < n; i++)
        if (e[i].pid == pid) return 1;
    return 0;
}

/* Set this process's entry for GPU to BYTES, unless that grows it and the others' bytes plus BYTES
 * would pass LIMIT (what the GPU has for the processes of the ledger): then nothing changes and the
 * answer is 2 (CUDA_ERROR_OUT_OF_MEMORY). Dead processes' entries are dropped on the way. Without a
 * ledger only the limit is checked, against BYTES alone. */
LEDGER_UNUSED static int ledger_set(int gpu, unsigned long long old_bytes, unsigned long long bytes,
                                    unsigned long long limit) {
    struct ledger_entry e[LEDGER_MAX];
    /* Each call opens the file anew: flock locks belong to the open file, so threads exclude each other too. */
    int fd = ledger_open(LOCK_EX, 1);
    if (fd < 0) return bytes > old_bytes && bytes > limit ? 2 : 0;
    int n = ledger_read(fd, e, LEDGER_MAX, 0);
    int self = (int)getpid();
    unsigned long long others = 0;
    for (int i = 0; i < n; i++)
        if (e[i].gpu == gpu && e[i].pid != self) others += e[i].bytes;
    int code = 0;
    if (bytes > old_bytes && (bytes > limit || others > limit - bytes)) code = 2;
    if (code == 0) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (e[i].gpu == gpu && e[i].pid == self) {
                e[i].bytes = bytes;
                found = 1;
            }
        if (!found && n < LEDGER_MAX) e[n++] = (struct ledger_entry){gpu, self, ledger_self_start(), bytes};
        char out[LEDGER_BUF];
        size_t len = (size_t)snprintf(out, sizeof out, "# gpu pid starttime bytes (tests/fakes/fakeledger.h)\n");
        for (int i = 0; i < n && len < sizeof out; i++)
            if (e[i].bytes)
                len += (size_t)snprintf(out + len, sizeof out - len, "%d %d %llu %llu\n", e[i].gpu, e[i].pid,
                                        e[i].start, e[i].bytes);
        if (len > sizeof out) len = sizeof out;
        if (ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0) {
            size_t done = 0;
            while (done < len) {
                ssize_t w = write(fd, out + done, len - done);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;
                done += (size_t)w;
            }
        }
    }
    close(fd); /* releases the flock */
    return code;
}

#endif
