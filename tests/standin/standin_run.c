/* A stand-in for the HIP half of a ckspace kernel library: ckspace_run computes a real (naive)
 * grouped convolution on HOST memory, so the whole bench orchestration can be tested without a GPU.
 * It is linked with the real generated host dispatcher (ckspace_dispatch.c and its checks), so the
 * kernel table, ckspace_is_supported, ckspace_workspace_size and the checks ckspace_run makes
 * before a launch (cks_run_checks) are the library's own.
 *
 * As the real kernels do, it allocates nothing: each output element's reduction is summed in a
 * register; a two-stage kernel accumulates in the caller's fp32 workspace and converts at the end;
 * split-K (k_batch > 1) adds each split's partial sum into the workspace (two-stage) or into the
 * zeroed output in its own dtype (as CK's atomics do). Linked with --wrap=malloc,calloc,realloc,
 * the allocations the library makes are counted (standin_allocations) for the tests to see.
 *
 * The conversions of ckspace_strided_run (cks_launch_copy) run ckspace_layout.h's cks_copy_element,
 * the element function the library's GPU conversion kernel runs, in a loop on host memory.
 *
 * ckspace_device_supported answers for a device of the arch CKSPACE_STANDIN_DEVICE_ARCH names (by
 * default the library's own, the first of a library of several archs), through the library's own
 * ckspace_arch_matches; it is read at every call, so a test moves the "device" between archs.
 *
 * Per-kernel misbehaviour, chosen when the test compiles it:
 *   -DSTANDIN_WRONG=k   kernel k writes 1.5 * result + 1 (a kernel that computes wrong results)
 *   -DSTANDIN_CRASH=k   kernel k dereferences NULL (SIGSEGV)
 *   -DSTANDIN_HANG=k    kernel k never returns
 * Layouts are ckspace's: input N(D)(H)W G C, weight G K (Z)(Y)X C, output N(D)(H)W G K. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "ckspace_dispatch.h"
#include "ckspace_layout.h"

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
    int64_t G, N, Cg, Kg, in_sp, out_sp, taps;
} shape;

static shape shape_of(const ckspace_conv_problem* q)
{
    shape g;
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
    g.G = q->G, g.N = q->N, g.Cg = q->C / q->G, g.Kg = q->K / q->G;
    g.in_sp = g.n[0] * g.n[1] * g.n[2], g.out_sp = g.o[0] * g.o[1] * g.o[2], g.taps = g.f[0] * g.f[1] * g.f[2];
    return g;
}

static void unravel(int64_t index, const int64_t dims[3], int64_t out[3])
{
    out[2] = index % dims[2];
    out[1] = index / dims[2] % dims[1];
    out[0] = index / (dims[2] * dims[1]);
}

static int64_t ravel(const int64_t v[3], const int64_t dims[3]) { return (v[0] * dims[1] + v[1]) * dims[2] + v[2]; }

/* The input pixel a filter tap of an output pixel reads, or 0 when it falls in the padding. */
static int input_pixel(const shape* g, const int64_t o[3], const int64_t f[3], int64_t i[3])
{
    for(int d = 0; d < 3; ++d)
    {
        i[d] = o[d] * g->s[d] - g->p[d] + f[d] * g->d[d];
        if(i[d] < 0 || i[d] >= g->n[d])
            return 0;
    }
    return 1;
}

/* The output pixel whose filter tap f reads input pixel i, or 0 when there is none. */
static int output_pixel(const shape* g, const int64_t i[3], const int64_t f[3], int64_t o[3])
{
    for(int d = 0; d < 3; ++d)
    {
        const int64_t span = i[d] + g->p[d] - f[d] * g->d[d];
        if(span < 0 || span % g->s[d] != 0 || span / g->s[d] >= g->o[d])
            return 0;
        o[d] = span / g->s[d];
    }
    return 1;
}

/* Elements of c and the length of each one's reduction, per variant. */
static void extent(int64_t variant, const shape* g, int64_t* elements, int64_t* reduction)
{
    if(variant == CKSPACE_FORWARD)
        *elements = g->N * g->out_sp * g->G * g->Kg, *reduction = g->taps * g->Cg;
    else if(variant == CKSPACE_BWD_DATA)
        *elements = g->N * g->in_sp * g->G * g->Cg, *reduction = g->taps * g->Kg;
    else
        *elements = g->G * g->Kg * g->taps * g->Cg, *reduction = g->N * g->out_sp;
}

/* Term r of the reduction of c's element e, from the operands a and b (see ckspace_run in
 * ckspace_dispatch.h for which tensor each is). */
