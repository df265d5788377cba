"""The machine ckspace runs on and the files it writes: atomic files, whole folders, the cache, the
compilers, the CK headers it finds and the target (arch + CK) every command answers for, progress
bars, signal holding and the CPUs it may use."""
