// Durable appends of REC-byte records, one writer, the ways a store can keep each fdatasync to
// data only (docs/performance/pack-durable.md, "A ring reused in place"):
//   inline  zeros written and synced ahead of the tail, a 16th of the file at a time (pack's way)
//   ring    each record written and synced into a 16 MiB ring zeroed once before timing, then
//           appended to a data file unsynced; a full ring syncs the data file and starts over
//   ringbg  the same, the ring in halves, a second thread syncing the data file at each switch
//   pre     one file zeroed for every record before timing (the ceiling; no store keeps it up)
//
//   cc -O2 -o /tmp/dad bench/durable-append-designs.c -lpthread
//   cd DIR && for m in inline ring ringbg pre; do sync; /tmp/dad 16454 $m; done
// It creates and removes only zf, ring and data in the current directory.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 3000
#define STEP (1L << 20)
#define RING (16L << 20)

static char *zeros;
static int data_fd;
static _Atomic long sync_requested, sync_done;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void must_write(int fd, const char *buf, long n, long at) {
    if (pwrite(fd, buf, n, at) != n) { perror("pwrite"); exit(1); }
}

static void zero_range(int fd, long from, long to) {
    for (long at = from; at < to; at += STEP) must_write(fd, zeros, to - at < STEP ? to - at : STEP, at);
}

// The background checkpoint: syncs the data file whenever the writer asks (a negative request ends it).
static void *checkpointer(void *unused) {
    (void)unused;
    for (;;) {
        long asked = sync_requested;
        if (asked < 0) return NULL;
        if (asked > sync_done) { fdatasync(data_fd); sync_done = asked; } else usleep(50);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s RECORD_BYTES inline|ring|ringbg|pre\n", argv[0]); return 2; }
    long rec_bytes = atol(argv[1]);
    const char *mode = argv[2];
    int ring_mode = !strncmp(mode, "ring", 4), background = !strcmp(mode, "ringbg");
    if (posix_memalign((void **)&zeros, 4096, STEP)) return 1;
    memset(zeros, 0, STEP);
    char *rec = malloc(rec_bytes);
    memset(rec, 0xab, rec_bytes);
    int fd = open("zf", O_RDWR | O_CREAT | O_TRUNC, 0644), ring = -1;
    long zero_end = 0, tail = 0;
    pthread_t thread;
    if (!strcmp(mode, "pre")) { zero_end = (long)N * rec_bytes + STEP; zero_range(fd, 0, zero_end); fdatasync(fd); }
    if (ring_mode) {
        ring = open("ring", O_RDWR | O_CREAT | O_TRUNC, 0644);
        zero_range(ring, 0, RING);
        fsync(ring);
        data_fd = open("data", O_RDWR | O_CREAT | O_TRUNC, 0644);
        fsync(data_fd);
        int dir = open(".", O_RDONLY);
        fsync(dir);
        close(dir);
        if (background) pthread_create(&thread, NULL, checkpointer, NULL);
    }
    sync();
    sleep(1);
    double t0 = now();
    long ring_at = 0, half = 0, waits = 0;
    for (int i = 0; i < N; i++) {
        if (ring_mode) {
            if (ring_at + rec_bytes > RING / 2 * (half + 1)) {
                if (background) {
                    // The other half is reusable once the sync asked for when it was left is done.
                    half ^= 1;
                    while (sync_done < sync_requested) { waits++; usleep(10); }
                    sync_requested = sync_requested + 1;
                    ring_at = half * (RING / 2);
                } else if (ring_at + rec_bytes > RING) {
                    fdatasync(data_fd);
                    ring_at = 0;
                    half = 0;
                } else {
                    half = 1;
                }
            }
            must_write(ring, rec, rec_bytes, ring_at);
            fdatasync(ring);
            ring_at += rec_bytes;
            must_write(data_fd, rec, rec_bytes, tail);
            tail += rec_bytes;
            continue;
        }
        long end = tail + rec_bytes;
        if (!strcmp(mode, "inline") && end > zero_end) {
            long step = zero_end / 16 < STEP ? STEP : zero_end / 16;
            long target = (end + step + 4095) / 4096 * 4096;
            zero_range(fd, zero_end, target);
            fdatasync(fd);
            zero_end = target;
        }
        must_write(fd, rec, rec_bytes, tail);
        fdatasync(fd);
        tail = end;
    }
    if (ring_mode) fdatasync(data_fd);
    double t1 = now();
    if (background) { sync_requested = -1; pthread_join(thread, NULL); }
    printf("%s rec=%ld %.0f appends/s (writer waited for a checkpoint %ld times)\n", mode, rec_bytes, N / (t1 - t0), waits);
    unlink("zf"); unlink("ring"); unlink("data");
    return 0;
}
