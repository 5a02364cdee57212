// Read bandwidth of this machine with 1 and 2 threads: the ceiling of decode.
//
// Decoding one token reads every weight once, so a memory-bound decode can
// scale with threads no further than memory reads do. This sums a 512 MiB
// array with AVX-512 loads on 1 and on 2 threads (OpenMP), best of 5, and
// prints GB/s for each and their ratio.
//
//     gcc -O2 -mavx512f -fopenmp bench/memory_bandwidth.c -o /tmp/bw && /tmp/bw

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define BYTES ((size_t)512 << 20)

static double seconds_to_read(const float *data, size_t n, int threads) {
    double best = 1e9;
    omp_set_num_threads(threads);
    for (int round = 0; round < 5; round++) {
        double start = omp_get_wtime();
        float total = 0;
#pragma omp parallel for reduction(+ : total)
        for (size_t i = 0; i < n; i += 16) total += _mm512_reduce_add_ps(_mm512_load_ps(data + i));
        double elapsed = omp_get_wtime() - start;
        if (elapsed < best) best = elapsed;
        if (total < 0) puts("");  // keeps the sum alive
    }
    return best;
}

int main(void) {
    size_t n = BYTES / sizeof(float);
    float *data = aligned_alloc(64, BYTES);
    if (!data) return 1;
    for (size_t i = 0; i < n; i++) data[i] = 1.0f;
    double rate[3];
    for (int threads = 1; threads <= 2; threads++) {
        rate[threads] = BYTES / seconds_to_read(data, n, threads) / 1e9;
        printf("%d thread%s: %.1f GB/s\n", threads, threads > 1 ? "s" : "", rate[threads]);
    }
    printf("2 threads / 1 thread: %.2fx\n", rate[2] / rate[1]);
    free(data);
    return 0;
}
