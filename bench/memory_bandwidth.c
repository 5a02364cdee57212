// Read bandwidth of this machine with 1 and 2 threads: the ceiling of decode.
//
// Decoding one token reads every weight once, so a memory-bound decode can
// scale with threads no further than memory reads do. This sums a 512 MiB
// array with AVX-512 loads (four independent sums, so only memory limits
// it) on 1 and on 2 threads (OpenMP), best of 7, and prints GB/s for each
// and their ratio, twice: in 2 MiB pages, as Cake keeps its repacked
// weights, and in 4 KiB pages. With 4 KiB pages one core reads more slowly
// (a TLB miss and a stopped hardware prefetch at every page), so a second
// thread adds more; the first figure is the one Cake's decode runs into.
// Last, the same for arithmetic alone (AVX-512 FMAs on registers), which
// shows whether the two cores are real cores: then it doubles.
//
//     gcc -O2 -mavx512f -fopenmp bench/memory_bandwidth.c -o /tmp/bw && /tmp/bw

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>

#define BYTES ((size_t)512 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static double seconds_to_read(const float *data, size_t n, int threads) {
    double best = 1e9;
    omp_set_num_threads(threads);
    for (int round = 0; round < 7; round++) {
        double start = omp_get_wtime();
        float total = 0;
#pragma omp parallel reduction(+ : total)
        {
            size_t share = n / omp_get_num_threads();
            const float *p = data + share * omp_get_thread_num();
            __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
            for (size_t i = 0; i < share; i += 64) {
                a = _mm512_add_ps(a, _mm512_load_ps(p + i));
                b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
                c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
                d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
            }
            total += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
        }
        double elapsed = omp_get_wtime() - start;
        if (elapsed < best) best = elapsed;
        if (total < 0) puts("");  // keeps the sums alive
    }
    return best;
}

static int measure(int huge) {
    char *mapped = mmap(NULL, BYTES + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return 1;
    float *data = (float *)(((uintptr_t)mapped + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    madvise(data, BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    size_t n = BYTES / sizeof(float);
    for (size_t i = 0; i < n; i++) data[i] = 1.0f;
    double rate[3];
    for (int threads = 1; threads <= 2; threads++) rate[threads] = BYTES / seconds_to_read(data, n, threads) / 1e9;
    printf("%s pages: 1 thread %.1f GB/s, 2 threads %.1f GB/s, 2 threads / 1 thread %.2fx\n", huge ? "2 MiB" : "4 KiB",
           rate[1], rate[2], rate[2] / rate[1]);
    munmap(mapped, BYTES + HUGE_PAGE);
    return 0;
}

/// Billions of FMA lanes per second on `threads` threads: eight independent
/// chains of 512-bit FMAs per thread, on registers only.
static double fma_rate(int threads) {
    const long rounds = 50000000L;
    double start = omp_get_wtime();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        __m512 acc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
        __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-7f);
        for (long r = 0; r < rounds; r++)
            for (int i = 0; i < 8; i++) acc[i] = _mm512_fmadd_ps(acc[i], scale, shift);
        for (int i = 0; i < 8; i++) total += _mm512_reduce_add_ps(acc[i]);
    }
    double elapsed = omp_get_wtime() - start;
    if (total < 0) puts("");
    return threads * rounds * 8 * 16 / elapsed / 1e9;
}

int main(void) {
    if (measure(1) || measure(0)) return 1;
    double one = fma_rate(1), two = fma_rate(2);
    printf("FMAs on registers: 1 thread %.1f G/s, 2 threads %.1f G/s, 2 threads / 1 thread %.2fx\n", one, two, two / one);
    return 0;
}
