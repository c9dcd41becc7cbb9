"""`vgpu demo`: the whole flow against the stand-ins — fake GPUs, a simulated cluster, the real daemons."""
