/* Times ckspace_select from C, as a host program calls it: no ctypes, no Python in the loop.

     selection_driver LIBRARY PROBLEMS REPEATS

   LIBRARY is a dispatcher's shared library (loaded with dlopen), PROBLEMS a file of
   ckspace_conv_problem structs back to back (bench/selection.py writes it), REPEATS the number of
   timed calls, cycling over the problems after one untimed pass. Prints the p50 and p99 of one
   call in microseconds; exits 1 if a call does not answer CKSPACE_OK. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ckspace_dispatch.h"

typedef int (*select_fn)(const ckspace_conv_problem*, int*, float*);

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* The problems of the file at path (count in *n), or NULL. */
static ckspace_conv_problem* read_problems(const char* path, long* n) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  *n = ftell(file) / (long)sizeof(ckspace_conv_problem);
  fseek(file, 0, SEEK_SET);
  ckspace_conv_problem* problems = malloc(sizeof(ckspace_conv_problem) * (size_t)(*n > 0 ? *n : 1));
  if (problems != NULL && fread(problems, sizeof *problems, (size_t)*n, file) != (size_t)*n) {
    free(problems);
    problems = NULL;
  }
  fclose(file);
  return problems;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBRARY PROBLEMS REPEATS\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  select_fn select = library != NULL ? (select_fn)dlsym(library, "ckspace_select") : NULL;
  long n = 0;
  ckspace_conv_problem* problems = read_problems(argv[2], &n);
  const long repeats = atol(argv[3]);
  double* samples = malloc(sizeof(double) * (size_t)(repeats > 0 ? repeats : 1));
  if (select == NULL || problems == NULL || n == 0 || repeats <= 0 || samples == NULL) {
    fprintf(stderr, "cannot load %s, read %s or allocate %ld samples\n", argv[1], argv[2], repeats);
    return 2;
  }
  int kernel;
  float tflops;
  for (long i = 0; i < n; ++i) {
    if (select(&problems[i], &kernel, &tflops) != CKSPACE_OK) {
      fprintf(stderr, "problem %ld: ckspace_select did not answer\n", i);
      return 1;
    }
  }
  for (long i = 0; i < repeats; ++i) {
    const double start = seconds();
    select(&problems[i % n], &kernel, &tflops);
    samples[i] = seconds() - start;
  }
  qsort(samples, (size_t)repeats, sizeof(double), by_value);
  printf("p50 %.3f p99 %.3f\n", 1e6 * samples[repeats / 2], 1e6 * samples[repeats * 99 / 100]);
  return 0;
}
