// How long the first write to fresh memory takes: the cost of loading a
// model whose weights are repacked into new memory (Cake's quantized
// weights), as opposed to used where the file lies in the page cache.
//
// Writes 96 MiB (the default model's repacked weights) into a fresh
// anonymous mapping, in 2 MiB pages and in 4 KiB pages, first right after
// the previous mapping was freed, then after 6 s of idling. A virtual
// machine that hands freed memory back to its host (free page reporting,
// as Firecracker does) must get it back from the host at the first touch;
// the idle wait lets that happen, as between two runs of the benchmark.
//
//     gcc -O2 bench/fresh_memory.c -o /tmp/fresh && /tmp/fresh

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BYTES ((size_t)96 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/// Milliseconds to write a fresh mapping once, after `idle` seconds.
static double first_touch(int huge, unsigned idle) {
    char *mapped = mmap(NULL, BYTES + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return -1;
    char *data = (char *)(((uintptr_t)mapped + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    madvise(data, BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    sleep(idle);
    double start = now();
    memset(data, 1, BYTES);
    double elapsed = now() - start;
    munmap(mapped, BYTES + HUGE_PAGE);
    return elapsed * 1e3;
}

int main(void) {
    first_touch(1, 0);  // so that the first measurement follows a free, as the others do
    for (unsigned idle = 0; idle <= 6; idle += 6)
        for (int huge = 1; huge >= 0; huge--)
            printf("%s pages, after %u s idle: first write of 96 MiB %.1f ms\n", huge ? "2 MiB" : "4 KiB", idle,
                   first_touch(huge, idle));
    return 0;
}
