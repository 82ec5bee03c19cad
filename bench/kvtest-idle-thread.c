/* Loaded into kvtest with LD_PRELOAD by `bench/sqlite-vs-kvtest.sh --kvtest-threaded`: starts one
 * thread that only sleeps, so kvtest's process is multi-threaded as stowbench's is (its workers are
 * threads). A multi-threaded process pays for every pread that a single-threaded one does not:
 * glibc wraps the call in cancellation-point bookkeeping, and the kernel takes a reference on the
 * file because the file table is shared. The idle thread does nothing else. */
#include <pthread.h>
#include <unistd.h>

static void *sleep_forever(void *unused) {
  (void)unused;
  for (;;)
    pause();
  return 0;
}

__attribute__((constructor)) static void start_idle_thread(void) {
  pthread_t thread;
  if (pthread_create(&thread, 0, sleep_forever, 0) == 0)
    pthread_detach(thread);
}