static float term(int64_t variant, const shape* g, const void* a, const void* b, int64_t dt, int64_t e, int64_t r)
{
    int64_t o[3], i[3], f[3];
    if(variant == CKSPACE_FORWARD) /* e: output (n, pixel, g, k); r: (tap, c) */
    {
        const int64_t k = e % g->Kg, gg = e / g->Kg % g->G, pixel = e / (g->Kg * g->G), tap = r / g->Cg, ch = r % g->Cg;
        const int64_t n = pixel / g->out_sp;
        unravel(pixel % g->out_sp, g->o, o);
        unravel(tap, g->f, f);
        if(!input_pixel(g, o, f, i))
            return 0.0f;
        return load(a, ((n * g->in_sp + ravel(i, g->n)) * g->G + gg) * g->Cg + ch, dt)
               * load(b, ((gg * g->Kg + k) * g->taps + tap) * g->Cg + ch, dt);
    }
    if(variant == CKSPACE_BWD_DATA) /* e: input (n, pixel, g, c); r: (tap, k) */
    {
        const int64_t ch = e % g->Cg, gg = e / g->Cg % g->G, pixel = e / (g->Cg * g->G), tap = r / g->Kg, k = r % g->Kg;
        const int64_t n = pixel / g->in_sp;
        unravel(pixel % g->in_sp, g->n, i);
        unravel(tap, g->f, f);
        if(!output_pixel(g, i, f, o))
            return 0.0f;
        return load(a, ((n * g->out_sp + ravel(o, g->o)) * g->G + gg) * g->Kg + k, dt)
               * load(b, ((gg * g->Kg + k) * g->taps + tap) * g->Cg + ch, dt);
    }
    /* bwd_weight: e: weight (g, k, tap, c); r: (n, output pixel) */
    const int64_t ch = e % g->Cg, tap = e / g->Cg % g->taps, k = e / (g->Cg * g->taps) % g->Kg;
    const int64_t gg = e / (g->Cg * g->taps * g->Kg), n = r / g->out_sp;
    unravel(r % g->out_sp, g->o, o);
    unravel(tap, g->f, f);
    if(!input_pixel(g, o, f, i))
        return 0.0f;
    return load(a, ((n * g->out_sp + ravel(o, g->o)) * g->G + gg) * g->Kg + k, dt)
           * load(b, ((n * g->in_sp + ravel(i, g->n)) * g->G + gg) * g->Cg + ch, dt);
}

int cks_run_checks(int kernel, const ckspace_conv_problem* problem, const void* workspace, size_t workspace_bytes);

static long allocations;

void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* pointer, size_t size);
void* __wrap_malloc(size_t size) { return __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED), __real_malloc(size); }
void* __wrap_calloc(size_t count, size_t size)
{
    return __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED), __real_calloc(count, size);
}
void* __wrap_realloc(void* pointer, size_t size)
{
    return __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED), __real_realloc(pointer, size);
}

/* How many allocations the library's own code has made so far. */
long standin_allocations(void) { return __atomic_load_n(&allocations, __ATOMIC_RELAXED); }

/* The stand-in's "current device" is of the arch CKSPACE_STANDIN_DEVICE_ARCH names (a gcnArchName;
   empty: no device), else of the library's own arch (the first of several) with the feature flags
   a real device reports. */
int ckspace_device_supported(char* device_arch, size_t size)
{
    char own[64];
    const char* name = getenv("CKSPACE_STANDIN_DEVICE_ARCH");
    if(name == NULL)
    {
        const char* archs = ckspace_arch(); /* a library of several archs lists them: the first */
        const int length = (int)strcspn(archs, ",");
        snprintf(own, sizeof own, "%.*s:sramecc+:xnack-", length, archs);
        name = own;
    }
    if(device_arch != NULL && size > 0)
        snprintf(device_arch, size, "%s", name);
    if(name[0] == '\0')
        return -CKSPACE_NO_DEVICE;
    return ckspace_arch_matches(name);
}

int ckspace_run(int kernel, const ckspace_conv_problem* problem, const void* a, const void* b, void* c,
                void* workspace, size_t workspace_bytes, void* stream)
{
    (void)stream;
    const int status = cks_run_checks(kernel, problem, workspace, workspace_bytes);
    if(status != CKSPACE_OK)
        return status;
    if(kernel == STANDIN_CRASH)
        *(volatile int*)0 = 1;
    if(kernel == STANDIN_HANG)
        for(;;)
            pause();

    const shape g = shape_of(problem);
    const int64_t dt = problem->dtype, splits = problem->k_batch > 1 ? problem->k_batch : 1;
    float* ws = ckspace_workspace_size(kernel, problem) > 0 ? (float*)workspace : NULL;
    int64_t elements, reduction;
    extent(problem->variant, &g, &elements, &reduction);
    for(int64_t e = 0; e < elements; ++e) /* what the kernels zero before split-K accumulates */
        if(ws != NULL)
            ws[e] = 0.0f;
        else if(splits > 1)
            store(c, e, 0.0f, dt);
    for(int64_t split = 0; split < splits; ++split)
    {
        const int64_t begin = split * reduction / splits, end = (split + 1) * reduction / splits;
        for(int64_t e = 0; e < elements; ++e)
        {
            float partial = 0.0f;
            for(int64_t r = begin; r < end; ++r)
                partial += term(problem->variant, &g, a, b, dt, e, r);
            if(ws != NULL)
                ws[e] += partial;
            else
                store(c, e, splits > 1 ? load(c, e, dt) + partial : partial, dt);
        }
    }
    for(int64_t e = 0; e < elements; ++e)
    {
        const float value = ws != NULL ? ws[e] : load(c, e, dt); /* two-stage: the conversion */
        if(ws != NULL || kernel == STANDIN_WRONG)
            store(c, e, kernel == STANDIN_WRONG ? 1.5f * value + 1.0f : value, dt);
    }
    return CKSPACE_OK;
}

__attribute__((visibility("hidden"))) int cks_launch_copy(const cks_copy* job, void* stream)
{
    (void)stream;
    for(int64_t i = 0; i < job->n; ++i)
        cks_copy_element(job, i);
    return CKSPACE_OK;
}
