/* A stand-in for the HIP half of a ckspace kernel library: ckspace_run computes a real (naive)
 * grouped convolution on HOST memory, so the whole bench orchestration can be tested without a GPU.
 * It is linked with the real generated host dispatcher (ckspace_dispatch.c and its checks), so the
 * kernel table and ckspace_is_supported are the library's own.
 *
 * Per-kernel misbehaviour, chosen when the test compiles it:
 *   -DSTANDIN_WRONG=k   kernel k writes 1.5 * result + 1 (a kernel that computes wrong results)
 *   -DSTANDIN_CRASH=k   kernel k dereferences NULL (SIGSEGV)
 *   -DSTANDIN_HANG=k    kernel k never returns
 * Layouts are ckspace's: input N(D)(H)W G C, weight G K (Z)(Y)X C, output N(D)(H)W G K. */
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "ckspace_dispatch.h"

#ifndef STANDIN_WRONG
#define STANDIN_WRONG -1
#endif
#ifndef STANDIN_CRASH
#define STANDIN_CRASH -1
#endif
#ifndef STANDIN_HANG
#define STANDIN_HANG -1
#endif

static float load(const void* base, int64_t i, int64_t dtype)
{
    if(dtype == CKSPACE_DTYPE_FP32)
        return ((const float*)base)[i];
    if(dtype == CKSPACE_DTYPE_FP16)
        return (float)((const _Float16*)base)[i];
    uint32_t bits = (uint32_t)((const uint16_t*)base)[i] << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void store(void* base, int64_t i, float value, int64_t dtype)
{
    if(dtype == CKSPACE_DTYPE_FP32)
    {
        ((float*)base)[i] = value;
        return;
    }
    if(dtype == CKSPACE_DTYPE_FP16)
    {
        ((_Float16*)base)[i] = (_Float16)value;
        return;
    }
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even (finite values) */
    ((uint16_t*)base)[i] = (uint16_t)(bits >> 16);
}

typedef struct
{
    int64_t n[3], f[3], o[3], s[3], p[3], d[3];
} geometry;

static geometry geometry_of(const ckspace_conv_problem* q)
{
    geometry g;
    const int64_t n[3] = {q->Di, q->Hi, q->Wi}, f[3] = {q->Z, q->Y, q->X};
    const int64_t s[3] = {q->stride_d, q->stride_h, q->stride_w}, p[3] = {q->pad_d, q->pad_h, q->pad_w};
    const int64_t d[3] = {q->dil_d, q->dil_h, q->dil_w};
    for(int i = 0; i < 3; ++i)
    {
        const int present = i >= 3 - q->ndim;
        g.n[i] = present ? n[i] : 1;
        g.f[i] = present ? f[i] : 1;
        g.s[i] = present ? s[i] : 1;
        g.p[i] = present ? p[i] : 0;
        g.d[i] = present ? d[i] : 1;
        g.o[i] = (g.n[i] + 2 * g.p[i] - g.d[i] * (g.f[i] - 1) - 1) / g.s[i] + 1;
    }
    return g;
}

int ckspace_run(int kernel, const ckspace_conv_problem* problem, const void* a, const void* b, void* c, void* stream)
{
    (void)stream;
    const int supported = ckspace_is_supported(kernel, problem);
    if(supported < 0)
        return -supported;
    if(supported == 0)
        return CKSPACE_UNSUPPORTED;
    if(kernel == STANDIN_CRASH)
        *(volatile int*)0 = 1;
    if(kernel == STANDIN_HANG)
        for(;;)
            pause();

    const geometry g = geometry_of(problem);
    const int64_t G = problem->G, N = problem->N, Cg = problem->C / G, Kg = problem->K / G, dt = problem->dtype;
    const int64_t in_sp = g.n[0] * g.n[1] * g.n[2], out_sp = g.o[0] * g.o[1] * g.o[2], taps = g.f[0] * g.f[1] * g.f[2];
    const int64_t in_count = N * in_sp * G * Cg, out_count = N * out_sp * G * Kg, wei_count = G * Kg * taps * Cg;
    /* the tensors behind a, b, c for the variant (see ckspace_run in ckspace_dispatch.h) */
    const void *in = a, *wei = b, *out = a;
    int64_t c_count = out_count;
    if(problem->variant == CKSPACE_FORWARD)
        wei = b, in = a;
    else if(problem->variant == CKSPACE_BWD_DATA)
        out = a, wei = b, c_count = in_count;
    else
        out = a, in = b, c_count = wei_count;

    float* acc = (float*)calloc((size_t)c_count, sizeof(float));
    if(acc == NULL)
        return CKSPACE_LAUNCH_FAILED;
    for(int64_t nn = 0; nn < N; ++nn)
        for(int64_t gg = 0; gg < G; ++gg)
            for(int64_t od = 0; od < g.o[0]; ++od)
                for(int64_t oh = 0; oh < g.o[1]; ++oh)
                    for(int64_t ow = 0; ow < g.o[2]; ++ow)
                        for(int64_t z = 0; z < g.f[0]; ++z)
                            for(int64_t y = 0; y < g.f[1]; ++y)
                                for(int64_t x = 0; x < g.f[2]; ++x)
                                {
                                    const int64_t id = od * g.s[0] - g.p[0] + z * g.d[0];
                                    const int64_t ih = oh * g.s[1] - g.p[1] + y * g.d[1];
                                    const int64_t iw = ow * g.s[2] - g.p[2] + x * g.d[2];
                                    if(id < 0 || id >= g.n[0] || ih < 0 || ih >= g.n[1] || iw < 0 || iw >= g.n[2])
                                        continue;
                                    const int64_t in_pix = ((nn * g.n[0] + id) * g.n[1] + ih) * g.n[2] + iw;
                                    const int64_t out_pix = ((nn * g.o[0] + od) * g.o[1] + oh) * g.o[2] + ow;
                                    const int64_t tap = (z * g.f[1] + y) * g.f[2] + x;
                                    for(int64_t k = 0; k < Kg; ++k)
                                        for(int64_t ch = 0; ch < Cg; ++ch)
                                        {
                                            const int64_t i_in = (in_pix * G + gg) * Cg + ch;
                                            const int64_t i_out = (out_pix * G + gg) * Kg + k;
                                            const int64_t i_wei = ((gg * Kg + k) * taps + tap) * Cg + ch;
                                            if(problem->variant == CKSPACE_FORWARD)
                                                acc[i_out] += load(in, i_in, dt) * load(wei, i_wei, dt);
                                            else if(problem->variant == CKSPACE_BWD_DATA)
                                                acc[i_in] += load(out, i_out, dt) * load(wei, i_wei, dt);
                                            else
                                                acc[i_wei] += load(out, i_out, dt) * load(in, i_in, dt);
                                        }
                                }
    for(int64_t i = 0; i < c_count; ++i)
        store(c, i, kernel == STANDIN_WRONG ? 1.5f * acc[i] + 1.0f : acc[i], dt);
    free(acc);
    return CKSPACE_OK;
}
