"""`ckspace hipdnn census`: which of a workload's convolutions a hipDNN plugin would serve, asked of the
plugin itself in a child process over a stand-in HIP runtime."""
