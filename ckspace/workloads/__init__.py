"""What kernels are asked to run and what was measured: convolution problems and their keys, the
problem columns of a CSV, each direction's implicit GEMM, measurement rows and the shipped data sets."""
